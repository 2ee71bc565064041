//! Rotary position embedding device code (Llama's and GPT-NeoX's half-split layout), q and k in one
//! launch: per token and head, with x1 = x[:d/2], x2 = x[d/2:] and (c, s) the cos and sin of the
//! token's position,
//!
//! ```text
//! y1 = x1 * c - x2 * s        y2 = x2 * c + x1 * s
//! ```
//!
//! (`sin_sign` = -1 rotates back: the gradient, kernels/rope_backward). Element type T (q, k and the
//! output) is f32, f16 or bf16; the cos/sin table C is T or f32; the arithmetic is f32. The table's
//! row of a token is its position id (POS: read from `pos_ptr`, i32, or i64 read as pairs of i32:
//! WIDE) or its index in the sequence; only the row's first d/2 columns are read (Hugging Face's
//! tables hold the frequencies twice, vLLM's once).
//!
//! `rope_tokens`: one tile block per token (b, s), the token's q heads as one [HQ, HALF] tile per
//! half and its k heads as one [HK, HALF] tile per half, read and written through pointer tiles with
//! a mask of the (heads, d/2) lanes inside, so any head count, d and strides of (b, s, h) work without
//! padding ((b, h, s, d) is a (b, s, h, d) view with other strides). SPLIT: a token's heads over a
//! second grid dim instead, tile block (token, c) rotating q's heads c·HQ.. for c < cq and k's heads
//! (c - cq)·HK.. after them (a decode step's few tokens spread over more SMs: NOTES.md, "A token's
//! heads over several tile blocks").
//! Every tile block reads its heads before writing them and owns them, so the output may lie over q
//! and k where they are adjacent head ranges of one buffer, k's heads hq after q's (a fused QKV
//! projection's); op.py's aliasing rule does not offer that form yet.
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
#[cutile::module]
pub mod rope_device {
    use crate::device_util::views::{load_word, tile_mask, tile_pointers};
    use cutile::core::*;

