//! rope's backward device code: rope's own entry (kernels/rope/kernel.rs, `rope_tokens`) with
//! `sin_sign` -1. The rotation is orthogonal, so the gradient of y = R(θ) x is dx = R(θ)ᵀ dy = R(-θ) dy:
//! per token and head, dx1 = dy1 c + dy2 s and dx2 = dy2 c - dy1 s, the heads of dq and of dk in one
//! launch, the position looked up as the forward does.
