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
// `cutile_rms_norm_backward`: KERNEL, plan() and the export, from the norms' (norm_backward::norm_backward_export!).
crate::norm_backward_export!(cutile_rms_norm_backward, "rms_norm_backward", crate::norm_backward::Norm::Rms);
