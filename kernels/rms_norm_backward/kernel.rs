//! RMSNorm backward device code: the norms' gradient entries (cutile_kernels/src/norm_backward.rs,
//! `norm_backward_rows` with CENTERED false, then `norm_backward_sum`). With r = rsqrt(mean(x^2) + eps)
//! per row and x̂ = x * r, for an output gradient dy: dx = r * (w * dy - x̂ * mean(w * dy * x̂)),
//! dw = the sum over rows of dy * x̂ (per-tile-block f32 partial rows, summed by the second entry).
