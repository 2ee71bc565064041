//! C-ABI launcher of softmax: `cutile_softmax` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_softmax(const TensorDesc* out, const TensorDesc* x,
//!                          int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                          int32_t chunk, int32_t tail, int32_t programs, int32_t form,
//!                          int32_t device_id, uint64_t stream);
//!
//! x and out are (m, n) with the same shape and dtype (f32, f16 or bf16), contiguous last dim, any
//! row stride >= n. `block` is the tile width (a power of two; n <= block selects the one-load
//! kernel, else the online two-pass one) and `rows` the rows per tile block; `occupancy` the CTAs
//! per SM tileiras should plan registers for (1..=32) and `warps` the worker warps per CTA (4 or 8,
//! what Tile IR 13.4 accepts). -1 for any of them picks the default (the compiler's, for the two
//! hints). `chunk` > 0 splits each row into chunks of `chunk` columns (a multiple of block), one
//! tile block per (row tile, chunk), in two kernels that meet in a stream-ordered f32 workspace
//! (see `SplitPlan`; where `split_fits` does not hold the looped form runs instead); chunk == block
//! (one tile per chunk) runs the single-pass form instead, `softmax_split_exchange`, where the split
//! fits (`split_fits`), its masked tiles' offsets fit i32 and the GPU has at least as many SMs as a
//! row has chunks; 0 keeps a row in one tile block; -1 splits only under the default tile (block
//! and rows -1) where `default_split` says so. `tail` > 0 (a power of two in [16, block], with
//! block < n <= block + tail, and no chunk) holds each row whole as a block-wide body and a
//! tail-wide tail tile (`softmax_row_tail`), where their masked tiles' i32 offsets fit (else the
//! looped form runs); -1 or 0: no tail. `programs` > 0 (with a tail that runs) launches the tail
//! entry's persistent form, `softmax_row_tail_persistent`, on min(programs, row tiles) tile blocks
//! (the caller sizes it from the SM count); with no tail it is refused (-6); -1 or 0: one tile
//! block per row tile. `form` 1 asks for another form of what the other knobs select: with a
//! chunk of four tiles (chunk == 4 * block) the single pass holding its chunk in T as four
//! sub-tiles (`softmax_split_exchange_held`, where `held_fits`; where it does not, or a row has
//! more chunks than the GPU has SMs, the two kernels; where `split_fits` does not, the looped
//! form); with a persistent tail the loop that loads the next row tile before this one's
//! reductions (`softmax_row_tail_prefetch`; the looped form where the tail does not fit). `form`
//! 2 with a chunk (any multiple of block) runs the single pass that reads its chunk twice
//! (`softmax_split_exchange_reread`, where `reread_fits`; else the two kernels, or the looped form
//! where `split_fits` does not hold). Any other form is refused (-6); -1 or 0: none. A row held
//! whole in one tile (no split and no tail in the plan, not exactly one tile) whose start or end
//! is off a 16-byte boundary (n = 4097, odd row strides) runs `softmax_row_aligned` where
//! `ffi_util::aligned_rows_vec` allows it (16-byte-aligned bases, the same head per row in x and
//! out; its body fits `block`, so n = 4097 fits 4096). Rows are at most MAX_N columns (the kernels
//! count column tiles in i32). Every descriptor is validated before anything touches the GPU: bad
//! input returns -2/-5/-6 with a message, never a launch.
use super::kernel::softmax_device as device;
use crate::ffi_util::{
    self, check_same_shape, rc, to_i32, DType, Element, FfiResult, Launch, RowPlan, StreamAlloc, TensorDesc,
};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "softmax";
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: beyond it registers spill.
const MAX_TILE_ELEMS: i32 = 1 << 16;
/// Widest row the default keeps whole in one tile (16K f32 = 64 KiB of registers per tile block).
const MAX_DEFAULT_ROW_BLOCK: i32 = 16384;
/// Column tile of the default looped form, for rows wider than MAX_DEFAULT_ROW_BLOCK.
const DEFAULT_LOOPED_BLOCK: i32 = 4096;
/// The default splits rows wider than MAX_DEFAULT_ROW_BLOCK when m is at most this: a few thousand
/// row tiles do not fill an H200 with enough loads in flight (the looped form ran at 1.3-1.8 TB/s
/// on 256-4096 vocabulary rows). In the H200 sweeps (NOTES.md, "Issue 13 on the H200") every split
/// variant beat every looped one at each m swept, 256 to 8192: bf16 4096 x 128256 0.73-1.85 ms
/// against 1.48-3.79, f32 8192 x 32000 0.57-0.95 against 1.12-2.22. Larger m was not swept: the
/// bound is the largest m measured.
const DEFAULT_SPLIT_MAX_M: i32 = 8192;
/// The default split's tile and chunk: 1 x 8192 one-tile chunks (the single pass; 32 KiB of f32 per
/// tile block), the fastest one-tile split on every vocabulary shape of the H200 sweeps. The tuned
/// candidates do better with occupancy hints and other forms (bf16: form 2, two 4096-wide tiles a
/// chunk read twice; f32: form 1, NOTES.md), which the default (no hints, form 0) does not ask for.
const DEFAULT_SPLIT_BLOCK: i32 = 8192;
const DEFAULT_SPLIT_CHUNK: i32 = 8192;
/// Tiles of a chunk `softmax_split_exchange_held` holds (its four sub-tiles; the variant's form 1).
const HELD_TILES: i32 = 4;
/// Most chunks per row: kernel B loads a row's partials as one [rows, PARTS] tile.
const MAX_SPLIT_PARTS: i32 = 1024;
/// Widest row: the looped and split kernels count column tiles as (n + BLOCK - 1) / BLOCK in i32,
/// which wraps past this for the widest tile a variant may ask for (BLOCK <= MAX_TILE_ELEMS).
pub const MAX_N: i32 = i32::MAX - (MAX_TILE_ELEMS - 1);

/// A validated launch: sizes as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    /// The tile, the occupancy and warps hints, the sizes and strides.
    pub row: RowPlan,
    /// n == block, whole row tiles and i32 offsets: `softmax_row_exact` (unmasked) runs.
    pub exact: bool,
    /// n <= block but not exact, and i32 offsets of the padded tile: `softmax_row_masked` runs.
    pub masked: bool,
    /// Some: rows split into chunks (`softmax_split_partials`, then `softmax_split_scale`).
    pub split: Option<SplitPlan>,
    /// Some(tail): each row held as a `block`-wide body and a `tail`-wide tail (`softmax_row_tail`,
    /// or with `programs` `softmax_row_tail_persistent`).
    pub tail: Option<i32>,
    /// Some(grid): the tail entry's persistent form on `grid` tile blocks (at most the row tiles).
    pub programs: Option<i32>,
    /// The persistent tail loads the next row tile ahead (`softmax_row_tail_prefetch`; `form` 1).
    pub prefetch: bool,
    /// Some(VEC): rows not on 16-byte boundaries held in an aligned body and an edge tile
    /// (`softmax_row_aligned`, `ffi_util::aligned_rows_vec`), instead of the masked or looped entry.
    pub aligned: Option<i32>,
}

/// Whether `softmax_row_masked` may run: the row fits one tile that does not divide (m, n)
/// exactly, and every element offset of the padded tiles fits i32.
pub fn masked_fits(m: i32, n: i32, rows: i32, block: i32, stride_x: i32, stride_y: i32) -> bool {
    n <= block
        && !exact_fits(m, n, rows, block, stride_x, stride_y)
        && ffi_util::masked_offsets_fit(m, n, rows, block, &[stride_x, stride_y])
}

/// A split launch: grid ceil(m / rows) x `chunks`; chunk c covers column tiles
/// [c * chunk_tiles, (c + 1) * chunk_tiles); the workspace holds m x chunks maxima, then as many sums.
#[derive(Debug, PartialEq)]
pub struct SplitPlan {
    pub chunk_tiles: i32,
    pub chunks: i32,
    /// The power of two >= chunks: kernel B's partials tile width.
    pub parts: i32,
    /// Some: the single-pass entry that runs where the GPU has at least `chunks` SMs (launch_split
    /// checks; else the two kernels). None: the two kernels.
    pub single: Option<SinglePass>,
}

