//! C-ABI launcher of rope: `cutile_rope` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_rope(const TensorDesc* out, const TensorDesc* q, const TensorDesc* k,
//!                       const TensorDesc* cos, const TensorDesc* sin, const TensorDesc* positions,
//!                       int32_t heads_first, int32_t occupancy, int32_t warps, int32_t heads,
//!                       int32_t device_id, uint64_t stream);
//!
//! q (b, s, hq, d) and k (b, s, hk, d), one dtype (f32, f16 or bf16), d even, the last dim
//! contiguous and any strides of (b, s, h); heads_first != 0 takes q, k and out as (b, h, s, d)
//! instead (the same kernel: a view with two strides swapped). out (b, s, hq + hk, d) of that dtype,
//! any strides of (b, s, h) that keep its elements apart: q's heads rotated into out[:, :, :hq], k's
//! into out[:, :, hq:]. cos and sin: tables (rows, w) or (bc, rows, w), bc 1 (one table for every
//! sequence) or b, w = d (Hugging Face's, the frequencies twice) or d / 2 (vLLM's), of q's dtype or
//! f32; only the first d / 2 columns are read. positions (may be null): (s,) or (bp, s) i32 or i64
//! ids of the table's rows, bp 1 or b; null: token s uses row s (rows >= s). A position id outside
//! [0, rows) fails a device assertion (as torch's indexing does). `occupancy` and `warps` are the
//! compiler hints (1..=32; 4 or 8), -1 the default. `heads` -1: one tile block per token, all its
//! heads; a power of two (1..=256): at most that many heads of q or of k per tile block, a token's
//! heads over a second grid dim (a decode step's few tokens over more SMs). Every descriptor is
//! validated before anything touches the GPU: bad input returns -2/-5/-6 with a message, never a
//! launch.
use super::kernel::rope_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, Launch, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "rope";
/// The widest head dim a tile holds (its halves are HALF = pow2(d / 2) lanes).
pub const MAX_HEAD_DIM: i32 = 512;
/// The most heads of q (and of k) one tile block holds.
pub const MAX_HEADS: i32 = 256;
/// The largest [heads, d/2] tile (powers of two): 8192 elements compile without spilling (128 heads
/// of d = 128: 244 registers; 64 of d = 256: 96), 16384 spill (64 heads of d = 512: 3.7 KB of stack).
pub const MAX_TILE: i32 = 8192;
/// The most tokens a launch rotates with all of a token's loads first (Plan::early); op.py's
/// SPLIT_TOKENS, the same decode-sized bound, caps the split candidates.
pub const EARLY_TOKENS: i64 = 256;

/// A validated launch. Strides are in elements, (b, s, h) for q, k and out, (batch, row) for the
/// tables, (b, s) for the position ids.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    /// The tables' dtype: `dtype` or f32.
    pub table: DType,
    /// The position ids' dtype (i32 or i64); None: token s uses row s.
    pub positions: Option<DType>,
    pub b: i32,
    pub s: i32,
    pub hq: i32,
    pub hk: i32,
    pub half: i32,
    pub table_rows: i32,
    pub q: [i32; 3],
    pub k: [i32; 3],
    pub out: [i32; 3],
    pub cs: [i32; 2],
    /// In i32 words (an i64 id is two).
    pub pos: [i32; 2],
    /// -1 rotates back (the gradient: kernels/rope_backward).
    pub sin_sign: f32,
    pub occupancy: Option<i32>,
    pub warps: Option<i32>,
    /// The most heads of q or of k one tile block rotates (a power of two: the SPLIT form); None:
    /// a token's every head in one tile block.
    pub heads: Option<i32>,
}

impl Plan {
    /// The tiles: (HQ, HK, HALF), powers of two >= hq, hk and d / 2 (HQ and HK at most `heads`).
    pub fn tiles(&self) -> [i32; 3] {
        let [hq, hk, half] = [self.hq, self.hk, self.half].map(|v| (v.max(1) as u32).next_power_of_two() as i32);
        let cap = self.heads.unwrap_or(i32::MAX);
        [hq.min(cap), hk.min(cap), half]
    }

