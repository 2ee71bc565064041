//! C-ABI launcher of swiglu: `cutile_swiglu` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_swiglu(const TensorDesc* out, const TensorDesc* a, const TensorDesc* b,
//!                         int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                         int32_t device_id, uint64_t stream);
//!
//! a, b and out are (m, H), one dtype (f32, f16 or bf16), contiguous last dim, each with its own
//! row stride >= H; out may be a or b itself (in place: each element is read by the tile block that
//! writes it, before it writes it) but must not overlap either otherwise (a and b may alias: both are
//! only read). Entries as
//! silu_and_mul's: `swiglu_exact` when the tile divides (m, H) and every element offset fits i32
//! (`exact_fits`), else `swiglu_masked` where the padded tiles' offsets fit i32, else the
//! zero-padded `swiglu`. The knobs are silu_and_mul's, with its defaults (the same tiles over the
//! same bytes per element): `block` the tile width and `rows` the rows per tile block (powers of
//! two, -1: silu_and_mul's default_block / default_rows), `occupancy` 1..=32 and `warps` 4 or 8
//! (-1: the compiler's). Every descriptor is validated before anything touches the GPU: bad input
//! returns -2/-5/-6 with a message, never a launch.
use super::kernel::swiglu_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, RowPlan, TensorDesc};
use crate::silu_and_mul::ffi::{merged_tail_grid, merged_tail_launch, tiled_plan};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "swiglu";

/// A validated launch: sizes as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    /// The tile, the hints and the sizes: `n` is H, `stride_x` a's row stride, `stride_y` out's.
    pub row: RowPlan,
    /// b's row stride.
    pub stride_b: i32,
    /// Tile blocks: ceil(m / rows) * ceil(h / block).
    pub grid: u32,
    /// `swiglu_exact` runs: whole tiles, i32 offsets.
    pub exact: bool,
    /// `swiglu_masked` runs: not exact, but the padded tiles' offsets fit i32.
    pub masked: bool,
    /// Masked, and the few columns past the whole tiles go to the last whole column tile
    /// (`swiglu_masked_tail`; silu_and_mul's `merged_tail_grid`); `grid` counts h / block column
    /// tiles per row tile.
    pub merged_tail: bool,
}

/// Whether `swiglu_exact` may run: no partial tile, and the last element's offset of each tensor
/// (rows `strides` apart) fits i32.
pub fn exact_fits(m: i32, h: i32, rows: i32, block: i32, strides: [i32; 3]) -> bool {
    let last = |s: i32| (m as i64 - 1) * s as i64 + h as i64;
    m % rows == 0 && h % block == 0 && strides.into_iter().all(|s| last(s) <= i32::MAX as i64)
}

