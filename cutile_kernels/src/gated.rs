//! The gated family: out[r, j] = act(gate[r, j]) * up[r, j] over (m, H) gate and up, f32 inside,
//! for every kernel whose op is one projection's activation times another's: silu_and_mul and
//! gelu_and_mul take gate and up as the two halves of one x = [gate | up] (`Layout::Fused`), swiglu
//! as two tensors (`Layout::Split`). A member kernel is an activation and a layout: its kernel.rs
//! names the activation (`Act`), its ffi.rs calls [`plan_fused`] / [`plan_split`] and
//! [`launch_fused`] / [`launch_split`] with it. A new activation is one `Act` variant and one branch
//! of `gated_device::act_mul`.
//!
//! Device code (`gated_device`): pure streaming. Each tile block owns one ROWS x BLOCK tile of out,
//! loads the matching gate and up tiles once and stores once. The grid is 1-D, ceil(m / ROWS) *
//! ceil(H / BLOCK) tile blocks, the column tile varying fastest so neighbouring blocks walk along a
//! row. Four entries per layout, the same computation with the tiles addressed four ways (the plan
//! picks one from the shape, the tile and the strides):
//!   * `*_exact` — the tile divides (m, H) and offsets fit i32 ([`exact_fits`]): pointer tiles, no
//!     masks, so a thread's loads are all in flight at once (silu_and_mul's NOTES.md, "Third run").
//!   * `*_masked` — any other shape whose padded tiles' offsets fit i32: the same pointer tiles, each
//!     load and store masked to the lanes inside (m, H) (a predicate per access, no branches).
//!   * `*_masked_tail` — the masked entry where at most [`MERGED_TAIL`] columns are left past the
//!     whole tiles (H = 4097): the last whole column tile takes them, so no tile block runs for them
//!     alone.
//!   * `fused` / `split` — beyond i32 offsets (2^31 elements and more): zero-padded partition views,
//!     stores outside (m, H) dropped (a padded lane computes act(0) * 0 = 0 and is never stored).
//!
//! The fused entries take one row stride (x's) for gate and up, the split ones one per tensor. Every
//! entry is generic over T (f32, f16, bf16, in and out), ROWS, BLOCK and last ACT (`Act as i32`),
//! which the launcher passes like the tile: one JIT specialization per activation, the other
//! activations' code folded away. `unchecked_accesses` (it drops the bounds checks of partition
//! accesses, which only the padded entries make): the launcher launches exactly row_tiles *
//! col_tiles blocks and the kernel decodes col_tiles from the same h, so every block's tile indices
//! are in range by construction. The pointer-tile entries have no such checks: the plan's
//! [`exact_fits`] and [`masked_fits`] (with the mask) keep every access inside the tensors.
// The exact entries do not read m: every entry of a layout shares one launch signature (the
// kernels' device modules get this allow from build.rs).
#![allow(unused_variables)]
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, Launch, RowPlan, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

#[cutile::module]
pub mod gated_device {
    use crate::device_util::views::{strided_view, tile_mask, tile_pointers};
    use cutile::core::*;