    /// (tile blocks of q's heads per token, of k's): (1, 1) without SPLIT, where one tile block
    /// does both.
    pub fn chunks(&self) -> (i32, i32) {
        let [hq_t, hk_t, _] = self.tiles();
        ((self.hq + hq_t - 1) / hq_t, (self.hk + hk_t - 1) / hk_t)
    }

    /// EARLY: a whole token's loads all issued before its stores, for launches of at most
    /// EARLY_TOKENS tokens (a decode step's: one wave, each tile block's latency is the time); more
    /// tokens keep q's heads, then k's (fewer registers live, so more tile blocks an SM).
    pub fn early(&self) -> bool {
        self.heads.is_none() && self.b as i64 * self.s as i64 <= EARLY_TOKENS
    }

    /// The launch grid: a tile block per token, times the chunks of its heads with SPLIT.
    pub fn grid(&self) -> (u32, u32, u32) {
        let (cq, ck) = self.chunks();
        let per_token = if self.heads.is_some() { cq + ck } else { 1 };
        (self.b as u32 * self.s as u32, per_token as u32, 1)
    }
}

/// The `heads` argument: -1 (None: every head of a token in one tile block) or a power of two up to
/// MAX_HEADS.
fn heads_per_block(heads: i32) -> FfiResult<Option<i32>> {
    match heads {
        -1 => Ok(None),
        h if (1..=MAX_HEADS).contains(&h) && (h as u32).is_power_of_two() => Ok(Some(h)),
        h => Err(invalid(format!(
            "heads={h}: the heads per tile block must be -1 (a token's every head) or a power of two 1..={MAX_HEADS}"
        ))),
    }
}

fn strides3(d: &TensorDesc, arg: &str) -> FfiResult<[i32; 3]> {
    Ok([
        to_i32(d.strides[0], &format!("{arg} stride 0"))?,
        to_i32(d.strides[1], &format!("{arg} stride 1"))?,
        to_i32(d.strides[2], &format!("{arg} stride 2"))?,
    ])
}

/// The stride of a dim of size `size` that may broadcast: 0 where size is 1 (one table or one row
/// of position ids for every sequence), else `stride`.
fn batch_stride(size: i64, stride: i64, arg: &str) -> FfiResult<i32> {
    if size == 1 {
        Ok(0)
    } else {
        to_i32(stride, &format!("{arg} batch stride"))
    }
}

/// The largest element offset a (b, s, h, d) tensor at `strides` reaches, plus one; refused when it
/// leaves i32 (the kernel's offsets).
fn span(shape: [i64; 4], strides: [i32; 3], arg: &str) -> FfiResult<i64> {
    let last: i64 = (0..3).map(|i| (shape[i] - 1) * strides[i] as i64).sum::<i64>() + shape[3];
    if last > i32::MAX as i64 {
        return Err(invalid(format!(
            "`{arg}` spans {last} elements: past 2^31 (the kernel's offsets); split the batch"
        )));
    }
    Ok(last)
}

/// No two elements of a (b, s, h, d) tensor at strides (b, s, h) (d contiguous) share an address:
/// taken in order of stride, each dim of more than one element steps past everything the smaller
/// ones span.
fn disjoint(shape: [i64; 4], strides: [i32; 3]) -> bool {
    let mut dims: Vec<(i64, i64)> = (0..3).filter(|&i| shape[i] > 1).map(|i| (strides[i] as i64, shape[i])).collect();
    dims.sort();
    let mut reach = shape[3]; // elements one step of the next dim must clear
    dims.iter().all(|&(stride, size)| {
        let ok = stride >= reach;
        reach += (size - 1) * stride;
        ok
    })
}

/// A (b, h, s, d) descriptor as its (b, s, h, d) view (dims 1 and 2 swapped); any other as it is.
fn tokens_first(d: &TensorDesc, heads_first: bool) -> TensorDesc {
    let mut v = *d;
    if heads_first && d.ndim == 4 {
        v.shape.swap(1, 2);
        v.strides.swap(1, 2);
    }
    v
}

/// A descriptor of `dims - 1` dims with a leading dim of one added (a table for every sequence, one
/// row of position ids); any other as it is.
fn batched(d: &TensorDesc, dims: i32) -> TensorDesc {
    let mut v = *d;
    if d.ndim == dims - 1 {
        v.ndim = dims;
        v.shape.copy_within(0..(dims - 1) as usize, 1);
        v.strides.copy_within(0..(dims - 1) as usize, 1);
        (v.shape[0], v.strides[0]) = (1, 0);
    }
    v
}

