//! Matmul device code: C = A · B with A (m, k), B (k, n), C (m, n), all of element type T (f16 or
//! bf16), products accumulated in f32 on the tensor cores (`mma`) and rounded to T once at the end.
//! The const generic ACC of `matmul_tiles` and `matmul_split_reduce` makes it C += A · B (C read
//! once and added in f32 before the one rounding; cuBLAS's β = 1): a weight's gradient summed over
//! chunks of tokens, as fused linear cross-entropy needs.
//!
//! The entries take raw device pointers (PyTorch owns the memory) and build strided views over
//! them. C is contiguous in its last dim; its row stride may be larger (a column slice). A and B
//! are each stored row-major the same way, or column-major (the `.t()` view of a row-major matrix:
//! an `nn.Linear` weight W (n, k) passed as `W.t()`): the const generics A_MAP / B_MAP are the
//! partitions' dim maps, [0, 1] for row-major and [1, 0] for column-major. A column-major B is
//! viewed as the (n, k) matrix it is stored as, and its [BK, BN] tiles are read through the dim
//! map (tile axis 0 is the view's axis 1): the tile lands K-major, the layout Hopper's MMA reads
//! B in natively, so no copy and no in-register transpose.
//! A tile block computes one BM x BN tile of C by walking ceil(k / BK) K-tiles. Partitions pad with
//! zero, so the last K-tile of a k that is not a multiple of BK contributes zeros (A's padded
//! columns meet B's padded rows), and the ragged M/N edge tiles compute on zeros whose results the
//! store drops (stores outside the [m, n] view are not written; through TMA only where C's rows are
//! whole 16-byte units: the const generic C_TMA, device_util's `store_tile_2d`). Any m, n, k work
//! without masks.
//!
//! Output tiles are visited in GROUP-row bands ("grouped" or swizzled order): consecutive tile
//! ids walk down GROUP tile rows of C before moving right, so the tile blocks resident at one time
//! share A row-tiles and B column-tiles in L2 instead of streaming all of B per tile row.
//!   * `matmul_tiles`      — one output tile per tile block, grid = tiles_m * tiles_n; or, with
//!     the const generic PERSISTENT, a fixed grid (about one tile block per SM) strides over the
//!     tiles, so the epilogue of one tile can overlap the loads of the next.
//!   * `matmul_split_partials` + `matmul_split_reduce` — split-K for products with too few output
//!     tiles to fill the GPU (decode: m <= 64 tokens times a weight): each output tile's K-tiles
//!     are cut over `splits` tile blocks that write f32 partial tiles to a workspace, and a second
//!     kernel adds them and rounds to T.
//!
//! The host side (ffi.rs) picks the entry and the tile shape (the variant).
//!
//! `unchecked_accesses`: every index is in its partition by construction. tile_id < tiles_m *
//! tiles_n (the grid, or the persistent loop bound), and `tile_coords` maps such an id to
//! bid_m < tiles_m = ceil(m / BM) and bid_n < tiles_n = ceil(n / BN) (the last band holds exactly
//! band_rows * tiles_n ids); the K loop stops at ceil(k / BK), the K-tile count of both A and B.
//! Split-K: split < splits = ceil(k_tiles / k_per) (the grid's second dim), so k_first < k_tiles;
//! the workspace has splits * tiles_m tile rows and tiles_n tile columns, and split * tiles_m + bid_m
//! < splits * tiles_m.
#[cutile::module]
pub mod matmul_device {
    use crate::device_util::tile_order::{band_coords, tile_counts};
    use crate::device_util::views::{store_tile_2d, strided_view};
    use cutile::core::*;

    /// (bid_m, bid_n) of output tile `tile_id` in GROUP-row band order (device_util's).
    pub fn tile_coords(tile_id: i32, tiles_m: i32, tiles_n: i32, group: i32) -> (i32, i32) {
        band_coords(tile_id, tiles_m, tiles_n, group)
    }