    /// act(g) * u from f32 tiles, rounded to T, where act(g) = g * sigmoid(s) with s = g for SiLU
    /// (ACT 0) and s = 2 sqrt(2/pi) (g + 0.044715 g^3) for the tanh GELU (ACT 1: 0.5 (1 + tanh(z))
    /// is sigmoid(2z)). One sigmoid for both: exp(-s) = exp2(s * -log2(e)) (the hardware's ex2) and
    /// the approximate, flush-to-zero reciprocal (MUFU.RCP, ~1 ulp) instead of the IEEE division's
    /// refinement sequence. exp2 overflows to +inf for s < ~-88 and 1/inf = 0, so act saturates to
    /// -0 instead of the NaN that exp(s) / (1 + exp(s)) gives for s > ~88; flushed subnormals are
    /// far below every output dtype's resolution.
    pub fn act_mul<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        g: Tile<f32, { [ROWS, BLOCK] }>, u: Tile<f32, { [ROWS, BLOCK] }>,
    ) -> Tile<T, { [ROWS, BLOCK] }> {
        let one: Tile<f32, { [ROWS, BLOCK] }> = constant(1.0f32, shape![ROWS, BLOCK]);
        let neg_log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(-1.4426950408889634f32, shape![ROWS, BLOCK]);
        let mut s: Tile<f32, { [ROWS, BLOCK] }> = g;
        if ACT == 1i32 {
            // 2 sqrt(2/pi) and 2 sqrt(2/pi) * 0.044715: s = g * (k + kc * g^2)
            let k: Tile<f32, { [ROWS, BLOCK] }> = constant(1.5957691216057308f32, shape![ROWS, BLOCK]);
            let kc: Tile<f32, { [ROWS, BLOCK] }> = constant(0.07135481627260025f32, shape![ROWS, BLOCK]);
            s = g * (k + kc * g * g);
        }
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(s * neg_log2e, ftz::Enabled);
        let sig: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(g * sig * u);
        y
    }

    /// (row0, col0), the first element of the tile block's ROWS x BLOCK tile in the 1-D grid of
    /// row tiles x `col_tiles` column tiles (column tile fastest), and the pointer tiles of gate, up
    /// and out there (rows `stride_*` elements apart): where the exact and masked entries load and
    /// store.
    #[allow(clippy::type_complexity)]
    fn tile_at<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, col_tiles: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) -> (
        i32,
        i32,
        PointerTile<*mut T, { [ROWS, BLOCK] }>,
        PointerTile<*mut T, { [ROWS, BLOCK] }>,
        PointerTile<*mut T, { [ROWS, BLOCK] }>,
    ) {
        let pid: i32 = get_tile_block_id().0;
        let rt: i32 = pid / col_tiles;
        let ct: i32 = pid - rt * col_tiles;
        let row0: i32 = rt * ROWS;
        let col0: i32 = ct * BLOCK;
        let (a_ptrs, b_ptrs, y_ptrs) =
            pointers::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, row0, col0, stride_a, stride_b, stride_out);
        (row0, col0, a_ptrs, b_ptrs, y_ptrs)
    }

    /// The pointer tiles of gate, up and out for the ROWS x W tile at (row0, col0), rows `stride_*`
    /// elements apart: each tile's first element, then r * stride + c.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn pointers<T: ElementType, const ROWS: i32, const W: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, row0: i32, col0: i32, stride_a: i32, stride_b: i32,
        stride_out: i32,
    ) -> (PointerTile<*mut T, { [ROWS, W] }>, PointerTile<*mut T, { [ROWS, W] }>, PointerTile<*mut T, { [ROWS, W] }>)
    {
        let a_ptrs: PointerTile<*mut T, { [ROWS, W] }> =
            tile_pointers::<T, ROWS, W>(a_ptr, row0 * stride_a + col0, stride_a);
        let b_ptrs: PointerTile<*mut T, { [ROWS, W] }> =
            tile_pointers::<T, ROWS, W>(b_ptr, row0 * stride_b + col0, stride_b);
        let y_ptrs: PointerTile<*mut T, { [ROWS, W] }> =
            tile_pointers::<T, ROWS, W>(out_ptr, row0 * stride_out + col0, stride_out);
        (a_ptrs, b_ptrs, y_ptrs)
    }

    /// The tile block's tile of out = act(gate) * up, loaded and stored without masks (the tile
    /// divides (m, h)): the exact entries' body.
    unsafe fn exact_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        let col_tiles: i32 = h / BLOCK;
        let (_row0, _col0, a_ptrs, b_ptrs, y_ptrs) =
            tile_at::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, col_tiles, stride_a, stride_b, stride_out);
        let (a_raw, _a_tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            unsafe { load_ptr_tko(a_ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>) };
        let (b_raw, _b_tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            unsafe { load_ptr_tko(b_ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>) };
        let g: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(a_raw);
        let u: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(b_raw);
        let y: Tile<T, { [ROWS, BLOCK] }> = act_mul::<T, ROWS, BLOCK, ACT>(g, u);
        let _y_tok: Token =
            unsafe { store_ptr_tko(y_ptrs, y, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>) };
    }

    /// [`exact_tile`] for any (m, h): ceil(h / BLOCK) column tiles, each load and store masked to
    /// the lanes inside (m, h): the masked entries' body.
    #[allow(clippy::too_many_arguments)]
    unsafe fn masked_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        let col_tiles: i32 = (h + BLOCK - 1) / BLOCK;
        let (row0, col0, a_ptrs, b_ptrs, y_ptrs) =
            tile_at::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, col_tiles, stride_a, stride_b, stride_out);
        let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, col0, m, h);
        masked_at::<T, ROWS, BLOCK, ACT>(a_ptrs, b_ptrs, y_ptrs, mask);
    }

    /// [`masked_tile`] over ceil(m / ROWS) * (h / BLOCK) tile blocks, the last column tile of each
    /// row tile also covering the h % BLOCK (<= TAIL) columns past the whole tiles through a ROWS x
    /// TAIL masked tile: no tile block is left with only those few columns (H = 4097 in 512-wide
    /// tiles: 1 column, in a ninth of the tile blocks). The launcher checks h >= BLOCK, h % BLOCK <=
    /// TAIL <= BLOCK and i32 offsets up to the padded tiles' last lane.
    #[allow(clippy::too_many_arguments)]
    unsafe fn masked_tail_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        let col_tiles: i32 = h / BLOCK;
        let (row0, col0, a_ptrs, b_ptrs, y_ptrs) =
            tile_at::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, col_tiles, stride_a, stride_b, stride_out);
        let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, col0, m, h);
        masked_at::<T, ROWS, BLOCK, ACT>(a_ptrs, b_ptrs, y_ptrs, mask);
        // The tail: columns [tail0, h), in the last column tile only (a branch uniform over the
        // tile block: the other tile blocks issue none of its instructions).
        let tail0: i32 = col_tiles * BLOCK;
        if col0 + BLOCK == tail0 {
            let (a_tail, b_tail, y_tail) =
                pointers::<T, ROWS, TAIL>(out_ptr, a_ptr, b_ptr, row0, tail0, stride_a, stride_b, stride_out);
            let tail_mask: Tile<bool, { [ROWS, TAIL] }> = tile_mask::<ROWS, TAIL>(row0, tail0, m, h);
            masked_at::<T, ROWS, TAIL, ACT>(a_tail, b_tail, y_tail, tail_mask);
        }
    }

    /// out = act(gate) * up over one masked ROWS x W tile of pointers (lanes outside `mask` neither
    /// read nor written).
    unsafe fn masked_at<T: ElementType, const ROWS: i32, const W: i32, const ACT: i32>(
        a_ptrs: PointerTile<*mut T, { [ROWS, W] }>, b_ptrs: PointerTile<*mut T, { [ROWS, W] }>,
        y_ptrs: PointerTile<*mut T, { [ROWS, W] }>, mask: Tile<bool, { [ROWS, W] }>,
    ) {
        let (a_raw, _a_tok): (Tile<T, { [ROWS, W] }>, Token) = unsafe {
            load_ptr_tko(a_ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<3>)
        };
        let (b_raw, _b_tok): (Tile<T, { [ROWS, W] }>, Token) = unsafe {
            load_ptr_tko(b_ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<3>)
        };
        let g: Tile<f32, { [ROWS, W] }> = convert_tile(a_raw);
        let u: Tile<f32, { [ROWS, W] }> = convert_tile(b_raw);
        let y: Tile<T, { [ROWS, W] }> = act_mul::<T, ROWS, W, ACT>(g, u);
        let _y_tok: Token = unsafe {
            store_ptr_tko(y_ptrs, y, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<3>)
        };
    }

    /// [`exact_tile`] for any (m, h) and offsets beyond i32: zero-padded partition views of gate,
    /// up and out, stores outside (m, h) dropped: the padded entries' body.
    #[allow(clippy::too_many_arguments)]
    unsafe fn padded_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (h + BLOCK - 1) / BLOCK;
        let pid: i32 = get_tile_block_id().0;
        let rt: i32 = pid / col_tiles;
        let ct: i32 = pid - rt * col_tiles;
        let tok: Token = new_token_unordered();

        let a_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(a_ptr, m, h, stride_a, tok) };
        let b_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(b_ptr, m, h, stride_b, tok) };
        let y_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(out_ptr, m, h, stride_out, tok) };

        let a_part: Partition<T, { [ROWS, BLOCK] }> = a_view.partition(tile);
        let b_part: Partition<T, { [ROWS, BLOCK] }> = b_view.partition(tile);
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        let g: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(a_part.load([rt, ct]));
        let u: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(b_part.load([rt, ct]));
        let y: Tile<T, { [ROWS, BLOCK] }> = act_mul::<T, ROWS, BLOCK, ACT>(g, u);
        y_part.store(y, [rt, ct]);
    }

    // -- Layout::Fused: gate and up are two pointers into the rows of one x (the launcher offsets
    // up by H elements), both with x's row stride.

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        padded_tile::<T, ROWS, BLOCK, ACT>(out_ptr, gate_ptr, up_ptr, m, h, stride_x, stride_x, stride_out);
    }

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused_exact<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        exact_tile::<T, ROWS, BLOCK, ACT>(out_ptr, gate_ptr, up_ptr, h, stride_x, stride_x, stride_out);
    }

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused_masked<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        masked_tile::<T, ROWS, BLOCK, ACT>(out_ptr, gate_ptr, up_ptr, m, h, stride_x, stride_x, stride_out);
    }

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused_masked_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32, const ACT: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        masked_tail_tile::<T, ROWS, BLOCK, TAIL, ACT>(out_ptr, gate_ptr, up_ptr, m, h, stride_x, stride_x, stride_out);
    }

    // -- Layout::Split: gate (a) and up (b) are tensors of their own, each with its row stride.

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn split<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        padded_tile::<T, ROWS, BLOCK, ACT>(out_ptr, a_ptr, b_ptr, m, h, stride_a, stride_b, stride_out);
    }

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn split_exact<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        exact_tile::<T, ROWS, BLOCK, ACT>(out_ptr, a_ptr, b_ptr, h, stride_a, stride_b, stride_out);
    }

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn split_masked<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        masked_tile::<T, ROWS, BLOCK, ACT>(out_ptr, a_ptr, b_ptr, m, h, stride_a, stride_b, stride_out);
    }

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn split_masked_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32, const ACT: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        masked_tail_tile::<T, ROWS, BLOCK, TAIL, ACT>(out_ptr, a_ptr, b_ptr, m, h, stride_a, stride_b, stride_out);
    }
}

