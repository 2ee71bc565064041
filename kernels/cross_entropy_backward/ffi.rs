//! C-ABI launchers of cross-entropy's gradient (op.py's CDEF):
//!
//!   int32_t cutile_cross_entropy_backward(const TensorDesc* out, const TensorDesc* logits,
//!                                         const TensorDesc* target, const TensorDesc* dloss,
//!                                         int32_t ignore_index, float smoothing, int32_t block,
//!                                         int32_t rows, int32_t occupancy, int32_t warps,
//!                                         int32_t device_id, uint64_t stream);
//!   int32_t cutile_cross_entropy_train(const TensorDesc* out, const TensorDesc* losses,
//!                                      const TensorDesc* logits, const TensorDesc* target,
//!                                      const TensorDesc* scale, int32_t ignore_index, float smoothing,
//!                                      int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                                      int32_t device_id, uint64_t stream);
//!
//! logits (m, n) and target (m,) as cross_entropy takes them (kernels/cross_entropy/ffi.rs); out (m,
//! n) of the logits' dtype, the last dim contiguous, any row stride (it may be the logits themselves:
//! each row's elements are read before they are written), receives the gradient, each row scaled by
//! dloss / scale: f32 (m,) (one per row) or (1,) (one for every row). `_backward` is the kit's entry
//! (the gradient of the per-row losses); `_train` also writes each row's loss into losses ((m,) f32,
//! contiguous) in the same launch: the training op's forward, whose scale is 1 / (the rows counted)
//! for a mean. Every rule of the descriptors and knobs is cross_entropy's (`plan_rows`).
use crate::cross_entropy::ffi::{launch_rows, plan_rows, Plan};
use crate::ffi_util::{Element, FfiResult, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "cross_entropy_backward";

/// The export's arguments one for one (its C signature is fixed), validated by cross_entropy's plan_rows.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, dloss: &TensorDesc, ignore_index: i32, smoothing: f32,
    block: i32, rows: i32, occupancy: i32, warps: i32, form: i32,
) -> FfiResult<Plan> {
    let grad = Some(((out, "out"), (dloss, "dloss")));
    plan_rows(KERNEL, None, logits, target, grad, ignore_index, smoothing, (block, rows, occupancy, warps, form))
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, dloss: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    launch_rows::<T>(p, dloss, logits, target, out, dloss, stream) // no losses (LOSS off): dloss is unread there
}

// `cutile_cross_entropy_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_cross_entropy_backward(out, logits, target, dloss; ignore_index: i32, smoothing: f32, block: i32, rows: i32, occupancy: i32, warps: i32, form: i32));

/// `cutile_cross_entropy_train`: the losses and the gradient in one launch.
pub mod train {
    use super::*;

    const KERNEL: &str = "cross_entropy_train";

    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        out: &TensorDesc, losses: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, scale: &TensorDesc,
        ignore_index: i32, smoothing: f32, block: i32, rows: i32, occupancy: i32, warps: i32, form: i32,
    ) -> FfiResult<Plan> {
        let (loss, grad) = (Some((losses, "losses")), Some(((out, "out"), (scale, "scale"))));
        let knobs = (block, rows, occupancy, warps, form);
        plan_rows(KERNEL, loss, logits, target, grad, ignore_index, smoothing, knobs)
    }

    fn launch<T: Element>(
        p: &Plan, out: &TensorDesc, losses: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, scale: &TensorDesc,
        stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        launch_rows::<T>(p, losses, logits, target, out, scale, stream)
    }

    crate::export!(cutile_cross_entropy_train(out, losses, logits, target, scale; ignore_index: i32, smoothing: f32, block: i32, rows: i32, occupancy: i32, warps: i32, form: i32));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc, DType};

    #[test]
    fn plans_write_the_gradient_and_the_train_form_the_losses_too() {
        let x = test_desc(DType::BF16, &[4096, 128256], &[128256, 1]);
        let t = test_desc(DType::I64, &[4096], &[1]);
        let (one, per_row) = (test_desc(DType::F32, &[1], &[1]), test_desc(DType::F32, &[4096], &[1]));
        let p = plan(&x, &x, &t, &per_row, -100, 0.0, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.loss, p.grad, p.stride_s, p.row.stride_y), (false, true, 1, 128256));
        let p = train::plan(&x, &per_row, &x, &t, &one, -100, 0.1, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.loss, p.grad, p.stride_s, p.row.block), (true, true, 0, 4096));
    }

    #[test]
    fn plans_reject_bad_gradients_and_scales() {
        let x = test_desc(DType::F32, &[4, 16], &[16, 1]);
        let t = test_desc(DType::I32, &[4], &[1]);
        let d = test_desc(DType::F32, &[4], &[1]);
        let three = test_desc(DType::F32, &[3], &[1]);
        assert_fails(plan(&x, &x, &t, &three, -100, 0.0, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "1 or m=4");
        let half = test_desc(DType::F16, &[4], &[1]);
        assert_fails(plan(&x, &x, &t, &half, -100, 0.0, -1, -1, -1, -1, -1), rc::UNSUPPORTED_DTYPE, "f32");
        let narrow = test_desc(DType::F32, &[4, 8], &[8, 1]);
        assert_fails(plan(&narrow, &x, &t, &d, -100, 0.0, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "shape");
        let overlapping = test_desc(DType::F32, &[4, 16], &[8, 1]);
        assert_fails(plan(&overlapping, &x, &t, &d, -100, 0.0, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "overlap");
        let strided = test_desc(DType::F32, &[4], &[2]);
        assert_fails(
            train::plan(&x, &strided, &x, &t, &d, -100, 0.0, -1, -1, -1, -1, -1),
            rc::INVALID_ARGUMENT,
            "contiguous",
        );
    }

    #[test]
    fn the_gradient_goes_through_tma_only_into_whole_16_byte_rows() {
        // The GPU test's case, the gradient into 4097 of 4104 bf16 columns: G_TMA false (version 2,
        // smoothing: SMOOTH before it); 4096 columns in the same rows: true (version 1); a loss
        // alone (cross_entropy's plan, no gradient): true.
        let (t, d) = (test_desc(DType::I64, &[33], &[1]), test_desc(DType::F32, &[1], &[1]));
        let x = test_desc(DType::BF16, &[33, 4097], &[4104, 1]);
        let p = plan(&x, &x, &t, &d, -100, 0.1, 4096, 1, -1, -1, 2).unwrap();
        assert_eq!(p.flag_generics(), ["false", "true", "true", "true", "false"]);
        let losses = test_desc(DType::F32, &[33], &[1]);
        let p = crate::cross_entropy::ffi::plan(&losses, &x, &t, -100, 0.0, -1, -1, -1, -1, 1).unwrap();
        assert_eq!(p.flag_generics(), ["true", "false", "true", "true"]);
        let x = test_desc(DType::BF16, &[33, 4096], &[4104, 1]);
        let p = plan(&x, &x, &t, &d, -100, 0.0, 1024, 4, -1, -1, 1).unwrap();
        assert_eq!(p.flag_generics(), ["false", "true", "true", "true"]);
    }
}
