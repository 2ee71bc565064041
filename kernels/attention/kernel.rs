//! Attention device code: the forward of O = softmax(Q Kᵀ · scale + mask) V for every (batch, head),
//! fused in one kernel with an online softmax (FlashAttention-style): the S_q x S_kv scores never
//! leave the tile block.
//!
//! Q (b, h, s_q, D), K and V (b, h_kv, s_kv, D), O (b, h, s_q, D); element type T (f16 or bf16).
//! Each tensor is a 4-D view of its storage with its own strides for b, h and s and a contiguous
//! last dim, so a (b, h, s, d) tensor and the (b, s, h, d) layout's `.transpose(1, 2)` view are read
//! in place. Query head `head` reads key/value head `head / group` (group = h / h_kv: GQA, MQA when
//! h_kv = 1). D (64 or 128) is a const generic: the whole head dim is one tile.
//!
//! One tile block per (batch · head, query tile of BM rows). It loads its Q tile once, then walks
//! the key/value tiles of BN rows: S = Q Kᵀ on the tensor cores (f32), with K's [D, BN] tile read
//! through a permuted partition of the K view (tile axis 2 is the view's axis 3), so K lands
//! transposed with no copy; then the running row max m and sum l (base 2: log2(e) is folded into
//! `qk_scale_log2`, so p = exp2(s · c - m)), the accumulator rescaled by exp2(m_old - m_new), and
//! acc += P V with P rounded to T for the MMA. Finally O = acc / l, rounded to T.
//!
//! Masks. Query row i sees key j when j < s_kv and j <= i + diag: the launcher passes
//! diag = s_kv - s_q for a causal mask aligned to the end of the keys (the last query sees every
//! key: decode and chunked prefill), and diag = s_kv (never binding) for a full mask. Key tiles
//! that no row of the query tile can see are not visited (the loop stops at the diagonal); tiles
//! every row sees in full run without a mask; only the tiles that cross the diagonal or the key
//! tail (s_kv not a multiple of BN) compare indices, setting the hidden scores to -inf. m starts at
//! the lowest finite f32, not -inf, so a row whose keys are all hidden so far rescales by
//! exp2(-inf) = 0 instead of NaN. A row that sees no key at all (causal with s_q > s_kv) ends with
//! l = 0 and acc = 0 and gets O = 0; every other row has l >= 1 (its largest score contributes
//! exp2(0)), so dividing by max(l, 1) changes nothing else.
//!
//! Sinks and a window, const generics (without them the program is the one above, unchanged).
//! SINKS: the head's sink logit (element type S, q's or f32) is one more score of every row whose
//! value row is zero: m and l start at max(sink · log2(e), lowest) and exp2(sink · log2(e) - m).
//! WINDOW (causal only): row i also hides key j <= i + diag - window; the key tiles before the
//! first row's window are not visited, the ones across the window's start are masked like the
//! diagonal ones (`window_tiles`), so the work is O(s_q · window).
//!
//! LSE (the training forward, `cutile_attention_lse`): each row's log-sum-exp m + log2(l) in the
//! base-2 units of the scaled scores (sinks included; +inf where l = 0) is stored to a (b, h, s_q)
//! f32 view for the backward (kernels/attention_backward), which recomputes P = exp2(s · c - lse).
//!
//! Ragged edges need no other masks: the partitions pad with zeros, so Q rows past s_q compute
//! rows that the store drops (stores outside the view are not written), and K/V rows past s_kv are
//! zeros whose scores the tail mask hides (P = 0 there, meeting V's zero rows).
//!
//! `unchecked_accesses`: the grid is tiles_m · b · h and each id maps to bh < b · h and a query
//! tile < tiles_m = ceil(s_q / BM); key tiles stop at ceil(min(s_kv, ...) / BN); kv head
//! head / group < h_kv because the launcher checked h = h_kv · group; the sink of query head
//! `head` < h, the sinks view's extent; window tiles lie in [0, visited).
#[cutile::module]
pub mod attention_device {
    use crate::device_util::views::{load_masked_raw, load_word};
    use cutile::core::*;

    /// (batch, query head, query tile) of tile block `id`: the query tiles of one head are
    /// consecutive ids (they share that head's K and V in L2), heaviest first (under a causal mask
    /// the last query tile walks the most key tiles).
    pub fn block_coords(id: i32, tiles_m: i32, h: i32) -> (i32, i32, i32) {
        let bh: i32 = id / tiles_m;
        (bh / h, bh % h, tiles_m - 1 - id % tiles_m)
    }

