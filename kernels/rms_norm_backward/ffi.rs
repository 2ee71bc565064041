//! C-ABI launcher of RMSNorm's gradients: `cutile_rms_norm_backward` (op.py's CDEF).
//!
//!   int32_t cutile_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
//!                                    const TensorDesc* weight, float eps, int32_t block, int32_t rows,
//!                                    int32_t occupancy, int32_t programs, int32_t warps,
//!                                    int32_t device_id, uint64_t stream);
//!
//! dy and x are (m, n), weight (n,), all of one dtype (f32, f16 or bf16) with contiguous last dims,
//! at any row strides >= n; out is (m + 1, n): rows [0, m) receive dx and row m receives dw (one output, so the kit's contract of one out per export holds; op.py splits it).
//! `block` is the tile width, a power of two >= n (the rows are held whole: n <= MAX_BLOCK), `rows`
//! the rows per tile; `occupancy` and `warps` the compiler hints (1..=32; 4 or 8). `programs` > 0 is
//! the persistent grid (capped at the row tiles); -1 sizes it from the SM count
//! (DEFAULT_BLOCKS_PER_SM each). The kernel writes one row of f32 partial sums of dw per tile block
//! into a workspace of programs x n f32 on the caller's stream, and a second kernel sums them into
//! out's row m; the workspace is freed in stream order after it. The device code and the launcher
//! are the norms' (cutile_kernels/src/norm_backward.rs, `Norm::Rms`; layer_norm_backward is
//! `Norm::Layer`). -1 for the others picks the
//! default. Every descriptor is validated before anything touches the GPU.
use crate::ffi_util::{FfiResult, TensorDesc};
use crate::norm_backward::{self, launch, Norm, Plan};

const KERNEL: &str = "rms_norm_backward";

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, w: &TensorDesc, eps: f32, block: i32, rows: i32, occupancy: i32,
    programs: i32, warps: i32,
) -> FfiResult<Plan> {
    norm_backward::plan(KERNEL, Norm::Rms, out, dy, x, w, eps, block, rows, occupancy, programs, warps)
}

// `cutile_rms_norm_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_rms_norm_backward(out, dy, x, weight; eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32, warps: i32));