    /// Loads the [H, HALF] tile `first` elements past `ptr` (rows `stride` apart), lanes outside
    /// `inside` not read, in f32.
    unsafe fn load_f32<E: ElementType, const H: i32, const HALF: i32>(
        ptr: *mut E, first: i32, stride: i32, inside: Tile<bool, { [H, HALF] }>,
    ) -> Tile<f32, { [H, HALF] }> {
        let ptrs: PointerTile<*mut E, { [H, HALF] }> = tile_pointers::<E, H, HALF>(ptr, first, stride);
        let (raw, _tok): (Tile<E, { [H, HALF] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, None, Latency::<3>);
        convert_tile(raw)
    }

    /// Stores `v` (rounded to T) as the [H, HALF] tile `first` elements past `ptr`, lanes outside
    /// `inside` dropped.
    unsafe fn store_t<T: ElementType, const H: i32, const HALF: i32>(
        ptr: *mut T, first: i32, stride: i32, v: Tile<f32, { [H, HALF] }>, inside: Tile<bool, { [H, HALF] }>,
    ) {
        let ptrs: PointerTile<*mut T, { [H, HALF] }> = tile_pointers::<T, H, HALF>(ptr, first, stride);
        let out: Tile<T, { [H, HALF] }> = convert_tile(v);
        let _tok: Token =
            store_ptr_tko(ptrs, out, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, Latency::<3>);
    }

    /// Rotates the `h` heads of one token (`src` + `src0`, heads `src_h` apart) by the cos and sin
    /// of the table row at `row` (sin times `sin_sign`) into `dst` + `dst0` (heads `dst_h` apart);
    /// H >= h and HALF >= half are the tile's extents. The row is loaded as [H, HALF] tiles whose
    /// heads all point at it (a head stride of 0), so each thread loads the lanes its q or k
    /// lanes meet, 16 bytes at a time, where a [1, HALF] row broadcast to the tile was loaded two
    /// bytes at a time (NOTES.md, "Decode").
    #[allow(clippy::too_many_arguments)]
    unsafe fn rotate_heads<T: ElementType, C: ElementType, const H: i32, const HALF: i32>(
        dst: *mut T, dst0: i32, dst_h: i32, src: *mut T, src0: i32, src_h: i32, h: i32, half: i32, cos_ptr: *mut C,
        sin_ptr: *mut C, row: i32, sin_sign: f32,
    ) {
        let inside: Tile<bool, { [H, HALF] }> = tile_mask::<H, HALF>(0i32, 0i32, h, half);
        let x1: Tile<f32, { [H, HALF] }> = load_f32::<T, H, HALF>(src, src0, src_h, inside);
        let x2: Tile<f32, { [H, HALF] }> = load_f32::<T, H, HALF>(src, src0 + half, src_h, inside);
        let c: Tile<f32, { [H, HALF] }> = load_f32::<C, H, HALF>(cos_ptr, row, 0i32, inside);
        let s_raw: Tile<f32, { [H, HALF] }> = load_f32::<C, H, HALF>(sin_ptr, row, 0i32, inside);
        let s: Tile<f32, { [H, HALF] }> = s_raw * broadcast_scalar(sin_sign, shape![H, HALF]);
        store_t::<T, H, HALF>(dst, dst0, dst_h, x1 * c - x2 * s, inside);
        store_t::<T, H, HALF>(dst, dst0 + half, dst_h, x2 * c + x1 * s, inside);
    }

    /// q and k of token id (b, s) = (id / s_len, id % s_len) rotated into oq and ok (SPLIT: the
    /// heads of chunk get_tile_block_id().1 only, cq chunks of q's). Strides in elements: q's, k's
    /// and the output's (b, s, h) (the last dim contiguous), the table's (batch, row) (batch 0 where
    /// one table serves every sequence), the position ids' (b, s). A position id outside
    /// [0, table_rows) fails a device assertion (and is clamped, so nothing past the table is read).
    // cuda_tile_assert! expands to unreachable!() in the host build (so p's assignment is unreachable there).
    #[allow(unreachable_code, unused_mut)]
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn rope_tokens<
        T: ElementType,
        C: ElementType,
        const HQ: i32,
        const HK: i32,
        const HALF: i32,
        const POS: bool,
        const WIDE: bool,
        const SPLIT: bool,
    >(
        oq_ptr: *mut T, ok_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, cos_ptr: *mut C, sin_ptr: *mut C,
        pos_ptr: *mut i32, s_len: i32, hq: i32, hk: i32, half: i32, table_rows: i32, sqb: i32, sqs: i32, sqh: i32,
        skb: i32, sks: i32, skh: i32, sob: i32, sos: i32, soh: i32, scb: i32, scp: i32, spb: i32, sps: i32,
        sin_sign: f32, cq: i32,
    ) {
        let id: i32 = get_tile_block_id().0;
        let b: i32 = id / s_len;
        let s: i32 = id - b * s_len;
        let mut p: i32 = s;
        if POS {
            let at: PointerTile<*mut i32, { [] }> = pointer_to_tile(pos_ptr).offset(b * spb + s * sps);
            let id_p: i32 = tile_to_scalar(load_word(at));
            if WIDE {
                // an i64 id: its high word (little-endian, the next i32) is 0 for ids in [0, 2^31)
                let at_high: PointerTile<*mut i32, { [] }> = pointer_to_tile(pos_ptr).offset(b * spb + s * sps + 1i32);
                let high: i32 = tile_to_scalar(load_word(at_high));
                cuda_tile_assert!(high == 0i32, "rope: a position id is outside [0, 2^31)");
            }
            cuda_tile_assert!(id_p >= 0i32, "rope: a position id is negative");
            cuda_tile_assert!(id_p < table_rows, "rope: a position id is past the cos/sin table's rows");
            p = max(0i32, min(id_p, table_rows - 1i32));
        }
        let row: i32 = b * scb + p * scp;
        let o0: i32 = b * sob + s * sos;
        let (q0, k0): (i32, i32) = (b * sqb + s * sqs, b * skb + s * sks);
        if SPLIT {
            let c: i32 = get_tile_block_id().1;
            if c < cq {
                let h0: i32 = c * HQ;
                let (o, x, n): (i32, i32, i32) = (o0 + h0 * soh, q0 + h0 * sqh, min(HQ, hq - h0));
                rotate_heads::<T, C, HQ, HALF>(oq_ptr, o, soh, q_ptr, x, sqh, n, half, cos_ptr, sin_ptr, row, sin_sign);
            } else {
                let h0: i32 = (c - cq) * HK;
                let (o, x, n): (i32, i32, i32) = (o0 + h0 * soh, k0 + h0 * skh, min(HK, hk - h0));
                rotate_heads::<T, C, HK, HALF>(ok_ptr, o, soh, k_ptr, x, skh, n, half, cos_ptr, sin_ptr, row, sin_sign);
            }
        } else {
            rotate_heads::<T, C, HQ, HALF>(oq_ptr, o0, soh, q_ptr, q0, sqh, hq, half, cos_ptr, sin_ptr, row, sin_sign);
            rotate_heads::<T, C, HK, HALF>(ok_ptr, o0, soh, k_ptr, k0, skh, hk, half, cos_ptr, sin_ptr, row, sin_sign);
        }
    }
}
