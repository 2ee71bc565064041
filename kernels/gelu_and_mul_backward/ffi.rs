//! C-ABI launcher of gelu_and_mul's gradient: `cutile_gelu_and_mul_backward` (op.py's CDEF).
//!
//!   int32_t cutile_gelu_and_mul_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
//!                                        int32_t block, int32_t rows, int32_t occupancy,
//!                                        int32_t device_id, uint64_t stream);
//!
//! x is (m, 2H) (gate | up), dy (m, H) and out (m, 2H), one dtype (f32, f16 or bf16), contiguous last
//! dims, any row strides >= the row length; out receives dx = (dgate | dup). `block` is the tile
//! width and `rows` the rows per tile block (powers of two), `occupancy` the CTAs per SM tileiras
//! should plan registers for (1..=32); -1 picks the default (gated_backward.rs's `row_plan`). Every
//! descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with a
//! message, never a launch. Plan, launch and export are the fused members' (gated_backward.rs,
//! `gated_fused_backward_export!` with `Act::GeluTanh`).
// `cutile_gelu_and_mul_backward`: KERNEL, plan(), launch() and the export (gated_backward.rs).
crate::gated_fused_backward_export!(cutile_gelu_and_mul_backward, "gelu_and_mul_backward", crate::gated::Act::GeluTanh);
