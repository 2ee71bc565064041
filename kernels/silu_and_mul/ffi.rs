//! C-ABI launcher of silu_and_mul: `cutile_silu_and_mul` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
//!                               int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                               int32_t device_id, uint64_t stream);
//!
//! x is (m, 2H) and out is (m, H), one dtype (f32, f16 or bf16), contiguous last dim, any row
//! stride >= the row length; out must not overlap x. When the tile divides (m, H) and every
//! element offset fits i32 (`exact_fits`), the unmasked `silu_and_mul_exact` entry runs; else,
//! where the padded tiles' offsets fit i32, the masked pointer-tile `silu_and_mul_masked` (or,
//! where at most MERGED_TAIL columns are left past the whole tiles, `silu_and_mul_masked_tail`,
//! whose last whole column tile takes them); else the zero-padded `silu_and_mul`. `block` is the
//! tile width (a power of two) and `rows` the rows per tile block (a power of two); `occupancy`
//! the CTAs per SM tileiras
//! should plan registers for (1..=32), `warps` the worker warps per CTA (4 or 8, what Tile IR 13.4
//! accepts). -1 picks the default: for block and rows ffi.rs's (~4K-element tiles, see
//! default_block), for the two hints the compiler's. Every descriptor is
//! validated before anything touches the GPU: bad input returns -2/-5/-6 with a message, never a
//! launch.
use super::kernel::silu_and_mul_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, Launch, RowPlan, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "silu_and_mul";
/// Largest output tile (ROWS * BLOCK elements) a variant may ask for. A block holds three tiles of
/// that size (gate and up in f32, the result), so beyond it registers spill.
const MAX_TILE_ELEMS: i32 = 1 << 14;
/// Output elements per tile block of the default variant: with gate and up that is 8K loaded
/// elements, the load size rms_norm's H200 sweep found fastest (with occupancy 2-4).
const DEFAULT_TILE_ELEMS: i32 = 4096;
/// Widest default tile: wider rows are split into column tiles.
const MAX_DEFAULT_BLOCK: i32 = 4096;

/// A validated launch: sizes as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    /// The tile, the occupancy and warps hints, and the sizes: `n` is the output width H (x has 2H
    /// columns), `stride_y` out's row stride.
    pub row: RowPlan,
    /// Tile blocks: ceil(m / rows) * ceil(h / block).
    pub grid: u32,
    /// The tile divides (m, h) and every element offset fits i32: `silu_and_mul_exact` (unmasked
    /// pointer-tile loads and stores) runs instead of the zero-padded partition entry.
    pub exact: bool,
    /// Not exact, but every offset of the padded tiles fits i32: `silu_and_mul_masked` (pointer
    /// tiles with a mask of the lanes inside (m, h)) runs instead of the zero-padded entry.
    pub masked: bool,
    /// Masked, with h > block and 0 < h % block <= MERGED_TAIL: `silu_and_mul_masked_tail` runs on
    /// h / block column tiles, the last one also covering the few columns past the whole tiles
    /// (`grid` counts those tile blocks).
    pub merged_tail: bool,
}

/// Widest remainder h % block that the last whole column tile takes on (`Plan::merged_tail`):
/// the width of `silu_and_mul_masked_tail`'s tail tile.
pub const MERGED_TAIL: i32 = 64;

/// Whether the few columns past the whole tiles go to the last whole column tile instead of a
/// tile block of their own: h > block and 0 < h % block <= MERGED_TAIL (MERGED_TAIL <= block, the
/// narrowest tile being 256 wide).
pub fn merged_tail_fits(h: i32, block: i32) -> bool {
    h > block && (1..=MERGED_TAIL).contains(&(h % block))
}

/// (`merged_tail`, tile blocks) of a tiling whose masked entry may run (`masked`) on `grid` tile
/// blocks: where [`merged_tail_fits`], the merged-tail entry on h / block column tiles per row tile
/// (swiglu's plan too).
pub fn merged_tail_grid(masked: bool, row: &RowPlan, grid: u32) -> (bool, u32) {
    let merged = masked && merged_tail_fits(row.n, row.block);
    (merged, if merged { row.row_tiles() as u32 * (row.n / row.block) as u32 } else { grid })
}

