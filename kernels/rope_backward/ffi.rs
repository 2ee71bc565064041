//! C-ABI launcher of rope's gradient: `cutile_rope_backward` (op.py's CDEF).
//!
//!   int32_t cutile_rope_backward(const TensorDesc* out, const TensorDesc* dq, const TensorDesc* dk,
//!                                const TensorDesc* cos, const TensorDesc* sin, const TensorDesc* positions,
//!                                int32_t heads_first, int32_t occupancy, int32_t warps, int32_t heads,
//!                                int32_t device_id, uint64_t stream);
//!
//! dq (b, s, hq, d) and dk (b, s, hk, d), the gradients of rope's q and k parts; out (b, s, hq + hk,
//! d) receives q's gradient in its first hq heads and k's after them. Every rule of the descriptors,
//! tables, position ids and hints is rope's (kernels/rope/ffi.rs), whose plan and launch this is with
//! the rotation's sign -1.
use crate::ffi_util::{Element, FfiResult, TensorDesc};
use crate::rope::ffi::{plan_signed, Plan};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "rope_backward";

/// The export's arguments one for one (its C signature is fixed), validated by rope's plan_signed.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, dq: &TensorDesc, dk: &TensorDesc, cos: &TensorDesc, sin: &TensorDesc,
    positions: Option<&TensorDesc>, heads_first: i32, occupancy: i32, warps: i32, heads: i32,
) -> FfiResult<Plan> {
    plan_signed(KERNEL, ["dq", "dk"], out, dq, dk, cos, sin, positions, heads_first, -1.0, occupancy, warps, heads)
}

#[allow(clippy::too_many_arguments)]
fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dq: &TensorDesc, dk: &TensorDesc, cos: &TensorDesc, sin: &TensorDesc,
    positions: Option<&TensorDesc>, stream: &Arc<Stream>,
) -> FfiResult<()> {
    crate::rope::ffi::launch::<T>(p, out, dq, dk, cos, sin, positions, stream)
}

// `cutile_rope_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_rope_backward(out, dq, dk, cos, sin; optional positions; heads_first: i32, occupancy: i32, warps: i32, heads: i32));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc, DType};

    #[test]
    fn plan_is_ropes_with_the_sign_flipped_and_names_the_gradients() {
        let bshd = |h: i64| test_desc(DType::BF16, &[2, 5, h, 64], &[5 * h * 64, h * 64, 64, 1]);
        let table = test_desc(DType::F32, &[4096, 64], &[64, 1]);
        let p = plan(&bshd(40), &bshd(32), &bshd(8), &table, &table, None, 0, -1, -1, -1).unwrap();
        assert_eq!((p.sin_sign, p.tiles(), p.table), (-1.0, [32, 8, 32], DType::F32));
        let strided = test_desc(DType::BF16, &[2, 5, 32, 64], &[5 * 32 * 128, 32 * 128, 128, 2]);
        assert_fails(
            plan(&bshd(40), &strided, &bshd(8), &table, &table, None, 0, -1, -1, -1),
            rc::INVALID_ARGUMENT,
            "`dq` must be contiguous",
        );
        assert_fails(
            plan(&bshd(40), &bshd(32), &bshd(9), &table, &table, None, 0, -1, -1, -1),
            rc::INVALID_ARGUMENT,
            "[2, 5, 41, 64]",
        );
    }
}
