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

// KERNEL, plan(), launch() and the export; gated.rs's tests cover this kernel's plan and perf configs.
crate::gated_export!(split, "swiglu", cutile_swiglu);
