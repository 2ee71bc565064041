//! C-ABI launcher of LayerNorm's gradients: `cutile_layer_norm_backward` (op.py's CDEF).
//!
//!   int32_t cutile_layer_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
//!                                      const TensorDesc* weight, float eps, int32_t block, int32_t rows,
//!                                      int32_t occupancy, int32_t programs, int32_t warps,
//!                                      int32_t device_id, uint64_t stream);
//!
//! dy and x are (m, n), weight (n,) (op.py passes ones for a LayerNorm without one), all of one
//! dtype (f32, f16 or bf16) with contiguous last dims, at any row strides >= n; out is (m + 2, n):
//! rows [0, m) receive dx, row m dw and row m + 1 db (one output, so the kit's contract of one out
//! per export holds; op.py splits it). The bias does not enter the gradients. `block` is the tile
//! width, a power of two >= n (the rows are held whole: n <= 16384), `rows` the rows per tile;
//! `occupancy` and `warps` the compiler hints (1..=32; 4 or 8). `programs` > 0 is the persistent
//! grid (capped at the row tiles); -1 sizes it from the SM count (2 each). The kernel writes one row
//! of f32 partial sums of dw and one of db per tile block into a workspace of 2 x programs x n f32 on
//! the caller's stream, and a second kernel sums each half into out's row m, then m + 1; the
//! workspace is freed in stream order after them. -1 for the others picks the default. The device
//! code and the launcher are the norms' (cutile_kernels/src/norm_backward.rs, `Norm::Layer`). Every
//! descriptor is validated before anything touches the GPU.
// `cutile_layer_norm_backward`: KERNEL, plan() and the export, from the norms' (norm_backward::norm_backward_export!).
crate::norm_backward_export!(cutile_layer_norm_backward, "layer_norm_backward", crate::norm_backward::Norm::Layer);
