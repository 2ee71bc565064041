//! Cross-entropy device code: the loss of each row of logits x (m, n) against its target class t,
//! with label smoothing ε over the n classes and rows whose target is `ignore_index` left out:
//!
//! ```text
//! lse  = log(sum_j exp(x_j))
//! loss = lse - (1 - ε) x_t - (ε / n) sum_j x_j                   (0 for an ignored row)
//! dx_j = g (softmax(x)_j - ε / n - (1 - ε) [j == t])           (0 for an ignored row)
//! ```
//!
//! g is the row's scale: the loss's gradient times 1 / (the rows counted) for a mean. T (the logits
//! and the gradient) is f32, f16 or bf16; the arithmetic and the loss f32. The target is i32, or i64
//! read as pairs of i32 words (WIDE: its high word must be the low word's sign, so any id in
//! [-2^31, 2^31) is read whole; a target outside [0, n) that is not `ignore_index` fails a device
//! assertion, as PyTorch's does).
//!
//! Four entries. `cross_entropy_rows` (version 1): a tile block per ROWS rows, BLOCK-wide column tiles.
//!   * pass 1: per lane, the running max and sum of exp (online softmax), the sum of x (for ε) and x_t
//!     (the lane of column t): the loss, stored per row (f32) with LOSS.
//!   * pass 2 (GRAD): the column tiles read again (most from L2: the row was read just before) and the
//!     gradient stored. The gradient may lie over the logits (`grad_ptr` = `x_ptr`): each element is
//!     read before its own store, and every pass-1 read comes before every store (the row's max and sum
//!     feed each).
//!
//! `cross_entropy_row` (version 2): one row a tile block, fewer instructions an element (its doc).
//! `cross_entropy_split` (version 3): a row split over tile blocks that exchange their partials, so
//! the gradient pass re-reads its chunk from L2 (its doc); `cross_entropy_lagged` (version 4) the
//! same chunks, each tile block summing one and storing an earlier row's (its doc).
//!
//! The logits' partition pads with -inf (a lane past n adds nothing to the max or the sum of exp) and
//! the gradient's drops stores outside (m, n), through TMA only where the gradient's rows are whole
//! 16-byte units (the const generic G_TMA of versions 1 and 2: device_util's `store_tile_2d` says
//! why; version 3 stores through masked pointer tiles); the per-row values (targets, scales, losses)
//! go through masked pointer tiles. `unchecked_accesses`: the launcher launches ceil(m / ROWS) tile
//! blocks and the column loops stop at ceil(n / BLOCK).
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
#[cutile::module]
pub mod cross_entropy_device {
    use crate::device_util::views::{
        arrive, arrive_and_wait, chunk_tile_range, load_partials, load_word, neg_inf_tiles, online_fold,
        partials_combine, publish_pair, publish_partial_after, store_masked_tile, store_tile_2d, strided_view,
        take_ticket, tile_mask, tile_neg_inf, tile_pointers, wait_arrived, whole_tile,
    };
    use cutile::core::*;

