//! Attention backward device code, FlashAttention-2 style: the gradients dQ, dK, dV of
//! O = softmax(Q Kᵀ · scale + mask) V from dO, recomputing each score tile from Q and K and the
//! forward's per-row log-sum-exp (attention_fwd with LSE: lse = m + log2(l) in the base-2 units of
//! the scaled scores) instead of storing the S_q x S_kv probabilities:
//!
//! ```text
//! P   = exp2(Q Kᵀ · c - lse)         c = scale · log2(e); the forward's probabilities, sinks included
//! dV  = Pᵀ dO                        (summed over the query heads of a GQA group)
//! dP  = dO Vᵀ
//! Δ   = rowsum(dO ⊙ O)               (= rowsum(P ⊙ dP): O = P V)
//! dS  = P ⊙ (dP - Δ)
//! dQ  = dS K · scale,   dK = dSᵀ Q · scale
//! ```
//!
//! A sink (one more score per row with a zero value row) changes nothing here but lse, which the
//! forward computed with it; its own gradient, -Σ_rows exp(sink - lse) · Δ, is a reduction the
//! caller makes (kernels/attention_backward/op.py).
//!
//! Two entries, launched in this order on one stream:
//!   * `attention_bwd_dq`: one tile block per (batch · head, query tile of BM rows), heaviest first
//!     (the forward's block_coords). It computes Δ of its rows from O and dO and stores it (f32,
//!     (b, h, s_q)) for the second kernel, then walks the key tiles its rows see (the forward's
//!     key_tiles / window_tiles: masked tiles only across the diagonal, the window's start or the
//!     key tail) and stores dQ.
//!   * `attention_bwd_dkdv`: one tile block per (batch · key/value head, key tile of BN rows). It
//!     holds its K and V tiles and walks, for each query head of the GQA group, the query tiles that
//!     see its keys (`query_tiles`), in the transposed frame (Sᵀ = K Qᵀ, [BN, BM]) so that
//!     dV += Pᵀ dO and dK += dSᵀ Q need no transpose of a [BN, BM] tile; it stores dK and dV.
//!
//! Ragged edges need no masks beyond the causal and window ones: the partitions pad with zeros, so
//! a query row past s_q has dO = 0, lse = 0 and Δ = 0 (P is 1 there but meets dO's zero row, and
//! dS = 1 · (0 - 0) = 0), and a key row past s_kv has K = V = 0 (its dK, dV rows are not stored;
//! in dQ its dS column meets K's zero row). A row that saw no key has lse = +inf: P = 0.
//!
//! `unchecked_accesses`: the grids are tiles_m · b · h and tiles_n · b · h_kv; key and query tile
//! loops stop at the counts of key_tiles and query_tiles; kv head head / group < h_kv because the
//! launcher checked h = h_kv · group.
#[cutile::module]
pub mod attention_backward_device {
    use crate::attention::kernel::attention_device::{
        bhsd_view, block_coords, key_tiles, lse_view, visible_keys, window_tiles,
    };
    use cutile::core::*;

