//! gelu_and_mul device code: out[r, j] = gelu(x[r, j]) * x[r, H + j] for j < H, where x is
//! (m, 2H), out is (m, H) and gelu is the tanh form 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))
//! (GeGLU: Gemma's MLP, vLLM's gelu_tanh_and_mul). A member of the gated family
//! (cutile_kernels/src/gated.rs): its fused entries specialized for the tanh GELU, silu_and_mul's
//! tiles and entry choice; f32 inside, f32/f16/bf16 in and out.

/// The activation of the gate: the family's entries' ACT generic.
pub const ACT: crate::gated::Act = crate::gated::Act::GeluTanh;
