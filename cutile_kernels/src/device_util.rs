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
        ptr: *mut T,
        rows: i32,
        cols: i32,
        stride: i32,
        tok: Token,
    ) -> Tensor<T, { [-1, -1] }> {
        let shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[rows, cols] };
        let strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[stride] };
        make_tensor_view(pointer_to_tile(ptr), shape, strides, tok)
    }

    /// The ROWS x BLOCK pointers of the tile whose first element is `first` elements past `ptr`,
    /// in rows `stride` elements apart: a tile to load or store without masks (`load_ptr_tko`,
    /// `store_ptr_tko`), which the launcher allows only where the tile lies inside the tensor.
    pub fn tile_pointers<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        ptr: *mut T,
        first: i32,
        stride: i32,
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

    /// The lanes of the ROWS x BLOCK tile whose first element is (row0, col0) that lie inside an
    /// (m, n) tensor: the mask of a masked pointer-tile load or store (`load_ptr_tko`,
    /// `store_ptr_tko`) at a ragged edge.
    pub fn tile_mask<const ROWS: i32, const BLOCK: i32>(
        row0: i32,
        col0: i32,
        m: i32,
        n: i32,
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
}

/// The order tile blocks visit output tiles in (matmul, bmm).
#[cutile::module]
pub mod tile_order {
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
}

/// Elementwise math of more than one kernel.
#[cutile::module]
pub mod activations {
    use cutile::core::*;

    /// silu(g) * u = g * sigmoid(g) * u from f32 tiles, rounded to T (silu_and_mul, swiglu).
    pub fn silu_mul<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        g: Tile<f32, { [ROWS, BLOCK] }>,
        u: Tile<f32, { [ROWS, BLOCK] }>,
    ) -> Tile<T, { [ROWS, BLOCK] }> {
        // sigmoid(g) = 1 / (1 + exp(-g)), with exp(-g) = exp2(g * -log2(e)) (the hardware's ex2)
        // and the approximate, flush-to-zero reciprocal (MUFU.RCP, ~1 ulp) instead of the IEEE
        // division's refinement sequence. exp2 overflows to +inf for g < ~-88 and 1/inf = 0, so
        // the result saturates to -0 instead of the NaN that exp(g) / (1 + exp(g)) gives for
        // g > ~88; flushed subnormals are far below every output dtype's resolution.
        let one: Tile<f32, { [ROWS, BLOCK] }> = constant(1.0f32, shape![ROWS, BLOCK]);
        let neg_log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(-1.4426950408889634f32, shape![ROWS, BLOCK]);
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(g * neg_log2e, ftz::Enabled);
        let sig: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(g * sig * u);
        y
    }
}
