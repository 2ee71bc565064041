//! C-ABI launcher of attention: `cutile_attention` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_attention(const TensorDesc* out, const TensorDesc* q, const TensorDesc* k,
//!                            const TensorDesc* v, const TensorDesc* sinks, int32_t causal,
//!                            float scale, int32_t window,
//!                            int32_t bm, int32_t bn, int32_t occupancy, int32_t warps,
//!                            int32_t splits, int32_t depth, int32_t device_id, uint64_t stream);
//!
//! out = softmax(q kᵀ · scale + mask) v per (batch, head): q and out (b, h, s_q, d), k and v
//! (b, h_kv, s_kv, d) with h_kv dividing h (query head i reads key/value head i / (h / h_kv)), one
//! dtype (f16 or bf16), d 64 or 128, each with any strides for b, h and s and a contiguous last dim
//! (a (b, s, h, d) tensor's `.transpose(1, 2)` is read in place). `causal` 1 hides key j from query
//! i when j > i + s_kv - s_q (the mask aligned to the end of the keys), 0 hides nothing; `scale` is
//! the factor of the scores (> 0, finite).
//!
//! Optional, for gpt-oss / Mistral-style layers: `sinks` (null: none) a contiguous (h,) of q's
//! dtype or f32 (the kernel's S), per-head sink logits, each one more score of every query of its
//! head whose value row is zero (it only adds exp(sink - m) to the softmax denominator; not
//! multiplied by `scale`); `window` (-1: none) a sliding window of that many keys, which needs
//! `causal` = 1: query i sees key j iff i + s_kv - s_q - window < j <= i + s_kv - s_q. A window
//! of s_kv keys or more hides nothing and runs the kernel without one. Each is a const generic of
//! the kernel (SINKS, WINDOW): without them the kernel is the same program as before they existed.
//!
//! For training, `cutile_attention_lse(out, lse, q, k, v, sinks, ...)`, the same arguments with
//! `lse` after out: a contiguous f32 (b, h, s_q) that receives each query row's log-sum-exp of its
//! scaled scores in base 2 (m + log2(l), +inf for a row that sees no key and no sink), what
//! `cutile_attention_backward` recomputes the probabilities from (the kernel's LSE). It always runs
//! the forward kernel (the decode path keeps no row statistics; `splits` must be 0 or auto).
//!
//! For serving, `cutile_attention_paged(out, q, k_cache, v_cache, block_table, seqlens, sinks, scale,
//! window, bm, bn, occupancy, warps, splits, depth, device_id, stream)`: decode over a paged
//! key/value cache (vLLM's and FlashAttention's layout). k_cache and v_cache (pages, page, h_kv, d)
//! of q's dtype, any strides with a contiguous d; block_table (b, width) i32, row i the pages of
//! sequence i in order (key n in page block_table[i][n / page] at slot n % page); seqlens (b,) i32,
//! each sequence's keys (at most width · page: longer ones are cut there; a page id outside [0,
//! pages) is never read and its keys are hidden). The s_q <= 16 queries of sequence i are its last
//! positions: always the causal mask aligned to each sequence's own end; `window` and `sinks` as
//! above. Only the decode path: `splits` 1..=256 or -1..=-16 (auto), `bn` 16, 32, 64 or 128, `depth` -1,
//! `bm` unused; the split kernel (attention_decode_paged) loads a key tile through views of its page
//! where bn divides the page size, as four pieces of bn / 4 keys through views of their pages where
//! bn / 4 divides it (64-key tiles over 16-key pages), and otherwise gathers K and V row by row
//! through the table, so any page size works; the combine is the decode path's.
//!
//! The variant: `bm` / `bn` the query / key tile rows (64 or 128; bn 32 on the decode path only, and
//! bn 16 there: 64-key steps of four 16-key sub-tiles, attention_decode_batched),
//! `occupancy` (1..=32) and `warps` (worker warps per CTA: 4 or 8) compile hints for tileiras; -1
//! picks the default (the compiler's, for the hints). `splits` chooses the decode path (issue 41)
//! where s_q <= 16: 0 never (the forward kernel), n >= 1 the key/value cache cut in (at most) n
//! splits, -1 the decode path with a split count that fills the GPU (`auto_splits`: about 1 tile
//! block per SM) wherever it applies (`decode_rows`), else the forward kernel; -n (2 <= n <= 16)
//! the same with about n tile blocks per SM; -100 - n (1 <= n <= 16) the lean grid, exactly n
//! tile blocks per SM, each walking an equal share of every pair's key tiles laid end to end
//! (attention_decode_lean, LeanAttention's partition; `lean_shares` says where it applies, else as
//! -n). The decode path packs the `group` query heads of one
//! key/value head (GQA) and their s_q queries into one tile of rows, so K and V are read once for
//! all of them, walks its split of the key tiles, and writes partials (acc, max, sum) to a
//! stream-ordered workspace that a second kernel combines (with the sinks) into out, or, with one
//! split and no sinks, stores out itself; `bn` is its key tile too. `depth` (-1 the default) is the
//! latency hint (1..=16, with splits != 0) of the split kernel's K and V loads, from which tileiras
//! sizes their pipeline in shared memory: the K/V bytes a tile block keeps in flight and so how many
//! blocks share an SM (DECODE_DEFAULT_DEPTH); where the forward kernel runs instead (auto splits at
//! a shape the decode path does not take, or lse) it is unused, like `splits`. `bm` applies to the forward
//! kernel only; the hints to the forward kernel and, as given (without BM = 128's default of 8
//! warps), to the decode path's first kernel (its combine compiles at occupancy 8,
//! COMBINE_OCCUPANCY). Every descriptor is validated before anything touches the GPU: bad input
//! returns -2/-5/-6 with a message, never a launch.
use super::kernel::attention_device as device;
use crate::ffi_util::{self, invalid, or_default, to_i32, DType, Element, FfiResult, Launch, StreamAlloc, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "attention";

/// Default variant: 128 query rows by 64 key rows per step (TileGym's and FlashAttention-2's
/// Hopper forward tile for d = 128), with 8 worker warps when BM = 128: at tileiras's default of 4
/// the sm_90 cubin of the Llama-3-8B tile uses 255 registers and spills (104 bytes of stack), at 8
/// it uses 168 and none (cuobjdump -res-usage, NOTES.md). Unmeasured on a GPU; op.py's autotune
/// space tries the others.
pub const DEFAULT_BM: i32 = 128;
pub const DEFAULT_BN: i32 = 64;
pub const DEFAULT_WARPS_BM128: i32 = 8;
/// The head dims the kernel is compiled for (one tile spans the whole head dim).
const HEAD_DIMS: [i32; 2] = [64, 128];
/// The decode path takes at most this many queries per sequence (speculative decoding's few).
pub const DECODE_MAX_SQ: i32 = 16;
/// ... and at most this many packed rows (query heads of a group × s_q rounded up to a power of two).
pub const DECODE_MAX_ROWS: i32 = 128;
/// The fewest rows of a decode tile: the tensor cores' MMA needs 16.
const DECODE_MIN_ROWS: i32 = 16;
/// The most splits of one (batch, key/value head)'s cache.
pub const DECODE_MAX_SPLITS: i32 = 256;
/// Tile blocks per SM that splits = -1 asks for; splits = -n asks for n, up to DECODE_MAX_PER_SM.
/// One: the split kernel takes 255 registers a thread at its default hints, one tile block an SM,
/// so two an SM ran in two waves (NOTES.md, "Where the time went").
pub const DECODE_BLOCKS_PER_SM: i32 = 1;
/// The decode path's extra key tile: 32 keys at occupancy 2 take 128 registers a thread and 85 KB of
/// shared memory, so two split blocks share an SM (64 keys at occupancy 2: 115 KB, one; cuobjdump
/// of the launch at batch 1 over 8k, NOTES.md "Two split blocks an SM").
pub const DECODE_BN: i32 = 32;
/// The decode path's sub-tiled steps: bn = 16 asks for attention_decode_batched, whose 64-key step
/// is DECODE_SUBS sub-tiles of 16 keys, one a warp (NOTES.md, "Sub-tiles a warp each").
pub const DECODE_SUB_BN: i32 = 16;
pub const DECODE_SUBS: i32 = 4;
pub const DECODE_MAX_PER_SM: i32 = 16;
/// splits = DECODE_LEAN - n (n = 1..=DECODE_MAX_PER_SM): the lean grid at n tile blocks an SM
/// (attention_decode_lean, LeanAttention's partition), where it applies (`lean_shares`), else the
/// auto split count at n blocks an SM.
pub const DECODE_LEAN: i32 = -100;
/// The split kernels' K and V load latency hints at `depth` = -1 (what they were before the knob).
/// tileiras sizes the loads' pipeline from them: the shared memory a split block takes, so the
/// K/V bytes it keeps in flight and how many blocks share an SM (228 KB). As launched at batch 1
/// over 8k (cuobjdump -res-usage, NOTES.md "The loads' depth"): 64-key tiles 119 KB at (2, 4), 54
/// KB at depth 1, 86 at 2, 115 at 3, 208 at 8; 32-key tiles at occupancy 2 85 KB at (2, 4), 110 at 8.
pub const DECODE_DEFAULT_DEPTH: (i32, i32) = (2, 4);
/// `depth` = n sets both hints to n, 1..=DECODE_MAX_DEPTH.
pub const DECODE_MAX_DEPTH: i32 = 16;

/// The rows of a decode tile for `group` query heads per key/value head and `sq` queries:
/// (SQ, BM) = (s_q rounded up to a power of two, group · SQ rounded up to a power of two, >= 16),
/// or None where the decode path does not apply (s_q > DECODE_MAX_SQ, or more than
/// DECODE_MAX_ROWS rows).
pub fn decode_rows(group: i32, sq: i32) -> Option<(i32, i32)> {
    if !(1..=DECODE_MAX_SQ).contains(&sq) {
        return None;
    }
    let sq_pad = (sq as u32).next_power_of_two() as i32;
    let rows = ((group as i64 * sq_pad as i64) as u64).next_power_of_two().max(DECODE_MIN_ROWS as u64);
    (rows <= DECODE_MAX_ROWS as u64).then_some((sq_pad, rows as i32))
}

/// The split count that fills the GPU in one wave: the most splits whose tile blocks over the b ·
/// h_kv (batch, key/value head) pairs fit `per_sm` tile blocks per SM, at least 1 and at most one
/// per visible key tile (and DECODE_MAX_SPLITS). Rounded down, not up: one block past the SMs'
/// slots is a second wave of the same length (GQA 8 at batch 8: 64 pairs, 2 splits fill 128 of 132
/// SMs where 3 made 192 blocks; NOTES.md, "Timed on the H200").
pub fn auto_splits(sms: u32, pairs: i32, tiles: i32, per_sm: i32) -> i32 {
    let want = per_sm as i64 * sms as i64 / pairs.max(1) as i64;
    want.clamp(1, tiles.clamp(1, DECODE_MAX_SPLITS) as i64) as i32
}

/// The lean grid of `grid` tile blocks over `pairs` (batch, key/value head) pairs of `tiles` key
/// tiles each, laid end to end (attention_decode_lean): (share, extra, slots), block g walking
/// share + 1 tiles if g < extra else share, and a pair's partials in `slots` slots (the most blocks
/// one pair's tiles meet). None where it does not apply: fewer tiles than blocks, a share that
/// could span three pairs (share + 1 > tiles), more than DECODE_MAX_SPLITS slots, or a workspace
/// (pairs · slots · rows · d f32) past i32 indexing.
pub fn lean_shares(pairs: i32, tiles: i32, grid: i32, rows: i32, d: i32) -> Option<(i32, i32, i32)> {
    let (work, grid) = (pairs as i64 * tiles as i64, grid.max(1) as i64);
    let (share, extra) = (work / grid, work % grid);
    if share < 1 || share + 1 > tiles as i64 || work > i32::MAX as i64 {
        return None;
    }
    let long_end = extra * (share + 1);
    let block = |x: i64| if x < long_end { x / (share + 1) } else { extra + (x - long_end) / share };
    let tiles = tiles as i64;
    let slots = (0..pairs as i64).map(|p| block(p * tiles + tiles - 1) - block(p * tiles) + 1).max()?;
    let fits = pairs as i64 * slots * rows as i64 * d as i64 <= i32::MAX as i64;
    (slots <= DECODE_MAX_SPLITS as i64 && fits).then_some((share as i32, extra as i32, slots as i32))
}

/// The most partial elements (f32) one combine tile block folds: [SP, DC] of one row.
const COMBINE_TILE_ELEMENTS: i32 = 4096;
/// The combine's occupancy hint: at the compiler's default it takes 255 registers a thread, two
/// tile blocks an SM, and its b · h · s_q blocks ran in waves (19 µs at batch 64 where one wave
/// of the same loads takes ~3: NOTES.md, "A combine in one round").
const COMBINE_OCCUPANCY: i32 = 8;

/// The combine's tile for `splits` splits of a head dim `d`: (SP, DC) = (splits rounded up to a
/// power of two, the head-dim chunk: d, or less where SP · d would pass COMBINE_TILE_ELEMENTS, at
/// least 16). One tile block per (row, chunk) loads its [SP, DC] partials in one round.
pub fn combine_tile(splits: i32, d: i32) -> (i32, i32) {
    let sp = (splits.max(1) as u32).next_power_of_two() as i32;
    (sp, (COMBINE_TILE_ELEMENTS / sp).clamp(16, d))
}

/// The decode path's launch: SQ and BM (decode_rows), the splits asked for (-n: auto_splits of n
/// blocks per SM at launch, on the stream's GPU; -1: DECODE_BLOCKS_PER_SM) and the warps hint as
/// given (occupancy is the plan's); `subs` the sub-tiles of a key step (1: attention_decode,
/// DECODE_SUBS: attention_decode_batched, the plan's bn then the step's keys); `depth` the K and V
/// loads' latency hints (the kernels' KL, VL: DECODE_DEFAULT_DEPTH, or `depth` for both).
#[derive(Debug, PartialEq)]
pub struct Decode {
    pub sq_pad: i32,
    pub rows: i32,
    pub splits: i32,
    pub warps: Option<i32>,
    pub subs: i32,
    pub depth: (i32, i32),
}

/// A validated launch: sizes and strides (elements) as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub b: i32,
    pub h: i32,
    pub hkv: i32,
    pub sq: i32,
    pub skv: i32,
    pub d: i32,
    /// (sb, sh, ss) of out, q, k and v, in that order.
    pub strides: [[i32; 3]; 4],
    /// Key j is hidden from query i when j > i + diag: s_kv - s_q when causal, s_kv (never) otherwise.
    pub diag: i32,
    /// The sinks' dtype (q's or f32, the kernel's S) when given (the kernel's SINKS).
    pub sinks: Option<DType>,
    /// The window in keys (the kernel's WINDOW), None: none (or one that hides no key).
    pub window: Option<i32>,
    /// Whether the rows' log-sum-exp is written (`lse` given: the kernel's LSE).
    pub lse: bool,
    /// scale · log2(e): the kernel exponentiates in base 2.
    pub qk_scale_log2: f32,
    pub bm: i32,
    pub bn: i32,
    /// None: the compiler's default.
    pub occupancy: Option<i32>,
    pub warps: Option<i32>,
    /// The decode path (split key/value cache, GQA packing) instead of the forward kernel.
    pub decode: Option<Decode>,
}

