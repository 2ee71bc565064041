//! LayerNorm backward device code: the norms' gradient entries (cutile_kernels/src/norm_backward.rs,
//! `norm_backward_rows` with CENTERED true, then `norm_backward_sum` once for dw and once for db).
//! With x̄ = mean(x), r = rsqrt(mean((x - x̄)^2) + eps) per row, x̂ = (x - x̄) * r and g = w * dy:
//! dx = r * (g - x̂ * mean(g * x̂) - mean(g)), dw = the sum over rows of dy * x̂, db = that of dy
//! (per-tile-block f32 partial rows, summed by the second entry).
