//! C-ABI launchers of fused linear cross-entropy (op.py's CDEF):
//!
//!   int32_t cutile_fused_linear_cross_entropy(const TensorDesc* out, const TensorDesc* h,
//!       const TensorDesc* weight, const TensorDesc* target, const TensorDesc* scale,
//!       int32_t ignore_index, float smoothing, int32_t chunk, int32_t block, int32_t rows,
//!       int32_t occupancy, int32_t warps, int32_t form, int32_t bm, int32_t bn, int32_t bk,
//!       int32_t group, int32_t programs, int32_t mma_occupancy, int32_t num_cta_in_cga,
//!       int32_t dw_bm, int32_t dw_bn, int32_t dw_bk, int32_t dw_group, int32_t dw_programs,
//!       int32_t dw_occupancy, int32_t dw_num_cta_in_cga, int32_t device_id, uint64_t stream);
//!   int32_t cutile_fused_linear_cross_entropy_train(const TensorDesc* dh, const TensorDesc* dw,
//!       const TensorDesc* losses, const TensorDesc* h, const TensorDesc* weight,
//!       const TensorDesc* target, const TensorDesc* scale, <the same scalars>);
//!
//! The gradients of the cross-entropy of the logits h Wᵀ, without the (m, V) logits: h (m, H) and
//! weight (V, H) of one dtype (f16 or bf16), each row-major (last dim contiguous, any row stride);
//! target (m,) i32 or i64; scale (1,) f32, each row's share of the loss (1 / the rows counted for
//! a mean, 1 for a sum). With G = scale (softmax(h Wᵀ) - ε / V - (1 - ε) onehot(t)) per row (0
//! where t == ignore_index): dh = G W (m, H) and dW = Gᵀ h (V, H), in h's dtype, last dim
//! contiguous. The kit's entry writes them stacked into out ((m + V, H): dh's rows, then dW's; each
//! row's loss goes to a workspace); the training form writes dh and dw apart and each row's loss into
//! losses ((m,) f32, contiguous).
//!
//! The rows go in chunks of `chunk` (-1: DEFAULT_CHUNK, at most m). Per chunk, on the caller's
//! stream: logits_c = h_c Wᵀ into a workspace of chunk × V elements (allocated on the stream once,
//! as split-K's is), cross_entropy's training launch over it in place (the chunk's losses and G_c
//! written over its logits: `launch_rows` with the knobs block..form), dh_c = G_c W, and dW = G_cᵀ
//! h_c for the first chunk, dW += G_cᵀ h_c for the others (matmul's accumulating epilogue). The
//! products use matmul's launcher: logits and dh with the tile bm..num_cta_in_cga, dW (its A the
//! column-major view of the workspace, K = the chunk) with its own, dw_bm..dw_num_cta_in_cga
//! (matmul's knobs each: -1 the launcher's default); dh_c, whose
//! output is only chunk × H, is split over K = V where its tiles are fewer than the SMs (split-K,
//! not persistent). Every descriptor and knob is validated before anything touches the GPU:
//! matmul's and cross_entropy's plans of the first and of the last (shorter) chunk, whose
//! descriptors are the others' at other offsets, with and without the split.
use crate::cross_entropy::ffi::{launch_rows, plan_rows, Plan as RowsPlan};
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, StreamAlloc, TensorDesc};
use crate::matmul::ffi::{launch_with as launch_mma, plan as plan_mma, Plan as MmaPlan, MAX_SPLITS};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "fused_linear_cross_entropy";

/// The address plan() gives the workspaces it cannot know yet (any non-null value with room above).
const STAND_IN: u64 = 1 << 48;

/// Rows per chunk when the variant says -1: 1024 x 128256 bf16 logits are 263 MB of workspace.
pub const DEFAULT_CHUNK: i32 = 1024;

/// A validated call: sizes and knobs (each chunk's launches are planned again at launch, with its
/// offsets and the workspace's address).
#[derive(Debug)]
pub struct Plan {
    pub dtype: DType,
    pub m: i32,
    pub vocab: i32,
    pub hidden: i32,
    pub chunk: i32,
    pub ignore_index: i32,
    pub smoothing: f32,
    /// cross_entropy's (block, rows, occupancy, warps, form)
    pub rows_knobs: (i32, i32, i32, i32, i32),
    /// matmul's (bm, bn, bk, group, programs, occupancy, num_cta_in_cga) of the logits and dh
    pub mma_knobs: [i32; 7],
    /// the same knobs of the dW product
    pub dw_knobs: [i32; 7],
}