    /// For key tile `nt` of BN keys, the query tiles of BM rows that see any of its keys, as
    /// (lo, full_lo, full_hi, hi) with lo <= full_lo <= full_hi <= hi <= ceil(s_q / BM): tiles
    /// [full_lo, full_hi) see all its keys (no mask), [lo, full_lo) and [full_hi, hi) some. Query i
    /// sees key j iff j <= i + diag and, with WINDOW, j > i + diag - window; so the first query
    /// to see the tile's first key is nt · BN - diag, and with a window the last to see its last
    /// key is (nt + 1) · BN - 2 - diag + window. op.py's `query_tiles` is the same arithmetic.
    pub fn query_tiles<const BM: i32, const BN: i32, const WINDOW: bool>(
        nt: i32, sq: i32, diag: i32, window: i32,
    ) -> (i32, i32, i32, i32) {
        let tiles_m: i32 = (sq + BM - 1) / BM;
        let first_q: i32 = nt * BN - diag;
        let lo_tile: i32 = if first_q > 0 { first_q / BM } else { 0 };
        let lo: i32 = if lo_tile < tiles_m { lo_tile } else { tiles_m };
        let mut hi: i32 = tiles_m;
        if WINDOW {
            let last_q: i32 = (nt + 1) * BN - 2 - diag + window;
            let end: i32 = if last_q >= 0 { last_q / BM + 1 } else { 0 };
            let end_lo: i32 = if end > lo { end } else { lo };
            hi = if end_lo < tiles_m { end_lo } else { tiles_m };
        }
        // Every row of query tile mt sees the tile's last key from mt · BM >= (nt + 1) · BN - 1 - diag.
        let full_first: i32 = (nt + 1) * BN - 1 - diag;
        let fl: i32 = if full_first > 0 { (full_first + BM - 1) / BM } else { 0 };
        let fl_lo: i32 = if fl > lo { fl } else { lo };
        let full_lo: i32 = if fl_lo < hi { fl_lo } else { hi };
        let mut full_hi: i32 = hi;
        if WINDOW {
            // ... and with a window its last row the tile's first key while (mt + 1) · BM <= nt · BN - diag + window.
            let x: i32 = nt * BN - diag + window;
            let fh: i32 = if x > 0 { x / BM } else { 0 };
            let fh_hi: i32 = if fh < hi { fh } else { hi };
            full_hi = if fh_hi > full_lo { fh_hi } else { full_lo };
        }
        (lo, full_lo, full_hi, hi)
    }

    /// Which (key, query) pairs of a [BN, BM] tile in the transposed frame are visible: row r is
    /// key k0 + r, column c query q0 + c; key <= query + diag and, with WINDOW, key > query + diag
    /// - window.
    fn visible_queries<const BN: i32, const BM: i32, const WINDOW: bool>(
        keys: Tile<i32, { [BN, BM] }>, queries: Tile<i32, { [BN, BM] }>, k0: i32, q0: i32, diag: i32, window: i32,
    ) -> Tile<bool, { [BN, BM] }> {
        let tile: Shape<{ [BN, BM] }> = shape![BN, BM];
        let diag_off: Tile<i32, { [BN, BM] }> = broadcast_scalar(q0 + diag - k0, tile);
        let mut visible: Tile<bool, { [BN, BM] }> = le_tile(keys, queries + diag_off);
        if WINDOW {
            let start: Tile<i32, { [BN, BM] }> = broadcast_scalar(q0 + diag - window + 1 - k0, tile);
            visible = andi(visible, ge_tile(keys, queries + start));
        }
        visible
    }

    /// One key tile of the dQ kernel: P, dS of the query tile's rows against keys k0 .. k0 + BN,
    /// and dQ's accumulator plus dS K. MASK hides the pairs visible_keys hides (`rows`, `cols`:
    /// the tile's row and column indices; query rows start at `row0`).
    #[allow(clippy::too_many_arguments)]
    fn dq_step<T: ElementType, const BM: i32, const BN: i32, const D: i32, const MASK: bool, const WINDOW: bool>(
        q: Tile<T, { [BM, D] }>, d_o: Tile<T, { [BM, D] }>, k: Tile<T, { [BN, D] }>, v: Tile<T, { [BN, D] }>,
        neg_lse: Tile<f32, { [BM, BN] }>, delta: Tile<f32, { [BM, BN] }>, c: f32, rows: Tile<i32, { [BM, BN] }>,
        cols: Tile<i32, { [BM, BN] }>, row0: i32, k0: i32, skv: i32, diag: i32, window: i32,
        acc: Tile<f32, { [BM, D] }>,
    ) -> Tile<f32, { [BM, D] }> {
        let tile: Shape<{ [BM, BN] }> = shape![BM, BN];
        let zero: Tile<f32, { [BM, BN] }> = constant(0.0f32, tile);
        let s: Tile<f32, { [BM, BN] }> = mma(q, k.transpose(), zero);
        let c_tile: Tile<f32, { [BM, BN] }> = broadcast_scalar(c, tile);
        let mut p: Tile<f32, { [BM, BN] }> =
            exp2(fma(s, c_tile, neg_lse, rounding::NearestEven, ftz::Enabled), ftz::Enabled);
        if MASK {
            p = select(visible_keys::<BM, BN, WINDOW>(rows, cols, row0, k0, skv, diag, window), p, zero);
        }
        let dp: Tile<f32, { [BM, BN] }> = mma(d_o, v.transpose(), zero);
        let ds: Tile<T, { [BM, BN] }> = convert_tile(p * (dp - delta));
        mma(ds, k, acc)
    }

