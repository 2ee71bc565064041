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
//! `softmax_backward_rows`, one ROWS x BLOCK row tile per tile block, in two forms (the const
//! generic LOOPED):
//!   * n <= BLOCK (LOOPED false): the row tile held whole: dy and y read once, dx stored once.
//!   * n > BLOCK (LOOPED true): the sum over ceil(n / BLOCK) column tiles of y * dy (f32, lane-wise,
//!     reduced once at the end), then a second pass that reads the tiles again and stores dx (from
//!     L2 only where the row tiles in flight fit in it).
//!
//! And `softmax_backward_split` for wide rows: a row tile's column tiles cut into chunks, one tile
//! block per (row tile, chunk) in one launch; each sums its chunk's y * dy, publishes the partial,
//! counts itself in on its row tile's counter and waits for the others (device_util's exchange, as
//! softmax's single-pass split), adds the row's partials, then reads its chunk again (from L2: it
//! read it microseconds before; with HELD, chunks of one tile, it keeps the tile in registers) and
//! stores dx. y and dy leave DRAM once, where the looped form's second pass over a whole row (a
//! vocabulary row's y and dy are 0.5 MB in bf16, a GPU's worth of them past L2) reads most of them
//! from DRAM again. `softmax_backward_lagged` is the split without the wait behind a tile block's
//! own row: tile blocks take tickets, each sums one chunk and stores the dx of the chunk `lag`
//! tickets before it (its doc).
//!
//! Partitions pad with zero and drop stores outside the view, so any m and n work without masks: y
//! and dy are 0 past n, adding nothing to the sum. `unchecked_accesses`: the launcher launches
//! ceil(m / ROWS) tile blocks (times `chunks` for the split) and the column loops stop at
//! ceil(n / BLOCK) (a chunk's at the smaller of its end and that); the split's partials are an
//! (m padded to whole row tiles, chunks) f32 array, PARTS >= chunks columns loaded masked.
#[cutile::module]
pub mod softmax_backward_device {
    use crate::device_util::views::{
        arrive, arrive_and_wait, load_partials, publish_partial, strided_view, take_ticket, wait_arrived,
    };
    use cutile::core::*;

