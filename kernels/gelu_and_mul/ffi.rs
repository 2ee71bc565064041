//! C-ABI launcher of gelu_and_mul: `cutile_gelu_and_mul` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_gelu_and_mul(const TensorDesc* out, const TensorDesc* x,
//!                               int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                               int32_t device_id, uint64_t stream);
//!
//! silu_and_mul's contract (its ffi.rs) with kernel.rs's activation: the gated family's fused plan
//! and launch (cutile_kernels/src/gated.rs).

// KERNEL, plan(), launch() and the export; gated.rs's tests cover this kernel's plan and perf configs.
crate::gated_export!(fused, "gelu_and_mul", cutile_gelu_and_mul);
