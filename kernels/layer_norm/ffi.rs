//! C-ABI launcher of layer_norm: `cutile_layer_norm` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_layer_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
//!                             const TensorDesc* bias, float eps, int32_t block, int32_t rows,
//!                             int32_t occupancy, int32_t programs, int32_t tail, int32_t warps,
//!                             int32_t form, int32_t device_id, uint64_t stream);
//!
//! x and out are (m, n) with the same shape and dtype (f32, f16 or bf16), contiguous last dim, any
//! row stride >= n. `weight` and `bias` are optional: a null pointer means absent (y is not scaled,
//! resp. not shifted; `export!`'s `optional` descriptors), otherwise (n,) contiguous in x's dtype.
//! x and out are mandatory (null: -5 naming them). The kernel is compiled per presence of each
//! (const generics HAS_W, HAS_B), so an absent one costs no load. `block` is the tile width (a
//! power of two; n <= block selects the one-load kernel, else the two-pass one) and `rows` the rows
//! per tile block; `occupancy` the CTAs per SM tileiras should plan registers for (1..=32), `warps`
//! the worker warps per CTA (4 or 8). -1 for any of them picks the default (the compiler's, for
//! occupancy and warps). `programs` > 0 (with n <= block,
//! or n <= block + tail) launches the persistent kernel on that many tile blocks (the caller sizes it from the SM count);
//! rows off 16-byte boundaries run the aligned entry's persistent form on a multiple of VEC tile
//! blocks, with a workspace for w and b (rms_norm's ffi.rs header has the rule, and the fallback
//! where it cannot run);
//! -1 or 0 launches one tile block per row tile; -2 too, through the pointer-tile entries even
//! where the tile divides (rms_norm's POINTER_ENTRIES; unmasked, `layer_norm_row_exact`, where a
//! whole-row tile divides (m, n)). `tail` > 0 holds each row as a body
//! and a tail tile (`layer_norm_row_tail`; rms_norm's rule: a power of two in [16, block] with
//! block < n <= block + tail; with -2, through pointer tiles, `layer_norm_row_tail_masked`, where
//! their i32 offsets fit), -1 or 0 none. `form` 1: rms_norm's rule, the persistent tail through
//! pointer tiles that loads the next row tile ahead (`layer_norm_row_tail_prefetch`). Every
//! descriptor is validated before
//! anything touches the GPU: bad input returns -2/-5/-6 with a message, never a launch.
use super::kernel::layer_norm_device as device;
// The tiling, its defaults (the same bytes per element, NOTES.md) and the masked entries' rule are
// rms_norm's.
use crate::ffi_util::{self, check_same_shape, invalid, Element, FfiResult, RowPlan, TensorDesc};
pub use crate::rms_norm::ffi::{default_block, default_rows, masked_fits};
use crate::rms_norm::ffi::{rows_plan, Plan as NormPlan};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "layer_norm";

/// A validated launch: rms_norm's (dtype, tile, sizes, strides, eps, persistent grid, masked
/// entries; its fields read through), plus whether weight and bias were given (the kernel's HAS_W,
/// HAS_B).
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub norm: NormPlan,
    pub has_w: bool,
    pub has_b: bool,
}