use gated_device as device;

/// The activation a member kernel applies to its gate: the entries' ACT generic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// silu(g) = g * sigmoid(g) (silu_and_mul, swiglu).
    Silu = 0,
    /// The tanh form of GELU, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (gelu_and_mul).
    GeluTanh = 1,
}

/// Largest output tile (ROWS * BLOCK elements) a variant may ask for. A block holds three tiles of
/// that size (gate and up in f32, the result), so beyond it registers spill.
const MAX_TILE_ELEMS: i32 = 1 << 14;
/// Output elements per tile block of the default variant: with gate and up that is 8K loaded
/// elements, the load size rms_norm's H200 sweep found fastest (with occupancy 2-4).
const DEFAULT_TILE_ELEMS: i32 = 4096;
/// Widest default tile: wider rows are split into column tiles.
const MAX_DEFAULT_BLOCK: i32 = 4096;
/// Widest remainder h % block that the last whole column tile takes on (`Plan::merged_tail`): the
/// width of the `*_masked_tail` entries' tail tile.
pub const MERGED_TAIL: i32 = 64;

/// A validated launch: sizes as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    /// The tile, the occupancy and warps hints, and the sizes: `n` is the output width H,
    /// `stride_x` the gate's row stride (x's, fused), `stride_y` out's.
    pub row: RowPlan,
    /// The up tensor's row stride (fused: x's, as the gate's).
    pub stride_b: i32,
    /// Tile blocks: ceil(m / rows) * ceil(h / block), or ceil(m / rows) * (h / block) for
    /// `merged_tail`.
    pub grid: u32,
    /// The tile divides (m, h) and every element offset fits i32: the `*_exact` entry (unmasked
    /// pointer-tile loads and stores) runs instead of the zero-padded partition entry.
    pub exact: bool,
    /// Not exact, but every offset of the padded tiles fits i32: the `*_masked` entry (pointer
    /// tiles with a mask of the lanes inside (m, h)).
    pub masked: bool,
    /// Masked, with h > block and 0 < h % block <= MERGED_TAIL: the `*_masked_tail` entry on h /
    /// block column tiles, the last one also covering the few columns past the whole tiles.
    pub merged_tail: bool,
}

/// Whether the few columns past the whole tiles go to the last whole column tile instead of a
/// tile block of their own: h > block and 0 < h % block <= MERGED_TAIL (MERGED_TAIL <= block, the
/// narrowest tile being 256 wide).
pub fn merged_tail_fits(h: i32, block: i32) -> bool {
    h > block && (1..=MERGED_TAIL).contains(&(h % block))
}

/// Whether the `*_exact` entry may run: no partial tile, and the largest element offset the kernel
/// forms in i32 (from each pointer to its last element, rows `strides` apart; `extra` more for the
/// fused up half, which starts H elements into x's rows) fits.
pub fn exact_fits(m: i32, h: i32, rows: i32, block: i32, strides: &[i32], extra: i32) -> bool {
    let last = |s: i32| (m as i64 - 1) * s as i64 + h as i64 + extra as i64;
    m % rows == 0 && h % block == 0 && strides.iter().all(|&s| last(s) <= i32::MAX as i64)
}

/// Whether the `*_masked` entries may run: each tensor's offsets (from its own pointer, in rows
/// `strides` apart) fit i32 up to the last lane of the last padded tile.
pub fn masked_fits(m: i32, h: i32, rows: i32, block: i32, strides: &[i32]) -> bool {
    ffi_util::masked_offsets_fit(m, h, rows, block, strides)
}

/// Default tile width: the whole row (next power of two) up to 4096; wider rows get the widest
/// power-of-two column tile in [256, 4096] whose padding wastes at most 1/8 of the lanes
/// (H = 14336 -> 2048, exact; H = 4097 -> 512), since a mostly empty last tile moves few bytes.
pub fn default_block(h: i32) -> i32 {
    if let Some(block) = ffi_util::whole_row_block(h, MAX_DEFAULT_BLOCK) {
        return block;
    }
    let padded = |b: i64| (h as i64 + b - 1) / b * b;
    [4096i64, 2048, 1024, 512].into_iter().find(|&b| padded(b) * 8 <= h as i64 * 9).unwrap_or(256) as i32
}

/// ~4K output elements per tile, but no more rows than m has (rounded up to a power of two) or 64.
pub fn default_rows(block: i32, m: i32) -> i32 {
    ffi_util::default_rows(DEFAULT_TILE_ELEMS, block, m)
}

/// The plan of an (m, h) output whose gate and up are rows `stride_a` and `stride_b` apart (`extra`:
/// the up half's offset in x's rows, fused; 0 split): the tile (-1: the defaults), the occupancy and
/// warps hints, the 1-D grid of its tiles (refused beyond i32::MAX tile blocks) and the entry.
#[allow(clippy::too_many_arguments)]
fn tiled_plan(
    dtype: DType, m: i32, h: i32, knobs: [i32; 4], stride_a: i32, stride_b: i32, stride_out: i32, extra: i32,
) -> FfiResult<Plan> {
    let [block, rows, occupancy, warps] = knobs;
    let (block, rows) = ffi_util::row_tile(block, rows, default_block(h), |b| default_rows(b, m), 256, MAX_TILE_ELEMS)?;
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?;
    let row_tiles = (m as i64 + rows as i64 - 1) / rows as i64;
    let tiles = row_tiles * ((h as i64 + block as i64 - 1) / block as i64);
    if tiles > i32::MAX as i64 {
        return Err(invalid(format!(
            "{tiles} tile blocks exceed the 1-D grid limit {}; use larger tiles (block, rows)",
            i32::MAX
        )));
    }
    let row = RowPlan { block, rows, occupancy, warps, m, n: h, stride_x: stride_a, stride_y: stride_out };
    let strides = [stride_a, stride_b, stride_out];
    let exact = exact_fits(m, h, rows, block, &strides, 0) && exact_fits(m, h, rows, block, &[stride_b], extra);
    let masked = !exact && masked_fits(m, h, rows, block, &strides);
    let merged_tail = masked && merged_tail_fits(h, block);
    let grid = if merged_tail { (row_tiles * (h / block) as i64) as u32 } else { tiles as u32 };
    Ok(Plan { dtype, row, stride_b, grid, exact, masked, merged_tail })
}