    /// dQ (and Δ); grid = ceil(s_q / BM) · b · h tile blocks. Strides (sb, sh, ss) in elements of
    /// dq, q, k, v, o, dout in that order; delta and lse are contiguous f32 (b, h, s_q).
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_bwd_dq<T: ElementType, const BM: i32, const BN: i32, const D: i32, const WINDOW: bool>(
        dq_ptr: *mut T, delta_ptr: *mut f32, lse_ptr: *mut f32, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T,
        o_ptr: *mut T, do_ptr: *mut T, b: i32, h: i32, hkv: i32, sq: i32, skv: i32, dq_sb: i32, dq_sh: i32, dq_ss: i32,
        q_sb: i32, q_sh: i32, q_ss: i32, k_sb: i32, k_sh: i32, k_ss: i32, v_sb: i32, v_sh: i32, v_ss: i32, o_sb: i32,
        o_sh: i32, o_ss: i32, do_sb: i32, do_sh: i32, do_ss: i32, diag: i32, window: i32, qk_scale_log2: f32,
        scale: f32,
    ) {
        let tok: Token = new_token_unordered();
        let q_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(q_ptr, b, h, sq, q_sb, q_sh, q_ss, tok) };
        let o_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(o_ptr, b, h, sq, o_sb, o_sh, o_ss, tok) };
        let do_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(do_ptr, b, h, sq, do_sb, do_sh, do_ss, tok) };
        let dq_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(dq_ptr, b, h, sq, dq_sb, dq_sh, dq_ss, tok) };
        let k_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(k_ptr, b, hkv, skv, k_sb, k_sh, k_ss, tok) };
        let v_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(v_ptr, b, hkv, skv, v_sb, v_sh, v_ss, tok) };
        let lse_v: Tensor<f32, { [-1, -1, -1] }> = unsafe { lse_view(lse_ptr, b, h, sq, tok) };
        let delta_v: Tensor<f32, { [-1, -1, -1] }> = unsafe { lse_view(delta_ptr, b, h, sq, tok) };
        let rows_part: Partition<T, { [1, 1, BM, D] }> = q_view.partition(shape![1, 1, BM, D]);
        let o_part: Partition<T, { [1, 1, BM, D] }> = o_view.partition(shape![1, 1, BM, D]);
        let do_part: Partition<T, { [1, 1, BM, D] }> = do_view.partition(shape![1, 1, BM, D]);
        let k_part: Partition<T, { [1, 1, BN, D] }> = k_view.partition(shape![1, 1, BN, D]);
        let v_part: Partition<T, { [1, 1, BN, D] }> = v_view.partition(shape![1, 1, BN, D]);
        let lse_part: Partition<f32, { [1, 1, BM] }> = lse_v.partition(shape![1, 1, BM]);
        let mut delta_part: PartitionMut<f32, { [1, 1, BM] }> = unsafe { delta_v.partition_full_mut(shape![1, 1, BM]) };
        let mut dq_part: PartitionMut<T, { [1, 1, BM, D] }> =
            unsafe { dq_view.partition_full_mut(shape![1, 1, BM, D]) };

        let tiles_m: i32 = (sq + BM - 1) / BM;
        let (batch, head, mt) = block_coords(get_tile_block_id().0, tiles_m, h);
        let kv_head: i32 = head / (h / hkv);
        let (full, visited) = key_tiles::<BM, BN>(mt, skv, diag);
        let (first, lo, hi) =
            if WINDOW { window_tiles::<BM, BN>(mt, diag, window, full, visited) } else { (0i32, 0i32, full) };

        let q: Tile<T, { [BM, D] }> = rows_part.load([batch, head, mt, 0i32]).reshape(shape![BM, D]);
        let d_o: Tile<T, { [BM, D] }> = do_part.load([batch, head, mt, 0i32]).reshape(shape![BM, D]);
        let o: Tile<T, { [BM, D] }> = o_part.load([batch, head, mt, 0i32]).reshape(shape![BM, D]);
        let o_f: Tile<f32, { [BM, D] }> = convert_tile(o);
        let do_f: Tile<f32, { [BM, D] }> = convert_tile(d_o);
        let delta_rows: Tile<f32, { [BM] }> = reduce_sum(o_f * do_f, 1i32);
        delta_part.store(delta_rows.reshape(shape![1, 1, BM]), [batch, head, mt]);
        let lse_rows: Tile<f32, { [BM] }> = lse_part.load([batch, head, mt]).reshape(shape![BM]);

        let tile: Shape<{ [BM, BN] }> = shape![BM, BN];
        let neg_lse: Tile<f32, { [BM, BN] }> = negf(lse_rows.reshape(shape![BM, 1]).broadcast(tile));
        let delta: Tile<f32, { [BM, BN] }> = delta_rows.reshape(shape![BM, 1]).broadcast(tile);
        let row_ids: Tile<i32, { [BM] }> = iota(shape![BM]);
        let rows: Tile<i32, { [BM, BN] }> = row_ids.reshape(shape![BM, 1]).broadcast(tile);
        let col_ids: Tile<i32, { [BN] }> = iota(shape![BN]);
        let cols: Tile<i32, { [BM, BN] }> = col_ids.reshape(shape![1, BN]).broadcast(tile);
        let row0: i32 = mt * BM;
        let mut acc: Tile<f32, { [BM, D] }> = constant(0.0f32, shape![BM, D]);
        // Masked key tiles across the window's start, unmasked ones, then those across the diagonal
        // or the key tail (the forward's order and ranges).
        if WINDOW {
            // (without a window the range is empty: first = lo = 0)
            for j in first..lo {
                let k: Tile<T, { [BN, D] }> =
                    k_part.load_pipelined::<2>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
                let v: Tile<T, { [BN, D] }> =
                    v_part.load_pipelined::<2>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
                acc = dq_step::<T, BM, BN, D, true, WINDOW>(
                    q,
                    d_o,
                    k,
                    v,
                    neg_lse,
                    delta,
                    qk_scale_log2,
                    rows,
                    cols,
                    row0,
                    j * BN,
                    skv,
                    diag,
                    window,
                    acc,
                );
            }
        }
        for j in lo..hi {
            let k: Tile<T, { [BN, D] }> = k_part.load_pipelined::<2>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let v: Tile<T, { [BN, D] }> = v_part.load_pipelined::<2>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            acc = dq_step::<T, BM, BN, D, false, WINDOW>(
                q,
                d_o,
                k,
                v,
                neg_lse,
                delta,
                qk_scale_log2,
                rows,
                cols,
                row0,
                j * BN,
                skv,
                diag,
                window,
                acc,
            );
        }
        for j in hi..visited {
            let k: Tile<T, { [BN, D] }> = k_part.load_pipelined::<2>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let v: Tile<T, { [BN, D] }> = v_part.load_pipelined::<2>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            acc = dq_step::<T, BM, BN, D, true, WINDOW>(
                q,
                d_o,
                k,
                v,
                neg_lse,
                delta,
                qk_scale_log2,
                rows,
                cols,
                row0,
                j * BN,
                skv,
                diag,
                window,
                acc,
            );
        }
        let scale_t: Tile<f32, { [BM, D] }> = broadcast_scalar(scale, shape![BM, D]);
        let dq: Tile<T, { [BM, D] }> = convert_tile(acc * scale_t);
        dq_part.store(dq.reshape(shape![1, 1, BM, D]), [batch, head, mt, 0i32]);
    }

    /// One query tile of the dK/dV kernel, in the transposed frame: Pᵀ and dSᵀ ([BN, BM]) of the key
    /// tile's rows against queries q0 .. q0 + BM; returns dK and dV's accumulators plus dSᵀ Q and
    /// Pᵀ dO. MASK hides the pairs visible_queries hides.
    #[allow(clippy::too_many_arguments)]
    fn dkdv_step<T: ElementType, const BN: i32, const BM: i32, const D: i32, const MASK: bool, const WINDOW: bool>(
        k: Tile<T, { [BN, D] }>, v: Tile<T, { [BN, D] }>, q: Tile<T, { [BM, D] }>, d_o: Tile<T, { [BM, D] }>,
        lse: Tile<f32, { [BM] }>, delta: Tile<f32, { [BM] }>, c: f32, keys: Tile<i32, { [BN, BM] }>,
        queries: Tile<i32, { [BN, BM] }>, k0: i32, q0: i32, diag: i32, window: i32, dk: Tile<f32, { [BN, D] }>,
        dv: Tile<f32, { [BN, D] }>,
    ) -> (Tile<f32, { [BN, D] }>, Tile<f32, { [BN, D] }>) {
        let tile: Shape<{ [BN, BM] }> = shape![BN, BM];
        let zero: Tile<f32, { [BN, BM] }> = constant(0.0f32, tile);
        let st: Tile<f32, { [BN, BM] }> = mma(k, q.transpose(), zero);
        let c_tile: Tile<f32, { [BN, BM] }> = broadcast_scalar(c, tile);
        let neg_lse: Tile<f32, { [BN, BM] }> = negf(lse.reshape(shape![1, BM]).broadcast(tile));
        let mut pt: Tile<f32, { [BN, BM] }> =
            exp2(fma(st, c_tile, neg_lse, rounding::NearestEven, ftz::Enabled), ftz::Enabled);
        if MASK {
            pt = select(visible_queries::<BN, BM, WINDOW>(keys, queries, k0, q0, diag, window), pt, zero);
        }
        let pt_t: Tile<T, { [BN, BM] }> = convert_tile(pt);
        let dv_new: Tile<f32, { [BN, D] }> = mma(pt_t, d_o, dv);
        let dpt: Tile<f32, { [BN, BM] }> = mma(v, d_o.transpose(), zero);
        let delta_t: Tile<f32, { [BN, BM] }> = delta.reshape(shape![1, BM]).broadcast(tile);
        let dst: Tile<T, { [BN, BM] }> = convert_tile(pt * (dpt - delta_t));
        (mma(dst, q, dk), dv_new)
    }

    /// dK and dV; grid = ceil(s_kv / BN) · b · h_kv tile blocks, after attention_bwd_dq (which wrote
    /// Δ). Strides (sb, sh, ss) in elements of dk, dv, q, k, v, dout in that order.
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_bwd_dkdv<T: ElementType, const BN: i32, const BM: i32, const D: i32, const WINDOW: bool>(
        dk_ptr: *mut T, dv_ptr: *mut T, delta_ptr: *mut f32, lse_ptr: *mut f32, q_ptr: *mut T, k_ptr: *mut T,
        v_ptr: *mut T, do_ptr: *mut T, b: i32, h: i32, hkv: i32, sq: i32, skv: i32, dk_sb: i32, dk_sh: i32, dk_ss: i32,
        dv_sb: i32, dv_sh: i32, dv_ss: i32, q_sb: i32, q_sh: i32, q_ss: i32, k_sb: i32, k_sh: i32, k_ss: i32,
        v_sb: i32, v_sh: i32, v_ss: i32, do_sb: i32, do_sh: i32, do_ss: i32, diag: i32, window: i32,
        qk_scale_log2: f32, scale: f32,
    ) {
        let tok: Token = new_token_unordered();
        let q_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(q_ptr, b, h, sq, q_sb, q_sh, q_ss, tok) };
        let do_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(do_ptr, b, h, sq, do_sb, do_sh, do_ss, tok) };
        let k_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(k_ptr, b, hkv, skv, k_sb, k_sh, k_ss, tok) };
        let v_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(v_ptr, b, hkv, skv, v_sb, v_sh, v_ss, tok) };
        let dk_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(dk_ptr, b, hkv, skv, dk_sb, dk_sh, dk_ss, tok) };
        let dv_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(dv_ptr, b, hkv, skv, dv_sb, dv_sh, dv_ss, tok) };
        let lse_v: Tensor<f32, { [-1, -1, -1] }> = unsafe { lse_view(lse_ptr, b, h, sq, tok) };
        let delta_v: Tensor<f32, { [-1, -1, -1] }> = unsafe { lse_view(delta_ptr, b, h, sq, tok) };
        let q_part: Partition<T, { [1, 1, BM, D] }> = q_view.partition(shape![1, 1, BM, D]);
        let do_part: Partition<T, { [1, 1, BM, D] }> = do_view.partition(shape![1, 1, BM, D]);
        let k_part: Partition<T, { [1, 1, BN, D] }> = k_view.partition(shape![1, 1, BN, D]);
        let v_part: Partition<T, { [1, 1, BN, D] }> = v_view.partition(shape![1, 1, BN, D]);
        let lse_part: Partition<f32, { [1, 1, BM] }> = lse_v.partition(shape![1, 1, BM]);
        let delta_part: Partition<f32, { [1, 1, BM] }> = delta_v.partition(shape![1, 1, BM]);
        let mut dk_part: PartitionMut<T, { [1, 1, BN, D] }> =
            unsafe { dk_view.partition_full_mut(shape![1, 1, BN, D]) };
        let mut dv_part: PartitionMut<T, { [1, 1, BN, D] }> =
            unsafe { dv_view.partition_full_mut(shape![1, 1, BN, D]) };

        // The key tiles of one (batch, key/value head) are consecutive ids, lowest (under a causal
        // mask the most query tiles see it) first.
        let tiles_n: i32 = (skv + BN - 1) / BN;
        let bid: i32 = get_tile_block_id().0;
        let bkh: i32 = bid / tiles_n;
        let nt: i32 = bid % tiles_n;
        let batch: i32 = bkh / hkv;
        let kv_head: i32 = bkh % hkv;
        let group: i32 = h / hkv;
        let (lo, full_lo, full_hi, hi) = query_tiles::<BM, BN, WINDOW>(nt, sq, diag, window);

        let k: Tile<T, { [BN, D] }> = k_part.load([batch, kv_head, nt, 0i32]).reshape(shape![BN, D]);
        let v: Tile<T, { [BN, D] }> = v_part.load([batch, kv_head, nt, 0i32]).reshape(shape![BN, D]);
        let tile: Shape<{ [BN, BM] }> = shape![BN, BM];
        let key_ids: Tile<i32, { [BN] }> = iota(shape![BN]);
        let keys: Tile<i32, { [BN, BM] }> = key_ids.reshape(shape![BN, 1]).broadcast(tile);
        let query_ids: Tile<i32, { [BM] }> = iota(shape![BM]);
        let queries: Tile<i32, { [BN, BM] }> = query_ids.reshape(shape![1, BM]).broadcast(tile);
        let k0: i32 = nt * BN;
        let mut dk: Tile<f32, { [BN, D] }> = constant(0.0f32, shape![BN, D]);
        let mut dv: Tile<f32, { [BN, D] }> = constant(0.0f32, shape![BN, D]);
        for g in 0i32..group {
            let head: i32 = kv_head * group + g;
            // Query tiles across the diagonal (masked), seeing every key (unmasked), across the window's start.
            for mt in lo..full_lo {
                let q: Tile<T, { [BM, D] }> =
                    q_part.load_pipelined::<2>([batch, head, mt, 0i32]).reshape(shape![BM, D]);
                let d_o: Tile<T, { [BM, D] }> =
                    do_part.load_pipelined::<2>([batch, head, mt, 0i32]).reshape(shape![BM, D]);
                let lse: Tile<f32, { [BM] }> = lse_part.load([batch, head, mt]).reshape(shape![BM]);
                let delta: Tile<f32, { [BM] }> = delta_part.load([batch, head, mt]).reshape(shape![BM]);
                let (dk_new, dv_new) = dkdv_step::<T, BN, BM, D, true, WINDOW>(
                    k,
                    v,
                    q,
                    d_o,
                    lse,
                    delta,
                    qk_scale_log2,
                    keys,
                    queries,
                    k0,
                    mt * BM,
                    diag,
                    window,
                    dk,
                    dv,
                );
                dk = dk_new;
                dv = dv_new;
            }
            for mt in full_lo..full_hi {
                let q: Tile<T, { [BM, D] }> =
                    q_part.load_pipelined::<2>([batch, head, mt, 0i32]).reshape(shape![BM, D]);
                let d_o: Tile<T, { [BM, D] }> =
                    do_part.load_pipelined::<2>([batch, head, mt, 0i32]).reshape(shape![BM, D]);
                let lse: Tile<f32, { [BM] }> = lse_part.load([batch, head, mt]).reshape(shape![BM]);
                let delta: Tile<f32, { [BM] }> = delta_part.load([batch, head, mt]).reshape(shape![BM]);
                let (dk_new, dv_new) = dkdv_step::<T, BN, BM, D, false, WINDOW>(
                    k,
                    v,
                    q,
                    d_o,
                    lse,
                    delta,
                    qk_scale_log2,
                    keys,
                    queries,
                    k0,
                    mt * BM,
                    diag,
                    window,
                    dk,
                    dv,
                );
                dk = dk_new;
                dv = dv_new;
            }
            for mt in full_hi..hi {
                let q: Tile<T, { [BM, D] }> =
                    q_part.load_pipelined::<2>([batch, head, mt, 0i32]).reshape(shape![BM, D]);
                let d_o: Tile<T, { [BM, D] }> =
                    do_part.load_pipelined::<2>([batch, head, mt, 0i32]).reshape(shape![BM, D]);
                let lse: Tile<f32, { [BM] }> = lse_part.load([batch, head, mt]).reshape(shape![BM]);
                let delta: Tile<f32, { [BM] }> = delta_part.load([batch, head, mt]).reshape(shape![BM]);
                let (dk_new, dv_new) = dkdv_step::<T, BN, BM, D, true, WINDOW>(
                    k,
                    v,
                    q,
                    d_o,
                    lse,
                    delta,
                    qk_scale_log2,
                    keys,
                    queries,
                    k0,
                    mt * BM,
                    diag,
                    window,
                    dk,
                    dv,
                );
                dk = dk_new;
                dv = dv_new;
            }
        }
        let scale_t: Tile<f32, { [BN, D] }> = broadcast_scalar(scale, shape![BN, D]);
        let dk_out: Tile<T, { [BN, D] }> = convert_tile(dk * scale_t);
        let dv_out: Tile<T, { [BN, D] }> = convert_tile(dv);
        dk_part.store(dk_out.reshape(shape![1, 1, BN, D]), [batch, kv_head, nt, 0i32]);
        dv_part.store(dv_out.reshape(shape![1, 1, BN, D]), [batch, kv_head, nt, 0i32]);
    }
}
