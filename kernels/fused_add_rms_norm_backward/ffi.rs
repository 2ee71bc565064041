//! C-ABI launcher of fused_add_rms_norm's gradients: `cutile_fused_add_rms_norm_backward` (op.py's CDEF).
//!
//!   int32_t cutile_fused_add_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy,
//!                                              const TensorDesc* dresidual, const TensorDesc* s,
//!                                              const TensorDesc* weight, float eps, int32_t block,
//!                                              int32_t rows, int32_t occupancy, int32_t programs,
//!                                              int32_t warps, int32_t device_id, uint64_t stream);
//!
//! dy (the gradient of y), dresidual (the gradient of the new residual s) and s = x + residual (the
//! forward's second output) are (m, n), weight (n,), all of one dtype (f32, f16 or bf16) with
//! contiguous last dims, at any row strides >= n; out is (m + 1, n): rows [0, m) receive dx (which is
//! also residual's gradient) and row m receives dw. The knobs and the two kernels are rms_norm_backward's
//! (cutile_kernels/src/norm_backward.rs, `plan_added`/`launch_added`: the rows kernel adds dresidual's
//! row to dx in the same pass). -1 picks the default. Every descriptor is validated before anything
//! touches the GPU.
use crate::ffi_util::{Element, FfiResult, TensorDesc};
use crate::norm_backward::{launch_added, plan_added, Plan};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "fused_add_rms_norm_backward";

/// The export's arguments one for one (its C signature is fixed), validated by norm_backward::plan_added.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, dr: &TensorDesc, s: &TensorDesc, w: &TensorDesc, eps: f32, block: i32,
    rows: i32, occupancy: i32, programs: i32, warps: i32,
) -> FfiResult<Plan> {
    plan_added(KERNEL, out, dy, dr, s, w, eps, block, rows, occupancy, programs, warps)
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, dr: &TensorDesc, s: &TensorDesc, w: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    launch_added::<T>(p, out, dy, Some(dr), s, w, stream)
}

// `cutile_fused_add_rms_norm_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_fused_add_rms_norm_backward(out, dy, dresidual, s, weight; eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: the second gradient's validation (the rest is the norms' family's, tested there;
    //! the ADD entry's lowering is norm_backward.rs's test).
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc, DType};

    #[test]
    fn plan_adds_the_residual_gradient_at_its_own_row_stride() {
        let (x, w) = (test_desc(DType::BF16, &[4, 8], &[8, 1]), test_desc(DType::BF16, &[8], &[1]));
        let out = test_desc(DType::BF16, &[5, 8], &[8, 1]);
        let dr = test_desc(DType::BF16, &[4, 8], &[16, 1]);
        assert_eq!(plan(&out, &x, &dr, &x, &w, 1e-6, -1, -1, -1, -1, -1).unwrap().stride_dr, Some(16));
        let cases = [
            (test_desc(DType::BF16, &[4, 7], &[7, 1]), "`dy` shape [4, 8] != `dresidual` shape [4, 7]"),
            (test_desc(DType::F16, &[4, 8], &[8, 1]), "share one dtype"),
            (test_desc(DType::BF16, &[4, 8], &[1, 4]), "contiguous in its last dim"),
            (test_desc(DType::BF16, &[4, 8], &[7, 1]), "rows would overlap"),
            (test_desc(DType::BF16, &[32], &[1]), "must have 2 dims"),
        ];
        for (dr, needle) in cases {
            assert_fails(plan(&out, &x, &dr, &x, &w, 1e-6, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, needle);
        }
    }
}