/// The launch of a merged-tail entry (`*_masked_tail`: generics ROWS, BLOCK, MERGED_TAIL) on
/// `grid` tile blocks with the tiling's hints (swiglu's too).
pub fn merged_tail_launch<T: Element>(row: &RowPlan, grid: u32) -> Launch {
    let options = ffi_util::compile_options(row.occupancy, row.warps);
    Launch::new::<T>(&[row.rows, row.block, MERGED_TAIL], (grid, 1, 1), options)
}

/// Whether `silu_and_mul_exact` may run: no partial tile, and the largest element offset the
/// kernel forms in i32 (from x's start to the last up element, from out's start to its last
/// element) fits.
pub fn exact_fits(m: i32, h: i32, rows: i32, block: i32, stride_x: i32, stride_out: i32) -> bool {
    let (m, h) = (m as i64, h as i64);
    m % rows as i64 == 0
        && h % block as i64 == 0
        && (m - 1) * stride_x as i64 + 2 * h <= i32::MAX as i64
        && (m - 1) * stride_out as i64 + h <= i32::MAX as i64
}

/// Whether `silu_and_mul_masked` may run: the offsets of gate and up (each from its own pointer,
/// in rows of x) and of out fit i32 up to the last lane of the last padded tile.
pub fn masked_fits(m: i32, h: i32, rows: i32, block: i32, stride_x: i32, stride_out: i32) -> bool {
    ffi_util::masked_offsets_fit(m, h, rows, block, &[stride_x, stride_out])
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

/// Byte range [first, last) a (m, len) row-strided tensor touches.
fn byte_span(d: &TensorDesc, m: i32, len: i32, stride: i32, size: usize) -> (u128, u128) {
    let elems = (m as u128 - 1) * stride as u128 + len as u128;
    (d.data as u128, d.data as u128 + elems * size as u128)
}

/// The tiling of an (m, h) output whose inputs are rows `stride_x` elements apart (swiglu's too,
/// with its a's stride): the tile (-1: the defaults), the occupancy and warps hints, and the 1-D
/// grid of its tiles, refused beyond i32::MAX tile blocks.
#[allow(clippy::too_many_arguments)]
pub fn tiled_plan(
    m: i32, h: i32, block: i32, rows: i32, occupancy: i32, warps: i32, stride_x: i32, stride_out: i32,
) -> FfiResult<(RowPlan, u32)> {
    let (block, rows) = ffi_util::row_tile(block, rows, default_block(h), |b| default_rows(b, m), 256, MAX_TILE_ELEMS)?;
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?;
    let tiles = ((m as i64 + rows as i64 - 1) / rows as i64) * ((h as i64 + block as i64 - 1) / block as i64);
    if tiles > i32::MAX as i64 {
        return Err(invalid(format!(
            "{tiles} tile blocks exceed the 1-D grid limit {}; use larger tiles (block, rows)",
            i32::MAX
        )));
    }
    Ok((RowPlan { block, rows, occupancy, warps, m, n: h, stride_x, stride_y: stride_out }, tiles as u32))
}

pub fn plan(out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(x, "x", 2), (out, "out", 2)])?;
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
        return Err(invalid("`out` overlaps `x`: silu_and_mul writes a separate (m, H) tensor".to_string()));
    }

    let (row, grid) = tiled_plan(m, h, block, rows, occupancy, warps, stride_x, stride_out)?;
    let exact = exact_fits(m, h, row.rows, row.block, stride_x, stride_out);
    let masked = !exact && masked_fits(m, h, row.rows, row.block, stride_x, stride_out);
    let (merged_tail, grid) = merged_tail_grid(masked, &row, grid);
    Ok(Plan { dtype, row, grid, exact, masked, merged_tail })
}