/// Byte range [first, last) a (m, len) row-strided tensor touches.
fn byte_span(d: &TensorDesc, m: i32, len: i32, stride: i32, size: usize) -> (u128, u128) {
    let elems = (m as u128 - 1) * stride as u128 + len as u128;
    (d.data as u128, d.data as u128 + elems * size as u128)
}

/// The plan of `kernel` on x (m, 2H) = [gate | up] -> out (m, H): one float dtype, contiguous last
/// dims, row strides >= the row lengths, out apart from x. `knobs`: block, rows, occupancy, warps
/// (-1: the defaults). Bad input: -2/-5/-6 with a message naming `kernel` and the argument.
pub fn plan_fused(kernel: &str, out: &TensorDesc, x: &TensorDesc, knobs: [i32; 4]) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(kernel, &[(x, "x", 2), (out, "out", 2)])?;
    if x.shape[1] % 2 != 0 {
        return Err(invalid(format!("`x` last dim {} must be even: x is (m, 2H), gate then up", x.shape[1])));
    }
    let (m64, h64) = (x.shape[0], x.shape[1] / 2);
    if out.shape() != [m64, h64] {
        return Err(invalid(format!(
            "`out` shape {:?} must be [m, H] = {:?} for x of shape {:?}",
            out.shape(),
            [m64, h64],
            x.shape()
        )));
    }
    ffi_util::check_last_dims_contiguous(&[(x, "x"), (out, "out")])?;
    let m = to_i32(m64, "m")?;
    let h = to_i32(h64, "H")?;
    let two_h = to_i32(x.shape[1], "2H")?;
    let stride_x = ffi_util::row_stride(x, two_h, "x", format_args!("its row length {two_h}"))?;
    let stride_out = ffi_util::row_stride(out, h, "out", format_args!("its row length {h}"))?;
    let size = dtype.size_bytes();
    let (x_lo, x_hi) = byte_span(x, m, two_h, stride_x, size);
    let (o_lo, o_hi) = byte_span(out, m, h, stride_out, size);
    if o_lo < x_hi && x_lo < o_hi {
        return Err(invalid(format!("`out` overlaps `x`: {kernel} writes a separate (m, H) tensor")));
    }
    tiled_plan(dtype, m, h, knobs, stride_x, stride_x, stride_out, h)
}

/// Whether two (m, h) row-strided tensors of `size`-byte elements (row strides >= h, or one row)
/// have an element in common without being one tensor (one start and row stride: an in-place
/// call). Exact: rows of two tensors that interleave without touching (the column halves of one
/// buffer) do not overlap; past disjoint byte ranges, each row of y is tested against the rows of
/// x its bytes could meet.
fn overlap(x: (&TensorDesc, i32), y: (&TensorDesc, i32), m: i32, h: i32, size: usize) -> bool {
    if x.0.data == y.0.data && (x.1 == y.1 || m == 1) {
        return false;
    }
    let (m, h, size) = (m as i128, h as i128, size as i128);
    let row = |(d, stride): (&TensorDesc, i32), i: i128| d.data as i128 + i * stride as i128 * size;
    let (x_end, y_end) = (row(x, m - 1) + h * size, row(y, m - 1) + h * size);
    if x_end <= row(y, 0) || y_end <= row(x, 0) {
        return false;
    }
    let x_stride = if m == 1 { 1 } else { x.1 as i128 * size };
    if m > 1 && x.1 == y.1 {
        // One row stride s: row i of y meets row j of x iff |d + (i - j) s| < h bytes, d = y - x;
        // |d + k s| is least at the k of [-(m - 1), m - 1] nearest -d / s.
        let d = row(y, 0) - row(x, 0);
        let k = (-d).div_euclid(x_stride);
        return [k, k + 1].iter().any(|&k| (d + k.clamp(1 - m, m - 1) * x_stride).abs() < h * size);
    }
    (0..m).any(|i| {
        // rows j of x with x_j < y_i + h and y_i < x_j + h (bytes), clamped to x's rows
        let (lo, hi) = (row(y, i) - h * size + 1 - row(x, 0), row(y, i) + h * size - 1 - row(x, 0));
        let (first, last) = (lo.div_euclid(x_stride) + (lo.rem_euclid(x_stride) != 0) as i128, hi.div_euclid(x_stride));
        first.max(0) <= last.min(m - 1)
    })
}

/// The plan of `kernel` on gate a and up b, both (m, H), -> out (m, H): one float dtype,
/// contiguous last dims, each its own row stride >= H; out may be a or b itself (in place: each
/// element is read by the tile block that writes it, before it writes it) but must not overlap
/// either otherwise (a and b may alias: both are only read). `knobs` as [`plan_fused`]'s.
pub fn plan_split(kernel: &str, out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, knobs: [i32; 4]) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(kernel, &[(a, "a", 2), (b, "b", 2), (out, "out", 2)])?;
    ffi_util::check_same_shape(b, "b", a, "a")?;
    ffi_util::check_same_shape(out, "out", a, "a")?;
    ffi_util::check_last_dims_contiguous(&[(a, "a"), (b, "b"), (out, "out")])?;
    let m = to_i32(a.shape[0], "m")?;
    let h = to_i32(a.shape[1], "H")?;
    let [stride_a, stride_b, stride_out] = [(a, "a"), (b, "b"), (out, "out")]
        .map(|(d, arg)| ffi_util::row_stride(d, h, arg, format_args!("its row length {h}")));
    let (stride_a, stride_b, stride_out) = (stride_a?, stride_b?, stride_out?);
    let size = dtype.size_bytes();
    for (input, stride, arg) in [(a, stride_a, "a"), (b, stride_b, "b")] {
        if overlap((out, stride_out), (input, stride), m, h, size) {
            return Err(invalid(format!(
                "`out` overlaps `{arg}`: {kernel} writes a separate (m, H) tensor, or `{arg}` itself (in place)"
            )));
        }
    }
    tiled_plan(dtype, m, h, knobs, stride_a, stride_b, stride_out, 0)
}

/// The launch of a plan's entry for activation `act`: generics (T,) ROWS, BLOCK[, MERGED_TAIL],
/// ACT, on `p.grid` tile blocks with the plan's hints.
fn launch_of<T: Element>(p: &Plan, act: Act) -> Launch {
    let options = ffi_util::compile_options(p.row.occupancy, p.row.warps);
    let (rows, block, act) = (p.row.rows, p.row.block, act as i32);
    let generics: &[i32] = if p.merged_tail { &[rows, block, MERGED_TAIL, act] } else { &[rows, block, act] };
    Launch::new::<T>(generics, (p.grid, 1, 1), options)
}

