//! silu_and_mul device code: out[r, j] = silu(x[r, j]) * x[r, H + j] for j < H, where x is
//! (m, 2H), out is (m, H) and silu(a) = a * sigmoid(a) = a / (1 + exp(-a)).
//!
//! Element type T is f32, f16 or bf16 (in and out); the arithmetic is done in f32. The entry takes
//! raw device pointers (PyTorch owns the memory): the gate half x[:, :H] and the up half
//! x[:, H:] arrive as two pointers into the same rows (ffi.rs offsets the second by H elements),
//! so both are plain (m, H) strided views with the row stride of x; rows may be padded (row
//! stride >= 2H), the last dim is contiguous.
//!
//! Pure streaming: each tile block owns one ROWS x BLOCK tile of out, loads the matching gate and
//! up tiles once, and stores once. The launch grid is 1-D, ceil(m / ROWS) * ceil(H / BLOCK) tile
//! blocks, with the column tile varying fastest so neighbouring blocks walk along a row; the
//! (row tile, column tile) pair is decoded from the block id. Partitions are zero-padded and
//! stores outside [m, H] are dropped, so any m and H (H = 1, 1000, 4097, 14336) work without masks
//! (a padded lane computes silu(0) * 0 = 0 and is never stored). Two entries:
//!   * `silu_and_mul`       — any shape: zero-padded partition views, as above.
//!   * `silu_and_mul_exact` — the tile divides (m, H) and offsets fit i32 (ffi.rs checks):
//!     pointer tiles, no masks, so a thread's loads are all in flight at once.
//!
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses`: the launcher (ffi.rs) launches exactly row_tiles * col_tiles blocks and
//! the kernel decodes col_tiles from the same h, so row tile < ceil(m / ROWS) and column tile <
//! ceil(H / BLOCK) for every block by construction; the per-access checks would only cost
//! instructions.
#[cutile::module]
pub mod silu_and_mul_device {
    use cutile::core::*;

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T,
        gate_ptr: *mut T,
        up_ptr: *mut T,
        m: i32,
        h: i32,
        stride_x: i32,
        stride_out: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (h + BLOCK - 1) / BLOCK;
        let pid: i32 = get_tile_block_id().0;
        let rt: i32 = pid / col_tiles;
        let ct: i32 = pid - rt * col_tiles;
        let tok: Token = new_token_unordered();

        // Gate and up: two (m, h) views with x's row stride; out: (m, h) with its own.
        let g_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, h] };
        let g_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_x] };
        let g_view: Tensor<T, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(gate_ptr), g_shape, g_strides, tok) };
        let u_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, h] };
        let u_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_x] };
        let u_view: Tensor<T, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(up_ptr), u_shape, u_strides, tok) };
        let y_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, h] };
        let y_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_out] };
        let y_view: Tensor<T, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(out_ptr), y_shape, y_strides, tok) };

        let g_part: Partition<T, { [ROWS, BLOCK] }> = g_view.partition(tile);
        let u_part: Partition<T, { [ROWS, BLOCK] }> = u_view.partition(tile);
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        let g: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(g_part.load([rt, ct]));
        let u: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(u_part.load([rt, ct]));
        // sigmoid(g) = 1 / (1 + exp(-g)), with exp(-g) = exp2(g * -log2(e)) (the hardware's ex2)
        // and the approximate, flush-to-zero reciprocal (MUFU.RCP, ~1 ulp) instead of the IEEE
        // division's refinement sequence. exp2 overflows to +inf for g < ~-88 and 1/inf = 0, so
        // the result saturates to -0 instead of the NaN that exp(g) / (1 + exp(g)) gives for
        // g > ~88; flushed subnormals are far below every output dtype's resolution.
        let one: Tile<f32, { [ROWS, BLOCK] }> = constant(1.0f32, tile);
        let neg_log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(-1.4426950408889634f32, tile);
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(g * neg_log2e, ftz::Enabled);
        let sig: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(g * sig * u);
        y_part.store(y, [rt, ct]);
    }

    /// Same result as `silu_and_mul`, for shapes the tile divides (m % ROWS == 0, h % BLOCK == 0)
    /// whose every element offset fits i32 (the launcher checks both): the gate, up and out tiles
    /// are addressed as pointer tiles and loaded and stored without masks. The padded entry's
    /// partition loads bounds-check each 16-byte access in its own branch and unpack it there,
    /// which serializes a thread's loads (one DRAM latency each, see NOTES.md); these have no
    /// branch, so a thread can issue all its loads before it uses the first.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul_exact<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T,
        gate_ptr: *mut T,
        up_ptr: *mut T,
        m: i32,
        h: i32,
        stride_x: i32,
        stride_out: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = h / BLOCK;
        let pid: i32 = get_tile_block_id().0;
        let rt: i32 = pid / col_tiles;
        let ct: i32 = pid - rt * col_tiles;
        let row0: i32 = rt * ROWS;
        let col0: i32 = ct * BLOCK;

        // Offsets of the tile's elements from its first one: r * stride + c.
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let cols: Tile<i32, { [ROWS, BLOCK] }> = col_ids.reshape(shape![1, BLOCK]).broadcast(tile);
        let rows: Tile<i32, { [ROWS, BLOCK] }> = row_ids.reshape(shape![ROWS, 1]).broadcast(tile);
        let sx: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(stride_x, tile);
        let sy: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(stride_out, tile);
        let x_off: Tile<i32, { [ROWS, BLOCK] }> = rows * sx + cols;
        let y_off: Tile<i32, { [ROWS, BLOCK] }> = rows * sy + cols;

        let g0: PointerTile<*mut T, { [] }> = pointer_to_tile(gate_ptr).offset(row0 * stride_x + col0);
        let u0: PointerTile<*mut T, { [] }> = pointer_to_tile(up_ptr).offset(row0 * stride_x + col0);
        let y0: PointerTile<*mut T, { [] }> = pointer_to_tile(out_ptr).offset(row0 * stride_out + col0);
        let g1: PointerTile<*mut T, { [1, 1] }> = g0.reshape(shape![1, 1]);
        let u1: PointerTile<*mut T, { [1, 1] }> = u0.reshape(shape![1, 1]);
        let y1: PointerTile<*mut T, { [1, 1] }> = y0.reshape(shape![1, 1]);
        let g_base: PointerTile<*mut T, { [ROWS, BLOCK] }> = g1.broadcast(tile);
        let u_base: PointerTile<*mut T, { [ROWS, BLOCK] }> = u1.broadcast(tile);
        let y_base: PointerTile<*mut T, { [ROWS, BLOCK] }> = y1.broadcast(tile);
        let g_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> = g_base.offset_tile(x_off);
        let u_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> = u_base.offset_tile(x_off);
        let y_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> = y_base.offset_tile(y_off);

        let (g_raw, _g_tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            unsafe { load_ptr_tko(g_ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>) };
        let (u_raw, _u_tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            unsafe { load_ptr_tko(u_ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>) };
        let g: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(g_raw);
        let u: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(u_raw);
        let one: Tile<f32, { [ROWS, BLOCK] }> = constant(1.0f32, tile);
        let neg_log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(-1.4426950408889634f32, tile);
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(g * neg_log2e, ftz::Enabled);
        let sig: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(g * sig * u);
        let _y_tok: Token =
            unsafe { store_ptr_tko(y_ptrs, y, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>) };
    }
}