    /// The ROWS values `first`, `first + stride`, ... of `ptr` as a [ROWS, 1] tile; lanes outside
    /// `inside` not read (undefined: select after).
    unsafe fn row_values<E: ElementType, const ROWS: i32>(
        ptr: *mut E, first: i32, stride: i32, inside: Tile<bool, { [ROWS, 1] }>,
    ) -> Tile<E, { [ROWS, 1] }> {
        let ptrs: PointerTile<*mut E, { [ROWS, 1] }> = tile_pointers::<E, ROWS, 1>(ptr, first, stride);
        let (raw, _tok): (Tile<E, { [ROWS, 1] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, None, Latency::<1>);
        raw
    }

    /// The losses of rows r0 .. r0 + ROWS (f32, contiguous at `loss_ptr`), lanes outside `mask` not stored.
    unsafe fn store_losses<const ROWS: i32>(
        loss_ptr: *mut f32, r0: i32, losses: Tile<f32, { [ROWS, 1] }>, mask: Tile<bool, { [ROWS, 1] }>,
    ) {
        let at: PointerTile<*mut f32, { [ROWS, 1] }> = tile_pointers::<f32, ROWS, 1>(loss_ptr, r0, 1i32);
        let _stored: Token =
            store_ptr_tko(at, losses, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<1>);
    }

    /// The columns of column tile j, [ROWS, BLOCK].
    fn columns<const ROWS: i32, const BLOCK: i32>(j: i32) -> Tile<i32, { [ROWS, BLOCK] }> {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let first: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(j * BLOCK, tile);
        col_ids.reshape(shape![1, BLOCK]).broadcast(tile) + first
    }

    /// Rows r0 .. r0 + ROWS (r0 = tile block id * ROWS): with LOSS their losses into `loss_ptr` (f32,
    /// m contiguous) and with GRAD their gradients into `grad_ptr`. Strides in elements: x's and the
    /// gradient's rows; the targets' in i32 words (2 per row of contiguous i64 targets); the scales'
    /// (0: one scale for every row). `keep` = 1 - ε and `spread` = ε / n (the host divides once).
    // cuda_tile_assert! expands to unreachable!() in the host build (so what follows is unreachable there).
    #[allow(unreachable_code, unused_mut, clippy::too_many_arguments)]
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn cross_entropy_rows<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const LOSS: bool,
        const GRAD: bool,
        const WIDE: bool,
        const G_TMA: bool,
    >(
        grad_ptr: *mut T, loss_ptr: *mut f32, x_ptr: *mut T, target_ptr: *mut i32, scale_ptr: *mut f32, m: i32, n: i32,
        stride_x: i32, stride_g: i32, stride_t: i32, stride_s: i32, ignore_index: i32, keep: f32, spread: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let per_row: Shape<{ [ROWS, 1] }> = shape![ROWS, 1];
        let rb: i32 = get_tile_block_id().0;
        let r0: i32 = rb * ROWS;
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let tok: Token = new_token_unordered();
        let x_part: Partition<T, { [ROWS, BLOCK] }> =
            unsafe { neg_inf_tiles::<T, ROWS, BLOCK>(x_ptr, m, n, stride_x, tok) };

        // The targets; a row past m counts as ignored.
        let in_rows: Tile<bool, { [ROWS, 1] }> = tile_mask::<ROWS, 1>(r0, 0i32, m, 1i32);
        let zero_i: Tile<i32, { [ROWS, 1] }> = constant(0i32, per_row);
        let ignore: Tile<i32, { [ROWS, 1] }> = broadcast_scalar(ignore_index, per_row);
        let t_raw: Tile<i32, { [ROWS, 1] }> = row_values::<i32, ROWS>(target_ptr, r0 * stride_t, stride_t, in_rows);
        let t: Tile<i32, { [ROWS, 1] }> = select(in_rows, t_raw, ignore);
        let ignored: Tile<bool, { [ROWS, 1] }> = eq_tile(t, ignore);
        let classes: Tile<i32, { [ROWS, 1] }> = broadcast_scalar(n, per_row);
        let mut fine: Tile<bool, { [ROWS, 1] }> = ori(ignored, andi(ge_tile(t, zero_i), lt_tile(t, classes)));
        if WIDE {
            // an i64 target: its high word (little-endian, the next i32) is the low word's sign
            let first_high: i32 = r0 * stride_t + 1i32;
            let high_raw: Tile<i32, { [ROWS, 1] }> = row_values::<i32, ROWS>(target_ptr, first_high, stride_t, in_rows);
            let minus_one: Tile<i32, { [ROWS, 1] }> = constant(-1i32, per_row);
            let sign: Tile<i32, { [ROWS, 1] }> = select(lt_tile(t, zero_i), minus_one, zero_i);
            let high: Tile<i32, { [ROWS, 1] }> = select(in_rows, high_raw, sign);
            fine = andi(fine, eq_tile(high, sign));
        }
        let one_i: Tile<i32, { [ROWS, 1] }> = constant(1i32, per_row);
        let bad_rows: Tile<i32, { [ROWS] }> = select(fine, zero_i, one_i).reshape(shape![ROWS]);
        let bad: i32 = tile_to_scalar(reduce_sum(bad_rows, 0i32));
        cuda_tile_assert!(bad == 0i32, "cross_entropy: a target is outside [0, n) and is not ignore_index");

        // Pass 1, per lane: the running max and sum of exp(x - max), the sum of x inside the row and
        // the value of column t. The max starts at the lowest finite f32 (softmax_looped's reason).
        let log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let zero: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        let target_cols: Tile<i32, { [ROWS, BLOCK] }> = t.broadcast(tile);
        let classes_t: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(n, tile);
        let mut run_max: Tile<f32, { [ROWS, BLOCK] }> = constant(-3.4028235e38f32, tile);
        let mut run_sum: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        let mut sum_x: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        let mut x_t: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let cols: Tile<i32, { [ROWS, BLOCK] }> = columns::<ROWS, BLOCK>(j);
            let new_max: Tile<f32, { [ROWS, BLOCK] }> = maxf(run_max, x, nan::Disabled, ftz::Disabled);
            let rescale: Tile<f32, { [ROWS, BLOCK] }> = exp2((run_max - new_max) * log2e, ftz::Enabled);
            run_sum = run_sum * rescale + exp2((x - new_max) * log2e, ftz::Enabled);
            run_max = new_max;
            sum_x = sum_x + select(lt_tile(cols, classes_t), x, zero);
            x_t = x_t + select(eq_tile(cols, target_cols), x, zero);
        }
        let row_max: Tile<f32, { [ROWS] }> = reduce_max(run_max, 1i32);
        let mx: Tile<f32, { [ROWS, BLOCK] }> = row_max.reshape(shape![ROWS, 1]).broadcast(tile);
        let sum: Tile<f32, { [ROWS] }> = reduce_sum(run_sum * exp2((run_max - mx) * log2e, ftz::Enabled), 1i32);
        let ln2: Tile<f32, { [ROWS] }> = constant(0.6931471805599453f32, shape![ROWS]);
        let lse: Tile<f32, { [ROWS] }> = row_max + log2(sum) * ln2;
        let keep_r: Tile<f32, { [ROWS] }> = broadcast_scalar(keep, shape![ROWS]);
        let spread_r: Tile<f32, { [ROWS] }> = broadcast_scalar(spread, shape![ROWS]);
        let loss: Tile<f32, { [ROWS] }> = lse - keep_r * reduce_sum(x_t, 1i32) - spread_r * reduce_sum(sum_x, 1i32);
        let zero_r: Tile<f32, { [ROWS, 1] }> = constant(0.0f32, per_row);
        if LOSS {
            let loss_kept: Tile<f32, { [ROWS, 1] }> = select(ignored, zero_r, loss.reshape(per_row));
            store_losses::<ROWS>(loss_ptr, r0, loss_kept, in_rows);
        }

        if GRAD {
            // Pass 2: dx = g softmax(x) - g (ε / n) - g (1 - ε) [j == t], g 0 on an ignored row.
            let scale: Tile<f32, { [ROWS, 1] }> = row_values::<f32, ROWS>(scale_ptr, r0 * stride_s, stride_s, in_rows);
            let g: Tile<f32, { [ROWS, 1] }> = select(ignored, zero_r, scale);
            let coef: Tile<f32, { [ROWS, 1] }> = divf(g, sum.reshape(per_row), rounding::NearestEven, ftz::Disabled);
            let coef_t: Tile<f32, { [ROWS, BLOCK] }> = coef.broadcast(tile);
            let g_t: Tile<f32, { [ROWS, BLOCK] }> = g.broadcast(tile);
            let floor: Tile<f32, { [ROWS, BLOCK] }> = g_t * broadcast_scalar(spread, tile);
            let hit: Tile<f32, { [ROWS, BLOCK] }> = g_t * broadcast_scalar(keep, tile);
            let grad_view: Tensor<T, { [-1, -1] }> = strided_view(grad_ptr, m, n, stride_g, tok);
            let mut grad_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { grad_view.partition_full_mut(tile) };
            for j in 0i32..col_tiles {
                let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
                let cols: Tile<i32, { [ROWS, BLOCK] }> = columns::<ROWS, BLOCK>(j);
                let p: Tile<f32, { [ROWS, BLOCK] }> = exp2((x - mx) * log2e, ftz::Enabled) * coef_t - floor;
                let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(p - select(eq_tile(cols, target_cols), hit, zero));
                store_tile_2d::<T, ROWS, BLOCK, G_TMA>(&mut grad_part, dx, rb, j);
            }
        }
    }

