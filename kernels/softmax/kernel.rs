//! Softmax device code: y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :]))),
//! over the last dim of an (m, n) tensor.
//!
//! Element type T is f32, f16 or bf16 (in and out); max, exponentials, sums and the scaling are
//! done in f32. Subtracting the row max first keeps every exponent <= 0: no overflow for any input
//! magnitude. exp(v) is computed as exp2(v * log2(e)) (the hardware's ex2 path, as Triton's tl.exp
//! lowers), flushing subnormal results to zero: they are below 1e-38 of the row's largest term.
//! Both entries take raw device pointers (PyTorch owns the memory) and build strided views over
//! them: rows may be padded (row stride >= n), the last dim is contiguous.
//!
//! Each tile block handles ROWS consecutive rows; columns are read in BLOCK-wide tiles through
//! partitions padded with -inf, so lanes past n add nothing: they never win the max and
//! exp(-inf) = 0 adds nothing to the sum. Stores outside [m, n] are dropped, so any m and n work
//! (n = 1, 1000, 4097 ...) without masks. Rows of a tile that lie past m read all -inf and turn
//! into NaN, but they are never stored. -inf inputs (masked logits) get 0; a row that is all -inf
//! gets NaN, as torch.softmax gives. Two shapes of the same computation:
//!   * `softmax_row`    — n <= BLOCK: the row block is loaded once and stays in registers
//!     (one read of x, one exp per element).
//!   * `softmax_looped` — n >  BLOCK: pass 1 keeps a running max and a running sum of
//!     exponentials per lane (online softmax: rescale the sum when the max grows), then folds the
//!     lanes into one max and sum per row; pass 2 re-reads the row (mostly from L2),
//!     exponentiates, scales and stores.
//!   * `softmax_row_exact` — n == BLOCK and m % ROWS == 0 (and i32 offsets): `softmax_row` with
//!     unmasked pointer-tile loads and stores (no per-lane bounds branches).
//!   * `softmax_row_masked` — n <= BLOCK otherwise (n = 11008, 4097, partial row tiles), i32
//!     offsets of the padded tile: pointer tiles with a mask of the lanes inside (m, n), masked
//!     lanes set to -inf after the load; tileiras predicates each access instead of branching.
//!
//! The host side (ffi.rs) picks the entry from n, m and the variant's BLOCK and ROWS.
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses`: the launcher (ffi.rs) sizes the grid as ceil(m / ROWS) and the column
//! loops stop at ceil(n / BLOCK), so every tile index is inside its partition by construction; the
//! per-access checks would only cost instructions.
#[cutile::module]
pub mod softmax_device {
    use crate::device_util::views::{strided_view, tile_mask, tile_pointers};
    use cutile::core::*;

    /// 1 / sum per row, one exact reciprocal per row (then a multiply per element), broadcast over
    /// the row block.
    fn row_reciprocal<const ROWS: i32, const BLOCK: i32>(sum: Tile<f32, { [ROWS] }>) -> Tile<f32, { [ROWS, BLOCK] }> {
        let one: Tile<f32, { [ROWS] }> = constant(1.0f32, shape![ROWS]);
        divf(one, sum, rounding::NearestEven, ftz::Disabled).reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK])
    }

    /// The softmax of each row of a row block held whole in one tile, rounded to T.
    fn softmax_rows<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x: Tile<f32, { [ROWS, BLOCK] }>,
    ) -> Tile<T, { [ROWS, BLOCK] }> {
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, shape![ROWS, BLOCK]);
        let row_max: Tile<f32, { [ROWS] }> = reduce_max(x, 1i32);
        let mx: Tile<f32, { [ROWS, BLOCK] }> = row_max.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK]);
        let e: Tile<f32, { [ROWS, BLOCK] }> = exp2((x - mx) * log2e, ftz::Enabled);
        let sum: Tile<f32, { [ROWS] }> = reduce_sum(e, 1i32);
        let inv: Tile<f32, { [ROWS, BLOCK] }> = row_reciprocal::<ROWS, BLOCK>(sum);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(e * inv);
        y
    }

    /// n <= BLOCK: one load, one store per element.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T,
        x_ptr: *mut T,
        m: i32,
        n: i32,
        stride_x: i32,
        stride_y: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let rb: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        // x is viewed here, not through `strided_view`: make_partition_view cannot infer its
        // result type for a view an inlined helper returned (cutile 0.5).
        let x_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, n] };
        let x_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_x] };
        let x_view: Tensor<T, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(x_ptr), x_shape, x_strides, tok) };
        let y_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(y_ptr, m, n, stride_y, tok) };

        // -inf padding: lanes past n neither raise the max nor add to the sum.
        let x_tok: Token = x_view.token();
        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { make_partition_view(&x_view, tile, padding::NegInf, dim_map::Identity, x_tok) };
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
        let y: Tile<T, { [ROWS, BLOCK] }> = softmax_rows::<T, ROWS, BLOCK>(x);
        y_part.store(y, [rb, 0i32]);
    }

    /// n > BLOCK: an online max/sum pass and a scaling pass over ceil(n / BLOCK) column tiles.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_looped<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T,
        x_ptr: *mut T,
        m: i32,
        n: i32,
        stride_x: i32,
        stride_y: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let rb: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        // x is viewed here, not through `strided_view`: make_partition_view cannot infer its
        // result type for a view an inlined helper returned (cutile 0.5).
        let x_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, n] };
        let x_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_x] };
        let x_view: Tensor<T, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(x_ptr), x_shape, x_strides, tok) };
        let y_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(y_ptr, m, n, stride_y, tok) };

        // -inf padding: lanes past n neither raise the max nor add to the sum.
        let x_tok: Token = x_view.token();
        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { make_partition_view(&x_view, tile, padding::NegInf, dim_map::Identity, x_tok) };
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);

        // Pass 1, per lane: run_max = max so far, run_sum = sum of exp(x - run_max) so far; a later
        // tile rescales the sum by exp(old max - new max). Lane-wise state needs no cross-lane
        // reduction inside the loop. run_max starts at the lowest finite f32, not -inf, so a lane
        // that has seen only -inf (padding past n, or masked logits) rescales by exp(-inf) = 0
        // instead of exp(-inf - -inf) = NaN, and a row with any finite entry stays finite.
        let lowest: Tile<f32, { [ROWS, BLOCK] }> = constant(-3.4028235e38f32, tile);
        let x0: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
        let mut run_max: Tile<f32, { [ROWS, BLOCK] }> = maxf(x0, lowest, nan::Disabled, ftz::Disabled);
        let mut run_sum: Tile<f32, { [ROWS, BLOCK] }> = exp2((x0 - run_max) * log2e, ftz::Enabled);
        for j in 1i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let new_max: Tile<f32, { [ROWS, BLOCK] }> = maxf(run_max, x, nan::Disabled, ftz::Disabled);
            let rescale: Tile<f32, { [ROWS, BLOCK] }> = exp2((run_max - new_max) * log2e, ftz::Enabled);
            let term: Tile<f32, { [ROWS, BLOCK] }> = exp2((x - new_max) * log2e, ftz::Enabled);
            run_sum = run_sum * rescale + term;
            run_max = new_max;
        }
        // Fold the lanes: one max per row, and each lane's sum rescaled to it.
        let row_max: Tile<f32, { [ROWS] }> = reduce_max(run_max, 1i32);
        let mx: Tile<f32, { [ROWS, BLOCK] }> = row_max.reshape(shape![ROWS, 1]).broadcast(tile);
        let lane_sum: Tile<f32, { [ROWS, BLOCK] }> = run_sum * exp2((run_max - mx) * log2e, ftz::Enabled);
        let sum: Tile<f32, { [ROWS] }> = reduce_sum(lane_sum, 1i32);
        let inv: Tile<f32, { [ROWS, BLOCK] }> = row_reciprocal::<ROWS, BLOCK>(sum);

        // Pass 2: exponentiate against the row max, scale, store.
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(exp2((x - mx) * log2e, ftz::Enabled) * inv);
            y_part.store(y, [rb, j]);
        }
    }

    /// `softmax_row` for n == BLOCK, m % ROWS == 0 and element offsets that fit i32 (ffi.rs checks):
    /// the row block is addressed as a pointer tile and loaded and stored without masks, so a
    /// thread's loads are all in flight at once (the -inf-padded partition load guards each
    /// 16-byte access in its own branch, which serializes them; see silu_and_mul's NOTES.md).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_exact<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T,
        x_ptr: *mut T,
        m: i32,
        n: i32,
        stride_x: i32,
        stride_y: i32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let x_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x, stride_x);
        let y_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y, stride_y);

        let (x_raw, _x_tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            unsafe { load_ptr_tko(x_ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>) };
        let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_raw);
        let y: Tile<T, { [ROWS, BLOCK] }> = softmax_rows::<T, ROWS, BLOCK>(x);
        let _y_tok: Token =
            unsafe { store_ptr_tko(y_ptrs, y, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>) };
    }

    /// `softmax_row` for tiles that do not divide (m, n) whose padded tile's element offsets fit
    /// i32 (ffi.rs checks): the row block is addressed as a pointer tile and loaded and stored with
    /// a mask of the lanes inside (m, n), which tileiras lowers to predicated accesses issued back
    /// to back (16-byte ones where n and the strides divide by 8 elements), not the padded
    /// partition's branch per access. Masked lanes read -inf: they neither raise the max nor add
    /// to the sum.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T,
        x_ptr: *mut T,
        m: i32,
        n: i32,
        stride_x: i32,
        stride_y: i32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let x_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x, stride_x);
        let y_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y, stride_y);
        let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);

        let (x_raw, _x_tok): (Tile<T, { [ROWS, BLOCK] }>, Token) = unsafe {
            load_ptr_tko(x_ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<3>)
        };
        let x_in: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_raw);
        let neg_inf: Tile<f32, { [ROWS, BLOCK] }> = constant(f32::NEG_INFINITY, shape![ROWS, BLOCK]);
        let x: Tile<f32, { [ROWS, BLOCK] }> = select(mask, x_in, neg_inf);
        let y: Tile<T, { [ROWS, BLOCK] }> = softmax_rows::<T, ROWS, BLOCK>(x);
        let _y_tok: Token = unsafe {
            store_ptr_tko(y_ptrs, y, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<3>)
        };
    }
}
