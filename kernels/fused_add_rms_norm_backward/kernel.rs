//! fused_add_rms_norm's backward device code: the norms' gradient entries (cutile_kernels/src/norm_backward.rs,
//! `norm_backward_rows` with CENTERED false and ADD true, then `norm_backward_sum`). For s = x + residual,
//! r = rsqrt(mean(s^2) + eps), ŝ = s * r, the output gradient dy of y = ŝ * w and dresidual of s (the
//! residual stream's): dx = dresidual_in = r * (w * dy - ŝ * mean(w * dy * ŝ)) + dresidual (one pass),
//! dw = the sum over rows of dy * ŝ (per-tile-block f32 partial rows, summed by the second entry).
