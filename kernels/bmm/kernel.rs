//! Batched matmul device code: C[b] = A[b] · B[b] for b < batch, A[b] (m, k), B[b] (k, n),
//! C[b] (m, n), all of element type T (f16 or bf16), products accumulated in f32 on the tensor
//! cores (`mma`) and rounded to T once at the end.
//!
//! kernels/matmul's tile loop with the batch as the leading dim of 3-D views. Each operand is a
//! batch of matrices at any batch stride, each matrix row-major or column-major (the `.t()` view
//! of a row-major one: K of an attention head passed as K.transpose(1, 2)) as in matmul: A_T /
//! B_T say which, and the partitions' dim maps A_MAP / B_MAP ([0, 1, 2] row-major, [0, 2, 1]
//! column-major) read a column-major operand's tiles in place, K-major for B as Hopper's MMA reads
//! it. An operand shared by every product (batch stride 0, e.g. B.expand(batch, k, n)) is viewed
//! as a batch of one (`a_batches` / `b_batches` = 1) and always read at batch index 0.
//!
//! A tile block computes one BM x BN tile of one C[b] by walking ceil(k / BK) K-tiles; partitions
//! pad with zero and stores outside the view are dropped, so any m, n, k work without masks
//! (matmul's kernel.rs says how, and why C_TMA). Tile ids run over the batch first: id / (tiles_m *
//! tiles_n) is the product, and within one the tiles go in GROUP-row bands as in matmul, so the
//! tile blocks resident at one time share A row-tiles and B column-tiles of one product in L2.
//!   * `bmm_tiles` — one output tile per tile block, grid = batch * tiles_m * tiles_n; or, with the
//!     const generic PERSISTENT, a fixed grid (about one tile block per SM) strides over all the tiles.
//!
//! `unchecked_accesses`: tile_id < batch * tiles_m * tiles_n (the grid, or the persistent loop
//! bound), so `tile_coords` gives batch < batch, bid_m < tiles_m and bid_n < tiles_n; an operand's
//! batch index is that batch or 0 for a batch of one; the K loop stops at ceil(k / BK).
#[cutile::module]
pub mod bmm_device {
    use crate::device_util::tile_order::tile_counts;
    use crate::device_util::views::store_tile_3d;
    use cutile::core::*;

    /// (batch, bid_m, bid_n) of output tile `tile_id`: the products in order, each one's tiles in
    /// GROUP-row bands (consecutive ids walk down GROUP tile rows before moving right).
    // device_util::tile_order::band_coords after `id / tiles`; spelled out so that the IR keeps the
    // order of ops it was measured with (band_coords would emit the batch's division last).
    pub fn tile_coords(tile_id: i32, tiles_m: i32, tiles_n: i32, group: i32) -> (i32, i32, i32) {
        let tiles: i32 = tiles_m * tiles_n;
        let id: i32 = tile_id % tiles;
        let band_tiles: i32 = group * tiles_n;
        let first_m: i32 = (id / band_tiles) * group;
        let left: i32 = tiles_m - first_m;
        // The last band may hold fewer than GROUP tile rows.
        let band_rows: i32 = if left < group { left } else { group };
        let in_band: i32 = id % band_tiles;
        (tile_id / tiles, first_m + in_band % band_rows, in_band / band_rows)
    }

    /// `batches` matrices of `rows` x `cols` at `ptr`, `batch_stride` apart, rows `ld` apart, the
    /// last dim contiguous.
    unsafe fn batched_view<T: ElementType>(
        ptr: *mut T, batches: i32, rows: i32, cols: i32, batch_stride: i32, ld: i32, tok: Token,
    ) -> Tensor<T, { [-1, -1, -1] }> {
        let shape: Shape<{ [-1, -1, -1] }> = Shape::<{ [-1, -1, -1] }> { dims: &[batches, rows, cols] };
        let strides: Array<{ [-1, -1, 1] }> = Array::<{ [-1, -1, 1] }> { dims: &[batch_stride, ld] };
        make_tensor_view(pointer_to_tile(ptr), shape, strides, tok)
    }

    /// A, B and C as 3-D views of their storage: A `a_batches` (1 or batch) matrices `sa` apart,
    /// each (m, k) with rows `lda` apart, or (k, m) when A_T = 1 (column-major); B likewise, (k, n)
    /// or (n, k); C `batch` (m, n) matrices `sc` apart, rows `ldc` apart.
    // The entries' sizes one for one: a struct would only repack them.
    #[allow(clippy::too_many_arguments)]
    unsafe fn bmm_views<T: ElementType, const A_T: i32, const B_T: i32>(
        c_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, batch: i32, m: i32, n: i32, k: i32, a_batches: i32,
        b_batches: i32, sa: i32, sb: i32, sc: i32, lda: i32, ldb: i32, ldc: i32,
    ) -> (Tensor<T, { [-1, -1, -1] }>, Tensor<T, { [-1, -1, -1] }>, Tensor<T, { [-1, -1, -1] }>) {
        let tok: Token = new_token_unordered();
        // (rows, cols) of each stored matrix: the logical shape, swapped when it is column-major.
        let a_view: Tensor<T, { [-1, -1, -1] }> =
            batched_view(a_ptr, a_batches, m + (k - m) * A_T, k + (m - k) * A_T, sa, lda, tok);
        let b_view: Tensor<T, { [-1, -1, -1] }> =
            batched_view(b_ptr, b_batches, k + (n - k) * B_T, n + (k - n) * B_T, sb, ldb, tok);
        let c_view: Tensor<T, { [-1, -1, -1] }> = batched_view(c_ptr, batch, m, n, sc, ldc, tok);
        (a_view, b_view, c_view)
    }

