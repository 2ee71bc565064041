//! C-ABI launcher of swiglu: `cutile_swiglu` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_swiglu(const TensorDesc* out, const TensorDesc* a, const TensorDesc* b,
//!                         int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                         int32_t device_id, uint64_t stream);
//!
//! a, b and out are (m, H), one dtype (f32, f16 or bf16), contiguous last dim, each with its own
//! row stride >= H; out may be a or b itself (in place: each element is read by the tile block that
//! writes it, before it writes it) but must not overlap either otherwise (a and b may alias: both
//! are only read). The gated family's split plan and launch (cutile_kernels/src/gated.rs: which
//! entry runs, the defaults) with kernel.rs's activation; the knobs are silu_and_mul's, with its
//! defaults (the same tiles over the same bytes per element): `block` the tile width and `rows` the
//! rows per tile block (powers of two), `occupancy` 1..=32 and `warps` 4 or 8 (-1: the defaults).
//! Every descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with
//! a message, never a launch.
use super::kernel::ACT;
use crate::ffi_util::{Element, FfiResult, TensorDesc};
use crate::gated::{self, Plan};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "swiglu";

pub fn plan(
    out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32,
) -> FfiResult<Plan> {
    gated::plan_split(KERNEL, out, a, b, [block, rows, occupancy, warps])
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    gated::launch_split::<T>(ACT, p, out, a, b, stream)
}

// `cutile_swiglu`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_swiglu(out, a, b; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! The family's tests (gated.rs) cover the plan and every entry; here, the specializations
    //! swiglu's perf configs JIT at run time.
    use super::*;

    /// The perf configs' tiles, with the launcher's divisibility hints (16-byte-aligned pointers and
    /// strides): the wide-access code the GPU runs, lowered and assembled for sm_90.
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        gated::testing::perf_specializations_lower(
            ACT,
            &[
                ("split_exact", "1", "1024", 16384, 14336, 8, None),
                ("split_exact", "2", "2048", 16384, 14336, 4, None),
                ("split_exact", "1", "4096", 65536, 4096, 4, None),
                ("split_masked", "1", "1024", 16384, 11008, 8, None),
                ("split_masked", "1", "4096", 16384, 18944, 4, None),
                ("split", "1", "1024", 16384, 11008, 8, None),
            ],
        );
    }

    #[test]
    fn bad_input_names_swiglu() {
        let d =
            |i: u64| crate::ffi_util::TensorDesc::from_parts(i << 40, crate::ffi_util::DType::I32, &[4, 8], &[8, 1]);
        let rc = crate::ffi_util::rc::UNSUPPORTED_DTYPE;
        crate::ffi_util::assert_fails(plan(&d(3), &d(1), &d(2), -1, -1, -1, -1), rc, "swiglu supports f32, f16, bf16");
    }
}