impl Plan {
    /// Elements (of the dtype) of the logits workspace: chunk x V.
    pub fn workspace_elems(&self) -> i64 {
        self.chunk as i64 * self.vocab as i64
    }

    /// (first row, rows) of each chunk.
    pub fn chunks(&self) -> impl Iterator<Item = (i32, i32)> + '_ {
        (0..self.m).step_by(self.chunk as usize).map(|r| (r, self.chunk.min(self.m - r)))
    }
}

/// Rows [row0, row0 + rows) of a 1-D or 2-D descriptor, the same strides.
fn rows_of(d: &TensorDesc, dtype: DType, row0: i32, rows: i32) -> TensorDesc {
    let offset = row0 as i64 * d.strides[0] * dtype.size_bytes() as i64;
    let mut shape = d.shape().to_vec();
    shape[0] = rows as i64;
    TensorDesc::from_parts((d.data as i64 + offset) as u64, dtype, &shape, d.strides())
}

/// The kit entry's out split into (dh, dW).
fn stacked(out: &TensorDesc, dtype: DType, m: i32, vocab: i32) -> (TensorDesc, TensorDesc) {
    (rows_of(out, dtype, 0, m), rows_of(out, dtype, m, vocab))
}

/// The tensors of a call: the outputs, the inputs.
struct Call<'a> {
    dh: TensorDesc,
    dw: TensorDesc,
    losses: TensorDesc,
    h: &'a TensorDesc,
    weight: &'a TensorDesc,
    target: &'a TensorDesc,
    scale: &'a TensorDesc,
}

/// The descriptors of one chunk's launches, the workspace at `ws`.
struct Chunk {
    logits: TensorDesc,
    logits_t: TensorDesc,
    h: TensorDesc,
    w_t: TensorDesc,
    target: TensorDesc,
    losses: TensorDesc,
    dh: TensorDesc,
}

fn chunk_descs(p: &Plan, ws: u64, (row0, rows): (i32, i32), c: &Call) -> FfiResult<Chunk> {
    let (v, dt) = (p.vocab as i64, p.dtype);
    Ok(Chunk {
        logits: TensorDesc::from_parts(ws, dt, &[rows as i64, v], &[v, 1]),
        logits_t: TensorDesc::from_parts(ws, dt, &[v, rows as i64], &[1, v]),
        h: rows_of(c.h, dt, row0, rows),
        w_t: TensorDesc::from_parts(c.weight.data, dt, &[p.hidden as i64, v], &[1, c.weight.strides[0]]),
        target: rows_of(c.target, c.target.dtype()?, row0, rows),
        losses: rows_of(&c.losses, DType::F32, row0, rows),
        dh: rows_of(&c.dh, dt, row0, rows),
    })
}

/// The most SMs dh_splits counts with: plan() validates the split that many SMs would ask for, the
/// largest any launch uses (a GPU with more splits as if it had these).
const MAX_SMS: u32 = 256;

/// Split-K count of a dh product (rows x H, K = V) of `tiles` output tiles: enough splits that they
/// fill `sms` (at most MAX_SMS).
fn dh_splits(tiles: i64, sms: u32) -> i32 {
    let sms = sms.min(MAX_SMS) as i64;
    ((sms + tiles - 1) / tiles).clamp(1, MAX_SPLITS as i64) as i32
}