impl Plan {
    /// The decode path's key tiles: (the first one the first query's window reaches, else 0; the
    /// end, ceil(s_kv / bn)).
    pub fn decode_tiles(&self) -> (i32, i32) {
        let first = self.window.map_or(0, |w| (self.diag - w + 1).max(0) / self.bn);
        (first.min((self.skv + self.bn - 1) / self.bn), (self.skv + self.bn - 1) / self.bn)
    }

    /// (splits, key tiles per split) of the decode path for `asked` splits (> 0), none empty.
    pub fn decode_split(&self, asked: i32) -> (i32, i32) {
        let (first, end) = self.decode_tiles();
        cut_splits(end - first, asked)
    }

    /// The launch grid: one tile block per (query tile, batch · head).
    pub fn grid(&self) -> (u32, u32, u32) {
        let tiles = (self.sq + self.bm - 1) / self.bm;
        (tiles as u32 * self.b as u32 * self.h as u32, 1, 1)
    }
}

/// (splits, tiles per split) cutting `visible` key tiles (at least 1) into at most `asked` splits of
/// equal length, the last possibly shorter, none empty.
fn cut_splits(visible: i32, asked: i32) -> (i32, i32) {
    let visible = visible.max(1);
    let per = (visible + asked.clamp(1, visible) - 1) / asked.clamp(1, visible);
    ((visible + per - 1) / per, per)
}

/// decode_rows for b sequences of h_kv key/value heads at head dim d, where one split per (batch,
/// key/value head) pair keeps the workspace (b · h_kv · rows · d f32) inside i32 indexing.
fn fitting_decode_rows(b: i64, hkv: i64, d: i32, group: i32, sq: i32) -> Option<(i32, i32)> {
    decode_rows(group, sq).filter(|&(_, rows)| b * hkv * rows as i64 * d as i64 <= i32::MAX as i64)
}

/// (sb, sh, ss) of a 4-D descriptor; the view it spans must be indexable with i32.
pub fn strides(d: &TensorDesc, arg: &str) -> FfiResult<[i32; 3]> {
    let extent: i64 = 1 + d.shape().iter().zip(d.strides()).map(|(n, s)| (n - 1) * s).sum::<i64>();
    if extent > i32::MAX as i64 {
        return Err(invalid(format!(
            "`{arg}` spans {extent} elements; the kernel indexes with i32 (at most {}): split the batch",
            i32::MAX
        )));
    }
    let s = |i: usize| to_i32(d.strides[i], &format!("{arg} stride {i}"));
    Ok([s(0)?, s(1)?, s(2)?])
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: Option<&TensorDesc>,
    lse: Option<&TensorDesc>, causal: i32, scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32,
    splits: i32, depth: i32,
) -> FfiResult<Plan> {
    let tensors = [(q, "q", 4), (k, "k", 4), (v, "v", 4), (out, "out", 4)];
    let dtype = ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    ffi_util::check_last_dims_contiguous(&[(q, "q"), (k, "k"), (v, "v"), (out, "out")])?;
    let [b, h, sq, d] = [0, 1, 2, 3].map(|i| q.shape[i]);
    if k.shape() != v.shape() || k.shape[0] != b || k.shape[3] != d {
        return Err(invalid(format!(
            "`k` {:?} and `v` {:?} must both be (b, h_kv, s_kv, d) with b={b} and d={d} of `q` {:?}",
            k.shape(),
            v.shape(),
            q.shape()
        )));
    }
    if out.shape() != q.shape() {
        return Err(invalid(format!("`out` shape {:?} != `q` shape {:?}", out.shape(), q.shape())));
    }
    let hkv = k.shape[1];
    if h % hkv != 0 {
        return Err(invalid(format!(
            "`q` has {h} heads and `k`/`v` {hkv}: the key/value heads must divide the query heads (GQA)"
        )));
    }
    let d = to_i32(d, "d")?;
    if !HEAD_DIMS.contains(&d) {
        return Err(invalid(format!("head dim d={d}: the kernel supports d = 64 and 128")));
    }
    if out.data == q.data || out.data == k.data || out.data == v.data {
        return Err(invalid("`out` must not alias `q`, `k` or `v`: tiles of out are written while they are read"));
    }
    if causal != 0 && causal != 1 {
        return Err(invalid(format!("causal={causal}: use 1 (causal mask) or 0 (none)")));
    }
    check_scale_and_sinks(scale, sinks, dtype, h)?;
    if let Some(l) = lse {
        check_lse(l, [b, h, sq])?;
    }
    if window != -1 && (window <= 0 || causal != 1) {
        return Err(invalid(format!(
            "window={window} with causal={causal}: a window is > 0 keys under the causal mask (causal=1), or -1 for none"
        )));
    }
    let (bm, bn) = (or_default(bm, DEFAULT_BM), or_default(bn, DEFAULT_BN));
    if ![64, 128].contains(&bm) || ![DECODE_SUB_BN, DECODE_BN, 64, 128].contains(&bn) {
        return Err(invalid(format!(
            "variant bm={bm} bn={bn}: each must be 64 or 128 (bn {DECODE_SUB_BN} or {DECODE_BN} on the decode path), \
             or -1 for the default"
        )));
    }
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let asked_warps = ffi_util::warps_hint(warps)?;
    let warps = asked_warps.or((bm == 128).then_some(DEFAULT_WARPS_BM128));
    let (sq, skv) = (to_i32(sq, "s_q")?, to_i32(k.shape[2], "s_kv")?);
    // The workspace is indexed with i32 (block · rows · d): one split per pair must fit.
    let rows = fitting_decode_rows(b, hkv, d, to_i32(h / hkv, "group")?, sq);
    let lean = (DECODE_LEAN - DECODE_MAX_PER_SM..=DECODE_LEAN - 1).contains(&splits);
    let auto = (-DECODE_MAX_PER_SM..=-1).contains(&splits) || lean;
    let depth = match depth {
        -1 => DECODE_DEFAULT_DEPTH,
        1..=DECODE_MAX_DEPTH if splits != 0 => (depth, depth),
        _ => {
            return Err(invalid(format!(
                "variant depth={depth}: the decode path's load latency hint, 1..={DECODE_MAX_DEPTH} with splits != 0, \
                 or -1 for the default"
            )))
        }
    };
    let decode = match (splits, rows) {
        (0, _) => None,
        _ if lse.is_some() && (auto || (0..=DECODE_MAX_SPLITS).contains(&splits)) => None,
        (_, None) if auto => None,
        (_, Some((sq_pad, rows))) if auto || (1..=DECODE_MAX_SPLITS).contains(&splits) => {
            let subs = if bn == DECODE_SUB_BN { DECODE_SUBS } else { 1 };
            Some(Decode { sq_pad, rows, splits, warps: asked_warps, subs, depth })
        }
        (1..=DECODE_MAX_SPLITS, None) => {
            return Err(invalid(format!(
                "splits={splits}: the decode path takes s_q <= {DECODE_MAX_SQ} queries of a key/value head's \
                 {} query heads in at most {DECODE_MAX_ROWS} rows (and a workspace of b · h_kv · rows · d \
                 < 2^31 f32), here s_q={sq}; use 0 or -1",
                h / hkv
            )))
        }
        _ => {
            return Err(invalid(format!(
                "splits={splits}: use 0 (the forward kernel), 1..={DECODE_MAX_SPLITS}, -1 (auto) to \
                 -{DECODE_MAX_PER_SM} (auto with that many tile blocks per SM), or {} to {} (the lean grid \
                 at 1 to {DECODE_MAX_PER_SM} tile blocks per SM)",
                DECODE_LEAN - 1,
                DECODE_LEAN - DECODE_MAX_PER_SM
            )))
        }
    };
    if lean && bn == DECODE_SUB_BN && decode.is_some() {
        return Err(invalid(format!(
            "variant bn={bn} splits={splits}: the lean grid walks 32-, 64- or 128-key tiles (not the \
             sub-tiled {DECODE_SUB_BN}-key form)"
        )));
    }
    // The training forward (lse) always runs the forward kernel: an auto-split candidate's 16- and
    // 32-key tiles (decode knobs, op.variants offers them at decode shapes) run there as 64.
    let decode_only = |bn| [DECODE_SUB_BN, DECODE_BN].contains(&bn);
    let bn = if decode_only(bn) && lse.is_some() && auto { DEFAULT_BN } else { bn };
    if decode_only(bn) && decode.is_none() {
        return Err(invalid(format!(
            "variant bn={bn}: {DECODE_SUB_BN}- and {DECODE_BN}-key tiles are the decode path's (s_q <= \
             {DECODE_MAX_SQ}, splits != 0, no lse); the forward kernel takes 64 or 128"
        )));
    }
    // The sub-tiled decode kernel walks steps of DECODE_SUBS sub-tiles: the plan's key tile is the step.
    let bn = if bn == DECODE_SUB_BN && decode.is_some() { DECODE_SUB_BN * DECODE_SUBS } else { bn };
    let p = Plan {
        dtype,
        b: to_i32(b, "b")?,
        h: to_i32(h, "h")?,
        hkv: to_i32(hkv, "h_kv")?,
        sq,
        skv,
        d,
        strides: [strides(out, "out")?, strides(q, "q")?, strides(k, "k")?, strides(v, "v")?],
        diag: if causal == 1 { skv - sq } else { skv },
        sinks: sinks.map(|s| s.dtype()).transpose()?,
        // Query i' = i + s_kv - s_q <= s_kv - 1 sees key j >= 0 > i' - window when window >= s_kv.
        window: (window != -1 && window < skv).then_some(window),
        lse: lse.is_some(),
        qk_scale_log2: scale * std::f32::consts::LOG2_E,
        bm,
        bn,
        occupancy,
        warps,
        decode,
    };
    let blocks = (sq as i64 + bm as i64 - 1) / bm as i64 * p.b as i64 * p.h as i64;
    if blocks > i32::MAX as i64 {
        return Err(invalid(format!("{blocks} tile blocks exceed the i32 block ids; split the batch")));
    }
    Ok(p)
}

