//! Softmax backward device code. For y = softmax(x) over the last dim and an output gradient dy,
//!
//! ```text
//! dx = y * (dy - sum(y * dy))        (the sum over the row)
//! ```
//!
//! T is f32, f16 or bf16 (dy, y and dx); the arithmetic f32. The forward's output y is what the
//! gradient needs (no recomputation from x: one read of y against a read of x and the row's max and
//! sum again).
//!
//! One entry, `softmax_backward_rows`, one ROWS x BLOCK row tile per tile block, in two forms (the
//! const generic LOOPED):
//!   * n <= BLOCK (LOOPED false): the row tile held whole: dy and y read once, dx stored once.
//!   * n > BLOCK (LOOPED true): the sum over ceil(n / BLOCK) column tiles of y * dy (f32, lane-wise,
//!     reduced once at the end), then a second pass that reads the tiles again (mostly from L2: the
//!     row tile's tiles were read just before) and stores dx.
//!
//! Partitions pad with zero and drop stores outside the view, so any m and n work without masks: y
//! and dy are 0 past n, adding nothing to the sum. `unchecked_accesses`: the launcher launches
//! ceil(m / ROWS) tile blocks and the column loops stop at ceil(n / BLOCK).
#[cutile::module]
pub mod softmax_backward_device {
    use crate::device_util::views::strided_view;
    use cutile::core::*;

    /// dx of one row tile from its y, dy tiles and the per-row sum of y * dy.
    fn grad<const ROWS: i32, const BLOCK: i32>(
        y: Tile<f32, { [ROWS, BLOCK] }>, dy: Tile<f32, { [ROWS, BLOCK] }>, dot: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let dot_t: Tile<f32, { [ROWS, BLOCK] }> = dot.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK]);
        y * (dy - dot_t)
    }

    /// Row tile `tile block id`: LOOPED false, whole (n <= BLOCK); LOOPED true, in BLOCK-wide column
    /// tiles, the sum first, then dx. The compiler keeps only the form LOOPED selects.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_backward_rows<T: ElementType, const ROWS: i32, const BLOCK: i32, const LOOPED: bool>(
        dx_ptr: *mut T, dy_ptr: *mut T, y_ptr: *mut T, m: i32, n: i32, stride_dx: i32, stride_dy: i32, stride_y: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let rb: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, n, stride_dy, tok);
        let y_view: Tensor<T, { [-1, -1] }> = strided_view(y_ptr, m, n, stride_y, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let y_part: Partition<T, { [ROWS, BLOCK] }> = y_view.partition(tile);
        let dx_view: Tensor<T, { [-1, -1] }> = strided_view(dx_ptr, m, n, stride_dx, tok);
        let mut dx_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dx_view.partition_full_mut(tile) };
        if LOOPED {
            let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
            let mut acc: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
            for j in 0i32..col_tiles {
                let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, j]));
                let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, j]));
                acc = acc + y * dy;
            }
            let dot: Tile<f32, { [ROWS] }> = reduce_sum(acc, 1i32);
            for j in 0i32..col_tiles {
                let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, j]));
                let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, j]));
                let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(grad::<ROWS, BLOCK>(y, dy, dot));
                dx_part.store(dx, [rb, j]);
            }
        } else {
            let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, 0i32]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, 0i32]));
            let dot: Tile<f32, { [ROWS] }> = reduce_sum(y * dy, 1i32);
            let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(grad::<ROWS, BLOCK>(y, dy, dot));
            dx_part.store(dx, [rb, 0i32]);
        }
    }
}