    /// A and B as views of their storage with its row strides: A (m, k), or (k, m) when A_T = 1
    /// (column-major); B (k, n), or (n, k) when B_T = 1.
    unsafe fn operand_views<T: ElementType, const A_T: i32, const B_T: i32>(
        a_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, k: i32, lda: i32, ldb: i32, tok: Token,
    ) -> (Tensor<T, { [-1, -1] }>, Tensor<T, { [-1, -1] }>) {
        // (rows, cols) of the storage: the logical shape, swapped when the layout is transposed.
        let a_view: Tensor<T, { [-1, -1] }> = strided_view(a_ptr, m + (k - m) * A_T, k + (m - k) * A_T, lda, tok);
        let b_view: Tensor<T, { [-1, -1] }> = strided_view(b_ptr, k + (n - k) * B_T, n + (k - n) * B_T, ldb, tok);
        (a_view, b_view)
    }

    /// A, B (operand_views) and C (m, n) as views of their storage.
    // The entries' sizes one for one: a struct would only repack them.
    #[allow(clippy::too_many_arguments)]
    unsafe fn matmul_views<T: ElementType, const A_T: i32, const B_T: i32>(
        c_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, k: i32, lda: i32, ldb: i32, ldc: i32,
    ) -> (Tensor<T, { [-1, -1] }>, Tensor<T, { [-1, -1] }>, Tensor<T, { [-1, -1] }>) {
        let tok: Token = new_token_unordered();
        let (a_view, b_view) = operand_views::<T, A_T, B_T>(a_ptr, b_ptr, m, n, k, lda, ldb, tok);
        let c_view: Tensor<T, { [-1, -1] }> = strided_view(c_ptr, m, n, ldc, tok);
        (a_view, b_view, c_view)
    }

    /// The f32 sum of the products of K-tiles [k_first, k_end) of output tile (bid_m, bid_n). LAT is
    /// the K-tiles' load latency hint: 0 for none (`load`), else Tile IR's latency hint
    /// (`load_pipelined::<LAT>`). Split-K's partial tiles take 4: ~2.5 % faster at 64 x 4096 x 4096,
    /// while the same hint slows the persistent grids by 1-11 % and the 16-row decode tile by 2.5 %
    /// (NOTES.md, "Load latency hints"); the cutile compiler keeps only the branch LAT selects.
    fn mma_acc<T: ElementType, const BM: i32, const BN: i32, const BK: i32, const LAT: i32>(
        a_part: &Partition<T, { [BM, BK] }>, b_part: &Partition<T, { [BK, BN] }>, bid_m: i32, bid_n: i32, k_first: i32,
        k_end: i32,
    ) -> Tile<f32, { [BM, BN] }> {
        let mut acc: Tile<f32, { [BM, BN] }> = constant(0.0f32, shape![BM, BN]);
        for kt in k_first..k_end {
            if LAT > 0i32 {
                let a: Tile<T, { [BM, BK] }> = a_part.load_pipelined::<LAT>([bid_m, kt]);
                let b: Tile<T, { [BK, BN] }> = b_part.load_pipelined::<LAT>([kt, bid_n]);
                acc = mma(a, b, acc);
            } else {
                let a: Tile<T, { [BM, BK] }> = a_part.load([bid_m, kt]);
                let b: Tile<T, { [BK, BN] }> = b_part.load([kt, bid_n]);
                acc = mma(a, b, acc);
            }
        }
        acc
    }

    /// Output tile (bid_m, bid_n) of C: the products of its K-tiles accumulated in f32, rounded to T.
    fn mma_tile<T: ElementType, const BM: i32, const BN: i32, const BK: i32>(
        a_part: &Partition<T, { [BM, BK] }>, b_part: &Partition<T, { [BK, BN] }>, bid_m: i32, bid_n: i32, k_tiles: i32,
    ) -> Tile<T, { [BM, BN] }> {
        let acc: Tile<f32, { [BM, BN] }> = mma_acc::<T, BM, BN, BK, 0>(a_part, b_part, bid_m, bid_n, 0i32, k_tiles);
        let c: Tile<T, { [BM, BN] }> = convert_tile(acc);
        c
    }

