//! Device helpers shared by the kernels' device code (kernels/*/kernel.rs): cuTile modules with
//! no entries. A kernel module imports what it needs (`use crate::device_util::views::...`); the
//! JIT finds this module through that `use` (cutile's module registry) and inlines each call, so a
//! helper costs nothing at run time: the entry lowers to the ops the helper's body lowers to.
#[cutile::module]
pub mod views {
    use cutile::core::*;

    /// `rows` x `cols` elements at `ptr`, rows `stride` elements apart, the last dim contiguous:
    /// how every kernel views the row-major (possibly row-padded or column-sliced) tensors PyTorch
    /// passes as raw pointers.
    pub unsafe fn strided_view<T: ElementType>(
        ptr: *mut T, rows: i32, cols: i32, stride: i32, tok: Token,
    ) -> Tensor<T, { [-1, -1] }> {
        let shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[rows, cols] };
        let strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride] };
        make_tensor_view(pointer_to_tile(ptr), shape, strides, tok)
    }

    /// `part.store(tile, [i, j])` for an output whose rows may be padded or column-sliced: through
    /// TMA with TMA, else lane by lane (`allow_tma = false`, a masked store per element). The
    /// launcher passes `ffi_util::tma_store_exact(dtype, n)`: an H100's TMA store into rows ending
    /// inside a 16-byte unit wrote the rest of that unit too, columns past n that are the caller's
    /// (kernels/matmul/NOTES.md, "Third GPU run").
    pub fn store_tile_2d<T: ElementType, const R: i32, const C: i32, const TMA: bool>(
        part: &mut PartitionMut<T, { [R, C] }>, tile: Tile<T, { [R, C] }>, i: i32, j: i32,
    ) {
        if TMA {
            part.store(tile, [i, j]);
        } else {
            unsafe { store_view_tko_mut(part, tile, [i, j], ordering::Weak, scope::TileBlock, None, tma::Disabled) };
        }
    }

    /// [`store_tile_2d`] for a [B, R, C] tile of a batch of such outputs (bmm's C).
    pub fn store_tile_3d<T: ElementType, const B: i32, const R: i32, const C: i32, const TMA: bool>(
        part: &mut PartitionMut<T, { [B, R, C] }>, tile: Tile<T, { [B, R, C] }>, b: i32, i: i32, j: i32,
    ) {
        if TMA {
            part.store(tile, [b, i, j]);
        } else {
            unsafe { store_view_tko_mut(part, tile, [b, i, j], ordering::Weak, scope::TileBlock, None, tma::Disabled) };
        }
    }

    /// The ROWS x BLOCK tiles of the (m, n) view of `x_ptr` (rows `stride_x` elements apart),
    /// padded with -inf, so lanes past (m, n) neither raise a row's max nor add to its sum of exp:
    /// how softmax and cross_entropy load their rows. In cutile 0.5 the view is made here, not by
    /// `strided_view` (make_partition_view cannot infer its result type for a view an inlined helper
    /// returned); the result's lifetime is 'static, not a parameter (one would count as a generic),
    /// and callers annotate its type (the JIT does not derive an inlined helper's Partition type).
    pub unsafe fn neg_inf_tiles<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x_ptr: *mut T, m: i32, n: i32, stride_x: i32, tok: Token,
    ) -> Partition<'static, T, { [ROWS, BLOCK] }> {
        let x_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[m, n] };
        let x_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride_x] };
        let x_view: Tensor<T, { [-1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(x_ptr), x_shape, x_strides, tok) };
        let x_tok: Token = x_view.token();
        unsafe { make_partition_view(&x_view, shape![ROWS, BLOCK], padding::NegInf, dim_map::Identity, x_tok) }
    }

    /// One tile folded into a row's running max and sum of exp(x - max) (online softmax, softmax's and
    /// cross_entropy's row loops): the new
    /// max is the larger of the running one and the tile's, the running sum is rescaled to it by
    /// exp(old max - new max) and the tile's terms are added. One exp per element; returns the new
    /// (max, sum). `log2e` and `log2e_r` are log2(e) as a tile and per row.
    pub fn online_fold<const ROWS: i32, const BLOCK: i32>(
        run_max: Tile<f32, { [ROWS] }>, run_sum: Tile<f32, { [ROWS] }>, x: Tile<f32, { [ROWS, BLOCK] }>,
        log2e: Tile<f32, { [ROWS, BLOCK] }>, log2e_r: Tile<f32, { [ROWS] }>,
    ) -> (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>) {
        let new_max: Tile<f32, { [ROWS] }> = maxf(run_max, reduce_max(x, 1i32), nan::Disabled, ftz::Disabled);
        let mx: Tile<f32, { [ROWS, BLOCK] }> = new_max.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK]);
        let term: Tile<f32, { [ROWS] }> = reduce_sum(exp2((x - mx) * log2e, ftz::Enabled), 1i32);
        let new_sum: Tile<f32, { [ROWS] }> = run_sum * exp2((run_max - new_max) * log2e_r, ftz::Enabled) + term;
        (new_max, new_sum)
    }

    /// The i32 at `at`, as a 0-d tile: a position id's or a target's word (rope, cross_entropy).
    pub unsafe fn load_word(at: PointerTile<*mut i32, { [] }>) -> Tile<i32, { [] }> {
        let (v, _tok): (Tile<i32, { [] }>, Token) =
            load_ptr_tko(at, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<1>);
        v
    }

    /// `len` contiguous elements at `ptr`: a norm's weight or bias.
    pub unsafe fn vector_view<T: ElementType>(ptr: *mut T, len: i32, tok: Token) -> Tensor<T, { [-1] }> {
        let shape: Shape<{ [-1] }> = Shape::<{ [-1] }> { dims: &[len] };
        let strides: Array<{ [1] }> = Array::<{ [1] }> { dims: &[] };
        make_tensor_view(pointer_to_tile(ptr), shape, strides, tok)
    }

    /// The ROWS x BLOCK pointers of the tile whose first element is `first` elements past `ptr`,
    /// in rows `stride` elements apart: a tile to load or store without masks (`load_ptr_tko`,
    /// `store_ptr_tko`), which the launcher allows only where the tile lies inside the tensor.
    pub fn tile_pointers<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        ptr: *mut T, first: i32, stride: i32,
    ) -> PointerTile<*mut T, { [ROWS, BLOCK] }> {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        // Offsets of the tile's elements from its first one: r * stride + c.
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let cols: Tile<i32, { [ROWS, BLOCK] }> = col_ids.reshape(shape![1, BLOCK]).broadcast(tile);
        let rows: Tile<i32, { [ROWS, BLOCK] }> = row_ids.reshape(shape![ROWS, 1]).broadcast(tile);
        let strides: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(stride, tile);
        let offsets: Tile<i32, { [ROWS, BLOCK] }> = rows * strides + cols;
        let p0: PointerTile<*mut T, { [] }> = pointer_to_tile(ptr).offset(first);
        let p1: PointerTile<*mut T, { [1, 1] }> = p0.reshape(shape![1, 1]);
        let base: PointerTile<*mut T, { [ROWS, BLOCK] }> = p1.broadcast(tile);
        base.offset_tile(offsets)
    }

    /// The ROWS x W tile `first` elements past `ptr` (rows `stride` elements apart), loaded
    /// without a mask and converted to f32: the launcher checked that the tile lies inside the
    /// tensor (the norms' exact entries, where the tile divides (m, n)).
    pub unsafe fn load_whole<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, first: i32, stride: i32,
    ) -> Tile<f32, { [ROWS, W] }> {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = tile_pointers::<T, ROWS, W>(ptr, first, stride);
        let (raw, _tok): (Tile<T, { [ROWS, W] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>);
        convert_tile(raw)
    }

    /// Stores `v` as the ROWS x W tile `first` elements past `ptr` (rows `stride` elements apart),
    /// without a mask ([`load_whole`]'s store).
    pub unsafe fn store_whole<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, first: i32, stride: i32, v: Tile<T, { [ROWS, W] }>,
    ) {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = tile_pointers::<T, ROWS, W>(ptr, first, stride);
        let _tok: Token = store_ptr_tko(ptrs, v, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>);
    }

    /// The lanes of the ROWS x BLOCK tile whose first element is (row0, col0) that lie inside an
    /// (m, n) tensor: the mask of a masked pointer-tile load or store (`load_ptr_tko`,
    /// `store_ptr_tko`) at a ragged edge.
    pub fn tile_mask<const ROWS: i32, const BLOCK: i32>(
        row0: i32, col0: i32, m: i32, n: i32,
    ) -> Tile<bool, { [ROWS, BLOCK] }> {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let cols: Tile<i32, { [ROWS, BLOCK] }> = col_ids.reshape(shape![1, BLOCK]).broadcast(tile);
        let rows: Tile<i32, { [ROWS, BLOCK] }> = row_ids.reshape(shape![ROWS, 1]).broadcast(tile);
        let col_end: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(n - col0, tile);
        let row_end: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(m - row0, tile);
        let in_cols: Tile<bool, { [ROWS, BLOCK] }> = lt_tile(cols, col_end);
        let in_rows: Tile<bool, { [ROWS, BLOCK] }> = lt_tile(rows, row_end);
        andi(in_cols, in_rows)
    }

    /// The ROWS x W tile of an (m, n) tensor at (row0, col0) (rows `stride` elements apart) as
    /// loaded, in T: lanes outside (m, n) not read, their values undefined (select after the
    /// conversion). Addressed from row `at_row0` instead of row0: equal, or, for a persistent
    /// loop's prefetch past the last row tile, a row tile inside the tensor while row0 lies past it
    /// (an empty mask), so that no offset formed leaves i32. LAT is the load's latency hint (1
    /// inside a persistent loop: straight to registers, no cp.async staging; `load_masked`).
    pub unsafe fn tile_raw<T: ElementType, const ROWS: i32, const W: i32, const LAT: i32>(
        ptr: *mut T, at_row0: i32, row0: i32, col0: i32, m: i32, n: i32, stride: i32,
    ) -> Tile<T, { [ROWS, W] }> {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> =
            tile_pointers::<T, ROWS, W>(ptr, at_row0 * stride + col0, stride);
        let mask: Tile<bool, { [ROWS, W] }> = tile_mask::<ROWS, W>(row0, col0, m, n);
        let (raw, _tok): (Tile<T, { [ROWS, W] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<LAT>);
        raw
    }

    /// The ROWS x W tile of an (m, n) tensor at (row0, col0) (rows `stride` elements apart) in f32,
    /// through a pointer tile, lanes outside (m, n) not read and set to -inf; returns the mask too,
    /// for [`store_masked_tile`]. The ragged edge of a softmax-like row pass (softmax's entries,
    /// cross_entropy's version 3). LAT is the load's latency hint: 3 outside loops; 1 in a
    /// persistent row loop (straight to registers, no cp.async staging; rms_norm's NOTES.md, "x
    /// straight to registers in the persistent loop").
    pub unsafe fn tile_neg_inf<T: ElementType, const ROWS: i32, const W: i32, const LAT: i32>(
        ptr: *mut T, row0: i32, col0: i32, m: i32, n: i32, stride: i32,
    ) -> (Tile<f32, { [ROWS, W] }>, Tile<bool, { [ROWS, W] }>) {
        let raw: Tile<T, { [ROWS, W] }> = unsafe { tile_raw::<T, ROWS, W, LAT>(ptr, row0, row0, col0, m, n, stride) };
        let mask: Tile<bool, { [ROWS, W] }> = tile_mask::<ROWS, W>(row0, col0, m, n);
        let x: Tile<f32, { [ROWS, W] }> = convert_tile(raw);
        (neg_inf_outside::<ROWS, W>(x, mask), mask)
    }

    /// x with the lanes outside `mask` set to -inf.
    pub fn neg_inf_outside<const ROWS: i32, const W: i32>(
        x: Tile<f32, { [ROWS, W] }>, mask: Tile<bool, { [ROWS, W] }>,
    ) -> Tile<f32, { [ROWS, W] }> {
        let neg_inf: Tile<f32, { [ROWS, W] }> = constant(f32::NEG_INFINITY, shape![ROWS, W]);
        select(mask, x, neg_inf)
    }

    /// Stores `v` as the ROWS x W tile at (row0, col0) of a tensor whose rows are `stride` elements
    /// apart, through a pointer tile, lanes outside `mask` dropped ([`tile_neg_inf`]'s mask).
    pub unsafe fn store_masked_tile<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, v: Tile<T, { [ROWS, W] }>, mask: Tile<bool, { [ROWS, W] }>, row0: i32, col0: i32, stride: i32,
    ) {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = tile_pointers::<T, ROWS, W>(ptr, row0 * stride + col0, stride);
        let _tok: Token =
            store_ptr_tko(ptrs, v, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<3>);
    }

    /// The row tile at row0 of an (m, n) tensor held as a BLOCK-wide body (column 0) and a
    /// TAIL-wide tail (column BLOCK), each as loaded with latency hint 1 (`tile_raw`, addressed from
    /// `at_row0`): the loads of the prefetching persistent loops (softmax's and the norms'
    /// `*_row_tail_prefetch`).
    pub unsafe fn body_tail_raw<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        ptr: *mut T, at_row0: i32, row0: i32, m: i32, n: i32, stride: i32,
    ) -> (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, TAIL] }>) {
        let body: Tile<T, { [ROWS, BLOCK] }> = tile_raw::<T, ROWS, BLOCK, 1>(ptr, at_row0, row0, 0i32, m, n, stride);
        let tail: Tile<T, { [ROWS, TAIL] }> = tile_raw::<T, ROWS, TAIL, 1>(ptr, at_row0, row0, BLOCK, m, n, stride);
        (body, tail)
    }

    /// A persistent loop's next row tile after row0 (`programs` row tiles on), loaded ahead
    /// ([`body_tail_raw`]): its first row, and the row to address it from, itself or, past the last
    /// row tile, the last one's first row (its mask is then empty: nothing is read, and no offset
    /// formed leaves the row tiles the launcher checked).
    pub unsafe fn next_body_tail_raw<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        ptr: *mut T, row0: i32, programs: i32, m: i32, n: i32, stride: i32,
    ) -> (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, TAIL] }>) {
        let row_tiles: i32 = (m + ROWS - 1) / ROWS;
        let next0: i32 = row0 + programs * ROWS;
        let at0: i32 = min(next0, (row_tiles - 1i32) * ROWS);
        body_tail_raw::<T, ROWS, BLOCK, TAIL>(ptr, at0, next0, m, n, stride)
    }

    // Rows that do not start on a 16-byte boundary (n = 4097, or a row stride that is no multiple of
    // 16 bytes): a masked pointer tile over such rows gives tileiras no 16-byte alignment to prove,
    // so it issues one 2- or 4-byte access per element. These helpers split each row instead into a
    // head (the elements before its first 16-byte-aligned one), a body of whole VEC-element groups
    // (VEC elements = 16 bytes) and the ragged end; the body's row starts are asserted divisible by
    // VEC (`assume_div_by`), so its accesses are 16-byte ones, and the head and the end (at most
    // 2 * (VEC - 1) elements) go through a narrow EDGE-wide tile (EDGE = 2 * VEC). The assertions
    // hold by construction for the tensor whose stride gave the heads, and for a second one when its
    // stride is equal mod VEC; whether the accesses are then 16-byte ones depends on the bases being
    // 16-byte aligned (the launcher's pointer hints), which is why the launcher also checks that.

    /// Per row of the ROWS-row tile at row0 (rows `stride` elements apart): its head, the number of
    /// elements before its first 16-byte-aligned one, and its body's length, the whole VEC-element
    /// groups of the n - head elements after the head (0 when n <= head).
    pub unsafe fn aligned_rows<const ROWS: i32, const VEC: i32>(
        row0: i32, n: i32, stride: i32,
    ) -> (Tile<i32, { [ROWS, 1] }>, Tile<i32, { [ROWS, 1] }>) {
        let col: Shape<{ [ROWS, 1] }> = shape![ROWS, 1];
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let rows: Tile<i32, { [ROWS, 1] }> = row_ids.reshape(col) + broadcast_scalar(row0, col);
        let vec: Tile<i32, { [ROWS, 1] }> = broadcast_scalar(VEC, col);
        let starts: Tile<i32, { [ROWS, 1] }> = rows * broadcast_scalar(stride, col);
        let heads: Tile<i32, { [ROWS, 1] }> = remi(vec - remi(starts, vec), vec);
        let after: Tile<i32, { [ROWS, 1] }> = broadcast_scalar(n, col) - heads;
        // A multiple of VEC (remi truncates: a negative `after`, n < head, leaves 0), asserted so that
        // the body's mask is uniform over each VEC-lane group: one predicate per 16-byte access.
        let body_len: Tile<i32, { [ROWS, 1] }> = assume_div_by::<_, VEC>(after - remi(after, vec));
        (heads, body_len)
    }

    /// The body's element offsets (row r of the tile at row0 * stride + r * stride + head_r + c,
    /// asserted 16-byte aligned at every VEC-th column) and its mask (rows < m, c < body_len).
    pub unsafe fn aligned_body<const ROWS: i32, const BLOCK: i32, const VEC: i32>(
        row0: i32, m: i32, stride: i32, heads: Tile<i32, { [ROWS, 1] }>, body_len: Tile<i32, { [ROWS, 1] }>,
    ) -> (Tile<i32, { [ROWS, BLOCK] }>, Tile<bool, { [ROWS, BLOCK] }>) {
        let col: Shape<{ [ROWS, 1] }> = shape![ROWS, 1];
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let rows: Tile<i32, { [ROWS, 1] }> = row_ids.reshape(col) + broadcast_scalar(row0, col);
        let first: Tile<i32, { [ROWS, 1] }> = rows * broadcast_scalar(stride, col) + heads;
        let aligned: Tile<i32, { [ROWS, 1] }> = assume_div_by::<_, VEC>(first);
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let cols: Tile<i32, { [ROWS, BLOCK] }> = col_ids.reshape(shape![1, BLOCK]).broadcast(tile);
        let in_body: Tile<bool, { [ROWS, BLOCK] }> = lt_tile(cols, body_len.broadcast(tile));
        let in_rows: Tile<bool, { [ROWS, BLOCK] }> = lt_tile(rows.broadcast(tile), broadcast_scalar(m, tile));
        (aligned.broadcast(tile) + cols, andi(in_body, in_rows))
    }

    /// The body's columns (head_r + c): where a row vector such as a norm's weight is read.
    pub fn aligned_body_cols<const ROWS: i32, const BLOCK: i32>(
        heads: Tile<i32, { [ROWS, 1] }>,
    ) -> Tile<i32, { [ROWS, BLOCK] }> {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_ids: Tile<i32, { [BLOCK] }> = iota(shape![BLOCK]);
        let cols: Tile<i32, { [ROWS, BLOCK] }> = col_ids.reshape(shape![1, BLOCK]).broadcast(tile);
        heads.broadcast(tile) + cols
    }

    /// A row vector (a norm's weight) at the body columns of the ROWS rows at row0 (rows `stride`
    /// elements apart), in T: lanes past a row's body are not read and hold no defined value (the
    /// aligned entries store nothing there). Rows past m read it too (their results are not
    /// stored), so a persistent tile block can read it once for every row tile with the same heads.
    pub unsafe fn aligned_row_vector<T: ElementType, const ROWS: i32, const BLOCK: i32, const VEC: i32>(
        ptr: *mut T, row0: i32, n: i32, stride: i32,
    ) -> Tile<T, { [ROWS, BLOCK] }> {
        let (heads, body_len) = unsafe { aligned_rows::<ROWS, VEC>(row0, n, stride) };
        // every row counted inside (m = row0 + ROWS): only the body's columns mask the vector
        let (_, body) = unsafe { aligned_body::<ROWS, BLOCK, VEC>(row0, row0 + ROWS, stride, heads, body_len) };
        let cols: Tile<i32, { [ROWS, BLOCK] }> = aligned_body_cols::<ROWS, BLOCK>(heads);
        unsafe { load_masked_raw::<T, ROWS, BLOCK, 3>(ptr, cols, body) }
    }

    /// `aligned_row_vector` at the edge tile's columns.
    pub unsafe fn aligned_row_vector_edge<T: ElementType, const ROWS: i32, const EDGE: i32, const VEC: i32>(
        ptr: *mut T, row0: i32, n: i32, stride: i32,
    ) -> Tile<T, { [ROWS, EDGE] }> {
        let (heads, body_len) = unsafe { aligned_rows::<ROWS, VEC>(row0, n, stride) };
        let (cols, edge) = aligned_edge::<ROWS, EDGE, VEC>(row0, row0 + ROWS, n, heads, body_len);
        unsafe { load_masked_raw::<T, ROWS, EDGE, 3>(ptr, cols, edge) }
    }

    /// The edge tile's columns and mask: lane j < VEC is column j (inside the head when j < head_r),
    /// lane j >= VEC column head_r + body_len_r + j - VEC (inside the row when < n); rows < m.
    pub fn aligned_edge<const ROWS: i32, const EDGE: i32, const VEC: i32>(
        row0: i32, m: i32, n: i32, heads: Tile<i32, { [ROWS, 1] }>, body_len: Tile<i32, { [ROWS, 1] }>,
    ) -> (Tile<i32, { [ROWS, EDGE] }>, Tile<bool, { [ROWS, EDGE] }>) {
        let tile: Shape<{ [ROWS, EDGE] }> = shape![ROWS, EDGE];
        let lane_ids: Tile<i32, { [EDGE] }> = iota(shape![EDGE]);
        let j: Tile<i32, { [ROWS, EDGE] }> = lane_ids.reshape(shape![1, EDGE]).broadcast(tile);
        let vec: Tile<i32, { [ROWS, EDGE] }> = broadcast_scalar(VEC, tile);
        let in_head_lanes: Tile<bool, { [ROWS, EDGE] }> = lt_tile(j, vec);
        let end_cols: Tile<i32, { [ROWS, EDGE] }> = (heads + body_len).broadcast(tile) + j - vec;
        let cols: Tile<i32, { [ROWS, EDGE] }> = select(in_head_lanes, j, end_cols);
        let in_head: Tile<bool, { [ROWS, EDGE] }> = lt_tile(j, heads.broadcast(tile));
        let any: Tile<bool, { [ROWS, EDGE] }> = constant(true, tile);
        let wanted: Tile<bool, { [ROWS, EDGE] }> = select(in_head_lanes, in_head, any);
        let in_row: Tile<bool, { [ROWS, EDGE] }> = lt_tile(cols, broadcast_scalar(n, tile));
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let rows: Tile<i32, { [ROWS, EDGE] }> = row_ids.reshape(shape![ROWS, 1]).broadcast(tile);
        let in_rows: Tile<bool, { [ROWS, EDGE] }> = lt_tile(rows, broadcast_scalar(m - row0, tile));
        (cols, andi(andi(wanted, in_row), in_rows))
    }

    /// Element offsets row0 * stride + r * stride + cols[r, c] of a ROWS x W tile.
    pub fn row_offsets<const ROWS: i32, const W: i32>(
        row0: i32, stride: i32, cols: Tile<i32, { [ROWS, W] }>,
    ) -> Tile<i32, { [ROWS, W] }> {
        let tile: Shape<{ [ROWS, W] }> = shape![ROWS, W];
        let row_ids: Tile<i32, { [ROWS] }> = iota(shape![ROWS]);
        let rows: Tile<i32, { [ROWS, W] }> = row_ids.reshape(shape![ROWS, 1]).broadcast(tile);
        (rows + broadcast_scalar(row0, tile)) * broadcast_scalar(stride, tile) + cols
    }

    /// The pointers `offsets` elements past `ptr`.
    pub fn offset_pointers<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, offsets: Tile<i32, { [ROWS, W] }>,
    ) -> PointerTile<*mut T, { [ROWS, W] }> {
        let p0: PointerTile<*mut T, { [] }> = pointer_to_tile(ptr);
        let p1: PointerTile<*mut T, { [1, 1] }> = p0.reshape(shape![1, 1]);
        let base: PointerTile<*mut T, { [ROWS, W] }> = p1.broadcast(shape![ROWS, W]);
        base.offset_tile(offsets)
    }

    /// `v` written to ROWS x BLOCK contiguous elements `first` past `ptr` (a scratch slice of this
    /// tile block's own, its start 16-byte aligned) and read back after the write (token-ordered):
    /// the read's offsets are whole aligned rows, so it comes back in the layout of an aligned
    /// tile's 16-byte loads (the aligned entries' x body) whatever layout `v` was loaded in (a
    /// weight gathered element by element at a row's head). Done once per tile block, it spares
    /// every row tile a layout conversion through shared memory (rms_norm's NOTES.md, "A weight
    /// in the layout of x").
    pub unsafe fn restage<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        ptr: *mut T, first: i32, v: Tile<T, { [ROWS, BLOCK] }>,
    ) -> Tile<T, { [ROWS, BLOCK] }> {
        let to: PointerTile<*mut T, { [ROWS, BLOCK] }> = tile_pointers::<T, ROWS, BLOCK>(ptr, first, BLOCK);
        let written: Token = store_ptr_tko(to, v, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<3>);
        let from: PointerTile<*mut T, { [ROWS, BLOCK] }> = tile_pointers::<T, ROWS, BLOCK>(ptr, first, BLOCK);
        let (back, _tok): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            load_ptr_tko(from, ordering::Weak, None::<scope::TileBlock>, None, None, Some(written), Latency::<3>);
        back
    }

    /// The elements at `offsets` past `ptr`, lanes outside `mask` not read (their values undefined).
    /// LAT is the load's latency hint (the `Latency::<LAT>` of `load_ptr_tko`).
    pub unsafe fn load_masked_raw<T: ElementType, const ROWS: i32, const W: i32, const LAT: i32>(
        ptr: *mut T, offsets: Tile<i32, { [ROWS, W] }>, mask: Tile<bool, { [ROWS, W] }>,
    ) -> Tile<T, { [ROWS, W] }> {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = offset_pointers::<T, ROWS, W>(ptr, offsets);
        let (raw, _tok): (Tile<T, { [ROWS, W] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, None, Latency::<LAT>);
        raw
    }

    /// The elements at `offsets` past `ptr` in f32, lanes outside `mask` not read and taken from
    /// `fill` instead. LAT is the load's latency hint: 3 (the kit's usual) or 1, with which tileiras
    /// loads straight to registers inside a persistent loop (the next row tile's issued ahead)
    /// instead of staging through shared memory with cp.async (`LDGSTS`); outside a loop the
    /// machine code is the same (rms_norm's NOTES.md, "x straight to registers in the persistent
    /// loop").
    pub unsafe fn load_masked<T: ElementType, const ROWS: i32, const W: i32, const LAT: i32>(
        ptr: *mut T, offsets: Tile<i32, { [ROWS, W] }>, mask: Tile<bool, { [ROWS, W] }>, fill: Tile<f32, { [ROWS, W] }>,
    ) -> Tile<f32, { [ROWS, W] }> {
        let raw: Tile<T, { [ROWS, W] }> = unsafe { load_masked_raw::<T, ROWS, W, LAT>(ptr, offsets, mask) };
        let x: Tile<f32, { [ROWS, W] }> = convert_tile(raw);
        select(mask, x, fill)
    }

    /// x's row tile at row0 for the norms' aligned entries (layer_norm's `ln_aligned_tile`,
    /// rms_norm's `rms_aligned_tile`), in f32 and zero outside the row: its 16-byte-aligned body
    /// (`aligned_body`, loaded with latency hint LAT_B) and its edge tile (`aligned_edge`, hint 3),
    /// returned with what `aligned_store` needs to store y at the same columns: `aligned_rows`'
    /// heads and body lengths, the body's and the edge's masks, and the edge's columns.
    // The generics carry the callers' names: cutile 0.5 infers a helper's tuple of tiles only where
    // they match the caller's.
    #[allow(clippy::type_complexity)]
    pub unsafe fn aligned_load<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const VEC: i32,
        const EDGE: i32,
        const LAT_B: i32,
    >(
        x_ptr: *mut T, row0: i32, m: i32, n: i32, stride_x: i32,
    ) -> (
        Tile<f32, { [ROWS, BLOCK] }>,
        Tile<f32, { [ROWS, EDGE] }>,
        Tile<i32, { [ROWS, 1] }>,
        Tile<i32, { [ROWS, 1] }>,
        Tile<bool, { [ROWS, BLOCK] }>,
        Tile<bool, { [ROWS, EDGE] }>,
        Tile<i32, { [ROWS, EDGE] }>,
    ) {
        let (heads, body_len) = unsafe { aligned_rows::<ROWS, VEC>(row0, n, stride_x) };
        let (xb_at, body) = unsafe { aligned_body::<ROWS, BLOCK, VEC>(row0, m, stride_x, heads, body_len) };
        let (edge_cols, edge) = aligned_edge::<ROWS, EDGE, VEC>(row0, m, n, heads, body_len);
        let xe_at: Tile<i32, { [ROWS, EDGE] }> = row_offsets::<ROWS, EDGE>(row0, stride_x, edge_cols);
        let zero_b: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, shape![ROWS, BLOCK]);
        let zero_e: Tile<f32, { [ROWS, EDGE] }> = constant(0.0f32, shape![ROWS, EDGE]);
        let xb: Tile<f32, { [ROWS, BLOCK] }> =
            unsafe { load_masked::<T, ROWS, BLOCK, LAT_B>(x_ptr, xb_at, body, zero_b) };
        let xe: Tile<f32, { [ROWS, EDGE] }> = unsafe { load_masked::<T, ROWS, EDGE, 3>(x_ptr, xe_at, edge, zero_e) };
        (xb, xe, heads, body_len, body, edge, edge_cols)
    }

    /// Stores y's row tile at row0 for the norms' aligned entries: its body and edge tiles at the
    /// columns and under the masks that `aligned_load` returned for x, in rows `stride_y` apart.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn aligned_store<T: ElementType, const ROWS: i32, const BLOCK: i32, const VEC: i32, const EDGE: i32>(
        y_ptr: *mut T, yb: Tile<T, { [ROWS, BLOCK] }>, ye: Tile<T, { [ROWS, EDGE] }>, row0: i32, m: i32, stride_y: i32,
        heads: Tile<i32, { [ROWS, 1] }>, body_len: Tile<i32, { [ROWS, 1] }>, body: Tile<bool, { [ROWS, BLOCK] }>,
        edge: Tile<bool, { [ROWS, EDGE] }>, edge_cols: Tile<i32, { [ROWS, EDGE] }>,
    ) {
        let (yb_at, _) = unsafe { aligned_body::<ROWS, BLOCK, VEC>(row0, m, stride_y, heads, body_len) };
        let ye_at: Tile<i32, { [ROWS, EDGE] }> = row_offsets::<ROWS, EDGE>(row0, stride_y, edge_cols);
        unsafe { store_masked::<T, ROWS, BLOCK>(y_ptr, yb_at, yb, body) };
        unsafe { store_masked::<T, ROWS, EDGE>(y_ptr, ye_at, ye, edge) };
    }

    /// Stores `v` at `offsets` past `ptr`, lanes outside `mask` dropped.
    pub unsafe fn store_masked<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, offsets: Tile<i32, { [ROWS, W] }>, v: Tile<T, { [ROWS, W] }>, mask: Tile<bool, { [ROWS, W] }>,
    ) {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = offset_pointers::<T, ROWS, W>(ptr, offsets);
        let _tok: Token =
            store_ptr_tko(ptrs, v, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Latency::<3>);
    }

    // Tile blocks of one launch that exchange per-row partials (softmax's single-pass splits:
    // several tile blocks per row tile, each holding its chunk of the rows in registers; rms_norm
    // tried the same, its NOTES.md): each publishes its partials, counts itself in on its row
    // tile's counter and waits for the others. Why this makes progress and why the poll is an
    // atomic: docs/design-notes.md, "Tile blocks that talk to each other".

    /// Stores one f32 per row of the row tile at row0 (`value`) at column c of an (m, chunks) f32
    /// array `parts` (element (row0 + r) * chunks + c); returns the store's token.
    pub unsafe fn publish_partial<const ROWS: i32>(
        parts: *mut f32, row0: i32, c: i32, chunks: i32, value: Tile<f32, { [ROWS] }>,
    ) -> Token {
        let ptrs: PointerTile<*mut f32, { [ROWS, 1] }> =
            tile_pointers::<f32, ROWS, 1>(parts, row0 * chunks + c, chunks);
        let col: Tile<f32, { [ROWS, 1] }> = value.reshape(shape![ROWS, 1]);
        store_ptr_tko(ptrs, col, ordering::Weak, None::<scope::TileBlock>, None, None, Latency::<0>)
    }

    /// `publish_partial` ordered after `after` (a first array's store).
    pub unsafe fn publish_partial_after<const ROWS: i32>(
        parts: *mut f32, row0: i32, c: i32, chunks: i32, value: Tile<f32, { [ROWS] }>, after: Token,
    ) -> Token {
        let ptrs: PointerTile<*mut f32, { [ROWS, 1] }> =
            tile_pointers::<f32, ROWS, 1>(parts, row0 * chunks + c, chunks);
        let col: Tile<f32, { [ROWS, 1] }> = value.reshape(shape![ROWS, 1]);
        store_ptr_tko(ptrs, col, ordering::Weak, None::<scope::TileBlock>, None, Some(after), Latency::<0>)
    }

    /// Counts this tile block in on counter `rb` of `arrived` (an atomic add with release
    /// semantics, after `after`: the partials it published). Returns the count before this
    /// arrival (>= 0: the counters start at zero and only grow) and the atomic's token.
    pub unsafe fn arrive(arrived: *mut i32, rb: i32, after: Token) -> (i32, Token) {
        let counter: PointerTile<*mut i32, { [] }> = pointer_to_tile(arrived).offset(rb);
        let one: Tile<i32, { [] }> = scalar_to_tile(1i32);
        let (before, t_arrive): (Tile<i32, { [] }>, Token) =
            atomic_rmw_tko(counter, one, atomic::Add, ordering::Release, scope::Device, None, Some(after));
        (tile_to_scalar(before), t_arrive)
    }

    /// Polls counter `rb` of `arrived` (after `after`) until `chunks` tile blocks have arrived;
    /// returns the last poll's token (acquire: the others' partials are visible after it). The
    /// poll is an atomic add of 0, not an acquire load: tileiras issues a scalar atomic from one
    /// thread and broadcasts its result, where every thread would issue a load of its own and could
    /// read a different count in the same round, leave the loop (and its barrier) alone and
    /// desynchronize the tile block's barriers (seen on the H200 as half a chunk of NaN). Bounded:
    /// after 2^24 polls (seconds) a device assertion fails instead of a hang.
    // cuda_tile_assert! expands to unreachable!() in the host build.
    #[allow(unreachable_code)]
    pub unsafe fn wait_arrived(arrived: *mut i32, rb: i32, chunks: i32, after: Token) -> Token {
        let counter: PointerTile<*mut i32, { [] }> = pointer_to_tile(arrived).offset(rb);
        let mut seen: i32 = 0i32;
        let mut polls: i32 = 0i32;
        let mut tok: Token = after;
        let zero: Tile<i32, { [] }> = scalar_to_tile(0i32);
        while seen < chunks && polls < 16777216i32 {
            let (count, t_seen): (Tile<i32, { [] }>, Token) =
                atomic_rmw_tko(counter, zero, atomic::Add, ordering::Acquire, scope::Device, None, Some(tok));
            seen = tile_to_scalar(count);
            tok = t_seen;
            polls = polls + 1i32;
        }
        cuda_tile_assert!(seen >= chunks, "split exchange: a row tile's chunks did not all arrive");
        tok
    }

    /// This tile block's ticket: an atomic add of one on `counter` (zero at launch), its result
    /// shared by every thread as the arrival's is. Tickets go out in the order tile blocks get here,
    /// so every ticket below this one is held by a tile block that has started: a wait on work
    /// done before any wait by lower tickets cannot deadlock, whatever order the GPU dispatches the
    /// grid in (docs/design-notes.md, "Tile blocks that talk to each other").
    pub unsafe fn take_ticket(counter: *mut i32) -> (i32, Token) {
        let at: PointerTile<*mut i32, { [] }> = pointer_to_tile(counter).offset(0i32);
        let one: Tile<i32, { [] }> = scalar_to_tile(1i32);
        let (before, tok): (Tile<i32, { [] }>, Token) =
            atomic_rmw_tko(at, one, atomic::Add, ordering::Relaxed, scope::Device, None, None);
        (tile_to_scalar(before), tok)
    }

    /// [`arrive`], then [`wait_arrived`]: counts this tile block in and waits for the rest of
    /// its row tile's `chunks`.
    pub unsafe fn arrive_and_wait(arrived: *mut i32, rb: i32, chunks: i32, after: Token) -> Token {
        let (_before, t_arrive): (i32, Token) = arrive(arrived, rb, after);
        wait_arrived(arrived, rb, chunks, t_arrive)
    }

    /// The row tile's partials: columns [0, PARTS) of rows row0.. of the (m, chunks) f32 array
    /// `parts`, loaded after `after`, columns past `chunks` masked off (not read; their values
    /// undefined: select with the mask returned). Returns the tile, the mask and the load's token.
    pub unsafe fn load_partials<const ROWS: i32, const PARTS: i32>(
        parts: *mut f32, row0: i32, chunks: i32, after: Token,
    ) -> (Tile<f32, { [ROWS, PARTS] }>, Tile<bool, { [ROWS, PARTS] }>, Token) {
        let ptrs: PointerTile<*mut f32, { [ROWS, PARTS] }> =
            tile_pointers::<f32, ROWS, PARTS>(parts, row0 * chunks, chunks);
        let mask: Tile<bool, { [ROWS, PARTS] }> = tile_mask::<ROWS, PARTS>(0i32, 0i32, ROWS, chunks);
        let (raw, tok): (Tile<f32, { [ROWS, PARTS] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(mask), None, Some(after), Latency::<0>);
        (raw, mask, tok)
    }

    /// Writes the chunk's (m_c, s_c) at column c of the row tile's partials, the sum after the
    /// max; returns the second store's token.
    pub unsafe fn publish_pair<const ROWS: i32>(
        part_max: *mut f32, part_sum: *mut f32, row0: i32, c: i32, chunks: i32, c_max: Tile<f32, { [ROWS] }>,
        c_sum: Tile<f32, { [ROWS] }>,
    ) -> Token {
        let t_max: Token = publish_partial::<ROWS>(part_max, row0, c, chunks, c_max);
        publish_partial_after::<ROWS>(part_sum, row0, c, chunks, c_sum, t_max)
    }

    /// After `tok` (the wait's last poll), loads the row tile's partials (max, sum of exp(x - max))
    /// and combines them into each row's max M and sum S = sum_c s_c exp(m_c - M) (columns past
    /// `chunks` weigh nothing); returns (M, S) and the last load's token.
    pub unsafe fn partials_combine<const ROWS: i32, const PARTS: i32>(
        part_max: *mut f32, part_sum: *mut f32, row0: i32, chunks: i32, tok: Token,
    ) -> (Tile<f32, { [ROWS] }>, Tile<f32, { [ROWS] }>, Token) {
        let parts: Shape<{ [ROWS, PARTS] }> = shape![ROWS, PARTS];
        let (pm_raw, p_mask, t_pm) = load_partials::<ROWS, PARTS>(part_max, row0, chunks, tok);
        let (ps_raw, _ps_mask, t_ps) = load_partials::<ROWS, PARTS>(part_sum, row0, chunks, t_pm);
        let p_neg_inf: Tile<f32, { [ROWS, PARTS] }> = constant(f32::NEG_INFINITY, parts);
        let p_zero: Tile<f32, { [ROWS, PARTS] }> = constant(0.0f32, parts);
        let pm: Tile<f32, { [ROWS, PARTS] }> = select(p_mask, pm_raw, p_neg_inf);
        let ps: Tile<f32, { [ROWS, PARTS] }> = select(p_mask, ps_raw, p_zero);
        let row_max: Tile<f32, { [ROWS] }> = reduce_max(pm, 1i32);
        let log2e_p: Tile<f32, { [ROWS, PARTS] }> = constant(1.4426950408889634f32, parts);
        let pmx: Tile<f32, { [ROWS, PARTS] }> = row_max.reshape(shape![ROWS, 1]).broadcast(parts);
        let sum: Tile<f32, { [ROWS] }> = reduce_sum(ps * exp2((pm - pmx) * log2e_p, ftz::Enabled), 1i32);
        (row_max, sum, t_ps)
    }

    /// The column tiles of chunk c (`chunk_tiles` BLOCK-wide tiles a chunk) of an n-column row, as
    /// (j0, j_full, j_end): tiles [j0, j_full) are whole; [j_full, j_end) is the row's ragged last
    /// tile when this chunk holds it, else empty.
    pub fn chunk_tile_range<const BLOCK: i32>(c: i32, chunk_tiles: i32, n: i32) -> (i32, i32, i32) {
        let j0: i32 = c * chunk_tiles;
        let j_stop: i32 = j0 + chunk_tiles;
        (j0, min(j_stop, n / BLOCK), min(j_stop, (n + BLOCK - 1) / BLOCK))
    }

    /// Column tile j of the row tile whose tile of column 0 is `x_base`, loaded unmasked (a whole
    /// tile) in f32, and its column offsets (to address another tensor's tile the same way).
    pub unsafe fn whole_tile<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        x_base: PointerTile<*mut T, { [ROWS, BLOCK] }>, j: i32,
    ) -> (Tile<f32, { [ROWS, BLOCK] }>, Tile<i32, { [ROWS, BLOCK] }>) {
        let col0: Tile<i32, { [ROWS, BLOCK] }> = broadcast_scalar(j * BLOCK, shape![ROWS, BLOCK]);
        let x_ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> = x_base.offset_tile(col0);
        let (raw, _t): (Tile<T, { [ROWS, BLOCK] }>, Token) =
            load_ptr_tko(x_ptrs, ordering::Weak, None::<scope::TileBlock>, None, None, None, Latency::<3>);
        (convert_tile(raw), col0)
    }
}

