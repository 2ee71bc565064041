//! C-ABI launcher of gelu_and_mul: `cutile_gelu_and_mul` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_gelu_and_mul(const TensorDesc* out, const TensorDesc* x,
//!                               int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                               int32_t device_id, uint64_t stream);
//!
//! silu_and_mul's contract (its ffi.rs) with kernel.rs's activation: the gated family's fused plan
//! and launch (cutile_kernels/src/gated.rs).
use super::kernel::ACT;
use crate::ffi_util::{Element, FfiResult, TensorDesc};
use crate::gated::{self, Plan};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "gelu_and_mul";

pub fn plan(out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32) -> FfiResult<Plan> {
    gated::plan_fused(KERNEL, out, x, [block, rows, occupancy, warps])
}

fn launch<T: Element>(p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    gated::launch_fused::<T>(ACT, p, out, x, stream)
}

crate::export!(cutile_gelu_and_mul(out, x; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    /// The perf configs' specializations, with the launcher's divisibility hints, lowered and
    /// assembled for sm_90 (the family's tests, gated.rs, cover the plan and every entry).
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        let cases =
            [("fused_exact", "1", "2048", 16384, 16384, 8, None), ("fused_exact", "1", "1024", 256, 9216, 8, None)];
        crate::gated::testing::perf_specializations_lower(super::ACT, &cases);
    }
}
