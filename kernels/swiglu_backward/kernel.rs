//! swiglu backward device code: the gated family's gradient entry
//! (cutile_kernels/src/gated_backward.rs, `act_mul_backward` with ACT 0, silu), which ffi.rs launches with a (the
//! gate) and b (the up projection) as g and u, each at its own row stride, and the two row blocks of
//! the (2m, H) output as dg and du. For out = silu(a) * b and an output gradient dy, with
//! s = sigmoid(a): da = dy * b * s * (1 + a * (1 - s)), db = dy * a * s.
