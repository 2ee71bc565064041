//! RMSNorm device code: y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w, over the last dim.
//!
//! Element type T is f32, f16 or bf16 (in and out); the sum of squares and the scaling are done
//! in f32. Every entry takes raw device pointers (PyTorch owns x, y and w; the aligned persistent
//! entry's workspace is the launcher's) and views x and y with
//! their row strides: rows may be padded (row stride >= n), the last dim is contiguous.
//!
//! Each tile block handles ROWS consecutive rows in BLOCK-wide column tiles. The partition
//! entries (`rms_norm_row`, `_row_persistent`, `_row_tail`, `_looped`) read them through
//! zero-padded partitions, with stores outside [m, n] dropped, so any m and n work without masks;
//! the masked and aligned entries address them as pointer tiles with a mask. Shapes of the same
//! computation:
//!   * `rms_norm_row`    — n <= BLOCK: the row block is loaded once and stays in registers.
//!   * `rms_norm_row_persistent` — the same with a capped grid: each tile block loads w once and
//!     walks every grid-th row tile.
//!   * `rms_norm_looped` — n >  BLOCK: pass 1 sums squares over the column tiles, pass 2 re-reads
//!     them (mostly from L2) to scale and store.
//!   * `rms_norm_row_tail` — BLOCK < n <= BLOCK + TAIL: the row block held whole as a body tile and
//!     a narrower tail tile (fewer idle lanes than one power-of-two tile at n = 11008, 18944 ...),
//!     one tile block per row tile or a persistent grid; `rms_norm_row_tail_masked` the same
//!     through masked pointer tiles, one tile block per row tile; `rms_norm_row_tail_prefetch`
//!     through pointer tiles on a persistent grid, loading the next row tile ahead.
//!   * `rms_norm_row_masked`, `rms_norm_looped_masked` — the same two for tiles that do not divide
//!     (m, n) (n = 11008, 4097 ...), through pointer tiles and a mask of the lanes inside (m, n):
//!     tileiras predicates each access instead of branching around it (ffi.rs runs them where the
//!     offsets fit i32; silu_and_mul's NOTES.md has the machine code). `rms_norm_row_exact` is
//!     the whole-row one without masks, for a pointer variant whose tile divides (m, n).
//!   * `rms_norm_row_aligned` — rows that do not start or end on a 16-byte boundary (n = 4097):
//!     each row's 16-byte-aligned body through 16-byte accesses, its head and ragged end through a
//!     narrow edge tile (device_util's `aligned_rows`; ffi.rs: `ffi_util::aligned_rows_vec`);
//!     `rms_norm_row_aligned_persistent` the same on a capped grid, w read once per tile block.
//!
//! The host side (ffi.rs) picks the entry from the variant's `programs` (persistent), whether the
//! tile leaves a partial tile whose offsets fit i32 (`masked_fits`: the masked entries), and n
//! against the variant's BLOCK.
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses` (it drops the bounds checks of partition accesses): the launcher (ffi.rs)
//! sizes the grid as ceil(m / ROWS) (or fewer, with the persistent loop stopping at ceil(m / ROWS))
//! and the column loops stop at ceil(n / BLOCK), so every tile index is inside its partition by
//! construction; the per-access checks would only cost instructions. The masked entries' pointer
//! tiles have no such checks: their masks and ffi.rs's `masked_fits` keep every access inside;
//! `rms_norm_row_exact`'s have no masks either, and ffi.rs runs it only where its tiles divide
//! (m, n) (`Plan::exact`).
#[cutile::module]
pub mod rms_norm_device {
    use crate::device_util::tile_order::persistent_row_tiles;
    use crate::device_util::views::{
        aligned_load, aligned_row_vector, aligned_row_vector_edge, aligned_store, body_tail_raw, load_whole,
        next_body_tail_raw, restage, store_whole, strided_view, tile_mask, tile_pointers, tile_raw, vector_view,
    };
    use cutile::core::*;

    /// x and y as (m, n) views with their row strides, and w as n contiguous elements.
    unsafe fn rms_views<T: ElementType>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
    ) -> (Tensor<T, { [-1, -1] }>, Tensor<T, { [-1, -1] }>, Tensor<T, { [-1] }>) {
        let tok: Token = new_token_unordered();
        let x_view: Tensor<T, { [-1, -1] }> = strided_view(x_ptr, m, n, stride_x, tok);
        let y_view: Tensor<T, { [-1, -1] }> = strided_view(y_ptr, m, n, stride_y, tok);
        let w_view: Tensor<T, { [-1] }> = vector_view(w_ptr, n, tok);
        (x_view, y_view, w_view)
    }

    /// rsqrt(mean of squares + eps) per row, broadcast over the row block: the mean with exact
    /// (round-to-nearest) division of `sum_sq` by `n_f`.
    fn inv_rms<const ROWS: i32, const BLOCK: i32>(
        sum_sq: Tile<f32, { [ROWS] }>, n_f: Tile<f32, { [ROWS] }>, eps_t: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let mean_sq: Tile<f32, { [ROWS] }> = divf(sum_sq, n_f, rounding::NearestEven, ftz::Disabled);
        rsqrt(mean_sq + eps_t, ftz::Disabled).reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK])
    }

    /// `inv_rms` with n and eps turned into per-row f32 tiles first.
    fn inv_rms_of<const ROWS: i32, const BLOCK: i32>(
        sum_sq: Tile<f32, { [ROWS] }>, n: i32, eps: f32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let n_scalar: f32 = convert_scalar(n);
        let n_f: Tile<f32, { [ROWS] }> = broadcast_scalar(n_scalar, shape![ROWS]);
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        inv_rms::<ROWS, BLOCK>(sum_sq, n_f, eps_t)
    }

    /// Column tile j of w, in f32, repeated for each of the ROWS rows.
    fn weight_tile<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        w_part: &Partition<T, { [BLOCK] }>, j: i32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let w_row: Tile<T, { [BLOCK] }> = w_part.load([j]);
        convert_tile(w_row.reshape(shape![1, BLOCK]).broadcast(shape![ROWS, BLOCK]))
    }

    /// y = x * inv_rms * w, rounded to T, stored as tile (rb, j) of y.
    fn store_scaled<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_part: &mut PartitionMut<T, { [ROWS, BLOCK] }>, x: Tile<f32, { [ROWS, BLOCK] }>,
        inv_rms: Tile<f32, { [ROWS, BLOCK] }>, w: Tile<f32, { [ROWS, BLOCK] }>, rb: i32, j: i32,
    ) {
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(x * inv_rms * w);
        y_part.store(y, [rb, j]);
    }

    /// n <= BLOCK: one load, one store per element.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let rb: i32 = get_tile_block_id().0;
        let (x_view, y_view, w_view) = rms_views(y_ptr, x_ptr, w_ptr, m, n, stride_x, stride_y);
        let x_part: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(tile);
        let w_part: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
        let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(x * x, 1i32);
        let inv_rms: Tile<f32, { [ROWS, BLOCK] }> = inv_rms_of::<ROWS, BLOCK>(sum_sq, n, eps);
        let w: Tile<f32, { [ROWS, BLOCK] }> = weight_tile::<T, ROWS, BLOCK>(&w_part, 0i32);
        store_scaled::<T, ROWS, BLOCK>(&mut y_part, x, inv_rms, w, rb, 0i32);
    }

    /// n <= BLOCK, persistent: a grid of fewer tile blocks than row tiles; each loads w once and
    /// walks row tiles pid, pid + grid, ... (the host sizes the grid from the SM count).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_persistent<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let (x_view, y_view, w_view) = rms_views(y_ptr, x_ptr, w_ptr, m, n, stride_x, stride_y);
        let x_part: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(tile);
        let w_part: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        let w: Tile<f32, { [ROWS, BLOCK] }> = weight_tile::<T, ROWS, BLOCK>(&w_part, 0i32);
        let n_scalar: f32 = convert_scalar(n);
        let n_f: Tile<f32, { [ROWS] }> = broadcast_scalar(n_scalar, shape![ROWS]);
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
            let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(x * x, 1i32);
            let inv_rms: Tile<f32, { [ROWS, BLOCK] }> = inv_rms::<ROWS, BLOCK>(sum_sq, n_f, eps_t);
            store_scaled::<T, ROWS, BLOCK>(&mut y_part, x, inv_rms, w, rb, 0i32);
        }
    }

    /// BLOCK < n <= BLOCK + TAIL (TAIL a power of two <= BLOCK): the row block held whole in two
    /// tiles, a full BLOCK-wide body and a TAIL-wide tail (column tile BLOCK / TAIL of a TAIL-wide
    /// partition) whose lanes past n read 0 and are not stored. For an n no power of two fits well
    /// (11008 = 8192 + 2816: 12288 lanes instead of 16384), one load and one store per element
    /// still, with fewer idle lanes. A capped grid (`get_num_tile_blocks` < row tiles) walks row
    /// tiles pid, pid + grid, ... loading w once, as `rms_norm_row_persistent`; a grid of one
    /// tile block per row tile runs the loop once.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let body: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let tail: Shape<{ [ROWS, TAIL] }> = shape![ROWS, TAIL];
        let tail_j: i32 = BLOCK / TAIL;
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let (x_view, y_view, w_view) = rms_views(y_ptr, x_ptr, w_ptr, m, n, stride_x, stride_y);
        let x_body: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(body);
        let x_tail: Partition<T, { [ROWS, TAIL] }> = x_view.partition(tail);
        let mut y_body: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(body) };
        let mut y_tail: PartitionMut<T, { [ROWS, TAIL] }> = unsafe { y_view.partition_full_mut(tail) };

        let w_body: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);
        let w_tail: Partition<T, { [TAIL] }> = w_view.partition(shape![TAIL]);
        let w_b: Tile<f32, { [ROWS, BLOCK] }> = weight_tile::<T, ROWS, BLOCK>(&w_body, 0i32);
        let w_t: Tile<f32, { [ROWS, TAIL] }> = weight_tile::<T, ROWS, TAIL>(&w_tail, tail_j);
        let n_scalar: f32 = convert_scalar(n);
        let n_f: Tile<f32, { [ROWS] }> = broadcast_scalar(n_scalar, shape![ROWS]);
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let xb: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_body.load([rb, 0i32]));
            let xt: Tile<f32, { [ROWS, TAIL] }> = convert_tile(x_tail.load([rb, tail_j]));
            let sq_b: Tile<f32, { [ROWS] }> = reduce_sum(xb * xb, 1i32);
            let sq_t: Tile<f32, { [ROWS] }> = reduce_sum(xt * xt, 1i32);
            let sum_sq: Tile<f32, { [ROWS] }> = sq_b + sq_t;
            let inv_b: Tile<f32, { [ROWS, BLOCK] }> = inv_rms::<ROWS, BLOCK>(sum_sq, n_f, eps_t);
            let inv_t: Tile<f32, { [ROWS, TAIL] }> = inv_rms::<ROWS, TAIL>(sum_sq, n_f, eps_t);
            store_scaled::<T, ROWS, BLOCK>(&mut y_body, xb, inv_b, w_b, rb, 0i32);
            store_scaled::<T, ROWS, TAIL>(&mut y_tail, xt, inv_t, w_t, rb, tail_j);
        }
    }

    /// n > BLOCK: two passes over ceil(n / BLOCK) column tiles.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_looped<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let rb: i32 = get_tile_block_id().0;
        let (x_view, y_view, w_view) = rms_views(y_ptr, x_ptr, w_ptr, m, n, stride_x, stride_y);
        let x_part: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(tile);
        let w_part: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);
        let mut y_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { y_view.partition_full_mut(tile) };

        // Pass 1: elementwise f32 partial sums, reduced across the tile once at the end.
        let mut acc: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            acc = acc + x * x;
        }
        let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(acc, 1i32);
        let inv_rms: Tile<f32, { [ROWS, BLOCK] }> = inv_rms_of::<ROWS, BLOCK>(sum_sq, n, eps);

        // Pass 2: scale by inv_rms and w, store.
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, j]));
            let w: Tile<f32, { [ROWS, BLOCK] }> = weight_tile::<T, ROWS, BLOCK>(&w_part, j);
            store_scaled::<T, ROWS, BLOCK>(&mut y_part, x, inv_rms, w, rb, j);
        }
    }

    /// The ROWS x BLOCK tile of x (in f32) whose first element is (row0, col0), loaded through a
    /// pointer tile with a mask: lanes outside (m, n) read 0 and touch no memory.
    unsafe fn x_tile_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x_ptr: *mut T, row0: i32, col0: i32, m: i32, n: i32, stride_x: i32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let raw: Tile<T, { [ROWS, BLOCK] }> = tile_raw::<T, ROWS, BLOCK, 3>(x_ptr, row0, row0, col0, m, n, stride_x);
        zero_outside::<T, ROWS, BLOCK>(raw, row0, col0, m, n)
    }

    /// Columns [col0, col0 + BLOCK) of w, in f32, repeated for each of the ROWS rows; lanes past n
    /// are masked off (never stored).
    unsafe fn w_tile_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        w_ptr: *mut T, col0: i32, n: i32,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let ptrs: PointerTile<*mut T, { [1, BLOCK] }> = tile_pointers::<T, 1, BLOCK>(w_ptr, col0, 0i32);
        let mask: Tile<bool, { [1, BLOCK] }> = tile_mask::<1, BLOCK>(0i32, col0, 1i32, n);
        let (raw, _tok): (Tile<T, { [1, BLOCK] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<3>);
        let w: Tile<f32, { [1, BLOCK] }> = convert_tile(raw);
        w.broadcast(shape![ROWS, BLOCK])
    }

    /// Stores y's tile at (row0, col0) through a pointer tile, lanes outside (m, n) masked off.
    unsafe fn store_y_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, y: Tile<T, { [ROWS, BLOCK] }>, row0: i32, col0: i32, m: i32, n: i32, stride_y: i32,
    ) {
        let ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> =
            tile_pointers::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y + col0, stride_y);
        let mask: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, col0, m, n);
        let _tok: Token =
            store_ptr_tko(ptrs, y, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<3>);
    }

    /// `rms_norm_row` through masked pointer tiles (ffi.rs: when every offset fits i32).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let x: Tile<f32, { [ROWS, BLOCK] }> = x_tile_masked::<T, ROWS, BLOCK>(x_ptr, row0, 0i32, m, n, stride_x);
        let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(x * x, 1i32);
        let inv_rms: Tile<f32, { [ROWS, BLOCK] }> = inv_rms_of::<ROWS, BLOCK>(sum_sq, n, eps);
        let w: Tile<f32, { [ROWS, BLOCK] }> = w_tile_masked::<T, ROWS, BLOCK>(w_ptr, 0i32, n);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(x * inv_rms * w);
        store_y_masked::<T, ROWS, BLOCK>(y_ptr, y, row0, 0i32, m, n, stride_y);
    }

    /// `rms_norm_row_masked` where the tile divides (m, n) (ffi.rs: a `pointer` variant with n =
    /// BLOCK and m a multiple of ROWS, whose offsets fit i32): the same pointer tiles without
    /// masks, and the mean of squares as a product by `inv_n` = 1 / n, which the launcher passes
    /// exact (n = BLOCK, a power of two), so it rounds as the division by n does, without the
    /// division's instruction sequence: fewer instructions in a tile block whose time is mostly
    /// latency, a decode batch's (NOTES.md, "Decode rows without masks").
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_exact<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, stride_x: i32, stride_y: i32, inv_n: f32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let x: Tile<f32, { [ROWS, BLOCK] }> = load_whole::<T, ROWS, BLOCK>(x_ptr, row0 * stride_x, stride_x);
        let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(x * x, 1i32);
        let mean_sq: Tile<f32, { [ROWS] }> = sum_sq * broadcast_scalar(inv_n, shape![ROWS]);
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        let inv_rms: Tile<f32, { [ROWS, BLOCK] }> =
            rsqrt(mean_sq + eps_t, ftz::Disabled).reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK]);
        let w_row: Tile<f32, { [1, BLOCK] }> = load_whole::<T, 1, BLOCK>(w_ptr, 0i32, 0i32);
        let w: Tile<f32, { [ROWS, BLOCK] }> = w_row.broadcast(shape![ROWS, BLOCK]);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(x * inv_rms * w);
        store_whole::<T, ROWS, BLOCK>(y_ptr, row0 * stride_y, stride_y, y);
    }

    /// `rms_norm_looped` through masked pointer tiles (ffi.rs: when every offset fits i32).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_looped_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let mut acc: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> =
                x_tile_masked::<T, ROWS, BLOCK>(x_ptr, row0, j * BLOCK, m, n, stride_x);
            acc = acc + x * x;
        }
        let sum_sq: Tile<f32, { [ROWS] }> = reduce_sum(acc, 1i32);
        let inv_rms: Tile<f32, { [ROWS, BLOCK] }> = inv_rms_of::<ROWS, BLOCK>(sum_sq, n, eps);
        for j in 0i32..col_tiles {
            let x: Tile<f32, { [ROWS, BLOCK] }> =
                x_tile_masked::<T, ROWS, BLOCK>(x_ptr, row0, j * BLOCK, m, n, stride_x);
            let w: Tile<f32, { [ROWS, BLOCK] }> = w_tile_masked::<T, ROWS, BLOCK>(w_ptr, j * BLOCK, n);
            let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(x * inv_rms * w);
            store_y_masked::<T, ROWS, BLOCK>(y_ptr, y, row0, j * BLOCK, m, n, stride_y);
        }
    }

    /// `rms_norm_row_tail` through masked pointer tiles, one tile block per row tile (ffi.rs: a
    /// `pointer` variant with a tail, where every offset up to the tail's last lane fits i32): the
    /// body and the tail loaded straight to registers (no TMA staging through shared memory), the
    /// body's mask dropping only rows past m, the tail's also its lanes past n. 18944 = 16384 +
    /// 2560 in 20480 lanes, one read of x per element (NOTES.md, "A body and a tail through
    /// pointer tiles").
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_tail_masked<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let xb: Tile<f32, { [ROWS, BLOCK] }> = x_tile_masked::<T, ROWS, BLOCK>(x_ptr, row0, 0i32, m, n, stride_x);
        let xt: Tile<f32, { [ROWS, TAIL] }> = x_tile_masked::<T, ROWS, TAIL>(x_ptr, row0, BLOCK, m, n, stride_x);
        let wb: Tile<f32, { [ROWS, BLOCK] }> = w_tile_masked::<T, ROWS, BLOCK>(w_ptr, 0i32, n);
        let wt: Tile<f32, { [ROWS, TAIL] }> = w_tile_masked::<T, ROWS, TAIL>(w_ptr, BLOCK, n);
        tail_rows_store::<T, ROWS, BLOCK, TAIL>(y_ptr, xb, xt, wb, wt, row0, m, n, stride_y, eps);
    }

    /// `rms_norm_row_tail` on a persistent grid through masked pointer tiles, with the next row
    /// tile's x loaded before this one's reduction (softmax's `softmax_row_tail_prefetch`): the loop
    /// carries the next row tile's body and tail as loaded (T, lanes outside (m, n) not read), so a
    /// thread keeps two row tiles' loads in flight where the persistent TMA loop keeps one. Past the
    /// last row tile the prefetch's mask is empty (no access) and its pointers are those of the last
    /// row tile, so every offset formed stays within the row tiles plan() checked. w is read once
    /// per tile block, as in the other persistent entries.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_tail_prefetch<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let first: i32 = pid * ROWS;
        let (xb0, xt0) = body_tail_raw::<T, ROWS, BLOCK, TAIL>(x_ptr, first, first, m, n, stride_x);
        let mut xb: Tile<T, { [ROWS, BLOCK] }> = xb0;
        let mut xt: Tile<T, { [ROWS, TAIL] }> = xt0;
        let wb: Tile<f32, { [ROWS, BLOCK] }> = w_tile_masked::<T, ROWS, BLOCK>(w_ptr, 0i32, n);
        let wt: Tile<f32, { [ROWS, TAIL] }> = w_tile_masked::<T, ROWS, TAIL>(w_ptr, BLOCK, n);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let row0: i32 = rb * ROWS;
            let (nb, nt) = next_body_tail_raw::<T, ROWS, BLOCK, TAIL>(x_ptr, row0, programs, m, n, stride_x);
            let vb: Tile<f32, { [ROWS, BLOCK] }> = zero_outside::<T, ROWS, BLOCK>(xb, row0, 0i32, m, n);
            let vt: Tile<f32, { [ROWS, TAIL] }> = zero_outside::<T, ROWS, TAIL>(xt, row0, BLOCK, m, n);
            tail_rows_store::<T, ROWS, BLOCK, TAIL>(y_ptr, vb, vt, wb, wt, row0, m, n, stride_y, eps);
            xb = nb;
            xt = nt;
        }
    }

    /// The pointer-tile tail entries' row tile at row0, its body and tail in f32 (lanes outside (m, n)
    /// 0): the sum of squares over both, then y = x * inv_rms * w stored through the masks.
    #[allow(clippy::too_many_arguments)]
    unsafe fn tail_rows_store<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, vb: Tile<f32, { [ROWS, BLOCK] }>, vt: Tile<f32, { [ROWS, TAIL] }>,
        wb: Tile<f32, { [ROWS, BLOCK] }>, wt: Tile<f32, { [ROWS, TAIL] }>, row0: i32, m: i32, n: i32, stride_y: i32,
        eps: f32,
    ) {
        let sq_b: Tile<f32, { [ROWS] }> = reduce_sum(vb * vb, 1i32);
        let sq_t: Tile<f32, { [ROWS] }> = reduce_sum(vt * vt, 1i32);
        let sum_sq: Tile<f32, { [ROWS] }> = sq_b + sq_t;
        let yb: Tile<T, { [ROWS, BLOCK] }> = convert_tile(vb * inv_rms_of::<ROWS, BLOCK>(sum_sq, n, eps) * wb);
        let yt: Tile<T, { [ROWS, TAIL] }> = convert_tile(vt * inv_rms_of::<ROWS, TAIL>(sum_sq, n, eps) * wt);
        store_y_masked::<T, ROWS, BLOCK>(y_ptr, yb, row0, 0i32, m, n, stride_y);
        store_y_masked::<T, ROWS, TAIL>(y_ptr, yt, row0, BLOCK, m, n, stride_y);
    }

    /// x's tile at (row0, col0) as loaded (`tile_raw`), in f32, with the lanes outside (m, n) 0.
    fn zero_outside<T: ElementType, const ROWS: i32, const W: i32>(
        raw: Tile<T, { [ROWS, W] }>, row0: i32, col0: i32, m: i32, n: i32,
    ) -> Tile<f32, { [ROWS, W] }> {
        let mask: Tile<bool, { [ROWS, W] }> = tile_mask::<ROWS, W>(row0, col0, m, n);
        let x: Tile<f32, { [ROWS, W] }> = convert_tile(raw);
        let zero: Tile<f32, { [ROWS, W] }> = constant(0.0f32, shape![ROWS, W]);
        select(mask, x, zero)
    }

    /// `rms_norm_row_masked` for rows that do not start or end on a 16-byte boundary (n = 4097;
    /// row strides no multiple of 16 bytes), x and y 16-byte aligned with the same misalignment per
    /// row (ffi.rs, `ffi_util::aligned_rows_vec`): each row's body of whole 16-byte groups through
    /// 16-byte accesses, its head and ragged end through an EDGE-wide tile (device_util's
    /// `aligned_rows`; VEC is 16 bytes in elements, EDGE = 2 * VEC). w is read at the same columns
    /// (element by element: its columns are not 16-byte aligned where the row's are).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_aligned<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const VEC: i32,
        const EDGE: i32,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let (wb, we) = unsafe { aligned_weight::<T, ROWS, BLOCK, VEC, EDGE>(w_ptr, row0, n, stride_x) };
        unsafe {
            rms_aligned_tile::<T, ROWS, BLOCK, VEC, EDGE>(y_ptr, x_ptr, wb, we, row0, m, n, stride_x, stride_y, eps)
        };
    }

    /// `rms_norm_row_aligned` on a capped grid: each tile block reads w (element by element) once
    /// and walks row tiles pid, pid + grid, ... The launcher makes grid * ROWS * stride_x a multiple
    /// of VEC (or the grid cover every row tile, so that each walks one), so every row tile a tile
    /// block walks has the heads of its first, and w's columns with them (ffi.rs,
    /// `aligned_grid`). The gathered w goes through the tile block's ROWS x BLOCK slice of `ws_ptr`
    /// (`restage`) into x's 16-byte layout, so no row tile converts layouts (NOTES.md).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rms_norm_row_aligned_persistent<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const VEC: i32,
        const EDGE: i32,
    >(
        y_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, ws_ptr: *mut T, m: i32, n: i32, stride_x: i32, stride_y: i32,
        eps: f32,
    ) {
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let (w_gathered, we) = unsafe { aligned_weight::<T, ROWS, BLOCK, VEC, EDGE>(w_ptr, pid * ROWS, n, stride_x) };
        // w's body columns through this tile block's slice of the workspace, into x's layout
        let wb: Tile<T, { [ROWS, BLOCK] }> =
            unsafe { restage::<T, ROWS, BLOCK>(ws_ptr, pid * ROWS * BLOCK, w_gathered) };
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let row0: i32 = rb * ROWS;
            unsafe {
                rms_aligned_tile::<T, ROWS, BLOCK, VEC, EDGE>(y_ptr, x_ptr, wb, we, row0, m, n, stride_x, stride_y, eps)
            };
        }
    }

    /// w at the body and edge columns of the ROWS rows at row0 (`aligned_row_vector`).
    // The generics carry the aligned entries' names: cutile 0.5 infers a helper's tuple of tiles
    // only where they match the caller's.
    unsafe fn aligned_weight<T: ElementType, const ROWS: i32, const BLOCK: i32, const VEC: i32, const EDGE: i32>(
        w_ptr: *mut T, row0: i32, n: i32, stride_x: i32,
    ) -> (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, EDGE] }>) {
        let wb: Tile<T, { [ROWS, BLOCK] }> =
            unsafe { aligned_row_vector::<T, ROWS, BLOCK, VEC>(w_ptr, row0, n, stride_x) };
        let we: Tile<T, { [ROWS, EDGE] }> =
            unsafe { aligned_row_vector_edge::<T, ROWS, EDGE, VEC>(w_ptr, row0, n, stride_x) };
        (wb, we)
    }

    /// The aligned entries' row tile at row0, given w at its body (`wb`) and edge (`we`) columns.
    #[allow(clippy::too_many_arguments)]
    unsafe fn rms_aligned_tile<T: ElementType, const ROWS: i32, const BLOCK: i32, const VEC: i32, const EDGE: i32>(
        y_ptr: *mut T, x_ptr: *mut T, wb: Tile<T, { [ROWS, BLOCK] }>, we: Tile<T, { [ROWS, EDGE] }>, row0: i32, m: i32,
        n: i32, stride_x: i32, stride_y: i32, eps: f32,
    ) {
        let (xb, xe, heads, body_len, body, edge, edge_cols) =
            unsafe { aligned_load::<T, ROWS, BLOCK, VEC, EDGE, 1>(x_ptr, row0, m, n, stride_x) };
        let sum_b: Tile<f32, { [ROWS] }> = reduce_sum(xb * xb, 1i32);
        let sum_e: Tile<f32, { [ROWS] }> = reduce_sum(xe * xe, 1i32);
        let sum_sq: Tile<f32, { [ROWS] }> = sum_b + sum_e;
        let wb_f: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(wb);
        let we_f: Tile<f32, { [ROWS, EDGE] }> = convert_tile(we);
        let yb: Tile<T, { [ROWS, BLOCK] }> = convert_tile(xb * inv_rms_of::<ROWS, BLOCK>(sum_sq, n, eps) * wb_f);
        let ye: Tile<T, { [ROWS, EDGE] }> = convert_tile(xe * inv_rms_of::<ROWS, EDGE>(sum_sq, n, eps) * we_f);
        unsafe {
            aligned_store::<T, ROWS, BLOCK, VEC, EDGE>(
                y_ptr, yb, ye, row0, m, stride_y, heads, body_len, body, edge, edge_cols,
            )
        };
    }
}