/// plan() with the sign of the rotation: 1 rotates forward, -1 back (rope_backward's plan, whose
/// q and k are the gradients `names` says). The descriptors as the export takes them.
#[allow(clippy::too_many_arguments)]
pub fn plan_signed(
    kernel: &str, names: [&str; 2], out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, cos: &TensorDesc,
    sin: &TensorDesc, positions: Option<&TensorDesc>, heads_first: i32, sin_sign: f32, occupancy: i32, warps: i32,
    heads: i32,
) -> FfiResult<Plan> {
    let [qn, kn] = names;
    let hf = heads_first != 0;
    let (out, q, k) = (&tokens_first(out, hf), &tokens_first(q, hf), &tokens_first(k, hf));
    let (cos, sin) = (&batched(cos, 3), &batched(sin, 3));
    let positions = positions.map(|p| batched(p, 2));
    let positions = positions.as_ref();
    let dtype = ffi_util::check_float_tensors(kernel, &[(q, qn, 4), (k, kn, 4), (out, "out", 4)])?;
    let table =
        ffi_util::check_tensors(kernel, &ffi_util::FLOATS, "f32, f16, bf16", &[(cos, "cos", 3), (sin, "sin", 3)])?;
    if table != dtype && table != DType::F32 {
        return Err(invalid(format!(
            "`cos` and `sin` are {} but {qn} is {}: the tables must be {qn}'s dtype or f32",
            table.name(),
            dtype.name()
        )));
    }
    ffi_util::check_same_shape(cos, "cos", sin, "sin")?;
    ffi_util::check_last_dims_contiguous(&[(q, qn), (k, kn), (out, "out"), (cos, "cos"), (sin, "sin")])?;
    let [b, s, hq, d] = [q.shape[0], q.shape[1], q.shape[2], q.shape[3]];
    let hk = k.shape[2];
    if k.shape[0] != b || k.shape[1] != s || k.shape[3] != d {
        return Err(invalid(format!(
            "`{kn}` is {:?}: it must be [{b}, {s}, hk, {d}] for {qn} {:?} (batch, tokens and head dim of {qn})",
            k.shape(),
            q.shape()
        )));
    }
    if d % 2 != 0 || d > MAX_HEAD_DIM as i64 {
        return Err(invalid(format!("head dim d={d}: {kernel} rotates halves of an even d <= {MAX_HEAD_DIM}")));
    }
    if hq > MAX_HEADS as i64 || hk > MAX_HEADS as i64 {
        return Err(invalid(format!("hq={hq}, hk={hk}: {kernel} holds at most {MAX_HEADS} heads of q and of k")));
    }
    let tile = (hq.max(hk) as u64).next_power_of_two() * ((d / 2).max(1) as u64).next_power_of_two();
    if tile > MAX_TILE as u64 {
        return Err(invalid(format!(
            "hq={hq}, hk={hk}, d={d}: a tile of {tile} elements past {MAX_TILE} (a tile block holds a token's heads \
             whole); split the heads into calls"
        )));
    }
    if out.shape() != [b, s, hq + hk, d] {
        return Err(invalid(format!(
            "`out` is {:?}: it must be [{b}, {s}, {}, {d}] ({qn}'s heads, then {kn}'s)",
            out.shape(),
            hq + hk
        )));
    }
    let (bc, rows, w) = (cos.shape[0], cos.shape[1], cos.shape[2]);
    if (bc != 1 && bc != b) || (w != d && w != d / 2) {
        return Err(invalid(format!(
            "`cos` is {:?}: it must be [1 or {b}, rows, {d} or {}] (a table of rows for every sequence or one per sequence)",
            cos.shape(),
            d / 2
        )));
    }
    let pos = match positions {
        None => {
            if rows < s {
                return Err(invalid(format!(
                    "`cos` has {rows} rows for {s} tokens: without positions token i uses row i; pass position ids"
                )));
            }
            None
        }
        Some(p) => {
            let pd = ffi_util::check_tensors(kernel, &[DType::I32, DType::I64], "i32, i64", &[(p, "positions", 2)])?;
            if (p.shape[0] != 1 && p.shape[0] != b) || p.shape[1] != s {
                return Err(invalid(format!("`positions` is {:?}: it must be [1 or {b}, {s}]", p.shape())));
            }
            // in i32 units: the kernel reads an i64 id as two i32 words
            let words = if pd == DType::I64 { 2 } else { 1 };
            let strides = [
                batch_stride(p.shape[0], p.strides[0] * words, "positions")?,
                to_i32(p.strides[1] * words, "positions stride 1")?,
            ];
            Some((pd, strides))
        }
    };
    let (q_s, k_s, out_s) = (strides3(q, qn)?, strides3(k, kn)?, strides3(out, "out")?);
    span([b, s, hq, d], q_s, qn)?;
    span([b, s, hk, d], k_s, kn)?;
    span([b, s, hq + hk, d], out_s, "out")?;
    if !disjoint([b, s, hq + hk, d], out_s) {
        return Err(invalid(format!(
            "`out` strides {:?} for shape {:?}: its elements would overlap",
            out.strides(),
            out.shape()
        )));
    }
    let cs = [batch_stride(bc, cos.strides[0], "cos")?, to_i32(cos.strides[1], "cos stride 1")?];
    if cos.strides() != sin.strides() {
        return Err(invalid(format!("`cos` strides {:?} != `sin` strides {:?}", cos.strides(), sin.strides())));
    }
    // the kernel's row offset b * scb + p * scp is i32: the whole table must lie within 2^31 elements
    let table_end = (bc - 1) * cs[0] as i64 + (rows - 1) * cs[1] as i64 + w;
    if table_end > i32::MAX as i64 {
        return Err(invalid(format!("`cos` spans {table_end} elements: past 2^31 (the kernel's offsets)")));
    }
    if let (Some(p), Some((_, [spb, sps]))) = (positions, pos) {
        let ids_end = (p.shape[0] - 1) * spb as i64 + (s - 1) * sps as i64 + 2;
        if ids_end > i32::MAX as i64 {
            return Err(invalid(format!("`positions` span {ids_end} words: past 2^31 (the kernel's offsets)")));
        }
    }
    let (occupancy, warps) = (ffi_util::occupancy_hint(occupancy)?, ffi_util::warps_hint(warps)?);
    let heads = heads_per_block(heads)?;
    Ok(Plan {
        dtype,
        table,
        positions: pos.map(|p| p.0),
        b: to_i32(b, "b")?,
        s: to_i32(s, "s")?,
        hq: hq as i32,
        hk: hk as i32,
        half: (d / 2) as i32,
        table_rows: to_i32(rows, "cos rows")?,
        q: q_s,
        k: k_s,
        out: out_s,
        cs,
        pos: pos.map_or([0, 0], |p| p.1),
        sin_sign,
        occupancy,
        warps,
        heads,
    })
}

