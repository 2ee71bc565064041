//! silu_and_mul backward device code: the gated family's gradient entry
//! (cutile_kernels/src/gated_backward.rs, `act_mul_backward` with ACT 0, silu), which ffi.rs launches with the
//! halves of x = [gate | up] as g and u and the halves of dx = [dgate | dup] as dg and du. For
//! out = silu(g) * u and an output gradient dy, with s = sigmoid(g): dg = dy * u * s * (1 + g * (1 - s)),
//! du = dy * g * s, in x's layout.
