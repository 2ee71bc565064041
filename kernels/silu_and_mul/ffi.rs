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

// KERNEL, plan(), launch() and the export; gated.rs's tests cover this kernel's plan and perf configs.
crate::gated_export!(fused, "silu_and_mul", cutile_silu_and_mul);