/// Every plan of one chunk on a GPU of `sms` SMs: (logits, its cross-entropy, dh, dW); dh planned
/// unsplit first, then split (not persistent) where its tiles are fewer than the SMs.
fn chunk_plans(p: &Plan, k: &Chunk, c: &Call, sms: u32) -> FfiResult<(MmaPlan, RowsPlan, MmaPlan, MmaPlan)> {
    let mma_with = |[bm, bn, bk, group, _, occupancy, cga]: [i32; 7], out, a, b, programs, splits| {
        plan_mma(out, a, b, bm, bn, bk, group, programs, occupancy, cga, splits)
    };
    let programs = p.mma_knobs[4];
    let mma = |out, a, b, programs, splits| mma_with(p.mma_knobs, out, a, b, programs, splits);
    let logits = mma(&k.logits, &k.h, &k.w_t, programs, -1)?;
    let (loss, grad) = (Some((&k.losses, "losses")), Some(((&k.logits, "logits"), (c.scale, "scale"))));
    let rows = plan_rows(KERNEL, loss, &k.logits, &k.target, grad, p.ignore_index, p.smoothing, p.rows_knobs)?;
    let dh = mma(&k.dh, &k.logits, c.weight, programs, -1)?;
    let splits = dh_splits(dh.tiles(), sms);
    let dh = if splits > 1 { mma(&k.dh, &k.logits, c.weight, 0, splits)? } else { dh };
    let dw = mma_with(p.dw_knobs, &c.dw, &k.logits_t, &k.h, p.dw_knobs[4], -1)?;
    Ok((logits, rows, dh, dw))
}

/// The scalars of both exports, as they come.
type Scalars = (i32, f32, i32, (i32, i32, i32, i32, i32), [i32; 7], [i32; 7]);

/// Checks a call (the losses' address may be a stand-in) and plans it.
fn plan_call(c: &Call, (ignore_index, smoothing, chunk, rows_knobs, mma_knobs, dw_knobs): Scalars) -> FfiResult<Plan> {
    let (h, weight) = (c.h, c.weight);
    let tensors = [(h, "h", 2), (weight, "weight", 2), (&c.dh, "dh", 2), (&c.dw, "dw", 2)];
    let dtype = ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    ffi_util::check_last_dims_contiguous(&[(h, "h"), (weight, "weight"), (&c.dh, "dh"), (&c.dw, "dw")])?;
    let (m, hidden) = (to_i32(h.shape[0], "m")?, to_i32(h.shape[1], "hidden")?);
    let vocab = to_i32(weight.shape[0], "vocabulary")?;
    if weight.shape[1] != hidden as i64 {
        return Err(invalid(format!(
            "`weight` is {:?}: it must be (V, H) with H = {hidden}, h's last dim (an nn.Linear weight as stored)",
            weight.shape()
        )));
    }
    if c.dh.shape() != h.shape() || c.dw.shape() != weight.shape() {
        return Err(invalid(format!(
            "dh {:?} and dW {:?} must have the shapes of h {:?} and weight {:?}",
            c.dh.shape(),
            c.dw.shape(),
            h.shape(),
            weight.shape()
        )));
    }
    if m == 0 || vocab == 0 || hidden == 0 {
        return Err(invalid(format!("m={m}, V={vocab}, H={hidden}: every size must be at least 1")));
    }
    // the chunks' descriptors take their rows from these: their length is checked here, once
    for (d, name, dt) in [(c.target, "target", None), (&c.losses, "losses", Some(DType::F32))] {
        if d.shape() != [m as i64] || dt.is_some_and(|dt| d.dtype != dt as i32) {
            return Err(invalid(format!(
                "`{name}` is {:?}: it must be [{m}]{}, one per row of h",
                d.shape(),
                if dt.is_some() { " f32" } else { "" }
            )));
        }
    }
    if c.scale.shape() != [1] {
        return Err(invalid(format!("`scale` is {:?}: it must be (1,), one share for every row", c.scale.shape())));
    }
    for (d, name) in [(&c.dh, "dh"), (&c.dw, "dw")] {
        if d.data == h.data || d.data == weight.data {
            return Err(invalid(format!(
                "`{name}` must not alias `h` or `weight`: the gradients are written while those are read"
            )));
        }
    }
    let chunk = ffi_util::or_default(chunk, DEFAULT_CHUNK);
    if chunk < 1 {
        return Err(invalid(format!("variant chunk={chunk}: use a positive row count, or -1 for {DEFAULT_CHUNK}")));
    }
    let chunk = chunk.min(m);
    let p = Plan { dtype, m, vocab, hidden, chunk, ignore_index, smoothing, rows_knobs, mma_knobs, dw_knobs };
    if p.workspace_elems() > i32::MAX as i64 {
        return Err(invalid(format!(
            "variant chunk={chunk}: the logits workspace of {} x V = {} elements exceeds i32 indexing; use \
             fewer rows a chunk",
            p.chunk,
            p.workspace_elems()
        )));
    }
    // The first and the last chunk (the only shorter one); the workspace's address is a stand-in here.
    let last = p.chunks().last().unwrap_or((0, p.chunk));
    for span in [(0, p.chunk), last] {
        let k = chunk_descs(&p, STAND_IN, span, c)?;
        chunk_plans(&p, &k, c, MAX_SMS)?;
    }
    Ok(p)
}