fn launch<T: Element>(p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sx, stride_y: so, .. } = p.row;
    // The up half starts H elements into each row of x.
    let mut up = *x;
    up.data = x.data + h as u64 * std::mem::size_of::<T>() as u64;
    let (y_ptr, g_ptr, u_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(x), ffi_util::device_ptr::<T>(&up)) };
    let launch = p.row.launch::<T>(p.grid);
    // SAFETY: plan() checked shapes, strides, dtypes and that out does not overlap x; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    // The exact and masked entries additionally rely on plan()'s `exact_fits` (whole tiles, i32
    // offsets) and `masked_fits` (i32 offsets of the padded tiles).
    unsafe {
        if p.exact {
            launch.enqueue(device::silu_and_mul_exact(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        } else if p.merged_tail {
            merged_tail_launch::<T>(&p.row, p.grid)
                .enqueue(device::silu_and_mul_masked_tail(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        } else if p.masked {
            launch.enqueue(device::silu_and_mul_masked(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        } else {
            launch.enqueue(device::silu_and_mul(y_ptr, g_ptr, u_ptr, m, h, sx, so), stream)
        }
    }
}

// `cutile_silu_and_mul`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_silu_and_mul(out, x; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation and defaults, and the entry lowered to Tile IR for sm_90 (stage 1 of
    //! the JIT, which needs no GPU) and assembled by tileiras when it is found, for every dtype.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, DeviceModule, ALIGNED_PTR};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "silu_and_mul_device" };

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

    #[test]
    fn plan_takes_row_strides_and_default_tiles() {
        let x = x_desc(DType::BF16, &[257, 8194], &[8300, 1]);
        let y = out_desc(DType::BF16, &[257, 4097], &[4097, 1]);
        let Plan { dtype, row, grid, exact, masked, merged_tail } = plan(&y, &x, -1, -1, -1, -1).unwrap();
        // H = 4097: 512-wide column tiles, 8 rows; the 4097th column goes to the 8th column tile
        // (merged_tail), so 33 row tiles * 8 tile blocks, not 9.
        assert_eq!((dtype, grid, exact, masked, merged_tail), (DType::BF16, 33 * 8, false, true, true));
        assert_eq!((row.m, row.n, row.stride_x, row.stride_y), (257, 4097, 8300, 4097));
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (512, 8, None, None));
        assert_eq!(plan(&y, &x, 1024, -1, 4, -1).unwrap().row.rows, 4);
        assert_eq!(plan(&y, &x, 1024, 2, 4, -1).unwrap().row.occupancy, Some(4));
    }

    #[test]
    fn a_few_columns_past_the_whole_tiles_go_to_the_last_one() {
        let bf16 =
            |m: i64, h: i64| (x_desc(DType::BF16, &[m, 2 * h], &[2 * h, 1]), out_desc(DType::BF16, &[m, h], &[h, 1]));
        let merged = |m, h, block| {
            let (x, y) = bf16(m, h);
            let p = plan(&y, &x, block, 1, -1, -1).unwrap();
            (p.merged_tail, p.grid)
        };
        assert_eq!(merged(3, 4097, 512), (true, 3 * 8));
        assert_eq!(merged(3, 4096 + MERGED_TAIL as i64, 512), (true, 3 * 8));
        assert_eq!(merged(3, 4096 + MERGED_TAIL as i64 + 1, 512), (false, 3 * 9)); // a tail wider than 64
        assert_eq!(merged(3, 4096, 512), (false, 3 * 8)); // exact
        assert_eq!(merged(3, 300, 512), (false, 3)); // one padded tile: nothing to merge
        assert_eq!(merged(3, 1000, 256), (false, 3 * 4)); // 232 columns past three tiles
        assert!(merged_tail_fits(257, 256) && !merged_tail_fits(256, 256) && !merged_tail_fits(64, 256));
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
        let p = plan(&y, &x, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.stride_x, p.row.stride_y, p.row.block, p.row.rows, p.grid), (2, 1, 16, 1, 1));
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
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
            (x, y, 24, 1, "power of two"),
            (x, y, -2, 1, "power of two"),
            (x, y, 8, 1, "power of two"),
            (x, y, 16, 3, "power of two"),
            (x, y, 16384, 2, "block*rows"),
            (
                x_desc(DType::F32, &[4, 16], &[16, 1]),
                desc_at(0x10000 + 8 * 4, DType::F32, &[4, 8], &[16, 1]),
                16,
                1,
                "overlaps `x`",
            ),
            (x_desc(DType::F32, &[4], &[1]), y, 16, 1, "2 dims"),
        ];
        for (x, out, block, rows, needle) in cases {
            assert_fails(plan(&out, &x, block, rows, -1, -1), rc::INVALID_ARGUMENT, needle);
        }
    }

    #[test]
    fn plan_rejects_integer_and_mixed_dtypes() {
        let x = x_desc(DType::I32, &[4, 16], &[16, 1]);
        let y = out_desc(DType::I32, &[4, 8], &[8, 1]);
        assert_fails(plan(&y, &x, -1, -1, -1, -1), rc::UNSUPPORTED_DTYPE, "silu_and_mul supports f32, f16, bf16");
        let x = x_desc(DType::F16, &[4, 16], &[16, 1]);
        let y = out_desc(DType::BF16, &[4, 8], &[8, 1]);
        assert_fails(plan(&y, &x, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "share one dtype");
    }

    #[test]
    fn plan_checks_the_occupancy_and_warps_hints() {
        let x = x_desc(DType::F32, &[4, 16], &[16, 1]);
        let y = out_desc(DType::F32, &[4, 8], &[8, 1]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| plan(&y, &x, -1, -1, occupancy, warps));
        assert_eq!(plan(&y, &x, -1, -1, 8, 8).unwrap().row.warps, Some(8));
    }

    #[test]
    fn plan_rejects_more_tile_blocks_than_a_1d_grid_holds() {
        // m = 2^31 - 1 rows: one column tile per row is exactly the limit, two are over it.
        let big = i32::MAX as i64;
        let x = x_desc(DType::BF16, &[big, 2], &[2, 1]);
        let y = desc_at(0x100_0000_0000, DType::BF16, &[big, 1], &[1, 1]);
        assert_eq!(plan(&y, &x, 16, 1, -1, -1).unwrap().grid, i32::MAX as u32);
        let x = x_desc(DType::BF16, &[big, 64], &[64, 1]);
        let y = desc_at(0x100_0000_0000, DType::BF16, &[big, 32], &[32, 1]);
        assert_fails(plan(&y, &x, 16, 1, -1, -1), rc::INVALID_ARGUMENT, "grid limit");
    }

    /// The specializations the perf configs JIT at run time, of both entries (the shapes the tile
    /// divides run the unmasked one): the launcher passes a divisibility hint for every pointer
    /// (bytes) and integer (elements), so with 16-byte-aligned pointers and strides tileiras
    /// compiles a different (wider-access) kernel than the unhinted one below.
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        for (entry, rows, block, m, h, occupancy, warps) in [
            ("silu_and_mul", "1", "4096", 65536, 4096, 4, None),
            ("silu_and_mul", "2", "4096", 65536, 4096, 4, None),
            ("silu_and_mul", "2", "2048", 16384, 14336, 4, None),
            ("silu_and_mul", "1", "1024", 16384, 14336, 16, None),
            ("silu_and_mul", "1", "2048", 65536, 4096, 8, Some(8)),
            ("silu_and_mul_exact", "1", "4096", 65536, 4096, 4, None),
            ("silu_and_mul_exact", "2", "4096", 65536, 4096, 4, None),
            ("silu_and_mul_exact", "1", "1024", 16384, 14336, 16, None),
            ("silu_and_mul_exact", "1", "1024", 65536, 4096, 8, None),
            ("silu_and_mul_exact", "2", "2048", 16384, 14336, 4, None),
            // H the tile does not divide (the issue-13 widths): the masked entry, predicated
            // 16-byte loads; the zero-padded one as it ran there before, for the SASS comparison.
            ("silu_and_mul_masked", "1", "1024", 4096, 11008, 8, None),
            ("silu_and_mul_masked", "1", "4096", 4096, 11008, 4, None),
            ("silu_and_mul_masked", "2", "2048", 4096, 13824, 4, None),
            ("silu_and_mul_masked", "1", "1024", 4096, 18944, 16, None),
            ("silu_and_mul", "1", "1024", 4096, 11008, 8, None),
        ] {
            // up_ptr is gate_ptr + H elements of bf16.
            let ptrs = [("out_ptr", ALIGNED_PTR), ("gate_ptr", ALIGNED_PTR), ("up_ptr", ALIGNED_PTR + 2 * h as u64)];
            let ints = [("m", m), ("h", h), ("stride_x", 2 * h), ("stride_out", h)];
            let options = ffi_util::compile_options(Some(occupancy), warps);
            let what = format!(" for {m}x{h}, occupancy {occupancy}, warps {warps:?}");
            DEVICE.assert_div_hints_lower(entry, &["bf16", rows, block], &ptrs, &ints, options, &what);
        }
    }

    #[test]
    fn exact_entry_only_for_whole_tiles_and_i32_offsets() {
        assert!(exact_fits(65536, 4096, 1, 1024, 8192, 4096));
        assert!(exact_fits(16384, 14336, 4, 2048, 28672, 14336));
        assert!(!exact_fits(257, 4097, 1, 1024, 8194, 4097)); // partial column tile
        assert!(!exact_fits(1000, 14336, 16, 1024, 28672, 14336)); // partial row tile
        assert!(!exact_fits(131072, 16384, 1, 1024, 32768, 16384)); // x spans 2^32 elements
        let x = x_desc(DType::BF16, &[64, 2048], &[2048, 1]);
        let y = out_desc(DType::BF16, &[64, 1024], &[1024, 1]);
        assert!(plan(&y, &x, 1024, 1, 8, -1).unwrap().exact);
        assert!(!plan(&y, &x, 2048, 1, 8, -1).unwrap().exact); // a 2048 tile over h = 1024
    }

    #[test]
    fn masked_entry_for_every_other_shape_whose_padded_tiles_have_i32_offsets() {
        assert!(masked_fits(4096, 11008, 1, 1024, 22016, 11008)); // 11 column tiles, the last partial
                                                                  // Partial row and column tiles.
        assert!(masked_fits(37, 4097, 8, 512, 8194, 4097));
        // Row 1 ends exactly at offset 2^31 - 1; one element more per row does not fit.
        assert!(ffi_util::masked_offsets_fit(2, 1000, 1, 1024, &[i32::MAX - 1024]));
        assert!(!ffi_util::masked_offsets_fit(2, 1000, 1, 1024, &[i32::MAX - 1023]));
        assert!(!ffi_util::masked_offsets_fit(3, 1000, 4, 1024, &[1 << 30])); // rows 0..4 span 3 * 2^30
        assert!(!masked_fits(131072, 16385, 1, 1024, 32770, 16385)); // x spans 2^32 elements
        let x = x_desc(DType::BF16, &[37, 2000], &[2000, 1]);
        let y = out_desc(DType::BF16, &[37, 1000], &[1000, 1]);
        let p = plan(&y, &x, 1024, 4, 8, -1).unwrap();
        assert!(p.masked && !p.exact);
        let x = x_desc(DType::BF16, &[64, 2048], &[2048, 1]);
        let y = out_desc(DType::BF16, &[64, 1024], &[1024, 1]);
        let p = plan(&y, &x, 1024, 1, 8, -1).unwrap();
        assert!(p.exact && !p.masked); // whole tiles: the unmasked entry
    }

    #[test]
    fn entry_lowers_and_assembles_for_sm90() {
        let tiles = [("1", "4096"), ("2", "2048"), ("8", "512"), ("64", "16")];
        DEVICE.assert_each_lowers(
            &["silu_and_mul", "silu_and_mul_exact", "silu_and_mul_masked"],
            &tiles,
            &["exp2", "divf", "approx"],
        );
        let tail = MERGED_TAIL.to_string();
        for dtype in ["f32", "f16", "bf16"] {
            for &(rows, block) in &tiles[..3] {
                DEVICE.assert_lowers(
                    "silu_and_mul_masked_tail",
                    &[dtype, rows, block, &tail],
                    &["exp2", "divf", "approx"],
                );
            }
        }
    }
}
