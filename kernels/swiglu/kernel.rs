//! swiglu device code: out[r, j] = silu(a[r, j]) * b[r, j], where a (the gate projection), b (the
//! up projection) and out are (m, H) tensors stored apart and silu(a) = a * sigmoid(a).
//!
//! A member of the gated family (cutile_kernels/src/gated.rs): its split entries (one row stride
//! per tensor) specialized for SiLU, silu_and_mul's computation with gate and up in two tensors.
//! T is f32, f16 or bf16 (in and out), the arithmetic f32; rows may be padded (stride >= H), the
//! last dim is contiguous. The entries, the tiling and why: gated.rs and silu_and_mul's NOTES.md.

/// The activation of the gate: the family's entries' ACT generic.
pub const ACT: crate::gated::Act = crate::gated::Act::Silu;