/// `scale` finite and > 0; `sinks`, where given, a contiguous (h,) of q's dtype or f32.
fn check_scale_and_sinks(scale: f32, sinks: Option<&TensorDesc>, dtype: DType, h: i64) -> FfiResult<()> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(invalid(format!("scale={scale}: the scores' factor must be finite and > 0")));
    }
    if let Some(s) = sinks {
        ffi_util::check_tensor(s, "sinks", 1)?;
        if ![dtype, DType::F32].contains(&s.dtype()?) || s.shape[0] != h || (h > 1 && s.strides[0] != 1) {
            return Err(invalid(format!(
                "`sinks` is {} {:?} with strides {:?}: pass a contiguous ({h},) of q's dtype {} or f32, one logit per query head",
                s.dtype()?.name(),
                s.shape(),
                s.strides(),
                dtype.name()
            )));
        }
    }
    Ok(())
}

/// `lse` is a contiguous f32 (b, h, s_q) (the rows' log-sum-exp, written by the LSE kernel).
pub fn check_lse(lse: &TensorDesc, [b, h, sq]: [i64; 3]) -> FfiResult<()> {
    ffi_util::check_tensor(lse, "lse", 3)?;
    // contiguous: the strides of (b, h, s_q), where a dim of one element may have any (as torch's)
    let contiguous = lse.strides().iter().zip([h * sq, sq, 1]).zip(lse.shape()).all(|((&s, e), &n)| s == e || n == 1);
    if lse.dtype()? != DType::F32 || lse.shape() != [b, h, sq] || !contiguous {
        return Err(invalid(format!(
            "`lse` is {} {:?} with strides {:?}: pass a contiguous f32 ({b}, {h}, {sq}), one per query row",
            lse.dtype()?.name(),
            lse.shape(),
            lse.strides()
        )));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: Option<&TensorDesc>,
    lse: Option<&TensorDesc>, stream: &Arc<Stream>,
) -> FfiResult<()> {
    // The sinks' element type S: f32 or T; absent sinks pass q's pointer as T, which the kernel
    // compiled without SINKS never reads (nor one without LSE the lse pointer, then out's).
    let lse = lse.unwrap_or(out);
    match (sinks, p.sinks) {
        (Some(s), Some(DType::F32)) => launch_with::<T, f32>(p, out, q, k, v, s, lse, stream),
        (s, _) => launch_with::<T, T>(p, out, q, k, v, s.unwrap_or(q), lse, stream),
    }
}

#[allow(clippy::too_many_arguments)]
fn launch_with<T: Element, S: Element>(
    p: &Plan, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: &TensorDesc, lse: &TensorDesc,
    stream: &Arc<Stream>,
) -> FfiResult<()> {
    if let Some(d) = &p.decode {
        return launch_decode::<T, S>(p, d, out, q, k, v, sinks, stream);
    }
    let ptrs = unsafe {
        [out, q, k, v].map(|t| ffi_util::device_ptr::<T>(t)) // dtypes checked by plan()
    };
    let [o_ptr, q_ptr, k_ptr, v_ptr] = ptrs;
    let sinks_ptr = unsafe { ffi_util::device_ptr::<S>(sinks) }; // S checked by plan()
    let lse_ptr = unsafe { ffi_util::device_ptr::<f32>(lse) }; // f32 checked by plan() (read only with LSE)
    let mut launch = Launch::new::<T>(&[p.bm, p.bn, p.d], p.grid(), ffi_util::compile_options(p.occupancy, p.warps));
    // generics T, S, BM, BN, D, SINKS, WINDOW, LSE.
    launch.generics.insert(1, S::DTYPE.as_str().to_string());
    launch.generics.extend([p.sinks.is_some(), p.window.is_some(), p.lse].map(|b| b.to_string()));
    let [[o_sb, o_sh, o_ss], [q_sb, q_sh, q_ss], [k_sb, k_sh, k_ss], [v_sb, v_sh, v_ss]] = p.strides;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        #[rustfmt::skip] // the entry's arguments a tensor or a role a line (one per line would run 25 lines)
        let op = device::attention_fwd(
            o_ptr, q_ptr, k_ptr, v_ptr, sinks_ptr, lse_ptr,
            p.b, p.h, p.hkv, p.sq, p.skv,
            o_sb, o_sh, o_ss, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss,
            p.diag, p.window.unwrap_or(-1), p.qk_scale_log2,
        );
        launch.enqueue(op, stream)
    }
}

/// The decode path's partials: a stream-ordered workspace for `blocks` split blocks of `rows` ×
/// (d + 2) f32 (acc, then m, then l), or none where the split kernel stores out itself (`direct`: one
/// split and no sinks; its workspace pointers are then out's address, never read as one).
struct Partials<'s> {
    ws: Option<StreamAlloc<'s>>,
    acc: DevicePointer<f32>,
    m: DevicePointer<f32>,
    l: DevicePointer<f32>,
    direct: bool,
}

type DevicePointer<T> = cutile::cuda_async::device_buffer::DevicePointer<T>;

impl<'s> Partials<'s> {
    fn new(
        blocks: usize, rows: i32, d: i32, direct: bool, out: &TensorDesc, stream: &'s Arc<Stream>,
    ) -> FfiResult<Self> {
        let f32s = std::mem::size_of::<f32>();
        let ws_blocks = if direct { 0 } else { blocks };
        let (acc_bytes, row_bytes) = (ws_blocks * (rows * d) as usize * f32s, ws_blocks * rows as usize * f32s);
        let ws =
            (!direct).then(|| StreamAlloc::new(acc_bytes + 2 * row_bytes, stream, "decode workspace")).transpose()?;
        let base = ws.as_ref().map_or(out.data, |w| w.ptr);
        // SAFETY: three f32 arrays of the allocation just made; without one, out's address (above).
        let [acc, m, l] = unsafe {
            [0, acc_bytes, acc_bytes + row_bytes].map(|at| DevicePointer::<f32>::from_cu_deviceptr(base + at as u64))
        };
        Ok(Partials { ws, acc, m, l, direct })
    }

    /// attention_decode_combine over the b · h · s_q rows (× head-dim chunks, combine_tile) into out,
    /// after the split kernel (stream order); then the workspace is freed in stream order. Nothing
    /// where the split kernel stored out itself.
    #[allow(clippy::too_many_arguments)]
    unsafe fn combine<T: Element, S: Element>(
        self, d: &Decode, dims: [i32; 5], o_ptr: DevicePointer<T>, o_strides: [i32; 3], sinks_ptr: DevicePointer<S>,
        sinks: bool, splits: i32, stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        let Some(ws) = self.ws else { return Ok(()) };
        let [b, h, hkv, sq, hd] = dims;
        let [o_sb, o_sh, o_ss] = o_strides;
        let (sp, dc) = combine_tile(splits, hd);
        let rows = b as u32 * h as u32 * sq as u32 * (hd / dc) as u32;
        let options = ffi_util::compile_options(Some(COMBINE_OCCUPANCY), None);
        // generics T, S, BM, D, SQ, SP, DC, SINKS
        let mut combine = Launch::new::<T>(&[d.rows, hd, d.sq_pad, sp, dc], (rows, 1, 1), options);
        combine.generics.insert(1, S::DTYPE.as_str().to_string());
        combine.generics.push(sinks.to_string());
        // SAFETY: the caller's split kernel wrote b · h_kv · splits partials of d.rows × (hd + 2) f32
        // before this kernel reads them (stream order); out and the sinks are the plan's.
        combine.enqueue(
            unsafe {
                device::attention_decode_combine(
                    o_ptr, self.acc, self.m, self.l, sinks_ptr, b, h, hkv, sq, o_sb, o_sh, o_ss, splits,
                )
            },
            stream,
        )?;
        ws.free()
    }
}

/// The split count a decode launch asks for: `splits` > 0 as given, -n auto_splits of n blocks per
/// SM on the stream's GPU (-1: DECODE_BLOCKS_PER_SM), over `pairs` (batch, key/value head) pairs
/// and `tiles` key tiles; at most what keeps the workspace (block · rows · d f32) inside i32.
fn asked_splits(splits: i32, pairs: i32, tiles: i32, rows: i32, d: i32, stream: &Arc<Stream>) -> FfiResult<i32> {
    let asked = match splits {
        n if n > 0 => n,
        -1 => auto_splits(ffi_util::sm_count(stream)?, pairs, tiles, DECODE_BLOCKS_PER_SM),
        n if n < DECODE_LEAN => auto_splits(ffi_util::sm_count(stream)?, pairs, tiles, DECODE_LEAN - n),
        n => auto_splits(ffi_util::sm_count(stream)?, pairs, tiles, -n),
    };
    Ok(asked.min((i32::MAX as i64 / (pairs as i64 * rows as i64 * d as i64)).max(1) as i32))
}

/// The decode path: attention_decode over b · h_kv · splits tile blocks into a workspace on the
/// caller's stream, then attention_decode_combine over the b · h · s_q rows (× head-dim chunks,
/// combine_tile) into out; the workspace is freed in stream order after the combine (and on every
/// other way out: StreamAlloc). One split without sinks (batch 64 over 4k on 132 SMs): the split
/// kernel stores out itself (`direct`), with no workspace and no combine.
#[allow(clippy::too_many_arguments)]
fn launch_decode<T: Element, S: Element>(
    p: &Plan, d: &Decode, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: &TensorDesc,
    stream: &Arc<Stream>,
) -> FfiResult<()> {
    let pairs = p.b * p.hkv;
    let (first, end) = p.decode_tiles();
    if d.splits < DECODE_LEAN {
        let grid = (DECODE_LEAN - d.splits) * ffi_util::sm_count(stream)? as i32;
        if let Some(shares) = lean_shares(pairs, end - first, grid, d.rows, p.d) {
            return launch_lean::<T, S>(p, d, out, q, k, v, sinks, grid, shares, stream);
        }
    }
    // The workspace is indexed with i32 (block · rows · d); plan() checked one split per pair fits.
    let asked = asked_splits(d.splits, pairs, end - first, d.rows, p.d, stream)?;
    let (splits, per) = p.decode_split(asked);
    let blocks = pairs as usize * splits as usize;
    let partials = Partials::new(blocks, d.rows, p.d, splits == 1 && p.sinks.is_none(), out, stream)?;
    let (ws_acc, ws_m, ws_l, direct) = (partials.acc, partials.m, partials.l, partials.direct);
    let [o_ptr, q_ptr, k_ptr, v_ptr] = unsafe { [out, q, k, v].map(|t| ffi_util::device_ptr::<T>(t)) };
    let sinks_ptr = unsafe { ffi_util::device_ptr::<S>(sinks) }; // S checked by plan()
    let hinted = ffi_util::compile_options(p.occupancy, d.warps);
    // generics T, BM, BN, D, SQ, WINDOW, KL, VL (attention_decode_batched: T, BM, SUB, NB, BN, D,
    // SQ, WINDOW, KL, VL).
    let sizes = if d.subs > 1 {
        vec![d.rows, p.bn / d.subs, d.subs, p.bn, p.d, d.sq_pad]
    } else {
        vec![d.rows, p.bn, p.d, d.sq_pad]
    };
    let mut split = Launch::new::<T>(&sizes, (blocks as u32, 1, 1), hinted);
    split.generics.extend([p.window.is_some().to_string(), d.depth.0.to_string(), d.depth.1.to_string()]);
    let [[o_sb, o_sh, o_ss], [q_sb, q_sh, q_ss], [k_sb, k_sh, k_ss], [v_sb, v_sh, v_ss]] = p.strides;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the workspace
    // holds b · h_kv · splits tiles of rows × (d + 2) f32, written by the first kernel before the
    // second reads it (stream order), and freed after both.
    unsafe {
        // The two split kernels take the same arguments.
        macro_rules! enqueue_split {
            ($entry:path) => {
                #[rustfmt::skip] // as attention_fwd's launch
                let op = $entry(
                    ws_acc, ws_m, ws_l, o_ptr, q_ptr, k_ptr, v_ptr,
                    p.b, p.h, p.hkv, p.sq, p.skv,
                    o_sb, o_sh, o_ss, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss,
                    p.diag, p.window.unwrap_or(-1), p.qk_scale_log2,
                    splits, first, per, end, direct as i32,
                );
                split.enqueue(op, stream)?
            };
        }
        if d.subs > 1 {
            enqueue_split!(device::attention_decode_batched);
        } else {
            enqueue_split!(device::attention_decode);
        }
        let dims = [p.b, p.h, p.hkv, p.sq, p.d];
        partials.combine::<T, S>(d, dims, o_ptr, p.strides[0], sinks_ptr, p.sinks.is_some(), splits, stream)
    }
}