    /// dx of one row tile from its y, dy tiles and the per-row sum of y * dy.
    fn grad<const ROWS: i32, const BLOCK: i32>(
        y: Tile<f32, { [ROWS, BLOCK] }>, dy: Tile<f32, { [ROWS, BLOCK] }>, dot: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        let dot_t: Tile<f32, { [ROWS, BLOCK] }> = dot.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK]);
        y * (dy - dot_t)
    }

    /// The per-row sums of y * dy over column tiles j0..j_end of row tile rb (lane-wise f32, reduced
    /// once at the end).
    fn tiles_dot<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_part: &Partition<T, { [ROWS, BLOCK] }>, dy_part: &Partition<T, { [ROWS, BLOCK] }>, rb: i32, j0: i32,
        j_end: i32,
    ) -> Tile<f32, { [ROWS] }> {
        let mut acc: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, shape![ROWS, BLOCK]);
        for j in j0..j_end {
            let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, j]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, j]));
            acc = acc + y * dy;
        }
        reduce_sum(acc, 1i32)
    }

    /// dx of column tiles j0..j_end of row tile rb, y and dy read again, from the rows' sums `dot`.
    #[allow(clippy::too_many_arguments)]
    fn store_tiles_grad<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        dx_part: &mut PartitionMut<T, { [ROWS, BLOCK] }>, y_part: &Partition<T, { [ROWS, BLOCK] }>,
        dy_part: &Partition<T, { [ROWS, BLOCK] }>, rb: i32, j0: i32, j_end: i32, dot: Tile<f32, { [ROWS] }>,
    ) {
        for j in j0..j_end {
            let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, j]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, j]));
            let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(grad::<ROWS, BLOCK>(y, dy, dot));
            dx_part.store(dx, [rb, j]);
        }
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
            let dot: Tile<f32, { [ROWS] }> = tiles_dot::<T, ROWS, BLOCK>(&y_part, &dy_part, rb, 0i32, col_tiles);
            store_tiles_grad::<T, ROWS, BLOCK>(&mut dx_part, &y_part, &dy_part, rb, 0i32, col_tiles, dot);
        } else {
            let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, 0i32]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, 0i32]));
            let dot: Tile<f32, { [ROWS] }> = reduce_sum(y * dy, 1i32);
            let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(grad::<ROWS, BLOCK>(y, dy, dot));
            dx_part.store(dx, [rb, 0i32]);
        }
    }
    /// Wide rows in one launch, a row tile's column tiles in `chunks` chunks of `chunk_tiles`
    /// BLOCK-wide tiles (grid: 1-D, ceil(m / ROWS) row tiles x `chunks`, a row tile's chunks
    /// consecutive). Pass 1 sums the chunk's y * dy per row; the partial goes to column c of `parts`
    /// ((m padded to whole row tiles) x chunks f32), the tile block counts itself in on counter rb of
    /// `arrived` and waits for the row tile's other chunks (device_util's `arrive_and_wait`; the
    /// counters are zero at launch, ffi.rs clears them on the stream); it adds the row's partials
    /// (PARTS >= chunks columns, masked) and pass 2 re-reads the chunk and stores dx. The progress
    /// argument is softmax's single-pass split's (docs/design-notes.md, "Tile blocks that talk to each
    /// other"): ffi.rs launches it only with at most as many chunks as the GPU has SMs.
    /// HELD (chunks of one tile, `chunk_tiles` 1): the tile's y and dy stay in registers across the
    /// exchange, so nothing is read twice.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_backward_split<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const PARTS: i32,
        const HELD: bool,
    >(
        dx_ptr: *mut T, dy_ptr: *mut T, y_ptr: *mut T, parts: *mut f32, arrived: *mut i32, m: i32, n: i32,
        stride_dx: i32, stride_dy: i32, stride_y: i32, chunk_tiles: i32, chunks: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let pid: i32 = get_tile_block_id().0;
        let rb: i32 = pid / chunks;
        let c: i32 = pid - rb * chunks;
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, n, stride_dy, tok);
        let y_view: Tensor<T, { [-1, -1] }> = strided_view(y_ptr, m, n, stride_y, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let y_part: Partition<T, { [ROWS, BLOCK] }> = y_view.partition(tile);
        let dx_view: Tensor<T, { [-1, -1] }> = strided_view(dx_ptr, m, n, stride_dx, tok);
        let mut dx_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dx_view.partition_full_mut(tile) };
        let j0: i32 = c * chunk_tiles;
        let j_end: i32 = min(j0 + chunk_tiles, (n + BLOCK - 1) / BLOCK);

        let row0: i32 = rb * ROWS;
        if HELD {
            let y: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(y_part.load([rb, j0]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, j0]));
            let dot: Tile<f32, { [ROWS] }> =
                unsafe { row_dot::<ROWS, PARTS>(parts, arrived, rb, row0, c, chunks, reduce_sum(y * dy, 1i32)) };
            let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(grad::<ROWS, BLOCK>(y, dy, dot));
            dx_part.store(dx, [rb, j0]);
        } else {
            let partial: Tile<f32, { [ROWS] }> = tiles_dot::<T, ROWS, BLOCK>(&y_part, &dy_part, rb, j0, j_end);
            let dot: Tile<f32, { [ROWS] }> =
                unsafe { row_dot::<ROWS, PARTS>(parts, arrived, rb, row0, c, chunks, partial) };
            store_tiles_grad::<T, ROWS, BLOCK>(&mut dx_part, &y_part, &dy_part, rb, j0, j_end, dot);
        }
    }

    /// The split without the wait behind a chunk's own read: tile blocks take tickets in the order
    /// they start (device_util's `take_ticket`), and the one holding ticket t sums chunk t's y * dy
    /// (chunks numbered row tile by row tile, `chunks` a row tile), publishes the partial and counts
    /// itself in on its row tile's counter, then stores dx of chunk t - `lag`, an earlier row tile's
    /// (lag >= chunks), whose chunks are expected to have arrived by then (one poll, where the
    /// split waits for the slowest chunk of its own row tile; to be measured), and its re-read,
    /// `lag` chunks after the first read, is expected from L2 where lag chunks fit there. Grid: row
    /// tiles x chunks + lag tile blocks (ffi.rs caps lag at the row tiles' chunks: the first lag
    /// only sum, the last lag only store). Progress holds for any dispatch order and any number of
    /// resident tile blocks: the chunks a ticket waits for hold lower tickets (lag >= chunks), so
    /// their tile blocks have started, and each sums and arrives before it waits (its wait follows
    /// its arrival's token). `arrived`: the row tiles' counters, cleared at launch; `ticket`
    /// the ticket counter, cleared at launch.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn softmax_backward_lagged<T: ElementType, const ROWS: i32, const BLOCK: i32, const PARTS: i32>(
        dx_ptr: *mut T, dy_ptr: *mut T, y_ptr: *mut T, parts: *mut f32, arrived: *mut i32, ticket: *mut i32, m: i32,
        n: i32, stride_dx: i32, stride_dy: i32, stride_y: i32, chunk_tiles: i32, chunks: i32, lag: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, n, stride_dy, tok);
        let y_view: Tensor<T, { [-1, -1] }> = strided_view(y_ptr, m, n, stride_y, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let y_part: Partition<T, { [ROWS, BLOCK] }> = y_view.partition(tile);
        let dx_view: Tensor<T, { [-1, -1] }> = strided_view(dx_ptr, m, n, stride_dx, tok);
        let mut dx_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dx_view.partition_full_mut(tile) };
        let col_tiles: i32 = (n + BLOCK - 1) / BLOCK;
        let total: i32 = ((m + ROWS - 1) / ROWS) * chunks;
        let (t, t_ticket): (i32, Token) = unsafe { take_ticket(ticket) };

        // Chunk t's partial (tickets below total: a loop of one turn or none); the wait below is
        // ordered after the arrival (t_done).
        let mut t_done: Token = t_ticket;
        let sums: i32 = if t < total { 1i32 } else { 0i32 };
        for _s in 0i32..sums {
            let rb: i32 = t / chunks;
            let c: i32 = t - rb * chunks;
            let j0: i32 = c * chunk_tiles;
            let partial: Tile<f32, { [ROWS] }> =
                tiles_dot::<T, ROWS, BLOCK>(&y_part, &dy_part, rb, j0, min(j0 + chunk_tiles, col_tiles));
            let t_pub: Token = unsafe { publish_partial::<ROWS>(parts, rb * ROWS, c, chunks, partial) };
            let (_before, t_arrive): (i32, Token) = unsafe { arrive(arrived, rb, t_pub) };
            t_done = t_arrive;
        }

        // Chunk t - lag's dx (tickets from lag on).
        let stores: i32 = if t >= lag { 1i32 } else { 0i32 };
        for _g in 0i32..stores {
            let g: i32 = t - lag;
            let rb: i32 = g / chunks;
            let c: i32 = g - rb * chunks;
            let j0: i32 = c * chunk_tiles;
            let t_all: Token = unsafe { wait_arrived(arrived, rb, chunks, t_done) };
            let dot: Tile<f32, { [ROWS] }> = unsafe { partials_sum::<ROWS, PARTS>(parts, rb * ROWS, chunks, t_all) };
            let j_end: i32 = min(j0 + chunk_tiles, col_tiles);
            store_tiles_grad::<T, ROWS, BLOCK>(&mut dx_part, &y_part, &dy_part, rb, j0, j_end, dot);
        }
    }

    /// The row tile's sums of y * dy: this chunk's `partial` published at column c of `parts`, the
    /// arrival on counter rb of `arrived`, the wait for the row tile's other chunks, their partials
    /// added (PARTS >= chunks columns, masked).
    unsafe fn row_dot<const ROWS: i32, const PARTS: i32>(
        parts: *mut f32, arrived: *mut i32, rb: i32, row0: i32, c: i32, chunks: i32, partial: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS] }> {
        let t_pub: Token = publish_partial::<ROWS>(parts, row0, c, chunks, partial);
        let t_all: Token = arrive_and_wait(arrived, rb, chunks, t_pub);
        partials_sum::<ROWS, PARTS>(parts, row0, chunks, t_all)
    }

    /// The sums of the row tile at row0's published partials (PARTS >= chunks columns of `parts`,
    /// masked), loaded after `after` (the wait's last poll).
    unsafe fn partials_sum<const ROWS: i32, const PARTS: i32>(
        parts: *mut f32, row0: i32, chunks: i32, after: Token,
    ) -> Tile<f32, { [ROWS] }> {
        let (raw, mask, _t): (Tile<f32, { [ROWS, PARTS] }>, Tile<bool, { [ROWS, PARTS] }>, Token) =
            load_partials::<ROWS, PARTS>(parts, row0, chunks, after);
        let zero: Tile<f32, { [ROWS, PARTS] }> = constant(0.0f32, shape![ROWS, PARTS]);
        reduce_sum(select(mask, raw, zero), 1i32)
    }
}