    /// The element `at` points to, in f32, as a [1] tile, and the load's token.
    unsafe fn load_one<E: ElementType>(at: PointerTile<*mut E, { [] }>) -> (Tile<f32, { [1] }>, Token) {
        let (v, tok): (Tile<E, { [] }>, Token) =
            load_ptr_tko(at, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<1>);
        let f: Tile<f32, { [] }> = convert_tile(v);
        (f.reshape(shape![1]), tok)
    }

    /// Row r's target, in scalars: (kept: the target is not ignore_index, as a [1] tile; live: 1
    /// where kept, else 0; tc: the target's column, 0 for an ignored row, so inside the row). A
    /// kept target outside [0, n) fails a device assertion, as PyTorch's does; with WIDE (i64
    /// targets read as i32 word pairs) so does a high word that is not the low word's sign.
    // cuda_tile_assert! expands to unreachable!() in the host build (so what follows is unreachable there).
    #[allow(unreachable_code)]
    unsafe fn row_target<const WIDE: bool>(
        target_ptr: *mut i32, r: i32, stride_t: i32, ignore_index: i32, n: i32,
    ) -> (Tile<bool, { [1] }>, i32, i32) {
        let one_row: Shape<{ [1] }> = shape![1];
        let t_at: PointerTile<*mut i32, { [] }> = pointer_to_tile(target_ptr).offset(r * stride_t);
        let t: i32 = tile_to_scalar(load_word(t_at));
        if WIDE {
            // an i64 target: its high word (little-endian, the next i32) is the low word's sign
            let high_at: PointerTile<*mut i32, { [] }> = pointer_to_tile(target_ptr).offset(r * stride_t + 1i32);
            let high: i32 = tile_to_scalar(load_word(high_at));
            let sign: i32 = max(min(t, 0i32), -1i32);
            cuda_tile_assert!(high == sign, "cross_entropy: a target is outside [-2^31, 2^31)");
        }
        // live from a tile compare, not t - ignore_index (which wraps for ignore_index near i32::MIN)
        let one_i: Tile<i32, { [1] }> = constant(1i32, one_row);
        let zero_i: Tile<i32, { [1] }> = constant(0i32, one_row);
        let t_r: Tile<i32, { [1] }> = broadcast_scalar(t, one_row);
        let ignore_r: Tile<i32, { [1] }> = broadcast_scalar(ignore_index, one_row);
        let kept: Tile<bool, { [1] }> = ne_tile(t_r, ignore_r);
        let live_r: Tile<i32, { [1] }> = select(kept, one_i, zero_i);
        let live: i32 = tile_to_scalar(reduce_sum(live_r, 0i32));
        let in_range: i32 = min(max(t + 1i32, 0i32), 1i32) * min(max(n - t, 0i32), 1i32);
        let bad: i32 = live * (1i32 - in_range);
        cuda_tile_assert!(bad == 0i32, "cross_entropy: a target is outside [0, n) and is not ignore_index");
        (kept, live, t * live * in_range)
    }

    /// The gradient pass's per-row terms of a one-row tile, broadcast over the BLOCK-wide column
    /// tile: (the row's max, g / (its sum of exp), g ε / n, g (1 - ε), the target's column), with g the
    /// row's scale (at `scale_ptr` + `scale_at`) where `kept`, else 0.
    #[allow(clippy::too_many_arguments)]
    unsafe fn row_terms<const BLOCK: i32>(
        scale_ptr: *mut f32, scale_at: i32, kept: Tile<bool, { [1] }>, row_max: Tile<f32, { [1] }>,
        row_sum: Tile<f32, { [1] }>, keep: f32, spread: f32, tc: i32,
    ) -> (
        Tile<f32, { [1, BLOCK] }>,
        Tile<f32, { [1, BLOCK] }>,
        Tile<f32, { [1, BLOCK] }>,
        Tile<f32, { [1, BLOCK] }>,
        Tile<i32, { [1, BLOCK] }>,
    ) {
        let tile: Shape<{ [1, BLOCK] }> = shape![1, BLOCK];
        let at: PointerTile<*mut f32, { [] }> = pointer_to_tile(scale_ptr).offset(scale_at);
        let (scale, _scale_tok): (Tile<f32, { [1] }>, Token) = unsafe { load_one::<f32>(at) };
        let zero_r: Tile<f32, { [1] }> = constant(0.0f32, shape![1]);
        let g: Tile<f32, { [1] }> = select(kept, scale, zero_r);
        let coef: Tile<f32, { [1] }> = divf(g, row_sum, rounding::NearestEven, ftz::Disabled);
        let coef_t: Tile<f32, { [1, BLOCK] }> = coef.reshape(shape![1, 1]).broadcast(tile);
        let mx: Tile<f32, { [1, BLOCK] }> = row_max.reshape(shape![1, 1]).broadcast(tile);
        let g_t: Tile<f32, { [1, BLOCK] }> = g.reshape(shape![1, 1]).broadcast(tile);
        let floor: Tile<f32, { [1, BLOCK] }> = g_t * broadcast_scalar(spread, tile);
        let hit: Tile<f32, { [1, BLOCK] }> = g_t * broadcast_scalar(keep, tile);
        let target_cols: Tile<i32, { [1, BLOCK] }> = broadcast_scalar(tc, tile);
        (mx, coef_t, floor, hit, target_cols)
    }

