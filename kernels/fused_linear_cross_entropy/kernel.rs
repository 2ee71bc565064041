//! fused linear cross-entropy has no device code of its own: its export (ffi.rs) runs, per chunk of
//! rows, matmul's entries (kernels/matmul/kernel.rs: `matmul_tiles` for the logits h_c Wᵀ, dh_c = G_c W
//! and dW (+)= G_cᵀ h_c with the accumulating epilogue, `matmul_split_partials` / `matmul_split_reduce`
//! where dh_c is split over K) and cross_entropy's training launch in place over the chunk's logits
//! (kernels/cross_entropy/kernel.rs, LOSS and GRAD on: each row's loss and the gradient
//! scale (softmax(x) - ε / V - (1 - ε) onehot(t)) written over its logits).