/// Launches the chunks of a planned call.
fn run<T: Element>(p: &Plan, c: &Call, stream: &Arc<Stream>) -> FfiResult<()> {
    let sms = ffi_util::sm_count(stream)?;
    let ws = StreamAlloc::new(p.workspace_elems() as usize * p.dtype.size_bytes(), stream, "logits workspace")?;
    for (i, span) in p.chunks().enumerate() {
        let k = chunk_descs(p, ws.ptr, span, c)?;
        let (logits, rows, dh, dw) = chunk_plans(p, &k, c, sms)?;
        launch_mma::<T>(&logits, &k.logits, &k.h, &k.w_t, stream, false)?;
        launch_rows::<T>(&rows, &k.losses, &k.logits, &k.target, &k.logits, c.scale, stream)?;
        launch_mma::<T>(&dh, &k.dh, &k.logits, c.weight, stream, false)?;
        launch_mma::<T>(&dw, &c.dw, &k.logits_t, &k.h, stream, i > 0)?;
    }
    ws.free()
}

/// A (m,) f32 stand-in for the kit entry's losses (the address is replaced at launch).
fn losses_stand_in(m: i64) -> TensorDesc {
    TensorDesc::from_parts(STAND_IN, DType::F32, &[m], &[1])
}

fn call<'a>(
    (dh, dw, losses): (TensorDesc, TensorDesc, TensorDesc), h: &'a TensorDesc, weight: &'a TensorDesc,
    target: &'a TensorDesc, scale: &'a TensorDesc,
) -> Call<'a> {
    Call { dh, dw, losses, h, weight, target, scale }
}

/// The entry's arguments one for one (its C signature is fixed).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, h: &TensorDesc, weight: &TensorDesc, target: &TensorDesc, scale: &TensorDesc, ignore_index: i32,
    smoothing: f32, chunk: i32, block: i32, rows: i32, occupancy: i32, warps: i32, form: i32, bm: i32, bn: i32,
    bk: i32, group: i32, programs: i32, mma_occupancy: i32, num_cta_in_cga: i32, dw_bm: i32, dw_bn: i32, dw_bk: i32,
    dw_group: i32, dw_programs: i32, dw_occupancy: i32, dw_num_cta_in_cga: i32,
) -> FfiResult<Plan> {
    let tensors = [(h, "h", 2), (out, "out", 2), (weight, "weight", 2)];
    let dtype = ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    let (m, vocab) = (to_i32(h.shape[0], "m")?, to_i32(weight.shape[0], "vocabulary")?);
    if out.shape() != [m as i64 + vocab as i64, h.shape[1]] {
        return Err(invalid(format!(
            "`out` is {:?}: it must be (m + V, H) = ({}, {}), dh's rows then dW's",
            out.shape(),
            m as i64 + vocab as i64,
            h.shape[1]
        )));
    }
    let (dh, dw) = stacked(out, dtype, m, vocab);
    let mma = [bm, bn, bk, group, programs, mma_occupancy, num_cta_in_cga];
    let dw_mma = [dw_bm, dw_bn, dw_bk, dw_group, dw_programs, dw_occupancy, dw_num_cta_in_cga];
    let scalars = (ignore_index, smoothing, chunk, (block, rows, occupancy, warps, form), mma, dw_mma);
    plan_call(&call((dh, dw, losses_stand_in(m as i64)), h, weight, target, scale), scalars)
}

#[allow(clippy::too_many_arguments)]
fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, h: &TensorDesc, weight: &TensorDesc, target: &TensorDesc, scale: &TensorDesc,
    stream: &Arc<Stream>,
) -> FfiResult<()> {
    let losses = StreamAlloc::new(p.m as usize * 4, stream, "losses workspace")?;
    let (dh, dw) = stacked(out, p.dtype, p.m, p.vocab);
    let each = TensorDesc::from_parts(losses.ptr, DType::F32, &[p.m as i64], &[1]);
    run::<T>(p, &call((dh, dw, each), h, weight, target, scale), stream)?;
    losses.free()
}