/// The single-pass split entries: tile blocks of one launch that exchange their chunks' partials.
#[derive(Debug, PartialEq, Clone, Copy)]
pub enum SinglePass {
    /// One tile per chunk held in registers (`softmax_split_exchange`; `exchange_fits`).
    OneTile,
    /// A chunk of four tiles held in T (`softmax_split_exchange_held`; `form` 1, `held_fits`).
    Held,
    /// A chunk of any number of tiles, read twice (`softmax_split_exchange_reread`; `form` 2,
    /// `reread_fits`).
    Reread,
}

impl SplitPlan {
    /// f32 workspace elements: a max and a sum per (row, chunk), rows padded to whole row tiles of
    /// `rows` (the single-pass kernel stores its padded rows' partials too).
    pub fn workspace_elems(&self, m: i32, rows: i32) -> usize {
        2 * ((m as usize).div_ceil(rows as usize) * rows as usize) * self.chunks as usize
    }
}

/// Whether the single-pass split kernel may run: chunks of one tile (chunk == block), and every
/// i32 offset of its masked tiles (the row's padded last tile included) fits, for x and for out.
pub fn exchange_fits(m: i32, n: i32, rows: i32, block: i32, chunk: i32, stride_x: i32, stride_y: i32) -> bool {
    chunk == block && ffi_util::masked_offsets_fit(m, n, rows, block, &[stride_x, stride_y])
}

/// Whether the single pass holding its chunk in T may run: chunks of four tiles (chunk == 4 *
/// block) whose rows x chunk elements a tile block holds are at most MAX_TILE_ELEMS, and every i32
/// offset of its masked sub-tiles (the row's padded last chunk included) fits, for x and for out.
pub fn held_fits(m: i32, n: i32, rows: i32, block: i32, chunk: i32, stride_x: i32, stride_y: i32) -> bool {
    chunk == HELD_TILES * block
        && rows as i64 * chunk as i64 <= MAX_TILE_ELEMS as i64
        && ffi_util::masked_offsets_fit(m, n, rows, chunk, &[stride_x, stride_y])
}

/// Whether the single pass that reads its chunk twice may run: the split's whole row tiles
/// (`split_fits`) and every i32 offset of its masked tiles (the row's padded last tile) fits.
pub fn reread_fits(m: i32, n: i32, rows: i32, block: i32, stride_x: i32, stride_y: i32) -> bool {
    split_fits(m, n, rows, stride_x, stride_y) && ffi_util::masked_offsets_fit(m, n, rows, block, &[stride_x, stride_y])
}

/// Whether the split entries may run with `rows`-row tiles: m % rows == 0 (whole row tiles, loaded
/// unmasked) and every element offset fits i32.
pub fn split_fits(m: i32, n: i32, rows: i32, stride_x: i32, stride_y: i32) -> bool {
    let (m, n) = (m as i64, n as i64);
    m % rows as i64 == 0
        && (m - 1) * stride_x as i64 + n <= i32::MAX as i64
        && (m - 1) * stride_y as i64 + n <= i32::MAX as i64
}

/// Whether the default (chunk, block and rows all -1) splits the rows: wider than one whole-row
/// tile, m small enough that one tile block per row leaves the GPU short of loads in flight, and a
/// split the default tile (1 x DEFAULT_SPLIT_BLOCK) can serve: `split_fits`, and at most
/// MAX_SPLIT_PARTS chunks of DEFAULT_SPLIT_CHUNK columns. Otherwise the default runs looped.
pub fn default_split(m: i32, n: i32, stride_x: i32, stride_y: i32) -> bool {
    n > MAX_DEFAULT_ROW_BLOCK
        && m <= DEFAULT_SPLIT_MAX_M
        && split_fits(m, n, 1, stride_x, stride_y)
        && split_plan(n, DEFAULT_SPLIT_BLOCK, 1, DEFAULT_SPLIT_CHUNK).is_ok()
}

/// The chunking of n columns into `chunk`-column chunks of `block`-wide tiles (counted in i64: no
/// wrap for any n), or -6 naming the limit: chunk a multiple of block, and kernel B's partials tile
/// [rows, parts] (parts the power of two >= chunks) within parts <= MAX_SPLIT_PARTS and rows * parts
/// <= MAX_TILE_ELEMS.
pub fn split_plan(n: i32, block: i32, rows: i32, chunk: i32) -> FfiResult<SplitPlan> {
    let bad = |why: String| Err(ffi_util::invalid(format!("variant block={block} rows={rows} chunk={chunk}: {why}")));
    if chunk % block != 0 {
        return bad("chunk must be a multiple of block".into());
    }
    let chunk_tiles = chunk / block;
    let col_tiles = (n as i64 + block as i64 - 1) / block as i64;
    let chunks = (col_tiles + chunk_tiles as i64 - 1) / chunk_tiles as i64;
    let parts = (chunks as u64).next_power_of_two() as i64;
    let max_parts = MAX_SPLIT_PARTS.min(MAX_TILE_ELEMS / rows) as i64;
    if parts > max_parts {
        let min_chunk = (col_tiles + max_parts - 1) / max_parts * block as i64;
        return bad(format!(
            "n={n} makes {chunks} chunks per row, {parts} parts (the power of two >= chunks); parts must be \
             <= {MAX_SPLIT_PARTS} and rows*parts <= {MAX_TILE_ELEMS}: use chunk >= {min_chunk} for this n"
        ));
    }
    Ok(SplitPlan { chunk_tiles, chunks: chunks as i32, parts: parts as i32, single: None })
}

/// Whether `softmax_row_exact` may run: the row is exactly one tile wide, m is a multiple of
/// rows, and the largest element offset the kernel forms in i32 fits.
pub fn exact_fits(m: i32, n: i32, rows: i32, block: i32, stride_x: i32, stride_y: i32) -> bool {
    let (m, n) = (m as i64, n as i64);
    n == block as i64
        && m % rows as i64 == 0
        && (m - 1) * stride_x as i64 + n <= i32::MAX as i64
        && (m - 1) * stride_y as i64 + n <= i32::MAX as i64
}

/// Default tile width: the whole row (one read of x, one exp per element) up to 16K columns, else
/// 4096-wide column tiles. rms_norm's H200 sweep found ~8K-element tiles fastest; a softmax row
/// held whole saves the second read and two exps per element that the looped form costs, so the
/// whole-row limit is one step wider than rms_norm's.
pub fn default_block(n: i32) -> i32 {
    ffi_util::whole_row_block(n, MAX_DEFAULT_ROW_BLOCK).unwrap_or(DEFAULT_LOOPED_BLOCK)
}

