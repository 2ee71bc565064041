//! Fused residual add + RMSNorm device code, the form vLLM and FlashInfer serve with and Liger trains
//! with: per row, s = x + residual (rounded to T, as it is stored), y = s * rsqrt(mean(s^2) + eps) * w.
//!
//! Element type T is f32, f16 or bf16 (x, residual, w, y and s); the sum and the scaling are f32. The
//! norm is of s as stored (rounded to T), so y is exactly what rms_norm of the new residual would give.
//! y and s go to two destinations the launcher chooses: the two planes of a (2, m, n) output (the
//! functional form: op.py's entry and op), or y into one (m, n) output (x itself, for the in-place
//! form) and s into residual itself. w is loaded first and the loads of x and residual take its
//! token: without that order tileiras issued w's loads after the row's reduction, one at a time
//! between the stores of y (NOTES.md, "w's loads after the reduction"). Each tile block owns its
//! rows, and every store of s or y takes the joined token of all its loads of x and residual: Tile
//! IR orders token-less accesses of one tile block by nothing (a lane's data dependence is no order
//! between the several threads that may hold the same lane of a small tile), so in place a store
//! could land before another thread's load of the same element. The tokens make every read of the
//! rows come before any write over them.
//!
//! `fused_add_rms_norm_rows`: ROWS rows per tile block, the row held whole in one BLOCK-wide tile
//! (n <= BLOCK <= 16384, ffi.rs), read and written through pointer tiles with a mask of the lanes
//! inside (m, n), so any m, n and row strides work without padding (ffi.rs checks that every i32
//! offset of the padded tiles fits). One tile block per row tile, w loaded once per tile block.
//! `fused_add_rms_norm_rows_tail`: the same with the row held as a BLOCK-wide body and a TAIL-wide
//! tail (BLOCK < n <= BLOCK + TAIL): n = 5120 in 4096 + 1024 lanes where one power-of-two tile
//! would leave 3072 of 8192 idle.
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
#[cutile::module]
pub mod fused_add_rms_norm_device {
    use crate::device_util::views::{tile_mask, tile_pointers};
    use cutile::core::*;