// `cutile_fused_linear_cross_entropy`: the descriptors, then plan(), the caller's stream and launch().
crate::export!(cutile_fused_linear_cross_entropy(
    out, h, weight, target, scale; ignore_index: i32, smoothing: f32, chunk: i32, block: i32, rows: i32,
    occupancy: i32, warps: i32, form: i32, bm: i32, bn: i32, bk: i32, group: i32, programs: i32,
    mma_occupancy: i32, num_cta_in_cga: i32, dw_bm: i32, dw_bn: i32, dw_bk: i32, dw_group: i32, dw_programs: i32,
    dw_occupancy: i32, dw_num_cta_in_cga: i32
));

/// `cutile_fused_linear_cross_entropy_train`: dh and dW apart, each row's loss into `losses`.
pub mod train {
    use super::*;

    #[allow(clippy::too_many_arguments)]
    pub fn plan(
        dh: &TensorDesc, dw: &TensorDesc, losses: &TensorDesc, h: &TensorDesc, weight: &TensorDesc,
        target: &TensorDesc, scale: &TensorDesc, ignore_index: i32, smoothing: f32, chunk: i32, block: i32, rows: i32,
        occupancy: i32, warps: i32, form: i32, bm: i32, bn: i32, bk: i32, group: i32, programs: i32,
        mma_occupancy: i32, num_cta_in_cga: i32, dw_bm: i32, dw_bn: i32, dw_bk: i32, dw_group: i32, dw_programs: i32,
        dw_occupancy: i32, dw_num_cta_in_cga: i32,
    ) -> FfiResult<Plan> {
        let mma = [bm, bn, bk, group, programs, mma_occupancy, num_cta_in_cga];
        let dw_mma = [dw_bm, dw_bn, dw_bk, dw_group, dw_programs, dw_occupancy, dw_num_cta_in_cga];
        let scalars = (ignore_index, smoothing, chunk, (block, rows, occupancy, warps, form), mma, dw_mma);
        plan_call(&call((*dh, *dw, *losses), h, weight, target, scale), scalars)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch<T: Element>(
        p: &Plan, dh: &TensorDesc, dw: &TensorDesc, losses: &TensorDesc, h: &TensorDesc, weight: &TensorDesc,
        target: &TensorDesc, scale: &TensorDesc, stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        run::<T>(p, &call((*dh, *dw, *losses), h, weight, target, scale), stream)
    }

    crate::export!(cutile_fused_linear_cross_entropy_train(
        dh, dw, losses, h, weight, target, scale; ignore_index: i32, smoothing: f32, chunk: i32, block: i32,
        rows: i32, occupancy: i32, warps: i32, form: i32, bm: i32, bn: i32, bk: i32, group: i32, programs: i32,
        mma_occupancy: i32, num_cta_in_cga: i32, dw_bm: i32, dw_bn: i32, dw_bk: i32, dw_group: i32, dw_programs: i32,
        dw_occupancy: i32, dw_num_cta_in_cga: i32
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc};

    /// (out, h, weight, target, scale) of an m x V x H problem, each at its own address.
    fn descs(dtype: DType, m: i64, v: i64, hidden: i64) -> [TensorDesc; 5] {
        [
            TensorDesc::from_parts(0x10_0000, dtype, &[m + v, hidden], &[hidden, 1]),
            TensorDesc::from_parts(0x30_0000, dtype, &[m, hidden], &[hidden, 1]),
            TensorDesc::from_parts(0x40_0000, dtype, &[v, hidden], &[hidden, 1]),
            TensorDesc::from_parts(0x50_0000, DType::I64, &[m], &[1]),
            TensorDesc::from_parts(0x60_0000, DType::F32, &[1], &[1]),
        ]
    }

    fn plan_of(d: &[TensorDesc; 5], chunk: i32, form: i32) -> FfiResult<Plan> {
        let [o, h, w, t, s] = d;
        let (m, dw) = ([-1; 7], [-1; 7]);
        plan(
            o, h, w, t, s, -100, 0.0, chunk, -1, -1, -1, -1, form, m[0], m[1], m[2], m[3], m[4], m[5], m[6], dw[0],
            dw[1], dw[2], dw[3], dw[4], dw[5], dw[6],
        )
    }

    #[test]
    fn chunks_cover_the_rows_and_the_last_may_be_shorter() {
        let d = descs(DType::BF16, 2500, 128256, 4096);
        let p = plan_of(&d, 1024, -1).unwrap();
        assert_eq!(p.chunks().collect::<Vec<_>>(), [(0, 1024), (1024, 1024), (2048, 452)]);
        assert_eq!(p.workspace_elems(), 1024 * 128256);
        // the default chunk, capped at m
        let p = plan_of(&descs(DType::F16, 300, 1000, 64), -1, -1).unwrap();
        assert_eq!((p.chunk, p.chunks().count()), (300, 1));
    }

    #[test]
    fn a_chunk_s_descriptors_are_its_rows_and_the_workspace() {
        let d = descs(DType::BF16, 10, 7, 4);
        let p = plan_of(&d, 4, -1).unwrap();
        let [o, h, w, t, s] = &d;
        let (dh, dw) = stacked(o, DType::BF16, 10, 7);
        assert_eq!((dh.data, dh.shape(), dw.data, dw.shape()), (0x10_0000, &[10, 4][..], 0x10_0000 + 80, &[7, 4][..]));
        let losses = TensorDesc::from_parts(0x20_0000, DType::F32, &[10], &[1]);
        let k = chunk_descs(&p, 0x9000, (8, 2), &call((dh, dw, losses), h, w, t, s)).unwrap();
        assert_eq!((k.h.data, k.h.shape()), (0x30_0000 + 8 * 4 * 2, &[2, 4][..]));
        assert_eq!((k.target.data, k.losses.data, k.dh.data), (0x50_0000 + 8 * 8, 0x20_0000 + 8 * 4, 0x10_0000 + 64));
        assert_eq!((k.logits.shape(), k.logits.strides()), (&[2, 7][..], &[7, 1][..]));
        assert_eq!((k.logits_t.shape(), k.logits_t.strides()), (&[7, 2][..], &[1, 7][..]));
        assert_eq!((k.w_t.shape(), k.w_t.strides()), (&[4, 7][..], &[1, 4][..]));
    }

    #[test]
    fn the_dh_product_is_split_when_its_tiles_are_fewer_than_the_sms() {
        // the dh plan's splits for chunk `span` of an m x V x H problem on `sms` SMs
        let split_of = |[m, v, hidden]: [i64; 3], chunk: i32, span: (i32, i32), sms: u32| {
            let d = descs(DType::BF16, m, v, hidden);
            let p = plan_of(&d, chunk, -1).unwrap();
            let (dh, dw) = stacked(&d[0], DType::BF16, p.m, p.vocab);
            let c = call((dh, dw, losses_stand_in(m)), &d[1], &d[2], &d[3], &d[4]);
            let (_, _, dh, _) = chunk_plans(&p, &chunk_descs(&p, STAND_IN, span, &c).unwrap(), &c, sms).unwrap();
            (dh.splits, dh.variant.programs)
        };
        // 1024 x 4096 in 128 x 128 tiles: 256 >= 132 SMs; 128 rows: 32 tiles, 5 splits; one row too
        let llama = [4096, 128256, 4096];
        assert_eq!(split_of(llama, 1024, (0, 1024), 132), (1, None));
        assert_eq!(split_of(llama, 128, (0, 128), 132), (5, None));
        assert_eq!(split_of([4097, 128256, 4096], 128, (4096, 1), 132), (5, None));
        assert_eq!(split_of([16, 1000, 64], -1, (0, 16), 132), (MAX_SPLITS, None));
        // 8192-row chunks at H = 16384: 8192 tiles, no split on any GPU (the plan must not ask for 16,
        // whose split-K workspace would pass i32 indexing)
        assert_eq!(split_of([8192, 1000, 16384], 8192, (0, 8192), 100_000), (1, None));
        assert_eq!((dh_splits(32, 132), dh_splits(32, 100_000), dh_splits(1, 8)), (5, 8, 8));
    }

    #[test]
    fn the_dw_product_takes_its_own_tile() {
        // logits and dh in persistent 128 x 128 tiles (132 programs), dW in 128 x 256 at a cluster of 2
        let d = descs(DType::BF16, 4096, 128256, 4096);
        let [o, h, w, t, s] = &d;
        let p = plan(
            o, h, w, t, s, -100, 0.0, 4096, -1, -1, -1, -1, -1, 128, 128, 64, 8, 132, 1, 1, 128, 256, 64, 4, 132, 1, 2,
        )
        .unwrap();
        let (dh, dw) = stacked(o, DType::BF16, p.m, p.vocab);
        let c = call((dh, dw, losses_stand_in(4096)), h, w, t, s);
        let (logits, _, dh, dw) = chunk_plans(&p, &chunk_descs(&p, STAND_IN, (0, 4096), &c).unwrap(), &c, 132).unwrap();
        let tile = |v: &ffi_util::MmaVariant| (v.bm, v.bn, v.group, v.programs, v.num_cta_in_cga);
        assert_eq!(tile(&logits.variant), (128, 128, 8, Some(132), Some(1)));
        assert_eq!(tile(&dh.variant), (128, 128, 8, Some(132), Some(1)));
        assert_eq!(tile(&dw.variant), (128, 256, 4, Some(132), Some(2)));
        // and its knobs are validated like the others'
        let bad = plan(
            o, h, w, t, s, -100, 0.0, 4096, -1, -1, -1, -1, -1, 128, 128, 64, 8, 132, 1, 1, 96, 256, 64, 4, 132, 1, 2,
        );
        assert_fails(bad, rc::INVALID_ARGUMENT, "bm=96");
    }

    #[test]
    fn the_train_form_takes_its_outputs_apart() {
        let [_, h, w, t, s] = descs(DType::F16, 8, 100, 64);
        let (dh, dw) = (
            test_desc(DType::F16, &[8, 64], &[64, 1]),
            TensorDesc::from_parts(0x7000, DType::F16, &[100, 64], &[64, 1]),
        );
        let losses = TensorDesc::from_parts(0x8000, DType::F32, &[8], &[1]);
        let p = train::plan(
            &dh, &dw, &losses, &h, &w, &t, &s, 5, 0.1, 3, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            -1, -1, -1, -1,
        );
        assert_eq!(p.map(|p| (p.chunks().count(), p.ignore_index)).unwrap(), (3, 5));
        let strided = TensorDesc::from_parts(0x8000, DType::F32, &[8], &[2]);
        let p = train::plan(
            &dh, &dw, &strided, &h, &w, &t, &s, 5, 0.1, 3, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            -1, -1, -1, -1,
        );
        assert_fails(p, rc::INVALID_ARGUMENT, "contiguous");
        let p = train::plan(
            &dh, &h, &losses, &h, &w, &t, &s, 5, 0.1, 3, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            -1, -1, -1, -1,
        );
        assert_fails(p, rc::INVALID_ARGUMENT, "must have the shapes");
    }

    #[test]
    fn plans_reject_bad_shapes_aliases_and_knobs() {
        let d = descs(DType::BF16, 8, 100, 64);
        let mut bad = d;
        bad[2] = TensorDesc::from_parts(0x40_0000, DType::BF16, &[100, 32], &[32, 1]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "(V, H) with H = 64");
        let mut bad = d;
        bad[0] = TensorDesc::from_parts(0x10_0000, DType::BF16, &[108, 32], &[32, 1]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "(m + V, H) = (108, 64)");
        let mut bad = d;
        bad[0] = TensorDesc::from_parts(0x30_0000, DType::BF16, &[108, 64], &[64, 1]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "must not alias");
        let mut bad = d;
        bad[4] = TensorDesc::from_parts(0x60_0000, DType::F32, &[8], &[1]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "(1,)");
        let mut bad = d;
        bad[1] = test_desc(DType::F16, &[8, 64], &[64, 1]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "share one dtype");
        let mut bad = d;
        bad[2] = TensorDesc::from_parts(0x40_0000, DType::BF16, &[100, 64], &[1, 100]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "weight");
        assert_fails(plan_of(&d, 0, -1), rc::INVALID_ARGUMENT, "chunk=0");
        assert_fails(plan_of(&d, -1, 7), rc::INVALID_ARGUMENT, "form=7");
        let mut bad = d;
        bad[3] = TensorDesc::from_parts(0x50_0000, DType::I64, &[9], &[1]);
        assert_fails(plan_of(&bad, -1, -1), rc::INVALID_ARGUMENT, "`target` is [9]: it must be [8],");
        let wide = descs(DType::BF16, 32768, 128256, 64);
        assert_fails(plan_of(&wide, 32768, -1), rc::INVALID_ARGUMENT, "exceeds i32");
    }
}