    /// Column tile j's gradient from its logits x (f32) and `row_terms`' terms: g exp(x - M) / S,
    /// less g ε / n where FLOOR (without smoothing that term is 0: version 3 leaves it out),
    /// less g (1 - ε) on the target's column; in T.
    #[allow(clippy::too_many_arguments)]
    fn grad_tile<T: ElementType, const BLOCK: i32, const FLOOR: bool>(
        x: Tile<f32, { [1, BLOCK] }>, j: i32, mx: Tile<f32, { [1, BLOCK] }>, coef_t: Tile<f32, { [1, BLOCK] }>,
        floor: Tile<f32, { [1, BLOCK] }>, hit: Tile<f32, { [1, BLOCK] }>, target_cols: Tile<i32, { [1, BLOCK] }>,
        log2e: Tile<f32, { [1, BLOCK] }>, zero: Tile<f32, { [1, BLOCK] }>,
    ) -> Tile<T, { [1, BLOCK] }> {
        let mut p: Tile<f32, { [1, BLOCK] }> = exp2((x - mx) * log2e, ftz::Enabled) * coef_t;
        if FLOOR {
            p = p - floor;
        }
        let on_target: Tile<bool, { [1, BLOCK] }> = eq_tile(columns::<1, BLOCK>(j), target_cols);
        convert_tile(p - select(on_target, hit, zero))
    }

