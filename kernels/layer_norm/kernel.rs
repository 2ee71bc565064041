//! LayerNorm device code: y[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * w + b over the last dim,
//! mean and var (biased, / n) of row r.
//!
//! Element type T is f32, f16 or bf16 (in and out); the statistics and the scaling are done in f32.
//! Weight and bias are each optional: the const generics HAS_W and HAS_B select, at compile time,
//! whether w (else 1) and b (else 0) are loaded; a missing one's pointer is never read. The entries
//! take raw device pointers (PyTorch owns x, y, w and b; the aligned persistent entry's workspace is
//! the launcher's) and build strided views over them: rows may
//! be padded (row stride >= n), the last dim is contiguous.
//!
//! The variance is computed so that a large mean cannot cancel it away (E[x^2] - mean^2 in f32
//! loses every digit once |mean| / std reaches ~1e3):
//!   * a row held whole in one tile: two passes over the registers, mean first, then the sum of
//!     (x - mean)^2 — exact two-pass, no extra memory traffic;
//!   * a row read in column tiles (looped): shifted sums. The shift c is the mean of the row's
//!     first column tile (always full: n > BLOCK), then one pass sums d = x - c and d^2, and
//!     mean = c + S1/n, var = S2/n - (S1/n)^2. With c within a few std of the mean, S1/n is small
//!     and nothing cancels; it costs one subtract per element and no third read of the row.
//!
//! Lanes past n read as zero and are masked out of both sums (x - mean is not zero there).
//!
//! Each tile block handles ROWS consecutive rows; columns are read in BLOCK-wide tiles through
//! zero-padded partitions, and stores outside [m, n] are dropped, so any m and n work. Shapes of
//! the same computation (rms_norm's, which this kernel follows):
//!   * `layer_norm_row`    — n <= BLOCK: the row block is loaded once and stays in registers.
//!   * `layer_norm_row_persistent` — the same with a capped grid: each tile block loads w and b
//!     once and walks every grid-th row tile.
//!   * `layer_norm_row_tail` — BLOCK < n <= BLOCK + TAIL: the row block held whole as a body
//!     tile and a narrower tail tile (fewer idle lanes than one power-of-two tile at n = 5120,
//!     11008 ...), one tile block per row tile or a persistent grid; `layer_norm_row_tail_masked`
//!     the same through masked pointer tiles, one tile block per row tile;
//!     `layer_norm_row_tail_prefetch` through pointer tiles on a persistent grid, loading the next
//!     row tile ahead.
//!   * `layer_norm_looped` — n >  BLOCK: pass 1 the shifted sums over the column tiles, pass 2
//!     re-reads them (mostly from L2) to normalize and store.
//!   * `layer_norm_row_masked`, `layer_norm_looped_masked` — the same two for tiles that do not
//!     divide (m, n), through pointer tiles and a mask of the lanes inside (m, n) (ffi.rs runs them
//!     where the offsets fit i32); `layer_norm_row_exact` the whole-row one without masks, for a
//!     pointer variant whose tile divides (m, n).
//!   * `layer_norm_row_aligned` — rows that do not start or end on a 16-byte boundary (n = 4097):
//!     rms_norm's aligned entry (a 16-byte-aligned body and an edge tile per row), one tile block
//!     per row tile or (`layer_norm_row_aligned_persistent`) a capped grid reading w and b once.
//!
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses`: the launcher (ffi.rs) sizes the grid as ceil(m / ROWS) (or fewer, with the
//! persistent loop stopping at ceil(m / ROWS)) and the column loops stop at ceil(n / BLOCK), so
//! every tile index is inside its partition by construction.
#[cutile::module]
pub mod layer_norm_device {
    use crate::device_util::tile_order::persistent_row_tiles;
    use crate::device_util::views::{
        aligned_load, aligned_row_vector, aligned_row_vector_edge, aligned_store, body_tail_raw, load_whole,
        next_body_tail_raw, restage, store_whole, strided_view, tile_mask, tile_pointers, vector_view,
    };
    use cutile::core::*;

    /// x and y as (m, n) views with their row strides, w and b as n contiguous elements each.
    #[allow(clippy::type_complexity)]
    unsafe fn ln_views<T: ElementType>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) -> (Tensor<T, { [-1, -1] }>, Tensor<T, { [-1, -1] }>, Tensor<T, { [-1] }>, Tensor<T, { [-1] }>) {
        let tok: Token = new_token_unordered();
        let x_view: Tensor<T, { [-1, -1] }> = strided_view(x_ptr, m, n, stride_x, tok);
        let y_view: Tensor<T, { [-1, -1] }> = strided_view(y_ptr, m, n, stride_y, tok);
        let w_view: Tensor<T, { [-1] }> = vector_view(w_ptr, n, tok);
        let b_view: Tensor<T, { [-1] }> = vector_view(b_ptr, n, tok);
        (x_view, y_view, w_view, b_view)
    }

    /// The partitions of `layer_norm_row`, `layer_norm_row_persistent` and `layer_norm_looped`:
    /// x in ROWS x BLOCK tiles, w and b in BLOCK-wide tiles (all three zero-padded) and y in ROWS x
    /// BLOCK tiles to store, over the views `ln_views` makes.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    unsafe fn row_partitions<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) -> (
        Partition<'static, T, { [ROWS, BLOCK] }>,
        Partition<'static, T, { [BLOCK] }>,
        Partition<'static, T, { [BLOCK] }>,
        PartitionMut<'static, T, { [ROWS, BLOCK] }>,
    ) {
        let tok: Token = new_token_unordered();
        // The views as device_util's `strided_view` and `vector_view` make them, made here: cutile
        // 0.5 does not partition a view that a helper returned.
        let x_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, n] };
        let x_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_x] };
        let x_view: Tensor<T, { [-1, -1] }> = make_tensor_view(pointer_to_tile(x_ptr), x_shape, x_strides, tok);
        let y_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, n] };
        let y_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_y] };
        let y_view: Tensor<T, { [-1, -1] }> = make_tensor_view(pointer_to_tile(y_ptr), y_shape, y_strides, tok);
        let v_shape: Shape<{ [-1] }> = Shape::<{ [-1] }> { dims: &[n] };
        let v_strides: Array<{ [1] }> = Array::<{ [1] }> { dims: &[] };
        let w_view: Tensor<T, { [-1] }> = make_tensor_view(pointer_to_tile(w_ptr), v_shape, v_strides, tok);
        let b_view: Tensor<T, { [-1] }> = make_tensor_view(pointer_to_tile(b_ptr), v_shape, v_strides, tok);
        let x_tok: Token = x_view.token();
        let x_part: Partition<'static, T, { [ROWS, BLOCK] }> =
            make_partition_view(&x_view, shape![ROWS, BLOCK], padding::Zero, dim_map::Identity, x_tok);
        let w_tok: Token = w_view.token();
        let w_part: Partition<'static, T, { [BLOCK] }> =
            make_partition_view(&w_view, shape![BLOCK], padding::Zero, dim_map::Identity, w_tok);
        let b_tok: Token = b_view.token();
        let b_part: Partition<'static, T, { [BLOCK] }> =
            make_partition_view(&b_view, shape![BLOCK], padding::Zero, dim_map::Identity, b_tok);
        let y_tok: Token = y_view.token();
        let y_part: PartitionMut<'static, T, { [ROWS, BLOCK] }> =
            make_partition_view_mut(&y_view, shape![ROWS, BLOCK], padding::None, y_tok);
        (x_part, w_part, b_part, y_part)
    }

    /// A per-row value broadcast over the row block.
    fn rows_bc<const ROWS: i32, const BLOCK: i32>(v: Tile<f32, { [ROWS] }>) -> Tile<f32, { [ROWS, BLOCK] }> {
        v.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK])
    }

    /// sum / n per row, with exact (round-to-nearest) division.
    fn per_elem<const ROWS: i32>(sum: Tile<f32, { [ROWS] }>, n: i32) -> Tile<f32, { [ROWS] }> {
        let n_scalar: f32 = convert_scalar(n);
        let n_f: Tile<f32, { [ROWS] }> = broadcast_scalar(n_scalar, shape![ROWS]);
        divf(sum, n_f, rounding::NearestEven, ftz::Disabled)
    }

    /// rsqrt(var + eps) per row, broadcast over the row block.
    fn inv_std<const ROWS: i32, const BLOCK: i32>(
        var: Tile<f32, { [ROWS] }>, eps: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        rows_bc::<ROWS, BLOCK>(rsqrt(var + eps_t, ftz::Disabled))
    }

    /// The lanes of a ROWS x BLOCK tile whose columns, counted from `col0`, lie before n.
    fn cols_inside<const ROWS: i32, const BLOCK: i32>(col0: i32, n: i32) -> Tile<bool, { [ROWS, BLOCK] }> {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let cols: Tile<i32, { [ROWS, BLOCK] }> = col_ids.reshape(shape![1, BLOCK]).broadcast(tile);
        let col_end: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(n - col0, tile);
        lt_tile(cols, col_end)
    }

    /// `v` where `keep`, else 0.
    fn zero_outside<const ROWS: i32, const BLOCK: i32>(
        keep: Tile<bool, { [ROWS, BLOCK] }>, v: Tile<f32, { [ROWS, BLOCK] }>,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let zero: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, shape![ROWS, BLOCK]);
        select(keep, v, zero)
    }

    /// Two-pass statistics of rows held whole (lanes outside `keep` are zero in x): x - mean
    /// (zero outside `keep`) and rsqrt(var + eps), both broadcast over the row block.
    fn centered_and_inv_std<const ROWS: i32, const BLOCK: i32>(
        x: Tile<f32, { [ROWS, BLOCK] }>, keep: Tile<bool, { [ROWS, BLOCK] }>, n: i32, eps: f32,
    ) -> (Tile<f32, { [ROWS, BLOCK] }>, Tile<f32, { [ROWS, BLOCK] }>) {
        let mean: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(reduce_sum(x, 1i32), n);
        let d: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(keep, x - rows_bc::<ROWS, BLOCK>(mean));
        let var: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(reduce_sum(d * d, 1i32), n);
        (d, inv_std::<ROWS, BLOCK>(var, eps))
    }

    /// Shifted sums (module doc): from the shift c and the per-lane sums of d = x - c and d^2,
    /// mean and rsqrt(var + eps) per row, broadcast over the row block (var clamped at 0 against
    /// rounding).
    fn shifted_stats<const ROWS: i32, const BLOCK: i32>(
        shift: Tile<f32, { [ROWS] }>, acc1: Tile<f32, { [ROWS, BLOCK] }>, acc2: Tile<f32, { [ROWS, BLOCK] }>, n: i32,
        eps: f32,
    ) -> (Tile<f32, { [ROWS, BLOCK] }>, Tile<f32, { [ROWS, BLOCK] }>) {
        let s1: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(reduce_sum(acc1, 1i32), n);
        let s2: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(reduce_sum(acc2, 1i32), n);
        let zero: Tile<f32, { [ROWS] }> = constant(0.0f32, shape![ROWS]);
        let var: Tile<f32, { [ROWS] }> = max_tile(s2 - s1 * s1, zero);
        (rows_bc::<ROWS, BLOCK>(shift + s1), inv_std::<ROWS, BLOCK>(var, eps))
    }

    /// Column tile j of w or b in f32, repeated for each of the ROWS rows; `absent` (1 for w, 0
    /// for b) when the kernel is compiled without it (HAS = false: nothing is loaded).
    fn param_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const HAS: bool>(
        part: &Partition<T, { [BLOCK] }>, j: i32, absent: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        if HAS {
            let row: Tile<T, { [BLOCK] }> = part.load([j]);
            let v: Tile<f32, { [ROWS, BLOCK] }> =
                convert_tile(row.reshape(shape![1, BLOCK]).broadcast(shape![ROWS, BLOCK]));
            v
        } else {
            let v: Tile<f32, { [ROWS, BLOCK] }> = broadcast_scalar(absent, shape![ROWS, BLOCK]);
            v
        }
    }

    /// n <= BLOCK: one load, one store per element.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let rb: i32 = get_tile_block_id().0;
        let (x_part, w_part, b_part, mut y_part) =
            unsafe { row_partitions::<T, ROWS, BLOCK>(y_ptr, x_ptr, w_ptr, b_ptr, m, n, stride_x, stride_y) };

        let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
        let keep: Tile<bool, { [ROWS, BLOCK] }> = cols_inside::<ROWS, BLOCK>(0i32, n);
        let (d, inv) = centered_and_inv_std::<ROWS, BLOCK>(x, keep, n, eps);
        let w: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_W>(&w_part, 0i32, 1.0f32);
        let b: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_B>(&b_part, 0i32, 0.0f32);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(d * inv * w + b);
        y_part.store(y, [rb, 0i32]);
    }

    /// n <= BLOCK, persistent: a grid of fewer tile blocks than row tiles; each loads w and b once
    /// and walks row tiles pid, pid + grid, ... (the host sizes the grid from the SM count).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_persistent<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let (x_part, w_part, b_part, mut y_part) =
            unsafe { row_partitions::<T, ROWS, BLOCK>(y_ptr, x_ptr, w_ptr, b_ptr, m, n, stride_x, stride_y) };

        let w: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_W>(&w_part, 0i32, 1.0f32);
        let b: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_B>(&b_part, 0i32, 0.0f32);
        let keep: Tile<bool, { [ROWS, BLOCK] }> = cols_inside::<ROWS, BLOCK>(0i32, n);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
            let (d, inv) = centered_and_inv_std::<ROWS, BLOCK>(x, keep, n, eps);
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(d * inv * w + b);
            y_part.store(y, [rb, 0i32]);
        }
    }

    /// The mean per row of rows held in a body and a tail tile (lanes past the row zero in x).
    fn body_tail_mean<const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        xb: Tile<f32, { [ROWS, BLOCK] }>, xt: Tile<f32, { [ROWS, TAIL] }>, n: i32,
    ) -> Tile<f32, { [ROWS] }> {
        let sum_b: Tile<f32, { [ROWS] }> = reduce_sum(xb, 1i32);
        let sum_t: Tile<f32, { [ROWS] }> = reduce_sum(xt, 1i32);
        per_elem::<ROWS>(sum_b + sum_t, n)
    }

    /// The body-and-tail entries' outputs, in T: from x - mean in the body and the tail (zero past
    /// the row), the variance per row (the exact second pass), then d * rsqrt(var + eps) * w + b.
    #[allow(clippy::too_many_arguments)]
    fn body_tail_normalized<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        db: Tile<f32, { [ROWS, BLOCK] }>, dt: Tile<f32, { [ROWS, TAIL] }>, n: i32, eps: f32,
        wb: Tile<f32, { [ROWS, BLOCK] }>, wt: Tile<f32, { [ROWS, TAIL] }>, bb: Tile<f32, { [ROWS, BLOCK] }>,
        bt: Tile<f32, { [ROWS, TAIL] }>,
    ) -> (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, TAIL] }>) {
        let sq_b: Tile<f32, { [ROWS] }> = reduce_sum(db * db, 1i32);
        let sq_t: Tile<f32, { [ROWS] }> = reduce_sum(dt * dt, 1i32);
        let var: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(sq_b + sq_t, n);
        let yb: Tile<T, { [ROWS, BLOCK] }> = convert_tile(db * inv_std::<ROWS, BLOCK>(var, eps) * wb + bb);
        let yt: Tile<T, { [ROWS, TAIL] }> = convert_tile(dt * inv_std::<ROWS, TAIL>(var, eps) * wt + bt);
        (yb, yt)
    }

    /// BLOCK < n <= BLOCK + TAIL (TAIL a power of two <= BLOCK): the row block held whole as a full
    /// BLOCK-wide body tile and a TAIL-wide tail tile (column tile BLOCK / TAIL of a TAIL-wide
    /// partition; lanes past n read 0, are masked out of the second sum and not stored): the exact
    /// two passes over the registers of `layer_norm_row`, on fewer idle lanes than the power of two
    /// above n (5120 = 4096 + 1024: none). A capped grid walks row tiles pid, pid + grid, ...
    /// loading w and b once, as `layer_norm_row_persistent`; a grid of one tile block per row
    /// tile runs the loop once.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_tail<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const TAIL: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let body: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let tail: Shape<{ [ROWS, TAIL] }> = shape![ROWS, TAIL];
        let tail_j: i32 = BLOCK / TAIL;
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let (x_view, y_view, w_view, b_view) = ln_views(y_ptr, x_ptr, w_ptr, b_ptr, m, n, stride_x, stride_y);
        let x_body: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(body);
        let x_tail: Partition<T, { [ROWS, TAIL] }> = x_view.partition(tail);
        let mut y_body: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(body) };
        let mut y_tail: PartitionMut<T, { [ROWS, TAIL] }> = unsafe { y_view.partition_full_mut(tail) };

        let w_body: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);
        let w_tail: Partition<T, { [TAIL] }> = w_view.partition(shape![TAIL]);
        let b_body: Partition<T, { [BLOCK] }> = b_view.partition(shape![BLOCK]);
        let b_tail: Partition<T, { [TAIL] }> = b_view.partition(shape![TAIL]);
        let wb: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_W>(&w_body, 0i32, 1.0f32);
        let wt: Tile<f32, { [ROWS, TAIL] }> = param_tile::<T, ROWS, TAIL, HAS_W>(&w_tail, tail_j, 1.0f32);
        let bb: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_B>(&b_body, 0i32, 0.0f32);
        let bt: Tile<f32, { [ROWS, TAIL] }> = param_tile::<T, ROWS, TAIL, HAS_B>(&b_tail, tail_j, 0.0f32);
        let keep: Tile<bool, { [ROWS, TAIL] }> = cols_inside::<ROWS, TAIL>(BLOCK, n);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let xb: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_body.load([rb, 0i32]));
            let xt: Tile<f32, { [ROWS, TAIL] }> = convert_tile(x_tail.load([rb, tail_j]));
            let mean: Tile<f32, { [ROWS] }> = body_tail_mean::<ROWS, BLOCK, TAIL>(xb, xt, n);
            let db: Tile<f32, { [ROWS, BLOCK] }> = xb - rows_bc::<ROWS, BLOCK>(mean);
            let dt: Tile<f32, { [ROWS, TAIL] }> = zero_outside::<ROWS, TAIL>(keep, xt - rows_bc::<ROWS, TAIL>(mean));
            let (yb, yt) = body_tail_normalized::<T, ROWS, BLOCK, TAIL>(db, dt, n, eps, wb, wt, bb, bt);
            y_body.store(yb, [rb, 0i32]);
            y_tail.store(yt, [rb, tail_j]);
        }
    }

    /// n > BLOCK: shifted sums over ceil(n / BLOCK) column tiles, then a second pass to store.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_looped<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let rb: i32 = get_tile_block_id().0;
        let (x_part, w_part, b_part, mut y_part) =
            unsafe { row_partitions::<T, ROWS, BLOCK>(y_ptr, x_ptr, w_ptr, b_ptr, m, n, stride_x, stride_y) };

        // The shift: the mean of column tile 0, which n > BLOCK makes a full tile (no mask).
        let x0: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
        let shift: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(reduce_sum(x0, 1i32), BLOCK);
        let c: Tile<f32, { [ROWS, BLOCK] }> = rows_bc::<ROWS, BLOCK>(shift);
        // Pass 1: per-lane sums of d = x - c and d^2 (tile 0's from x0), reduced across the tile
        // once at the end.
        let d0: Tile<f32, { [ROWS, BLOCK] }> = x0 - c;
        let mut acc1: Tile<f32, { [ROWS, BLOCK] }> = d0;
        let mut acc2: Tile<f32, { [ROWS, BLOCK] }> = d0 * d0;
        for j in 1i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let keep: Tile<bool, { [ROWS, BLOCK] }> = cols_inside::<ROWS, BLOCK>(j * BLOCK, n);
            let d: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(keep, x - c);
            acc1 = acc1 + d;
            acc2 = acc2 + d * d;
        }
        let (mean, inv) = shifted_stats::<ROWS, BLOCK>(shift, acc1, acc2, n, eps);

        // Pass 2: normalize, scale and shift, store.
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let w: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_W>(&w_part, j, 1.0f32);
            let b: Tile<f32, { [ROWS, BLOCK] }> = param_tile::<T, ROWS, BLOCK, HAS_B>(&b_part, j, 0.0f32);
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile((x - mean) * inv * w + b);
            y_part.store(y, [rb, j]);
        }
    }

    /// The ROWS x BLOCK tile of x (in f32) whose first element is (row0, col0), loaded through a
    /// pointer tile with `mask`: lanes outside it read 0 and touch no memory. Latency hint 1: the
    /// column loops of `layer_norm_looped_masked` load x straight to registers, not through cp.async
    /// staging (132 KB of shared memory at 1 x 8192, one tile block per SM; NOTES.md, "The looped
    /// entry without cp.async"); the whole-row entries' machine code is the same with either hint.
    unsafe fn x_tile_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x_ptr: *mut T, mask: Tile<bool, { [ROWS, BLOCK] }>, row0: i32, col0: i32, stride_x: i32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x + col0, stride_x);
        let (raw, _tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<1>);
        let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(raw);
        zero_outside::<ROWS, BLOCK>(mask, x)
    }

    /// Columns [col0, col0 + BLOCK) of w or b in f32, repeated for each of the ROWS rows (lanes
    /// past n masked off, never stored); `absent` when compiled without it (HAS = false). LAT is
    /// the load's latency hint: 1 in a column loop (as x's), 3 elsewhere (with 1 the whole-row
    /// entries take more registers).
    unsafe fn param_tile_masked<T: ElementType, const ROWS: i32, const BLOCK: i32, const HAS: bool, const LAT: i32>(
        ptr: *mut T, col0: i32, n: i32, absent: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        if HAS {
            let ptrs: PointerTile<*mut T, { [1, BLOCK] }> = tile_pointers::<T, 1, BLOCK>(ptr, col0, 0i32);
            let mask: Tile<bool, { [1, BLOCK] }> = tile_mask::<1, BLOCK>(0i32, col0, 1i32, n);
            let (raw, _tok): (Tile<T, { [1, BLOCK] }>, Token) =
                load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<LAT>);
            let v: Tile<f32, { [1, BLOCK] }> = convert_tile(raw);
            let out: Tile<f32, { [ROWS, BLOCK] }> = v.broadcast(shape![ROWS, BLOCK]);
            out
        } else {
            let out: Tile<f32, { [ROWS, BLOCK] }> = broadcast_scalar(absent, shape![ROWS, BLOCK]);
            out
        }
    }

    /// Stores y's tile at (row0, col0) through a pointer tile, lanes outside `mask` dropped.
    unsafe fn store_y_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, y: Tile<T, { [ROWS, BLOCK] }>, mask: Tile<bool, { [ROWS, BLOCK] }>, row0: i32, col0: i32,
        stride_y: i32,
    ) {
        let ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y + col0, stride_y);
        let _tok: Token =
            store_ptr_tko(ptrs, y, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<3>);
    }

    /// `layer_norm_row` through masked pointer tiles (ffi.rs: when every offset fits i32).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_masked<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);
        let x: Tile<f32, { [ROWS, BLOCK] }> = x_tile_masked::<T, ROWS, BLOCK>(x_ptr, mask, row0, 0i32, stride_x);
        let (d, inv) = centered_and_inv_std::<ROWS, BLOCK>(x, mask, n, eps);
        let w: Tile<f32, { [ROWS, BLOCK] }> = param_tile_masked::<T, ROWS, BLOCK, HAS_W, 3>(w_ptr, 0i32, n, 1.0f32);
        let b: Tile<f32, { [ROWS, BLOCK] }> = param_tile_masked::<T, ROWS, BLOCK, HAS_B, 3>(b_ptr, 0i32, n, 0.0f32);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(d * inv * w + b);
        store_y_masked::<T, ROWS, BLOCK>(y_ptr, y, mask, row0, 0i32, stride_y);
    }

    /// `layer_norm_row_masked` where the tile divides (m, n) (ffi.rs: a `pointer` variant with n =
    /// BLOCK and m a multiple of ROWS, whose offsets fit i32): the same pointer tiles and two-pass
    /// statistics without masks, both means as products by `inv_n` = 1 / n, exact for n = BLOCK
    /// (rms_norm's `rms_norm_row_exact`).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_exact<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, stride_x: i32, stride_y: i32, inv_n: f32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let inv_n_t: Tile<f32, { [ROWS] }> = broadcast_scalar(inv_n, shape![ROWS]);
        let x: Tile<f32, { [ROWS, BLOCK] }> = load_whole::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x, stride_x);
        let sum: Tile<f32, { [ROWS] }> = reduce_sum(x, 1i32);
        let mean: Tile<f32, { [ROWS] }> = sum * inv_n_t;
        let d: Tile<f32, { [ROWS, BLOCK] }> = x - rows_bc::<ROWS, BLOCK>(mean);
        let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(d * d, 1i32);
        let var: Tile<f32, { [ROWS] }> = sum_sq * inv_n_t;
        let inv: Tile<f32, { [ROWS, BLOCK] }> = inv_std::<ROWS, BLOCK>(var, eps);
        let w: Tile<f32, { [ROWS, BLOCK] }> = param_whole::<T, ROWS, BLOCK, HAS_W>(w_ptr, 1.0f32);
        let b: Tile<f32, { [ROWS, BLOCK] }> = param_whole::<T, ROWS, BLOCK, HAS_B>(b_ptr, 0.0f32);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(d * inv * w + b);
        store_whole::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y, stride_y, y);
    }

    /// The first BLOCK elements of w or b (n = BLOCK) in f32, repeated for each of the ROWS rows,
    /// loaded without a mask; `absent` when compiled without it (HAS = false: nothing is loaded).
    unsafe fn param_whole<T: ElementType, const ROWS: i32, const BLOCK: i32, const HAS: bool>(
        ptr: *mut T, absent: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        if HAS {
            let v: Tile<f32, { [1, BLOCK] }> = load_whole::<T, 1, BLOCK>(ptr, 0i32, 0i32);
            let out: Tile<f32, { [ROWS, BLOCK] }> = v.broadcast(shape![ROWS, BLOCK]);
            out
        } else {
            let out: Tile<f32, { [ROWS, BLOCK] }> = broadcast_scalar(absent, shape![ROWS, BLOCK]);
            out
        }
    }

    /// `layer_norm_row_tail` through masked pointer tiles, one tile block per row tile (ffi.rs: a
    /// `pointer` variant with a tail, where every offset up to the tail's last lane fits i32): body
    /// and tail straight to registers, no TMA staging (rms_norm's `rms_norm_row_tail_masked`).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_tail_masked<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const TAIL: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let mask_b: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);
        let mask_t: Tile<bool, { [ROWS, TAIL] }> = tile_mask::<ROWS, TAIL>(row0, BLOCK, m, n);
        let xb: Tile<f32, { [ROWS, BLOCK] }> = x_tile_masked::<T, ROWS, BLOCK>(x_ptr, mask_b, row0, 0i32, stride_x);
        let xt: Tile<f32, { [ROWS, TAIL] }> = x_tile_masked::<T, ROWS, TAIL>(x_ptr, mask_t, row0, BLOCK, stride_x);
        let (wb, wt, bb, bt) = unsafe { tail_params_masked::<T, ROWS, BLOCK, TAIL, HAS_W, HAS_B>(w_ptr, b_ptr, n) };
        tail_rows_store::<T, ROWS, BLOCK, TAIL>(y_ptr, xb, xt, mask_b, mask_t, wb, wt, bb, bt, row0, n, stride_y, eps);
    }

    /// w (else 1) and b (else 0) at the body columns [0, BLOCK) and the tail columns [BLOCK, BLOCK +
    /// TAIL) through masked pointer tiles (latency hint 3), for the pointer-tile tail entries
    /// (`layer_norm_row_tail_masked`, `layer_norm_row_tail_prefetch`).
    // The generics carry those entries' names: cutile 0.5 infers a helper's tuple of tiles only
    // where they match the caller's.
    #[allow(clippy::type_complexity)]
    unsafe fn tail_params_masked<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const TAIL: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        w_ptr: *mut T, b_ptr: *mut T, n: i32,
    ) -> (
        Tile<f32, { [ROWS, BLOCK] }>,
        Tile<f32, { [ROWS, TAIL] }>,
        Tile<f32, { [ROWS, BLOCK] }>,
        Tile<f32, { [ROWS, TAIL] }>,
    ) {
        let wb: Tile<f32, { [ROWS, BLOCK] }> = param_tile_masked::<T, ROWS, BLOCK, HAS_W, 3>(w_ptr, 0i32, n, 1.0f32);
        let wt: Tile<f32, { [ROWS, TAIL] }> = param_tile_masked::<T, ROWS, TAIL, HAS_W, 3>(w_ptr, BLOCK, n, 1.0f32);
        let bb: Tile<f32, { [ROWS, BLOCK] }> = param_tile_masked::<T, ROWS, BLOCK, HAS_B, 3>(b_ptr, 0i32, n, 0.0f32);
        let bt: Tile<f32, { [ROWS, TAIL] }> = param_tile_masked::<T, ROWS, TAIL, HAS_B, 3>(b_ptr, BLOCK, n, 0.0f32);
        (wb, wt, bb, bt)
    }

    /// The pointer-tile tail entries' row tile at row0, its body and tail in f32 (zero outside the
    /// masks): the two-pass statistics over both, then (x - mean) * rsqrt(var + eps) * w + b stored
    /// through the masks.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tail_rows_store<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, vb: Tile<f32, { [ROWS, BLOCK] }>, vt: Tile<f32, { [ROWS, TAIL] }>,
        mask_b: Tile<bool, { [ROWS, BLOCK] }>, mask_t: Tile<bool, { [ROWS, TAIL] }>, wb: Tile<f32, { [ROWS, BLOCK] }>,
        wt: Tile<f32, { [ROWS, TAIL] }>, bb: Tile<f32, { [ROWS, BLOCK] }>, bt: Tile<f32, { [ROWS, TAIL] }>, row0: i32,
        n: i32, stride_y: i32, eps: f32,
    ) {
        let mean: Tile<f32, { [ROWS] }> = body_tail_mean::<ROWS, BLOCK, TAIL>(vb, vt, n);
        let db: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(mask_b, vb - rows_bc::<ROWS, BLOCK>(mean));
        let dt: Tile<f32, { [ROWS, TAIL] }> = zero_outside::<ROWS, TAIL>(mask_t, vt - rows_bc::<ROWS, TAIL>(mean));
        let (yb, yt) = body_tail_normalized::<T, ROWS, BLOCK, TAIL>(db, dt, n, eps, wb, wt, bb, bt);
        store_y_masked::<T, ROWS, BLOCK>(y_ptr, yb, mask_b, row0, 0i32, stride_y);
        store_y_masked::<T, ROWS, TAIL>(y_ptr, yt, mask_t, row0, BLOCK, stride_y);
    }

    /// `layer_norm_row_tail` on a persistent grid through masked pointer tiles, with the next row
    /// tile's x loaded before this one's reductions (rms_norm's `rms_norm_row_tail_prefetch`): the
    /// loop carries the next row tile's body and tail as loaded (T, lanes outside (m, n) not read).
    /// Past the last row tile the prefetch's mask is empty (no access) and its pointers are those of
    /// the last row tile, so every offset formed stays within the row tiles plan() checked. w and b
    /// are read once per tile block.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_tail_prefetch<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const TAIL: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let first: i32 = pid * ROWS;
        let (xb0, xt0) = body_tail_raw::<T, ROWS, BLOCK, TAIL>(x_ptr, first, first, m, n, stride_x);
        let mut xb: Tile<T, { [ROWS, BLOCK] }> = xb0;
        let mut xt: Tile<T, { [ROWS, TAIL] }> = xt0;
        let (wb, wt, bb, bt) = unsafe { tail_params_masked::<T, ROWS, BLOCK, TAIL, HAS_W, HAS_B>(w_ptr, b_ptr, n) };
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let row0: i32 = rb * ROWS;
            let (nb, nt) = next_body_tail_raw::<T, ROWS, BLOCK, TAIL>(x_ptr, row0, programs, m, n, stride_x);
            let mask_b: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);
            let mask_t: Tile<bool, { [ROWS, TAIL] }> = tile_mask::<ROWS, TAIL>(row0, BLOCK, m, n);
            let fb: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(xb);
            let ft: Tile<f32, { [ROWS, TAIL] }> = convert_tile(xt);
            let vb: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(mask_b, fb);
            let vt: Tile<f32, { [ROWS, TAIL] }> = zero_outside::<ROWS, TAIL>(mask_t, ft);
            tail_rows_store::<T, ROWS, BLOCK, TAIL>(
                y_ptr, vb, vt, mask_b, mask_t, wb, wt, bb, bt, row0, n, stride_y, eps,
            );
            xb = nb;
            xt = nt;
        }
    }

    /// `layer_norm_looped` through masked pointer tiles (ffi.rs: when every offset fits i32).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_looped_masked<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let row0: i32 = get_tile_block_id().0 * ROWS;
        // The shift: the mean of column tile 0 (full: n > BLOCK; rows past m read 0).
        let mask0: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);
        let x0: Tile<f32, { [ROWS, BLOCK] }> = x_tile_masked::<T, ROWS, BLOCK>(x_ptr, mask0, row0, 0i32, stride_x);
        let shift: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(reduce_sum(x0, 1i32), BLOCK);
        let c: Tile<f32, { [ROWS, BLOCK] }> = rows_bc::<ROWS, BLOCK>(shift);
        let d0: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(mask0, x0 - c);
        let mut acc1: Tile<f32, { [ROWS, BLOCK] }> = d0;
        let mut acc2: Tile<f32, { [ROWS, BLOCK] }> = d0 * d0;
        for j in 1i32..col_tiles {
            let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, j * BLOCK, m, n);
            let x: Tile<f32, { [ROWS, BLOCK] }> =
                x_tile_masked::<T, ROWS, BLOCK>(x_ptr, mask, row0, j * BLOCK, stride_x);
            let d: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(mask, x - c);
            acc1 = acc1 + d;
            acc2 = acc2 + d * d;
        }
        let (mean, inv) = shifted_stats::<ROWS, BLOCK>(shift, acc1, acc2, n, eps);
        for j in 0i32..col_tiles {
            let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, j * BLOCK, m, n);
            let x: Tile<f32, { [ROWS, BLOCK] }> =
                x_tile_masked::<T, ROWS, BLOCK>(x_ptr, mask, row0, j * BLOCK, stride_x);
            let w: Tile<f32, { [ROWS, BLOCK] }> =
                param_tile_masked::<T, ROWS, BLOCK, HAS_W, 1>(w_ptr, j * BLOCK, n, 1.0f32);
            let b: Tile<f32, { [ROWS, BLOCK] }> =
                param_tile_masked::<T, ROWS, BLOCK, HAS_B, 1>(b_ptr, j * BLOCK, n, 0.0f32);
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile((x - mean) * inv * w + b);
            store_y_masked::<T, ROWS, BLOCK>(y_ptr, y, mask, row0, j * BLOCK, stride_y);
        }
    }

    /// `layer_norm_row_masked` for rows that do not start or end on a 16-byte boundary (n = 4097;
    /// row strides no multiple of 16 bytes), x and y 16-byte aligned with the same misalignment per
    /// row (ffi.rs, `ffi_util::aligned_rows_vec`): each row's body of whole 16-byte groups through
    /// 16-byte accesses, its head and ragged end through an EDGE-wide tile (device_util's
    /// `aligned_rows`; VEC is 16 bytes in elements, EDGE = 2 * VEC). w and b are read at the same
    /// columns (element by element: their columns are not 16-byte aligned where the row's are).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_aligned<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
        const VEC: i32,
        const EDGE: i32,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let (wb, we, bb, be) =
            unsafe { aligned_params::<T, ROWS, BLOCK, HAS_W, HAS_B, VEC, EDGE>(w_ptr, b_ptr, row0, n, stride_x) };
        unsafe {
            ln_aligned_tile::<T, ROWS, BLOCK, VEC, EDGE>(
                y_ptr, x_ptr, wb, we, bb, be, row0, m, n, stride_x, stride_y, eps,
            )
        };
    }

    /// `layer_norm_row_aligned` on a capped grid: each tile block reads w and b (element by element)
    /// once and walks row tiles pid, pid + grid, ..., all with the heads of its first (rms_norm's
    /// `rms_norm_row_aligned_persistent`; the launcher's grid: rms_norm's ffi.rs `aligned_grid`).
    /// w and b go through the tile block's two ROWS x BLOCK slices of `ws_ptr` into x's layout.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn layer_norm_row_aligned_persistent<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
        const VEC: i32,
        const EDGE: i32,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, b_ptr: *mut T, ws_ptr: *mut T, m: i32, n: i32, stride_x: i32,
        stride_y: i32, eps: f32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let first: i32 = pid * ROWS;
        // w's and b's body columns through this tile block's two slices of the workspace, into x's
        // layout (device_util's `restage`)
        let slice: i32 = pid * 2 * ROWS * BLOCK;
        let wb: Tile<f32, { [ROWS, BLOCK] }> = unsafe {
            param_body_restaged::<T, ROWS, BLOCK, VEC, HAS_W>(w_ptr, ws_ptr, slice, first, n, stride_x, 1.0f32)
        };
        let bb: Tile<f32, { [ROWS, BLOCK] }> = unsafe {
            param_body_restaged::<T, ROWS, BLOCK, VEC, HAS_B>(
                b_ptr,
                ws_ptr,
                slice + ROWS * BLOCK,
                first,
                n,
                stride_x,
                0.0f32,
            )
        };
        let we: Tile<f32, { [ROWS, EDGE] }> =
            unsafe { param_edge::<T, ROWS, EDGE, VEC, HAS_W>(w_ptr, first, n, stride_x, 1.0f32) };
        let be: Tile<f32, { [ROWS, EDGE] }> =
            unsafe { param_edge::<T, ROWS, EDGE, VEC, HAS_B>(b_ptr, first, n, stride_x, 0.0f32) };
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let row0: i32 = rb * ROWS;
            unsafe {
                ln_aligned_tile::<T, ROWS, BLOCK, VEC, EDGE>(
                    y_ptr, x_ptr, wb, we, bb, be, row0, m, n, stride_x, stride_y, eps,
                )
            };
        }
    }

    /// w (else 1) and b (else 0) at the body and edge columns of the ROWS rows at row0.
    // The generics carry the aligned entries' names: cutile 0.5 infers a helper's tuple of tiles
    // only where they match the caller's.
    #[allow(clippy::type_complexity)]
    unsafe fn aligned_params<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const HAS_W: bool,
        const HAS_B: bool,
        const VEC: i32,
        const EDGE: i32,
    >(
        w_ptr: *mut T, b_ptr: *mut T, row0: i32, n: i32, stride_x: i32,
    ) -> (
        Tile<f32, { [ROWS, BLOCK] }>,
        Tile<f32, { [ROWS, EDGE] }>,
        Tile<f32, { [ROWS, BLOCK] }>,
        Tile<f32, { [ROWS, EDGE] }>,
    ) {
        let wb: Tile<f32, { [ROWS, BLOCK] }> =
            unsafe { param_body::<T, ROWS, BLOCK, VEC, HAS_W>(w_ptr, row0, n, stride_x, 1.0f32) };
        let we: Tile<f32, { [ROWS, EDGE] }> =
            unsafe { param_edge::<T, ROWS, EDGE, VEC, HAS_W>(w_ptr, row0, n, stride_x, 1.0f32) };
        let bb: Tile<f32, { [ROWS, BLOCK] }> =
            unsafe { param_body::<T, ROWS, BLOCK, VEC, HAS_B>(b_ptr, row0, n, stride_x, 0.0f32) };
        let be: Tile<f32, { [ROWS, EDGE] }> =
            unsafe { param_edge::<T, ROWS, EDGE, VEC, HAS_B>(b_ptr, row0, n, stride_x, 0.0f32) };
        (wb, we, bb, be)
    }

    /// w or b (HAS) at the body columns of the ROWS rows at row0, else `absent` everywhere.
    unsafe fn param_body<T: ElementType, const ROWS: i32, const BLOCK: i32, const VEC: i32, const HAS: bool>(
        ptr: *mut T, row0: i32, n: i32, stride: i32, absent: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        if HAS {
            let raw: Tile<T, { [ROWS, BLOCK] }> =
                unsafe { aligned_row_vector::<T, ROWS, BLOCK, VEC>(ptr, row0, n, stride) };
            let v: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(raw);
            v
        } else {
            broadcast_scalar(absent, shape![ROWS, BLOCK])
        }
    }

    /// `param_body`, its T values written to and read back from `ws_ptr` at `ws_first` (`restage`)
    /// so that they come back in the layout of x's aligned body.
    #[allow(clippy::too_many_arguments)]
    unsafe fn param_body_restaged<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const VEC: i32,
        const HAS: bool,
    >(
        ptr: *mut T, ws_ptr: *mut T, ws_first: i32, row0: i32, n: i32, stride: i32, absent: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        if HAS {
            let raw: Tile<T, { [ROWS, BLOCK] }> =
                unsafe { aligned_row_vector::<T, ROWS, BLOCK, VEC>(ptr, row0, n, stride) };
            let back: Tile<T, { [ROWS, BLOCK] }> = unsafe { restage::<T, ROWS, BLOCK>(ws_ptr, ws_first, raw) };
            let v: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(back);
            v
        } else {
            broadcast_scalar(absent, shape![ROWS, BLOCK])
        }
    }

    /// `param_body` at the edge tile's columns.
    unsafe fn param_edge<T: ElementType, const ROWS: i32, const EDGE: i32, const VEC: i32, const HAS: bool>(
        ptr: *mut T, row0: i32, n: i32, stride: i32, absent: f32,
    ) -> Tile<f32, { [ROWS, EDGE] }> {
        if HAS {
            let raw: Tile<T, { [ROWS, EDGE] }> =
                unsafe { aligned_row_vector_edge::<T, ROWS, EDGE, VEC>(ptr, row0, n, stride) };
            let v: Tile<f32, { [ROWS, EDGE] }> = convert_tile(raw);
            v
        } else {
            broadcast_scalar(absent, shape![ROWS, EDGE])
        }
    }

    /// The aligned entries' row tile at row0, given w and b at its body and edge columns.
    #[allow(clippy::too_many_arguments)]
    unsafe fn ln_aligned_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const VEC: i32, const EDGE: i32>(
        y_ptr: *mut T, x_ptr: *mut T, wb: Tile<f32, { [ROWS, BLOCK] }>, we: Tile<f32, { [ROWS, EDGE] }>,
        bb: Tile<f32, { [ROWS, BLOCK] }>, be: Tile<f32, { [ROWS, EDGE] }>, row0: i32, m: i32, n: i32, stride_x: i32,
        stride_y: i32, eps: f32,
    ) {
        // latency hint 3, not rms_norm's 1: here the persistent loop was no faster with 1 (its NOTES.md)
        let (xb, xe, heads, body_len, body, edge, edge_cols) =
            unsafe { aligned_load::<T, ROWS, BLOCK, VEC, EDGE, 3>(x_ptr, row0, m, n, stride_x) };
        // Two-pass statistics over both tiles (centered_and_inv_std's, split in two).
        let sum_b: Tile<f32, { [ROWS] }> = reduce_sum(xb, 1i32);
        let sum_e: Tile<f32, { [ROWS] }> = reduce_sum(xe, 1i32);
        let mean: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(sum_b + sum_e, n);
        let db: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<ROWS, BLOCK>(body, xb - rows_bc::<ROWS, BLOCK>(mean));
        let de: Tile<f32, { [ROWS, EDGE] }> = zero_outside::<ROWS, EDGE>(edge, xe - rows_bc::<ROWS, EDGE>(mean));
        let sq_b: Tile<f32, { [ROWS] }> = reduce_sum(db * db, 1i32);
        let sq_e: Tile<f32, { [ROWS] }> = reduce_sum(de * de, 1i32);
        let var: Tile<f32, { [ROWS] }> = per_elem::<ROWS>(sq_b + sq_e, n);
        let yb: Tile<T, { [ROWS, BLOCK] }> = convert_tile(db * inv_std::<ROWS, BLOCK>(var, eps) * wb + bb);
        let ye: Tile<T, { [ROWS, EDGE] }> = convert_tile(de * inv_std::<ROWS, EDGE>(var, eps) * we + be);
        unsafe {
            aligned_store::<T, ROWS, BLOCK, VEC, EDGE>(
                y_ptr, yb, ye, row0, m, stride_y, heads, body_len, body, edge, edge_cols,
            )
        };
    }
}