impl std::ops::Deref for Plan {
    type Target = NormPlan;
    fn deref(&self) -> &NormPlan {
        &self.norm
    }
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, x: &TensorDesc, weight: Option<&TensorDesc>, bias: Option<&TensorDesc>, eps: f32, block: i32,
    rows: i32, occupancy: i32, programs: i32, tail: i32, warps: i32, form: i32,
) -> FfiResult<Plan> {
    let params: Vec<(&TensorDesc, &str)> =
        [(weight, "weight"), (bias, "bias")].into_iter().filter_map(|(d, arg)| Some((d?, arg))).collect();
    let mut tensors = vec![(x, "x", 2), (out, "out", 2)];
    tensors.extend(params.iter().map(|&(d, arg)| (d, arg, 1)));
    let dtype = ffi_util::check_float_tensors(KERNEL, &tensors)?;
    check_same_shape(x, "x", out, "out")?;
    for &(d, arg) in &params {
        if d.shape[0] != x.shape[1] {
            return Err(invalid(format!("`{arg}` has {} elements but x has n={} columns", d.shape[0], x.shape[1])));
        }
    }
    let mut contiguous = vec![(x, "x"), (out, "out")];
    contiguous.extend(params.iter().copied());
    ffi_util::check_last_dims_contiguous(&contiguous)?;
    let norm = rows_plan(dtype, x, out, eps, block, rows, occupancy, programs, tail, warps, form)?;
    Ok(Plan { norm, has_w: weight.is_some(), has_b: bias.is_some() })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, x: &TensorDesc, weight: Option<&TensorDesc>, bias: Option<&TensorDesc>,
    stream: &Arc<Stream>,
) -> FfiResult<()> {
    // An absent weight or bias passes x's pointer, which the kernel compiled without it never reads.
    let (y_ptr, x_ptr, w_ptr, b_ptr) = unsafe {
        (
            ffi_util::device_ptr::<T>(out),
            ffi_util::device_ptr::<T>(x),
            ffi_util::device_ptr::<T>(weight.unwrap_or(x)),
            ffi_util::device_ptr::<T>(bias.unwrap_or(x)),
        )
    };
    // One tile block per row tile, or the persistent grid plan() capped at the row tiles; the
    // generics T, ROWS, BLOCK, (the tail entry's TAIL,) then HAS_W, HAS_B (and the aligned entry's VEC,
    // EDGE).
    let grid = p.programs.unwrap_or(p.row.row_tiles());
    let mut launch = p.row.launch::<T>(grid as u32);
    launch.generics.extend(p.tail.map(|t| t.to_string()));
    launch.generics.extend([p.has_w.to_string(), p.has_b.to_string()]);
    launch.generics.extend(ffi_util::aligned_generics(p.aligned));
    let RowPlan { m, n, stride_x: sx, stride_y: sy, .. } = p.row;
    let eps = p.eps;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    // The masked entries additionally rely on plan()'s `masked_fits` / `pointer_fits` (i32 offsets),
    // the exact one also on `Plan::exact` (n = block, m a multiple of rows: every tile inside),
    // the aligned ones on `aligned_rows_vec` (i32 offsets, 16-byte-aligned bases); the aligned
    // persistent one also on its workspace (w and b): allocated here on the caller's stream for exactly
    // the grid launched (a 16-byte-aligned slice per tile block: block >= 16), its slice offsets in
    // i32 (`restage_grid_cap` in plan()), freed in stream order after the kernel.
    unsafe {
        if p.prefetch {
            launch.enqueue(device::layer_norm_row_tail_prefetch(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if p.tail.is_some() && p.masked {
            launch.enqueue(device::layer_norm_row_tail_masked(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if p.tail.is_some() {
            launch.enqueue(device::layer_norm_row_tail(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if p.aligned.is_some() && p.programs.is_some() {
            // each tile block's w and b at its rows' body columns (device_util::views::restage; two slices
            // per tile block, also where HAS_W or HAS_B is false: the kernel's offsets assume both)
            let bytes = 2 * ffi_util::restage_bytes::<T>(grid, &p.row);
            let ws = ffi_util::StreamAlloc::new(bytes, stream, "weight and bias workspace")?;
            let ws_ptr = DevicePointer::<T>::from_cu_deviceptr(ws.ptr);
            let entry =
                device::layer_norm_row_aligned_persistent(y_ptr, x_ptr, w_ptr, b_ptr, ws_ptr, m, n, sx, sy, eps);
            launch.enqueue(entry, stream)?;
            ws.free()
        } else if p.aligned.is_some() {
            launch.enqueue(device::layer_norm_row_aligned(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if p.programs.is_some() {
            launch.enqueue(device::layer_norm_row_persistent(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if p.exact {
            launch
                .enqueue(device::layer_norm_row_exact(y_ptr, x_ptr, w_ptr, b_ptr, sx, sy, 1.0 / n as f32, eps), stream)
        } else if p.masked && n <= p.row.block {
            launch.enqueue(device::layer_norm_row_masked(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if p.masked {
            launch.enqueue(device::layer_norm_looped_masked(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else if n <= p.row.block {
            launch.enqueue(device::layer_norm_row(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        } else {
            launch.enqueue(device::layer_norm_looped(y_ptr, x_ptr, w_ptr, b_ptr, m, n, sx, sy, eps), stream)
        }
    }
}

// `cutile_layer_norm`: the descriptors (weight and bias may be null), then plan(), the caller's
// stream and launch() (ffi_util::export!).
crate::export!(cutile_layer_norm(out, x; optional weight, bias; eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32, tail: i32, warps: i32, form: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and every entry lowered to Tile IR for sm_90 (stage 1 of the JIT,
    //! which needs no GPU) for every dtype and affine form — a DSL mistake fails here, not on the GPU.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2, test_rows, DType, DeviceModule, ALIGNED_PTR};
    use cutile::tile_kernel::CompileOptions;

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "layer_norm_device" };
    /// The row entries' pointer arguments.
    const PTRS: [&str; 4] = ["y_ptr", "x_ptr", "w_ptr", "b_ptr"];
    const ENTRIES: [&str; 9] = [
        "layer_norm_row",
        "layer_norm_row_exact",
        "layer_norm_row_persistent",
        "layer_norm_row_tail",
        "layer_norm_looped",
        "layer_norm_row_masked",
        "layer_norm_looped_masked",
        "layer_norm_row_tail_masked",
        "layer_norm_row_tail_prefetch",
    ];

    /// `entry`'s generics for `dtype`, a small tile (`rows` x `block`, the tail entry's TAIL a
    /// quarter of it) and the affine flags.
    fn generics<'a>(
        entry: &str, dtype: &'a str, rows: &'a str, block: &'a str, w: &'a str, b: &'a str,
    ) -> Vec<&'a str> {
        let sizes = match (entry.contains("_tail"), block) {
            (true, "1024") => "1024/256",
            (true, "256") => "256/64",
            _ => block,
        };
        ffi_util::row_generics(dtype, rows, sizes, &[w, b])
    }

    #[test]
    fn plan_takes_row_strides_optional_params_and_defaults() {
        let x = desc2(DType::F16, &[257, 4097], &[5000, 1]);
        let (y, w) = test_rows(DType::F16, 257, 4097);
        let p = plan(&y, &x, Some(&w), None, 1e-5, -1, -1, -1, -1, -1, -1, 0).unwrap();
        assert_eq!(
            (p.dtype, p.eps, p.programs, p.masked, p.has_w, p.has_b),
            (DType::F16, 1e-5, None, true, true, false)
        );
        assert_eq!((p.row.m, p.row.n, p.row.stride_x, p.row.stride_y), (257, 4097, 5000, 4097));
        assert_eq!((p.row.block, p.row.rows, p.row.occupancy, p.row.warps), (8192, 1, None, None));
        let p = plan(&y, &x, None, Some(&w), 1e-5, 1024, -1, 4, -1, -1, -1, 0).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.row.occupancy, p.has_w, p.has_b), (1024, 8, Some(4), false, true));
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (x, w) = test_rows(DType::F32, 4, 8);
        let short = desc2(DType::F32, &[7], &[1]);
        let strided = desc2(DType::F32, &[8], &[2]);
        let cases = [
            (desc2(DType::F32, &[4, 9], &[9, 1]), Some(&w), Some(&w), 16, "shape"),
            (x, Some(&short), Some(&w), 16, "`weight` has 7 elements"),
            (x, None, Some(&short), 16, "`bias` has 7 elements"),
            (x, Some(&w), Some(&strided), 16, "`bias` must be contiguous"),
            (desc2(DType::F32, &[4, 8], &[1, 4]), None, None, 16, "contiguous"),
            (desc2(DType::F32, &[4, 8], &[4, 1]), None, None, 16, "overlap"),
            (x, None, None, 24, "power of two"),
        ];
        for (out, w, b, block, needle) in cases {
            assert_fails(plan(&out, &x, w, b, 1e-5, block, 1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, needle);
        }
        let half = desc2(DType::F16, &[8], &[1]);
        assert_fails(
            plan(&x, &x, None, Some(&half), 1e-5, -1, -1, -1, -1, -1, -1, 0),
            rc::INVALID_ARGUMENT,
            "one dtype",
        );
        assert_fails(plan(&x, &x, None, None, f32::NAN, -1, -1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, "eps=NaN");
    }

    #[test]
    fn plan_rejects_integer_dtype_as_unsupported() {
        let x = desc2(DType::I32, &[4, 8], &[8, 1]);
        let msg = "layer_norm supports f32, f16, bf16";
        assert_fails(plan(&x, &x, None, None, 1e-5, -1, -1, -1, -1, -1, -1, 0), rc::UNSUPPORTED_DTYPE, msg);
    }

    #[test]
    fn plan_checks_the_occupancy_and_warps_hints() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        ffi_util::assert_hints_checked(true, |occupancy, warps| {
            plan(&x, &x, None, None, 1e-5, -1, -1, occupancy, -1, -1, warps, 0)
        });
        assert_eq!(plan(&x, &x, None, None, 1e-5, -1, -1, -1, -1, -1, 4, 0).unwrap().row.warps, Some(4));
    }

    #[test]
    fn plan_caps_the_persistent_grid_and_runs_masked_entries_only_for_partial_tiles() {
        let (x, w) = test_rows(DType::F16, 100, 1000);
        let p = |block, programs| plan(&x, &x, Some(&w), Some(&w), 1e-5, block, 8, 4, programs, -1, -1, 0);
        assert_eq!(p(1024, 528).unwrap().programs, Some(13)); // ceil(100 / 8)
        assert_eq!(p(1024, 0).unwrap().programs, None);
        assert_fails(p(512, 528), rc::INVALID_ARGUMENT, "needs n=1000 <= block=512");
        assert!(p(1024, -1).unwrap().masked);
        assert!(!p(1024, 528).unwrap().masked); // persistent
        assert!(!masked_fits(4096, 4096, 2, 4096, 4096, 4096)); // whole tiles: partition entries
        assert!(!masked_fits(131072, 16385, 1, 32768, 16385, 16385)); // x spans 2^31 elements
    }

    /// The perf configs' likely specializations, compiled as the launcher compiles them at run time:
    /// every pointer and integer argument carries its divisibility (16-byte-aligned pointers, sizes
    /// and strides divisible by 16), so tileiras can emit 16-byte loads.
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        for (entry, rows, block, m, n) in [
            ("layer_norm_row", "1", "8192", 32768, 8192),
            ("layer_norm_row_persistent", "1", "8192", 32768, 8192),
            ("layer_norm_row", "8", "1024", 65536, 768),
            ("layer_norm_row_masked", "8", "1024", 65536, 768),
            ("layer_norm_row_masked", "1", "8192", 32768, 8192),
            ("layer_norm_row_masked", "2", "4096", 16384, 3584),
            ("layer_norm_looped", "2", "4096", 4096, 16384),
            ("layer_norm_looped_masked", "2", "4096", 4096, 11008),
            ("layer_norm_looped_masked", "1", "8192", 16384, 18944),
            // The body-and-tail tiles (BLOCK/TAIL): 5120 = 4096 + 1024, 11008 in 8192 + 4096.
            ("layer_norm_row_tail", "1", "4096/1024", 16384, 5120),
            ("layer_norm_row_tail", "1", "8192/4096", 4096, 11008),
            // ... and through pointer tiles (rms_norm's NOTES.md, "A body and a tail through pointer tiles")
            ("layer_norm_row_tail_masked", "2", "4096/1024", 16384, 5120),
            ("layer_norm_row_tail_masked", "1", "8192/4096", 16384, 11008),
        ] {
            let generics = ffi_util::row_generics("bf16", rows, block, &["true", "true"]);
            DEVICE.assert_row_spec_lowers(entry, &generics, &PTRS, m, n, CompileOptions::default().occupancy(4), "");
        }
        // the decode batch (bf16 256 x 4096, one-row tiles at occupancy 2), masked and exact (rms_norm's
        // NOTES.md, "Decode rows without masks")
        for entry in ["layer_norm_row_masked", "layer_norm_row_exact"] {
            let ptrs: Vec<(&str, u64)> = PTRS.iter().map(|&p| (p, ALIGNED_PTR)).collect();
            let sizes = [("m", 256), ("n", 4096), ("stride_x", 4096), ("stride_y", 4096)];
            let ints: Vec<(&str, i32)> =
                sizes.into_iter().filter(|(arg, _)| entry.ends_with("masked") || arg.starts_with("stride")).collect();
            let generics = ffi_util::row_generics("bf16", "1", "4096", &["true", "true"]);
            let options = CompileOptions::default().occupancy(2);
            DEVICE.assert_div_hints_lower(entry, &generics, &ptrs, &ints, options, " for 256x4096 at occupancy 2");
        }
        // the prefetching tail over 8 warps at occupancy 2 (5120 in 2-row tiles; 8192 as 4096 + 4096)
        for (rows, block, m, n) in [("2", "4096/1024", 16384, 5120), ("1", "4096/4096", 32768, 8192)] {
            let (options, entry) = (ffi_util::compile_options(Some(2), Some(8)), "layer_norm_row_tail_prefetch");
            let generics = ffi_util::row_generics("bf16", rows, block, &["true", "true"]);
            DEVICE.assert_row_spec_lowers(entry, &generics, &PTRS, m, n, options, ", 8 warps");
        }
    }

    #[test]
    fn aligned_entry_for_rows_off_16_byte_boundaries_with_or_without_weight_and_bias() {
        let (x, w) = test_rows(DType::BF16, 5, 4097);
        let p = plan(&x, &x, Some(&w), None, 1e-5, 8192, 1, 4, -2, -1, -1, 0).unwrap();
        assert_eq!((p.aligned, p.has_w, p.has_b), (Some(8), true, false));
        // A persistent grid: the aligned entry's, a multiple of VEC tile blocks (rms_norm's aligned_grid).
        let big = desc2(DType::BF16, &[1000, 4097], &[4097, 1]);
        let p = plan(&big, &big, None, None, 1e-5, 4096, 1, 4, 100, -1, -1, 0).unwrap();
        assert_eq!((p.aligned, p.programs), (Some(8), Some(96)));
    }

    #[test]
    fn aligned_entry_lowers_and_assembles_for_sm90() {
        let params = [("f16", "1", "8192", "true", "true"), ("f32", "2", "4096", "false", "true")];
        // bf16 1 x 4096 with both: the persistent tile `variants` offers at 16384 x 4097
        for (dtype, rows, block, w, b) in [("bf16", "1", "4096", "true", "true")].into_iter().chain(params) {
            for (entry, ptrs) in [
                ("layer_norm_row_aligned", &["y_ptr", "x_ptr", "w_ptr", "b_ptr"][..]),
                ("layer_norm_row_aligned_persistent", &["y_ptr", "x_ptr", "w_ptr", "b_ptr", "ws_ptr"]),
            ] {
                DEVICE.assert_aligned_lowers(entry, dtype, rows, block, &[w, b], ptrs);
            }
        }
    }

    #[test]
    fn every_entry_lowers_to_tile_ir_for_sm90() {
        for dtype in ["f32", "f16", "bf16"] {
            for entry in ENTRIES {
                let (rows, block) = if entry.contains("looped") { ("2", "512") } else { ("4", "256") };
                DEVICE.assert_lowers(entry, &generics(entry, dtype, rows, block, "true", "true"), &["rsqrt", "reduce"]);
            }
        }
    }

    /// Without weight or bias nothing is loaded from their pointers: one load fewer per absent one
    /// in the IR of the whole-row entries (x, w, b), and the entries still lower.
    #[test]
    fn absent_weight_and_bias_are_not_loaded() {
        for entry in ENTRIES {
            let loads = |w: &str, b: &str| {
                let ir = DEVICE.assert_lowers(entry, &generics(entry, "f16", "1", "1024", w, b), &["rsqrt"]);
                ir.matches("load_").count()
            };
            let (both, no_w, no_b, none) =
                (loads("true", "true"), loads("false", "true"), loads("true", "false"), loads("false", "false"));
            assert!(both > no_w && no_w == no_b && no_b > none, "{entry}: loads {both} {no_w} {no_b} {none}");
        }
    }

    /// rms_norm's rule: the unmasked entry where a pointer variant's whole-row tile divides (m, n).
    #[test]
    fn exact_entry_where_the_pointer_tile_divides() {
        let (x, w) = test_rows(DType::BF16, 256, 4096);
        assert!(plan(&x, &x, Some(&w), Some(&w), 1e-5, 4096, 1, 2, -2, -1, -1, 0).unwrap().exact);
        // padded columns: the masked entry
        assert!(!plan(&x, &x, None, None, 1e-5, 8192, 1, 2, -2, -1, -1, 0).unwrap().exact);
        // no pointer variant: the partition entry
        assert!(!plan(&x, &x, None, None, 1e-5, 4096, 1, 2, 0, -1, -1, 0).unwrap().exact);
    }

    #[test]
    fn form_1_selects_the_prefetching_tail() {
        let (x, w) = test_rows(DType::BF16, 100, 11008);
        assert!(plan(&x, &x, Some(&w), None, 1e-5, 8192, 1, 2, 264, 4096, 8, 1).unwrap().prefetch);
        assert!(!plan(&x, &x, Some(&w), None, 1e-5, 8192, 1, 2, 264, 4096, 8, -1).unwrap().prefetch);
        let r = plan(&x, &x, Some(&w), None, 1e-5, 8192, 1, 2, 0, 4096, 8, 1);
        assert_fails(r, rc::INVALID_ARGUMENT, "variant form=1: form 1 is the persistent body-and-tail loop");
    }
}
