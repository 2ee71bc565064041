//! C-ABI launcher of softmax: `cutile_softmax` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_softmax(const TensorDesc* out, const TensorDesc* x,
//!                          int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                          int32_t device_id, uint64_t stream);
//!
//! x and out are (m, n) with the same shape and dtype (f32, f16 or bf16), contiguous last dim, any
//! row stride >= n. `block` is the tile width (a power of two; n <= block selects the one-load
//! kernel, else the online two-pass one) and `rows` the rows per tile block; `occupancy` the CTAs
//! per SM tileiras should plan registers for (1..=32) and `warps` the worker warps per CTA (4 or 8,
//! what Tile IR 13.4 accepts). -1 for any of them picks the default (the compiler's, for the two
//! hints). Every descriptor is validated before anything touches the GPU: bad
//! input returns -2/-5/-6 with a message, never a launch.
use super::kernel::softmax_device as device;
use crate::ffi_util::{self, check_same_shape, to_i32, DType, Element, FfiResult, RowPlan, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "softmax";
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: beyond it registers spill.
const MAX_TILE_ELEMS: i32 = 1 << 16;
/// Widest row the default keeps whole in one tile (16K f32 = 64 KiB of registers per tile block).
const MAX_DEFAULT_ROW_BLOCK: i32 = 16384;
/// Column tile of the default looped form, for rows wider than MAX_DEFAULT_ROW_BLOCK.
const DEFAULT_LOOPED_BLOCK: i32 = 4096;

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
}

/// Whether `softmax_row_masked` may run: the row fits one tile that does not divide (m, n)
/// exactly, and every element offset of the padded tiles fits i32.
pub fn masked_fits(m: i32, n: i32, rows: i32, block: i32, stride_x: i32, stride_y: i32) -> bool {
    n <= block
        && !exact_fits(m, n, rows, block, stride_x, stride_y)
        && ffi_util::masked_offsets_fit(m, n, rows, block, stride_x)
        && ffi_util::masked_offsets_fit(m, n, rows, block, stride_y)
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

pub fn plan(out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(x, "x", 2), (out, "out", 2)])?;
    check_same_shape(x, "x", out, "out")?;
    ffi_util::check_last_dims_contiguous(&[(x, "x"), (out, "out")])?;
    let m = to_i32(x.shape[0], "m")?;
    let n = to_i32(x.shape[1], "n")?;
    let (block, rows) = ffi_util::row_tile(block, rows, default_block(n), |b| default_rows(b, m), 64, MAX_TILE_ELEMS)?;
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?;
    let (stride_x, stride_y) = (
        ffi_util::row_stride(x, n, "x", format_args!("n={n}"))?,
        ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?,
    );
    let exact = exact_fits(m, n, rows, block, stride_x, stride_y);
    let masked = masked_fits(m, n, rows, block, stride_x, stride_y);
    Ok(Plan { dtype, row: RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y }, exact, masked })
}

fn launch<T: Element>(p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    let (y_ptr, x_ptr) = unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(x)) };
    let launch = p.row.launch::<T>(p.row.row_tiles() as u32);
    let RowPlan { m, n, stride_x: sx, stride_y: sy, .. } = p.row;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    // softmax_row_exact and softmax_row_masked additionally rely on plan()'s `exact_fits` and
    // `masked_fits` (i32 offsets).
    unsafe {
        if p.exact {
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

// `cutile_softmax`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_softmax(out, x; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and both entries lowered to Tile IR for sm_90 (stage 1 of the JIT,
    //! which needs no GPU) and assembled by tileiras where the toolchain is present, for every
    //! dtype — a DSL mistake fails here, not on the GPU.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2, DeviceModule, ALIGNED_PTR};
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
        let Plan { dtype, row, exact, masked } = plan(&y, &x, -1, -1, -1, -1).unwrap();
        assert_eq!((dtype, exact, masked), (DType::F16, false, true));
        assert_eq!((row.m, row.n, row.stride_x, row.stride_y), (257, 4097, 5000, 4097));
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (8192, 1, None, None));
        assert_eq!(plan(&y, &x, 1024, -1, -1, -1).unwrap().row.rows, 8);
        assert_eq!(plan(&y, &x, 16384, 2, 4, -1).unwrap().row.occupancy, Some(4));
    }

    #[test]
    fn single_row_ignores_its_stride() {
        let x = desc2(DType::F32, &[1, 1000], &[0, 1]);
        assert_eq!(plan(&x, &x, -1, -1, -1, -1).unwrap().row.stride_x, 1000);
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
            (x, x, 24, 1, "power of two"),
            (x, x, -2, 1, "power of two"),
            (x, x, 8, 1, "power of two"),
            (x, x, 16, 3, "power of two"),
            (x, x, 65536, 2, "block*rows"),
            (x, desc2(DType::F16, &[4, 8], &[8, 1]), -1, -1, "share one dtype"),
        ];
        for (out, x, block, rows, needle) in cases {
            assert_fails(plan(&out, &x, block, rows, -1, -1), rc::INVALID_ARGUMENT, needle);
        }
    }

    #[test]
    fn plan_rejects_integer_dtype_as_unsupported() {
        let x = desc2(DType::I64, &[4, 8], &[8, 1]);
        assert_fails(plan(&x, &x, -1, -1, -1, -1), rc::UNSUPPORTED_DTYPE, "softmax supports f32, f16, bf16");
    }

    #[test]
    fn plan_checks_the_occupancy_and_warps_hints() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| plan(&x, &x, -1, -1, occupancy, warps));
        assert_eq!(plan(&x, &x, -1, -1, -1, 8).unwrap().row.warps, Some(8));
        assert_eq!(plan(&x, &x, -1, -1, -1, -1).unwrap().row.warps, None);
    }

    #[test]
    fn null_descriptor_is_minus5_before_any_device_work() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        // SAFETY: each pointer is null or a live descriptor; the call returns before the device is touched.
        unsafe {
            assert_eq!(cutile_softmax(std::ptr::null(), &x, -1, -1, -1, -1, 0, 0), rc::NULL_DESCRIPTOR);
            assert_eq!(cutile_softmax(&x, std::ptr::null(), -1, -1, -1, -1, 0, 0), rc::NULL_DESCRIPTOR);
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
        ] {
            let ptrs = [("y_ptr", ALIGNED_PTR), ("x_ptr", ALIGNED_PTR)];
            let ints = [("m", m), ("n", n), ("stride_x", n), ("stride_y", n)];
            let options = CompileOptions::default().occupancy(4);
            let what = format!(" for {m}x{n}");
            DEVICE.assert_div_hints_lower(entry, &[dtype, rows, block], &ptrs, &ints, options, &what);
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
        let p = plan(&x, &x, 1024, 4, 8, -1).unwrap();
        assert!(p.masked && !p.exact);
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
        assert!(plan(&x, &x, 1024, 4, 8, -1).unwrap().exact);
        assert!(!plan(&x, &x, 2048, 4, 8, -1).unwrap().exact);
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
        ];
        for dtype in ["f32", "f16", "bf16"] {
            for (entry, rows, block) in shapes {
                let ir = DEVICE.assert_lowers(entry, &[dtype, rows, block], &["exp2", "reduce"]);
                if entry == "softmax_row_masked" {
                    assert!(ir.contains("select"), "{entry}<{dtype}>: masked lanes must be set to -inf:\n{ir}");
                } else if entry != "softmax_row_exact" {
                    assert!(ir.contains("neg_inf"), "{entry}<{dtype}>: the x partition must pad with -inf:\n{ir}");
                }
            }
        }
    }
}
