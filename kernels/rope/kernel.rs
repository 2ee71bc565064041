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
    /// `inside` not read, in f32, and the load's token.
    unsafe fn load_f32<E: ElementType, const H: i32, const HALF: i32>(
        ptr: *mut E, first: i32, stride: i32, inside: Tile<bool, { [H, HALF] }>,
    ) -> (Tile<f32, { [H, HALF] }>, Token) {
        let ptrs: PointerTile<*mut E, { [H, HALF] }> = tile_pointers::<E, H, HALF>(ptr, first, stride);
        let (raw, tok): (Tile<E, { [H, HALF] }>, Token) =
            load_ptr_tko(ptrs, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, None, Latency::<3>);
        (convert_tile(raw), tok)
    }

    /// Stores `v` (rounded to T) as the [H, HALF] tile `first` elements past `ptr`, lanes outside
    /// `inside` dropped; AFTER: ordered after the memory operations of `after` (else `after` is not
    /// used and the store takes no token).
    unsafe fn store_t<T: ElementType, const H: i32, const HALF: i32, const AFTER: bool>(
        ptr: *mut T, first: i32, stride: i32, v: Tile<f32, { [H, HALF] }>, inside: Tile<bool, { [H, HALF] }>,
        after: Token,
    ) {
        let ptrs: PointerTile<*mut T, { [H, HALF] }> = tile_pointers::<T, H, HALF>(ptr, first, stride);
        let out: Tile<T, { [H, HALF] }> = convert_tile(v);
        if AFTER {
            let _tok: Token = store_ptr_tko(
                ptrs,
                out,
                ordering::Weak,
                None::<scope::TileBlock>,
                Some(inside),
                Some(after),
                Latency::<3>,
            );
        } else {
            let _tok: Token =
                store_ptr_tko(ptrs, out, ordering::Weak, None::<scope::TileBlock>, Some(inside), None, Latency::<3>);
        }
    }

    /// One token's `h` heads (`src` + `src0`, heads `src_h` apart) as their two halves in f32, and
    /// the cos and sin of the table row at `row` (sin times `sin_sign`); H >= h and HALF >= half are
    /// the tile's extents, `inside` the (h, half) lanes. The row is loaded as [H, HALF] tiles whose
    /// heads all point at it (a head stride of 0), so each thread loads the lanes its q or k lanes
    /// meet, 16 bytes at a time, where a [1, HALF] row broadcast to the tile was loaded two bytes at a
    /// time (NOTES.md, "Decode"). The last value is the four loads' tokens joined.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    unsafe fn load_heads<T: ElementType, C: ElementType, const H: i32, const HALF: i32>(
        src: *mut T, src0: i32, src_h: i32, half: i32, cos_ptr: *mut C, sin_ptr: *mut C, row: i32, sin_sign: f32,
        inside: Tile<bool, { [H, HALF] }>,
    ) -> (Tile<f32, { [H, HALF] }>, Tile<f32, { [H, HALF] }>, Tile<f32, { [H, HALF] }>, Tile<f32, { [H, HALF] }>, Token)
    {
        let (x1, t1): (Tile<f32, { [H, HALF] }>, Token) = load_f32::<T, H, HALF>(src, src0, src_h, inside);
        let (x2, t2): (Tile<f32, { [H, HALF] }>, Token) = load_f32::<T, H, HALF>(src, src0 + half, src_h, inside);
        let (c, tc): (Tile<f32, { [H, HALF] }>, Token) = load_f32::<C, H, HALF>(cos_ptr, row, 0i32, inside);
        let (s_raw, ts): (Tile<f32, { [H, HALF] }>, Token) = load_f32::<C, H, HALF>(sin_ptr, row, 0i32, inside);
        (x1, x2, c, s_raw * broadcast_scalar(sin_sign, shape![H, HALF]), join_tokens(&[t1, t2, tc, ts]))
    }

    /// Stores heads loaded by `load_heads` (halves x1 and x2, cos c, sin s) rotated into `dst` +
    /// `dst0` (heads `dst_h` apart), after `after` with AFTER: y1 = x1 c - x2 s, y2 = x2 c + x1 s.
    #[allow(clippy::too_many_arguments)]
    unsafe fn store_rotated<T: ElementType, const H: i32, const HALF: i32, const AFTER: bool>(
        dst: *mut T, dst0: i32, dst_h: i32, half: i32, x1: Tile<f32, { [H, HALF] }>, x2: Tile<f32, { [H, HALF] }>,
        c: Tile<f32, { [H, HALF] }>, s: Tile<f32, { [H, HALF] }>, inside: Tile<bool, { [H, HALF] }>, after: Token,
    ) {
        store_t::<T, H, HALF, AFTER>(dst, dst0, dst_h, x1 * c - x2 * s, inside, after);
        store_t::<T, H, HALF, AFTER>(dst, dst0 + half, dst_h, x2 * c + x1 * s, inside, after);
    }

    /// Rotates `h` heads of one token from `src` + `src0` into `dst` + `dst0` (`load_heads`, then
    /// `store_rotated`, the stores without a token: the form timed at prefill, where a token on them
    /// let tileiras hoist the next call's loads above them, more registers live).
    #[allow(clippy::too_many_arguments)]
    unsafe fn rotate_heads<T: ElementType, C: ElementType, const H: i32, const HALF: i32>(
        dst: *mut T, dst0: i32, dst_h: i32, src: *mut T, src0: i32, src_h: i32, h: i32, half: i32, cos_ptr: *mut C,
        sin_ptr: *mut C, row: i32, sin_sign: f32,
    ) {
        let inside: Tile<bool, { [H, HALF] }> = tile_mask::<H, HALF>(0i32, 0i32, h, half);
        let (x1, x2, c, s, read) =
            load_heads::<T, C, H, HALF>(src, src0, src_h, half, cos_ptr, sin_ptr, row, sin_sign, inside);
        store_rotated::<T, H, HALF, false>(dst, dst0, dst_h, half, x1, x2, c, s, inside, read);
    }

    /// q and k of token id (b, s) = (id / s_len, id % s_len) rotated into oq and ok (SPLIT: the
    /// heads of chunk get_tile_block_id().1 only, cq chunks of q's; EARLY, a whole token: all its
    /// loads before its stores). Strides in elements: q's, k's
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
        const EARLY: bool,
    >(
        oq_ptr: *mut T, ok_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, cos_ptr: *mut C, sin_ptr: *mut C,
        pos_ptr: *mut i32, s_len: i32, hq: i32, hk: i32, half: i32, table_rows: i32, sqb: i32, sqs: i32, sqh: i32,
        skb: i32, sks: i32, skh: i32, sob: i32, sos: i32, soh: i32, scb: i32, scp: i32, spb: i32, sps: i32,
        sin_sign: f32, cq: i32,
    ) {
        let id: i32 = get_tile_block_id().0;
        // (b, s) of the token; a decode step (s_len 1) skips the division, a dependent chain of ~30
        // instructions before the first address
        let mut b: i32 = id;
        let mut s: i32 = 0i32;
        if s_len != 1i32 {
            b = id / s_len;
            s = id - b * s_len;
        }
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
        } else if EARLY {
            // a decode step's few tokens: every store after every load (their tokens joined), so a
            // token's q, k and table loads leave together; unordered, tileiras placed k's loads after
            // q's stores, a second DRAM round trip a token (NOTES.md, "k's loads after q's stores")
            let in_q: Tile<bool, { [HQ, HALF] }> = tile_mask::<HQ, HALF>(0i32, 0i32, hq, half);
            let in_k: Tile<bool, { [HK, HALF] }> = tile_mask::<HK, HALF>(0i32, 0i32, hk, half);
            let (q1, q2, qc, qs, q_read) =
                load_heads::<T, C, HQ, HALF>(q_ptr, q0, sqh, half, cos_ptr, sin_ptr, row, sin_sign, in_q);
            let (k1, k2, kc, ks, k_read) =
                load_heads::<T, C, HK, HALF>(k_ptr, k0, skh, half, cos_ptr, sin_ptr, row, sin_sign, in_k);
            let read: Token = join_tokens(&[q_read, k_read]);
            store_rotated::<T, HQ, HALF, true>(oq_ptr, o0, soh, half, q1, q2, qc, qs, in_q, read);
            store_rotated::<T, HK, HALF, true>(ok_ptr, o0, soh, half, k1, k2, kc, ks, in_k, read);
        } else {
            // many tokens: q's heads, then k's (fewer registers live; tile blocks enough to hide the
            // second round trip)
            rotate_heads::<T, C, HQ, HALF>(oq_ptr, o0, soh, q_ptr, q0, sqh, hq, half, cos_ptr, sin_ptr, row, sin_sign);
            rotate_heads::<T, C, HK, HALF>(ok_ptr, o0, soh, k_ptr, k0, skh, hk, half, cos_ptr, sin_ptr, row, sin_sign);
        }
    }
}