    /// Output tile `tile_id` (in band order) of C computed and stored: what `matmul_tiles` does per
    /// tile. With ACC the tile of C is read first (through `c_read`, zero past C's edges) and added
    /// to the products in f32 (C += A B): its one store depends on that load's values, and no other
    /// tile block touches the tile.
    // The tile's operands and counts one for one: a struct would only repack them.
    #[allow(clippy::too_many_arguments)]
    fn store_tile<T: ElementType, const BM: i32, const BN: i32, const BK: i32, const ACC: bool, const C_TMA: bool>(
        a_part: &Partition<T, { [BM, BK] }>, b_part: &Partition<T, { [BK, BN] }>, c_read: &Partition<T, { [BM, BN] }>,
        c_part: &mut PartitionMut<T, { [BM, BN] }>, tile_id: i32, tiles_m: i32, tiles_n: i32, group: i32, k_tiles: i32,
    ) {
        let (bid_m, bid_n) = tile_coords(tile_id, tiles_m, tiles_n, group);
        if ACC {
            let acc: Tile<f32, { [BM, BN] }> = mma_acc::<T, BM, BN, BK, 0>(a_part, b_part, bid_m, bid_n, 0i32, k_tiles);
            let old: Tile<T, { [BM, BN] }> = c_read.load([bid_m, bid_n]);
            let old_f: Tile<f32, { [BM, BN] }> = convert_tile(old);
            let c: Tile<T, { [BM, BN] }> = convert_tile(acc + old_f);
            store_tile_2d::<T, BM, BN, C_TMA>(c_part, c, bid_m, bid_n);
        } else {
            let c: Tile<T, { [BM, BN] }> = mma_tile::<T, BM, BN, BK>(a_part, b_part, bid_m, bid_n, k_tiles);
            store_tile_2d::<T, BM, BN, C_TMA>(c_part, c, bid_m, bid_n);
        }
    }

    /// The output tiles of C, in band order: with PERSISTENT false one tile per tile block, grid =
    /// ceil(m / BM) * ceil(n / BN); with PERSISTENT true a launch grid (host-chosen, <= the tile
    /// count) strides over them. With ACC, C += A B (`cutile_matmul_acc`). The compiler keeps only
    /// the forms PERSISTENT and ACC select.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn matmul_tiles<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const GROUP: i32,
        const A_T: i32,
        const B_T: i32,
        const A_MAP: [i32; 2],
        const B_MAP: [i32; 2],
        const PERSISTENT: bool,
        const ACC: bool,
        const C_TMA: bool,
    >(
        c_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, k: i32, lda: i32, ldb: i32, ldc: i32,
    ) {
        let (a_view, b_view, c_view) = matmul_views::<T, A_T, B_T>(c_ptr, a_ptr, b_ptr, m, n, k, lda, ldb, ldc);
        let a_part: Partition<T, { [BM, BK] }> = a_view.partition_permuted(shape![BM, BK], const_array!(A_MAP));
        let b_part: Partition<T, { [BK, BN] }> = b_view.partition_permuted(shape![BK, BN], const_array!(B_MAP));
        let mut c_part: PartitionMut<T, { [BM, BN] }> = unsafe { c_view.partition_full_mut(shape![BM, BN]) };
        // ACC's read of C: a padded view (zero past C's edges), as A's and B's; a load of c_part's
        // unpadded tiles past the edges is undefined, and on an H100 the accumulating form wrote past
        // C's columns (NOTES.md, "C += A B")
        let c_read: Partition<T, { [BM, BN] }> = c_view.partition(shape![BM, BN]);

        let (tiles_m, tiles_n, k_tiles) = tile_counts::<BM, BN, BK>(m, n, k);
        let first: i32 = get_tile_block_id().0;
        if PERSISTENT {
            let num_tiles: i32 = tiles_m * tiles_n;
            let programs: i32 = get_num_tile_blocks().0;
            for tile_id in (first..num_tiles).step_by(programs as usize) {
                store_tile::<T, BM, BN, BK, ACC, C_TMA>(
                    &a_part,
                    &b_part,
                    &c_read,
                    &mut c_part,
                    tile_id,
                    tiles_m,
                    tiles_n,
                    GROUP,
                    k_tiles,
                );
            }
        } else {
            store_tile::<T, BM, BN, BK, ACC, C_TMA>(
                &a_part,
                &b_part,
                &c_read,
                &mut c_part,
                first,
                tiles_m,
                tiles_n,
                GROUP,
                k_tiles,
            );
        }
    }