    /// The (b, heads, s, D) view of a tensor at `ptr` with strides (sb, sh, ss) in elements and a
    /// contiguous last dim: q, k, v and out of both paths.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn bhsd_view<T: ElementType, const D: i32>(
        ptr: *mut T, b: i32, heads: i32, s: i32, sb: i32, sh: i32, ss: i32, tok: Token,
    ) -> Tensor<T, { [-1, -1, -1, -1] }> {
        let shape: Shape<{ [-1, -1, -1, -1] }> = Shape::<{ [-1, -1, -1, -1] }> { dims: &[b, heads, s, D] };
        let strides: Array<{ [-1, -1, -1, 1] }> = Array::<{ [-1, -1, -1, 1] }> { dims: &[sb, sh, ss] };
        make_tensor_view(pointer_to_tile(ptr), shape, strides, tok)
    }

    /// The (b, h, s_q) f32 log-sum-exp of the forward's rows at `ptr`, contiguous: written by
    /// attention_fwd with LSE, read by the backward (kernels/attention_backward).
    pub unsafe fn lse_view(ptr: *mut f32, b: i32, h: i32, sq: i32, tok: Token) -> Tensor<f32, { [-1, -1, -1] }> {
        let shape: Shape<{ [-1, -1, -1] }> = Shape::<{ [-1, -1, -1] }> { dims: &[b, h, sq] };
        let strides: Array<{ [-1, -1, 1] }> = Array::<{ [-1, -1, 1] }> { dims: &[h * sq, sq] };
        make_tensor_view(pointer_to_tile(ptr), shape, strides, tok)
    }

    /// Query head `head`'s sink logit · log2(e) (the scores' base-2 units) from the (h,) sinks at
    /// `ptr` (element type S).
    pub unsafe fn sink_log2<S: ElementType>(ptr: *mut S, h: i32, head: i32, tok: Token) -> Tile<f32, { [1, 1] }> {
        let shape: Shape<{ [-1] }> = Shape::<{ [-1] }> { dims: &[h] };
        let strides: Array<{ [1] }> = Array::<{ [1] }> { dims: &[] };
        let view: Tensor<S, { [-1] }> = make_tensor_view(pointer_to_tile(ptr), shape, strides, tok);
        let part: Partition<S, { [1] }> = view.partition(shape![1]);
        let sink: Tile<f32, { [1] }> = convert_tile(part.load([head]));
        let log2e: Tile<f32, { [1] }> = constant(1.4426950408889634f32, shape![1]);
        (sink * log2e).reshape(shape![1, 1])
    }

    /// (key tiles without a mask, key tiles visited) for query tile `mt`: every row of the tile
    /// sees all of the first, the rest cross the diagonal or the key tail.
    pub fn key_tiles<const BM: i32, const BN: i32>(mt: i32, skv: i32, diag: i32) -> (i32, i32) {
        // The last row of the tile sees keys < (mt + 1) * BM + diag, the first one < mt * BM + diag + 1.
        let end_last: i32 = (mt + 1) * BM + diag;
        let seen: i32 = if end_last < skv { end_last } else { skv };
        let visited: i32 = if seen > 0 { (seen + BN - 1) / BN } else { 0 };
        let end_first: i32 = mt * BM + diag + 1;
        let full_end: i32 = if end_first < skv { end_first } else { skv };
        let full: i32 = if full_end > 0 { full_end / BN } else { 0 };
        (if full < visited { full } else { visited }, visited)
    }

    /// With a window of `window` keys (WINDOW), the key tiles of query tile `mt` given
    /// `key_tiles`' (full, visited): (first, lo, hi) with first <= lo <= hi <= visited. Tiles
    /// before `first` are outside every row's window (not visited), [lo, hi) every row sees in
    /// full (no mask), [first, lo) and [hi, visited) are masked. Row i sees keys in
    /// (i + diag - window, i + diag]: the window of the tile's first row starts at
    /// mt · BM + diag - window + 1, that of its last row at (mt + 1) · BM + diag - window.
    pub fn window_tiles<const BM: i32, const BN: i32>(
        mt: i32, diag: i32, window: i32, full: i32, visited: i32,
    ) -> (i32, i32, i32) {
        let start_first: i32 = mt * BM + diag - window + 1;
        let first_tile: i32 = if start_first > 0 { start_first / BN } else { 0 };
        let first: i32 = if first_tile < visited { first_tile } else { visited };
        let start_last: i32 = (mt + 1) * BM + diag - window;
        let lo_tile: i32 = if start_last > 0 { (start_last + BN - 1) / BN } else { 0 };
        let lo_above: i32 = if lo_tile > first { lo_tile } else { first };
        let lo: i32 = if lo_above < visited { lo_above } else { visited };
        (first, lo, if full > lo { full } else { lo })
    }

    /// The scores of a masked key tile inside the window (key > query + diag - window), in
    /// tile-local indices: column c is key j · BN + c, row r query mt · BM + r, and `start` =
    /// mt · BM + diag - window + 1 - j · BN the first column row 0 sees.
    pub fn in_window<const BM: i32, const BN: i32>(
        rows: Tile<i32, { [BM, BN] }>, cols: Tile<i32, { [BM, BN] }>, start: i32,
    ) -> Tile<bool, { [BM, BN] }> {
        let start_tile: Tile<i32, { [BM, BN] }> = broadcast_scalar(start, shape![BM, BN]);
        ge_tile(cols, rows + start_tile)
    }

    /// The keys a masked tile's rows see, in tile-local indices: column c is key `k0` + c and row r's
    /// query sits at `rows`[r] + `row0` (the forward: query tile rows; decode: each row's own query),
    /// so key < skv and key <= query + diag, and with WINDOW key > query + diag - window.
    #[allow(clippy::too_many_arguments)]
    pub fn visible_keys<const BM: i32, const BN: i32, const WINDOW: bool>(
        rows: Tile<i32, { [BM, BN] }>, cols: Tile<i32, { [BM, BN] }>, row0: i32, k0: i32, skv: i32, diag: i32,
        window: i32,
    ) -> Tile<bool, { [BM, BN] }> {
        let tile: Shape<{ [BM, BN] }> = shape![BM, BN];
        let key_end: Tile<i32, { [BM, BN] }> = broadcast_scalar(skv - k0, tile);
        let diag_off: Tile<i32, { [BM, BN] }> = broadcast_scalar(row0 + diag - k0, tile);
        let mut visible: Tile<bool, { [BM, BN] }> = andi(lt_tile(cols, key_end), le_tile(cols, rows + diag_off));
        if WINDOW {
            visible = andi(visible, in_window::<BM, BN>(rows, cols, row0 + diag - window + 1 - k0));
        }
        visible
    }

    /// The online-softmax update with one key/value tile: `qk` the raw scores Q Kᵀ (-inf where
    /// hidden), `c` = scale · log2(e). Returns the new (m, l, acc).
    fn online_step<T: ElementType, const BM: i32, const BN: i32, const D: i32>(
        qk: Tile<f32, { [BM, BN] }>, v: Tile<T, { [BN, D] }>, c: f32, m_i: Tile<f32, { [BM, 1] }>,
        l_i: Tile<f32, { [BM, 1] }>, acc: Tile<f32, { [BM, D] }>,
    ) -> (Tile<f32, { [BM, 1] }>, Tile<f32, { [BM, 1] }>, Tile<f32, { [BM, D] }>) {
        let row_max: Tile<f32, { [BM] }> = reduce_max(qk, 1i32);
        let c_col: Tile<f32, { [BM, 1] }> = broadcast_scalar(c, shape![BM, 1]);
        // c > 0, so the max of the scaled scores is the scaled max.
        let m_new: Tile<f32, { [BM, 1] }> =
            maxf(m_i, row_max.reshape(shape![BM, 1]) * c_col, nan::Disabled, ftz::Disabled);
        let c_tile: Tile<f32, { [BM, BN] }> = broadcast_scalar(c, shape![BM, BN]);
        let neg_m: Tile<f32, { [BM, BN] }> = negf(m_new.broadcast(shape![BM, BN]));
        let p: Tile<f32, { [BM, BN] }> =
            exp2(fma(qk, c_tile, neg_m, rounding::NearestEven, ftz::Enabled), ftz::Enabled);
        let alpha: Tile<f32, { [BM, 1] }> = exp2(m_i - m_new, ftz::Enabled);
        let row_sum: Tile<f32, { [BM] }> = reduce_sum(p, 1i32);
        let l_new: Tile<f32, { [BM, 1] }> = l_i * alpha + row_sum.reshape(shape![BM, 1]);
        let scaled: Tile<f32, { [BM, D] }> = acc * alpha.broadcast(shape![BM, D]);
        let p_t: Tile<T, { [BM, BN] }> = convert_tile(p);
        (m_new, l_new, mma(p_t, v, scaled))
    }

    /// O = acc / max(l, 1) per row, rounded to T: the rows' online-softmax sums divided out. A row
    /// that saw no key (and no sink) has l = 0 and acc = 0 and gets 0; every other row has l >= 1 (its
    /// largest score contributes exp2(0)), so the max changes nothing there.
    fn normalized<T: ElementType, const R: i32, const C: i32>(
        acc: Tile<f32, { [R, C] }>, l: Tile<f32, { [R, 1] }>,
    ) -> Tile<T, { [R, C] }> {
        let one: Tile<f32, { [R, 1] }> = constant(1.0f32, shape![R, 1]);
        let l_safe: Tile<f32, { [R, 1] }> = maxf(l, one, nan::Disabled, ftz::Disabled);
        let inv: Tile<f32, { [R, 1] }> = divf(one, l_safe, rounding::NearestEven, ftz::Disabled);
        convert_tile(acc * inv.broadcast(shape![R, C]))
    }

    /// Forward attention; grid = ceil(s_q / BM) * b * h tile blocks. Strides are in elements:
    /// (sb, sh, ss) of o, q, k, v in that order.
    #[cutile::entry(unchecked_accesses = true)]
    // The views' sizes and strides one for one: a struct would only repack them.
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_fwd<
        T: ElementType,
        S: ElementType,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const SINKS: bool,
        const WINDOW: bool,
        const LSE: bool,
    >(
        o_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T, sinks_ptr: *mut S, lse_ptr: *mut f32, b: i32,
        h: i32, hkv: i32, sq: i32, skv: i32, o_sb: i32, o_sh: i32, o_ss: i32, q_sb: i32, q_sh: i32, q_ss: i32,
        k_sb: i32, k_sh: i32, k_ss: i32, v_sb: i32, v_sh: i32, v_ss: i32, diag: i32, window: i32, qk_scale_log2: f32,
    ) {
        let tok: Token = new_token_unordered();
        let o_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(o_ptr, b, h, sq, o_sb, o_sh, o_ss, tok) };
        let q_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(q_ptr, b, h, sq, q_sb, q_sh, q_ss, tok) };
        let k_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(k_ptr, b, hkv, skv, k_sb, k_sh, k_ss, tok) };
        let v_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(v_ptr, b, hkv, skv, v_sb, v_sh, v_ss, tok) };
        let q_part: Partition<T, { [1, 1, BM, D] }> = q_view.partition(shape![1, 1, BM, D]);
        // K's [D, BN] tiles: tile axis 2 walks the view's axis 3 (d), tile axis 3 its axis 2 (keys).
        let k_part: Partition<T, { [1, 1, D, BN] }> =
            k_view.partition_permuted(shape![1, 1, D, BN], const_array![0, 1, 3, 2]);
        let v_part: Partition<T, { [1, 1, BN, D] }> = v_view.partition(shape![1, 1, BN, D]);
        let mut o_part: PartitionMut<T, { [1, 1, BM, D] }> = unsafe { o_view.partition_full_mut(shape![1, 1, BM, D]) };

        let tiles_m: i32 = (sq + BM - 1) / BM;
        let (batch, head, mt) = block_coords(get_tile_block_id().0, tiles_m, h);
        let kv_head: i32 = head / (h / hkv);
        let (full, visited) = key_tiles::<BM, BN>(mt, skv, diag);
        // Without a window every row's keys start at 0: no tile before the unmasked ones.
        let (first, lo, hi) =
            if WINDOW { window_tiles::<BM, BN>(mt, diag, window, full, visited) } else { (0i32, 0i32, full) };

        let q: Tile<T, { [BM, D] }> = q_part.load([batch, head, mt, 0i32]).reshape(shape![BM, D]);
        let mut m_i: Tile<f32, { [BM, 1] }> = constant(-3.4028235e38f32, shape![BM, 1]);
        let mut l_i: Tile<f32, { [BM, 1] }> = constant(0.0f32, shape![BM, 1]);
        let mut acc: Tile<f32, { [BM, D] }> = constant(0.0f32, shape![BM, D]);
        if SINKS {
            // The head's sink logit s enters as one more score of every row with a zero value
            // row: m = max(s · log2(e), lowest), l = exp2(s · log2(e) - m) (0 for s = -inf).
            let sink: Tile<f32, { [1, 1] }> = unsafe { sink_log2::<S>(sinks_ptr, h, head, tok) };
            let s: Tile<f32, { [BM, 1] }> = sink.broadcast(shape![BM, 1]);
            m_i = maxf(s, m_i, nan::Disabled, ftz::Disabled);
            l_i = exp2(s - m_i, ftz::Enabled);
        }

        let tile: Shape<{ [BM, BN] }> = shape![BM, BN];
        let zero: Tile<f32, { [BM, BN] }> = constant(0.0f32, tile);
        if WINDOW {
            // Key tiles across the window's start.
            let row_ids: Tile<i32, { [BM] }> = iota(shape![BM]);
            let rows: Tile<i32, { [BM, BN] }> = row_ids.reshape(shape![BM, 1]).broadcast(tile);
            let col_ids: Tile<i32, { [BN] }> = iota(shape![BN]);
            let cols: Tile<i32, { [BM, BN] }> = col_ids.reshape(shape![1, BN]).broadcast(tile);
            let neg_inf: Tile<f32, { [BM, BN] }> = constant(f32::NEG_INFINITY, tile);
            for j in first..lo {
                let k: Tile<T, { [D, BN] }> =
                    k_part.load_pipelined::<2>([batch, kv_head, 0i32, j]).reshape(shape![D, BN]);
                let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
                let visible: Tile<bool, { [BM, BN] }> =
                    visible_keys::<BM, BN, true>(rows, cols, mt * BM, j * BN, skv, diag, window);
                let v: Tile<T, { [BN, D] }> =
                    v_part.load_pipelined::<4>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
                let (m_new, l_new, acc_new) =
                    online_step::<T, BM, BN, D>(select(visible, qk, neg_inf), v, qk_scale_log2, m_i, l_i, acc);
                m_i = m_new;
                l_i = l_new;
                acc = acc_new;
            }
        }
        // Key tiles every row of the query tile sees in full: no mask.
        for j in lo..hi {
            let k: Tile<T, { [D, BN] }> = k_part.load_pipelined::<2>([batch, kv_head, 0i32, j]).reshape(shape![D, BN]);
            let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
            let v: Tile<T, { [BN, D] }> = v_part.load_pipelined::<4>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let (m_new, l_new, acc_new) = online_step::<T, BM, BN, D>(qk, v, qk_scale_log2, m_i, l_i, acc);
            m_i = m_new;
            l_i = l_new;
            acc = acc_new;
        }

        // Tiles across the diagonal or the key tail (or, narrower than BM + BN, the window's start).
        let row_ids: Tile<i32, { [BM] }> = iota(shape![BM]);
        let rows: Tile<i32, { [BM, BN] }> = row_ids.reshape(shape![BM, 1]).broadcast(tile);
        let col_ids: Tile<i32, { [BN] }> = iota(shape![BN]);
        let cols: Tile<i32, { [BM, BN] }> = col_ids.reshape(shape![1, BN]).broadcast(tile);
        let neg_inf: Tile<f32, { [BM, BN] }> = constant(f32::NEG_INFINITY, tile);
        for j in hi..visited {
            let k: Tile<T, { [D, BN] }> = k_part.load_pipelined::<2>([batch, kv_head, 0i32, j]).reshape(shape![D, BN]);
            let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
            // Row r is query mt * BM + r.
            let visible: Tile<bool, { [BM, BN] }> =
                visible_keys::<BM, BN, WINDOW>(rows, cols, mt * BM, j * BN, skv, diag, window);
            let v: Tile<T, { [BN, D] }> = v_part.load_pipelined::<4>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let (m_new, l_new, acc_new) =
                online_step::<T, BM, BN, D>(select(visible, qk, neg_inf), v, qk_scale_log2, m_i, l_i, acc);
            m_i = m_new;
            l_i = l_new;
            acc = acc_new;
        }

        let o: Tile<T, { [BM, D] }> = normalized::<T, BM, D>(acc, l_i);
        o_part.store(o.reshape(shape![1, 1, BM, D]), [batch, head, mt, 0i32]);
        if LSE {
            // The row's log-sum-exp in the base-2 units of the scaled scores, m + log2(l), for the
            // backward (P = exp2(s · c - lse)); +inf for a row that saw no key and no sink (l = 0),
            // whose P is then 0 at every key (the select drops log2(0) there).
            let lse_view: Tensor<f32, { [-1, -1, -1] }> = unsafe { lse_view(lse_ptr, b, h, sq, tok) };
            let mut lse_part: PartitionMut<f32, { [1, 1, BM] }> =
                unsafe { lse_view.partition_full_mut(shape![1, 1, BM]) };
            let zero_l: Tile<f32, { [BM, 1] }> = constant(0.0f32, shape![BM, 1]);
            let inf: Tile<f32, { [BM, 1] }> = constant(f32::INFINITY, shape![BM, 1]);
            let lse: Tile<f32, { [BM, 1] }> = select(gt_tile(l_i, zero_l), m_i + log2(l_i), inf);
            lse_part.store(lse.reshape(shape![1, 1, BM]), [batch, head, mt]);
        }
    }

    // -- Decode: few queries per sequence (s_q <= 16), the key/value cache split across tile blocks.

    /// The query rows of a decode tile: row r is query head kv_head · group + r / SQ and query
    /// r % SQ, the `group` query heads that read one key/value head packed together (GQA packing: K
    /// and V are read once for all of them). Returns (head in the group, query index) of each row,
    /// as [BM, 1] tiles, and which rows are real (head < group, query < s_q).
    fn decode_rows<const BM: i32, const SQ: i32>(
        group: i32, sq: i32,
    ) -> (Tile<i32, { [BM, 1] }>, Tile<i32, { [BM, 1] }>, Tile<bool, { [BM, 1] }>) {
        let r: Tile<i32, { [BM] }> = iota(shape![BM]);
        let sq_tile: Tile<i32, { [BM] }> = broadcast_scalar(SQ, shape![BM]);
        let g: Tile<i32, { [BM, 1] }> = (r / sq_tile).reshape(shape![BM, 1]);
        let i: Tile<i32, { [BM, 1] }> = (r % sq_tile).reshape(shape![BM, 1]);
        let g_end: Tile<i32, { [BM, 1] }> = broadcast_scalar(group, shape![BM, 1]);
        let i_end: Tile<i32, { [BM, 1] }> = broadcast_scalar(sq, shape![BM, 1]);
        (g, i, andi(lt_tile(g, g_end), lt_tile(i, i_end)))
    }

    /// The [BM, D] pointers of a decode tile's rows in a (b, h, s, d) tensor: row (g, i) at
    /// `first` + g · sh + i · ss, then d.
    fn decode_pointers<T: ElementType, const BM: i32, const D: i32>(
        ptr: *mut T, first: i32, g: Tile<i32, { [BM, 1] }>, i: Tile<i32, { [BM, 1] }>, sh: i32, ss: i32,
    ) -> PointerTile<*mut T, { [BM, D] }> {
        let tile: Shape<{ [BM, D] }> = shape![BM, D];
        let sh_t: Tile<i32, { [BM, 1] }> = broadcast_scalar(sh, shape![BM, 1]);
        let ss_t: Tile<i32, { [BM, 1] }> = broadcast_scalar(ss, shape![BM, 1]);
        let row_off: Tile<i32, { [BM, D] }> = (g * sh_t + i * ss_t).broadcast(tile);
        let d_ids: Tile<i32, { [D] }> = iota(shape![D]);
        let offsets: Tile<i32, { [BM, D] }> = row_off + d_ids.reshape(shape![1, D]).broadcast(tile);
        let p0: PointerTile<*mut T, { [] }> = pointer_to_tile(ptr).offset(first);
        let p1: PointerTile<*mut T, { [1, 1] }> = p0.reshape(shape![1, 1]);
        let base: PointerTile<*mut T, { [BM, D] }> = p1.broadcast(tile);
        base.offset_tile(offsets)
    }

    /// Decode split block `bid`'s (split, batch, key/value head, group): block (batch · h_kv +
    /// kv_head) · splits + split, group = h / h_kv query heads a key/value head.
    fn decode_block(bid: i32, splits: i32, h: i32, hkv: i32) -> (i32, i32, i32, i32) {
        let bkh: i32 = bid / splits;
        (bid % splits, bkh / hkv, bkh % hkv, h / hkv)
    }

    /// A decode tile's queries: rows (g, i) from `first` in q (decode_pointers), zeros in the rows
    /// that are padding (`real` false), and the [BM, D] mask of the real rows.
    #[allow(clippy::too_many_arguments)]
    unsafe fn decode_query<T: ElementType, const BM: i32, const D: i32>(
        q_ptr: *mut T, first: i32, g: Tile<i32, { [BM, 1] }>, i: Tile<i32, { [BM, 1] }>, real: Tile<bool, { [BM, 1] }>,
        q_sh: i32, q_ss: i32,
    ) -> (Tile<T, { [BM, D] }>, Tile<bool, { [BM, D] }>) {
        let tile_q: Shape<{ [BM, D] }> = shape![BM, D];
        let q_ptrs: PointerTile<*mut T, { [BM, D] }> = decode_pointers::<T, BM, D>(q_ptr, first, g, i, q_sh, q_ss);
        let q_mask: Tile<bool, { [BM, D] }> = real.broadcast(tile_q);
        let (q_raw, _q_tok): (Tile<T, { [BM, D] }>, Token) = unsafe {
            load_ptr_tko(q_ptrs, ordering::Weak, None::<scope::TileBlock>, Some(q_mask), None, None, Latency::<3>)
        };
        let zero_q: Tile<f32, { [BM, D] }> = constant(0.0f32, tile_q);
        let q_zero: Tile<T, { [BM, D] }> = convert_tile(zero_q);
        (select(q_mask, q_raw, q_zero), q_mask)
    }

    /// The end of a decode split block: with `direct` != 0 (the launcher's choice for one split and no
    /// sinks) O = acc / max(l, 1) to the real rows (`real`) of out, no workspace and no combine; else
    /// the unnormalized partial (acc [BM, D], m and l [BM]) at block `bid` of the workspace's
    /// `blocks`, for attention_decode_combine. Row (g, i) of the group lies in out at `o_first` +
    /// g · o_sh + i · o_ss (decode_pointers).
    #[allow(clippy::too_many_arguments)]
    unsafe fn store_decode_partial<T: ElementType, const BM: i32, const D: i32>(
        ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, o_ptr: *mut T, acc: Tile<f32, { [BM, D] }>,
        m_i: Tile<f32, { [BM, 1] }>, l_i: Tile<f32, { [BM, 1] }>, blocks: i32, bid: i32, o_first: i32,
        g: Tile<i32, { [BM, 1] }>, i: Tile<i32, { [BM, 1] }>, real: Tile<bool, { [BM, D] }>, o_sh: i32, o_ss: i32,
        direct: i32, tok: Token,
    ) {
        if direct != 0 {
            let out: Tile<T, { [BM, D] }> = normalized::<T, BM, D>(acc, l_i);
            let o_ptrs: PointerTile<*mut T, { [BM, D] }> =
                decode_pointers::<T, BM, D>(o_ptr, o_first, g, i, o_sh, o_ss);
            let _o_tok: Token = unsafe {
                store_ptr_tko(o_ptrs, out, ordering::Weak, None::<scope::TileBlock>, Some(real), None, Latency::<3>)
            };
        } else {
            let acc_shape: Shape<{ [-1, -1, -1] }> = Shape::<{ [-1, -1, -1] }> { dims: &[blocks, BM, D] };
            let acc_strides: Array<{ [-1, -1, 1] }> = Array::<{ [-1, -1, 1] }> { dims: &[BM * D, D] };
            let acc_view: Tensor<f32, { [-1, -1, -1] }> =
                unsafe { make_tensor_view(pointer_to_tile(ws_acc), acc_shape, acc_strides, tok) };
            let mut acc_part: PartitionMut<f32, { [1, BM, D] }> =
                unsafe { acc_view.partition_full_mut(shape![1, BM, D]) };
            acc_part.store(acc.reshape(shape![1, BM, D]), [bid, 0i32, 0i32]);
            let row_shape: Shape<{ [-1, -1] }> = Shape::<{ [-1, -1] }> { dims: &[blocks, BM] };
            let row_strides: Array<{ [-1, 1] }> = Array::<{ [-1, 1] }> { dims: &[BM] };
            let m_view: Tensor<f32, { [-1, -1] }> =
                unsafe { make_tensor_view(pointer_to_tile(ws_m), row_shape, row_strides, tok) };
            let l_view: Tensor<f32, { [-1, -1] }> =
                unsafe { make_tensor_view(pointer_to_tile(ws_l), row_shape, row_strides, tok) };
            let mut m_part: PartitionMut<f32, { [1, BM] }> = unsafe { m_view.partition_full_mut(shape![1, BM]) };
            let mut l_part: PartitionMut<f32, { [1, BM] }> = unsafe { l_view.partition_full_mut(shape![1, BM]) };
            m_part.store(m_i.reshape(shape![1, BM]), [bid, 0i32]);
            l_part.store(l_i.reshape(shape![1, BM]), [bid, 0i32]);
        }
    }

    /// One decode segment: the `group` query heads of (batch, kv_head) × s_q queries as one BM-row
    /// tile (decode_rows) walk key tiles [t0, t1) of the cache, every tile masked (key < s_kv, key
    /// <= i + diag, and with WINDOW key > i + diag - window: row i's own query), and leave their
    /// partial at slot `slot` of the workspace's `blocks` (store_decode_partial; with `direct` != 0
    /// O to out instead). `keep` = 0 stores nothing (a segment that walks no tile).
    #[allow(clippy::too_many_arguments)]
    unsafe fn decode_segment<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const SQ: i32,
        const WINDOW: bool,
        const KL: i32,
        const VL: i32,
    >(
        ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, o_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T,
        b: i32, h: i32, hkv: i32, sq: i32, skv: i32, o_sb: i32, o_sh: i32, o_ss: i32, q_sb: i32, q_sh: i32, q_ss: i32,
        k_sb: i32, k_sh: i32, k_ss: i32, v_sb: i32, v_sh: i32, v_ss: i32, diag: i32, window: i32, qk_scale_log2: f32,
        batch: i32, kv_head: i32, t0: i32, t1: i32, blocks: i32, slot: i32, direct: i32, keep: i32, tok: Token,
    ) {
        let group: i32 = h / hkv;
        let (g, i, real) = decode_rows::<BM, SQ>(group, sq);
        let q_first: i32 = batch * q_sb + kv_head * group * q_sh;
        let (q, q_mask) = unsafe { decode_query::<T, BM, D>(q_ptr, q_first, g, i, real, q_sh, q_ss) };

        let k_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(k_ptr, b, hkv, skv, k_sb, k_sh, k_ss, tok) };
        let v_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(v_ptr, b, hkv, skv, v_sb, v_sh, v_ss, tok) };
        let k_part: Partition<T, { [1, 1, D, BN] }> =
            k_view.partition_permuted(shape![1, 1, D, BN], const_array![0, 1, 3, 2]);
        let v_part: Partition<T, { [1, 1, BN, D] }> = v_view.partition(shape![1, 1, BN, D]);

        let tile: Shape<{ [BM, BN] }> = shape![BM, BN];
        let zero: Tile<f32, { [BM, BN] }> = constant(0.0f32, tile);
        let neg_inf: Tile<f32, { [BM, BN] }> = constant(f32::NEG_INFINITY, tile);
        let col_ids: Tile<i32, { [BN] }> = iota(shape![BN]);
        let cols: Tile<i32, { [BM, BN] }> = col_ids.reshape(shape![1, BN]).broadcast(tile);
        let rows: Tile<i32, { [BM, BN] }> = i.broadcast(tile);
        let mut m_i: Tile<f32, { [BM, 1] }> = constant(-3.4028235e38f32, shape![BM, 1]);
        let mut l_i: Tile<f32, { [BM, 1] }> = constant(0.0f32, shape![BM, 1]);
        let mut acc: Tile<f32, { [BM, D] }> = constant(0.0f32, shape![BM, D]);
        for j in t0..t1 {
            let k: Tile<T, { [D, BN] }> = k_part.load_pipelined::<KL>([batch, kv_head, 0i32, j]).reshape(shape![D, BN]);
            let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
            // Row r is query i(r) (`rows`).
            let visible: Tile<bool, { [BM, BN] }> =
                visible_keys::<BM, BN, WINDOW>(rows, cols, 0i32, j * BN, skv, diag, window);
            let v: Tile<T, { [BN, D] }> = v_part.load_pipelined::<VL>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let (m_new, l_new, acc_new) =
                online_step::<T, BM, BN, D>(select(visible, qk, neg_inf), v, qk_scale_log2, m_i, l_i, acc);
            m_i = m_new;
            l_i = l_new;
            acc = acc_new;
        }

        if keep != 0i32 {
            unsafe {
                let o_first: i32 = batch * o_sb + kv_head * group * o_sh;
                store_decode_partial::<T, BM, D>(
                    ws_acc, ws_m, ws_l, o_ptr, acc, m_i, l_i, blocks, slot, o_first, g, i, q_mask, o_sh, o_ss, direct,
                    tok,
                )
            };
        }
    }

    /// Decode, step 1 of 2: grid = b · h_kv · splits tile blocks. Block (batch, kv_head, split) is
    /// one decode_segment over key tiles [t0, t1): `first_tile` (the window's first, else 0) plus
    /// split · tiles_per_split, at most `tiles_end`. It writes its unnormalized partial: acc (f32
    /// [BM, D]), the running max m and sum l (f32 [BM], base 2) at block id in the workspace
    /// (`ws_acc`, `ws_m`, `ws_l`), for attention_decode_combine. A split that sees no key of a row
    /// leaves m at the lowest finite f32 and l = acc = 0: it weighs nothing there. With `direct` !=
    /// 0 (the launcher's choice for one split and no sinks) it stores O = acc / max(l, 1) to the
    /// real rows of out instead, and no combine runs.
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_decode<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const SQ: i32,
        const WINDOW: bool,
        const KL: i32,
        const VL: i32,
    >(
        ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, o_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T,
        b: i32, h: i32, hkv: i32, sq: i32, skv: i32, o_sb: i32, o_sh: i32, o_ss: i32, q_sb: i32, q_sh: i32, q_ss: i32,
        k_sb: i32, k_sh: i32, k_ss: i32, v_sb: i32, v_sh: i32, v_ss: i32, diag: i32, window: i32, qk_scale_log2: f32,
        splits: i32, first_tile: i32, tiles_per_split: i32, tiles_end: i32, direct: i32,
    ) {
        let tok: Token = new_token_unordered();
        let bid: i32 = get_tile_block_id().0;
        let (split, batch, kv_head, _group) = decode_block(bid, splits, h, hkv);
        let t0: i32 = first_tile + split * tiles_per_split;
        let t_stop: i32 = t0 + tiles_per_split;
        let t1: i32 = if t_stop < tiles_end { t_stop } else { tiles_end };
        unsafe {
            decode_segment::<T, BM, BN, D, SQ, WINDOW, KL, VL>(
                ws_acc,
                ws_m,
                ws_l,
                o_ptr,
                q_ptr,
                k_ptr,
                v_ptr,
                b,
                h,
                hkv,
                sq,
                skv,
                o_sb,
                o_sh,
                o_ss,
                q_sb,
                q_sh,
                q_ss,
                k_sb,
                k_sh,
                k_ss,
                v_sb,
                v_sh,
                v_ss,
                diag,
                window,
                qk_scale_log2,
                batch,
                kv_head,
                t0,
                t1,
                b * hkv * splits,
                bid,
                direct,
                1i32,
                tok,
            )
        };
    }

    /// The block of a lean grid that walks global tile `x` (decode's tiles of every (batch, kv
    /// head) pair laid end to end): block g walks [g · share + min(g, extra), ...), share + 1
    /// tiles for the first `extra` blocks, `share` for the rest.
    fn lean_block(x: i32, share: i32, extra: i32) -> i32 {
        let long_end: i32 = extra * (share + 1i32);
        if x < long_end {
            x / (share + 1i32)
        } else {
            extra + (x - long_end) / share
        }
    }

    /// Decode, step 1 of 2, on a lean grid (LeanAttention's stream-K partition, as cuDNN's decode):
    /// the launcher sizes the grid to the GPU's tile-block slots (an SM's blocks × the SMs), lays
    /// the `pair_tiles` visible key tiles (from `first_tile`) of every (batch, kv_head) pair end to
    /// end, and gives block g the g-th share of them (lean_block; share + 1 <= pair_tiles, so a
    /// share crosses at most one pair's end). The block is then one or two decode_segments: the end
    /// of pair p (or all of its share) and the start of pair p + 1, each stored at its slot of the
    /// workspace's [pairs, slots] partials: pair p's blocks in order from slot 0. The block that
    /// walks a pair's last tile also stores the empty partial (m the lowest finite f32, l = acc = 0)
    /// in the pair's slots past its own, so attention_decode_combine folds `slots` splits a pair
    /// as it folds a split grid's.
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_decode_lean<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const SQ: i32,
        const WINDOW: bool,
        const KL: i32,
        const VL: i32,
    >(
        ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, o_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T,
        b: i32, h: i32, hkv: i32, sq: i32, skv: i32, o_sb: i32, o_sh: i32, o_ss: i32, q_sb: i32, q_sh: i32, q_ss: i32,
        k_sb: i32, k_sh: i32, k_ss: i32, v_sb: i32, v_sh: i32, v_ss: i32, diag: i32, window: i32, qk_scale_log2: f32,
        first_tile: i32, pair_tiles: i32, share: i32, extra: i32, slots: i32,
    ) {
        let tok: Token = new_token_unordered();
        let bid: i32 = get_tile_block_id().0;
        let pairs: i32 = b * hkv;
        let blocks: i32 = pairs * slots;
        let long_before: i32 = if bid < extra { bid } else { extra };
        let long_here: i32 = if bid < extra { 1i32 } else { 0i32 };
        let lo: i32 = bid * share + long_before;
        let hi: i32 = lo + share + long_here;
        // the share's first pair: its tiles [a0, a1) of pair_tiles
        let pair_a: i32 = lo / pair_tiles;
        let start_a: i32 = pair_a * pair_tiles;
        let a1: i32 = if hi - start_a < pair_tiles { hi - start_a } else { pair_tiles };
        let slot_a: i32 = bid - lean_block(start_a, share, extra);
        unsafe {
            decode_segment::<T, BM, BN, D, SQ, WINDOW, KL, VL>(
                ws_acc,
                ws_m,
                ws_l,
                o_ptr,
                q_ptr,
                k_ptr,
                v_ptr,
                b,
                h,
                hkv,
                sq,
                skv,
                o_sb,
                o_sh,
                o_ss,
                q_sb,
                q_sh,
                q_ss,
                k_sb,
                k_sh,
                k_ss,
                v_sb,
                v_sh,
                v_ss,
                diag,
                window,
                qk_scale_log2,
                pair_a / hkv,
                pair_a % hkv,
                first_tile + lo - start_a,
                first_tile + a1,
                blocks,
                pair_a * slots + slot_a,
                0i32,
                1i32,
                tok,
            )
        };
        if hi >= start_a + pair_tiles {
            // the pair's last tile: its slots past this one weigh nothing
            let lowest: Tile<f32, { [BM, 1] }> = constant(-3.4028235e38f32, shape![BM, 1]);
            let none: Tile<f32, { [BM, 1] }> = constant(0.0f32, shape![BM, 1]);
            let none_acc: Tile<f32, { [BM, D] }> = constant(0.0f32, shape![BM, D]);
            let (g, i, real) = decode_rows::<BM, SQ>(h / hkv, sq);
            let rows_d: Tile<bool, { [BM, D] }> = real.broadcast(shape![BM, D]);
            let unused: i32 = slot_a + 1i32;
            for slot in unused..slots {
                unsafe {
                    store_decode_partial::<T, BM, D>(
                        ws_acc,
                        ws_m,
                        ws_l,
                        o_ptr,
                        none_acc,
                        lowest,
                        none,
                        blocks,
                        pair_a * slots + slot,
                        0i32,
                        g,
                        i,
                        rows_d,
                        o_sh,
                        o_ss,
                        0i32,
                        tok,
                    )
                };
            }
        }
        // the next pair's first tiles, where the share reaches them (else a walk of none, no store)
        let pair_b: i32 = pair_a + 1i32;
        let b1: i32 = hi - (start_a + pair_tiles);
        let crosses: i32 = if b1 > 0i32 { 1i32 } else { 0i32 };
        let b_tiles: i32 = if b1 > 0i32 { b1 } else { 0i32 };
        let pair_in: i32 = if pair_b < pairs { pair_b } else { pair_a };
        unsafe {
            decode_segment::<T, BM, BN, D, SQ, WINDOW, KL, VL>(
                ws_acc,
                ws_m,
                ws_l,
                o_ptr,
                q_ptr,
                k_ptr,
                v_ptr,
                b,
                h,
                hkv,
                sq,
                skv,
                o_sb,
                o_sh,
                o_ss,
                q_sb,
                q_sh,
                q_ss,
                k_sb,
                k_sh,
                k_ss,
                v_sb,
                v_sh,
                v_ss,
                diag,
                window,
                qk_scale_log2,
                pair_in / hkv,
                pair_in % hkv,
                first_tile,
                first_tile + b_tiles,
                blocks,
                pair_in * slots,
                0i32,
                crosses,
                tok,
            )
        };
    }

    /// The decode split kernel with the key tile cut across the worker warps: attention_decode's
    /// grid, walk, masks and partials, but each BN-key step is NB sub-tiles of SUB keys (BN = NB ·
    /// SUB) held as [NB, BM, ...] tiles, NB online softmaxes side by side (batched MMAs) that are
    /// combined once, after the walk: M = max m, w = exp2(m - M), l = Σ l w, acc = Σ acc w. The
    /// compiler gives each of the NB sub-tiles a warp of its own (NB = 4 at 4 warps), so a step's
    /// row max and sum stay inside a warp: 2 CTA barriers a step in the SASS against 12 where the
    /// step's keys are spread over the warps. Not faster for it on an H100 (a step waits on its
    /// loads), but autotune's pick at 4 speculative queries (NOTES.md, "Sub-tiles a warp each").
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_decode_batched<
        T: ElementType,
        const BM: i32,
        const SUB: i32,
        const NB: i32,
        const BN: i32,
        const D: i32,
        const SQ: i32,
        const WINDOW: bool,
        const KL: i32,
        const VL: i32,
    >(
        ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, o_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T,
        b: i32, h: i32, hkv: i32, sq: i32, skv: i32, o_sb: i32, o_sh: i32, o_ss: i32, q_sb: i32, q_sh: i32, q_ss: i32,
        k_sb: i32, k_sh: i32, k_ss: i32, v_sb: i32, v_sh: i32, v_ss: i32, diag: i32, window: i32, qk_scale_log2: f32,
        splits: i32, first_tile: i32, tiles_per_split: i32, tiles_end: i32, direct: i32,
    ) {
        let tok: Token = new_token_unordered();
        let bid: i32 = get_tile_block_id().0;
        let (split, batch, kv_head, group) = decode_block(bid, splits, h, hkv);
        let (g, i, real) = decode_rows::<BM, SQ>(group, sq);
        let q_first: i32 = batch * q_sb + kv_head * group * q_sh;
        let (q_rows, q_mask) = unsafe { decode_query::<T, BM, D>(q_ptr, q_first, g, i, real, q_sh, q_ss) };
        let q_one: Tile<T, { [1, BM, D] }> = q_rows.reshape(shape![1, BM, D]);
        let q: Tile<T, { [NB, BM, D] }> = q_one.broadcast(shape![NB, BM, D]);

        // K and V by BN-key steps, both key-major ([BN, D], as stored); a step's K is cut into its
        // NB sub-tiles and each transposed to [D, SUB] for Q Kᵀ.
        let k_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(k_ptr, b, hkv, skv, k_sb, k_sh, k_ss, tok) };
        let v_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(v_ptr, b, hkv, skv, v_sb, v_sh, v_ss, tok) };
        let k_part: Partition<T, { [1, 1, BN, D] }> = k_view.partition(shape![1, 1, BN, D]);
        let v_part: Partition<T, { [1, 1, BN, D] }> = v_view.partition(shape![1, 1, BN, D]);

        // Key index of each score within its step (sub-tile n, column c: n · SUB + c) and each row's
        // query (decode_rows' i).
        let tile: Shape<{ [NB, BM, SUB] }> = shape![NB, BM, SUB];
        let sub_ids: Tile<i32, { [NB] }> = iota(shape![NB]);
        let sub_col: Tile<i32, { [NB, 1, 1] }> = sub_ids.reshape(shape![NB, 1, 1]);
        let sub_keys: Tile<i32, { [NB, 1, 1] }> = sub_col * broadcast_scalar(SUB, shape![NB, 1, 1]);
        let col_ids: Tile<i32, { [SUB] }> = iota(shape![SUB]);
        let cols: Tile<i32, { [1, 1, SUB] }> = col_ids.reshape(shape![1, 1, SUB]);
        let keys: Tile<i32, { [NB, BM, SUB] }> = sub_keys.broadcast(tile) + cols.broadcast(tile);
        let i_rows: Tile<i32, { [1, BM, 1] }> = i.reshape(shape![1, BM, 1]);
        let rows: Tile<i32, { [NB, BM, SUB] }> = i_rows.broadcast(tile);
        let zero: Tile<f32, { [NB, BM, SUB] }> = constant(0.0f32, tile);
        let neg_inf: Tile<f32, { [NB, BM, SUB] }> = constant(f32::NEG_INFINITY, tile);
        let c_tile: Tile<f32, { [NB, BM, SUB] }> = broadcast_scalar(qk_scale_log2, tile);
        let c_col: Tile<f32, { [NB, BM, 1] }> = broadcast_scalar(qk_scale_log2, shape![NB, BM, 1]);
        let mut m_s: Tile<f32, { [NB, BM, 1] }> = constant(-3.4028235e38f32, shape![NB, BM, 1]);
        let mut l_s: Tile<f32, { [NB, BM, 1] }> = constant(0.0f32, shape![NB, BM, 1]);
        let mut acc_s: Tile<f32, { [NB, BM, D] }> = constant(0.0f32, shape![NB, BM, D]);
        let t0: i32 = first_tile + split * tiles_per_split;
        let t_stop: i32 = t0 + tiles_per_split;
        let t1: i32 = if t_stop < tiles_end { t_stop } else { tiles_end };
        for j in t0..t1 {
            let k_step: Tile<T, { [BN, D] }> =
                k_part.load_pipelined::<KL>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let k_subs: Tile<T, { [NB, SUB, D] }> = k_step.reshape(shape![NB, SUB, D]);
            let k: Tile<T, { [NB, D, SUB] }> = permute(k_subs, const_array![0, 2, 1]);
            let qk: Tile<f32, { [NB, BM, SUB] }> = mmaf(q, k, zero);
            // Key k0 + keys is visible to row query i when < skv, <= i + diag, and with WINDOW
            // > i + diag - window (visible_keys, in three dims).
            let k0: i32 = j * BN;
            let key_end: Tile<i32, { [NB, BM, SUB] }> = broadcast_scalar(skv - k0, tile);
            let diag_off: Tile<i32, { [NB, BM, SUB] }> = broadcast_scalar(diag - k0, tile);
            let mut visible: Tile<bool, { [NB, BM, SUB] }> =
                andi(lt_tile(keys, key_end), le_tile(keys, rows + diag_off));
            if WINDOW {
                let start: Tile<i32, { [NB, BM, SUB] }> = broadcast_scalar(diag - window + 1 - k0, tile);
                visible = andi(visible, ge_tile(keys, rows + start));
            }
            let s: Tile<f32, { [NB, BM, SUB] }> = select(visible, qk, neg_inf);
            let v_step: Tile<T, { [BN, D] }> =
                v_part.load_pipelined::<VL>([batch, kv_head, j, 0i32]).reshape(shape![BN, D]);
            let v: Tile<T, { [NB, SUB, D] }> = v_step.reshape(shape![NB, SUB, D]);
            // online_step per sub-tile: c > 0, so the max of the scaled scores is the scaled max.
            let row_max: Tile<f32, { [NB, BM] }> = reduce_max(s, 2i32);
            let m_new: Tile<f32, { [NB, BM, 1] }> =
                maxf(m_s, row_max.reshape(shape![NB, BM, 1]) * c_col, nan::Disabled, ftz::Disabled);
            let neg_m: Tile<f32, { [NB, BM, SUB] }> = negf(m_new.broadcast(tile));
            let p: Tile<f32, { [NB, BM, SUB] }> =
                exp2(fma(s, c_tile, neg_m, rounding::NearestEven, ftz::Enabled), ftz::Enabled);
            let alpha: Tile<f32, { [NB, BM, 1] }> = exp2(m_s - m_new, ftz::Enabled);
            let row_sum: Tile<f32, { [NB, BM] }> = reduce_sum(p, 2i32);
            l_s = l_s * alpha + row_sum.reshape(shape![NB, BM, 1]);
            let scaled: Tile<f32, { [NB, BM, D] }> = acc_s * alpha.broadcast(shape![NB, BM, D]);
            let p_t: Tile<T, { [NB, BM, SUB] }> = convert_tile(p);
            acc_s = mmaf(p_t, v, scaled);
            m_s = m_new;
        }
        // The NB sub-streams into the block's partial, as attention_decode_combine joins splits.
        let m_i: Tile<f32, { [BM, 1] }> = reduce_max(m_s, 0i32);
        let m_top: Tile<f32, { [1, BM, 1] }> = m_i.reshape(shape![1, BM, 1]);
        let w: Tile<f32, { [NB, BM, 1] }> = exp2(m_s - m_top.broadcast(shape![NB, BM, 1]), ftz::Enabled);
        let l_sum: Tile<f32, { [BM, 1] }> = reduce_sum(l_s * w, 0i32);
        let acc: Tile<f32, { [BM, D] }> = reduce_sum(acc_s * w.broadcast(shape![NB, BM, D]), 0i32);
        unsafe {
            let o_first: i32 = batch * o_sb + kv_head * group * o_sh;
            store_decode_partial::<T, BM, D>(
                ws_acc,
                ws_m,
                ws_l,
                o_ptr,
                acc,
                m_i,
                l_sum,
                b * hkv * splits,
                bid,
                o_first,
                g,
                i,
                q_mask,
                o_sh,
                o_ss,
                direct,
                tok,
            )
        };
    }

    /// The [BN, D] elements of a paged cache's key tile j of one key/value head: key n of the
    /// sequence lies in page `table[n / page]` at slot n % page; element (n, c) at page · sp + slot ·
    /// ss + `head_off` + c. `pages` holds the tile's page ids (read by the caller once for K and V);
    /// keys past s_kv (`live` false) are not read and come back 0.
    #[allow(clippy::too_many_arguments)]
    unsafe fn paged_tile<T: ElementType, const BN: i32, const D: i32>(
        ptr: *mut T, pages: Tile<i32, { [BN, 1] }>, slots: Tile<i32, { [BN, 1] }>, live: Tile<bool, { [BN, D] }>,
        sp: i32, ss: i32, head_off: i32,
    ) -> Tile<T, { [BN, D] }> {
        let tile: Shape<{ [BN, D] }> = shape![BN, D];
        let col: Shape<{ [BN, 1] }> = shape![BN, 1];
        let rows: Tile<i32, { [BN, 1] }> =
            pages * broadcast_scalar(sp, col) + slots * broadcast_scalar(ss, col) + broadcast_scalar(head_off, col);
        let d_ids: Tile<i32, { [D] }> = iota(shape![D]);
        let offsets: Tile<i32, { [BN, D] }> = rows.broadcast(tile) + d_ids.reshape(shape![1, D]).broadcast(tile);
        let raw: Tile<T, { [BN, D] }> = unsafe { load_masked_raw::<T, BN, D, 3>(ptr, offsets, live) };
        let zero: Tile<f32, { [BN, D] }> = constant(0.0f32, tile);
        let zero_t: Tile<T, { [BN, D] }> = convert_tile(zero);
        select(live, raw, zero_t)
    }

    /// The page id of key `key` of a sequence whose block-table row is `table_row` (the word at
    /// column key / page).
    unsafe fn page_word(table_row: PointerTile<*mut i32, { [] }>, key: i32, page: i32) -> i32 {
        let at: PointerTile<*mut i32, { [] }> = table_row.offset(key / page);
        tile_to_scalar(unsafe { load_word(at) })
    }

    /// The smaller of two scalars.
    fn min_i32(a: i32, b: i32) -> i32 {
        if a < b {
            a
        } else {
            b
        }
    }

    /// The end of the keys a piece of the cache read from page `id` may show: s_kv where the id lies
    /// in [0, pages), else 0 (a page outside the cache: its keys hidden).
    fn piece_end(id: i32, pages: i32, skv: i32) -> i32 {
        let mut end: i32 = 0i32;
        if id >= 0i32 {
            if id < pages {
                end = skv;
            }
        }
        end
    }

    /// Decode over a paged key/value cache, step 1 of 2 (attention_decode's grid, rows, partials and
    /// combine): k and v (pages, page, h_kv, D) with strides (sp, ss, sh) (vLLM's and FlashAttention's
    /// layout, any strides with a contiguous D), sequence `batch`'s pages listed in row `batch` of the
    /// i32 block table (`table_ptr`, row stride `table_sb`) and its length s_kv in the i32
    /// `lens_ptr[batch]` (each sequence its own, at most `cap` = the table's width · page: the s_q
    /// queries are its last positions, so diag = s_kv - s_q, the causal mask aligned to its end). A
    /// page id outside [0, `pages`) is not read: its keys are hidden (memory outside the cache is
    /// never touched; op.py's `validate` finds such ids). The block walks key tiles first + split ·
    /// tiles_per_split .. of its sequence (first: the window's first tile, else 0), stopping at
    /// ceil(s_kv / BN): the launcher sizes the splits for the table's width, the longest sequence
    /// the cache can hold, so blocks past a shorter sequence's end walk nothing and weigh nothing
    /// in the combine. PIECES says how a BN-key tile is read:
    /// - 1 (BN divides the page): the tile lies in one page, whose id is one word of the table; K
    ///   and V load through views of the cache (TMA), as the contiguous cache's tiles do.
    /// - 4 (PER = BN / 4 divides the page: vLLM's 16-key pages under 64-key tiles): the tile is four
    ///   pieces of PER keys, each inside one page, loaded through the same views (one TMA load a
    ///   piece) and joined (cat) into the [D, BN] and [BN, D] tiles of one step, so a step does one
    ///   BN-key MMA and one online-softmax update for four pages. HALF = BN / 2.
    /// - 0 (otherwise): each key tile's page ids are read once (the keys past s_kv not at all), then
    ///   K and V are gathered row by row (paged_tile), so any page size works.
    /// The views' walks read the next tile's page ids a step ahead, so the producer's TMA loads do
    /// not wait on a table read (the table's words are read for keys < cap only).
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_decode_paged<
        T: ElementType,
        const BM: i32,
        const BN: i32,
        const D: i32,
        const SQ: i32,
        const WINDOW: bool,
        const PIECES: i32,
        const PER: i32,
        const HALF: i32,
    >(
        ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, o_ptr: *mut T, q_ptr: *mut T, k_ptr: *mut T, v_ptr: *mut T,
        table_ptr: *mut i32, lens_ptr: *mut i32, b: i32, h: i32, hkv: i32, sq: i32, o_sb: i32, o_sh: i32, o_ss: i32,
        q_sb: i32, q_sh: i32, q_ss: i32, k_sp: i32, k_ss: i32, k_sh: i32, v_sp: i32, v_ss: i32, v_sh: i32,
        table_sb: i32, page: i32, pages: i32, cap: i32, window: i32, qk_scale_log2: f32, splits: i32,
        tiles_per_split: i32, direct: i32,
    ) {
        let tok: Token = new_token_unordered();
        let bid: i32 = get_tile_block_id().0;
        let (split, batch, kv_head, group) = decode_block(bid, splits, h, hkv);
        let (g, i, real) = decode_rows::<BM, SQ>(group, sq);
        let q_first: i32 = batch * q_sb + kv_head * group * q_sh;
        let (q, q_mask) = unsafe { decode_query::<T, BM, D>(q_ptr, q_first, g, i, real, q_sh, q_ss) };
        let len_at: PointerTile<*mut i32, { [] }> = pointer_to_tile(lens_ptr).offset(batch);
        let len: i32 = tile_to_scalar(unsafe { load_word(len_at) });
        let skv: i32 = if len < cap { len } else { cap };
        let diag: i32 = skv - sq;
        let mut first: i32 = 0i32;
        if WINDOW {
            let start: i32 = diag - window + 1i32;
            if start > 0i32 {
                first = start / BN;
            }
        }
        let end: i32 = (skv + BN - 1i32) / BN;
        let t0: i32 = first + split * tiles_per_split;
        let t_stop: i32 = t0 + tiles_per_split;
        let t1: i32 = if t_stop < end { t_stop } else { end };
        // the gathers' walk: empty where the views walked the tiles
        let t_gather: i32 = if PIECES == 0i32 { t1 } else { t0 };

        let tile: Shape<{ [BM, BN] }> = shape![BM, BN];
        let col: Shape<{ [BN, 1] }> = shape![BN, 1];
        let zero: Tile<f32, { [BM, BN] }> = constant(0.0f32, tile);
        let neg_inf: Tile<f32, { [BM, BN] }> = constant(f32::NEG_INFINITY, tile);
        let col_ids: Tile<i32, { [BN] }> = iota(shape![BN]);
        let cols: Tile<i32, { [BM, BN] }> = col_ids.reshape(shape![1, BN]).broadcast(tile);
        let rows: Tile<i32, { [BM, BN] }> = i.broadcast(tile);
        let key_ids: Tile<i32, { [BN, 1] }> = col_ids.reshape(shape![BN, 1]);
        let page_t: Tile<i32, { [BN, 1] }> = broadcast_scalar(page, col);
        let table_row: PointerTile<*mut i32, { [] }> = pointer_to_tile(table_ptr).offset(batch * table_sb);
        let table_one: PointerTile<*mut i32, { [1, 1] }> = table_row.reshape(shape![1, 1]);
        let table_rows: PointerTile<*mut i32, { [BN, 1] }> = table_one.broadcast(col);
        let mut m_i: Tile<f32, { [BM, 1] }> = constant(-3.4028235e38f32, shape![BM, 1]);
        let mut l_i: Tile<f32, { [BM, 1] }> = constant(0.0f32, shape![BM, 1]);
        let mut acc: Tile<f32, { [BM, D] }> = constant(0.0f32, shape![BM, D]);
        let zero_v: Tile<f32, { [BN, D] }> = constant(0.0f32, shape![BN, D]);
        let zero_vt: Tile<T, { [BN, D] }> = convert_tile(zero_v);
        // the cache as (pages, page, h_kv, D) views: the tiles' loads where PIECES is 1 or 4
        let k_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(k_ptr, pages, page, hkv, k_sp, k_ss, k_sh, tok) };
        let v_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(v_ptr, pages, page, hkv, v_sp, v_ss, v_sh, tok) };
        if PIECES == 1i32 {
            // BN divides the page: a key tile is BN consecutive slots of one page, read through views
            // of the cache (K through a permuted partition, landing [D, BN] as attention_decode's).
            let k_part: Partition<T, { [1, 1, D, BN] }> =
                k_view.partition_permuted(shape![1, 1, D, BN], const_array![0, 2, 3, 1]);
            let v_part: Partition<T, { [1, BN, 1, D] }> = v_view.partition(shape![1, BN, 1, D]);
            // the tile's page id, read a step ahead
            let mut next_id: i32 = 0i32;
            if t0 < t1 {
                next_id = unsafe { page_word(table_row, t0 * BN, page) };
            }
            for j in t0..t1 {
                let k0: i32 = j * BN;
                let page_id: i32 = next_id;
                let j_next: i32 = if j + 1i32 < t1 { j + 1i32 } else { j };
                next_id = unsafe { page_word(table_row, j_next * BN, page) };
                let slot_tile: i32 = (k0 % page) / BN;
                // a page outside the cache: its keys hidden (the view's loads there read zeros)
                let key_end: i32 = piece_end(page_id, pages, skv);
                let k: Tile<T, { [D, BN] }> =
                    k_part.load_pipelined::<2>([page_id, kv_head, 0i32, slot_tile]).reshape(shape![D, BN]);
                let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
                let visible: Tile<bool, { [BM, BN] }> =
                    visible_keys::<BM, BN, WINDOW>(rows, cols, 0i32, k0, key_end, diag, window);
                let v_raw: Tile<T, { [BN, D] }> =
                    v_part.load_pipelined::<4>([page_id, slot_tile, kv_head, 0i32]).reshape(shape![BN, D]);
                // slots past the sequence's end may hold anything (NaN): zero their value rows
                let keys: Tile<i32, { [BN, 1] }> = key_ids + broadcast_scalar(k0, col);
                let live_key: Tile<bool, { [BN, 1] }> = lt_tile(keys, broadcast_scalar(key_end, col));
                let live: Tile<bool, { [BN, D] }> = live_key.broadcast(shape![BN, D]);
                let v: Tile<T, { [BN, D] }> = select(live, v_raw, zero_vt);
                let (m_new, l_new, acc_new) =
                    online_step::<T, BM, BN, D>(select(visible, qk, neg_inf), v, qk_scale_log2, m_i, l_i, acc);
                m_i = m_new;
                l_i = l_new;
                acc = acc_new;
            }
        }
        if PIECES == 4i32 {
            // PER divides the page: a key tile is four pieces of PER slots, each in one page, each
            // read through the views as the whole tile is above and joined along the keys. A
            // piece's key is capped at cap - 1 (the table's last column; a tile may end past cap
            // when cap is not a multiple of BN): keys past s_kv are hidden whatever it reads.
            let k_part: Partition<T, { [1, 1, D, PER] }> =
                k_view.partition_permuted(shape![1, 1, D, PER], const_array![0, 2, 3, 1]);
            let v_part: Partition<T, { [1, PER, 1, D] }> = v_view.partition(shape![1, PER, 1, D]);
            let last: i32 = cap - 1i32;
            let piece: Shape<{ [1, PER] }> = shape![1, PER];
            // the tile's four page ids, read a step ahead
            let mut next_0: i32 = 0i32;
            let mut next_1: i32 = 0i32;
            let mut next_2: i32 = 0i32;
            let mut next_3: i32 = 0i32;
            if t0 < t1 {
                let a0: i32 = t0 * BN;
                next_0 = unsafe { page_word(table_row, a0, page) };
                next_1 = unsafe { page_word(table_row, min_i32(a0 + PER, last), page) };
                next_2 = unsafe { page_word(table_row, min_i32(a0 + 2i32 * PER, last), page) };
                next_3 = unsafe { page_word(table_row, min_i32(a0 + 3i32 * PER, last), page) };
            }
            for j in t0..t1 {
                let k0: i32 = j * BN;
                let (id_0, id_1, id_2, id_3) = (next_0, next_1, next_2, next_3);
                let j_next: i32 = if j + 1i32 < t1 { j + 1i32 } else { j };
                let a_next: i32 = j_next * BN;
                next_0 = unsafe { page_word(table_row, a_next, page) };
                next_1 = unsafe { page_word(table_row, min_i32(a_next + PER, last), page) };
                next_2 = unsafe { page_word(table_row, min_i32(a_next + 2i32 * PER, last), page) };
                next_3 = unsafe { page_word(table_row, min_i32(a_next + 3i32 * PER, last), page) };
                let s_0: i32 = (k0 % page) / PER;
                let s_1: i32 = (min_i32(k0 + PER, last) % page) / PER;
                let s_2: i32 = (min_i32(k0 + 2i32 * PER, last) % page) / PER;
                let s_3: i32 = (min_i32(k0 + 3i32 * PER, last) % page) / PER;
                let k_0: Tile<T, { [D, PER] }> =
                    k_part.load_pipelined::<2>([id_0, kv_head, 0i32, s_0]).reshape(shape![D, PER]);
                let k_1: Tile<T, { [D, PER] }> =
                    k_part.load_pipelined::<2>([id_1, kv_head, 0i32, s_1]).reshape(shape![D, PER]);
                let k_2: Tile<T, { [D, PER] }> =
                    k_part.load_pipelined::<2>([id_2, kv_head, 0i32, s_2]).reshape(shape![D, PER]);
                let k_3: Tile<T, { [D, PER] }> =
                    k_part.load_pipelined::<2>([id_3, kv_head, 0i32, s_3]).reshape(shape![D, PER]);
                let k_01: Tile<T, { [D, HALF] }> = cat(k_0, k_1, 1i32);
                let k_23: Tile<T, { [D, HALF] }> = cat(k_2, k_3, 1i32);
                let k: Tile<T, { [D, BN] }> = cat(k_01, k_23, 1i32);
                let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
                // each piece's keys end at s_kv, or at once where its page is outside the cache;
                // relative to k0, as the columns are
                let e_0: Tile<i32, { [1, PER] }> = broadcast_scalar(piece_end(id_0, pages, skv) - k0, piece);
                let e_1: Tile<i32, { [1, PER] }> = broadcast_scalar(piece_end(id_1, pages, skv) - k0, piece);
                let e_2: Tile<i32, { [1, PER] }> = broadcast_scalar(piece_end(id_2, pages, skv) - k0, piece);
                let e_3: Tile<i32, { [1, PER] }> = broadcast_scalar(piece_end(id_3, pages, skv) - k0, piece);
                let e_01: Tile<i32, { [1, HALF] }> = cat(e_0, e_1, 1i32);
                let e_23: Tile<i32, { [1, HALF] }> = cat(e_2, e_3, 1i32);
                let ends: Tile<i32, { [1, BN] }> = cat(e_01, e_23, 1i32);
                let in_page: Tile<bool, { [BM, BN] }> = lt_tile(cols, ends.broadcast(tile));
                let visible: Tile<bool, { [BM, BN] }> =
                    andi(visible_keys::<BM, BN, WINDOW>(rows, cols, 0i32, k0, skv, diag, window), in_page);
                let v_0: Tile<T, { [PER, D] }> =
                    v_part.load_pipelined::<4>([id_0, s_0, kv_head, 0i32]).reshape(shape![PER, D]);
                let v_1: Tile<T, { [PER, D] }> =
                    v_part.load_pipelined::<4>([id_1, s_1, kv_head, 0i32]).reshape(shape![PER, D]);
                let v_2: Tile<T, { [PER, D] }> =
                    v_part.load_pipelined::<4>([id_2, s_2, kv_head, 0i32]).reshape(shape![PER, D]);
                let v_3: Tile<T, { [PER, D] }> =
                    v_part.load_pipelined::<4>([id_3, s_3, kv_head, 0i32]).reshape(shape![PER, D]);
                let v_01: Tile<T, { [HALF, D] }> = cat(v_0, v_1, 0i32);
                let v_23: Tile<T, { [HALF, D] }> = cat(v_2, v_3, 0i32);
                let v_raw: Tile<T, { [BN, D] }> = cat(v_01, v_23, 0i32);
                // slots past a piece's end may hold anything (NaN): zero their value rows
                let key_end: Tile<i32, { [BN, 1] }> = ends.reshape(shape![BN, 1]);
                let live: Tile<bool, { [BN, D] }> = lt_tile(key_ids, key_end).broadcast(shape![BN, D]);
                let v: Tile<T, { [BN, D] }> = select(live, v_raw, zero_vt);
                let (m_new, l_new, acc_new) =
                    online_step::<T, BM, BN, D>(select(visible, qk, neg_inf), v, qk_scale_log2, m_i, l_i, acc);
                m_i = m_new;
                l_i = l_new;
                acc = acc_new;
            }
        }
        for j in t0..t_gather {
            let keys: Tile<i32, { [BN, 1] }> = key_ids + broadcast_scalar(j * BN, col);
            let live: Tile<bool, { [BN, 1] }> = lt_tile(keys, broadcast_scalar(skv, col));
            let table_at: PointerTile<*mut i32, { [BN, 1] }> = table_rows.offset_tile(keys / page_t);
            let (page_ids, _p_tok): (Tile<i32, { [BN, 1] }>, Token) =
                load_ptr_tko(table_at, ordering::Weak, None::<scope::TileBlock>, Some(live), None, None, Latency::<1>);
            let slots: Tile<i32, { [BN, 1] }> = keys % page_t;
            let in_cache: Tile<bool, { [BN, 1] }> =
                andi(ge_tile(page_ids, broadcast_scalar(0i32, col)), lt_tile(page_ids, broadcast_scalar(pages, col)));
            let read: Tile<bool, { [BN, 1] }> = andi(live, in_cache);
            let live_d: Tile<bool, { [BN, D] }> = read.broadcast(shape![BN, D]);
            let k_rows: Tile<T, { [BN, D] }> =
                unsafe { paged_tile::<T, BN, D>(k_ptr, page_ids, slots, live_d, k_sp, k_ss, kv_head * k_sh) };
            let k: Tile<T, { [D, BN] }> = permute(k_rows, const_array![1, 0]);
            let qk: Tile<f32, { [BM, BN] }> = mma(q, k, zero);
            let read_cols: Tile<bool, { [BM, BN] }> = read.reshape(shape![1, BN]).broadcast(tile);
            let visible: Tile<bool, { [BM, BN] }> =
                andi(visible_keys::<BM, BN, WINDOW>(rows, cols, 0i32, j * BN, skv, diag, window), read_cols);
            let v: Tile<T, { [BN, D] }> =
                unsafe { paged_tile::<T, BN, D>(v_ptr, page_ids, slots, live_d, v_sp, v_ss, kv_head * v_sh) };
            let (m_new, l_new, acc_new) =
                online_step::<T, BM, BN, D>(select(visible, qk, neg_inf), v, qk_scale_log2, m_i, l_i, acc);
            m_i = m_new;
            l_i = l_new;
            acc = acc_new;
        }

        unsafe {
            let o_first: i32 = batch * o_sb + kv_head * group * o_sh;
            store_decode_partial::<T, BM, D>(
                ws_acc,
                ws_m,
                ws_l,
                o_ptr,
                acc,
                m_i,
                l_i,
                b * hkv * splits,
                bid,
                o_first,
                g,
                i,
                q_mask,
                o_sh,
                o_ss,
                direct,
                tok,
            )
        };
    }

    /// Decode, step 2 of 2: grid = b · h · s_q · (D / DC) tile blocks, one per (batch, query head,
    /// query, DC-wide chunk of the head dim): only the real rows, none of the tile's padding. A block
    /// loads its row's m and l of every split ([SP] each, SP = splits rounded up to a power of two;
    /// the padding splits masked out) and its [SP, DC] slab of the partials in one round, no loop
    /// over the splits: M = the largest m (and, with SINKS, the head's sink logit · log2(e)), w_s =
    /// exp2(m_s - M), L = Σ l_s · w_s (+ exp2(sink - M)), O = Σ acc_s · w_s / max(L, 1) (L >= 1
    /// where a row saw a key or a sink, as in attention_fwd), stored in T to out (b, h, s_q, d).
    #[cutile::entry(unchecked_accesses = true)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn attention_decode_combine<
        T: ElementType,
        S: ElementType,
        const BM: i32,
        const D: i32,
        const SQ: i32,
        const SP: i32,
        const DC: i32,
        const SINKS: bool,
    >(
        o_ptr: *mut T, ws_acc: *mut f32, ws_m: *mut f32, ws_l: *mut f32, sinks_ptr: *mut S, b: i32, h: i32, hkv: i32,
        sq: i32, o_sb: i32, o_sh: i32, o_ss: i32, splits: i32,
    ) {
        let tok: Token = new_token_unordered();
        let bid: i32 = get_tile_block_id().0;
        let chunks: i32 = D / DC;
        let chunk: i32 = bid % chunks;
        let row: i32 = bid / chunks;
        let query: i32 = row % sq;
        let bh: i32 = row / sq;
        let batch: i32 = bh / h;
        let head: i32 = bh % h;
        let group: i32 = h / hkv;
        // The row of the split kernel's tile (decode_rows): head in the group · SQ + query.
        let r: i32 = (head % group) * SQ + query;
        let pair: i32 = batch * hkv + head / group;

        // The workspace as [pairs, splits, BM, D] (acc) and [pairs, splits, BM] (m, l).
        let pairs: i32 = b * hkv;
        let acc_shape: Shape<{ [-1, -1, -1, -1] }> = Shape::<{ [-1, -1, -1, -1] }> { dims: &[pairs, splits, BM, D] };
        let acc_strides: Array<{ [-1, -1, -1, 1] }> =
            Array::<{ [-1, -1, -1, 1] }> { dims: &[splits * BM * D, BM * D, D] };
        let acc_view: Tensor<f32, { [-1, -1, -1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(ws_acc), acc_shape, acc_strides, tok) };
        let acc_part: Partition<f32, { [1, SP, 1, DC] }> = acc_view.partition(shape![1, SP, 1, DC]);
        let row_shape: Shape<{ [-1, -1, -1] }> = Shape::<{ [-1, -1, -1] }> { dims: &[pairs, splits, BM] };
        let row_strides: Array<{ [-1, -1, 1] }> = Array::<{ [-1, -1, 1] }> { dims: &[splits * BM, BM] };
        let m_view: Tensor<f32, { [-1, -1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(ws_m), row_shape, row_strides, tok) };
        let l_view: Tensor<f32, { [-1, -1, -1] }> =
            unsafe { make_tensor_view(pointer_to_tile(ws_l), row_shape, row_strides, tok) };
        let m_part: Partition<f32, { [1, SP, 1] }> = m_view.partition(shape![1, SP, 1]);
        let l_part: Partition<f32, { [1, SP, 1] }> = l_view.partition(shape![1, SP, 1]);
        let m_raw: Tile<f32, { [SP, 1] }> = m_part.load([pair, 0i32, r]).reshape(shape![SP, 1]);
        let l_s: Tile<f32, { [SP, 1] }> = l_part.load([pair, 0i32, r]).reshape(shape![SP, 1]);
        let acc_s: Tile<f32, { [SP, DC] }> = acc_part.load([pair, 0i32, r, chunk]).reshape(shape![SP, DC]);

        // The padding splits (past `splits`) weigh nothing: m = the lowest finite f32 there, w = 0.
        let split_iota: Tile<i32, { [SP] }> = iota(shape![SP]);
        let split_ids: Tile<i32, { [SP, 1] }> = split_iota.reshape(shape![SP, 1]);
        let split_end: Tile<i32, { [SP, 1] }> = broadcast_scalar(splits, shape![SP, 1]);
        let real: Tile<bool, { [SP, 1] }> = lt_tile(split_ids, split_end);
        let lowest: Tile<f32, { [SP, 1] }> = constant(-3.4028235e38f32, shape![SP, 1]);
        let m_s: Tile<f32, { [SP, 1] }> = select(real, m_raw, lowest);
        let m_max: Tile<f32, { [1] }> = reduce_max(m_s, 0i32);
        let mut big_m: Tile<f32, { [1, 1] }> = m_max.reshape(shape![1, 1]);
        let mut sink_l: Tile<f32, { [1, 1] }> = constant(0.0f32, shape![1, 1]);
        if SINKS {
            // The sink is one more score of the row whose value is zero: it joins M and counts
            // exp2(sink - M) in L.
            let sink: Tile<f32, { [1, 1] }> = unsafe { sink_log2::<S>(sinks_ptr, h, head, tok) };
            big_m = maxf(big_m, sink, nan::Disabled, ftz::Disabled);
            sink_l = exp2(sink - big_m, ftz::Enabled);
        }
        let zero_w: Tile<f32, { [SP, 1] }> = constant(0.0f32, shape![SP, 1]);
        let w_all: Tile<f32, { [SP, 1] }> = exp2(m_s - big_m.broadcast(shape![SP, 1]), ftz::Enabled);
        let w: Tile<f32, { [SP, 1] }> = select(real, w_all, zero_w);
        let l_sum: Tile<f32, { [1] }> = reduce_sum(l_s * w, 0i32);
        let big_l: Tile<f32, { [1, 1] }> = l_sum.reshape(shape![1, 1]) + sink_l;
        let o_sum: Tile<f32, { [DC] }> = reduce_sum(acc_s * w.broadcast(shape![SP, DC]), 0i32);
        let out: Tile<T, { [1, DC] }> = normalized::<T, 1, DC>(o_sum.reshape(shape![1, DC]), big_l);
        let o_view: Tensor<T, { [-1, -1, -1, -1] }> =
            unsafe { bhsd_view::<T, D>(o_ptr, b, h, sq, o_sb, o_sh, o_ss, tok) };
        let mut o_part: PartitionMut<T, { [1, 1, 1, DC] }> = unsafe { o_view.partition_full_mut(shape![1, 1, 1, DC]) };
        o_part.store(out.reshape(shape![1, 1, 1, DC]), [batch, head, query, chunk]);
    }
}
