//! C-ABI launcher of silu_and_mul: `cutile_silu_and_mul` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_silu_and_mul(const TensorDesc* out, const TensorDesc* x,
//!                               int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                               int32_t device_id, uint64_t stream);
//!
//! x is (m, 2H) and out is (m, H), one dtype (f32, f16 or bf16), contiguous last dim, any row
//! stride >= the row length; out must not overlap x. The gated family's fused plan and launch
//! (cutile_kernels/src/gated.rs: which entry runs, the defaults) with kernel.rs's activation.
//! `block` is the tile width and `rows` the rows per tile block (powers of two), `occupancy` the
//! CTAs per SM tileiras should plan registers for (1..=32), `warps` the worker warps per CTA (4 or
//! 8, what Tile IR 13.4 accepts); -1 picks the default (gated.rs's tile; the compiler's hints).
//! Every descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with
//! a message, never a launch.
use super::kernel::ACT;
use crate::ffi_util::{Element, FfiResult, TensorDesc};
use crate::gated::{self, Plan};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "silu_and_mul";

pub fn plan(out: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32) -> FfiResult<Plan> {
    gated::plan_fused(KERNEL, out, x, [block, rows, occupancy, warps])
}

fn launch<T: Element>(p: &Plan, out: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    gated::launch_fused::<T>(ACT, p, out, x, stream)
}

// `cutile_silu_and_mul`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_silu_and_mul(out, x; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! The family's tests (gated.rs) cover the plan and every entry; here, the specializations
    //! silu_and_mul's perf configs JIT at run time.
    use super::*;

    /// The perf configs' tiles, with the launcher's divisibility hints: the wide-access code the GPU
    /// runs (16-byte loads), lowered and assembled for sm_90.
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        gated::testing::perf_specializations_lower(
            ACT,
            &[
                ("fused", "1", "4096", 65536, 4096, 4, None),
                ("fused", "2", "4096", 65536, 4096, 4, None),
                ("fused", "2", "2048", 16384, 14336, 4, None),
                ("fused", "1", "1024", 16384, 14336, 16, None),
                ("fused", "1", "2048", 65536, 4096, 8, Some(8)),
                ("fused_exact", "1", "4096", 65536, 4096, 4, None),
                ("fused_exact", "2", "4096", 65536, 4096, 4, None),
                ("fused_exact", "1", "1024", 16384, 14336, 16, None),
                ("fused_exact", "1", "1024", 65536, 4096, 8, None),
                ("fused_exact", "2", "2048", 16384, 14336, 4, None),
                // H the tile does not divide (the issue-13 widths): the masked entry, predicated
                // 16-byte loads; the zero-padded one as it ran there before, for the SASS comparison.
                ("fused_masked", "1", "1024", 4096, 11008, 8, None),
                ("fused_masked", "1", "4096", 4096, 11008, 4, None),
                ("fused_masked", "2", "2048", 4096, 13824, 4, None),
                ("fused_masked", "1", "1024", 4096, 18944, 16, None),
                ("fused", "1", "1024", 4096, 11008, 8, None),
            ],
        );
    }

    #[test]
    fn bad_input_names_silu_and_mul() {
        let x = crate::ffi_util::TensorDesc::from_parts(0x10000, crate::ffi_util::DType::I32, &[4, 16], &[16, 1]);
        let y = crate::ffi_util::TensorDesc::from_parts(1 << 40, crate::ffi_util::DType::I32, &[4, 8], &[8, 1]);
        let rc = crate::ffi_util::rc::UNSUPPORTED_DTYPE;
        crate::ffi_util::assert_fails(plan(&y, &x, -1, -1, -1, -1), rc, "silu_and_mul supports f32, f16, bf16");
    }
}