    /// Version 2 (2026-12-06; ffi.rs runs it for the variant knob form = 2, which op.py's autotune
    /// space offers for vocabulary rows beside version 1): row `tile block id` alone, with fewer
    /// instructions an element than `cross_entropy_rows` (whose bf16 loop is bound by issue, not by
    /// HBM: kernels/cross_entropy/NOTES.md). The target's logit is one gathered load, not a compare
    /// and select an element; the max and its rescale are per tile (`online_fold`: one exp2 an
    /// element, not two); the sum of x only with SMOOTH (ε > 0); a row whose target is ignore_index
    /// is not read (its loss 0, with GRAD its gradient zeros stored). The arguments are
    /// `cross_entropy_rows`'; ffi.rs runs it only where every element offset of x fits i32.
    #[allow(unreachable_code, unused_mut, clippy::too_many_arguments)]
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn cross_entropy_row<
        T: ElementType,
        const BLOCK: i32,
        const LOSS: bool,
        const GRAD: bool,
        const WIDE: bool,
        const SMOOTH: bool,
        const G_TMA: bool,
    >(
        grad_ptr: *mut T, loss_ptr: *mut f32, x_ptr: *mut T, target_ptr: *mut i32, scale_ptr: *mut f32, m: i32, n: i32,
        stride_x: i32, stride_g: i32, stride_t: i32, stride_s: i32, ignore_index: i32, keep: f32, spread: f32,
    ) {
        let tile: Shape<{ [1, BLOCK] }> = shape![1, BLOCK];
        let one_row: Shape<{ [1] }> = shape![1];
        let r: i32 = get_tile_block_id().0;
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let tok: Token = new_token_unordered();
        let x_part: Partition<T, { [1, BLOCK] }> = unsafe { neg_inf_tiles::<T, 1, BLOCK>(x_ptr, m, n, stride_x, tok) };

        let (kept, live, tc): (Tile<bool, { [1] }>, i32, i32) =
            unsafe { row_target::<WIDE>(target_ptr, r, stride_t, ignore_index, n) };
        let read_tiles: i32 = col_tiles * live;
        let zero_r: Tile<f32, { [1] }> = constant(0.0f32, one_row);

        // Pass 1: the online max and sum of exp per tile; the sum of x inside the row with SMOOTH.
        let log2e: Tile<f32, { [1, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let log2e_r: Tile<f32, { [1] }> = constant(1.4426950408889634f32, one_row);
        let zero: Tile<f32, { [1, BLOCK] }> = constant(0.0f32, tile);
        let classes: Tile<i32, { [1, BLOCK] }> = broadcast_scalar(n, tile);
        let mut run_max: Tile<f32, { [1] }> = constant(-3.4028235e38f32, one_row);
        let mut run_sum: Tile<f32, { [1] }> = constant(0.0f32, one_row);
        let mut sum_x: Tile<f32, { [1, BLOCK] }> = constant(0.0f32, tile);
        for j in 0i32..read_tiles {
            let x: Tile<f32, { [1, BLOCK] }> = convert_tile(x_part.load([r, j]));
            let (new_max, new_sum): (Tile<f32, { [1] }>, Tile<f32, { [1] }>) =
                online_fold::<1, BLOCK>(run_max, run_sum, x, log2e, log2e_r);
            run_max = new_max;
            run_sum = new_sum;
            if SMOOTH {
                let cols: Tile<i32, { [1, BLOCK] }> = columns::<1, BLOCK>(j);
                let inside: Tile<bool, { [1, BLOCK] }> = lt_tile(cols, classes);
                sum_x = sum_x + select(inside, x, zero);
            }
        }
        let x_at: PointerTile<*mut T, { [] }> = pointer_to_tile(x_ptr).offset(r * stride_x + tc);
        // the gradient's stores are ordered after this load (x_t_tok): out may be the logits
        let (x_t, x_t_tok): (Tile<f32, { [1] }>, Token) = load_one::<T>(x_at);
        let ln2: Tile<f32, { [1] }> = constant(0.6931471805599453f32, one_row);
        let keep_r: Tile<f32, { [1] }> = broadcast_scalar(keep, one_row);
        let mut loss: Tile<f32, { [1] }> = run_max + log2(run_sum) * ln2 - keep_r * x_t;
        if SMOOTH {
            let spread_r: Tile<f32, { [1] }> = broadcast_scalar(spread, one_row);
            let total_x: Tile<f32, { [1] }> = reduce_sum(sum_x, 1i32);
            loss = loss - spread_r * total_x;
        }
        if LOSS {
            let loss_row: Tile<f32, { [1] }> = select(kept, loss, zero_r);
            let loss_kept: Tile<f32, { [1, 1] }> = loss_row.reshape(shape![1, 1]);
            let loss_at: PointerTile<*mut f32, { [1, 1] }> = tile_pointers::<f32, 1, 1>(loss_ptr, r, 1i32);
            let _stored: Token =
                store_ptr_tko(loss_at, loss_kept, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<1>);
        }

        if GRAD {
            // Pass 2: dx = g softmax(x) - g (ε / n) - g (1 - ε) [j == t]; an ignored row's zeros.
            let (mx, coef_t, floor, hit, target_cols): (
                Tile<f32, { [1, BLOCK] }>,
                Tile<f32, { [1, BLOCK] }>,
                Tile<f32, { [1, BLOCK] }>,
                Tile<f32, { [1, BLOCK] }>,
                Tile<i32, { [1, BLOCK] }>,
            ) = row_terms::<BLOCK>(scale_ptr, r * stride_s, kept, run_max, run_sum, keep, spread, tc);
            let grad_view: Tensor<T, { [-1, -1] }> = strided_view(grad_ptr, m, n, stride_g, x_t_tok);
            let mut grad_part: PartitionMut<T, { [1, BLOCK] }> = unsafe { grad_view.partition_full_mut(tile) };
            for j in 0i32..read_tiles {
                let x: Tile<f32, { [1, BLOCK] }> = convert_tile(x_part.load([r, j]));
                let dx: Tile<T, { [1, BLOCK] }> =
                    grad_tile::<T, BLOCK, true>(x, j, mx, coef_t, floor, hit, target_cols, log2e, zero);
                store_tile_2d::<T, 1, BLOCK, G_TMA>(&mut grad_part, dx, r, j);
            }
            let zeros: Tile<T, { [1, BLOCK] }> = convert_tile(zero);
            for j in 0i32..(col_tiles - read_tiles) {
                store_tile_2d::<T, 1, BLOCK, G_TMA>(&mut grad_part, zeros, r, j);
            }
        }
    }

    /// Version 3 (2026-12-06; ffi.rs runs it for the variant knob form = 3): a row split into chunks
    /// of `chunk_tiles` BLOCK-wide tiles, one tile block a chunk, that exchange their partials
    /// through device memory as softmax's single-pass split does (`softmax_split_exchange_reread`:
    /// the progress argument, the counters and why the poll is an atomic are its). Grid: m x
    /// `chunks` tile blocks, a row's chunks consecutive. Pass 1 folds the chunk into its (max, sum
    /// of exp) (and with SMOOTH its sum of x), publishes them, counts itself in on the row's
    /// counter and waits for the row's other chunks; then each chunk has the row's max M and sum
    /// S; chunk 0 stores the loss (LOSS). Pass 2 (GRAD) re-reads the chunk, now from L2 (read a
    /// few microseconds before; the chunks in flight on the GPU, 132 SMs x 8 x 16 KB at bf16 and
    /// occupancy 8, are ~17 MB, 35 MB in f32, inside the 50 MB L2), and stores the gradient. So a
    /// row leaves DRAM once for the loss and the gradient, where version 2's second pass reads it
    /// again when hundreds of 250 KB rows are in flight, past L2. The arguments are
    /// `cross_entropy_row`'s, then the workspace: the partials (f32, `chunks` a row; `part_x`
    /// written and read only with SMOOTH and LOSS) and the rows' arrival counters (zero at launch).
    /// Whole tiles are loaded and stored unmasked, the row's ragged last tile through masked
    /// pointer tiles (a partition view there made tileiras stage the whole entry for more threads,
    /// 32 registers a thread at 4 warps and occupancy 8, spilling; ffi.rs: every element offset of
    /// x and of the gradient up to the padded last tile fits i32). Of a row whose target is
    /// ignore_index only column 0 is read (as the target's logit, unused: its loss is 0, its
    /// gradient zeros); its chunks still exchange (their values unused). The gradient may lie over
    /// the logits: every chunk of a live row reads its tiles and the target's logit before it
    /// arrives, and stores only after all the row's chunks have arrived (an ignored row's zeros are
    /// stored without waiting: the one read of it they may overtake, column 0's, is unused).
    #[allow(unreachable_code, unused_mut, clippy::too_many_arguments)]
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn cross_entropy_split<
        T: ElementType,
        const BLOCK: i32,
        const PARTS: i32,
        const LOSS: bool,
        const GRAD: bool,
        const WIDE: bool,
        const SMOOTH: bool,
    >(
        grad_ptr: *mut T, loss_ptr: *mut f32, x_ptr: *mut T, target_ptr: *mut i32, scale_ptr: *mut f32, m: i32, n: i32,
        stride_x: i32, stride_g: i32, stride_t: i32, stride_s: i32, ignore_index: i32, keep: f32, spread: f32,
        part_max: *mut f32, part_sum: *mut f32, part_x: *mut f32, arrived: *mut i32, chunk_tiles: i32, chunks: i32,
    ) {
        let pid: i32 = get_tile_block_id().0;
        let r: i32 = pid / chunks;
        let c: i32 = pid - r * chunks;
        let (kept, live, tc, x_t, t_read): (Tile<bool, { [1] }>, i32, i32, Tile<f32, { [1] }>, Token) = unsafe {
            split_sums::<T, BLOCK, LOSS, WIDE, SMOOTH>(
                x_ptr,
                target_ptr,
                m,
                n,
                stride_x,
                stride_t,
                ignore_index,
                part_max,
                part_sum,
                part_x,
                r,
                c,
                chunk_tiles,
                chunks,
            )
        };
        let t_wait: Token = unsafe { arrive_and_wait(arrived, r, chunks, t_read) };
        unsafe {
            split_stores::<T, BLOCK, PARTS, LOSS, GRAD, SMOOTH>(
                grad_ptr,
                loss_ptr,
                x_ptr,
                scale_ptr,
                m,
                n,
                stride_x,
                stride_g,
                stride_s,
                keep,
                spread,
                part_max,
                part_sum,
                part_x,
                r,
                c,
                chunk_tiles,
                chunks,
                kept,
                live,
                tc,
                x_t,
                t_wait,
            )
        };
    }

    /// Version 3's first pass over chunk c of row r (`cross_entropy_split`'s): the row's target
    /// (kept, live, its column tc), the chunk's (max, sum of exp) published at column c of the
    /// partials (`parts`: max, sum, and with SMOOTH and LOSS the sum of x), and the target's logit
    /// x_t read (before any chunk of the row stores: the gradient may lie over the logits). Returns
    /// (kept, live, tc, x_t) and the token the arrival must follow (the publishes and the read).
    #[allow(clippy::too_many_arguments)]
    unsafe fn split_sums<T: ElementType, const BLOCK: i32, const LOSS: bool, const WIDE: bool, const SMOOTH: bool>(
        x_ptr: *mut T, target_ptr: *mut i32, m: i32, n: i32, stride_x: i32, stride_t: i32, ignore_index: i32,
        part_max: *mut f32, part_sum: *mut f32, part_x: *mut f32, r: i32, c: i32, chunk_tiles: i32, chunks: i32,
    ) -> (Tile<bool, { [1] }>, i32, i32, Tile<f32, { [1] }>, Token) {
        let tile: Shape<{ [1, BLOCK] }> = shape![1, BLOCK];
        let one_row: Shape<{ [1] }> = shape![1];
        let x_base: PointerTile<*mut T, { [1, BLOCK] }> = tile_pointers::<T, 1, BLOCK>(x_ptr, r * stride_x, stride_x);
        let (kept, live, tc): (Tile<bool, { [1] }>, i32, i32) =
            unsafe { row_target::<WIDE>(target_ptr, r, stride_t, ignore_index, n) };
        // The chunk's whole tiles [j0, j_full) and ragged tile [j_full, j_end); none on an ignored row.
        let (j0, j_whole, j_stop): (i32, i32, i32) = chunk_tile_range::<BLOCK>(c, chunk_tiles, n);
        let j_full: i32 = j0 + (j_whole - j0) * live;
        let j_end: i32 = j_full + (j_stop - j_whole) * live;

        // Pass 1: the chunk's max (at least the lowest finite f32) and sum of exp; with SMOOTH its sum of x.
        let log2e: Tile<f32, { [1, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let log2e_r: Tile<f32, { [1] }> = constant(1.4426950408889634f32, one_row);
        let zero: Tile<f32, { [1, BLOCK] }> = constant(0.0f32, tile);
        let mut c_max: Tile<f32, { [1] }> = constant(-3.4028235e38f32, one_row);
        let mut c_sum: Tile<f32, { [1] }> = constant(0.0f32, one_row);
        let mut sum_x: Tile<f32, { [1, BLOCK] }> = constant(0.0f32, tile);
        for j in j0..j_full {
            let (x, _col0) = unsafe { whole_tile::<T, 1, BLOCK>(x_base, j) };
            let (new_max, new_sum): (Tile<f32, { [1] }>, Tile<f32, { [1] }>) =
                online_fold::<1, BLOCK>(c_max, c_sum, x, log2e, log2e_r);
            c_max = new_max;
            c_sum = new_sum;
            if SMOOTH {
                sum_x = sum_x + x;
            }
        }
        for j in j_full..j_end {
            let (x, inside) = unsafe { tile_neg_inf::<T, 1, BLOCK, 3>(x_ptr, r, j * BLOCK, m, n, stride_x) };
            let (new_max, new_sum): (Tile<f32, { [1] }>, Tile<f32, { [1] }>) =
                online_fold::<1, BLOCK>(c_max, c_sum, x, log2e, log2e_r);
            c_max = new_max;
            c_sum = new_sum;
            if SMOOTH {
                sum_x = sum_x + select(inside, x, zero);
            }
        }

        // The target's logit read first (before any chunk of the row stores), the partials published.
        let x_at: PointerTile<*mut T, { [] }> = pointer_to_tile(x_ptr).offset(r * stride_x + tc);
        let (x_t, t_xt): (Tile<f32, { [1] }>, Token) = unsafe { load_one::<T>(x_at) };
        let mut t_pub: Token = unsafe { publish_pair::<1>(part_max, part_sum, r, c, chunks, c_max, c_sum) };
        if SMOOTH {
            if LOSS {
                // only the loss reads it (the gradient's ε term is g ε / n alone)
                let chunk_x: Tile<f32, { [1] }> = reduce_sum(sum_x, 1i32);
                t_pub = unsafe { publish_partial_after::<1>(part_x, r, c, chunks, chunk_x, t_pub) };
            }
        }
        (kept, live, tc, x_t, join_tokens(&[t_pub, t_xt]))
    }

    /// Version 3's second part for chunk c of row r once the row's chunks have all arrived (`t_wait`,
    /// the wait's last poll): the row's (M, S) from the partials; with LOSS chunk 0 stores the row's
    /// loss (from x_t, read before the arrival); with GRAD the chunk's gradient from its logits read
    /// again, an ignored row's zeros. (kept, live, tc, x_t): split_sums'.
    #[allow(clippy::too_many_arguments)]
    unsafe fn split_stores<
        T: ElementType,
        const BLOCK: i32,
        const PARTS: i32,
        const LOSS: bool,
        const GRAD: bool,
        const SMOOTH: bool,
    >(
        grad_ptr: *mut T, loss_ptr: *mut f32, x_ptr: *mut T, scale_ptr: *mut f32, m: i32, n: i32, stride_x: i32,
        stride_g: i32, stride_s: i32, keep: f32, spread: f32, part_max: *mut f32, part_sum: *mut f32, part_x: *mut f32,
        r: i32, c: i32, chunk_tiles: i32, chunks: i32, kept: Tile<bool, { [1] }>, live: i32, tc: i32,
        x_t: Tile<f32, { [1] }>, t_wait: Token,
    ) {
        let tile: Shape<{ [1, BLOCK] }> = shape![1, BLOCK];
        let one_row: Shape<{ [1] }> = shape![1];
        let x_base: PointerTile<*mut T, { [1, BLOCK] }> = tile_pointers::<T, 1, BLOCK>(x_ptr, r * stride_x, stride_x);
        let (j0, j_whole, j_stop): (i32, i32, i32) = chunk_tile_range::<BLOCK>(c, chunk_tiles, n);
        let j_full: i32 = j0 + (j_whole - j0) * live;
        let j_end: i32 = j_full + (j_stop - j_whole) * live;
        let log2e: Tile<f32, { [1, BLOCK] }> = constant(1.4426950408889634f32, tile);
        let zero: Tile<f32, { [1, BLOCK] }> = constant(0.0f32, tile);
        let (row_max, row_sum, t_parts): (Tile<f32, { [1] }>, Tile<f32, { [1] }>, Token) =
            unsafe { partials_combine::<1, PARTS>(part_max, part_sum, r, chunks, t_wait) };
        let zero_r: Tile<f32, { [1] }> = constant(0.0f32, one_row);
        if LOSS {
            let ln2: Tile<f32, { [1] }> = constant(0.6931471805599453f32, one_row);
            let keep_r: Tile<f32, { [1] }> = broadcast_scalar(keep, one_row);
            let mut loss: Tile<f32, { [1] }> = row_max + log2(row_sum) * ln2 - keep_r * x_t;
            if SMOOTH {
                let (px_raw, p_mask, _t_px) = unsafe { load_partials::<1, PARTS>(part_x, r, chunks, t_parts) };
                let p_zero: Tile<f32, { [1, PARTS] }> = constant(0.0f32, shape![1, PARTS]);
                let total_x: Tile<f32, { [1] }> = reduce_sum(select(p_mask, px_raw, p_zero), 1i32);
                let spread_r: Tile<f32, { [1] }> = broadcast_scalar(spread, one_row);
                loss = loss - spread_r * total_x;
            }
            let loss_kept: Tile<f32, { [1] }> = select(kept, loss, zero_r);
            let loss_row: Tile<f32, { [1, 1] }> = loss_kept.reshape(shape![1, 1]);
            let first: Tile<bool, { [1, 1] }> = tile_mask::<1, 1>(c, 0i32, 1i32, 1i32); // chunk 0 stores it
            unsafe { store_losses::<1>(loss_ptr, r, loss_row, first) };
        }

        if GRAD {
            // Pass 2: dx = g exp(x - M) / S - g (ε / n) - g (1 - ε) [j == t]; an ignored row's zeros.
            let (mx, coef_t, floor, hit, target_cols): (
                Tile<f32, { [1, BLOCK] }>,
                Tile<f32, { [1, BLOCK] }>,
                Tile<f32, { [1, BLOCK] }>,
                Tile<f32, { [1, BLOCK] }>,
                Tile<i32, { [1, BLOCK] }>,
            ) = unsafe { row_terms::<BLOCK>(scale_ptr, r * stride_s, kept, row_max, row_sum, keep, spread, tc) };
            let g_base: PointerTile<*mut T, { [1, BLOCK] }> =
                tile_pointers::<T, 1, BLOCK>(grad_ptr, r * stride_g, stride_g);
            for j in j0..j_full {
                let (x, col0) = unsafe { whole_tile::<T, 1, BLOCK>(x_base, j) };
                let dx: Tile<T, { [1, BLOCK] }> =
                    grad_tile::<T, BLOCK, SMOOTH>(x, j, mx, coef_t, floor, hit, target_cols, log2e, zero);
                let g_ptrs: PointerTile<*mut T, { [1, BLOCK] }> = g_base.offset_tile(col0);
                let _g_tok: Token = unsafe {
                    store_ptr_tko(g_ptrs, dx, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>)
                };
            }
            for j in j_full..j_end {
                let (x, inside) = unsafe { tile_neg_inf::<T, 1, BLOCK, 3>(x_ptr, r, j * BLOCK, m, n, stride_x) };
                let dx: Tile<T, { [1, BLOCK] }> =
                    grad_tile::<T, BLOCK, SMOOTH>(x, j, mx, coef_t, floor, hit, target_cols, log2e, zero);
                unsafe { store_masked_tile::<T, 1, BLOCK>(grad_ptr, dx, inside, r, j * BLOCK, stride_g) };
            }
            let zeros: Tile<T, { [1, BLOCK] }> = convert_tile(zero);
            for j in j0..(j0 + (j_stop - j0) * (1i32 - live)) {
                let inside: Tile<bool, { [1, BLOCK] }> = tile_mask::<1, BLOCK>(r, j * BLOCK, m, n);
                unsafe { store_masked_tile::<T, 1, BLOCK>(grad_ptr, zeros, inside, r, j * BLOCK, stride_g) };
            }
        }
    }
    /// Version 4 (2026-12-08; ffi.rs runs it for the variant knob form = 4): version 3's chunks and
    /// exchange, without a wait behind a tile block's own row (softmax_backward's lagged split:
    /// kernels/softmax_backward/NOTES.md). Tile blocks take tickets (device_util's `take_ticket`);
    /// the one holding ticket t runs version 3's first pass over chunk t (chunks numbered row by row,
    /// `chunks` a row: `split_sums`), publishes the target's logit it read at column c of `part_t`
    /// and arrives; then, from ticket `lag` on, it runs version 3's second part (`split_stores`) for
    /// chunk t - lag, an earlier row's (lag >= chunks), after waiting for that row's chunks (expected
    /// to have arrived by then: one poll; to be measured), with the row's target read again and its
    /// x_t from `part_t` (the logits there may already hold the gradient). Grid: m x chunks + lag
    /// tile blocks. The gradient may lie over the logits: a chunk's logits and the target's logit
    /// are read by the ticket that sums it before it arrives, and a live row's chunk gradient is
    /// stored after the whole row has arrived, by the only tile block that reads the chunk again (an
    /// ignored row's zeros do not wait: the one read of it they may overtake, column 0's as its
    /// target logit, is unused). Progress holds for any dispatch order and residency (the chunks a
    /// ticket waits for hold lower tickets, and each arrives before it waits: its wait follows its
    /// arrival's token), so no SM-count limit. `ticket`: the ticket counter, zero at
    /// launch, beside the rows' counters `arrived`.
    #[allow(unreachable_code, unused_mut, clippy::too_many_arguments)]
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn cross_entropy_lagged<
        T: ElementType,
        const BLOCK: i32,
        const PARTS: i32,
        const LOSS: bool,
        const GRAD: bool,
        const WIDE: bool,
        const SMOOTH: bool,
    >(
        grad_ptr: *mut T, loss_ptr: *mut f32, x_ptr: *mut T, target_ptr: *mut i32, scale_ptr: *mut f32, m: i32, n: i32,
        stride_x: i32, stride_g: i32, stride_t: i32, stride_s: i32, ignore_index: i32, keep: f32, spread: f32,
        part_max: *mut f32, part_sum: *mut f32, part_x: *mut f32, part_t: *mut f32, arrived: *mut i32,
        ticket: *mut i32, chunk_tiles: i32, chunks: i32, lag: i32,
    ) {
        let (t, t_ticket): (i32, Token) = unsafe { take_ticket(ticket) };
        let mut t_done: Token = t_ticket; // the wait below follows the arrival
        let sums: i32 = if t < m * chunks { 1i32 } else { 0i32 };
        for _s in 0i32..sums {
            let r: i32 = t / chunks;
            let c: i32 = t - r * chunks;
            let (_kept, _live, _tc, x_t, t_read): (Tile<bool, { [1] }>, i32, i32, Tile<f32, { [1] }>, Token) = unsafe {
                split_sums::<T, BLOCK, LOSS, WIDE, SMOOTH>(
                    x_ptr,
                    target_ptr,
                    m,
                    n,
                    stride_x,
                    stride_t,
                    ignore_index,
                    part_max,
                    part_sum,
                    part_x,
                    r,
                    c,
                    chunk_tiles,
                    chunks,
                )
            };
            let t_x: Token = unsafe { publish_partial_after::<1>(part_t, r, c, chunks, x_t, t_read) };
            let (_before, t_arrive): (i32, Token) = unsafe { arrive(arrived, r, t_x) };
            t_done = t_arrive;
        }
        let stores: i32 = if t >= lag { 1i32 } else { 0i32 };
        for _g in 0i32..stores {
            let g: i32 = t - lag;
            let r: i32 = g / chunks;
            let c: i32 = g - r * chunks;
            let (kept, live, tc): (Tile<bool, { [1] }>, i32, i32) =
                unsafe { row_target::<WIDE>(target_ptr, r, stride_t, ignore_index, n) };
            let t_wait: Token = unsafe { wait_arrived(arrived, r, chunks, t_done) };
            let x_at: PointerTile<*mut f32, { [] }> = pointer_to_tile(part_t).offset(r * chunks + c);
            let (x_t_raw, t_xt): (Tile<f32, { [] }>, Token) = unsafe {
                load_ptr_tko(x_at, ordering::Weak, None::<scope::TileBlock>, None, None, Some(t_wait), Latency::<1>)
            };
            let x_t: Tile<f32, { [1] }> = x_t_raw.reshape(shape![1]);
            unsafe {
                split_stores::<T, BLOCK, PARTS, LOSS, GRAD, SMOOTH>(
                    grad_ptr,
                    loss_ptr,
                    x_ptr,
                    scale_ptr,
                    m,
                    n,
                    stride_x,
                    stride_g,
                    stride_s,
                    keep,
                    spread,
                    part_max,
                    part_sum,
                    part_x,
                    r,
                    c,
                    chunk_tiles,
                    chunks,
                    kept,
                    live,
                    tc,
                    x_t,
                    join_tokens(&[t_wait, t_xt]),
                )
            };
        }
    }
}