    /// Stores `v` as the tile of an (m, n) tensor at (row0, col0) (rows `stride` apart), lanes outside
    /// (m, n) dropped, ordered after `after` (the loads it may overwrite).
    #[allow(clippy::too_many_arguments)]
    unsafe fn store_part<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, v: Tile<T, { [ROWS, W] }>, row0: i32, col0: i32, m: i32, n: i32, stride: i32, after: Token,
    ) {
        let inside: Tile<bool, { [ROWS, W] }> = tile_mask::<ROWS, W>(row0, col0, m, n);
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = tile_pointers::<T, ROWS, W>(ptr, row0 * stride + col0, stride);
        let _tok: Token =
            store_ptr_tko(ptrs, v, ordering::Weak, None::<scope::TileBlock>, Some(inside), Some(after), Latency::<3>);
    }

    /// The ROWS x W part at (row0, col0) of an (m, n) tensor as loaded, lanes outside (m, n) not read
    /// (undefined: select after), and the load's token.
    #[allow(clippy::too_many_arguments)]
    unsafe fn load_part<T: ElementType, const ROWS: i32, const W: i32>(
        ptr: *mut T, row0: i32, col0: i32, m: i32, n: i32, stride: i32, after: Token,
    ) -> (Tile<T, { [ROWS, W] }>, Token) {
        let ptrs: PointerTile<*mut T, { [ROWS, W] }> = tile_pointers::<T, ROWS, W>(ptr, row0 * stride + col0, stride);
        let inside: Tile<bool, { [ROWS, W] }> = tile_mask::<ROWS, W>(row0, col0, m, n);
        load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, Some(after), Latency::<3>)
    }

    /// w's W lanes from col0 as a [1, W] tile in f32 (lanes past n not read: undefined, and only
    /// ever multiplied into lanes that are not stored).
    unsafe fn weight_part<T: ElementType, const W: i32>(
        w_ptr: *mut T, col0: i32, n: i32,
    ) -> (Tile<f32, { [1, W] }>, Token) {
        let ptrs: PointerTile<*mut T, { [1, W] }> = tile_pointers::<T, 1, W>(w_ptr, col0, 0i32);
        let inside: Tile<bool, { [1, W] }> = tile_mask::<1, W>(0i32, col0, 1i32, n);
        let (raw, tok): (Tile<T, { [1, W] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, None, Latency::<3>);
        (convert_tile(raw), tok)
    }

    /// x and residual of the ROWS x W part at (row0, col0) as loaded, and their loads' tokens joined.
    #[allow(clippy::too_many_arguments)]
    unsafe fn load_pair<T: ElementType, const ROWS: i32, const W: i32>(
        x_ptr: *mut T, r_ptr: *mut T, row0: i32, col0: i32, m: i32, n: i32, stride_x: i32, stride_r: i32, after: Token,
    ) -> (Tile<T, { [ROWS, W] }>, Tile<T, { [ROWS, W] }>, Token) {
        let (x, x_tok): (Tile<T, { [ROWS, W] }>, Token) =
            load_part::<T, ROWS, W>(x_ptr, row0, col0, m, n, stride_x, after);
        let (r, r_tok): (Tile<T, { [ROWS, W] }>, Token) =
            load_part::<T, ROWS, W>(r_ptr, row0, col0, m, n, stride_r, after);
        (x, r, join_tokens(&[x_tok, r_tok]))
    }

    /// s = x + residual over the part at (row0, col0): rounded to T and stored into s_ptr after
    /// `after`, returned as stored, in f32, 0 outside (m, n) (the value normalized: y is rms_norm of
    /// the stored residual).
    #[allow(clippy::too_many_arguments)]
    unsafe fn store_sum<T: ElementType, const ROWS: i32, const W: i32>(
        s_ptr: *mut T, x: Tile<T, { [ROWS, W] }>, r: Tile<T, { [ROWS, W] }>, row0: i32, col0: i32, m: i32, n: i32,
        stride_s: i32, after: Token,
    ) -> Tile<f32, { [ROWS, W] }> {
        let xf: Tile<f32, { [ROWS, W] }> = convert_tile(x);
        let rf: Tile<f32, { [ROWS, W] }> = convert_tile(r);
        let s_t: Tile<T, { [ROWS, W] }> = convert_tile(xf + rf);
        store_part::<T, ROWS, W>(s_ptr, s_t, row0, col0, m, n, stride_s, after);
        let inside: Tile<bool, { [ROWS, W] }> = tile_mask::<ROWS, W>(row0, col0, m, n);
        let zero: Tile<f32, { [ROWS, W] }> = constant(0.0f32, shape![ROWS, W]);
        let s_stored: Tile<f32, { [ROWS, W] }> = convert_tile(s_t);
        select(inside, s_stored, zero)
    }

    /// rsqrt(sum_sq / n + eps) per row.
    fn inv_rms<const ROWS: i32>(sum_sq: Tile<f32, { [ROWS] }>, n: i32, eps: f32) -> Tile<f32, { [ROWS] }> {
        let n_scalar: f32 = convert_scalar(n);
        let mean_sq: Tile<f32, { [ROWS] }> =
            divf(sum_sq, broadcast_scalar(n_scalar, shape![ROWS]), rounding::NearestEven, ftz::Disabled);
        rsqrt(mean_sq + broadcast_scalar(eps, shape![ROWS]), ftz::Disabled)
    }

    /// y = s * inv_rms * w over the part at (row0, col0), stored into y_ptr after `after`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn store_normed<T: ElementType, const ROWS: i32, const W: i32>(
        y_ptr: *mut T, s: Tile<f32, { [ROWS, W] }>, inv: Tile<f32, { [ROWS] }>, w: Tile<f32, { [1, W] }>, row0: i32,
        col0: i32, m: i32, n: i32, stride_y: i32, after: Token,
    ) {
        let tile: Shape<{ [ROWS, W] }> = shape![ROWS, W];
        let scale: Tile<f32, { [ROWS, W] }> = inv.reshape(shape![ROWS, 1]).broadcast(tile);
        let y: Tile<T, { [ROWS, W] }> = convert_tile(s * scale * w.broadcast(tile));
        store_part::<T, ROWS, W>(y_ptr, y, row0, col0, m, n, stride_y, after);
    }

    /// s = x + residual and y = rms_norm(s) * w for the ROWS rows from tile block id * ROWS.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused_add_rms_norm_rows<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        y_ptr: *mut T, s_ptr: *mut T, x_ptr: *mut T, r_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_y: i32,
        stride_s: i32, stride_x: i32, stride_r: i32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let (w, w_read): (Tile<f32, { [1, BLOCK] }>, Token) = weight_part::<T, BLOCK>(w_ptr, 0i32, n);
        let (x, r, read): (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, BLOCK] }>, Token) =
            load_pair::<T, ROWS, BLOCK>(x_ptr, r_ptr, row0, 0i32, m, n, stride_x, stride_r, w_read);
        let s: Tile<f32, { [ROWS, BLOCK] }> =
            store_sum::<T, ROWS, BLOCK>(s_ptr, x, r, row0, 0i32, m, n, stride_s, read);
        let inv: Tile<f32, { [ROWS] }> = inv_rms::<ROWS>(reduce_sum(s * s, 1i32), n, eps);
        store_normed::<T, ROWS, BLOCK>(y_ptr, s, inv, w, row0, 0i32, m, n, stride_y, read);
    }

    /// `fused_add_rms_norm_rows` with each row held as a BLOCK-wide body (columns 0 .. BLOCK) and a
    /// TAIL-wide tail (BLOCK .. BLOCK + TAIL), BLOCK < n <= BLOCK + TAIL (ffi.rs): both parts loaded,
    /// then every store after the four loads' joined token.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn fused_add_rms_norm_rows_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        y_ptr: *mut T, s_ptr: *mut T, x_ptr: *mut T, r_ptr: *mut T, w_ptr: *mut T, m: i32, n: i32, stride_y: i32,
        stride_s: i32, stride_x: i32, stride_r: i32, eps: f32,
    ) {
        let row0: i32 = get_tile_block_id().0 * ROWS;
        let (wb, wb_read): (Tile<f32, { [1, BLOCK] }>, Token) = weight_part::<T, BLOCK>(w_ptr, 0i32, n);
        let (wt, wt_read): (Tile<f32, { [1, TAIL] }>, Token) = weight_part::<T, TAIL>(w_ptr, BLOCK, n);
        let (xb, rb, read_b): (Tile<T, { [ROWS, BLOCK] }>, Tile<T, { [ROWS, BLOCK] }>, Token) =
            load_pair::<T, ROWS, BLOCK>(x_ptr, r_ptr, row0, 0i32, m, n, stride_x, stride_r, wb_read);
        let (xt, rt, read_t): (Tile<T, { [ROWS, TAIL] }>, Tile<T, { [ROWS, TAIL] }>, Token) =
            load_pair::<T, ROWS, TAIL>(x_ptr, r_ptr, row0, BLOCK, m, n, stride_x, stride_r, wt_read);
        let read: Token = join_tokens(&[read_b, read_t]);
        let sb: Tile<f32, { [ROWS, BLOCK] }> =
            store_sum::<T, ROWS, BLOCK>(s_ptr, xb, rb, row0, 0i32, m, n, stride_s, read);
        let st: Tile<f32, { [ROWS, TAIL] }> =
            store_sum::<T, ROWS, TAIL>(s_ptr, xt, rt, row0, BLOCK, m, n, stride_s, read);
        let sq_b: Tile<f32, { [ROWS] }> = reduce_sum(sb * sb, 1i32);
        let sq_t: Tile<f32, { [ROWS] }> = reduce_sum(st * st, 1i32);
        let inv: Tile<f32, { [ROWS] }> = inv_rms::<ROWS>(sq_b + sq_t, n, eps);
        store_normed::<T, ROWS, BLOCK>(y_ptr, sb, inv, wb, row0, 0i32, m, n, stride_y, read);
        store_normed::<T, ROWS, TAIL>(y_ptr, st, inv, wt, row0, BLOCK, m, n, stride_y, read);
    }
}