/// ~8K elements per tile, but no more rows than m has (rounded up to a power of two) or 64.
/// (One row per tile block was 3-10x slower for short rows in rms_norm's H200 sweep.)
pub fn default_rows(block: i32, m: i32) -> i32 {
    ffi_util::default_rows(8192, block, m)
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32, chunk: i32, tail: i32,
    programs: i32, form: i32,
) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(x, "x", 2), (out, "out", 2)])?;
    check_same_shape(x, "x", out, "out")?;
    ffi_util::check_last_dims_contiguous(&[(x, "x"), (out, "out")])?;
    let m = to_i32(x.shape[0], "m")?;
    let n = to_i32(x.shape[1], "n")?;
    if n > MAX_N {
        return Err(ffi_util::invalid(format!(
            "n={n}: softmax rows may have at most {MAX_N} columns (the kernels count column tiles in i32)"
        )));
    }
    let (stride_x, stride_y) = (
        ffi_util::row_stride(x, n, "x", format_args!("n={n}"))?,
        ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?,
    );
    let default_tile = block == rc::COMPILER_DEFAULT && rows == rc::COMPILER_DEFAULT;
    let chunk = match chunk {
        rc::COMPILER_DEFAULT if default_tile && default_split(m, n, stride_x, stride_y) => DEFAULT_SPLIT_CHUNK,
        rc::COMPILER_DEFAULT => 0,
        c if c >= 0 => c,
        c => return Err(ffi_util::invalid(format!("variant chunk={c}: use -1, 0 or a multiple of block"))),
    };
    let (block, rows) = if chunk > 0 {
        // The default tile of an explicit chunk: the widest power of two up to DEFAULT_SPLIT_BLOCK
        // that divides it (chunk = 4096: one 4096-wide tile, the single pass).
        let split_block = (chunk & chunk.wrapping_neg()).clamp(16, DEFAULT_SPLIT_BLOCK);
        ffi_util::row_tile(block, rows, split_block, |_| 1, 64, MAX_TILE_ELEMS)?
    } else {
        ffi_util::row_tile(block, rows, default_block(n), |b| default_rows(b, m), 64, MAX_TILE_ELEMS)?
    };
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?;
    let tail = ffi_util::tail_tile(tail, block, rows, n, MAX_TILE_ELEMS)?;
    if tail.is_some() && chunk > 0 {
        return Err(ffi_util::invalid(format!(
            "variant chunk={chunk} tail={}: a row is split into chunks or held in a body and a tail tile; pick one",
            tail.unwrap_or(0)
        )));
    }
    // The tail entry's masked tiles need i32 offsets up to the tail's last lane; else looped.
    // round_up(n, tail) in masked_offsets_fit is block + tail there: tail divides block and
    // block < n <= block + tail.
    let tail_asked = tail.is_some();
    let tail = tail.filter(|&t| ffi_util::masked_offsets_fit(m, n, rows, t, &[stride_x, stride_y]));
    // A chunk (a multiple of block) whose split the unmasked loads cannot serve (m % rows != 0,
    // offsets past i32) runs looped, checked before the chunk count, so every candidate of
    // op.variants stays valid for every m and row stride. Otherwise `split_plan` chunks the rows or
    // refuses with -6 naming the limit: chunk not a multiple of block, or more chunks per row than
    // kernel B's partials tile holds.
    let split = match chunk {
        0 => None,
        c if c % block == 0 && !split_fits(m, n, rows, stride_x, stride_y) => None,
        c => {
            let single = if form == 1 && held_fits(m, n, rows, block, c, stride_x, stride_y) {
                Some(SinglePass::Held)
            } else if form == 2 && reread_fits(m, n, rows, block, stride_x, stride_y) {
                Some(SinglePass::Reread)
            } else if form != 2 && exchange_fits(m, n, rows, block, c, stride_x, stride_y) {
                Some(SinglePass::OneTile)
            } else {
                None
            };
            Some(SplitPlan { single, ..split_plan(n, block, rows, c)? })
        }
    };
    let exact = split.is_none() && exact_fits(m, n, rows, block, stride_x, stride_y);
    let masked = split.is_none() && masked_fits(m, n, rows, block, stride_x, stride_y);
    let whole_row = split.is_none() && tail.is_none() && !exact;
    let aligned = whole_row
        .then(|| ffi_util::aligned_rows_vec(dtype, m, n, rows, block, &[(x.data, stride_x), (out.data, stride_y)]))
        .flatten();
    let row = RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y };
    let programs_asked = programs > 0;
    let programs = match programs {
        rc::COMPILER_DEFAULT | 0 => None,
        g if g > 0 && tail.is_some() => Some(g.min(row.row_tiles())),
        // a tail variant whose masked tiles' offsets do not fit i32 runs looped, one tile block per row tile
        g if g > 0 && tail_asked => None,
        g => {
            return Err(ffi_util::invalid(format!(
                "variant programs={g}: the persistent grid is the tail entry's (needs a tail > 0); -1 or 0 for one \
                 tile block per row tile"
            )))
        }
    };
    let prefetch = match form {
        rc::COMPILER_DEFAULT | 0 => false,
        // the held single pass (SinglePass::Held above; the two kernels where it does not fit)
        1 if chunk > 0 && chunk == HELD_TILES * block => false,
        // the persistent tail's prefetching loop (looped where the tail's offsets do not fit i32)
        1 if tail_asked && programs_asked => programs.is_some(),
        // the single pass reading its chunk twice (SinglePass::Reread above; else the two kernels)
        2 if chunk > 0 => false,
        f => {
            return Err(ffi_util::invalid(format!(
                "variant form={f}: form 1 is the single pass holding a chunk of {HELD_TILES} tiles in T (chunk = \
                 {HELD_TILES} x block; here chunk={chunk} block={block}) or the persistent tail's prefetching loop \
                 (tail > 0 and programs > 0); form 2 the single pass reading its chunk twice (chunk > 0); -1 or 0 \
                 for none"
            )))
        }
    };
    Ok(Plan { dtype, row, exact, masked, split, tail, programs, prefetch, aligned })
}