/// The export's arguments one for one (its C signature is fixed).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, cos: &TensorDesc, sin: &TensorDesc,
    positions: Option<&TensorDesc>, heads_first: i32, occupancy: i32, warps: i32, heads: i32,
) -> FfiResult<Plan> {
    plan_signed(KERNEL, ["q", "k"], out, q, k, cos, sin, positions, heads_first, 1.0, occupancy, warps, heads)
}

/// Launches `rope_tokens` for element type T (the export's dispatch), with the table's type from
/// the plan.
#[allow(clippy::too_many_arguments)]
pub fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, q: &TensorDesc, k: &TensorDesc, cos: &TensorDesc, sin: &TensorDesc,
    positions: Option<&TensorDesc>, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let d = (out, q, k, cos, sin, positions);
    if p.table == p.dtype {
        launch_typed::<T, T>(p, d, stream)
    } else {
        launch_typed::<T, f32>(p, d, stream)
    }
}

type Descs<'a> =
    (&'a TensorDesc, &'a TensorDesc, &'a TensorDesc, &'a TensorDesc, &'a TensorDesc, Option<&'a TensorDesc>);

fn launch_typed<T: Element, C: Element>(
    p: &Plan, (out, q, k, cos, sin, positions): Descs, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let [hq_t, hk_t, half_t] = p.tiles();
    let mut generics: Vec<String> = [T::DTYPE, C::DTYPE].iter().map(|t| t.as_str().to_string()).collect();
    generics.extend([hq_t, hk_t, half_t].map(|v| v.to_string()));
    generics.push(p.positions.is_some().to_string()); // POS
    generics.push((p.positions == Some(DType::I64)).to_string()); // WIDE
    generics.push(p.heads.is_some().to_string()); // SPLIT
    generics.push(p.early().to_string()); // EARLY
    let launch = Launch { generics, grid: p.grid(), options: ffi_util::compile_options(p.occupancy, p.warps) };
    let ([sqb, sqs, sqh], [skb, sks, skh], [sob, sos, soh]) = (p.q, p.k, p.out);
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors (every offset of q, k
    // and out inside i32; position ids are clamped to the table's rows on the device, after an
    // assertion); the memory is PyTorch's, alive until the caller's stream has run the kernel.
    unsafe {
        let [oq, q_ptr, k_ptr] = [out, q, k].map(|t| ffi_util::device_ptr::<T>(t));
        let ok = cutile::cuda_async::device_buffer::DevicePointer::<T>::from_cu_deviceptr(
            out.data + (p.hq as i64 * p.out[2] as i64) as u64 * std::mem::size_of::<T>() as u64,
        );
        let [c_ptr, s_ptr] = [cos, sin].map(|t| ffi_util::device_ptr::<C>(t));
        let pos_ptr = ffi_util::device_ptr::<i32>(positions.unwrap_or(cos)); // unread without POS
        let entry = device::rope_tokens(
            oq,
            ok,
            q_ptr,
            k_ptr,
            c_ptr,
            s_ptr,
            pos_ptr,
            p.s,
            p.hq,
            p.hk,
            p.half,
            p.table_rows,
            sqb,
            sqs,
            sqh,
            skb,
            sks,
            skh,
            sob,
            sos,
            soh,
            p.cs[0],
            p.cs[1],
            p.pos[0],
            p.pos[1],
            p.sin_sign,
            p.chunks().0,
        );
        launch.enqueue(entry, stream)
    }
}

// `cutile_rope`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_rope(out, q, k, cos, sin; optional positions; heads_first: i32, occupancy: i32, warps: i32, heads: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and the entry lowered to Tile IR for sm_90 (then assembled by tileiras
    //! when it is there) for every dtype, both table types, both position types and the head counts
    //! of real models.
    use super::*;
    use crate::ffi_util::{assert_fails, assert_hints_checked, rc, test_desc, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "rope_device" };

    /// A contiguous (b, s, h, d) bf16 tensor.
    fn bshd(b: i64, s: i64, h: i64, d: i64) -> TensorDesc {
        test_desc(DType::BF16, &[b, s, h, d], &[s * h * d, h * d, d, 1])
    }

    fn table(bc: i64, rows: i64, w: i64, dtype: DType) -> TensorDesc {
        test_desc(dtype, &[bc, rows, w], &[rows * w, w, 1])
    }

    #[test]
    fn plan_takes_layouts_tables_and_positions() {
        let (q, k, out) = (bshd(2, 5, 32, 128), bshd(2, 5, 8, 128), bshd(2, 5, 40, 128));
        let cs = table(1, 4096, 128, DType::BF16);
        let p = plan(&out, &q, &k, &cs, &cs, None, 0, -1, -1, -1).unwrap();
        assert_eq!(
            (p.tiles(), p.table, p.positions, p.cs, p.out),
            ([32, 8, 64], DType::BF16, None, [0, 128], [5 * 40 * 128, 40 * 128, 128])
        );
        // (b, h, s, d) q passed as its (b, s, h, d) view; f32 half-width tables per sequence; i32 ids
        let q_t = test_desc(DType::BF16, &[2, 5, 32, 128], &[32 * 5 * 128, 128, 5 * 128, 1]);
        let cs = table(2, 5, 64, DType::F32);
        let pos = test_desc(DType::I32, &[1, 5], &[5, 1]);
        let p = plan(&out, &q_t, &k, &cs, &cs, Some(&pos), 0, 4, 8, -1).unwrap();
        assert_eq!(
            (p.q, p.table, p.positions, p.cs, p.pos, p.occupancy),
            ([32 * 5 * 128, 128, 5 * 128], DType::F32, Some(DType::I32), [5 * 64, 64], [0, 1], Some(4))
        );
        let ids = test_desc(DType::I64, &[2, 5], &[5, 1]);
        assert_eq!(plan(&out, &q, &k, &cs, &cs, Some(&ids), 0, -1, -1, -1).unwrap().pos, [10, 2]); // i32 words
        let p = plan_signed("rope_backward", ["dq", "dk"], &out, &q, &k, &cs, &cs, Some(&pos), 0, -1.0, -1, -1, -1)
            .unwrap();
        assert_eq!((p.sin_sign, p.tiles()), (-1.0, [32, 8, 64]));
        // MQA, an odd head count and d = 80
        let p = plan(
            &bshd(1, 1, 15, 80),
            &bshd(1, 1, 14, 80),
            &bshd(1, 1, 1, 80),
            &table(1, 9, 80, DType::BF16),
            &table(1, 9, 80, DType::BF16),
            None,
            0,
            -1,
            -1,
            -1,
        )
        .unwrap();
        assert_eq!(p.tiles(), [16, 1, 64]);
        // heads first: (b, h, s, d) descriptors, the same plan as their (b, s, h, d) views'; 2-D table, 1-D ids
        let hf = |h: i64| test_desc(DType::BF16, &[2, h, 5, 128], &[h * 5 * 128, 5 * 128, 128, 1]);
        let (table2, ids1) = (test_desc(DType::BF16, &[4096, 128], &[128, 1]), test_desc(DType::I64, &[5], &[1]));
        let p = plan(&hf(40), &hf(32), &hf(8), &table2, &table2, Some(&ids1), 1, -1, -1, -1).unwrap();
        assert_eq!(
            (p.q, p.out, p.cs, p.pos, p.s),
            ([32 * 5 * 128, 128, 5 * 128], [40 * 5 * 128, 128, 5 * 128], [0, 128], [0, 2], 5)
        );
    }

    #[test]
    fn heads_per_tile_block_split_a_token_over_the_grid() {
        let (q, k, out) = (bshd(2, 5, 32, 128), bshd(2, 5, 8, 128), bshd(2, 5, 40, 128));
        let cs = table(1, 4096, 128, DType::BF16);
        let split = |heads| plan(&out, &q, &k, &cs, &cs, None, 0, -1, -1, heads).unwrap();
        let whole = split(-1);
        assert_eq!((whole.heads, whole.tiles(), whole.chunks(), whole.grid()), (None, [32, 8, 64], (1, 1), (10, 1, 1)));
        // 8 heads a tile block: q's 32 in 4, k's 8 in 1, so 5 tile blocks a token
        let p = split(8);
        assert_eq!((p.heads, p.tiles(), p.chunks(), p.grid()), (Some(8), [8, 8, 64], (4, 1), (10, 5, 1)));
        assert_eq!((split(16).tiles(), split(16).grid()), ([16, 8, 64], (10, 3, 1)));
        // more heads than q has: still q's tile block and k's apart
        assert_eq!((split(64).tiles(), split(64).grid()), ([32, 8, 64], (10, 2, 1)));
        // Qwen2's 28 + 4 heads: the last q tile block holds 4 of its 8 lanes' heads
        let p = plan(&bshd(2, 5, 32, 128), &bshd(2, 5, 28, 128), &bshd(2, 5, 4, 128), &cs, &cs, None, 0, -1, -1, 8);
        assert_eq!(p.unwrap().chunks(), (4, 1));
        // a whole token's loads all first (EARLY) up to EARLY_TOKENS tokens, never with the split
        assert!(whole.early() && !split(8).early());
        let many = |s| bshd(1, s, 1, 128);
        let tokens =
            |s: i64| plan(&bshd(1, s, 2, 128), &many(s), &many(s), &cs, &cs, None, 0, -1, -1, -1).unwrap().early();
        assert_eq!((tokens(256), tokens(257)), (true, false));
        for bad in [0, 3, 12, 512, -2] {
            assert_fails(
                plan(&out, &q, &k, &cs, &cs, None, 0, -1, -1, bad),
                rc::INVALID_ARGUMENT,
                "heads per tile block must be -1",
            );
        }
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (q, k, out) = (bshd(2, 5, 4, 8), bshd(2, 5, 2, 8), bshd(2, 5, 6, 8));
        let cs = table(1, 16, 8, DType::BF16);
        let pos = test_desc(DType::I64, &[2, 5], &[5, 1]);
        let run = |out: &TensorDesc,
                   q: &TensorDesc,
                   k: &TensorDesc,
                   c: &TensorDesc,
                   s: &TensorDesc,
                   p: Option<&TensorDesc>| { plan(out, q, k, c, s, p, 0, -1, -1, -1) };
        let f32_ids = test_desc(DType::F32, &[2, 5], &[5, 1]);
        assert_fails(run(&out, &q, &k, &cs, &cs, Some(&f32_ids)), rc::UNSUPPORTED_DTYPE, "rope supports i32, i64");
        let cases: [(FfiResult<Plan>, &str); 11] = [
            (run(&bshd(2, 5, 5, 8), &q, &k, &cs, &cs, None), "it must be [2, 5, 6, 8]"),
            (run(&out, &q, &bshd(2, 4, 2, 8), &cs, &cs, None), "it must be [2, 5, hk, 8]"),
            (run(&bshd(2, 5, 6, 7), &bshd(2, 5, 4, 7), &bshd(2, 5, 2, 7), &cs, &cs, None), "even d"),
            (
                run(&out, &q, &k, &table(3, 16, 8, DType::BF16), &table(3, 16, 8, DType::BF16), None),
                "[1 or 2, rows, 8 or 4]",
            ),
            (
                run(&out, &q, &k, &table(1, 16, 6, DType::BF16), &table(1, 16, 6, DType::BF16), None),
                "[1 or 2, rows, 8 or 4]",
            ),
            (run(&out, &q, &k, &table(1, 4, 8, DType::BF16), &table(1, 4, 8, DType::BF16), None), "pass position ids"),
            (run(&out, &q, &k, &table(1, 16, 8, DType::F16), &table(1, 16, 8, DType::F16), None), "q's dtype or f32"),
            (run(&out, &q, &k, &cs, &table(1, 17, 8, DType::BF16), None), "`cos` shape [1, 16, 8] != `sin` shape"),
            (run(&out, &q, &k, &cs, &cs, Some(&test_desc(DType::I64, &[2, 4], &[4, 1]))), "[1 or 2, 5]"),
            (
                run(&test_desc(DType::BF16, &[2, 5, 6, 8], &[48, 8, 8, 1]), &q, &k, &cs, &cs, Some(&pos)),
                "would overlap",
            ),
            (
                run(&out, &test_desc(DType::BF16, &[2, 5, 4, 8], &[160, 32, 8, 2]), &k, &cs, &cs, None),
                "contiguous in its last dim",
            ),
        ];
        for (result, needle) in cases {
            assert_fails(result, rc::INVALID_ARGUMENT, needle);
        }
        let wide = |h: i64| bshd(1, 1, h, 512);
        assert_fails(
            run(
                &wide(256),
                &wide(128),
                &wide(128),
                &table(1, 4, 512, DType::BF16),
                &table(1, 4, 512, DType::BF16),
                None,
            ),
            rc::INVALID_ARGUMENT,
            "split the heads",
        );
        let far = test_desc(DType::BF16, &[2, 5, 4, 8], &[i32::MAX as i64 - 10, 32, 8, 1]);
        assert_fails(run(&out, &far, &k, &cs, &cs, None), rc::INVALID_ARGUMENT, "past 2^31");
        assert_hints_checked(true, |occupancy, warps| plan(&out, &q, &k, &cs, &cs, None, 0, occupancy, warps, -1));
    }

    #[test]
    fn entry_lowers_to_tile_ir_for_sm90() {
        for t in ["f32", "f16", "bf16"] {
            for (c, pos, wide) in [(t, "true", "true"), ("f32", "true", "false"), (t, "false", "false")] {
                DEVICE.assert_lowers(
                    "rope_tokens",
                    &[t, c, "32", "8", "64", pos, wide, "false", "false"],
                    &["load_ptr_tko", "store_ptr_tko"],
                );
            }
        }
        // MQA; the largest tiles the plan admits (MAX_TILE), f32 tables, both with EARLY; SPLIT: a
        // tile block rotates one chunk of q's or of k's heads
        for generics in [
            ["bf16", "bf16", "16", "1", "32", "true", "true", "false", "true"],
            ["bf16", "f32", "128", "8", "64", "true", "true", "false", "false"],
            ["bf16", "f32", "128", "8", "64", "true", "true", "false", "true"],
            ["bf16", "f32", "32", "32", "256", "true", "true", "false", "false"],
            ["bf16", "f32", "32", "32", "256", "true", "true", "false", "true"],
            ["bf16", "bf16", "8", "8", "64", "true", "true", "true", "false"],
            ["bf16", "bf16", "8", "8", "64", "false", "false", "true", "false"],
        ] {
            DEVICE.assert_lowers("rope_tokens", &generics, &["store_ptr_tko"]);
        }
    }

    #[test]
    fn decode_step_lowers_as_launched() {
        // a decode step of Llama-3-8B (64 sequences x 1 token, 32 + 8 heads of 128, bf16), i64 ids into
        // a 1001-row full-width bf16 table and Hugging Face's per-token tables (64, 1, 128), with the
        // divisibility hints the launcher passes at run time (TILEKIT_CUBIN_DIR keeps the cubins:
        // NOTES.md, "Decode")
        use crate::ffi_util::ALIGNED_PTR;
        use cutile::tile_kernel::CompileOptions;
        let ptrs = ["oq_ptr", "ok_ptr", "q_ptr", "k_ptr", "cos_ptr", "sin_ptr", "pos_ptr"].map(|p| (p, ALIGNED_PTR));
        let ints = [
            ("s_len", 1),
            ("hq", 32),
            ("hk", 8),
            ("half", 64),
            ("table_rows", 1001),
            ("sqb", 4096),
            ("sqs", 4096),
            ("sqh", 128),
            ("skb", 1024),
            ("sks", 1024),
            ("skh", 128),
            ("sob", 5120),
            ("sos", 5120),
            ("soh", 128),
            ("scb", 0),
            ("scp", 128),
            ("spb", 2),
            ("sps", 2),
        ];
        let generics = ["bf16", "bf16", "32", "8", "64", "true", "true", "false", "true"];
        DEVICE.assert_div_hints_lower("rope_tokens", &generics, &ptrs, &ints, CompileOptions::default(), "-decode64");
        let per_token = ints.map(|(name, v)| match name {
            "table_rows" => (name, 1),
            "scb" => (name, 128),
            "spb" | "sps" => (name, 0),
            _ => (name, v),
        });
        let generics = ["bf16", "bf16", "32", "8", "64", "false", "false", "false", "true"];
        DEVICE.assert_div_hints_lower("rope_tokens", &generics, &ptrs, &per_token, CompileOptions::default(), "-hf64");
        // the same step over 5 tile blocks a token (8 heads each: `heads` 8)
        let split = ["bf16", "bf16", "8", "8", "64", "false", "false", "true", "false"];
        DEVICE.assert_div_hints_lower(
            "rope_tokens",
            &split,
            &ptrs,
            &per_token,
            CompileOptions::default(),
            "-hf64-split8",
        );
        // the table row is loaded in q's and k's tile shapes ([heads, d/2], a head stride of 0), not as
        // a [1, d/2] row broadcast to them (two-byte loads in the SASS: NOTES.md, "Decode")
        let ir = DEVICE.assert_lowers("rope_tokens", &generics, &["load_ptr_tko"]);
        let row_loads = ir.lines().filter(|l| l.contains("load_ptr_tko") && l.contains("tile<1x64xptr")).count();
        let tile_loads = ir.lines().filter(|l| l.contains("load_ptr_tko") && l.contains("tile<32x64xptr")).count();
        assert_eq!((row_loads, tile_loads), (0, 4), "q's halves, cos and sin as [32, 64] loads:\n{ir}");
        // a whole token's loads, q's and k's, all come before its first store: written after q's
        // stores, k's loads stayed after them in the SASS, a second DRAM round trip a token
        // (NOTES.md, "k's loads after q's stores")
        let lines: Vec<&str> = ir.lines().collect();
        let last_load = lines.iter().rposition(|l| l.contains("load_ptr_tko")).expect("loads");
        let first_store = lines.iter().position(|l| l.contains("store_ptr_tko")).expect("stores");
        assert!(last_load < first_store, "a load after a store (line {last_load} > {first_store}):\n{ir}");
    }
}