/// The order tile blocks visit tiles in: output tiles in bands (matmul, bmm), row tiles of a
/// persistent grid (softmax).
#[cutile::module]
pub mod tile_order {
    use cutile::core::*;

    /// (bid_m, bid_n) of output tile `tile_id` of a tiles_m x tiles_n grid in GROUP-row band order
    /// ("grouped" or swizzled): consecutive ids walk down `group` tile rows before moving right, so
    /// the tile blocks resident at one time share A row-tiles and B column-tiles in L2. Every id
    /// below tiles_m * tiles_n lands on a distinct tile inside the grid (the last band holds exactly
    /// band_rows * tiles_n ids).
    pub fn band_coords(tile_id: i32, tiles_m: i32, tiles_n: i32, group: i32) -> (i32, i32) {
        let band_tiles: i32 = group * tiles_n;
        let first_m: i32 = (tile_id / band_tiles) * group;
        let left: i32 = tiles_m - first_m;
        // The last band may hold fewer than GROUP tile rows.
        let band_rows: i32 = if left < group { left } else { group };
        let in_band: i32 = tile_id % band_tiles;
        (first_m + in_band % band_rows, in_band / band_rows)
    }

    /// (tiles_m, tiles_n, k_tiles) of an (m, n) output in BM x BN tiles over a k-deep product in
    /// BK steps: the tile rows and columns of C, the K-tiles of A and B.
    pub fn tile_counts<const BM: i32, const BN: i32, const BK: i32>(m: i32, n: i32, k: i32) -> (i32, i32, i32) {
        let tiles_m: i32 = (m + BM - 1) / BM;
        let tiles_n: i32 = (n + BN - 1) / BN;
        let k_tiles: i32 = (k + BK - 1) / BK;
        (tiles_m, tiles_n, k_tiles)
    }

    /// (pid, programs, row_tiles) of a persistent grid over the ROWS-row tiles of an m-row tensor:
    /// this tile block's first row tile (its id), the stride to its next one (the grid's tile block
    /// count) and the row tile count, for `for rb in (pid..row_tiles).step_by(programs as usize)`
    /// (softmax's `softmax_row_tail_persistent` and `softmax_row_tail_prefetch`; layer_norm's and
    /// rms_norm's `_row_persistent`, `_row_tail`, `_row_tail_prefetch` and `_row_aligned_persistent`
    /// entries).
    pub fn persistent_row_tiles<const ROWS: i32>(m: i32) -> (i32, i32, i32) {
        let pid: i32 = get_tile_block_id().0;
        let programs: i32 = get_num_tile_blocks().0;
        let row_tiles: i32 = (m + ROWS - 1) / ROWS;
        (pid, programs, row_tiles)
    }
}
