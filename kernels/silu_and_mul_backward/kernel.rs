//! silu_and_mul backward device code. For out = silu(g) * u over the halves g = x[:, :H] and
//! u = x[:, H:] of x (m, 2H), with s = sigmoid(g) and an output gradient dy (m, H):
//!
//! ```text
//! dg = dy * u * s * (1 + g * (1 - s))        du = dy * g * s
//! ```
//!
//! written as the two halves of dx (m, 2H), x's layout. T is f32, f16 or bf16 (dy, x and dx), the
//! arithmetic f32; s as the forward computes it (exp2 and the approximate reciprocal: gated.rs's
//! `act_mul`). Pure streaming, one ROWS x BLOCK tile of (m, H) per tile block (the column tile
//! fastest in the 1-D grid): it loads dy, g and u there once and stores dg and du once. The host
//! passes g's and u's pointers (x and x + H) and dg's and du's (dx and dx + H), each with its tensor's
//! row stride. Partitions pad with zero and drop stores outside (m, H), so any m and H work without
//! masks. `unchecked_accesses`: the launcher launches row tiles x column tiles tile blocks and the
//! kernel decodes the column tiles from the same H, so every tile index is inside its partition.
#[cutile::module]
pub mod silu_and_mul_backward_device {
    use crate::device_util::views::strided_view;
    use cutile::core::*;

    /// dg and du of tile block (row tile, column tile) = (id / column tiles, id % column tiles).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul_backward<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        dg_ptr: *mut T, du_ptr: *mut T, dy_ptr: *mut T, g_ptr: *mut T, u_ptr: *mut T, m: i32, h: i32, stride_dx: i32,
        stride_dy: i32, stride_x: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (h + BLOCK - 1) / BLOCK;
        let id: i32 = get_tile_block_id().0;
        let rb: i32 = id / col_tiles;
        let cb: i32 = id % col_tiles;
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, h, stride_dy, tok);
        let g_view: Tensor<T, { [-1, -1] }> = strided_view(g_ptr, m, h, stride_x, tok);
        let u_view: Tensor<T, { [-1, -1] }> = strided_view(u_ptr, m, h, stride_x, tok);
        let dg_view: Tensor<T, { [-1, -1] }> = strided_view(dg_ptr, m, h, stride_dx, tok);
        let du_view: Tensor<T, { [-1, -1] }> = strided_view(du_ptr, m, h, stride_dx, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let g_part: Partition<T, { [ROWS, BLOCK] }> = g_view.partition(tile);
        let u_part: Partition<T, { [ROWS, BLOCK] }> = u_view.partition(tile);
        let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, cb]));
        let g: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(g_part.load([rb, cb]));
        let u: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(u_part.load([rb, cb]));

        let one: Tile<f32, { [ROWS, BLOCK] }> = constant(1.0f32, tile);
        let neg_log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(-1.4426950408889634f32, tile);
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(g * neg_log2e, ftz::Enabled);
        let s: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let silu: Tile<f32, { [ROWS, BLOCK] }> = g * s;
        let dg: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dy * u * (s + silu * (one - s)));
        let du: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dy * silu);
        let mut dg_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dg_view.partition_full_mut(tile) };
        let mut du_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { du_view.partition_full_mut(tile) };
        dg_part.store(dg, [rb, cb]);
        du_part.store(du, [rb, cb]);
    }
}