/// Enqueue out = act(x[:, :H]) * x[:, H:] on `stream` for a plan of [`plan_fused`] on these
/// descriptors.
pub fn launch_fused<T: Element>(
    act: Act, p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sx, stride_y: so, .. } = p.row;
    // The up half starts H elements into each row of x.
    let mut up = *x;
    up.data = x.data + h as u64 * std::mem::size_of::<T>() as u64;
    let (y_ptr, g_ptr, u_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(x), ffi_util::device_ptr::<T>(&up)) };
    let launch = launch_of::<T>(p, act);
    // SAFETY: plan_fused() checked shapes, strides, dtypes and that out does not overlap x; the
    // memory is PyTorch's, alive until the caller's stream has run the kernel (stream-ordered
    // allocator). The exact and masked entries additionally rely on the plan's `exact_fits` (whole
    // tiles, i32 offsets) and `masked_fits` (i32 offsets of the padded tiles).
    unsafe {
        if p.exact {
            launch.enqueue(device::fused_exact(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        } else if p.merged_tail {
            launch.enqueue(device::fused_masked_tail(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        } else if p.masked {
            launch.enqueue(device::fused_masked(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        } else {
            launch.enqueue(device::fused(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        }
    }
}

/// Enqueue out = act(a) * b on `stream` for a plan of [`plan_split`] on these descriptors.
pub fn launch_split<T: Element>(
    act: Act, p: &Plan, out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sa, stride_y: so, .. } = p.row;
    let sb = p.stride_b;
    let (y_ptr, a_ptr, b_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(a), ffi_util::device_ptr::<T>(b)) };
    let launch = launch_of::<T>(p, act);
    // SAFETY: plan_split() checked shapes, strides, dtypes and that out overlaps neither input (or
    // is one of them: each element is read before its own tile block writes it); the memory is
    // PyTorch's, alive until the caller's stream has run the kernel. The exact and masked entries
    // additionally rely on the plan's `exact_fits` and `masked_fits`.
    unsafe {
        if p.exact {
            launch.enqueue(device::split_exact(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        } else if p.merged_tail {
            launch.enqueue(device::split_masked_tail(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        } else if p.masked {
            launch.enqueue(device::split_masked(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        } else {
            launch.enqueue(device::split(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        }
    }
}

/// A member kernel's launcher, for its ffi.rs: `gated_export!(fused, "<name>", cutile_<name>)` (or
/// `split`) defines `KERNEL`, `plan()` ([`plan_fused`] / [`plan_split`] with the knobs block, rows,
/// occupancy, warps), `launch()` ([`launch_fused`] / [`launch_split`] with kernel.rs's `ACT`) and
/// the C export (`export!`): fused `cutile_<name>(out, x, knobs..., device_id, stream)`, split
/// `cutile_<name>(out, a, b, knobs..., device_id, stream)`.
#[macro_export]
macro_rules! gated_export {
    (fused, $kernel:literal, $export:ident) => {
        use $crate::ffi_util::{Element, FfiResult, TensorDesc};
        use $crate::gated::Plan;

        const KERNEL: &str = $kernel;

        pub fn plan(
            out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32,
        ) -> FfiResult<Plan> {
            $crate::gated::plan_fused(KERNEL, out, x, [block, rows, occupancy, warps])
        }

        fn launch<T: Element>(
            p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &std::sync::Arc<cutile::cuda_core::Stream>,
        ) -> FfiResult<()> {
            $crate::gated::launch_fused::<T>(super::kernel::ACT, p, out, x, stream)
        }

        $crate::export!($export(out, x; block: i32, rows: i32, occupancy: i32, warps: i32));
    };
    (split, $kernel:literal, $export:ident) => {
        use $crate::ffi_util::{Element, FfiResult, TensorDesc};
        use $crate::gated::Plan;

        const KERNEL: &str = $kernel;

        pub fn plan(
            out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32,
        ) -> FfiResult<Plan> {
            $crate::gated::plan_split(KERNEL, out, a, b, [block, rows, occupancy, warps])
        }

        fn launch<T: Element>(
            p: &Plan, out: &TensorDesc, a: &TensorDesc, b: &TensorDesc,
            stream: &std::sync::Arc<cutile::cuda_core::Stream>,
        ) -> FfiResult<()> {
            $crate::gated::launch_split::<T>(super::kernel::ACT, p, out, a, b, stream)
        }

        $crate::export!($export(out, a, b; block: i32, rows: i32, occupancy: i32, warps: i32));
    };
}

#[cfg(test)]
mod tests {
    //! CPU tests: validation and entry choice of both layouts, and every entry lowered to Tile IR
    //! for sm_90 (stage 1 of the JIT, which needs no GPU) and assembled by tileiras when it is
    //! found, for every dtype and activation.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, DeviceModule, ALIGNED_PTR};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "gated_device" };

    const KNOBS: [i32; 4] = [-1; 4];

    fn desc_at(data: u64, dtype: DType, shape: &[i64], strides: &[i64]) -> TensorDesc {
        TensorDesc::from_parts(data, dtype, shape, strides)
    }

    /// x at 0x10000 and out far past it, so they never overlap unless a test says so.
    fn x_desc(dtype: DType, shape: &[i64], strides: &[i64]) -> TensorDesc {
        desc_at(0x10000, dtype, shape, strides)
    }

    fn out_desc(dtype: DType, shape: &[i64], strides: &[i64]) -> TensorDesc {
        desc_at(0x1_0000_0000, dtype, shape, strides)
    }

    fn fused(out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32) -> FfiResult<Plan> {
        plan_fused("k", out, x, [block, rows, -1, -1])
    }

    /// a, b and out 1 TiB apart (never overlapping unless a test says so), (m, h) in rows of `ld`.
    fn descs(dtype: DType, m: i64, h: i64, ld: [i64; 3]) -> [TensorDesc; 3] {
        [0, 1, 2].map(|i| TensorDesc::from_parts((i as u64 + 1) << 40, dtype, &[m, h], &[ld[i], 1]))
    }

    fn split(d: &[TensorDesc; 3], block: i32, rows: i32) -> FfiResult<Plan> {
        let [a, b, out] = d;
        plan_split("k", out, a, b, [block, rows, -1, -1])
    }

    #[test]
    fn fused_plan_takes_row_strides_and_default_tiles() {
        let x = x_desc(DType::BF16, &[257, 8194], &[8300, 1]);
        let y = out_desc(DType::BF16, &[257, 4097], &[4097, 1]);
        let Plan { dtype, row, stride_b, grid, exact, masked, merged_tail } = plan_fused("k", &y, &x, KNOBS).unwrap();
        // H = 4097: 512-wide column tiles, 8 rows; the 4097th column goes to the 8th column tile
        // (merged_tail), so 33 row tiles * 8 tile blocks, not 9.
        assert_eq!((dtype, grid, exact, masked, merged_tail), (DType::BF16, 33 * 8, false, true, true));
        assert_eq!((row.m, row.n, row.stride_x, stride_b, row.stride_y), (257, 4097, 8300, 8300, 4097));
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (512, 8, None, None));
        assert_eq!(fused(&y, &x, 1024, -1).unwrap().row.rows, 4);
        assert_eq!(plan_fused("k", &y, &x, [1024, 2, 4, -1]).unwrap().row.occupancy, Some(4));
    }

    #[test]
    fn a_few_columns_past_the_whole_tiles_go_to_the_last_one() {
        let bf16 =
            |m: i64, h: i64| (x_desc(DType::BF16, &[m, 2 * h], &[2 * h, 1]), out_desc(DType::BF16, &[m, h], &[h, 1]));
        let merged = |m, h, block| {
            let (x, y) = bf16(m, h);
            let p = fused(&y, &x, block, 1).unwrap();
            (p.merged_tail, p.grid)
        };
        assert_eq!(merged(3, 4097, 512), (true, 3 * 8));
        assert_eq!(merged(3, 4096 + MERGED_TAIL as i64, 512), (true, 3 * 8));
        assert_eq!(merged(3, 4096 + MERGED_TAIL as i64 + 1, 512), (false, 3 * 9)); // a tail wider than 64
        assert_eq!(merged(3, 4096, 512), (false, 3 * 8)); // exact
        assert_eq!(merged(3, 300, 512), (false, 3)); // one padded tile: nothing to merge
        assert_eq!(merged(3, 1000, 256), (false, 3 * 4)); // 232 columns past three tiles
        assert!(merged_tail_fits(257, 256) && !merged_tail_fits(256, 256) && !merged_tail_fits(64, 256));
        // The split layout merges alike.
        let p = split(&descs(DType::BF16, 257, 4097, [4100, 8200, 4104]), -1, -1).unwrap();
        assert_eq!((p.merged_tail, p.grid, p.row.block, p.row.rows), (true, 33 * 8, 512, 8));
    }

    #[test]
    fn default_tiles_cover_the_perf_widths_without_padding() {
        assert_eq!((default_block(4096), default_rows(4096, 65536)), (4096, 1));
        assert_eq!((default_block(14336), default_rows(2048, 16384)), (2048, 2));
        assert_eq!(default_block(1000), 1024);
        assert_eq!(default_block(1), 16);
        assert_eq!(default_block(4097), 512);
        assert_eq!(default_block(6144), 2048);
        assert_eq!(default_rows(16, 1000), 64);
        assert_eq!(default_rows(16, 3), 4);
    }

    #[test]
    fn single_row_needs_no_row_stride() {
        let x = x_desc(DType::F32, &[1, 2], &[0, 1]);
        let y = out_desc(DType::F32, &[1, 1], &[0, 1]);
        let p = plan_fused("k", &y, &x, KNOBS).unwrap();
        assert_eq!((p.row.stride_x, p.row.stride_y, p.row.block, p.row.rows, p.grid), (2, 1, 16, 1, 1));
        let [a, _, out] = descs(DType::F32, 1, 1, [0, 0, 0]);
        let p = plan_split("k", &out, &a, &a, KNOBS).unwrap(); // a may alias b
        assert_eq!((p.row.stride_x, p.stride_b, p.row.stride_y, p.row.block, p.grid), (1, 1, 1, 16, 1));
    }

    #[test]
    fn fused_plan_rejects_bad_input_with_invalid_argument() {
        let x = x_desc(DType::F32, &[4, 16], &[16, 1]);
        let y = out_desc(DType::F32, &[4, 8], &[8, 1]);
        let cases = [
            (x_desc(DType::F32, &[4, 15], &[15, 1]), out_desc(DType::F32, &[4, 7], &[7, 1]), 16, 1, "must be even"),
            (x, out_desc(DType::F32, &[4, 16], &[16, 1]), 16, 1, "must be [m, H]"),
            (x, out_desc(DType::F32, &[3, 8], &[8, 1]), 16, 1, "must be [m, H]"),
            (x_desc(DType::F32, &[4, 16], &[1, 4]), y, 16, 1, "contiguous"),
            (x, out_desc(DType::F32, &[4, 8], &[1, 4]), 16, 1, "contiguous"),
            (x_desc(DType::F32, &[4, 16], &[8, 1]), y, 16, 1, "overlap"),
            (x, out_desc(DType::F32, &[4, 8], &[4, 1]), 16, 1, "overlap"),
            (x, desc_at(0x10000 + 8 * 4, DType::F32, &[4, 8], &[16, 1]), 16, 1, "`out` overlaps `x`: k writes"),
            (x_desc(DType::F32, &[4], &[1]), y, 16, 1, "2 dims"),
        ];
        for (x, out, block, rows, needle) in cases {
            assert_fails(fused(&out, &x, block, rows), rc::INVALID_ARGUMENT, needle);
        }
        ffi_util::assert_row_tile_checked(MAX_TILE_ELEMS, |block, rows| fused(&y, &x, block, rows));
    }

    #[test]
    fn split_plan_rejects_bad_input_and_overlap_but_allows_in_place() {
        let ok = descs(DType::F32, 4, 8, [8, 8, 8]);
        let with = |i: usize, shape: &[i64], strides: &[i64]| {
            let mut d = ok;
            d[i] = TensorDesc::from_parts(d[i].data, DType::F32, shape, strides);
            d
        };
        let at = |i: usize, data: u64| {
            let mut d = ok;
            d[i].data = data;
            d
        };
        let cases = [
            (with(1, &[4, 9], &[9, 1]), 16, 1, "`b` shape [4, 9] != `a` shape [4, 8]"),
            (with(2, &[3, 8], &[8, 1]), 16, 1, "`out` shape [3, 8] != `a` shape [4, 8]"),
            (with(1, &[4, 8], &[1, 4]), 16, 1, "`b` must be contiguous"),
            (with(2, &[4, 8], &[1, 4]), 16, 1, "`out` must be contiguous"),
            (with(1, &[4, 8], &[4, 1]), 16, 1, "`b` row stride 4 < its row length 8"),
            (at(2, ok[0].data + 4 * 31), 16, 1, "`out` overlaps `a`: k writes"), // out starts at a's last element
            (at(2, ok[1].data - 4 * 31), 16, 1, "`out` overlaps `b`"),           // out ends at b's first element
            (with(1, &[32], &[1]), 16, 1, "`b` must have 2 dims"),
        ];
        for (d, block, rows, needle) in cases {
            assert_fails(split(&d, block, rows), rc::INVALID_ARGUMENT, needle);
        }
        // Adjacent but disjoint: out right after a's last element.
        assert!(split(&at(2, ok[0].data + 4 * 32), 16, 1).is_ok());
        // Column neighbours in one buffer (rows of 24: a, b and out each 8 of them) share no element.
        let mut halves = ok;
        for (i, d) in halves.iter_mut().enumerate() {
            *d = TensorDesc::from_parts(ok[0].data + 32 * i as u64, DType::F32, &[4, 8], &[24, 1]);
        }
        assert!(split(&halves, 16, 1).is_ok());
        halves[2].data -= 4; // out one column to the left: its first column is b's last
        assert_fails(split(&halves, 16, 1), rc::INVALID_ARGUMENT, "`out` overlaps `b`");
        // In place: out is a (or b) itself; the same start with another row stride still overlaps.
        assert!(split(&at(2, ok[0].data), 16, 1).is_ok() && split(&at(2, ok[1].data), 16, 1).is_ok());
        let mut wider = at(2, ok[0].data);
        wider[2] = TensorDesc::from_parts(wider[2].data, DType::F32, &[4, 8], &[16, 1]);
        assert_fails(split(&wider, 16, 1), rc::INVALID_ARGUMENT, "`out` overlaps `a`");
    }

    #[test]
    fn overlap_agrees_with_the_element_sets_of_small_row_strided_tensors() {
        let elements = |start: u64, m: i32, stride: i32, h: i32| -> Vec<u64> {
            (0..m as u64).flat_map(|i| (0..h as u64).map(move |c| start + (i * stride as u64 + c) * 2)).collect()
        };
        for m in 1..=4 {
            for h in 1..=4 {
                for (sx, sy) in [(h, h), (h + 1, h + 1), (2 * h + 1, 2 * h + 1), (h, h + 3), (h + 2, h)] {
                    for start in 0..(m * (sx.max(sy) + 2)) as u64 {
                        let x = TensorDesc::from_parts(0x1000, DType::F16, &[m as i64, h as i64], &[sx as i64, 1]);
                        let y = TensorDesc::from_parts(
                            0x1000 + 2 * start,
                            DType::F16,
                            &[m as i64, h as i64],
                            &[sy as i64, 1],
                        );
                        let same = start == 0 && (sx == sy || m == 1);
                        let (ex, ey) = (elements(x.data, m, sx, h), elements(y.data, m, sy, h));
                        let shared = !same && ex.iter().any(|e| ey.contains(e));
                        assert_eq!(
                            overlap((&x, sx), (&y, sy), m, h, 2),
                            shared,
                            "m={m} h={h} strides {sx}, {sy} at +{start}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn plans_reject_integer_and_mixed_dtypes_naming_the_kernel() {
        let x = x_desc(DType::I32, &[4, 16], &[16, 1]);
        let y = out_desc(DType::I32, &[4, 8], &[8, 1]);
        assert_fails(plan_fused("gelu_and_mul", &y, &x, KNOBS), rc::UNSUPPORTED_DTYPE, "gelu_and_mul supports f32");
        let x = x_desc(DType::F16, &[4, 16], &[16, 1]);
        let y = out_desc(DType::BF16, &[4, 8], &[8, 1]);
        assert_fails(plan_fused("k", &y, &x, KNOBS), rc::INVALID_ARGUMENT, "share one dtype");
        let [a, b, out] = descs(DType::I32, 4, 8, [8, 8, 8]);
        assert_fails(
            plan_split("swiglu", &out, &a, &b, KNOBS),
            rc::UNSUPPORTED_DTYPE,
            "swiglu supports f32, f16, bf16",
        );
        let mut d = descs(DType::F16, 4, 8, [8, 8, 8]);
        d[1].dtype = DType::BF16 as i32;
        assert_fails(split(&d, -1, -1), rc::INVALID_ARGUMENT, "`a` is f16 but `b` is bf16");
    }

    #[test]
    fn plans_check_the_occupancy_and_warps_hints() {
        let x = x_desc(DType::F32, &[4, 16], &[16, 1]);
        let y = out_desc(DType::F32, &[4, 8], &[8, 1]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| plan_fused("k", &y, &x, [-1, -1, occupancy, warps]));
        assert_eq!(plan_fused("k", &y, &x, [-1, -1, 8, 8]).unwrap().row.warps, Some(8));
        let [a, b, out] = descs(DType::F32, 4, 8, [8, 8, 8]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| {
            plan_split("k", &out, &a, &b, [-1, -1, occupancy, warps])
        });
    }

    #[test]
    fn plans_reject_more_tile_blocks_than_a_1d_grid_holds() {
        // m = 2^31 - 1 rows: one column tile per row is exactly the limit, two are over it.
        let big = i32::MAX as i64;
        let x = x_desc(DType::BF16, &[big, 2], &[2, 1]);
        let y = desc_at(0x100_0000_0000, DType::BF16, &[big, 1], &[1, 1]);
        assert_eq!(fused(&y, &x, 16, 1).unwrap().grid, i32::MAX as u32);
        let x = x_desc(DType::BF16, &[big, 64], &[64, 1]);
        let y = desc_at(0x100_0000_0000, DType::BF16, &[big, 32], &[32, 1]);
        assert_fails(fused(&y, &x, 16, 1), rc::INVALID_ARGUMENT, "grid limit");
        assert_eq!(split(&descs(DType::BF16, big, 1, [1, 1, 1]), 16, 1).unwrap().grid, i32::MAX as u32);
        assert_fails(split(&descs(DType::BF16, big, 32, [32, 32, 32]), 16, 1), rc::INVALID_ARGUMENT, "grid limit");
    }

    #[test]
    fn exact_entry_only_for_whole_tiles_and_i32_offsets() {
        // Fused: x's rows are 2h, and up's last element is h past the gate's.
        let fused_fits = |m, h, rows, block, sx, so| {
            exact_fits(m, h, rows, block, &[sx, so], 0) && exact_fits(m, h, rows, block, &[sx], h)
        };
        assert!(fused_fits(65536, 4096, 1, 1024, 8192, 4096));
        assert!(fused_fits(16384, 14336, 4, 2048, 28672, 14336));
        assert!(!fused_fits(257, 4097, 1, 1024, 8194, 4097)); // partial column tile
        assert!(!fused_fits(1000, 14336, 16, 1024, 28672, 14336)); // partial row tile
        assert!(!fused_fits(131072, 16384, 1, 1024, 32768, 16384)); // x spans 2^32 elements
                                                                    // x's last row ends exactly at 2^31 - 1 (fits); one element more does not.
        let sx = i32::MAX - 1024; // m = 2 rows of stride sx, h = 512: the last offset is sx + 1024
        assert!(fused_fits(2, 512, 1, 512, sx, 512) && !fused_fits(2, 512, 1, 512, sx + 1, 512));
        let x = x_desc(DType::BF16, &[64, 2048], &[2048, 1]);
        let y = out_desc(DType::BF16, &[64, 1024], &[1024, 1]);
        assert!(fused(&y, &x, 1024, 1).unwrap().exact);
        assert!(!fused(&y, &x, 2048, 1).unwrap().exact); // a 2048 tile over h = 1024
                                                         // Split: every tensor's last offset.
        assert!(exact_fits(16384, 14336, 2, 2048, &[14336; 3], 0));
        assert!(!exact_fits(4096, 4096, 1, 1024, &[4096, 1 << 20, 4096], 0));
        let p = split(&descs(DType::BF16, 4096, 4096, [4096, 1 << 20, 4096]), 1024, 1).unwrap();
        assert!(!p.exact && !p.masked); // the zero-padded entry
        let p = split(&descs(DType::BF16, 64, 1024, [1024, 2048, 1024]), 1024, 1).unwrap();
        assert!(p.exact && !p.masked);
    }

    #[test]
    fn masked_entry_for_every_other_shape_whose_padded_tiles_have_i32_offsets() {
        assert!(masked_fits(4096, 11008, 1, 1024, &[22016, 11008])); // 11 column tiles, the last partial
        assert!(masked_fits(37, 4097, 8, 512, &[8194, 4097])); // partial row and column tiles
        assert!(!masked_fits(131072, 16385, 1, 1024, &[32770, 16385])); // x spans 2^32 elements
        assert!(!masked_fits(4096, 11008, 1, 1024, &[11008, 11008, 1 << 20]));
        let x = x_desc(DType::BF16, &[37, 2000], &[2000, 1]);
        let y = out_desc(DType::BF16, &[37, 1000], &[1000, 1]);
        let p = fused(&y, &x, 1024, 4).unwrap();
        assert!(p.masked && !p.exact);
        let p = split(&descs(DType::BF16, 37, 1000, [1000; 3]), 1024, 4).unwrap();
        assert!(p.masked && !p.exact);
    }

    /// Every entry, for each dtype, a few tiles and each activation: lowered (the activation's own
    /// math in the IR: the GELU's cubic only where ACT says so) and assembled.
    #[test]
    fn every_entry_lowers_and_assembles_for_sm90() {
        let tiles = [("1", "4096"), ("2", "2048"), ("8", "512"), ("64", "16")];
        let tail = MERGED_TAIL.to_string();
        for act in [Act::Silu, Act::GeluTanh] {
            let a = (act as i32).to_string();
            for dtype in ["f32", "f16", "bf16"] {
                for (i, &(rows, block)) in tiles.iter().enumerate() {
                    let mut specs = vec![];
                    for layout in ["fused", "split"] {
                        for suffix in ["", "_exact", "_masked"] {
                            specs.push((format!("{layout}{suffix}"), vec![dtype, rows, block, &a]));
                        }
                        if i < 3 {
                            specs.push((format!("{layout}_masked_tail"), vec![dtype, rows, block, &tail, &a]));
                        }
                    }
                    for (entry, generics) in specs {
                        let ir = DEVICE.assert_lowers(&entry, &generics, &["exp2", "divf", "approx"]);
                        // The GELU's constant 2 sqrt(2/pi) * 0.044715 appears only in its specialization.
                        assert_eq!(ir.contains("0.0713548"), act == Act::GeluTanh, "{entry}<{generics:?}>:\n{ir}");
                    }
                }
            }
        }
    }

    /// The entry a plan runs.
    fn entry_of(layout: &str, p: &Plan) -> String {
        let form = match (p.exact, p.merged_tail, p.masked) {
            (true, _, _) => "_exact",
            (_, true, _) => "_masked_tail",
            (_, _, true) => "_masked",
            _ => "",
        };
        format!("{layout}{form}")
    }

    /// Every specialization a member's perf configs (m, h) JIT at run time in each tile [rows,
    /// block, occupancy, warps] (-1: the compiler's): the entry its plan picks for contiguous bf16
    /// tensors, with the launcher's divisibility hints (16-byte-aligned pointers and rows: the
    /// wide-access code the GPU runs), lowered and assembled for `act`.
    fn perf_specializations_lower(act: Act, layout: &str, configs: &[(i32, i32)], tiles: &[[i32; 4]]) {
        let fused = layout == "fused";
        for &(m, h) in configs {
            let (m64, h64) = (m as i64, h as i64);
            let desc = |i: u64, w: i64| TensorDesc::from_parts(i << 40, DType::BF16, &[m64, w], &[w, 1]);
            let (ptrs, ints) = if fused {
                let ptrs =
                    [("out_ptr", ALIGNED_PTR), ("gate_ptr", ALIGNED_PTR), ("up_ptr", ALIGNED_PTR + 2 * h as u64)];
                (ptrs, vec![("m", m), ("h", h), ("stride_x", 2 * h), ("stride_out", h)])
            } else {
                let ptrs = [("out_ptr", ALIGNED_PTR), ("a_ptr", ALIGNED_PTR << 1), ("b_ptr", ALIGNED_PTR << 2)];
                (ptrs, vec![("m", m), ("h", h), ("stride_a", h), ("stride_b", h), ("stride_out", h)])
            };
            for &[rows, block, occupancy, warps] in tiles {
                let knobs = [block, rows, occupancy, warps];
                let p = if fused {
                    plan_fused("k", &desc(2, h64), &desc(1, 2 * h64), knobs)
                } else {
                    plan_split("k", &desc(3, h64), &desc(1, h64), &desc(2, h64), knobs)
                };
                let p = p.unwrap();
                let (rows, block, act_generic) = (rows.to_string(), block.to_string(), (act as i32).to_string());
                let tail = MERGED_TAIL.to_string();
                let mut generics = vec!["bf16", &rows, &block, &act_generic];
                if p.merged_tail {
                    generics.insert(3, &tail);
                }
                let options = ffi_util::compile_options(p.row.occupancy, p.row.warps);
                let what = format!(" for {m}x{h}, occupancy {occupancy}, warps {warps}, {act:?}");
                DEVICE.assert_div_hints_lower(&entry_of(layout, &p), &generics, &ptrs, &ints, options, &what);
            }
        }
    }

    /// The members' perf configs in the tiles autotune tries most (tilekit.runtime.gated.variants).
    #[test]
    fn members_perf_config_specializations_lower_and_assemble_for_sm90() {
        use crate::{gelu_and_mul, silu_and_mul, swiglu};
        let llama = [(65536, 4096), (16384, 14336), (16384, 11008), (16384, 13824), (16384, 18944), (256, 14336)];
        let tiles = [[1, 1024, 8, -1], [2, 2048, 4, -1], [1, 2048, 8, 8]];
        perf_specializations_lower(silu_and_mul::kernel::ACT, "fused", &llama, &tiles);
        perf_specializations_lower(silu_and_mul::kernel::ACT, "fused", &[(16384, 4097)], &[[1, 2048, 2, -1]]);
        perf_specializations_lower(swiglu::kernel::ACT, "split", &llama, &tiles[..2]);
        let gemma = [(16384, 16384), (16384, 24576), (16384, 9216), (256, 9216)];
        perf_specializations_lower(gelu_and_mul::kernel::ACT, "fused", &gemma, &tiles[..2]);
    }

    /// Each member's export names it in its errors (the macro's KERNEL).
    #[test]
    fn members_name_themselves_in_their_errors() {
        let d = |i: u64, shape: &[i64]| TensorDesc::from_parts(i << 40, DType::I32, shape, &[shape[1], 1]);
        let (x, y) = (d(1, &[4, 16]), d(2, &[4, 8]));
        let rc = rc::UNSUPPORTED_DTYPE;
        assert_fails(crate::silu_and_mul::ffi::plan(&y, &x, -1, -1, -1, -1), rc, "silu_and_mul supports f32");
        assert_fails(crate::gelu_and_mul::ffi::plan(&y, &x, -1, -1, -1, -1), rc, "gelu_and_mul supports f32");
        assert_fails(crate::swiglu::ffi::plan(&y, &y, &y, -1, -1, -1, -1), rc, "swiglu supports f32");
    }
}
