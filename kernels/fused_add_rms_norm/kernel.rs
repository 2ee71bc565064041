//! Fused residual add + RMSNorm device code, the form vLLM and FlashInfer serve with and Liger trains
//! with: per row, s = x + residual (rounded to T, as it is stored), y = s * rsqrt(mean(s^2) + eps) * w.
//!
//! Element type T is f32, f16 or bf16 (x, residual, w, y and s); the sum and the scaling are f32. The
//! norm is of s as stored (rounded to T), so y is exactly what rms_norm of the new residual would give.
//! y and s go to two destinations the launcher chooses: the two planes of a (2, m, n) output (the
//! functional form: op.py's entry and op), or y into one (m, n) output (x itself, for the in-place
//! form) and s into residual itself. Every tile block reads all of its rows' x and residual before it
//! writes either (y and s depend on the whole row's sum), and owns its rows, so writing over x and
//! residual in place is safe.
//!
//! `fused_add_rms_norm_rows`: ROWS rows per tile block, the row held whole in one BLOCK-wide tile
//! (n <= BLOCK <= 16384, ffi.rs), read and written through pointer tiles with a mask of the lanes
//! inside (m, n), so any m, n and row strides work without padding (ffi.rs checks that every i32
//! offset of the padded tiles fits). One tile block per row tile, w loaded once per tile block.
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
#[cutile::module]
pub mod fused_add_rms_norm_device {
    use crate::device_util::views::{tile_mask, tile_pointers, tile_raw};
    use cutile::core::*;

    /// Stores `v` as the tile of an (m, n) tensor at row0 (rows `stride` apart), lanes outside (m, n)
    /// dropped.
    unsafe fn store_rows<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        ptr: *mut T, v: Tile<T, { [ROWS, BLOCK] }>, inside: Tile<bool, { [ROWS, BLOCK] }>, row0: i32, stride: i32,
    ) {
        let ptrs: PointerTile<*mut T, { [ROWS, BLOCK] }> = tile_pointers::<T, ROWS, BLOCK>(ptr, row0 * stride, stride);
        let _tok: Token =
            store_ptr_tko(ptrs, v, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, Latency::<3>);
    }

    /// s = x + residual and y = rms_norm(s) * w for the ROWS rows from tile block id * ROWS.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused_add_rms_norm_rows<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, s_ptr: *mut T, x_ptr: *mut T, r_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_y: i32,
        stride_s: i32, stride_x: i32, stride_r: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let inside: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(row0, 0i32, m, n);
        let x: Tile<f32, { [ROWS, BLOCK] }> =
            convert_tile(tile_raw::<T, ROWS, BLOCK, 3>(x_ptr, row0, row0, 0i32, m, n, stride_x));
        let r: Tile<f32, { [ROWS, BLOCK] }> =
            convert_tile(tile_raw::<T, ROWS, BLOCK, 3>(r_ptr, row0, row0, 0i32, m, n, stride_r));
        let w_ptrs: PointerTile<*mut T, { [1, BLOCK] }> = tile_pointers::<T, 1, BLOCK>(w_ptr, 0i32, 0i32);
        let w_inside: Tile<bool, { [1, BLOCK] }> = tile_mask::<1, BLOCK>(0i32, 0i32, 1i32, n);
        let (w_raw, _tok): (Tile<T, { [1, BLOCK] }>, Token) =
            load_ptr_tko(w_ptrs, ordering::Weak, None::<scope::TileBlock>, Some(w_inside), None, None, Latency::<3>);

        // s rounded to T once: the stored residual, and the value normalized
        let s_t: Tile<T, { [ROWS, BLOCK] }> = convert_tile(x + r);
        store_rows::<T, ROWS, BLOCK>(s_ptr, s_t, inside, row0, stride_s);
        let zero: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        let s_stored: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(s_t);
        let s: Tile<f32, { [ROWS, BLOCK] }> = select(inside, s_stored, zero);

        let n_scalar: f32 = convert_scalar(n);
        let mean_sq: Tile<f32, { [ROWS] }> = divf(
            reduce_sum(s * s, 1i32),
            broadcast_scalar(n_scalar, shape![ROWS]),
            rounding::NearestEven,
            ftz::Disabled,
        );
        let inv_rms: Tile<f32, { [ROWS] }> = rsqrt(mean_sq + broadcast_scalar(eps, shape![ROWS]), ftz::Disabled);
        let w_row: Tile<f32, { [1, BLOCK] }> = convert_tile(w_raw);
        let w: Tile<f32, { [ROWS, BLOCK] }> = w_row.broadcast(tile);
        let y: Tile<T, { [ROWS, BLOCK] }> = convert_tile(s * inv_rms.reshape(shape![ROWS, 1]).broadcast(tile) * w);
        store_rows::<T, ROWS, BLOCK>(y_ptr, y, inside, row0, stride_y);
    }
}