/// Whether `swiglu_masked` may run: each tensor's offsets fit i32 up to the last padded tile's.
pub fn masked_fits(m: i32, h: i32, rows: i32, block: i32, strides: [i32; 3]) -> bool {
    ffi_util::masked_offsets_fit(m, h, rows, block, &strides)
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

pub fn plan(
    out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32,
) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(a, "a", 2), (b, "b", 2), (out, "out", 2)])?;
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
                "`out` overlaps `{arg}`: swiglu writes a separate (m, H) tensor, or `{arg}` itself (in place)"
            )));
        }
    }

    let (row, grid) = tiled_plan(m, h, block, rows, occupancy, warps, stride_a, stride_out)?;
    let strides = [stride_a, stride_b, stride_out];
    let exact = exact_fits(m, h, row.rows, row.block, strides);
    let masked = !exact && masked_fits(m, h, row.rows, row.block, strides);
    let (merged_tail, grid) = merged_tail_grid(masked, &row, grid);
    Ok(Plan { dtype, row, stride_b, grid, exact, masked, merged_tail })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sa, stride_y: so, .. } = p.row;
    let sb = p.stride_b;
    let (y_ptr, a_ptr, b_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(a), ffi_util::device_ptr::<T>(b)) };
    let launch = p.row.launch::<T>(p.grid);
    // SAFETY: plan() checked shapes, strides, dtypes and that out overlaps neither input (or is one of
    // them: each element is read before its own tile block writes it); the memory
    // is PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    // The exact and masked entries additionally rely on plan()'s `exact_fits` and `masked_fits`.
    unsafe {
        if p.exact {
            launch.enqueue(device::swiglu_exact(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        } else if p.merged_tail {
            merged_tail_launch::<T>(&p.row, p.grid)
                .enqueue(device::swiglu_masked_tail(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        } else if p.masked {
            launch.enqueue(device::swiglu_masked(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        } else {
            launch.enqueue(device::swiglu(y_ptr, a_ptr, b_ptr, m, h, sa, sb, so), stream)
        }
    }
}

// `cutile_swiglu`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_swiglu(out, a, b; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation and entry choice, and the entries lowered to Tile IR for sm_90 (stage 1
    //! of the JIT, which needs no GPU) and assembled by tileiras when it is found, for every dtype.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, DeviceModule, ALIGNED_PTR};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "swiglu_device" };

    /// a, b and out 1 TiB apart (never overlapping unless a test says so), (m, h) in rows of `ld`.
    fn descs(dtype: DType, m: i64, h: i64, ld: [i64; 3]) -> [TensorDesc; 3] {
        [0, 1, 2].map(|i| TensorDesc::from_parts((i as u64 + 1) << 40, dtype, &[m, h], &[ld[i], 1]))
    }

    fn plan_of(d: &[TensorDesc; 3], block: i32, rows: i32) -> FfiResult<Plan> {
        let [a, b, out] = d;
        plan(out, a, b, block, rows, -1, -1)
    }

    #[test]
    fn plan_takes_three_row_strides_and_silu_and_mul_default_tiles() {
        let d = descs(DType::BF16, 257, 4097, [4100, 8200, 4104]);
        let Plan { dtype, row, stride_b, grid, exact, masked, merged_tail } = plan_of(&d, -1, -1).unwrap();
        // H = 4097: 512-wide column tiles, 8 rows; the 4097th column goes to the 8th column tile
        // (merged_tail) -> 33 * 8 tile blocks.
        assert_eq!((dtype, grid, exact, masked, merged_tail), (DType::BF16, 33 * 8, false, true, true));
        assert_eq!((row.m, row.n, row.stride_x, stride_b, row.stride_y), (257, 4097, 4100, 8200, 4104));
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (512, 8, None, None));
        let [a, b, out] = &d;
        let row = plan(out, a, b, 1024, 2, 4, 8).unwrap().row;
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (1024, 2, Some(4), Some(8)));
    }

    #[test]
    fn single_row_needs_no_row_stride_and_a_may_alias_b() {
        let [a, _, out] = descs(DType::F32, 1, 1, [0, 0, 0]);
        let p = plan(&out, &a, &a, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.stride_x, p.stride_b, p.row.stride_y, p.row.block, p.grid), (1, 1, 1, 16, 1));
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
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
            (at(2, ok[0].data + 4 * 31), 16, 1, "`out` overlaps `a`"), // out starts at a's last element
            (at(2, ok[1].data - 4 * 31), 16, 1, "`out` overlaps `b`"), // out ends at b's first element
            (ok, 24, 1, "power of two"),
            (ok, 16, 3, "power of two"),
            (ok, 16384, 2, "block*rows"),
            (with(1, &[32], &[1]), 16, 1, "`b` must have 2 dims"),
        ];
        for (d, block, rows, needle) in cases {
            assert_fails(plan_of(&d, block, rows), rc::INVALID_ARGUMENT, needle);
        }
        // Adjacent but disjoint: out right after a's last element.
        assert!(plan_of(&at(2, ok[0].data + 4 * 32), 16, 1).is_ok());
        // Column neighbours in one buffer (rows of 24: a, b and out each 8 of them) share no element.
        let mut halves = ok;
        for (i, d) in halves.iter_mut().enumerate() {
            *d = TensorDesc::from_parts(ok[0].data + 32 * i as u64, DType::F32, &[4, 8], &[24, 1]);
        }
        assert!(plan_of(&halves, 16, 1).is_ok());
        halves[2].data -= 4; // out one column to the left: its first column is b's last
        assert_fails(plan_of(&halves, 16, 1), rc::INVALID_ARGUMENT, "`out` overlaps `b`");
        // In place: out is a (or b) itself; the same start with another row stride still overlaps.
        assert!(plan_of(&at(2, ok[0].data), 16, 1).is_ok() && plan_of(&at(2, ok[1].data), 16, 1).is_ok());
        let mut wider = at(2, ok[0].data);
        wider[2] = TensorDesc::from_parts(wider[2].data, DType::F32, &[4, 8], &[16, 1]);
        assert_fails(plan_of(&wider, 16, 1), rc::INVALID_ARGUMENT, "`out` overlaps `a`");
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
    fn plan_rejects_integer_and_mixed_dtypes() {
        let d = descs(DType::I32, 4, 8, [8, 8, 8]);
        assert_fails(plan_of(&d, -1, -1), rc::UNSUPPORTED_DTYPE, "swiglu supports f32, f16, bf16");
        let mut d = descs(DType::F16, 4, 8, [8, 8, 8]);
        d[1].dtype = DType::BF16 as i32;
        assert_fails(plan_of(&d, -1, -1), rc::INVALID_ARGUMENT, "`a` is f16 but `b` is bf16");
    }

    #[test]
    fn plan_checks_the_occupancy_and_warps_hints() {
        let [a, b, out] = descs(DType::F32, 4, 8, [8, 8, 8]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| plan(&out, &a, &b, -1, -1, occupancy, warps));
    }

    #[test]
    fn plan_rejects_more_tile_blocks_than_a_1d_grid_holds() {
        // m = 2^31 - 1 rows: one column tile per row is exactly the limit, two are over it.
        let big = i32::MAX as i64;
        let d = descs(DType::BF16, big, 1, [1, 1, 1]);
        assert_eq!(plan_of(&d, 16, 1).unwrap().grid, i32::MAX as u32);
        let d = descs(DType::BF16, big, 32, [32, 32, 32]);
        assert_fails(plan_of(&d, 16, 1), rc::INVALID_ARGUMENT, "grid limit");
    }

    #[test]
    fn entry_choice_checks_every_tensors_offsets() {
        assert!(exact_fits(16384, 14336, 2, 2048, [14336; 3]));
        // A partial column tile, a partial row tile; then a and out fit but b's rows of 2^20
        // put its last element past i32.
        assert!(!exact_fits(16384, 11008, 1, 1024, [11008; 3]));
        assert!(!exact_fits(1000, 14336, 16, 1024, [14336; 3]));
        assert!(!exact_fits(4096, 4096, 1, 1024, [4096, 1 << 20, 4096]));
        // The masked entry: H = 11008 in 1024-wide tiles, unless out's rows of 2^20 pass i32.
        assert!(masked_fits(4096, 11008, 1, 1024, [11008; 3]));
        assert!(!masked_fits(4096, 11008, 1, 1024, [11008, 11008, 1 << 20]));
        let p = plan_of(&descs(DType::BF16, 4096, 4096, [4096, 1 << 20, 4096]), 1024, 1).unwrap();
        assert!(!p.exact && !p.masked); // the zero-padded entry
        let p = plan_of(&descs(DType::BF16, 64, 1024, [1024, 2048, 1024]), 1024, 1).unwrap();
        assert!(p.exact && !p.masked);
        let p = plan_of(&descs(DType::BF16, 37, 1000, [1000; 3]), 1024, 4).unwrap();
        assert!(p.masked && !p.exact);
    }

    /// The specializations the perf configs JIT at run time, with the launcher's divisibility hints
    /// (16-byte-aligned pointers and strides): the wide-access code the GPU runs.
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        for (entry, rows, block, m, h, occupancy) in [
            ("swiglu_exact", "1", "1024", 16384, 14336, 8),
            ("swiglu_exact", "2", "2048", 16384, 14336, 4),
            ("swiglu_exact", "1", "4096", 65536, 4096, 4),
            ("swiglu_masked", "1", "1024", 16384, 11008, 8),
            ("swiglu_masked", "1", "4096", 16384, 18944, 4),
            ("swiglu", "1", "1024", 16384, 11008, 8),
        ] {
            let ptrs = [("out_ptr", ALIGNED_PTR), ("a_ptr", ALIGNED_PTR << 1), ("b_ptr", ALIGNED_PTR << 2)];
            let ints = [("m", m), ("h", h), ("stride_a", h), ("stride_b", h), ("stride_out", h)];
            let options = ffi_util::compile_options(Some(occupancy), None);
            let what = format!(" for {m}x{h}, occupancy {occupancy}");
            DEVICE.assert_div_hints_lower(entry, &["bf16", rows, block], &ptrs, &ints, options, &what);
        }
    }

    #[test]
    fn entry_lowers_and_assembles_for_sm90() {
        let tiles = [("1", "4096"), ("2", "2048"), ("8", "512"), ("64", "16")];
        DEVICE.assert_each_lowers(&["swiglu", "swiglu_exact", "swiglu_masked"], &tiles, &["exp2", "divf", "approx"]);
        let tail = crate::silu_and_mul::ffi::MERGED_TAIL.to_string();
        for &(rows, block) in &tiles[..3] {
            DEVICE.assert_lowers("swiglu_masked_tail", &["bf16", rows, block, &tail], &["exp2", "divf", "approx"]);
        }
    }
}
