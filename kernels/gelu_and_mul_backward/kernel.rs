//! gelu_and_mul backward device code: the gated family's gradient entry
//! (cutile_kernels/src/gated_backward.rs, `act_mul_backward` with ACT 1, the tanh GELU), which ffi.rs
//! launches with the halves of x = [gate | up] as g and u and the halves of dx = [dgate | dup] as dg
//! and du. For out = gelu(g) * u, gelu(g) = g * s with s = sigmoid(z), z = k (g + 0.044715 g^3) and
//! k = 2 sqrt(2/pi): dg = dy * u * (s + g * s * (1 - s) * z'(g)), du = dy * g * s, in x's layout.