/// The decode path on a lean grid (`lean_shares`): attention_decode_lean over `grid` tile blocks,
/// then the combine over `slots` partials a pair, as launch_decode's.
#[allow(clippy::too_many_arguments)]
fn launch_lean<T: Element, S: Element>(
    p: &Plan, d: &Decode, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: &TensorDesc,
    grid: i32, (share, extra, slots): (i32, i32, i32), stream: &Arc<Stream>,
) -> FfiResult<()> {
    let (first, end) = p.decode_tiles();
    let partials = Partials::new((p.b * p.hkv * slots) as usize, d.rows, p.d, false, out, stream)?;
    let [o_ptr, q_ptr, k_ptr, v_ptr] = unsafe { [out, q, k, v].map(|t| ffi_util::device_ptr::<T>(t)) };
    let sinks_ptr = unsafe { ffi_util::device_ptr::<S>(sinks) }; // S checked by plan()
                                                                 // generics T, BM, BN, D, SQ, WINDOW, KL, VL, as attention_decode's
    let hinted = ffi_util::compile_options(p.occupancy, d.warps);
    let mut split = Launch::new::<T>(&[d.rows, p.bn, p.d, d.sq_pad], (grid as u32, 1, 1), hinted);
    split.generics.extend([p.window.is_some().to_string(), d.depth.0.to_string(), d.depth.1.to_string()]);
    let [[o_sb, o_sh, o_ss], [q_sb, q_sh, q_ss], [k_sb, k_sh, k_ss], [v_sb, v_sh, v_ss]] = p.strides;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; lean_shares() that
    // the workspace (b · h_kv · slots tiles) is indexable and that every pair's blocks fit its slots;
    // the combine reads it after the split kernel in stream order.
    unsafe {
        #[rustfmt::skip] // as attention_decode's launch
        let op = device::attention_decode_lean(
            partials.acc, partials.m, partials.l, o_ptr, q_ptr, k_ptr, v_ptr,
            p.b, p.h, p.hkv, p.sq, p.skv,
            o_sb, o_sh, o_ss, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss,
            p.diag, p.window.unwrap_or(-1), p.qk_scale_log2,
            first, end - first, share, extra, slots,
        );
        split.enqueue(op, stream)?;
        let dims = [p.b, p.h, p.hkv, p.sq, p.d];
        partials.combine::<T, S>(d, dims, o_ptr, p.strides[0], sinks_ptr, p.sinks.is_some(), slots, stream)
    }
}

/// A validated call of `cutile_attention_paged` (the file header): sizes, strides (elements) and the
/// decode launch. The cache holds `pages` pages of `page` keys; a sequence at most `width` pages
/// (the block table's width), so `cap` = width · page keys.
#[derive(Debug, PartialEq)]
pub struct PagedPlan {
    pub dtype: DType,
    pub b: i32,
    pub h: i32,
    pub hkv: i32,
    pub sq: i32,
    pub d: i32,
    pub pages: i32,
    pub page: i32,
    pub cap: i32,
    /// (sb, sh, ss) of out and q; (sp, ss, sh) of k_cache and v_cache: (page, slot, head)
    pub strides: [[i32; 3]; 4],
    pub table_sb: i32,
    pub sinks: Option<DType>,
    pub window: Option<i32>,
    pub qk_scale_log2: f32,
    pub bn: i32,
    pub occupancy: Option<i32>,
    pub decode: Decode,
}

impl PagedPlan {
    /// How the kernel reads a key tile (its PIECES): 1 where the tile lies in one page (bn divides
    /// the page), 4 where each quarter of it does (bn / 4 divides the page; bn >= 32, no pieces of
    /// 4 keys), both through views of the cache; 0 otherwise (the tile's rows gathered one by one).
    pub fn pieces(&self) -> i32 {
        if self.page % self.bn == 0 {
            1
        } else if self.bn >= 32 && self.page % (self.bn / 4) == 0 {
            4
        } else {
            0
        }
    }

    /// (splits, key tiles per split) for `asked` splits: the tiles a sequence of `cap` keys may show
    /// its queries (with a window, the window's tiles and the queries' spread: ceil((window + s_q -
    /// 1) / bn) + 1 at most), cut as Plan::decode_split cuts them.
    pub fn split(&self, asked: i32) -> (i32, i32) {
        let all = (self.cap + self.bn - 1) / self.bn;
        cut_splits(self.window.map_or(all, |w| all.min((w + self.sq - 1 + self.bn - 1) / self.bn + 1)), asked)
    }
}

/// The 1-D or 2-D i32 `arg` of `shape` with a contiguous last dim (the block table, the lengths).
fn check_i32(t: &TensorDesc, arg: &str, shape: &[i64], what: &str) -> FfiResult<()> {
    ffi_util::check_tensor(t, arg, shape.len() as i32)?;
    let last_ok = t.strides()[shape.len() - 1] == 1 || shape[shape.len() - 1] == 1;
    if t.dtype()? != DType::I32 || t.shape() != shape || !last_ok {
        return Err(invalid(format!(
            "`{arg}` is {} {:?} with strides {:?}: pass an int32 {shape:?} with a contiguous last dim, {what}",
            t.dtype()?.name(),
            t.shape(),
            t.strides()
        )));
    }
    Ok(())
}

// The export's arguments one for one (its C signature is fixed).
#[allow(clippy::too_many_arguments)]
pub fn plan_paged(
    out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, table: &TensorDesc, lens: &TensorDesc,
    sinks: Option<&TensorDesc>, scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32, splits: i32,
    depth: i32,
) -> FfiResult<PagedPlan> {
    let tensors = [(q, "q", 4), (k, "k_cache", 4), (v, "v_cache", 4), (out, "out", 4)];
    let dtype = ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    ffi_util::check_last_dims_contiguous(&[(q, "q"), (k, "k_cache"), (v, "v_cache"), (out, "out")])?;
    let [b, h, sq, d] = [0, 1, 2, 3].map(|i| q.shape[i]);
    if k.shape() != v.shape() || k.shape[3] != d {
        return Err(invalid(format!(
            "`k_cache` {:?} and `v_cache` {:?} must both be (pages, page, h_kv, d) with d={d} of `q` {:?}",
            k.shape(),
            v.shape(),
            q.shape()
        )));
    }
    if out.shape() != q.shape() {
        return Err(invalid(format!("`out` shape {:?} != `q` shape {:?}", out.shape(), q.shape())));
    }
    let [pages, page, hkv] = [0, 1, 2].map(|i| k.shape[i]);
    ffi_util::check_tensor(table, "block_table", 2)?;
    check_i32(table, "block_table", &[b, table.shape[1]], "one row of page ids per sequence")?;
    check_i32(lens, "seqlens", &[b], "each sequence's length in keys")?;
    if h % hkv != 0 {
        return Err(invalid(format!(
            "`q` has {h} heads and the cache {hkv}: the key/value heads must divide the query heads (GQA)"
        )));
    }
    let d = to_i32(d, "d")?;
    if !HEAD_DIMS.contains(&d) {
        return Err(invalid(format!("head dim d={d}: the kernel supports d = 64 and 128")));
    }
    if [q.data, k.data, v.data, table.data, lens.data].contains(&out.data) {
        return Err(invalid("`out` must not alias an input: its rows are written while the inputs are read"));
    }
    check_scale_and_sinks(scale, sinks, dtype, h)?;
    if window != -1 && window <= 0 {
        return Err(invalid(format!("window={window}: a window is > 0 keys, or -1 for none")));
    }
    let bn = or_default(bn, DEFAULT_BN);
    if !(bm == -1 || [64, 128].contains(&bm)) || ![DECODE_SUB_BN, DECODE_BN, 64, 128].contains(&bn) {
        return Err(invalid(format!(
            "variant bm={bm} bn={bn}: the paged cache's key tile bn is {DECODE_SUB_BN}, {DECODE_BN}, 64 or 128 (-1: \
             64); bm (the forward kernel's) is unused: 64, 128 or -1"
        )));
    }
    if !((-DECODE_MAX_PER_SM..=-1).contains(&splits) || (1..=DECODE_MAX_SPLITS).contains(&splits)) {
        return Err(invalid(format!(
            "splits={splits}: a paged cache has only the decode path: 1..={DECODE_MAX_SPLITS} splits, or -1 (auto) \
             to -{DECODE_MAX_PER_SM} (auto with that many tile blocks per SM)"
        )));
    }
    if depth != -1 {
        return Err(invalid(format!("variant depth={depth}: the paged cache's gathers take no depth hint; use -1")));
    }
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?;
    let (sq, group) = (to_i32(sq, "s_q")?, to_i32(h / hkv, "group")?);
    let Some((sq_pad, rows)) = fitting_decode_rows(b, hkv, d, group, sq) else {
        return Err(invalid(format!(
            "s_q={sq} queries of {group} query heads a key/value head: the paged cache's decode path takes s_q <= \
             {DECODE_MAX_SQ} in at most {DECODE_MAX_ROWS} rows (group · s_q rounded up to powers of two), and a \
             workspace of b · h_kv · rows · d < 2^31 f32"
        )));
    };
    let cap = table.shape[1] * page;
    if cap > i32::MAX as i64 || b * hkv * DECODE_MAX_SPLITS as i64 > i32::MAX as i64 {
        return Err(invalid(format!(
            "{} pages of {page} keys a sequence, {b} sequences: the kernel counts keys and blocks with i32",
            table.shape[1]
        )));
    }
    let decode = Decode { sq_pad, rows, splits, warps, subs: 1, depth: DECODE_DEFAULT_DEPTH };
    Ok(PagedPlan {
        dtype,
        b: to_i32(b, "b")?,
        h: to_i32(h, "h")?,
        hkv: to_i32(hkv, "h_kv")?,
        sq,
        d,
        pages: to_i32(pages, "pages")?,
        page: to_i32(page, "page")?,
        cap: cap as i32,
        strides: [strides(out, "out")?, strides(q, "q")?, strides(k, "k_cache")?, strides(v, "v_cache")?],
        table_sb: strides_2d(table, "block_table")?,
        sinks: sinks.map(|s| s.dtype()).transpose()?,
        window: (window != -1).then_some(window),
        qk_scale_log2: scale * std::f32::consts::LOG2_E,
        bn,
        occupancy,
        decode,
    })
}

/// The row stride of a 2-D descriptor whose extent i32 indexes.
fn strides_2d(t: &TensorDesc, arg: &str) -> FfiResult<i32> {
    let extent = 1 + (t.shape[0] - 1) * t.strides[0] + (t.shape[1] - 1) * t.strides[1];
    if extent > i32::MAX as i64 {
        return Err(invalid(format!("`{arg}` spans {extent} elements; the kernel indexes with i32")));
    }
    to_i32(t.strides[0], &format!("{arg} stride 0"))
}

#[allow(clippy::too_many_arguments)]
fn launch_paged<T: Element>(
    p: &PagedPlan, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, table: &TensorDesc,
    lens: &TensorDesc, sinks: Option<&TensorDesc>, stream: &Arc<Stream>,
) -> FfiResult<()> {
    match (sinks, p.sinks) {
        (Some(s), Some(DType::F32)) => launch_paged_with::<T, f32>(p, out, q, k, v, table, lens, s, stream),
        (s, _) => launch_paged_with::<T, T>(p, out, q, k, v, table, lens, s.unwrap_or(q), stream),
    }
}

/// attention_decode_paged over b · h_kv · splits tile blocks, then the combine (Partials), as
/// launch_decode does over a contiguous cache.
#[allow(clippy::too_many_arguments)]
fn launch_paged_with<T: Element, S: Element>(
    p: &PagedPlan, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, table: &TensorDesc,
    lens: &TensorDesc, sinks: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let (d, pairs) = (&p.decode, p.b * p.hkv);
    let asked = asked_splits(d.splits, pairs, (p.cap + p.bn - 1) / p.bn, d.rows, p.d, stream)?;
    let (splits, per) = p.split(asked);
    let blocks = pairs as usize * splits as usize;
    let partials = Partials::new(blocks, d.rows, p.d, splits == 1 && p.sinks.is_none(), out, stream)?;
    let [o_ptr, q_ptr, k_ptr, v_ptr] = unsafe { [out, q, k, v].map(|t| ffi_util::device_ptr::<T>(t)) };
    let [table_ptr, lens_ptr] = unsafe { [table, lens].map(|t| ffi_util::device_ptr::<i32>(t)) };
    let sinks_ptr = unsafe { ffi_util::device_ptr::<S>(sinks) }; // S checked by plan_paged()
    let hinted = ffi_util::compile_options(p.occupancy, d.warps);
    // generics T, BM, BN, D, SQ, WINDOW, PIECES, PER, HALF (a quarter and a half of the key tile)
    let mut split = Launch::new::<T>(&[d.rows, p.bn, p.d, d.sq_pad], (blocks as u32, 1, 1), hinted);
    split.generics.push(p.window.is_some().to_string());
    split.generics.extend([p.pieces(), p.bn / 4, p.bn / 2].map(|n| n.to_string()));
    let [[o_sb, o_sh, o_ss], [q_sb, q_sh, q_ss], [k_sp, k_ss, k_sh], [v_sp, v_ss, v_sh]] = p.strides;
    // SAFETY: plan_paged() checked shapes, strides and dtypes against the descriptors; the kernel
    // reads the table only at rows < b and columns < width (keys < cap), the cache only at page ids
    // inside [0, pages); the workspace as launch_decode's.
    unsafe {
        #[rustfmt::skip] // as attention_decode's launch
        let op = device::attention_decode_paged(
            partials.acc, partials.m, partials.l, o_ptr, q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr,
            p.b, p.h, p.hkv, p.sq, o_sb, o_sh, o_ss, q_sb, q_sh, q_ss, k_sp, k_ss, k_sh, v_sp, v_ss, v_sh,
            p.table_sb, p.page, p.pages, p.cap, p.window.unwrap_or(-1), p.qk_scale_log2,
            splits, per, partials.direct as i32,
        );
        split.enqueue(op, stream)?;
        let dims = [p.b, p.h, p.hkv, p.sq, p.d];
        partials.combine::<T, S>(d, dims, o_ptr, p.strides[0], sinks_ptr, p.sinks.is_some(), splits, stream)
    }
}