fn launch<T: Element>(p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    let (y_ptr, x_ptr) = unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(x)) };
    if let Some(s) = &p.split {
        return launch_split::<T>(p, s, y_ptr, x_ptr, stream);
    }
    let mut launch = p.row.launch::<T>(p.programs.unwrap_or(p.row.row_tiles()) as u32);
    // The tail entry's TAIL after T, ROWS, BLOCK; the aligned entry's VEC and EDGE.
    launch.generics.extend(p.tail.map(|t| t.to_string()));
    launch.generics.extend(ffi_util::aligned_generics(p.aligned));
    let RowPlan { m, n, stride_x: sx, stride_y: sy, .. } = p.row;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    // softmax_row_exact, softmax_row_masked, softmax_row_tail (and its persistent forms, whose grid
    // plan() capped at the row tiles; the prefetching one addresses a prefetch past the last row
    // tile at the last row tile, its mask empty) and softmax_row_aligned additionally rely on plan()'s
    // `exact_fits`, `masked_fits`, tail filter and `aligned_rows_vec` (i32 offsets; for the last also
    // 16-byte-aligned bases).
    unsafe {
        if p.tail.is_some() && p.prefetch {
            launch.enqueue(device::softmax_row_tail_prefetch(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else if p.tail.is_some() && p.programs.is_some() {
            launch.enqueue(device::softmax_row_tail_persistent(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else if p.tail.is_some() {
            launch.enqueue(device::softmax_row_tail(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else if p.aligned.is_some() {
            launch.enqueue(device::softmax_row_aligned(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else if p.exact {
            launch.enqueue(device::softmax_row_exact(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else if p.masked {
            launch.enqueue(device::softmax_row_masked(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else if n <= p.row.block {
            launch.enqueue(device::softmax_row(y_ptr, x_ptr, m, n, sx, sy), stream)
        } else {
            launch.enqueue(device::softmax_looped(y_ptr, x_ptr, m, n, sx, sy), stream)
        }
    }
}

/// The split form: kernel A writes each chunk's (max, sum) to a workspace allocated on the caller's
/// stream, kernel B combines them and scales its chunk; the workspace is freed in stream order
/// after B, and on every other way out (StreamAlloc), when nothing then reads it.
fn launch_split<T: Element>(
    p: &Plan, s: &SplitPlan, y_ptr: DevicePointer<T>, x_ptr: DevicePointer<T>, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x: sx, stride_y: sy, rows, block, .. } = p.row;
    if s.single.is_some() && s.chunks as u32 <= ffi_util::sm_count(stream)? {
        return launch_exchange::<T>(p, s, y_ptr, x_ptr, stream);
    }
    let bytes = s.workspace_elems(m, rows) * std::mem::size_of::<f32>();
    let ws = StreamAlloc::new(bytes, stream, "split workspace")?;
    // SAFETY: both halves of the allocation just made, m x chunks f32 each.
    let (part_max, part_sum) = unsafe {
        (
            DevicePointer::<f32>::from_cu_deviceptr(ws.ptr),
            DevicePointer::<f32>::from_cu_deviceptr(ws.ptr + (bytes / 2) as u64),
        )
    };
    let grid = (p.row.row_tiles() as u32, s.chunks as u32, 1);
    let options = || ffi_util::compile_options(p.row.occupancy, p.row.warps);
    let (ct, chunks) = (s.chunk_tiles, s.chunks);
    // SAFETY: plan() checked the descriptors and `split_fits` (whole row tiles, i32 offsets); the
    // workspace holds m x chunks f32 per array and outlives both kernels (freed in stream order).
    unsafe {
        Launch::new::<T>(&[rows, block], grid, options())
            .enqueue(device::softmax_split_partials(part_max, part_sum, x_ptr, m, n, sx, ct, chunks), stream)?;
        Launch::new::<T>(&[rows, block, s.parts], grid, options())
            .enqueue(device::softmax_split_scale(y_ptr, x_ptr, part_max, part_sum, m, n, sx, sy, ct, chunks), stream)?;
    }
    ws.free()
}

/// The single-pass split form: one workspace on the caller's stream holds the row tiles' arrival
/// counters (cleared on the stream first: the kernel counts from zero) and the padded partials
/// (`ffi_util::exchange_workspace`).
fn launch_exchange<T: Element>(
    p: &Plan, s: &SplitPlan, y_ptr: DevicePointer<T>, x_ptr: DevicePointer<T>, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x: sx, stride_y: sy, rows, block, .. } = p.row;
    let row_tiles = p.row.row_tiles();
    let (arrived, [part_max, part_sum], ws) = ffi_util::exchange_workspace::<2>(row_tiles, rows, s.chunks, stream)?;
    let grid = ((row_tiles * s.chunks) as u32, 1, 1);
    let options = ffi_util::compile_options(p.row.occupancy, p.row.warps);
    // SAFETY: plan() checked the descriptors and `exchange_fits` (one tile per chunk, i32 offsets of
    // the masked tiles), for the held entry `held_fits` (four tiles per chunk, offsets up to
    // round_up(n, chunk), rows x chunk within MAX_TILE_ELEMS), for the re-reading one `reread_fits`
    // (whole row tiles, i32 offsets of the masked tiles); the counters are zero and the partials
    // hold every (padded row, chunk); the grid has row_tiles * chunks tile blocks with chunks <= the
    // SM count (see the entries' progress argument); the workspace outlives the kernel (freed in
    // stream order).
    let launch = Launch::new::<T>(&[rows, block, s.parts], grid, options);
    let (ct, chunks) = (s.chunk_tiles, s.chunks);
    unsafe {
        match s.single {
            Some(SinglePass::Held) => launch.enqueue(
                device::softmax_split_exchange_held(y_ptr, x_ptr, part_max, part_sum, arrived, m, n, sx, sy, chunks),
                stream,
            )?,
            Some(SinglePass::Reread) => launch.enqueue(
                device::softmax_split_exchange_reread(
                    y_ptr, x_ptr, part_max, part_sum, arrived, m, n, sx, sy, ct, chunks,
                ),
                stream,
            )?,
            _ => launch.enqueue(
                device::softmax_split_exchange(y_ptr, x_ptr, part_max, part_sum, arrived, m, n, sx, sy, chunks),
                stream,
            )?,
        }
    }
    ws.free()
}

// `cutile_softmax`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_softmax(out, x; block: i32, rows: i32, occupancy: i32, warps: i32, chunk: i32, tail: i32, programs: i32, form: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and every entry lowered to Tile IR for sm_90 (stage 1 of the JIT,
    //! which needs no GPU) and assembled by tileiras where the toolchain is present, for every
    //! dtype — a DSL mistake fails here, not on the GPU.
    use super::*;
    use crate::ffi_util::{assert_fails, div_hints, rc, test_desc as desc2, DeviceModule, ALIGNED_PTR};
    use cutile::tile_kernel::CompileOptions;

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "softmax_device" };

    #[test]
    fn defaults_hold_rows_whole_up_to_16k_and_fill_tiles_to_8k_elements() {
        assert_eq!((default_block(1), default_block(1000), default_block(8192)), (16, 1024, 8192));
        assert_eq!((default_block(16384), default_block(16385), default_block(32768)), (16384, 4096, 4096));
        assert_eq!((default_rows(1024, 65536), default_rows(4096, 65536), default_rows(8192, 65536)), (8, 2, 1));
        assert_eq!((default_rows(16, 1000), default_rows(16, 3), default_rows(16384, 5)), (64, 4, 1));
    }

    #[test]
    fn plan_takes_row_strides_and_defaults() {
        let x = desc2(DType::F16, &[257, 4097], &[5000, 1]);
        let y = desc2(DType::F16, &[257, 4097], &[4097, 1]);
        let Plan { dtype, row, exact, masked, split, tail, programs, prefetch, aligned } =
            plan(&y, &x, -1, -1, -1, -1, -1, -1, -1, 0).unwrap();
        assert_eq!((programs, prefetch), (None, false));
        assert_eq!((dtype, exact, masked, split, tail), (DType::F16, false, true, None, None));
        assert_eq!(aligned, None); // x's rows start 16-byte aligned, y's not: different heads
        assert_eq!((row.m, row.n, row.stride_x, row.stride_y), (257, 4097, 5000, 4097));
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (8192, 1, None, None));
        assert_eq!(plan(&y, &x, 1024, -1, -1, -1, -1, -1, -1, 0).unwrap().row.rows, 8);
        assert_eq!(plan(&y, &x, 16384, 2, 4, -1, -1, -1, -1, 0).unwrap().row.occupancy, Some(4));
    }

    #[test]
    fn single_row_ignores_its_stride() {
        let x = desc2(DType::F32, &[1, 1000], &[0, 1]);
        assert_eq!(plan(&x, &x, -1, -1, -1, -1, -1, -1, -1, 0).unwrap().row.stride_x, 1000);
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        let cases = [
            (desc2(DType::F32, &[4, 9], &[9, 1]), x, 16, 1, "shape"),
            (desc2(DType::F32, &[4, 8], &[1, 4]), x, 16, 1, "contiguous"),
            (x, desc2(DType::F32, &[4, 8], &[4, 1]), 16, 1, "overlap"),
            (x, desc2(DType::F32, &[32], &[1]), 16, 1, "must have 2 dims"),
            (x, desc2(DType::F32, &[0, 8], &[8, 1]), 16, 1, "empty"),
            (x, desc2(DType::F16, &[4, 8], &[8, 1]), -1, -1, "share one dtype"),
        ];
        for (out, x, block, rows, needle) in cases {
            assert_fails(plan(&out, &x, block, rows, -1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, needle);
        }
        ffi_util::assert_row_tile_checked(MAX_TILE_ELEMS, |block, rows| {
            plan(&x, &x, block, rows, -1, -1, -1, -1, -1, 0)
        });
    }

    #[test]
    fn plan_rejects_integer_dtype_as_unsupported() {
        let x = desc2(DType::I64, &[4, 8], &[8, 1]);
        assert_fails(
            plan(&x, &x, -1, -1, -1, -1, -1, -1, -1, 0),
            rc::UNSUPPORTED_DTYPE,
            "softmax supports f32, f16, bf16",
        );
    }

    #[test]
    fn plan_checks_the_occupancy_and_warps_hints() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| plan(&x, &x, -1, -1, occupancy, warps, -1, -1, -1, 0));
        assert_eq!(plan(&x, &x, -1, -1, -1, 8, -1, -1, -1, 0).unwrap().row.warps, Some(8));
        assert_eq!(plan(&x, &x, -1, -1, -1, -1, -1, -1, -1, 0).unwrap().row.warps, None);
    }

    #[test]
    fn null_descriptor_is_minus5_before_any_device_work() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        // SAFETY: each pointer is null or a live descriptor; the call returns before the device is touched.
        unsafe {
            assert_eq!(cutile_softmax(std::ptr::null(), &x, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0), rc::NULL_DESCRIPTOR);
            assert_eq!(cutile_softmax(&x, std::ptr::null(), -1, -1, -1, -1, -1, -1, -1, 0, 0, 0), rc::NULL_DESCRIPTOR);
        }
    }

    /// The specializations the H200's autotune picked for the perf configs, compiled as the
    /// launcher compiles them at run time (16-byte-aligned pointers, sizes and strides divisible
    /// by 16, so tileiras can use wide or TMA loads; the unhinted tests below load element-wise).
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        for (entry, dtype, rows, block, m, n) in [
            ("softmax_row", "f16", "8", "1024", 65536, 1024),
            ("softmax_row_exact", "f16", "4", "1024", 65536, 1024),
            ("softmax_row_exact", "f16", "2", "4096", 65536, 4096),
            ("softmax_row_exact", "f32", "1", "8192", 65536, 8192),
            // n the tile does not divide (issue 13): the masked entry (predicated 16-byte loads
            // where n divides by 8, 2-byte ones at n = 4097) and the padded one, for the SASS.
            ("softmax_row", "f16", "1", "16384", 4096, 11008),
            ("softmax_row_masked", "f16", "1", "16384", 4096, 11008),
            ("softmax_row_masked", "f16", "1", "16384", 4096, 13824),
            ("softmax_row", "f16", "1", "8192", 4096, 4097),
            ("softmax_row_masked", "f16", "1", "8192", 4096, 4097),
            // The body-and-tail tiles (BLOCK/TAIL) of the same n: 8192 + 4096 lanes.
            ("softmax_row_tail", "bf16", "1", "8192/4096", 16384, 11008),
            ("softmax_row_tail", "bf16", "2", "4096/1024", 16384, 5120),
            ("softmax_row_tail_persistent", "bf16", "1", "8192/4096", 16384, 11008),
            ("softmax_row_tail_prefetch", "bf16", "1", "8192/4096", 16384, 11008),
        ] {
            let generics = ffi_util::row_generics(dtype, rows, block, &[]);
            DEVICE.assert_row_spec_lowers(
                entry,
                &generics,
                &["y_ptr", "x_ptr"],
                m,
                n,
                CompileOptions::default().occupancy(4),
                "",
            );
        }
    }

    #[test]
    fn masked_entry_for_other_whole_row_tiles_with_i32_offsets() {
        assert!(masked_fits(4096, 11008, 1, 16384, 11008, 11008)); // padded columns
        assert!(masked_fits(65535, 1024, 4, 1024, 1024, 1024)); // partial row tile
        assert!(!masked_fits(65536, 1024, 4, 1024, 1024, 1024)); // exact
        assert!(!masked_fits(4096, 18944, 1, 4096, 18944, 18944)); // looped
        assert!(!masked_fits(131073, 16383, 1, 16384, 16384, 16384)); // rows span 2^31 elements
        let x = desc2(DType::F16, &[64, 1000], &[1000, 1]);
        let p = plan(&x, &x, 1024, 4, 8, -1, -1, -1, -1, 0).unwrap();
        assert!(p.masked && !p.exact);
    }

    #[test]
    fn tail_entry_for_rows_past_one_body_tile_where_its_offsets_fit() {
        let x = desc2(DType::BF16, &[100, 11008], &[11008, 1]);
        let p = plan(&x, &x, 8192, 1, 4, -1, 0, 4096, -1, 0).unwrap();
        assert_eq!((p.tail, p.exact, p.masked, p.split), (Some(4096), false, false, None));
        assert_eq!(plan(&x, &x, 8192, 1, 4, -1, 0, -1, -1, 0).unwrap().tail, None); // looped
        assert_fails(
            plan(&x, &x, 8192, 1, 4, -1, 0, 2048, -1, 0),
            rc::INVALID_ARGUMENT,
            "block < n=11008 <= block + tail",
        );
        assert_fails(plan(&x, &x, 8192, 1, 4, -1, 8192, 4096, -1, 0), rc::INVALID_ARGUMENT, "pick one");
        // Offsets past i32: the tail entry does not run (the looped form does).
        let big = desc2(DType::BF16, &[200000, 11008], &[11008, 1]);
        assert_eq!(plan(&big, &big, 8192, 1, 4, -1, 0, 4096, -1, 0).unwrap().tail, None);
        // The persistent form: a grid of at most the row tiles, only with a tail (one that runs)
        let p = plan(&x, &x, 8192, 1, 4, 8, 0, 4096, 528, 0).unwrap();
        assert_eq!((p.tail, p.programs), (Some(4096), Some(100)));
        assert_eq!(plan(&x, &x, 8192, 1, 4, 8, 0, 4096, 64, 0).unwrap().programs, Some(64));
        assert_eq!(plan(&x, &x, 8192, 1, 4, 8, 0, 4096, 0, 0).unwrap().programs, None);
        assert_eq!(plan(&big, &big, 8192, 1, 4, -1, 0, 4096, 528, 0).unwrap().programs, None); // looped
        assert_fails(plan(&x, &x, 16384, 1, 4, -1, 0, -1, 528, 0), rc::INVALID_ARGUMENT, "the tail entry's");
        let refused =
            "variant programs=-3: the persistent grid is the tail entry's (needs a tail > 0); -1 or 0 for one tile";
        assert_fails(plan(&x, &x, 8192, 1, 4, -1, 0, 4096, -3, 0), rc::INVALID_ARGUMENT, refused);
    }

    #[test]
    fn form_1_selects_the_held_single_pass_or_the_prefetching_tail() {
        // The persistent tail's prefetching loop, where the persistent tail runs.
        let x = desc2(DType::BF16, &[100, 11008], &[11008, 1]);
        let p = plan(&x, &x, 8192, 1, 2, 8, 0, 4096, 264, 1).unwrap();
        assert_eq!((p.tail, p.programs, p.prefetch), (Some(4096), Some(100), true));
        assert!(!plan(&x, &x, 8192, 1, 2, 8, 0, 4096, 264, 0).unwrap().prefetch);
        let big = desc2(DType::BF16, &[200000, 11008], &[11008, 1]);
        let looped = plan(&big, &big, 8192, 1, 2, 8, 0, 4096, 264, 1).unwrap();
        assert_eq!((looped.tail, looped.prefetch), (None, false));
        // The held single pass: chunks of four tiles, else the two kernels where offsets past i32.
        let v = desc2(DType::BF16, &[512, 151936], &[151936, 1]);
        let held = plan(&v, &v, 2048, 1, 8, -1, 8192, -1, -1, 1).unwrap().split.unwrap();
        assert_eq!(held, SplitPlan { chunk_tiles: 4, chunks: 19, parts: 32, single: Some(SinglePass::Held) });
        let two = plan(&v, &v, 2048, 1, 8, -1, 8192, -1, -1, 0).unwrap().split.unwrap();
        assert_eq!(two.single, None);
        // The padded last chunk reaches round_up(n, chunk): past i32 where round_up(n, block) is not.
        assert!(ffi_util::masked_offsets_fit(14129, 151936, 1, 2048, &[151991, 151991]));
        assert!(!held_fits(14129, 151936, 1, 2048, 8192, 151991, 151991));
        assert!(held_fits(14128, 151936, 1, 2048, 8192, 151991, 151991));
        assert!(!held_fits(64, 151936, 4, 16384, 65536, 151936, 151936)); // 4 x 65536 elements a tile block
        assert!(!held_fits(512, 151936, 1, 4096, 8192, 151936, 151936)); // two tiles a chunk
                                                                         // Anything else is refused, naming the forms.
        let refused = "variant form=1: form 1 is the single pass holding a chunk of 4 tiles in T (chunk = 4 x block; \
                       here chunk=0 block=8192) or the persistent tail's prefetching loop (tail > 0 and programs > 0); \
                       form 2 the single pass reading its chunk twice (chunk > 0); -1 or 0 for none";
        assert_fails(plan(&x, &x, 8192, 1, 4, 8, 0, 4096, -1, 1), rc::INVALID_ARGUMENT, refused);
        assert_fails(plan(&v, &v, 4096, 1, 8, -1, 8192, -1, -1, 1), rc::INVALID_ARGUMENT, "form=1");
        assert_fails(plan(&x, &x, 8192, 1, 4, 8, 0, 4096, 264, 2), rc::INVALID_ARGUMENT, "form=2");
    }

    #[test]
    fn form_2_selects_the_single_pass_that_reads_its_chunk_twice() {
        let v = desc2(DType::BF16, &[512, 151936], &[151936, 1]);
        let reread = plan(&v, &v, 4096, 1, 8, -1, 16384, -1, -1, 2).unwrap().split.unwrap();
        assert_eq!(reread, SplitPlan { chunk_tiles: 4, chunks: 10, parts: 16, single: Some(SinglePass::Reread) });
        // One tile a chunk too (form 2 then reads the tile twice instead of holding it).
        let one = plan(&v, &v, 4096, 1, 8, -1, 4096, -1, -1, 2).unwrap().split.unwrap();
        assert_eq!(one.single, Some(SinglePass::Reread));
        // Row tiles that leave a partial one (m % rows != 0): looped; masked offsets past i32: the
        // two kernels (whose ragged tile goes through the padded partition).
        let odd = desc2(DType::BF16, &[513, 151936], &[151936, 1]);
        assert_eq!(plan(&odd, &odd, 4096, 2, 8, -1, 16384, -1, -1, 2).unwrap().split, None);
        assert!(split_fits(14129, 151936, 1, 151991, 151991));
        assert!(!reread_fits(14129, 151936, 1, 4096, 151991, 151991));
        assert!(reread_fits(14128, 151936, 1, 4096, 151991, 151991));
        let big = desc2(DType::BF16, &[14129, 151936], &[151991, 1]);
        let two = plan(&big, &big, 4096, 1, 8, -1, 16384, -1, -1, 2).unwrap().split.unwrap();
        assert_eq!(two.single, None);
        // Form 2 without a chunk is refused.
        let x = desc2(DType::BF16, &[100, 11008], &[11008, 1]);
        assert_fails(plan(&x, &x, 16384, 1, 4, -1, 0, -1, -1, 2), rc::INVALID_ARGUMENT, "form=2");
    }

    #[test]
    fn aligned_entry_for_rows_off_16_byte_boundaries() {
        let x = desc2(DType::F16, &[257, 4097], &[4097, 1]);
        let p = plan(&x, &x, 8192, 1, 3, -1, -1, -1, -1, 0).unwrap();
        assert_eq!((p.aligned, p.masked, p.exact), (Some(8), true, false));
        // 4097 = 512 whole 8-element groups and one more: the body fits 4096 lanes.
        assert_eq!(plan(&x, &x, 4096, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, Some(8));
        assert_eq!(plan(&x, &x, 2048, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, None); // looped
        let f32x = desc2(DType::F32, &[3, 4097], &[4097, 1]);
        assert_eq!(plan(&f32x, &f32x, 8192, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, Some(4));
        // A row stride no multiple of 16 bytes misaligns rows even where n is a multiple of 8.
        let padded = desc2(DType::BF16, &[33, 4000], &[4004, 1]);
        assert_eq!(plan(&padded, &padded, 4096, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, Some(8));
        // Every row on 16-byte boundaries: the masked entry's accesses are 16-byte ones already.
        let whole = desc2(DType::F16, &[33, 4000], &[4096, 1]);
        assert_eq!(plan(&whole, &whole, 4096, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, None);
        // A base off 16 bytes, or rows of x and out with different heads: the masked entry.
        let off = TensorDesc { data: 0x1002, ..x };
        assert_eq!(plan(&off, &x, 8192, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, None);
        let wider = desc2(DType::F16, &[257, 4097], &[4098, 1]);
        assert_eq!(plan(&wider, &x, 8192, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, None);
        // The tail entry and the exact one keep their shapes.
        let t = desc2(DType::BF16, &[100, 11009], &[11009, 1]);
        assert_eq!(plan(&t, &t, 8192, 1, 4, -1, 0, 4096, -1, 0).unwrap().aligned, None);
        // Offsets past i32 (the padded body of the last row tile): the masked or looped entries.
        let big = desc2(DType::F16, &[524287, 4097], &[4097, 1]);
        assert_eq!(plan(&big, &big, 8192, 1, 4, -1, -1, -1, -1, 0).unwrap().aligned, None);
    }

    /// The aligned entry as the launcher compiles it for n = 4097 (`assert_aligned_lowers`).
    #[test]
    fn aligned_entry_lowers_and_assembles_for_sm90() {
        for (dtype, rows, block) in [("f16", "1", "4096"), ("bf16", "2", "8192"), ("f32", "1", "8192")] {
            DEVICE.assert_aligned_lowers("softmax_row_aligned", dtype, rows, block, &[], &["y_ptr", "x_ptr"]);
        }
    }

    #[test]
    fn exact_entry_only_for_one_whole_tile_per_row_and_i32_offsets() {
        assert!(exact_fits(65536, 1024, 4, 1024, 1024, 1024));
        assert!(exact_fits(65536, 8192, 1, 8192, 8192, 8192));
        assert!(!exact_fits(65536, 1000, 4, 1024, 1000, 1000)); // padded columns
        assert!(!exact_fits(65535, 1024, 4, 1024, 1024, 1024)); // partial row tile
        assert!(!exact_fits(65536, 32768, 1, 4096, 32768, 32768)); // looped
        assert!(!exact_fits(262144, 16384, 1, 16384, 16384, 16384)); // 2^32 elements
        let x = desc2(DType::F16, &[64, 1024], &[1040, 1]);
        assert!(plan(&x, &x, 1024, 4, 8, -1, -1, -1, -1, 0).unwrap().exact);
        assert!(!plan(&x, &x, 2048, 4, 8, -1, -1, -1, -1, 0).unwrap().exact);
    }

    #[test]
    fn default_splits_vocab_rows_of_few_rows_only() {
        let split = |m: i64, n: i64| {
            let x = desc2(DType::BF16, &[m, n], &[n, 1]);
            plan(&x, &x, -1, -1, -1, -1, -1, -1, -1, 0).unwrap()
        };
        let p = split(1024, 128256);
        assert_eq!((p.row.block, p.row.rows, p.exact, p.masked), (8192, 1, false, false));
        // 16 column tiles (the last ragged), one per chunk: the single pass.
        assert_eq!(
            p.split,
            Some(SplitPlan { chunk_tiles: 1, chunks: 16, parts: 16, single: Some(SinglePass::OneTile) })
        );
        assert_eq!(p.split.unwrap().workspace_elems(1024, 1), 2 * 1024 * 16);
        assert_eq!(
            split(7, 150001).split,
            Some(SplitPlan { chunk_tiles: 1, chunks: 19, parts: 32, single: Some(SinglePass::OneTile) })
        );
        assert_eq!(split(8193, 128256).split, None); // enough row tiles: the looped form
        assert_eq!(split(64, 16384).split, None); // held whole

        // An explicit tile keeps its form unless chunk asks for the split.
        let x = desc2(DType::F32, &[256, 152064], &[152064, 1]);
        assert_eq!(plan(&x, &x, 4096, 2, 4, -1, -1, -1, -1, 0).unwrap().split, None);
        assert_eq!(plan(&x, &x, -1, -1, -1, -1, 0, -1, -1, 0).unwrap().split, None);
        let p = plan(&x, &x, 2048, 2, 8, -1, 8192, -1, -1, 0).unwrap();
        assert_eq!((p.row.block, p.row.rows), (2048, 2));
        assert_eq!(p.split, Some(SplitPlan { chunk_tiles: 4, chunks: 19, parts: 32, single: None }));
        assert_eq!(plan(&x, &x, -1, -1, -1, -1, 4096, -1, -1, 0).unwrap().split.unwrap().chunks, 38);
    }

    #[test]
    fn one_tile_chunks_take_the_single_pass_split_where_its_masked_offsets_fit() {
        let x = desc2(DType::BF16, &[512, 151936], &[151936, 1]);
        let p = plan(&x, &x, 4096, 1, 8, -1, 4096, -1, -1, 0).unwrap();
        assert_eq!(
            p.split,
            Some(SplitPlan { chunk_tiles: 1, chunks: 38, parts: 64, single: Some(SinglePass::OneTile) })
        );
        // Rows padded to whole row tiles (7 rows in 4-row tiles: 8).
        assert_eq!(p.split.unwrap().workspace_elems(7, 4), 2 * 8 * 38);
        // Two tiles per chunk: the two kernels.
        assert!(plan(&x, &x, 4096, 1, 8, -1, 8192, -1, -1, 0).unwrap().split.unwrap().single.is_none());
        // 32767 x 65537 fits i32 as a two-kernel split (its last tile through the padded partition)
        // but not as masked tiles: the last row's padded tile ends 65535 elements past the row.
        assert!(split_fits(32767, 65537, 1, 65537, 65537));
        assert!(!exchange_fits(32767, 65537, 1, 65536, 65536, 65537, 65537));
        assert!(exchange_fits(32766, 65537, 1, 65536, 65536, 65537, 65537));
    }

    #[test]
    fn split_rejects_bad_chunks_and_runs_looped_where_its_unmasked_loads_cannot() {
        let x = desc2(DType::F32, &[7, 150001], &[150016, 1]);
        let cases = [
            (4096, 1, 6144, "chunk must be a multiple of block"),
            (16, 1, 16, "9376 chunks per row, 16384 parts (the power of two >= chunks); parts must be <= 1024"),
            (4096, 1, -2, "variant chunk=-2"),
        ];
        for (block, rows, chunk, needle) in cases {
            assert_fails(plan(&x, &x, block, rows, -1, -1, chunk, -1, -1, 0), rc::INVALID_ARGUMENT, needle);
        }
        assert_eq!(plan(&x, &x, 4096, 2, -1, -1, 8192, -1, -1, 0).unwrap().split, None); // 7 % 2 rows: looped
        assert!(split_fits(8, 150001, 2, 150016, 150001));
        assert!(!split_fits(16384, 131072, 1, 131072, 131072)); // 2^31 elements

        // The default falls back to the looped form where the split cannot run.
        let big = desc2(DType::BF16, &[4096, 1 << 19], &[1 << 19, 1]);
        assert_eq!(plan(&big, &big, -1, -1, -1, -1, -1, -1, -1, 0).unwrap().split, None);
    }

    #[test]
    fn default_runs_looped_where_its_split_would_need_more_chunks_than_kernel_b_holds() {
        // 1 x 2^24: the split fits (one row, i32 offsets) but 8192-column chunks make 2048 > 1024.
        let x = desc2(DType::F32, &[1, 1 << 24], &[1 << 24, 1]);
        let p = plan(&x, &x, -1, -1, -1, -1, -1, -1, -1, 0).unwrap();
        assert_eq!((p.split, p.row.block, p.row.rows), (None, DEFAULT_LOOPED_BLOCK, 1));
        assert!(!default_split(1, 1 << 24, 1 << 24, 1 << 24));
        assert!(default_split(1, 1 << 23, 1 << 23, 1 << 23)); // exactly 1024 chunks
    }

    #[test]
    fn explicit_chunk_runs_looped_where_the_split_does_not_fit_before_counting_chunks() {
        // 512 x 2^23 spans 2^32 elements (no i32 offsets): looped, although 2048-wide tiles in
        // 4096-column chunks would also make 2048 chunks per row.
        let x = desc2(DType::BF16, &[512, 1 << 23], &[1 << 23, 1]);
        let p = plan(&x, &x, 2048, 1, -1, -1, 4096, -1, -1, 0).unwrap();
        assert_eq!((p.split, p.row.block, p.exact, p.masked), (None, 2048, false, false));
        // A chunk that is not a multiple of block is refused whatever the shape.
        assert_fails(
            plan(&x, &x, 2048, 1, -1, -1, 3072, -1, -1, 0),
            rc::INVALID_ARGUMENT,
            "chunk must be a multiple of block",
        );
    }

    #[test]
    fn explicit_chunk_the_split_cannot_serve_is_minus6_naming_the_limit_and_the_fix() {
        let x = desc2(DType::BF16, &[1, 1 << 23], &[1 << 23, 1]);
        let needle = "n=8388608 makes 2048 chunks per row, 2048 parts (the power of two >= chunks); parts must be \
                      <= 1024 and rows*parts <= 65536: use chunk >= 8192 for this n";
        assert_fails(plan(&x, &x, 2048, 1, -1, -1, 4096, -1, -1, 0), rc::INVALID_ARGUMENT, needle);
        assert_eq!(plan(&x, &x, 2048, 1, -1, -1, 8192, -1, -1, 0).unwrap().split.unwrap().chunks, 1024);
    }

    #[test]
    fn rows_wider_than_the_kernels_i32_column_tile_count_are_refused() {
        assert_eq!(MAX_N as i64 + MAX_TILE_ELEMS as i64 - 1, i32::MAX as i64); // n + block - 1 fits
        let widest = desc2(DType::F16, &[1, MAX_N as i64], &[MAX_N as i64, 1]);
        let p = plan(&widest, &widest, -1, -1, -1, -1, -1, -1, -1, 0).unwrap(); // too many chunks: looped
        assert_eq!((p.split, p.row.block), (None, DEFAULT_LOOPED_BLOCK));
        assert!(plan(&widest, &widest, 65536, 1, -1, -1, 1 << 26, -1, -1, 0).unwrap().split.is_some());
        let wider = desc2(DType::F16, &[1, MAX_N as i64 + 1], &[MAX_N as i64 + 1, 1]);
        let needle = "n=2147418113: softmax rows may have at most 2147418112 columns";
        assert_fails(plan(&wider, &wider, -1, -1, -1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, needle);
        // split_plan counts in i64: no wrap at the widest row and the widest tile.
        assert_eq!(
            split_plan(MAX_N, 65536, 1, 1 << 26).unwrap(),
            SplitPlan { chunk_tiles: 1024, chunks: 32, parts: 32, single: None }
        );
        assert_fails(split_plan(MAX_N, 4096, 1, 8192), rc::INVALID_ARGUMENT, "use chunk >= 2097152 for this n");
        // The defaults' powers of two above 2^30 (columns, rows) do not wrap to i32::MIN either.
        assert_eq!((default_block((1 << 30) + 1), default_rows(16, i32::MAX)), (DEFAULT_LOOPED_BLOCK, 64));
    }

    /// Kernel B for each PARTS class the split candidates reach, and both split kernels specialized
    /// as the launcher compiles them for the shapes (16-byte-aligned pointers; n and the
    /// strides divisible by 16 where they are), so TILEKIT_CUBIN_DIR dumps what the H200 runs.
    #[test]
    fn split_entries_lower_and_assemble_for_sm90() {
        for dtype in ["f32", "f16", "bf16"] {
            for (block, parts) in [("4096", "16"), ("4096", "32"), ("2048", "32"), ("8192", "16")] {
                DEVICE.assert_lowers("softmax_split_scale", &[dtype, "1", block, parts], &["exp2", "neg_inf"]);
            }
        }
        for (dtype, m, n, parts) in [("f32", 1024, 128256, "16"), ("bf16", 512, 151936, "32")] {
            let chunks = (n + 8191) / 8192;
            let ptrs =
                [("y_ptr", ALIGNED_PTR), ("x_ptr", ALIGNED_PTR), ("part_max", ALIGNED_PTR), ("part_sum", ALIGNED_PTR)];
            let ints = [("m", m), ("n", n), ("stride_x", n), ("stride_y", n), ("chunk_tiles", 2), ("chunks", chunks)];
            let hints = div_hints(&ptrs, &ints);
            let options = || CompileOptions::default().occupancy(4);
            let what = format!(" for {m}x{n}");
            DEVICE.lower("softmax_split_partials", &[dtype, "1", "4096"], &hints, options(), &what);
            DEVICE.lower("softmax_split_scale", &[dtype, "1", "4096", parts], &hints, options(), &what);
        }
    }

    /// The single-pass split for the PARTS classes its candidates reach, specialized as the launcher
    /// compiles it for the vocabulary shapes (`lower_single_pass`).
    #[test]
    fn split_exchange_lowers_and_assembles_for_sm90() {
        for (dtype, m, n, block, parts, occupancy, warps) in [
            ("f32", 1024, 128256, 4096, "32", 8, None),
            ("bf16", 512, 151936, 4096, "64", 8, None),
            ("bf16", 4096, 128256, 8192, "16", 4, None),
            ("f32", 1024, 128256, 8192, "16", 4, Some(8)),
            ("bf16", 512, 151936, 16384, "16", 2, Some(8)),
        ] {
            lower_single_pass("softmax_split_exchange", dtype, m, n, block, block, parts, occupancy, warps);
        }
        DEVICE.assert_lowers("softmax_split_exchange", &["f16", "2", "2048", "128"], &["exp2", "select"]);
    }

    /// A single-pass split entry (`tile`-wide tiles, `chunk` columns a tile block) lowered and
    /// assembled as the launcher specializes it for one-row tiles over m x n; its IR has the
    /// release arrival and the acquire poll as atomics (whose one result every thread shares: see
    /// device_util's `arrive_and_wait`), and no thread polls with a load of its own. Returns the IR.
    #[allow(clippy::too_many_arguments)]
    fn lower_single_pass(
        entry: &str, dtype: &str, m: i32, n: i32, tile: i32, chunk: i32, parts: &str, occupancy: i32,
        warps: Option<i32>,
    ) -> String {
        let chunks = (n + chunk - 1) / chunk;
        let ptrs =
            [("y_ptr", ALIGNED_PTR), ("x_ptr", ALIGNED_PTR), ("part_max", ALIGNED_PTR), ("part_sum", ALIGNED_PTR)];
        let mut ints = vec![("m", m), ("n", n), ("stride_x", n), ("stride_y", n), ("chunks", chunks)];
        if entry == "softmax_split_exchange_reread" {
            ints.push(("chunk_tiles", chunk / tile));
        }
        let options = ffi_util::compile_options(Some(occupancy), warps);
        let what = format!(" for {m}x{n} at occupancy {occupancy}");
        let generics = [dtype, "1", &tile.to_string(), parts];
        let ir = DEVICE.lower(entry, &generics, &div_hints(&ptrs, &ints), options, &what);
        assert!(!ir.contains("load_ptr_tko acquire"), "{entry}{what}: a polling load");
        for needle in ["atomic_rmw_tko release", "atomic_rmw_tko acquire", "exp2"] {
            assert!(ir.contains(needle), "{entry}{what}: no {needle} in the IR");
        }
        ir
    }

    /// The single pass that reads its chunk twice, specialized as the launcher compiles its
    /// candidates for the vocabulary shapes; the polls wait on the first tile's early re-read too
    /// (the token join that keeps tileiras from sinking that load below them).
    #[test]
    fn split_exchange_reread_lowers_and_assembles_for_sm90() {
        for (dtype, m, n, tile, chunk, parts, occupancy, warps) in [
            ("bf16", 512, 151936, 4096, 8192, "32", 8, None),
            ("bf16", 512, 151936, 2048, 8192, "32", 16, None),
            ("bf16", 512, 151936, 2048, 4096, "64", 16, None),
            ("bf16", 512, 151936, 4096, 4096, "64", 8, None),
            ("bf16", 4096, 128256, 4096, 8192, "16", 8, None),
            ("bf16", 4096, 128256, 2048, 8192, "16", 16, None),
            ("bf16", 512, 151936, 4096, 16384, "16", 4, None),
            ("bf16", 512, 151936, 8192, 32768, "8", 4, Some(8)),
            ("f32", 1024, 128256, 4096, 8192, "16", 8, None),
            ("f16", 512, 151936, 4096, 8192, "32", 8, None),
            ("bf16", 16384, 11008, 4096, 12288, "1", 8, None), // one chunk a row
        ] {
            let ir =
                lower_single_pass("softmax_split_exchange_reread", dtype, m, n, tile, chunk, parts, occupancy, warps);
            assert!(ir.contains("join_tokens"), "{dtype} {m}x{n}: the polls do not wait on the early re-read");
        }
    }

    /// The persistent tail's prefetching loop at the candidates' occupancies and warps, as the
    /// launcher compiles it for bf16 16384 x 11008.
    #[test]
    fn tail_prefetch_lowers_and_assembles_for_sm90() {
        for (occupancy, warps) in [(2, Some(8)), (3, Some(8)), (2, None), (3, None), (4, Some(8))] {
            let (options, entry) = (ffi_util::compile_options(Some(occupancy), warps), "softmax_row_tail_prefetch");
            let (generics, note) = (
                ffi_util::row_generics("bf16", "1", "8192/4096", &[]),
                format!(" at occupancy {occupancy}, warps {warps:?}"),
            );
            DEVICE.assert_row_spec_lowers(entry, &generics, &["y_ptr", "x_ptr"], 16384, 11008, options, &note);
        }
    }

    /// The single pass with its chunk held in T as four sub-tiles, specialized as the launcher
    /// compiles its candidates for the bf16 vocabulary shapes (and f16, f32 at one shape each).
    #[test]
    fn split_exchange_held_lowers_and_assembles_for_sm90() {
        for (dtype, m, n, sub, parts, occupancy, warps) in [
            ("f32", 1024, 128256, 2048, "16", 5, None),
            ("bf16", 512, 151936, 2048, "32", 5, None),
            ("bf16", 512, 151936, 2048, "32", 8, None),
            ("bf16", 512, 151936, 2048, "32", 6, None),
            ("bf16", 4096, 128256, 2048, "16", 8, None),
            ("bf16", 4096, 128256, 2048, "16", 6, None),
            ("bf16", 4096, 128256, 4096, "8", 4, Some(8)),
            ("bf16", 4096, 128256, 1024, "32", 16, None),
            ("f16", 512, 151936, 2048, "32", 8, None),
            ("f32", 1024, 128256, 2048, "16", 4, None),
        ] {
            lower_single_pass(
                "softmax_split_exchange_held",
                dtype,
                m,
                n,
                sub,
                HELD_TILES * sub,
                parts,
                occupancy,
                warps,
            );
        }
    }

    /// The worker-warps hint reaches the IR and tileiras 13.4 accepts it for sm_90.
    #[test]
    fn warps_hint_lowers_and_assembles_for_sm90() {
        for warps in [4, 8] {
            let options = ffi_util::compile_options(Some(8), Some(warps));
            let what = format!(" with occupancy 8, {warps} warps");
            let ir = DEVICE.lower("softmax_row", &["f16", "1", "1024"], &[], options, &what);
            assert!(
                ir.contains(&format!("num_worker_warps_per_cta = {warps}")),
                "{what}: hint missing from the IR:\n{ir}"
            );
        }
    }

    #[test]
    fn both_entries_lower_to_tile_ir_for_sm90() {
        // Every (ROWS, BLOCK) shape class spec.variants() can hand out, plus the defaults.
        let shapes = [
            ("softmax_row", "1", "16"),
            ("softmax_row", "8", "1024"),
            ("softmax_row", "16", "1024"),
            ("softmax_row", "1", "1024"),
            ("softmax_row", "2", "1024"),
            ("softmax_row", "1", "4096"),
            ("softmax_row", "2", "4096"),
            ("softmax_row", "1", "16384"),
            ("softmax_looped", "2", "4096"),
            ("softmax_looped", "1", "8192"),
            ("softmax_looped", "4", "2048"),
            ("softmax_row_exact", "4", "1024"),
            ("softmax_row_exact", "2", "4096"),
            ("softmax_row_exact", "1", "8192"),
            ("softmax_row_masked", "1", "16"),
            ("softmax_row_masked", "8", "1024"),
            ("softmax_row_masked", "1", "16384"),
            ("softmax_split_partials", "1", "4096"),
            ("softmax_split_partials", "1", "2048"),
            ("softmax_split_partials", "1", "8192"),
            ("softmax_row_tail", "1", "1024/256"),
            ("softmax_row_tail", "4", "256/16"),
            ("softmax_row_tail_persistent", "1", "1024/256"),
            ("softmax_row_tail_persistent", "4", "256/16"),
            ("softmax_row_tail_prefetch", "1", "1024/256"),
            ("softmax_row_tail_prefetch", "4", "256/16"),
        ];
        for dtype in ["f32", "f16", "bf16"] {
            for (entry, rows, block) in shapes {
                let ir =
                    DEVICE.assert_lowers(entry, &ffi_util::row_generics(dtype, rows, block, &[]), &["exp2", "reduce"]);
                if entry == "softmax_row_masked" || entry.starts_with("softmax_row_tail") {
                    assert!(ir.contains("select"), "{entry}<{dtype}>: masked lanes must be set to -inf:\n{ir}");
                } else if entry != "softmax_row_exact" {
                    assert!(ir.contains("neg_inf"), "{entry}<{dtype}>: the x partition must pad with -inf:\n{ir}");
                }
            }
        }
    }
}