    /// Output tile (bid_m, bid_n) of C[batch]: the products of its K-tiles, of A[a_b] and B[b_b],
    /// accumulated in f32 and rounded to T.
    // The tile's coordinates one for one: a struct would only repack them.
    #[allow(clippy::too_many_arguments)]
    fn mma_tile<T: ElementType, const BM: i32, const BN: i32, const BK: i32>(
        a_part: &Partition<T, { [1, BM, BK] }>, b_part: &Partition<T, { [1, BK, BN] }>, a_b: i32, b_b: i32, bid_m: i32,
        bid_n: i32, k_tiles: i32,
    ) -> Tile<T, { [1, BM, BN] }> {
        let mut acc: Tile<f32, { [BM, BN] }> = constant(0.0f32, shape![BM, BN]);
        for kt in 0i32..k_tiles {
            let a3: Tile<T, { [1, BM, BK] }> = a_part.load([a_b, bid_m, kt]);
            let b3: Tile<T, { [1, BK, BN] }> = b_part.load([b_b, kt, bid_n]);
            let a: Tile<T, { [BM, BK] }> = a3.reshape(shape![BM, BK]);
            let b: Tile<T, { [BK, BN] }> = b3.reshape(shape![BK, BN]);
            acc = mma(a, b, acc);
        }
        let c: Tile<T, { [BM, BN] }> = convert_tile(acc);
        c.reshape(shape![1, BM, BN])
    }

    /// Output tile `tile_id` (products first, then band order) of C computed and stored, from A[b]
    /// and B[b] or the batch of one: what `bmm_tiles` does per tile.
    // The tile's operands and counts one for one: a struct would only repack them.
    #[allow(clippy::too_many_arguments)]
    fn store_tile<T: ElementType, const BM: i32, const BN: i32, const BK: i32, const C_TMA: bool>(
        a_part: &Partition<T, { [1, BM, BK] }>, b_part: &Partition<T, { [1, BK, BN] }>,
        c_part: &mut PartitionMut<T, { [1, BM, BN] }>, tile_id: i32, tiles_m: i32, tiles_n: i32, group: i32,
        k_tiles: i32, a_batches: i32, b_batches: i32,
    ) {
        let (b, bid_m, bid_n) = tile_coords(tile_id, tiles_m, tiles_n, group);
        let a_b: i32 = if a_batches == 1 { 0i32 } else { b };
        let b_b: i32 = if b_batches == 1 { 0i32 } else { b };
        let c: Tile<T, { [1, BM, BN] }> = mma_tile::<T, BM, BN, BK>(a_part, b_part, a_b, b_b, bid_m, bid_n, k_tiles);
        // through TMA only where C's rows are whole 16-byte units (device_util's `store_tile_2d` says why)
        store_tile_3d::<T, 1, BM, BN, C_TMA>(c_part, c, b, bid_m, bid_n);
    }

    /// The output tiles of every C[b], products first: with PERSISTENT false one tile per tile
    /// block, grid = batch * ceil(m / BM) * ceil(n / BN); with PERSISTENT true a launch grid
    /// (host-chosen, <= the tile count) strides over them. The operands as `bmm_views` reads them;
    /// the compiler keeps only the form PERSISTENT selects.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn bmm_tiles<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const GROUP: i32,
        const A_T: i32,
        const B_T: i32,
        const A_MAP: [i32; 3],
        const B_MAP: [i32; 3],
        const PERSISTENT: bool,
        const C_TMA: bool,
    >(
        c_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, batch: i32, m: i32, n: i32, k: i32, a_batches: i32,
        b_batches: i32, sa: i32, sb: i32, sc: i32, lda: i32, ldb: i32, ldc: i32,
    ) {
        let (a_view, b_view, c_view) = bmm_views::<T, A_T, B_T>(
            c_ptr, a_ptr, b_ptr, batch, m, n, k, a_batches, b_batches, sa, sb, sc, lda, ldb, ldc,
        );
        let a_part: Partition<T, { [1, BM, BK] }> = a_view.partition_permuted(shape![1, BM, BK], const_array!(A_MAP));
        let b_part: Partition<T, { [1, BK, BN] }> = b_view.partition_permuted(shape![1, BK, BN], const_array!(B_MAP));
        let mut c_part: PartitionMut<T, { [1, BM, BN] }> = unsafe { c_view.partition_full_mut(shape![1, BM, BN]) };

        let (tm, tn, kt) = tile_counts::<BM, BN, BK>(m, n, k); // tiles_m, tiles_n, k_tiles
        let (ab, bb) = (a_batches, b_batches);
        let first: i32 = get_tile_block_id().0;
        if PERSISTENT {
            let num_tiles: i32 = batch * tm * tn;
            let programs: i32 = get_num_tile_blocks().0;
            for tile_id in (first..num_tiles).step_by(programs as usize) {
                store_tile::<T, BM, BN, BK, C_TMA>(&a_part, &b_part, &mut c_part, tile_id, tm, tn, GROUP, kt, ab, bb);
            }
        } else {
            store_tile::<T, BM, BN, BK, C_TMA>(&a_part, &b_part, &mut c_part, first, tm, tn, GROUP, kt, ab, bb);
        }
    }
}
