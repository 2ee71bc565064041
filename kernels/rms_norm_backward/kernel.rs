//! RMSNorm backward device code. With r = rsqrt(mean(x^2) + eps) per row and x̂ = x * r, the
//! gradients of y = x̂ * w given dy are
//!
//! ```text
//! dx[r, :] = r * (w * dy - x̂ * mean(w * dy * x̂))      dw = sum over rows of dy * x̂
//! ```
//!
//! Element type T is f32, f16 or bf16 (dy, x, w, dx and dw); everything inside is f32, r recomputed
//! from x (as FlashAttention recomputes scores: one f32 per row is cheaper to recompute than to
//! store and read back).
//!
//!   * `rms_norm_backward_rows` — n <= BLOCK, a persistent grid: each tile block loads w once,
//!     walks row tiles pid, pid + grid, ..., stores their dx and sums dy * x̂ over its rows in f32
//!     registers, then writes that sum as row pid of the f32 workspace `part` (grid x n). No
//!     atomics: every tile block owns its row of partial sums.
//!   * `rms_norm_backward_dw` — the second pass: tile block j sums column tile j of `part` over its
//!     grid rows (CHUNK rows at a time) and stores it, rounded to T, as dw.
//!
//! Partitions pad with zero and drop stores outside the view, so any m and n work without masks: a
//! padded row has x = 0 and dy = 0, so x̂ = 0 and it adds nothing to dw; padded columns likewise.
//! `unchecked_accesses`: row tiles stop at ceil(m / ROWS), the one column tile covers n <= BLOCK
//! (ffi.rs), the workspace rows stop at the grid and its column tiles at ceil(n / BLOCK).
#[cutile::module]
pub mod rms_norm_backward_device {
    use crate::device_util::tile_order::persistent_row_tiles;
    use crate::device_util::views::{strided_view, vector_view};
    use cutile::core::*;

    /// A per-row f32 value broadcast over the row tile.
    fn per_row<const ROWS: i32, const BLOCK: i32>(v: Tile<f32, { [ROWS] }>) -> Tile<f32, { [ROWS, BLOCK] }> {
        v.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK])
    }

    /// dx of the row tiles pid, pid + grid, ... into `dx_ptr` (m rows of n, `stride_dx` apart), and
    /// the sum of dy * x̂ over them into row pid of `part_ptr` (grid rows of n f32, contiguous).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_backward_rows<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        dx_ptr: *mut T, part_ptr: *mut f32, dy_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32,
        stride_dy: i32, stride_x: i32, stride_dx: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, n, stride_dy, tok);
        let x_view: Tensor<T, { [-1, -1] }> = strided_view(x_ptr, m, n, stride_x, tok);
        let dx_view: Tensor<T, { [-1, -1] }> = strided_view(dx_ptr, m, n, stride_dx, tok);
        let part_view: Tensor<f32, { [-1, -1] }> = strided_view(part_ptr, programs, n, n, tok);
        let w_view: Tensor<T, { [-1] }> = vector_view(w_ptr, n, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let x_part: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(tile);
        let mut dx_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dx_view.partition_full_mut(tile) };
        let mut sum_part: PartitionMut<f32, { [1, BLOCK] }> = unsafe { part_view.partition_full_mut(shape![1, BLOCK]) };
        let w_part: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);

        let w_row: Tile<T, { [BLOCK] }> = w_part.load([0i32]);
        let w: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(w_row.reshape(shape![1, BLOCK]).broadcast(tile));
        let n_scalar: f32 = convert_scalar(n);
        let n_f: Tile<f32, { [ROWS] }> = broadcast_scalar(n_scalar, shape![ROWS]);
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        let mut dw: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, 0i32]));
            let mean_sq: Tile<f32, { [ROWS] }> =
                divf(reduce_sum(x * x, 1i32), n_f, rounding::NearestEven, ftz::Disabled);
            let r: Tile<f32, { [ROWS, BLOCK] }> = per_row::<ROWS, BLOCK>(rsqrt(mean_sq + eps_t, ftz::Disabled));
            let x_hat: Tile<f32, { [ROWS, BLOCK] }> = x * r;
            let w_dy: Tile<f32, { [ROWS, BLOCK] }> = w * dy;
            let dot: Tile<f32, { [ROWS] }> = reduce_sum(w_dy * x_hat, 1i32);
            let c: Tile<f32, { [ROWS, BLOCK] }> =
                per_row::<ROWS, BLOCK>(divf(dot, n_f, rounding::NearestEven, ftz::Disabled));
            let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile((w_dy - x_hat * c) * r);
            dx_part.store(dx, [rb, 0i32]);
            dw = dw + dy * x_hat;
        }
        let sums: Tile<f32, { [BLOCK] }> = reduce_sum(dw, 0i32);
        sum_part.store(sums.reshape(shape![1, BLOCK]), [pid, 0i32]);
    }

    /// dw[j-th column tile] = the sum over the `programs` rows of `part_ptr` (n f32 each), rounded to T.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_backward_dw<T: ElementType, const CHUNK: i32, const BLOCK: i32>(
        dw_ptr: *mut T, part_ptr: *mut f32, programs: i32, n: i32,
    ) {
        let j: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        let part_view: Tensor<f32, { [-1, -1] }> = strided_view(part_ptr, programs, n, n, tok);
        let dw_view: Tensor<T, { [-1] }> = vector_view(dw_ptr, n, tok);
        let part: Partition<f32, { [CHUNK, BLOCK] }> = part_view.partition(shape![CHUNK, BLOCK]);
        let mut dw_part: PartitionMut<T, { [BLOCK] }> = unsafe { dw_view.partition_full_mut(shape![BLOCK]) };
        let mut acc: Tile<f32, { [CHUNK, BLOCK] }> = constant(0.0f32, shape![CHUNK, BLOCK]);
        for i in 0i32..(programs + CHUNK - 1) / CHUNK {
            acc = acc + part.load([i, j]);
        }
        let sums: Tile<f32, { [BLOCK] }> = reduce_sum(acc, 0i32);
        let dw: Tile<T, { [BLOCK] }> = convert_tile(sums);
        dw_part.store(dw, [j]);
    }
}