/// `cutile_attention_paged` (the file header): plan_paged() and launch_paged() take the export's
/// arguments one for one.
mod export_paged {
    use super::{launch_paged as launch, plan_paged as plan, *};

    crate::export!(cutile_attention_paged(out, q, k_cache, v_cache, block_table, seqlens; optional sinks; scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32, splits: i32, depth: i32));
}

/// `cutile_attention`: the descriptors, then plan() without lse, the caller's stream and launch()
/// (ffi_util::export!). `sinks` may be null.
mod export_forward {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn plan(
        out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: Option<&TensorDesc>, causal: i32,
        scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32, splits: i32, depth: i32,
    ) -> FfiResult<Plan> {
        super::plan(out, q, k, v, sinks, None, causal, scale, window, bm, bn, occupancy, warps, splits, depth)
    }

    fn launch<T: Element>(
        p: &Plan, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: Option<&TensorDesc>,
        stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        super::launch::<T>(p, out, q, k, v, sinks, None, stream)
    }

    crate::export!(cutile_attention(out, q, k, v; optional sinks; causal: i32, scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32, splits: i32, depth: i32));
}

/// `cutile_attention_lse`: the same with `lse` after out (the training forward).
mod export_lse {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    fn plan(
        out: &TensorDesc, lse: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, sinks: Option<&TensorDesc>,
        causal: i32, scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32, splits: i32, depth: i32,
    ) -> FfiResult<Plan> {
        super::plan(out, q, k, v, sinks, Some(lse), causal, scale, window, bm, bn, occupancy, warps, splits, depth)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch<T: Element>(
        p: &Plan, out: &TensorDesc, lse: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc,
        sinks: Option<&TensorDesc>, stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        super::launch::<T>(p, out, q, k, v, sinks, Some(lse), stream)
    }

    crate::export!(cutile_attention_lse(out, lse, q, k, v; optional sinks; causal: i32, scale: f32, window: i32, bm: i32, bn: i32, occupancy: i32, warps: i32, splits: i32, depth: i32));
}

#[cfg(test)]
pub(crate) mod tests {
    //! CPU tests: validation, the block and key-tile maps, and the entry lowered to Tile IR for
    //! sm_90 for every dtype, head dim and tile (then assembled by tileiras when it is there).
    use super::*;
    use crate::ffi_util::{assert_fails, assert_hints_checked, rc, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "attention_device" };

    /// A contiguous (b, h, s, d) descriptor at `data` (attention_backward's tests too).
    pub(crate) fn bhsd(dtype: DType, data: u64, [b, h, s, d]: [i64; 4]) -> TensorDesc {
        TensorDesc::from_parts(data, dtype, &[b, h, s, d], &[h * s * d, s * d, d, 1])
    }

    /// (out, q, k, v) contiguous.
    fn qkv(dtype: DType, [b, h, hkv, sq, skv, d]: [i64; 6]) -> [TensorDesc; 4] {
        [
            bhsd(dtype, 0x4000, [b, h, sq, d]),
            bhsd(dtype, 0x1000, [b, h, sq, d]),
            bhsd(dtype, 0x2000, [b, hkv, skv, d]),
            bhsd(dtype, 0x3000, [b, hkv, skv, d]),
        ]
    }

    fn plan_of(t: &[TensorDesc; 4], causal: i32) -> FfiResult<Plan> {
        plan(&t[0], &t[1], &t[2], &t[3], None, None, causal, 0.125, -1, -1, -1, -1, -1, 0, -1)
    }

    #[test]
    fn plan_takes_gqa_strides_and_the_causal_diagonal() {
        let t = qkv(DType::BF16, [2, 32, 8, 1000, 4097, 128]);
        let p = plan_of(&t, 1).unwrap();
        assert_eq!((p.b, p.h, p.hkv, p.sq, p.skv, p.d, p.diag, p.bm, p.bn), (2, 32, 8, 1000, 4097, 128, 3097, 128, 64));
        assert_eq!(p.strides[1], [32 * 1000 * 128, 1000 * 128, 128]);
        assert_eq!(p.grid(), (8 * 2 * 32, 1, 1));
        assert!((p.qk_scale_log2 - 0.125 * std::f32::consts::LOG2_E).abs() < 1e-7);
        assert_eq!(plan_of(&t, 0).unwrap().diag, 4097);
        assert_eq!((p.sinks, p.window), (None, None));
        // 8 worker warps by default for 128-row query tiles only; a given hint is kept.
        let [o, q, k, v] = &t;
        let warps = |bm, w| plan(o, q, k, v, None, None, 1, 0.125, -1, bm, -1, -1, w, 0, -1).unwrap().warps;
        assert_eq!((warps(-1, -1), warps(64, -1), warps(128, 4), warps(64, 8)), (Some(8), None, Some(4), Some(8)));
    }

    #[test]
    fn a_bshd_tensor_is_read_through_its_transposed_view() {
        // (b, s, h, d) storage viewed as (b, h, s, d): strides (s·h·d, d, h·d, 1).
        let (b, s, h, d) = (2, 17, 4, 64);
        let view = |data| TensorDesc::from_parts(data, DType::F16, &[b, h, s, d], &[s * h * d, d, h * d, 1]);
        let t = [view(0x4000), view(0x1000), view(0x2000), view(0x3000)];
        assert_eq!(plan_of(&t, 1).unwrap().strides[2], [17 * 4 * 64, 64, 4 * 64]);
    }

    #[test]
    fn plan_rejects_bad_input_naming_the_argument() {
        let [o, q, k, v] = qkv(DType::F16, [1, 4, 2, 8, 8, 64]);
        let cases = [
            ([o, q, bhsd(DType::F16, 0x2000, [1, 3, 8, 64]), bhsd(DType::F16, 0x3000, [1, 3, 8, 64])], "must divide"),
            ([o, q, k, bhsd(DType::F16, 0x3000, [1, 2, 9, 64])], "`k` [1, 2, 8, 64] and `v` [1, 2, 9, 64]"),
            ([bhsd(DType::F16, 0x4000, [1, 4, 9, 64]), q, k, v], "`out` shape [1, 4, 9, 64] != `q`"),
            ([q, q, k, v], "must not alias"),
            (qkv(DType::F16, [1, 4, 2, 8, 8, 96]), "head dim d=96: the kernel supports d = 64 and 128"),
            (
                [o, q, TensorDesc::from_parts(0x2000, DType::F16, &[1, 2, 8, 64], &[1024, 512, 1, 8]), v],
                "`k` must be contiguous in its last dim",
            ),
        ];
        for (t, needle) in cases {
            assert_fails(plan_of(&t, 0), rc::INVALID_ARGUMENT, needle);
        }
        let t = [o, q, k, v];
        assert_fails(plan_of(&t, 2), rc::INVALID_ARGUMENT, "causal=2");
        for scale in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert_fails(
                plan(&o, &q, &k, &v, None, None, 0, scale, -1, -1, -1, -1, -1, 0, -1),
                rc::INVALID_ARGUMENT,
                "scale=",
            );
        }
        assert_fails(
            plan(&o, &q, &k, &v, None, None, 0, 1.0, -1, 32, -1, -1, -1, 0, -1),
            rc::INVALID_ARGUMENT,
            "bm=32",
        );
        assert_fails(
            plan(&o, &q, &k, &v, None, None, 0, 1.0, -1, -1, 256, -1, -1, 0, -1),
            rc::INVALID_ARGUMENT,
            "bn=256",
        );
        assert_hints_checked(true, |occ, w| plan(&o, &q, &k, &v, None, None, 0, 1.0, -1, -1, -1, occ, w, 0, -1));
        let f32s = qkv(DType::F32, [1, 4, 2, 8, 8, 64]);
        assert_fails(plan_of(&f32s, 0), rc::UNSUPPORTED_DTYPE, "attention supports f16 and bf16");
    }

    /// A contiguous f32 (n,) at 0x5000.
    fn sinks_of(n: i64) -> TensorDesc {
        TensorDesc::from_parts(0x5000, DType::F32, &[n], &[1])
    }

    #[test]
    fn plan_takes_sinks_and_a_window_under_the_causal_mask() {
        let [o, q, k, v] = qkv(DType::BF16, [2, 32, 8, 1000, 4097, 128]);
        let p = |sinks, window| plan(&o, &q, &k, &v, sinks, None, 1, 0.125, window, -1, -1, -1, -1, 0, -1);
        let (s, s_bf16) = (sinks_of(32), TensorDesc::from_parts(0x5000, DType::BF16, &[32], &[1]));
        assert_eq!(p(Some(&s), -1).map(|p| (p.sinks, p.window)).unwrap(), (Some(DType::F32), None));
        assert_eq!(p(Some(&s_bf16), -1).unwrap().sinks, Some(DType::BF16));
        assert_eq!(p(None, 1024).map(|p| (p.sinks, p.window)).unwrap(), (None, Some(1024)));
        assert_eq!(p(Some(&s), 1).map(|p| (p.sinks, p.window)).unwrap(), (Some(DType::F32), Some(1)));
        // A window of s_kv keys or more hides nothing: the kernel without one.
        assert_eq!(p(None, 4096).unwrap().window, Some(4096));
        assert_eq!(p(None, 4097).unwrap().window, None);
        assert_eq!(p(None, i32::MAX).unwrap().window, None);
    }

    #[test]
    fn plan_rejects_bad_sinks_and_windows() {
        let [o, q, k, v] = qkv(DType::F16, [1, 4, 2, 8, 8, 64]);
        let p = |sinks, causal, window| plan(&o, &q, &k, &v, sinks, None, causal, 0.125, window, -1, -1, -1, -1, 0, -1);
        let sinks = [
            (TensorDesc::from_parts(0x5000, DType::BF16, &[4], &[1]), "`sinks` is bf16 [4]"),
            (sinks_of(2), "`sinks` is f32 [2] with strides [1]: pass a contiguous (4,) of q's dtype f16 or f32"),
            (TensorDesc::from_parts(0x5000, DType::F32, &[4], &[2]), "with strides [2]"),
            (TensorDesc::from_parts(0x5000, DType::F32, &[1, 4], &[4, 1]), "`sinks` must have 1 dims"),
        ];
        for (s, needle) in &sinks {
            assert_fails(p(Some(s), 1, -1), rc::INVALID_ARGUMENT, needle);
        }
        for (causal, window) in [(1, 0), (1, -2), (1, i32::MIN), (0, 4)] {
            let needle = format!("window={window} with causal={causal}: a window is > 0 keys under the causal mask");
            assert_fails(p(None, causal, window), rc::INVALID_ARGUMENT, &needle);
        }
    }

    #[test]
    fn plan_rejects_an_extent_beyond_i32() {
        let t = qkv(DType::BF16, [64, 32, 8, 8192, 8192, 128]);
        assert_fails(plan_of(&t, 1), rc::INVALID_ARGUMENT, "`out` spans 2147483648 elements");
    }

    #[test]
    fn every_block_id_maps_to_one_query_tile() {
        for (tiles_m, b, h) in [(1, 1, 1), (7, 2, 3), (32, 4, 32)] {
            let mut seen = vec![false; (tiles_m * b * h) as usize];
            for id in 0..tiles_m * b * h {
                let (bb, hh, mt) = device::block_coords(id, tiles_m, h);
                assert!((0..b).contains(&bb) && (0..h).contains(&hh) && (0..tiles_m).contains(&mt), "id {id}");
                let slot = &mut seen[((bb * h + hh) * tiles_m + mt) as usize];
                assert!(!*slot, "id {id} twice");
                *slot = true;
            }
        }
        // Heaviest query tile of a head first.
        assert_eq!(device::block_coords(0, 8, 4), (0, 0, 7));
    }

