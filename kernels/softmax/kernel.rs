//! Softmax device code: y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :]))),
//! over the last dim of an (m, n) tensor.
//!
//! Element type T is f32, f16 or bf16 (in and out); max, exponentials, sums and the scaling are
//! done in f32. Subtracting the row max first keeps every exponent <= 0: no overflow for any input
//! magnitude. exp(v) is computed as exp2(v * log2(e)) (the hardware's ex2 path, as Triton's tl.exp
//! lowers), flushing subnormal results to zero: they are below 1e-38 of the row's largest term.
//! Every entry takes raw device pointers (PyTorch owns the memory; the split kernels also an f32
//! workspace ffi.rs allocates) and views x and y with their row strides: rows may be padded (row
//! stride >= n), the last dim is contiguous.
//!
//! Each tile block handles ROWS consecutive rows in BLOCK-wide column tiles. Lanes past (m, n) read
//! -inf, so they never win the max and exp(-inf) = 0 adds nothing to the sum, and they are never
//! stored (rows past m turn into NaN in registers, never in memory); -inf inputs (masked logits)
//! get 0, and a row that is all -inf gets NaN, as torch.softmax gives. The entries, one
//! computation in different shapes, differ in how they address the tiles:
//!   * `softmax_row`    — n <= BLOCK: the row block is loaded once and stays in registers
//!     (one read of x, one exp per element), through a partition padded with -inf (stores outside
//!     (m, n) dropped), so any m and n work: the fallback where the pointer-tile entries' i32
//!     offsets would not fit.
//!   * `softmax_looped` — n >  BLOCK, the same padded partitions: pass 1 keeps a running max and a
//!     running sum of exponentials per lane (online softmax: rescale the sum when the max grows),
//!     then folds the lanes into one max and sum per row; pass 2 re-reads the row (mostly from L2),
//!     exponentiates, scales and stores.
//!   * `softmax_row_exact` — n == BLOCK and m % ROWS == 0 (and i32 offsets): `softmax_row` with
//!     unmasked pointer-tile loads and stores (no per-lane bounds branches).
//!   * `softmax_row_masked` — n <= BLOCK otherwise (n = 11008, 4097, partial row tiles), i32
//!     offsets of the padded tile: pointer tiles with a mask of the lanes inside (m, n), masked
//!     lanes set to -inf after the load; tileiras predicates each access instead of branching.
//!   * `softmax_row_tail` — BLOCK < n <= BLOCK + TAIL: the row block held whole as a body tile and
//!     a narrower tail tile, masked pointer tiles (fewer idle lanes than one power-of-two tile at
//!     n = 11008, 5120 ...); `softmax_row_tail_persistent` the same on a capped grid, each tile
//!     block walking every grid-th row tile.
//!   * `softmax_row_aligned` — rows that do not start or end on a 16-byte boundary (n = 4097, row
//!     strides no multiple of 16 bytes): each row's 16-byte-aligned body through 16-byte accesses,
//!     its head and ragged end through a narrow edge tile (device_util's `aligned_rows`), where the
//!     masked entry would access every element alone.
//!   * `softmax_split_partials` + `softmax_split_scale` — vocabulary-sized rows of few rows: the
//!     row is cut into chunks, one tile block per (row tile, chunk), so far more tile blocks keep
//!     loads in flight than one per row tile; A writes each chunk's (max, sum of exp(x - max)) to an
//!     f32 workspace, B combines a row's partials (max M, S = sum s_c * exp(m_c - M)), re-reads its
//!     chunk and stores exp(x - M) / S. Whole tiles are loaded unmasked through pointer tiles (m %
//!     ROWS == 0 and i32 offsets), only the row's ragged last tile through the padded partition.
//!   * `softmax_split_exchange` — the split in one kernel for chunks of one tile: each tile block
//!     keeps its chunk in registers, publishes its partials, counts itself in on its row tile's
//!     counter and waits for the others (one read of x instead of two).
//!     `softmax_split_exchange_held` holds a chunk of four tiles in T; `softmax_split_exchange_reread`
//!     holds none: it folds a chunk of any number of tiles as kernel A does, exchanges, then
//!     re-reads the chunk (mostly from L2) and stores as kernel B does.
//!
//! The host side (ffi.rs) picks the entry from m, n, the row strides (whether i32 offsets fit) and
//! the variant's BLOCK, ROWS and chunk. The column-tile counts, (n + BLOCK - 1) / BLOCK, are i32:
//! ffi.rs refuses rows wider than its MAX_N.
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses` (it drops the bounds checks of partition accesses): the launcher sizes the
//! grid as ceil(m / ROWS) row tiles (times `chunks` for the split kernels), the column loops stop
//! at ceil(n / BLOCK) (a chunk's at the smaller of its end and that), the split kernels' partials
//! are viewed as (m, chunks) with column c < chunks stored and PARTS >= chunks loaded from column 0,
//! so every tile index is inside its partition by construction; the per-access checks would only
//! cost instructions. The pointer-tile accesses have no such checks: ffi.rs runs those entries only
//! where their tiles (or masks) keep every access inside the tensors.
#[cutile::module]
pub mod softmax_device {
    use crate::device_util::tile_order::persistent_row_tiles;
    use crate::device_util::views::{
        aligned_body, aligned_edge, aligned_rows, arrive, arrive_and_wait, body_tail_raw, chunk_tile_range,
        load_masked, neg_inf_outside, neg_inf_tiles, next_body_tail_raw, online_fold, partials_combine, publish_pair,
        row_offsets, store_masked, store_masked_tile, strided_view, tile_mask, tile_neg_inf, tile_pointers,
        wait_arrived, whole_tile,
    };
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
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let rb: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { neg_inf_tiles::<T, ROWS, BLOCK>(x_ptr, m, n, stride_x, tok) };
        let y_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(y_ptr, m, n, stride_y, tok) };
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
        let y: Tile<T, { [ROWS, BLOCK] }> = softmax_rows::<T, ROWS, BLOCK>(x);
        y_part.store(y, [rb, 0i32]);
    }

    /// n > BLOCK: an online max/sum pass and a scaling pass over ceil(n / BLOCK) column tiles.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_looped<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let rb: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { neg_inf_tiles::<T, ROWS, BLOCK>(x_ptr, m, n, stride_x, tok) };
        let y_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(y_ptr, m, n, stride_y, tok) };
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

    /// Split rows, kernel A (grid: ceil(m / ROWS) row blocks x `chunks` column chunks of
    /// `chunk_tiles` BLOCK-wide tiles): each chunk's max and sum of exp(x - max) per row, written
    /// to `part_max[r, c]` and `part_sum[r, c]` (f32, `chunks` per row). Every tile but the row's
    /// ragged last one is loaded through unmasked pointer tiles (ffi.rs `split_fits`: m % ROWS == 0,
    /// i32 offsets); the ragged tile, if any, through the -inf-padded partition. One exp per
    /// element: each tile is folded into a running per-row max and sum (`online_fold`). The max
    /// starts at the lowest finite f32, as in `softmax_looped`: a chunk of nothing but -inf gives
    /// (lowest, 0), which the combine step weighs 0.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_split_partials<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        part_max: *mut f32, part_sum: *mut f32, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, chunk_tiles: i32,
        chunks: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let (rb, c): (i32, i32) = (get_tile_block_id().0, get_tile_block_id().1);
        let tok: Token = new_token_unordered();
        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { neg_inf_tiles::<T, ROWS, BLOCK>(x_ptr, m, n, stride_x, tok) };
        let x_base: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, rb * ROWS * stride_x, stride_x);
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let log2e_r: Tile<f32, { [ROWS] }> = constant(1.4426950408889634f32, shape![ROWS]);

        let (j0, j_full, j_end): (i32, i32, i32) = chunk_tile_range::<BLOCK>(c, chunk_tiles, n);
        let mut run_max: Tile<f32, { [ROWS] }> = constant(-3.4028235e38f32, shape![ROWS]);
        let mut run_sum: Tile<f32, { [ROWS] }> = constant(0.0f32, shape![ROWS]);
        let (whole_max, whole_sum) =
            unsafe { fold_whole_tiles::<T, ROWS, BLOCK>(x_base, j0, j_full, run_max, run_sum) };
        run_max = whole_max;
        run_sum = whole_sum;
        for j in j_full..j_end {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let (new_max, new_sum): (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>) =
                online_fold::<ROWS, BLOCK>(run_max, run_sum, x, log2e, log2e_r);
            run_max = new_max;
            run_sum = new_sum;
        }
        let max_view: Tensor<f32, { [-1, -1] }> = unsafe { strided_view(part_max, m, chunks, chunks, tok) };
        let sum_view: Tensor<f32, { [-1, -1] }> = unsafe { strided_view(part_sum, m, chunks, chunks, tok) };
        let mut max_part: PartitionMut<f32, { [ROWS, 1] }> = unsafe { max_view.partition_full_mut(shape![ROWS, 1]) };
        let mut sum_part: PartitionMut<f32, { [ROWS, 1] }> = unsafe { sum_view.partition_full_mut(shape![ROWS, 1]) };
        max_part.store(run_max.reshape(shape![ROWS, 1]), [rb, c]);
        sum_part.store(run_sum.reshape(shape![ROWS, 1]), [rb, c]);
    }

    /// Split rows, kernel B (the same grid): combine the row's PARTS >= `chunks` partials into the
    /// row max M and sum S = sum_c s_c * exp(m_c - M) (partials past `chunks` read as (-inf, 0) and
    /// add 0), then re-read this chunk's tiles and store exp(x - M) / S, whole tiles unmasked.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_split_scale<T: ElementType, const ROWS: i32, const BLOCK: i32, const PARTS: i32>(
        y_ptr: *mut T, x_ptr: *mut T, part_max: *mut f32, part_sum: *mut f32, m: i32, n: i32, stride_x: i32,
        stride_y: i32, chunk_tiles: i32, chunks: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let parts: Shape<{ [ROWS, PARTS] }> = shape![ROWS, PARTS];
        // Tile blocks run in reverse order of kernel A's: the chunks A read last are the likeliest
        // still in L2 when B starts.
        let (rb, c): (i32, i32) =
            (get_num_tile_blocks().0 - 1 - get_tile_block_id().0, get_num_tile_blocks().1 - 1 - get_tile_block_id().1);
        let tok: Token = new_token_unordered();
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);

        // The row's max and sum from the partials (views built here: see softmax_row).
        let p_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, chunks] };
        let p_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[chunks] };
        let pm_view: Tensor<f32, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(part_max), p_shape, p_strides, tok) };
        let ps_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, chunks] };
        let ps_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[chunks] };
        let ps_view: Tensor<f32, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(part_sum), ps_shape, ps_strides, tok) };
        let pm_tok: Token = pm_view.token();
        let ps_tok: Token = ps_view.token();
        let pm_part: Partition<f32, { [ROWS, PARTS] }> =
            unsafe { make_partition_view(&pm_view, parts, padding::NegInf, dim_map::Identity, pm_tok) };
        let ps_part: Partition<f32, { [ROWS, PARTS] }> =
            unsafe { make_partition_view(&ps_view, parts, padding::Zero, dim_map::Identity, ps_tok) };
        let pm: Tile<f32, { [ROWS, PARTS] }> = pm_part.load([rb, 0i32]);
        let ps: Tile<f32, { [ROWS, PARTS] }> = ps_part.load([rb, 0i32]);
        let row_max: Tile<f32, { [ROWS] }> = reduce_max(pm, 1i32);
        let log2e_p: Tile<f32, { [ROWS, PARTS] }> = constant(1.4426950408889634f32, parts);
        let pmx: Tile<f32, { [ROWS, PARTS] }> = row_max.reshape(shape![ROWS, 1]).broadcast(parts);
        let sum: Tile<f32, { [ROWS] }> = reduce_sum(ps * exp2((pm - pmx) * log2e_p, ftz::Enabled), 1i32);
        let mx: Tile<f32, { [ROWS, BLOCK] }> = row_max.reshape(shape![ROWS, 1]).broadcast(tile);
        let inv: Tile<f32, { [ROWS, BLOCK] }> = row_reciprocal::<ROWS, BLOCK>(sum);

        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { neg_inf_tiles::<T, ROWS, BLOCK>(x_ptr, m, n, stride_x, tok) };
        let y_view: Tensor<T, { [-1, -1] }> = unsafe { strided_view(y_ptr, m, n, stride_y, tok) };
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };
        let x_base: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, rb * ROWS * stride_x, stride_x);
        let y_base: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(y_ptr, rb * ROWS * stride_y, stride_y);

        // As in kernel A: whole tiles [j0, j_full) unmasked, then the ragged one if this chunk has it.
        let (j0, j_full, j_end): (i32, i32, i32) = chunk_tile_range::<BLOCK>(c, chunk_tiles, n);
        unsafe { store_whole_tiles::<T, ROWS, BLOCK>(x_base, y_base, j0, j_full, mx, inv) };
        for j in j_full..j_end {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(exp2((x - mx) * log2e, ftz::Enabled) * inv);
            y_part.store(y, [rb, j]);
        }
    }

    /// Whole tiles j0..j_full of the row tile whose tile of column 0 is `x_base` (unmasked loads),
    /// folded into the running per-row (max, sum) (`online_fold`); returns the new pair.
    unsafe fn fold_whole_tiles<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x_base: PointerTile<*mut T, { [ROWS, BLOCK] }>, j0: i32, j_full: i32, max0: Tile<f32, { [ROWS] }>,
        sum0: Tile<f32, { [ROWS] }>,
    ) -> (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let log2e_r: Tile<f32, { [ROWS] }> = constant(1.4426950408889634f32, shape![ROWS]);
        let mut run_max: Tile<f32, { [ROWS] }> = max0;
        let mut run_sum: Tile<f32, { [ROWS] }> = sum0;
        for j in j0..j_full {
            let (x, _col0) = unsafe { whole_tile::<T, ROWS, BLOCK>(x_base, j) };
            let (new_max, new_sum): (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>) =
                online_fold::<ROWS, BLOCK>(run_max, run_sum, x, log2e, log2e_r);
            run_max = new_max;
            run_sum = new_sum;
        }
        (run_max, run_sum)
    }

    /// Whole tiles j0..j_full of the row tile at `x_base` / `y_base` (unmasked loads and stores):
    /// y = exp(x - mx) * factor.
    unsafe fn store_whole_tiles<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x_base: PointerTile<*mut T, { [ROWS, BLOCK] }>, y_base: PointerTile<*mut T, { [ROWS, BLOCK] }>, j0: i32,
        j_full: i32, mx: Tile<f32, { [ROWS, BLOCK] }>, factor: Tile<f32, { [ROWS, BLOCK] }>,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);
        for j in j0..j_full {
            let (x, col0) = unsafe { whole_tile::<T, ROWS, BLOCK>(x_base, j) };
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(exp2((x - mx) * log2e, ftz::Enabled) * factor);
            let y_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> = y_base.offset_tile(col0);
            let _y_tok: Token =
                unsafe { store_ptr_tko(y_ptrs, y, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>) };
        }
    }

    /// The single pass over a chunk of `chunk_tiles` BLOCK-wide tiles that it reads twice instead of
    /// holding it (grid as `softmax_split_exchange`'s: 1-D, ceil(m / ROWS) row tiles x `chunks`, a
    /// row tile's chunks consecutive). Pass 1 folds the chunk's tiles into its (max, sum) as kernel A
    /// of the two-kernel split does; the exchange is the one-tile single pass's (`exchange_scale`'s
    /// steps), except that the chunk's first tile is re-read between its arrival and its polls;
    /// pass 2 re-reads the rest of the chunk, now mostly from L2 (it was read a few microseconds
    /// before, and the chunks in flight on the whole GPU are a few MB), and stores
    /// exp(x - m_c) * exp(m_c - M) / S. So x leaves DRAM once, as in the one-tile single pass, while
    /// a tile block holds one tile in registers rather than its chunk: its chunk may be as wide as
    /// the two-kernel split's. Whole tiles are loaded and stored unmasked (ffi.rs `reread_fits`:
    /// m % ROWS == 0 and i32 offsets up to the row's padded last tile); the first tile and the
    /// row's ragged last tile through masked pointer tiles. The progress argument and the counters
    /// are `softmax_split_exchange`'s.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_split_exchange_reread<T: ElementType, const ROWS: i32, const BLOCK: i32, const PARTS: i32>(
        y_ptr: *mut T, x_ptr: *mut T, part_max: *mut f32, part_sum: *mut f32, arrived: *mut i32, m: i32, n: i32,
        stride_x: i32, stride_y: i32, chunk_tiles: i32, chunks: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let pid: i32 = get_tile_block_id().0;
        let rb: i32 = pid / chunks;
        let c: i32 = pid - rb * chunks;
        let row0: i32 = rb * ROWS;
        let x_base: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x, stride_x);
        let y_base: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y, stride_y);
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let log2e_r: Tile<f32, { [ROWS] }> = constant(1.4426950408889634f32, shape![ROWS]);
        let (j0, j_full, j_end): (i32, i32, i32) = chunk_tile_range::<BLOCK>(c, chunk_tiles, n);

        // Pass 1: the chunk's max (at least the lowest finite f32, as in kernel A) and sum.
        let lowest: Tile<f32, { [ROWS] }> = constant(-3.4028235e38f32, shape![ROWS]);
        let zero: Tile<f32, { [ROWS] }> = constant(0.0f32, shape![ROWS]);
        let (whole_max, whole_sum) = unsafe { fold_whole_tiles::<T, ROWS, BLOCK>(x_base, j0, j_full, lowest, zero) };
        let mut c_max: Tile<f32, { [ROWS] }> = whole_max;
        let mut c_sum: Tile<f32, { [ROWS] }> = whole_sum;
        for j in j_full..j_end {
            let (x, _mask) = unsafe { tile_neg_inf::<T, ROWS, BLOCK, 3>(x_ptr, row0, j * BLOCK, m, n, stride_x) };
            let (new_max, new_sum): (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>) =
                online_fold::<ROWS, BLOCK>(c_max, c_sum, x, log2e, log2e_r);
            c_max = new_max;
            c_sum = new_sum;
        }

        // The exchange (`exchange_scale`'s steps), with the chunk's first tile re-read between the
        // arrival and the polls: its L2 round trip overlaps the wait for the row tile's other
        // chunks instead of following it. The tile is loaded masked (it may be the row's ragged
        // last one). `before` >= 0, so j_first is j0; depending on the arrival's result keeps the
        // load after pass 1 (whose registers are free by then: tileiras otherwise hoists it to the
        // top and holds it across pass 1), and the token join keeps it before the polls (it
        // otherwise sinks below them, its accesses interleaved with the stores).
        let t_pub: Token = unsafe { publish_pair::<ROWS>(part_max, part_sum, row0, c, chunks, c_max, c_sum) };
        let (before, t_arrive): (i32, Token) = unsafe { arrive(arrived, rb, t_pub) };
        let j_first: i32 = j0 + min(before, 0i32);
        let first_mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, j_first * BLOCK, m, n);
        let first_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x + j_first * BLOCK, stride_x);
        let (first_raw, t_first): (Tile<T, { [ROWS, BLOCK] }>, Token) = unsafe {
            load_ptr_tko(
                first_ptrs,
                ordering::Weak,
                None::<scope::TileBlock>,
                Some(first_mask),
                None,
                None,
                Latency::<3>,
            )
        };
        let tok: Token = unsafe { wait_arrived(arrived, rb, chunks, join_tokens(&[t_arrive, t_first])) };
        let scale: Tile<f32, { [ROWS] }> =
            unsafe { partials_scale::<ROWS, PARTS>(part_max, part_sum, row0, chunks, c_max, tok) };

        // Pass 2: y = exp(x - m_c) * scale, the first tile from the registers, the rest re-read.
        let cmx: Tile<f32, { [ROWS, BLOCK] }> = c_max.reshape(shape![ROWS, 1]).broadcast(tile);
        let scale_t: Tile<f32, { [ROWS, BLOCK] }> = scale.reshape(shape![ROWS, 1]).broadcast(tile);
        let first: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(first_raw);
        let y0: Tile<T, { [ROWS, BLOCK] }> = convert_tile(exp2((first - cmx) * log2e, ftz::Enabled) * scale_t);
        unsafe { store_masked_tile::<T, ROWS, BLOCK>(y_ptr, y0, first_mask, row0, j0 * BLOCK, stride_y) };
        let j1: i32 = j0 + 1i32;
        unsafe { store_whole_tiles::<T, ROWS, BLOCK>(x_base, y_base, j1, j_full, cmx, scale_t) };
        for j in max(j1, j_full)..j_end {
            let (x, mask) = unsafe { tile_neg_inf::<T, ROWS, BLOCK, 3>(x_ptr, row0, j * BLOCK, m, n, stride_x) };
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(exp2((x - cmx) * log2e, ftz::Enabled) * scale_t);
            unsafe { store_masked_tile::<T, ROWS, BLOCK>(y_ptr, y, mask, row0, j * BLOCK, stride_y) };
        }
    }

    /// Split rows in one kernel, each chunk one BLOCK-wide tile held in registers (grid: 1-D,
    /// ceil(m / ROWS) row tiles x `chunks`, a row tile's chunks consecutive). A tile block loads its
    /// chunk (masked at the ragged edges), computes the chunk's max m_c and e = exp(x - m_c), writes
    /// (m_c, sum e) to the f32 partials (a row tile's ROWS rows x `chunks` columns, padded to whole
    /// row tiles), then adds 1 to its row tile's `arrived` counter (release) and polls it (an
    /// acquire atomic) until every chunk of the row tile has arrived. It then combines the row's partials as kernel B
    /// does (M, S) and stores e * exp(m_c - M) / S: one read and one exp per element, where the two
    /// kernels read x twice. The counters must be zero at launch (ffi.rs clears them on the stream).
    ///
    /// Progress needs the row tile's other chunks to reach a multiprocessor while this one polls:
    /// they come later in the grid, and blocks are dispatched in grid order, so the ones ahead of
    /// them are at most the `chunks - 1` polling chunks of one row tile (every earlier row tile
    /// completes without them). ffi.rs runs this entry only for chunks <= the GPU's SM count, which
    /// keeps a multiprocessor slot for them. The poll count is capped (2^24 polls: seconds) and then
    /// fails a device assertion instead of hanging, should that order not hold or kernels on other
    /// streams hold the multiprocessors for good.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_split_exchange<T: ElementType, const ROWS: i32, const BLOCK: i32, const PARTS: i32>(
        y_ptr: *mut T, x_ptr: *mut T, part_max: *mut f32, part_sum: *mut f32, arrived: *mut i32, m: i32, n: i32,
        stride_x: i32, stride_y: i32, chunks: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let pid: i32 = get_tile_block_id().0;
        let rb: i32 = pid / chunks;
        let c: i32 = pid - rb * chunks;
        let (row0, col0): (i32, i32) = (rb * ROWS, c * BLOCK);
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);

        // The chunk, lanes outside (m, n) as -inf; its max (at least the lowest finite f32, so an
        // all -inf chunk gives (lowest, 0), weighed 0 below) and exponentials.
        let (x, mask) = unsafe { tile_neg_inf::<T, ROWS, BLOCK, 3>(x_ptr, row0, col0, m, n, stride_x) };
        let lowest: Tile<f32, { [ROWS] }> = constant(-3.4028235e38f32, shape![ROWS]);
        let c_max: Tile<f32, { [ROWS] }> = maxf(reduce_max(x, 1i32), lowest, nan::Disabled, ftz::Disabled);
        let cmx: Tile<f32, { [ROWS, BLOCK] }> = c_max.reshape(shape![ROWS, 1]).broadcast(tile);
        let e: Tile<f32, { [ROWS, BLOCK] }> = exp2((x - cmx) * log2e, ftz::Enabled);
        let c_sum: Tile<f32, { [ROWS] }> = reduce_sum(e, 1i32);

        let scale: Tile<f32, { [ROWS] }> =
            unsafe { exchange_scale::<ROWS, PARTS>(part_max, part_sum, arrived, rb, c, row0, chunks, c_max, c_sum) };
        let scale_t: Tile<f32, { [ROWS, BLOCK] }> = scale.reshape(shape![ROWS, 1]).broadcast(tile);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(e * scale_t);
        unsafe { store_masked_tile::<T, ROWS, BLOCK>(y_ptr, y, mask, row0, col0, stride_y) };
    }

    /// `softmax_split_exchange` with a chunk of four SUB-wide tiles (chunk = 4 * SUB columns) whose
    /// exponentials wait for the row's other chunks in T, not f32: each sub-tile is converted to
    /// f32, reduced against its own max and rounded back to T on its own, so a thread needs one
    /// sub-tile in f32 at a time rather than the whole chunk; the chunk's (max, sum) combines the
    /// four (max, sum) pairs, and after the exchange sub-tile k is scaled by exp(m_k - M) / S. The
    /// stored values are rounded twice in f16/bf16 (e to T, then the scaled value to T). On the
    /// H200 it pays in f32 (1024 x 128256 at occupancy 5) and not in bf16 (NOTES.md, "The next row
    /// tile ahead, and a chunk held a sub-tile at a time").
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_split_exchange_held<T: ElementType, const ROWS: i32, const SUB: i32, const PARTS: i32>(
        y_ptr: *mut T, x_ptr: *mut T, part_max: *mut f32, part_sum: *mut f32, arrived: *mut i32, m: i32, n: i32,
        stride_x: i32, stride_y: i32, chunks: i32,
    ) {
        let pid: i32 = get_tile_block_id().0;
        let rb: i32 = pid / chunks;
        let c: i32 = pid - rb * chunks;
        let row0: i32 = rb * ROWS;
        let col0: i32 = c * 4i32 * SUB;
        let (x0, k0) = unsafe { tile_neg_inf::<T, ROWS, SUB, 3>(x_ptr, row0, col0, m, n, stride_x) };
        let (x1, k1) = unsafe { tile_neg_inf::<T, ROWS, SUB, 3>(x_ptr, row0, col0 + SUB, m, n, stride_x) };
        let (x2, k2) = unsafe { tile_neg_inf::<T, ROWS, SUB, 3>(x_ptr, row0, col0 + 2i32 * SUB, m, n, stride_x) };
        let (x3, k3) = unsafe { tile_neg_inf::<T, ROWS, SUB, 3>(x_ptr, row0, col0 + 3i32 * SUB, m, n, stride_x) };

        // Each sub-tile on its own: its max m_k (at least the lowest finite f32, as in
        // softmax_split_exchange), exponentials against it summed in f32 (s_k) and held in T.
        let (m0, s0, h0) = sub_tile_exp::<T, ROWS, SUB>(x0);
        let (m1, s1, h1) = sub_tile_exp::<T, ROWS, SUB>(x1);
        let (m2, s2, h2) = sub_tile_exp::<T, ROWS, SUB>(x2);
        let (m3, s3, h3) = sub_tile_exp::<T, ROWS, SUB>(x3);
        // The chunk's (max, sum) from the four: s_k rescaled to the chunk's max.
        let m01: Tile<f32, { [ROWS] }> = maxf(m0, m1, nan::Disabled, ftz::Disabled);
        let m23: Tile<f32, { [ROWS] }> = maxf(m2, m3, nan::Disabled, ftz::Disabled);
        let c_max: Tile<f32, { [ROWS] }> = maxf(m01, m23, nan::Disabled, ftz::Disabled);
        let w0: Tile<f32, { [ROWS] }> = rescale::<ROWS>(m0, c_max);
        let w1: Tile<f32, { [ROWS] }> = rescale::<ROWS>(m1, c_max);
        let w2: Tile<f32, { [ROWS] }> = rescale::<ROWS>(m2, c_max);
        let w3: Tile<f32, { [ROWS] }> = rescale::<ROWS>(m3, c_max);
        let c_sum: Tile<f32, { [ROWS] }> = (s0 * w0 + s1 * w1) + (s2 * w2 + s3 * w3);

        let scale: Tile<f32, { [ROWS] }> =
            unsafe { exchange_scale::<ROWS, PARTS>(part_max, part_sum, arrived, rb, c, row0, chunks, c_max, c_sum) };
        // Sub-tile k's values are h_k * exp(m_k - c_max) * scale.
        let y0: Tile<T, { [ROWS, SUB] }> = scaled::<T, ROWS, SUB>(h0, w0 * scale);
        unsafe { store_masked_tile::<T, ROWS, SUB>(y_ptr, y0, k0, row0, col0, stride_y) };
        let y1: Tile<T, { [ROWS, SUB] }> = scaled::<T, ROWS, SUB>(h1, w1 * scale);
        unsafe { store_masked_tile::<T, ROWS, SUB>(y_ptr, y1, k1, row0, col0 + SUB, stride_y) };
        let y2: Tile<T, { [ROWS, SUB] }> = scaled::<T, ROWS, SUB>(h2, w2 * scale);
        unsafe { store_masked_tile::<T, ROWS, SUB>(y_ptr, y2, k2, row0, col0 + 2i32 * SUB, stride_y) };
        let y3: Tile<T, { [ROWS, SUB] }> = scaled::<T, ROWS, SUB>(h3, w3 * scale);
        unsafe { store_masked_tile::<T, ROWS, SUB>(y_ptr, y3, k3, row0, col0 + 3i32 * SUB, stride_y) };
    }

    /// One sub-tile of the held single pass: its row max (at least the lowest finite f32), the sum
    /// of exp(x - max) per row, and those exponentials rounded to T.
    fn sub_tile_exp<T: ElementType, const ROWS: i32, const SUB: i32>(
        x: Tile<f32, { [ROWS, SUB] }>,
    ) -> (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>, Tile<T, { [ROWS, SUB] }>) {
        let lowest: Tile<f32, { [ROWS] }> = constant(-3.4028235e38f32, shape![ROWS]);
        let mx: Tile<f32, { [ROWS] }> = maxf(reduce_max(x, 1i32), lowest, nan::Disabled, ftz::Disabled);
        let e: Tile<f32, { [ROWS, SUB] }> = exp_shifted::<ROWS, SUB>(x, mx);
        let s: Tile<f32, { [ROWS] }> = reduce_sum(e, 1i32);
        let h: Tile<T, { [ROWS, SUB] }> = convert_tile(e);
        (mx, s, h)
    }

    /// exp(from - to) per row.
    fn rescale<const ROWS: i32>(from: Tile<f32, { [ROWS] }>, to: Tile<f32, { [ROWS] }>) -> Tile<f32, { [ROWS] }> {
        let log2e: Tile<f32, { [ROWS] }> = constant(1.4426950408889634f32, shape![ROWS]);
        exp2((from - to) * log2e, ftz::Enabled)
    }

    /// h * factor per row, rounded to T.
    fn scaled<T: ElementType, const ROWS: i32, const SUB: i32>(
        h: Tile<T, { [ROWS, SUB] }>, factor: Tile<f32, { [ROWS] }>,
    ) -> Tile<T, { [ROWS, SUB] }> {
        let v: Tile<f32, { [ROWS, SUB] }> = convert_tile(h);
        let f: Tile<f32, { [ROWS, SUB] }> = factor.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, SUB]);
        convert_tile(v * f)
    }

    /// The single-pass split's exchange for the chunk c of row tile rb (its rows from row0): writes
    /// the chunk's (max, sum of exp(x - max)) per row to the partials (`publish_pair`), counts the
    /// chunk in on the row tile's `arrived` counter (release), polls it (an acquire atomic) until
    /// all `chunks` have arrived (bounded: device_util's `arrive_and_wait`) and returns
    /// `partials_scale`: the factor that turns the chunk's exponentials into softmax values.
    unsafe fn exchange_scale<const ROWS: i32, const PARTS: i32>(
        part_max: *mut f32, part_sum: *mut f32, arrived: *mut i32, rb: i32, c: i32, row0: i32, chunks: i32,
        c_max: Tile<f32, { [ROWS] }>, c_sum: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS] }> {
        let t_pub: Token = unsafe { publish_pair::<ROWS>(part_max, part_sum, row0, c, chunks, c_max, c_sum) };
        let tok: Token = unsafe { arrive_and_wait(arrived, rb, chunks, t_pub) };
        unsafe { partials_scale::<ROWS, PARTS>(part_max, part_sum, row0, chunks, c_max, tok) }
    }

    /// After `tok` (the wait's last poll), combines the row tile's partials into each row's max M
    /// and sum S (`partials_combine`) and returns exp(c_max - M) / S per row.
    unsafe fn partials_scale<const ROWS: i32, const PARTS: i32>(
        part_max: *mut f32, part_sum: *mut f32, row0: i32, chunks: i32, c_max: Tile<f32, { [ROWS] }>, tok: Token,
    ) -> Tile<f32, { [ROWS] }> {
        let (row_max, sum, _t): (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>, Token) =
            unsafe { partials_combine::<ROWS, PARTS>(part_max, part_sum, row0, chunks, tok) };
        // y = e * exp(m_c - M) / S: one factor per row.
        let one_r: Tile<f32, { [ROWS] }> = constant(1.0f32, shape![ROWS]);
        let inv: Tile<f32, { [ROWS] }> = divf(one_r, sum, rounding::NearestEven, ftz::Disabled);
        rescale::<ROWS>(c_max, row_max) * inv
    }

    /// `softmax_row` for n == BLOCK, m % ROWS == 0 and element offsets that fit i32 (ffi.rs checks):
    /// the row block is addressed as a pointer tile and loaded and stored without masks, so a
    /// thread's loads are all in flight at once (the -inf-padded partition load guards each
    /// 16-byte access in its own branch, which serializes them; see silu_and_mul's NOTES.md).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_exact<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
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
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let (x, mask) = unsafe { tile_neg_inf::<T, ROWS, BLOCK, 3>(x_ptr, row0, 0i32, m, n, stride_x) };
        let y: Tile<T, { [ROWS, BLOCK] }> = softmax_rows::<T, ROWS, BLOCK>(x);
        unsafe { store_masked_tile::<T, ROWS, BLOCK>(y_ptr, y, mask, row0, 0i32, stride_y) };
    }

    /// exp(x - row_max) per row (exp2 of the scaled difference, flushing subnormals to zero).
    fn exp_shifted<const ROWS: i32, const W: i32>(
        x: Tile<f32, { [ROWS, W] }>, row_max: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS, W] }> {
        let log2e: Tile<f32, { [ROWS, W] }> = constant(1.4426950408889634f32, shape![ROWS, W]);
        let mx: Tile<f32, { [ROWS, W] }> = row_max.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, W]);
        exp2((x - mx) * log2e, ftz::Enabled)
    }

    /// BLOCK < n <= BLOCK + TAIL (TAIL a power of two <= BLOCK; element offsets of the padded tiles
    /// fit i32, ffi.rs checks): the row block held whole in two tiles, a BLOCK-wide body and a
    /// TAIL-wide tail at column BLOCK, both through masked pointer tiles (the body's mask only
    /// drops rows past m). One read of x and one exp per element, as `softmax_row_masked`, on
    /// fewer lanes than the power of two above n (11008 = 8192 + 2816: 12288 lanes, not 16384).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        unsafe { tail_row_tile::<T, ROWS, BLOCK, TAIL, 3>(y_ptr, x_ptr, row0, m, n, stride_x, stride_y) };
    }

    /// `softmax_row_tail` on a capped grid (the launcher's persistent `programs`): tile block pid
    /// walks row tiles pid, pid + grid, ..., loading x with latency hint 1 (the same loop with
    /// hint 3 was slower than one tile block per row tile; with 1 it is faster: NOTES.md, "A
    /// persistent tail").
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_tail_persistent<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let row0: i32 = rb * ROWS;
            unsafe { tail_row_tile::<T, ROWS, BLOCK, TAIL, 1>(y_ptr, x_ptr, row0, m, n, stride_x, stride_y) };
        }
    }

    /// `softmax_row_tail_persistent` with the next row tile's loads issued before this one's
    /// reductions: the loop carries the next row tile's x as loaded (T, lanes outside (m, n) not
    /// read), so a thread keeps two row tiles' loads in flight where the plain loop keeps one
    /// (tileiras does not pipeline that loop itself: NOTES.md, "A persistent tail"). Past the last
    /// row tile the prefetch's mask is empty (no access) and its pointers are those of the last row
    /// tile, so every offset formed stays within the row tiles plan() checked.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_tail_prefetch<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let first: i32 = pid * ROWS;
        let (xb0, xt0) = unsafe { body_tail_raw::<T, ROWS, BLOCK, TAIL>(x_ptr, first, first, m, n, stride_x) };
        let mut xb: Tile<T, { [ROWS, BLOCK] }> = xb0;
        let mut xt: Tile<T, { [ROWS, TAIL] }> = xt0;
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let row0: i32 = rb * ROWS;
            let (nb, nt) = unsafe { next_body_tail_raw::<T, ROWS, BLOCK, TAIL>(x_ptr, row0, programs, m, n, stride_x) };
            let mask_b: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);
            let mask_t: Tile<bool, { [ROWS, TAIL] }> = tile_mask::<ROWS, TAIL>(row0, BLOCK, m, n);
            let fb: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(xb);
            let ft: Tile<f32, { [ROWS, TAIL] }> = convert_tile(xt);
            let vb: Tile<f32, { [ROWS, BLOCK] }> = neg_inf_outside::<ROWS, BLOCK>(fb, mask_b);
            let vt: Tile<f32, { [ROWS, TAIL] }> = neg_inf_outside::<ROWS, TAIL>(ft, mask_t);
            unsafe { tail_rows_store::<T, ROWS, BLOCK, TAIL>(y_ptr, vb, vt, mask_b, mask_t, row0, stride_y) };
            xb = nb;
            xt = nt;
        }
    }

    /// The tail entries' row tile at row0: body and tail loaded (latency hint LAT), one max and one
    /// sum over both, stored.
    unsafe fn tail_row_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32, const LAT: i32>(
        y_ptr: *mut T, x_ptr: *mut T, row0: i32, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let (xb, mask_b) = unsafe { tile_neg_inf::<T, ROWS, BLOCK, LAT>(x_ptr, row0, 0i32, m, n, stride_x) };
        let (xt, mask_t) = unsafe { tile_neg_inf::<T, ROWS, TAIL, LAT>(x_ptr, row0, BLOCK, m, n, stride_x) };
        unsafe { tail_rows_store::<T, ROWS, BLOCK, TAIL>(y_ptr, xb, xt, mask_b, mask_t, row0, stride_y) };
    }

    /// [`softmax_rows`] for a row block held in two tiles, BLOCK and EDGE lanes wide (f32, lanes
    /// outside the rows -inf): one max and one sum per row over both tiles, each tile's values
    /// rounded to T. The body-and-tail entries' (`tail_rows_store`: the tail as the EDGE tile) and
    /// `softmax_row_aligned`'s (its body and edge tiles) row softmax. The widths carry their callers'
    /// names because a tuple an inlined helper returns keeps the helper's names in its tiles' shapes
    /// (cutile 0.5): a caller must name them alike.
    fn softmax_rows_in_two<T: ElementType, const ROWS: i32, const BLOCK: i32, const EDGE: i32>(
        xb: Tile<f32, { [ROWS, BLOCK] }>, xe: Tile<f32, { [ROWS, EDGE] }>,
    ) -> (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, EDGE] }>) {
        let max_a: Tile<f32, { [ROWS] }> = reduce_max(xb, 1i32);
        let max_b: Tile<f32, { [ROWS] }> = reduce_max(xe, 1i32);
        let row_max: Tile<f32, { [ROWS] }> = maxf(max_a, max_b, nan::Disabled, ftz::Disabled);
        let ea: Tile<f32, { [ROWS, BLOCK] }> = exp_shifted::<ROWS, BLOCK>(xb, row_max);
        let eb: Tile<f32, { [ROWS, EDGE] }> = exp_shifted::<ROWS, EDGE>(xe, row_max);
        let sum_a: Tile<f32, { [ROWS] }> = reduce_sum(ea, 1i32);
        let sum_b: Tile<f32, { [ROWS] }> = reduce_sum(eb, 1i32);
        let sum: Tile<f32, { [ROWS] }> = sum_a + sum_b;
        let yb: Tile<T, { [ROWS, BLOCK] }> = convert_tile(ea * row_reciprocal::<ROWS, BLOCK>(sum));
        let ye: Tile<T, { [ROWS, EDGE] }> = convert_tile(eb * row_reciprocal::<ROWS, EDGE>(sum));
        (yb, ye)
    }

    /// The softmax of a row tile held as a body and a tail tile, the tail EDGE lanes wide (the
    /// entries' TAIL; f32, lanes outside (m, n) -inf): one max and one sum over both
    /// (`softmax_rows_in_two`), stored through the masks.
    unsafe fn tail_rows_store<T: ElementType, const ROWS: i32, const BLOCK: i32, const EDGE: i32>(
        y_ptr: *mut T, xb: Tile<f32, { [ROWS, BLOCK] }>, xt: Tile<f32, { [ROWS, EDGE] }>,
        mask_b: Tile<bool, { [ROWS, BLOCK] }>, mask_t: Tile<bool, { [ROWS, EDGE] }>, row0: i32, stride_y: i32,
    ) {
        let (yb, yt) = softmax_rows_in_two::<T, ROWS, BLOCK, EDGE>(xb, xt);
        unsafe { store_masked_tile::<T, ROWS, BLOCK>(y_ptr, yb, mask_b, row0, 0i32, stride_y) };
        unsafe { store_masked_tile::<T, ROWS, EDGE>(y_ptr, yt, mask_t, row0, BLOCK, stride_y) };
    }

    /// `softmax_row_masked` for rows that do not start on a 16-byte boundary or do not end on one
    /// (n = 4097; row strides no multiple of 16 bytes), x and y 16-byte aligned with the same
    /// misalignment per row (`ffi_util::aligned_rows_vec`): each row's body of whole 16-byte groups
    /// through 16-byte accesses, its head and ragged end through an EDGE-wide tile
    /// (device_util's `aligned_rows`). VEC is 16 bytes in elements, EDGE = 2 * VEC.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_row_aligned<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const VEC: i32,
        const EDGE: i32,
    >(
        y_ptr: *mut T, x_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let (heads, body_len) = unsafe { aligned_rows::<ROWS, VEC>(row0, n, stride_x) };
        let (xb_at, body) = unsafe { aligned_body::<ROWS, BLOCK, VEC>(row0, m, stride_x, heads, body_len) };
        let (edge_cols, edge) = aligned_edge::<ROWS, EDGE, VEC>(row0, m, n, heads, body_len);
        let xe_at: Tile<i32, { [ROWS, EDGE] }> = row_offsets::<ROWS, EDGE>(row0, stride_x, edge_cols);
        let neg_inf_b: Tile<f32, { [ROWS, BLOCK] }> = constant(f32::NEG_INFINITY, shape![ROWS, BLOCK]);
        let neg_inf_e: Tile<f32, { [ROWS, EDGE] }> = constant(f32::NEG_INFINITY, shape![ROWS, EDGE]);
        let xb: Tile<f32, { [ROWS, BLOCK] }> =
            unsafe { load_masked::<T, ROWS, BLOCK, 3>(x_ptr, xb_at, body, neg_inf_b) };
        let xe: Tile<f32, { [ROWS, EDGE] }> = unsafe { load_masked::<T, ROWS, EDGE, 3>(x_ptr, xe_at, edge, neg_inf_e) };
        let (yb, ye) = softmax_rows_in_two::<T, ROWS, BLOCK, EDGE>(xb, xe);
        let (yb_at, _) = unsafe { aligned_body::<ROWS, BLOCK, VEC>(row0, m, stride_y, heads, body_len) };
        let ye_at: Tile<i32, { [ROWS, EDGE] }> = row_offsets::<ROWS, EDGE>(row0, stride_y, edge_cols);
        unsafe { store_masked::<T, ROWS, BLOCK>(y_ptr, yb_at, yb, body) };
        unsafe { store_masked::<T, ROWS, EDGE>(y_ptr, ye_at, ye, edge) };
    }
}
