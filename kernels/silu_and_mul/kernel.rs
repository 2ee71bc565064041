//! silu_and_mul device code: out[r, j] = silu(x[r, j]) * x[r, H + j] for j < H, where x is
//! (m, 2H), out is (m, H) and silu(a) = a * sigmoid(a) = a / (1 + exp(-a)).
//!
//! A member of the gated family (cutile_kernels/src/gated.rs): its fused entries (gate and up, the
//! halves of x, as two pointers into the same rows with x's row stride) specialized for SiLU. T is
//! f32, f16 or bf16 (in and out), the arithmetic f32; rows may be padded (row stride >= 2H), the
//! last dim is contiguous. The entries, the tiling and why: gated.rs and this folder's NOTES.md.

/// The activation of the gate: the family's entries' ACT generic.
pub const ACT: crate::gated::Act = crate::gated::Act::Silu;