    #[test]
    fn key_tiles_stop_at_the_diagonal_and_mask_only_the_crossing_ones() {
        // The device's own map, brute-forced: tile j is unmasked iff every (row, key) of it is
        // visible, visited iff some is; unmasked tiles come first.
        let visible = |i: i32, j: i32, skv: i32, diag: i32| j < skv && j <= i + diag;
        for (sq, skv, causal) in
            [(1000, 1000, true), (17, 4097, true), (4097, 17, true), (1, 1, true), (300, 129, false)]
        {
            let diag = if causal { skv - sq } else { skv };
            for (bm, bn) in [(64, 64), (128, 64), (64, 128), (128, 128)] {
                for mt in 0..(sq + bm - 1) / bm {
                    let (full, visited) = match (bm, bn) {
                        (64, 64) => device::key_tiles::<64, 64>(mt, skv, diag),
                        (128, 64) => device::key_tiles::<128, 64>(mt, skv, diag),
                        (64, 128) => device::key_tiles::<64, 128>(mt, skv, diag),
                        _ => device::key_tiles::<128, 128>(mt, skv, diag),
                    };
                    for j in 0..(skv + bn - 1) / bn {
                        let cells =
                            || (mt * bm..(mt + 1) * bm).flat_map(|i| (j * bn..(j + 1) * bn).map(move |c| (i, c)));
                        let any = cells().any(|(i, c)| visible(i, c, skv, diag));
                        let all = cells().all(|(i, c)| visible(i, c, skv, diag));
                        let what = format!("sq={sq} skv={skv} causal={causal} bm={bm} bn={bn} mt={mt} j={j}");
                        assert_eq!(j < visited, any, "{what}: visited");
                        assert_eq!(j < full, all, "{what}: unmasked");
                    }
                }
            }
        }
    }