    /// Split-K, first half: tile block (t, s) of grid (tiles, splits) sums K-tiles
    /// [s * k_per, min((s + 1) * k_per, k_tiles)) of output tile t (band order) in f32 and stores the
    /// partial tile in the f32 workspace W, (splits * tiles_m * BM, n) contiguous: split s's tile
    /// rows start at row s * tiles_m * BM, so no split's ragged edge tile reaches another's rows.
    /// The host makes every split non-empty (splits = ceil(k_tiles / k_per)).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn matmul_split_partials<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const BK: i32,
        const GROUP: i32,
        const A_T: i32,
        const B_T: i32,
        const A_MAP: [i32; 2],
        const B_MAP: [i32; 2],
    >(
        w_ptr: *mut f32, a_ptr: *mut T, b_ptr: *mut T, m: i32, n: i32, k: i32, lda: i32, ldb: i32, k_per: i32,
    ) {
        let tok: Token = new_token_unordered();
        let (a_view, b_view) = operand_views::<T, A_T, B_T>(a_ptr, b_ptr, m, n, k, lda, ldb, tok);
        let a_part: Partition<T, { [BM, BK] }> = a_view.partition_permuted(shape![BM, BK], const_array!(A_MAP));
        let b_part: Partition<T, { [BK, BN] }> = b_view.partition_permuted(shape![BK, BN], const_array!(B_MAP));
        let (tiles_m, tiles_n, k_tiles) = tile_counts::<BM, BN, BK>(m, n, k);
        let splits: i32 = get_num_tile_blocks().1;
        let w_view: Tensor<f32, { [-1, -1] }> = strided_view(w_ptr, splits * tiles_m * BM, n, n, tok);
        let mut w_part: PartitionMut<f32, { [BM, BN] }> = unsafe { w_view.partition_full_mut(shape![BM, BN]) };

        let (bid_m, bid_n) = tile_coords(get_tile_block_id().0, tiles_m, tiles_n, GROUP);
        let split: i32 = get_tile_block_id().1;
        let k_first: i32 = split * k_per;
        let k_end: i32 = min(k_first + k_per, k_tiles);
        let acc: Tile<f32, { [BM, BN] }> = mma_acc::<T, BM, BN, BK, 4>(&a_part, &b_part, bid_m, bid_n, k_first, k_end);
        w_part.store(acc, [split * tiles_m + bid_m, bid_n]);
    }

    /// Split-K, second half: tile block (i, j) of grid (tiles_m, tiles_n) adds output tile (i, j)'s
    /// `splits` partial tiles from W (matmul_split_partials' layout) in f32 and stores it in C as T
    /// (through TMA with C_TMA, as `matmul_tiles`); with ACC C's tile is read first and added too
    /// (C += A B).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn matmul_split_reduce<T: ElementType, const BM: i32, const BN: i32, const ACC: bool, const C_TMA: bool>(
        c_ptr: *mut T, w_ptr: *mut f32, m: i32, n: i32, ldc: i32, splits: i32,
    ) {
        let tok: Token = new_token_unordered();
        let tiles_m: i32 = (m + BM - 1) / BM;
        let w_view: Tensor<f32, { [-1, -1] }> = strided_view(w_ptr, splits * tiles_m * BM, n, n, tok);
        let w_part: Partition<f32, { [BM, BN] }> = w_view.partition(shape![BM, BN]);
        let c_view: Tensor<T, { [-1, -1] }> = strided_view(c_ptr, m, n, ldc, tok);
        let mut c_part: PartitionMut<T, { [BM, BN] }> = unsafe { c_view.partition_full_mut(shape![BM, BN]) };
        let c_read: Partition<T, { [BM, BN] }> = c_view.partition(shape![BM, BN]); // ACC's padded read

        let (bid_m, bid_n) = (get_tile_block_id().0, get_tile_block_id().1);
        let mut acc: Tile<f32, { [BM, BN] }> = w_part.load([bid_m, bid_n]);
        for s in 1i32..splits {
            let part: Tile<f32, { [BM, BN] }> = w_part.load([s * tiles_m + bid_m, bid_n]);
            acc = acc + part;
        }
        if ACC {
            let old: Tile<T, { [BM, BN] }> = c_read.load([bid_m, bid_n]);
            let old_f: Tile<f32, { [BM, BN] }> = convert_tile(old);
            acc = acc + old_f;
        }
        let c: Tile<T, { [BM, BN] }> = convert_tile(acc);
        store_tile_2d::<T, BM, BN, C_TMA>(&mut c_part, c, bid_m, bid_n);
    }
}