    #[test]
    fn the_window_skips_the_tiles_outside_it_and_masks_only_its_edges() {
        // window_tiles over key_tiles, brute-forced: tiles before `first` and from `visited` on
        // hold no visible (row, key), [first, visited) only tiles with one, [lo, hi) exactly the
        // tiles every row sees in full (run unmasked); causal, the window aligned like the mask.
        let visible = |i: i32, j: i32, skv: i32, diag: i32, w: i32| j < skv && j <= i + diag && j > i + diag - w;
        for (sq, skv) in [(1000, 1000), (17, 4097), (300, 129), (1, 1), (333, 1000), (4097, 4097)] {
            let diag = skv - sq;
            for w in [1, 2, 63, 64, 65, 127, 128, 129, 200, 1000, 4096] {
                for (bm, bn) in [(64, 64), (128, 64), (64, 128), (128, 128)] {
                    for mt in 0..(sq + bm - 1) / bm {
                        let (full, visited, (first, lo, hi)) = match (bm, bn) {
                            (64, 64) => {
                                let (f, v) = device::key_tiles::<64, 64>(mt, skv, diag);
                                (f, v, device::window_tiles::<64, 64>(mt, diag, w, f, v))
                            }
                            (128, 64) => {
                                let (f, v) = device::key_tiles::<128, 64>(mt, skv, diag);
                                (f, v, device::window_tiles::<128, 64>(mt, diag, w, f, v))
                            }
                            (64, 128) => {
                                let (f, v) = device::key_tiles::<64, 128>(mt, skv, diag);
                                (f, v, device::window_tiles::<64, 128>(mt, diag, w, f, v))
                            }
                            _ => {
                                let (f, v) = device::key_tiles::<128, 128>(mt, skv, diag);
                                (f, v, device::window_tiles::<128, 128>(mt, diag, w, f, v))
                            }
                        };
                        let what = format!("sq={sq} skv={skv} w={w} bm={bm} bn={bn} mt={mt}");
                        assert!(first <= lo && lo <= hi && hi <= visited && full <= visited, "{what}");
                        for j in 0..(skv + bn - 1) / bn {
                            let cells =
                                || (mt * bm..(mt + 1) * bm).flat_map(|i| (j * bn..(j + 1) * bn).map(move |c| (i, c)));
                            let any = cells().any(|(i, c)| visible(i, c, skv, diag, w));
                            let all = cells().all(|(i, c)| visible(i, c, skv, diag, w));
                            assert_eq!((first..visited).contains(&j), any, "{what} j={j}: visited");
                            assert_eq!((lo..hi).contains(&j), all, "{what} j={j}: unmasked");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_entry_lowers_to_tile_ir_for_sm90() {
        for dtype in ["f16", "bf16"] {
            for (bm, bn, d) in [("128", "64", "128"), ("64", "64", "64"), ("128", "128", "64"), ("64", "128", "128")] {
                DEVICE.assert_lowers(
                    "attention_fwd",
                    &[dtype, dtype, bm, bn, d, "false", "false", "false"],
                    &["mma", "exp2", "store_view_tko"],
                );
            }
        }
    }

    #[test]
    fn the_sinks_and_window_specializations_lower_to_tile_ir_for_sm90() {
        // Each of SINKS (of q's dtype and f32) and WINDOW alone and together, at both head dims
        // and tile shapes; LSE (the training forward) with and without them, which adds log2.
        for (dtype, s, bm, bn, d, sinks, window, lse) in [
            ("bf16", "bf16", "128", "64", "128", "true", "false", "false"),
            ("bf16", "bf16", "128", "64", "128", "false", "true", "false"),
            ("bf16", "f32", "128", "64", "64", "true", "true", "false"),
            ("f16", "f16", "64", "128", "128", "true", "true", "false"),
            ("f16", "f16", "64", "64", "64", "false", "true", "false"),
            ("bf16", "bf16", "128", "64", "128", "false", "false", "true"),
            ("f16", "f32", "64", "64", "64", "true", "true", "true"),
        ] {
            let generics = [dtype, s, bm, bn, d, sinks, window, lse];
            let ops: &[&str] =
                if lse == "true" { &["mma", "exp2", "log2"] } else { &["mma", "exp2", "store_view_tko"] };
            DEVICE.assert_lowers("attention_fwd", &generics, ops);
        }
    }

    #[test]
    fn the_llama_perf_config_lowers_as_launched_with_each_hint() {
        // Llama-3-8B at 4096 tokens, b = 4, contiguous: the launcher's divisibility hints (16-byte
        // aligned pointers, every size and stride a multiple of 16), with 4 and 8 worker warps and
        // occupancy 2 (TILEKIT_CUBIN_DIR keeps the cubins for cuobjdump -res-usage).
        use crate::ffi_util::{div_hints, ALIGNED_PTR};
        // Without sinks the launcher passes q's pointer as `sinks_ptr` (S = T, aligned); window -1
        // has no hint.
        let ptrs = [
            ("o_ptr", ALIGNED_PTR),
            ("q_ptr", ALIGNED_PTR),
            ("k_ptr", ALIGNED_PTR),
            ("v_ptr", ALIGNED_PTR),
            ("sinks_ptr", ALIGNED_PTR),
        ];
        let (hq, hk, s, d) = (32 * 4096 * 128, 8 * 4096 * 128, 4096 * 128, 128);
        let ints = [
            ("b", 4),
            ("h", 32),
            ("hkv", 8),
            ("sq", 4096),
            ("skv", 4096),
            ("o_sb", hq),
            ("o_sh", s),
            ("o_ss", d),
            ("q_sb", hq),
            ("q_sh", s),
            ("q_ss", d),
            ("k_sb", hk),
            ("k_sh", s),
            ("k_ss", d),
            ("v_sb", hk),
            ("v_sh", s),
            ("v_ss", d),
        ];
        for (bm, options, what) in [
            ("128", ffi_util::compile_options(None, Some(8)), "-warps8"),
            ("128", ffi_util::compile_options(Some(2), None), "-occupancy2"),
            ("64", ffi_util::compile_options(None, None), "-hinted"),
        ] {
            let generics = ["bf16", "bf16", bm, "64", "128", "false", "false", "false"];
            let ir = DEVICE.lower("attention_fwd", &generics, &div_hints(&ptrs, &ints), options, what);
            assert!(ir.contains("mma") && ir.contains("assume div_by<16>"), "{what}:\n{ir}");
        }
    }

    /// (out, q, k, v) of a decode step: b sequences of s_q queries over an s_kv cache.
    fn decode_qkv(b: i64, h: i64, hkv: i64, sq: i64, skv: i64) -> [TensorDesc; 4] {
        qkv(DType::BF16, [b, h, hkv, sq, skv, 128])
    }

    fn decode_plan(t: &[TensorDesc; 4], sinks: Option<&TensorDesc>, window: i32, splits: i32) -> FfiResult<Plan> {
        plan(&t[0], &t[1], &t[2], &t[3], sinks, None, 1, 0.125, window, -1, -1, -1, -1, splits, -1)
    }

    #[test]
    fn the_decode_path_packs_a_groups_queries_and_is_chosen_by_splits() {
        // GQA 4 (32 query heads, 8 key/value heads), one query: 4 rows, padded to the MMA's 16.
        assert_eq!(decode_rows(4, 1), Some((1, 16)));
        assert_eq!(decode_rows(8, 3), Some((4, 32))); // 3 queries in 4 slots per head
        assert_eq!(decode_rows(32, 4), Some((4, 128))); // MQA of 32 heads, 4 queries
        assert_eq!((decode_rows(32, 8), decode_rows(1, 17), decode_rows(1, 0)), (None, None, None));
        let t = decode_qkv(4, 32, 8, 1, 8192);
        let p = decode_plan(&t, None, -1, -1).unwrap();
        let depth = DECODE_DEFAULT_DEPTH;
        assert_eq!(p.decode, Some(Decode { sq_pad: 1, rows: 16, splits: -1, warps: None, subs: 1, depth }));
        // 8 blocks per SM
        assert_eq!(decode_plan(&t, None, -1, -8).unwrap().decode.unwrap().splits, -8);
        // The decode kernel takes the warps hint as given: not BM = 128's default of 8 for the forward.
        let warps = |bm, w| plan(&t[0], &t[1], &t[2], &t[3], None, None, 1, 0.125, -1, bm, -1, -1, w, -1, -1).unwrap();
        assert_eq!((warps(128, -1).warps, warps(128, -1).decode.unwrap().warps), (Some(8), None));
        assert_eq!(warps(64, 4).decode.unwrap().warps, Some(4));
        assert_eq!(decode_plan(&t, None, -1, 0).unwrap().decode, None); // the forward kernel

        // depth: the split kernel's K and V load latency hints, 1..=DECODE_MAX_DEPTH for both, on
        // the decode path only (refused with splits = 0).
        let deep =
            |splits, depth| plan(&t[0], &t[1], &t[2], &t[3], None, None, 1, 0.125, -1, -1, -1, -1, -1, splits, depth);
        assert_eq!(deep(-4, 1).unwrap().decode.unwrap().depth, (1, 1));
        assert_eq!(deep(7, DECODE_MAX_DEPTH).unwrap().decode.unwrap().depth, (16, 16));
        for (splits, bad) in [(-1, 0), (-1, DECODE_MAX_DEPTH + 1), (-1, -2), (0, 8)] {
            assert_fails(deep(splits, bad), rc::INVALID_ARGUMENT, &format!("variant depth={bad}: the decode path's"));
        }
        assert_eq!(decode_plan(&t, None, -1, 7).unwrap().decode.unwrap().splits, 7);
        // Prefill: auto runs the forward kernel, an explicit split count is refused.
        let prefill = decode_qkv(1, 32, 8, 1000, 1000);
        assert_eq!(decode_plan(&prefill, None, -1, -1).unwrap().decode, None);
        assert_fails(
            decode_plan(&prefill, None, -1, 4),
            rc::INVALID_ARGUMENT,
            "splits=4: the decode path takes s_q <= 16",
        );
        for bad in [-DECODE_MAX_PER_SM - 1, DECODE_MAX_SPLITS + 1, DECODE_LEAN, DECODE_LEAN - DECODE_MAX_PER_SM - 1] {
            assert_fails(decode_plan(&t, None, -1, bad), rc::INVALID_ARGUMENT, &format!("splits={bad}: use 0"));
        }
        // The lean grid: the decode path as auto's (its grid is the launcher's), not for 16-key
        // sub-tiles; at a prefill shape the forward kernel, as auto.
        let lean = decode_plan(&t, None, -1, DECODE_LEAN - 2).unwrap().decode.unwrap();
        assert_eq!(lean.splits, DECODE_LEAN - 2);
        assert_eq!(decode_plan(&prefill, None, -1, DECODE_LEAN - 1).unwrap().decode, None);
        let sub = plan(&t[0], &t[1], &t[2], &t[3], None, None, 1, 0.125, -1, -1, 16, -1, -1, DECODE_LEAN - 1, -1);
        assert_fails(sub, rc::INVALID_ARGUMENT, "the lean grid walks 32-, 64- or 128-key tiles");
        // 32-key tiles: the decode path's only (a decode shape with splits != 0), refused elsewhere.
        let bn32 = |t: &[TensorDesc; 4], splits| {
            plan(&t[0], &t[1], &t[2], &t[3], None, None, 1, 0.125, -1, -1, 32, 2, -1, splits, -1)
        };
        assert_eq!(bn32(&t, -2).unwrap().bn, 32);
        for (shape, splits) in [(&t, 0), (&prefill, -1)] {
            assert_fails(
                bn32(shape, splits),
                rc::INVALID_ARGUMENT,
                "variant bn=32: 16- and 32-key tiles are the decode path's",
            );
        }
        // 16-key sub-tiles: attention_decode_batched, four a 64-key step (the plan's bn).
        let bn16 = |t: &[TensorDesc; 4], splits| {
            plan(&t[0], &t[1], &t[2], &t[3], None, None, 1, 0.125, -1, -1, 16, -1, -1, splits, -1)
        };
        let sub = bn16(&t, -1).unwrap();
        assert_eq!((sub.bn, sub.decode.unwrap().subs), (64, DECODE_SUBS));
        assert_fails(bn16(&prefill, -1), rc::INVALID_ARGUMENT, "variant bn=16: 16- and 32-key tiles");
        // ... but the training forward (lse: the forward kernel always) runs an auto-split
        // candidate's 32-key tiles as 64, so autotune's candidates all launch there.
        let lse = ffi_util::test_desc(DType::F32, &[4, 32, 1], &[32, 1, 1]);
        for bn in [16, 32] {
            let with_lse =
                plan(&t[0], &t[1], &t[2], &t[3], None, Some(&lse), 1, 0.125, -1, -1, bn, 2, -1, -2, -1).unwrap();
            assert_eq!((with_lse.bn, with_lse.decode), (DEFAULT_BN, None));
        }
    }

    #[test]
    fn splits_cover_the_visible_key_tiles_with_none_empty() {
        // 8192 keys in 64-wide tiles: 128 tiles; with a 1000-key window the first query sees
        // keys from 8192 - 1000 on: tiles 112.. (7192 / 64 = 112).
        let t = decode_qkv(1, 32, 8, 1, 8192);
        let p = decode_plan(&t, None, -1, -1).unwrap();
        assert_eq!(p.decode_tiles(), (0, 128));
        assert_eq!(p.decode_split(33), (32, 4)); // 4 tiles a split: 32 splits, the last full
        assert_eq!(p.decode_split(1000), (128, 1));
        assert_eq!(p.decode_split(3), (3, 43)); // 43 + 43 + 42
        let w = decode_plan(&t, None, 1000, -1).unwrap();
        assert_eq!(w.decode_tiles(), (112, 128));
        assert_eq!(w.decode_split(4), (4, 4));
        for (skv, asked) in [(1, 5), (65, 2), (4097, 7), (100, 100)] {
            let p = decode_plan(&decode_qkv(1, 8, 8, 1, skv), None, -1, -1).unwrap();
            let (first, end) = p.decode_tiles();
            let (splits, per) = p.decode_split(asked);
            assert!(
                splits * per >= end - first && (splits - 1) * per < (end - first).max(1),
                "skv={skv} asked={asked}"
            );
        }
        // auto: n tile blocks per SM over the (batch, kv head) pairs, within [1, tiles]; -1 asks one
        // (the split kernel holds one an SM): batch 1 over 8k of Llama-3-8B on 132 SMs, 16 splits of 8
        let one_per_sm = auto_splits(132, 8, 128, DECODE_BLOCKS_PER_SM);
        let llama = decode_plan(&decode_qkv(1, 32, 8, 1, 8192), None, -1, -1).unwrap();
        assert_eq!((one_per_sm, llama.decode_split(one_per_sm)), (16, (16, 8)));
        assert_eq!((auto_splits(132, 8, 128, 2), auto_splits(132, 512, 128, 2), auto_splits(132, 8, 3, 2)), (33, 1, 3));
        assert_eq!((auto_splits(132, 8, 128, 8), auto_splits(132, 1, 8192, 16)), (128, DECODE_MAX_SPLITS));
        // Rounded down to one wave: GQA 8 at batch 8 (64 pairs) 2 splits, not 3 (192 blocks); batch
        // 16 (128 pairs) 1, not 2; at 4 blocks an SM 8 splits of 64 pairs (512 of 528 slots), not 9.
        assert_eq!(
            (auto_splits(132, 64, 128, 1), auto_splits(132, 128, 128, 1), auto_splits(132, 64, 128, 4)),
            (2, 1, 8)
        );
    }

    #[test]
    fn the_decode_kernels_lower_as_launched_at_batch_1_over_8k() {
        // Llama-3-8B's decode step at batch 1 over 8192 keys, contiguous (b, h, s, d): the
        // launcher's divisibility hints, 16 splits of 8 key tiles (auto_splits at one block an SM),
        // the combine at (SP, DC) = (16, 128) (TILEKIT_CUBIN_DIR keeps the cubins for cuobjdump).
        use crate::ffi_util::{div_hints, ALIGNED_PTR};
        let ptr_names = ["ws_acc", "ws_m", "ws_l", "q_ptr", "k_ptr", "v_ptr", "o_ptr", "sinks_ptr"];
        let ptrs: Vec<(&str, u64)> = ptr_names.iter().map(|&n| (n, ALIGNED_PTR)).collect();
        let (hq, hk, d) = (32 * 128, 8 * 8192 * 128, 128);
        let shared = [("b", 1), ("h", 32), ("hkv", 8), ("sq", 1), ("splits", 16)];
        let (kv_sh, kv_ss) = (8192 * d, d);
        let mut split_ints = vec![("skv", 8192), ("q_sb", hq), ("q_sh", d), ("q_ss", d), ("diag", 8191)];
        split_ints.extend([
            ("k_sb", hk),
            ("k_sh", kv_sh),
            ("k_ss", kv_ss),
            ("v_sb", hk),
            ("v_sh", kv_sh),
            ("v_ss", kv_ss),
        ]);
        split_ints.extend([("first_tile", 0), ("tiles_per_split", 8), ("tiles_end", 128), ("direct", 0)]);
        split_ints.extend([("o_sb", hq), ("o_sh", d), ("o_ss", d)]);
        split_ints.extend(shared);
        // attention_decode as op.variants' candidates launch it, and the two the H100 probe dropped
        // (depth 8; occupancy 4 at depth 1): (bn, occupancy, the K and V loads' latency hints:
        // DECODE_DEFAULT_DEPTH or `depth` for both). cuobjdump -res-usage of the kept cubins
        // (NOTES.md, "The loads' depth"): 64-key tiles 255 registers and 119 KB of shared memory at
        // the default hints (one block an SM; 4 warps the same), 208 KB at depth 8 (one, about
        // twice the loads in flight); 32-key tiles at occupancy 2, 128 registers and 85 KB (two);
        // 64-key at occupancy 2 and depth 2, 128 and 86 KB (two); at occupancy 4 and depth 1, 64
        // and 54 KB (four; at the default depth 119 KB, so one).
        let candidates = [
            ("64", None, ("2", "4"), "-batch1-8k"),
            ("64", None, ("8", "8"), "-batch1-8k-depth8"),
            ("32", Some(2), ("2", "4"), "-batch1-8k-occupancy2"),
            ("64", Some(2), ("2", "2"), "-batch1-8k-occupancy2-depth2"),
            ("64", Some(4), ("1", "1"), "-batch1-8k-occupancy4-depth1"),
        ];
        for (bn, occupancy, (kl, vl), what) in candidates {
            let ir = DEVICE.lower(
                "attention_decode",
                &["bf16", "16", bn, "128", "1", "false", kl, vl],
                &div_hints(&ptrs, &split_ints),
                ffi_util::compile_options(occupancy, None),
                what,
            );
            assert!(ir.contains("mma") && ir.contains("exp2"), "{what}: {ir}");
        }
        // The lean grid at two blocks an SM (264 on 132 SMs): 8 pairs of 128 tiles laid end to end,
        // shares of 3 and 4 tiles, 40 slots a pair (lean_shares); 64-key tiles at occupancy 2 and depth 2.
        let mut lean_ints: Vec<(&str, i32)> = split_ints
            .iter()
            .copied()
            .filter(|(name, _)| !["splits", "tiles_per_split", "tiles_end", "direct"].contains(name))
            .collect();
        lean_ints.extend([("pair_tiles", 128), ("share", 3), ("extra", 232), ("slots", 40)]);
        let ir = DEVICE.lower(
            "attention_decode_lean",
            &["bf16", "16", "64", "128", "1", "false", "2", "2"],
            &div_hints(&ptrs, &lean_ints),
            ffi_util::compile_options(Some(2), None),
            "-batch1-8k-occupancy2-depth2",
        );
        assert!(ir.contains("mma") && ir.contains("exp2"), "{ir}");
        // The sub-tiled form (bn = 16): four 16-key sub-tiles a 64-key step, at the default hints.
        let ir = DEVICE.lower(
            "attention_decode_batched",
            &["bf16", "16", "16", "4", "64", "128", "1", "false", "2", "4"],
            &div_hints(&ptrs, &split_ints),
            ffi_util::compile_options(None, None),
            "-batch1-8k",
        );
        assert!(ir.contains("mma") && ir.contains("permute"), "{ir}");
        let mut combine_ints = vec![("o_sb", hq), ("o_sh", d), ("o_ss", d)];
        combine_ints.extend(shared);
        let ir = DEVICE.lower(
            "attention_decode_combine",
            &["bf16", "bf16", "16", "128", "1", "16", "128", "false"],
            &div_hints(&ptrs, &combine_ints),
            ffi_util::compile_options(Some(COMBINE_OCCUPANCY), None),
            "-batch1-8k",
        );
        assert!(ir.contains("exp2") && ir.contains("store_view_tko") && ir.contains("occupancy = 8"), "{ir}");
    }

    /// attention_decode_lean's arithmetic, block by block as the kernel does it: (pair, tiles
    /// [t0, t1), slot) of each segment it stores, and the slots it fills empty.
    fn lean_walk(
        pairs: i32, tiles: i32, grid: i32, (share, extra, slots): (i32, i32, i32),
    ) -> Vec<(i32, i32, i32, i32)> {
        let lean_block = |x: i32| {
            let long_end = extra * (share + 1);
            if x < long_end {
                x / (share + 1)
            } else {
                extra + (x - long_end) / share
            }
        };
        let mut stores = vec![];
        for bid in 0..grid {
            let lo = bid * share + bid.min(extra);
            let hi = lo + share + i32::from(bid < extra);
            let pair_a = lo / tiles;
            let start_a = pair_a * tiles;
            let a1 = (hi - start_a).min(tiles);
            let slot_a = bid - lean_block(start_a);
            stores.push((pair_a, lo - start_a, a1, slot_a));
            if hi >= start_a + tiles {
                stores.extend((slot_a + 1..slots).map(|slot| (pair_a, 0, 0, slot)));
            }
            let b1 = hi - (start_a + tiles);
            if b1 > 0 {
                assert!(pair_a + 1 < pairs, "block {bid} walks past the last pair");
                stores.push((pair_a + 1, 0, b1, 0));
            }
        }
        stores
    }

    #[test]
    fn the_lean_grid_walks_every_tile_once_and_fills_every_slot_once() {
        // batch 1 over 8k (8 pairs of 128 tiles) at 2 blocks an SM of 132; batch 16 (128 pairs) at 1;
        // 64 heads at batch 8 over 8k; a window's few tiles; shapes that do not divide
        for (pairs, tiles, grid) in
            [(8, 128, 264), (128, 128, 132), (64, 128, 132), (8, 7, 16), (7, 37, 100), (5, 9, 7)]
        {
            let Some(shares) = lean_shares(pairs, tiles, grid, 16, 128) else {
                panic!("{pairs} pairs of {tiles} tiles over {grid} blocks: no lean grid")
            };
            let slots = shares.2;
            let mut walked = vec![0; (pairs * tiles) as usize];
            let mut stored = vec![0; (pairs * slots) as usize];
            for (pair, t0, t1, slot) in lean_walk(pairs, tiles, grid, shares) {
                assert!((0..slots).contains(&slot), "slot {slot} of {slots}");
                stored[(pair * slots + slot) as usize] += 1;
                for t in t0..t1 {
                    walked[(pair * tiles + t) as usize] += 1;
                }
            }
            assert!(walked.iter().all(|&n| n == 1), "{pairs}x{tiles} over {grid}: a tile walked {walked:?}");
            assert!(stored.iter().all(|&n| n == 1), "{pairs}x{tiles} over {grid}: a slot stored {stored:?}");
        }
        // b 1 over 8k at 264 blocks: shares of 3 and 4 tiles, 40 slots a pair at most
        assert_eq!(lean_shares(8, 128, 264, 16, 128), Some((3, 232, 40)));
        // where it does not apply: fewer tiles than blocks; shares past a pair's tiles (b 64 over
        // 4k: 512 pairs of 64 tiles over 264 blocks); more slots than the combine folds
        assert_eq!(lean_shares(2, 3, 8, 16, 128), None);
        assert_eq!(lean_shares(512, 64, 264, 16, 128), None);
        assert_eq!(lean_shares(1, 600, 300, 16, 128), None);
    }

    #[test]
    fn the_combine_folds_every_split_of_a_row_in_one_tile_of_at_most_4096_partials() {
        // (splits, d) -> (SP, DC): batch 1 over 8k (16 splits) in one [16, 128] tile a row; 33
        // splits pad to 64 in 64-wide chunks; 256 in 16-wide ones; d = 64 whole up to 64 splits.
        let cases = [((1, 128), (1, 128)), ((16, 128), (16, 128)), ((33, 128), (64, 64)), ((256, 128), (256, 16))];
        for ((splits, d), want) in cases.into_iter().chain([((64, 64), (64, 64)), ((3, 64), (4, 64))]) {
            let (sp, dc) = combine_tile(splits, d);
            assert_eq!((sp, dc), want, "splits {splits}, d {d}");
            assert!(sp >= splits && sp * dc <= COMBINE_TILE_ELEMENTS && d % dc == 0);
        }
    }

    /// (out, q, k_cache, v_cache, block_table, seqlens) of b sequences of s_q queries, h / h_kv heads,
    /// d = 128, over `pages` pages of `page` keys, `width` pages a sequence; each at its own address.
    fn paged(b: i64, h: i64, hkv: i64, sq: i64, [pages, page, width]: [i64; 3]) -> [TensorDesc; 6] {
        let d = 128;
        let cache =
            |data| TensorDesc::from_parts(data, DType::BF16, &[pages, page, hkv, d], &[page * hkv * d, hkv * d, d, 1]);
        [
            bhsd(DType::BF16, 0x10_0000, [b, h, sq, d]),
            bhsd(DType::BF16, 0x20_0000, [b, h, sq, d]),
            cache(0x30_0000),
            cache(0x40_0000),
            TensorDesc::from_parts(0x50_0000, DType::I32, &[b, width], &[width, 1]),
            TensorDesc::from_parts(0x60_0000, DType::I32, &[b], &[1]),
        ]
    }

    fn paged_plan(t: &[TensorDesc; 6], window: i32, bn: i32, splits: i32, depth: i32) -> FfiResult<PagedPlan> {
        let [o, q, k, v, table, lens] = t;
        plan_paged(o, q, k, v, table, lens, None, 0.125, window, -1, bn, -1, -1, splits, depth)
    }

    #[test]
    fn the_paged_plan_reads_the_cache_by_page_slot_and_head() {
        // Llama-3-8B's heads, 8 sequences, 16-key pages (vLLM's default), 512 pages a sequence (8k keys)
        let t = paged(8, 32, 8, 1, [4096, 16, 512]);
        let p = paged_plan(&t, -1, -1, -1, -1).unwrap();
        assert_eq!((p.pages, p.page, p.cap, p.table_sb, p.bn, p.pieces()), (4096, 16, 8192, 512, 64, 4));
        assert_eq!(p.strides[2], [16 * 8 * 128, 8 * 128, 128]); // (page, slot, head)
        assert_eq!((p.decode.rows, p.decode.sq_pad), (16, 1));
        // 128 key tiles a sequence: split 16 ways, 8 tiles each; with a 128-key window at most 3 tiles
        assert_eq!(p.split(16), (16, 8));
        let w = paged_plan(&t, 128, -1, -1, -1).unwrap();
        assert_eq!((w.window, w.split(16)), (Some(128), (3, 1)));
        // 4 speculative queries of GQA 8 in 32-key tiles, a cache in (b, s, h, d) views' strides
        let mut t = paged(2, 64, 8, 4, [100, 256, 9]);
        t[2] = TensorDesc::from_parts(0x30_0000, DType::BF16, &[100, 256, 8, 128], &[256 * 8 * 256, 8 * 256, 256, 1]);
        let p = paged_plan(&t, -1, 32, 3, -1).unwrap();
        assert_eq!((p.decode.rows, p.decode.sq_pad, p.decode.splits, p.cap, p.pieces()), (32, 4, 3, 2304, 1));
        assert_eq!(p.strides[2], [8 * 256 * 256, 8 * 256, 256]);
        // how a tile is read, by page size and tile: one page; four quarters, each in one page
        // (48 = 3 · 16; 8-key quarters of 32-key tiles); gathered where neither divides the page,
        // and for 16-key tiles over pages 4 divides (no 4-key pieces)
        let cases = [(64, 64, 1), (64, 32, 1), (16, 64, 4), (48, 64, 4), (32, 128, 4), (8, 32, 4), (16, 128, 0)];
        for (page, bn, pieces) in cases.into_iter().chain([(7, 32, 0), (12, 16, 0)]) {
            let p = paged_plan(&paged(2, 8, 2, 1, [64, page, 8]), -1, bn, -1, -1).unwrap();
            assert_eq!(p.pieces(), pieces, "page {page}, bn {bn}");
        }
    }

    #[test]
    fn the_paged_plan_rejects_bad_tables_lengths_and_knobs() {
        let t = paged(2, 8, 2, 1, [64, 16, 8]);
        let with = |i: usize, d: TensorDesc| {
            let mut t = t;
            t[i] = d;
            paged_plan(&t, -1, -1, -1, -1)
        };
        let table = |dtype, shape: &[i64], strides: &[i64]| TensorDesc::from_parts(0x50_0000, dtype, shape, strides);
        assert_fails(with(4, table(DType::I64, &[2, 8], &[8, 1])), rc::INVALID_ARGUMENT, "`block_table` is i64");
        assert_fails(with(4, table(DType::I32, &[3, 8], &[8, 1])), rc::INVALID_ARGUMENT, "pass an int32 [2, 8]");
        assert_fails(with(4, table(DType::I32, &[2, 8], &[1, 2])), rc::INVALID_ARGUMENT, "contiguous last dim");
        assert_fails(with(4, table(DType::I32, &[16], &[1])), rc::INVALID_ARGUMENT, "must have 2 dims");
        assert_fails(with(5, table(DType::I32, &[3], &[1])), rc::INVALID_ARGUMENT, "`seqlens` is i32 [3]");
        let cache = TensorDesc::from_parts(0x40_0000, DType::BF16, &[64, 16, 2, 64], &[2048, 128, 64, 1]);
        assert_fails(with(3, cache), rc::INVALID_ARGUMENT, "must both be (pages, page, h_kv, d)");
        let cache3 = |data| TensorDesc::from_parts(data, DType::BF16, &[64, 16, 3, 128], &[6144, 384, 128, 1]);
        let mut gqa = t;
        (gqa[2], gqa[3]) = (cache3(0x30_0000), cache3(0x40_0000));
        assert_fails(paged_plan(&gqa, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "must divide the query heads");
        assert_fails(with(0, t[1]), rc::INVALID_ARGUMENT, "must not alias");
        assert_fails(paged_plan(&t, 0, -1, -1, -1), rc::INVALID_ARGUMENT, "window=0");
        assert_fails(paged_plan(&t, -1, 8, -1, -1), rc::INVALID_ARGUMENT, "bn=8");
        // 16-key tiles over 16-key pages: one page a tile, read through the views
        assert_eq!(paged_plan(&t, -1, 16, -1, -1).unwrap().pieces(), 1);
        assert_fails(paged_plan(&t, -1, -1, 0, -1), rc::INVALID_ARGUMENT, "splits=0: a paged cache");
        assert_fails(paged_plan(&t, -1, -1, -1, 4), rc::INVALID_ARGUMENT, "depth=4");
        // 32 queries: past the decode path
        let long = paged(2, 8, 2, 32, [64, 16, 8]);
        assert_fails(paged_plan(&long, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "s_q=32 queries");
    }

    #[test]
    fn the_paged_decode_kernel_lowers_and_assembles_for_sm90() {
        // GQA 4 at one query (16 rows), 4 queries of GQA 8 in 32-key tiles, at both head dims; and
        // 128-key tiles of four 32-key pieces (MQA's 64 rows)
        for dtype in ["f16", "bf16"] {
            let tiles = [
                ("16", "64", "128", "1"),
                ("32", "32", "64", "4"),
                ("16", "16", "128", "1"),
                ("64", "128", "128", "1"),
            ];
            for (rows, bn, d, sq) in tiles {
                for window in ["false", "true"] {
                    // the gather, one view load a tile, four a tile (not for 16-key tiles: no 4-key pieces)
                    let (per, half) =
                        ((bn.parse::<i32>().unwrap() / 4).to_string(), (bn.parse::<i32>().unwrap() / 2).to_string());
                    for (pieces, op) in [("0", "load_ptr_tko"), ("1", "load_view_tko"), ("4", "= cat ")] {
                        if (pieces == "4" && bn == "16") || (bn == "128" && pieces != "4") {
                            continue;
                        }
                        DEVICE.assert_lowers(
                            "attention_decode_paged",
                            &[dtype, rows, bn, d, sq, window, pieces, &per, &half],
                            &["mma", "exp2", op],
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_paged_decode_lowers_as_launched() {
        // Llama-3-8B's cache in pages of 256 and of 16 keys (4096 pages, h_kv 8, d 128, a table
        // of 32 and 512 columns), one query of GQA 4: the launcher's divisibility hints (TILEKIT_CUBIN_DIR
        // keeps the cubins for cuobjdump -sass). Without sinks the launcher passes q as `sinks_ptr`.
        use crate::ffi_util::{div_hints, ALIGNED_PTR};
        let ptrs = ["ws_acc", "ws_m", "ws_l", "o_ptr", "q_ptr", "k_ptr", "v_ptr", "table_ptr", "lens_ptr"]
            .map(|name| (name, ALIGNED_PTR));
        for (page, bn, pieces, per, half) in
            [(256, "64", "1", "16", "32"), (16, "64", "4", "16", "32"), (16, "16", "1", "4", "8")]
        {
            let (sp, ss, sh, width) = (page * 8 * 128, 8 * 128, 128, 8192 / page);
            let ints = [
                ("b", 16),
                ("h", 32),
                ("hkv", 8),
                ("sq", 1),
                ("o_sb", 32 * 128),
                ("o_sh", 128),
                ("o_ss", 128),
                ("q_sb", 32 * 128),
                ("q_sh", 128),
                ("q_ss", 128),
                ("k_sp", sp),
                ("k_ss", ss),
                ("k_sh", sh),
                ("v_sp", sp),
                ("v_ss", ss),
                ("v_sh", sh),
                ("table_sb", width),
                ("page", page),
                ("pages", 4096),
                ("cap", 8192),
            ];
            let generics = ["bf16", "16", bn, "128", "1", "false", pieces, per, half];
            let what = format!("-page{page}");
            let ir =
                DEVICE.lower("attention_decode_paged", &generics, &div_hints(&ptrs, &ints), Default::default(), &what);
            assert!(ir.contains("mma") && ir.contains("assume div_by<16>"), "{what}:\n{ir}");
        }
    }

    #[test]
    fn the_decode_kernels_lower_and_assemble_for_sm90() {
        for dtype in ["f16", "bf16"] {
            for (rows, bn, d, sq) in [("16", "64", "128", "1"), ("32", "64", "64", "4"), ("128", "128", "128", "16")] {
                for window in ["false", "true"] {
                    for entry in ["attention_decode", "attention_decode_lean"] {
                        DEVICE.assert_lowers(
                            entry,
                            &[dtype, rows, bn, d, sq, window, "2", "4"],
                            &["mma", "exp2", "store_view_tko"],
                        );
                    }
                }
                // One split, 16 (batch 1 over 8k), and 256 in 16-wide chunks of the head dim.
                for ((sp, dc), (sinks_dtype, sinks)) in [(1, 128), (16, 128), (256, 16)].into_iter().zip([
                    (dtype, "false"),
                    ("f32", "true"),
                    (dtype, "true"),
                ]) {
                    let (sp, dc) = (sp.to_string(), dc.min(d.parse().unwrap()).to_string());
                    DEVICE.assert_lowers(
                        "attention_decode_combine",
                        &[dtype, sinks_dtype, rows, d, sq, &sp, &dc, sinks],
                        &["exp2", "store_view_tko"],
                    );
                }
            }
        }
        // The decode kernel with the hints a variant may give it (op.variants: occupancy 4 beside
        // the splits of 4 blocks per SM, 4 warps beside those of 2; occupancy 8 with 4 warps, as a
        // variant may ask), no divisibility hints.
        for (options, what, hints) in [
            (ffi_util::compile_options(Some(4), None), "-occupancy4", &["occupancy = 4"][..]),
            (ffi_util::compile_options(None, Some(4)), "-warps4", &["num_worker_warps_per_cta = 4"][..]),
            (
                ffi_util::compile_options(Some(8), Some(4)),
                "-occupancy8-warps4",
                &["occupancy = 8", "num_worker_warps_per_cta = 4"],
            ),
        ] {
            let generics = ["bf16", "16", "64", "128", "1", "false", "2", "4"];
            let ir = DEVICE.lower("attention_decode", &generics, &[], options, what);
            assert!(ir.contains("mma") && ir.contains("exp2"), "{what}:\n{ir}");
            assert!(hints.iter().all(|h| ir.contains(h)), "{what}: a hint missing from the IR:\n{ir}");
        }
    }
}
