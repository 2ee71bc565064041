//! C-ABI launcher of attention's gradients: `cutile_attention_backward` (op.py's CDEF).
//!
//!   int32_t cutile_attention_backward(const TensorDesc* out, const TensorDesc* dout,
//!                                     const TensorDesc* q, const TensorDesc* k, const TensorDesc* v,
//!                                     const TensorDesc* o, const TensorDesc* lse, int32_t causal,
//!                                     float scale, int32_t window, int32_t block, int32_t step,
//!                                     int32_t kv_step, int32_t occupancy, int32_t warps,
//!                                     int32_t device_id, uint64_t stream);
//!
//! q, o (the forward's output) and dout (its gradient) are (b, h, s_q, d), k and v (b, h_kv, s_kv,
//! d), one dtype (f16 or bf16), d 64 or 128, any strides with a contiguous last dim; lse the
//! forward's contiguous f32 (b, h, s_q) log-sum-exp (`cutile_attention` with `lse`); causal, scale
//! and window as the forward was called (a sink needs nothing more: lse holds it). out is one
//! (b·h·s_q + 2·b·h_kv·s_kv, d) tensor of q's dtype (rows any stride >= d apart) whose rows receive
//! dQ (b, h, s_q, d), then dK and dV (b, h_kv, s_kv, d) (one output, the kit's contract; op.py views
//! it as the three).
//!
//! Two kernels on the caller's stream (kernel.rs): attention_bwd_dq over ceil(s_q / block) · b · h
//! tile blocks, which also writes Δ = rowsum(dO ⊙ O) to a stream-ordered f32 workspace, then
//! attention_bwd_dkdv over ceil(s_kv / block) · b · h_kv, which reads it; the workspace is freed
//! after both. The variant: `block` the rows of each kernel's own tile (dQ's query tile, dK/dV's
//! key tile), `step` the rows of the key tiles dQ walks and `kv_step` of the query tiles dK/dV walks
//! (-1: `step`), each 32, 64 or 128; `occupancy` and `warps` compile hints for both; -1 picks the
//! default (block 128, step 64, 8 warps at block 128). The two kernels' best steps differ (H100,
//! Llama-3-8B: dQ at 64, dK/dV at 32; NOTES.md). Block 64 at 8 warps is refused (NOTES.md). Every descriptor is validated before anything touches the GPU: bad input
//! returns -2/-5/-6 with a message, never a launch.
use super::kernel::attention_backward_device as device;
use crate::attention::ffi as forward;
use crate::ffi_util::{self, invalid, or_default, DType, Element, FfiResult, Launch, StreamAlloc, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "attention_backward";
pub const DEFAULT_BLOCK: i32 = 128;
pub const DEFAULT_STEP: i32 = 64;
pub const DEFAULT_WARPS_BLOCK128: i32 = 8;
const TILES: [i32; 3] = [32, 64, 128];

/// A validated launch: the forward's plan of (o as its out, q, k, v, lse) (sizes, strides, mask,
/// window, scale), the strides of dout, and the tiles.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub fwd: forward::Plan,
    /// out's row stride (elements, >= d).
    pub out_stride: i32,
    /// (sb, sh, ss) of dout.
    pub do_strides: [i32; 3],
    pub scale: f32,
    pub block: i32,
    pub step: i32,
    /// The rows of the query tiles the dK/dV kernel walks.
    pub kv_step: i32,
    pub occupancy: Option<i32>,
    pub warps: Option<i32>,
}

impl Plan {
    /// Rows of dQ, then of dK (= of dV) in out.
    pub fn parts(&self) -> (i64, i64) {
        let f = &self.fwd;
        (f.b as i64 * f.h as i64 * f.sq as i64, f.b as i64 * f.hkv as i64 * f.skv as i64)
    }

    /// (dQ kernel's grid, dK/dV kernel's grid).
    pub fn grids(&self) -> ((u32, u32, u32), (u32, u32, u32)) {
        let f = &self.fwd;
        let tiles = |s: i32| ((s + self.block - 1) / self.block) as u32;
        ((tiles(f.sq) * (f.b * f.h) as u32, 1, 1), (tiles(f.skv) * (f.b * f.hkv) as u32, 1, 1))
    }
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, dout: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, o: &TensorDesc,
    lse: &TensorDesc, causal: i32, scale: f32, window: i32, block: i32, step: i32, kv_step: i32, occupancy: i32,
    warps: i32,
) -> FfiResult<Plan> {
    let tensors = [(dout, "dout", 4), (q, "q", 4), (k, "k", 4), (v, "v", 4), (o, "o", 4), (out, "out", 2)];
    ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    for (t, name) in [(o, "o"), (dout, "dout")] {
        if t.shape() != q.shape() {
            return Err(invalid(format!(
                "`{name}` is {} {:?}: it must be (b, h, s_q, d) of `q`'s shape {:?}",
                t.dtype()?.name(),
                t.shape(),
                q.shape(),
            )));
        }
    }
    ffi_util::check_last_dims_contiguous(&[(dout, "dout"), (o, "o"), (out, "out")])?;
    // The forward's plan below checks o in out's place; its span and a non-aliasing o here, named.
    let do_strides = forward::strides(dout, "dout")?;
    forward::strides(o, "o")?;
    if [q, k, v].iter().any(|t| t.data == o.data || t.data == dout.data) {
        return Err(invalid("`o` and `dout` must be the forward's output and its gradient, not q, k or v"));
    }
    let (block, step) = (or_default(block, DEFAULT_BLOCK), or_default(step, DEFAULT_STEP));
    let kv_step = or_default(kv_step, step);
    if !TILES.contains(&block) || !TILES.contains(&step) || !TILES.contains(&kv_step) {
        return Err(invalid(format!(
            "variant block={block} step={step} kv_step={kv_step}: each must be 32, 64 or 128, or -1 for the default"
        )));
    }
    if block == 64 && warps == 8 {
        // NOTES.md, "Measured": this build gave a wrong dQ on the H100, cause unknown
        return Err(invalid(
            "variant block=64 warps=8: refused (a wrong dQ on the H100 with 64-row tiles at 8 warps; \
             use 4 warps, -1, or block=128)",
        ));
    }
    // The forward's checks of q, k, v, lse, the mask, the window and the scale (o in out's place).
    let fwd = forward::plan(o, q, k, v, None, Some(lse), causal, scale, window, 64, 64, -1, -1, 0, -1)?;
    let d = fwd.d as i64;
    let rows = fwd.b as i64 * (fwd.h as i64 * fwd.sq as i64 + 2 * fwd.hkv as i64 * fwd.skv as i64);
    if out.shape() != [rows, d] || out.strides()[0] < d {
        return Err(invalid(format!(
            "`out` is {} {:?} with strides {:?}: pass ({rows}, {d}), the rows of dQ, dK and dV (rows >= d apart)",
            out.dtype()?.name(),
            out.shape(),
            out.strides(),
        )));
    }
    if [dout, q, k, v, o, lse].iter().any(|t| t.data == out.data) {
        return Err(invalid("`out` must not alias an input: the gradients are written while the inputs are read"));
    }
    if rows * out.strides()[0] > i32::MAX as i64 {
        return Err(invalid(format!(
            "`out` spans {} elements; the kernels index with i32: split the batch",
            rows * out.strides()[0]
        )));
    }
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?.or((block == 128).then_some(DEFAULT_WARPS_BLOCK128));
    let out_stride = out.strides()[0] as i32;
    Ok(Plan { dtype: fwd.dtype, fwd, out_stride, do_strides, scale, block, step, kv_step, occupancy, warps })
}

#[allow(clippy::too_many_arguments)]
fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dout: &TensorDesc, q: &TensorDesc, k: &TensorDesc, v: &TensorDesc, o: &TensorDesc,
    lse: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let f = &p.fwd;
    let (dq_rows, dkv_rows) = p.parts();
    let sr = p.out_stride as i64;
    let bytes = std::mem::size_of::<T>() as u64;
    let delta_bytes = (f.b as usize) * (f.h as usize) * (f.sq as usize) * std::mem::size_of::<f32>();
    let ws = StreamAlloc::new(delta_bytes, stream, "delta workspace")?;
    // SAFETY: plan() checked every descriptor (dtypes, shapes, strides, out's length); the three
    // gradients are consecutive parts of out; the workspace holds b · h · s_q f32.
    let (dq_ptr, dk_ptr, dv_ptr, delta_ptr) = unsafe {
        let at = |elems: i64| {
            cutile::cuda_async::device_buffer::DevicePointer::<T>::from_cu_deviceptr(out.data + elems as u64 * bytes)
        };
        (
            at(0),
            at(dq_rows * sr),
            at((dq_rows + dkv_rows) * sr),
            cutile::cuda_async::device_buffer::DevicePointer::<f32>::from_cu_deviceptr(ws.ptr),
        )
    };
    let [q_ptr, k_ptr, v_ptr, o_ptr, do_ptr] = unsafe { [q, k, v, o, dout].map(|t| ffi_util::device_ptr::<T>(t)) };
    let lse_ptr = unsafe { ffi_util::device_ptr::<f32>(lse) };
    let (grid_dq, grid_dkdv) = p.grids();
    let options = || ffi_util::compile_options(p.occupancy, p.warps);
    // generics T, BM, BN, D, WINDOW (dQ: BM = block, BN = step); T, BN, BM, D, WINDOW (dK/dV: BN = block, BM = kv_step).
    let mut dq_launch = Launch::new::<T>(&[p.block, p.step, f.d], grid_dq, options());
    dq_launch.generics.push(f.window.is_some().to_string());
    let mut dkdv_launch = Launch::new::<T>(&[p.block, p.kv_step, f.d], grid_dkdv, options());
    dkdv_launch.generics.push(f.window.is_some().to_string());
    // out's parts are (b, heads, s, d) in rows p.out_stride apart.
    let packed = |heads: i32, s: i32| [heads * s * p.out_stride, s * p.out_stride, p.out_stride];
    let [dq_sb, dq_sh, dq_ss] = packed(f.h, f.sq);
    let [dk_sb, dk_sh, dk_ss] = packed(f.hkv, f.skv);
    let [[o_sb, o_sh, o_ss], [q_sb, q_sh, q_ss], [k_sb, k_sh, k_ss], [v_sb, v_sh, v_ss]] = f.strides;
    let [do_sb, do_sh, do_ss] = p.do_strides;
    let (window, c) = (f.window.unwrap_or(-1), f.qk_scale_log2);
    // SAFETY: as above; the memory is PyTorch's, alive until the caller's stream has run both kernels.
    unsafe {
        #[rustfmt::skip] // a tensor or a role a line
        let dq_op = device::attention_bwd_dq(
            dq_ptr, delta_ptr, lse_ptr, q_ptr, k_ptr, v_ptr, o_ptr, do_ptr,
            f.b, f.h, f.hkv, f.sq, f.skv,
            dq_sb, dq_sh, dq_ss, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss,
            o_sb, o_sh, o_ss, do_sb, do_sh, do_ss,
            f.diag, window, c, p.scale,
        );
        dq_launch.enqueue(dq_op, stream)?;
        #[rustfmt::skip]
        let dkdv_op = device::attention_bwd_dkdv(
            dk_ptr, dv_ptr, delta_ptr, lse_ptr, q_ptr, k_ptr, v_ptr, do_ptr,
            f.b, f.h, f.hkv, f.sq, f.skv,
            dk_sb, dk_sh, dk_ss, dk_sb, dk_sh, dk_ss, q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss,
            do_sb, do_sh, do_ss,
            f.diag, window, c, p.scale,
        );
        dkdv_launch.enqueue(dkdv_op, stream)?;
    }
    ws.free()
}

// `cutile_attention_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_attention_backward(out, dout, q, k, v, o, lse; causal: i32, scale: f32, window: i32, block: i32, step: i32, kv_step: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, the packed output, and both entries lowered to Tile IR for sm_90 (then
    //! assembled by tileiras when it is there).
    use super::*;
    use crate::attention::ffi::tests::bhsd;
    use crate::ffi_util::{assert_fails, assert_hints_checked, rc, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "attention_backward_device" };

    /// (out, dout, q, k, v, o, lse) contiguous for (b, h, hkv, sq, skv, d).
    fn args(dtype: DType, [b, h, hkv, sq, skv, d]: [i64; 6]) -> [TensorDesc; 7] {
        let rows = b * h * sq + 2 * b * hkv * skv;
        [
            TensorDesc::from_parts(0x9000, dtype, &[rows, d], &[d, 1]),
            bhsd(dtype, 0x6000, [b, h, sq, d]),
            bhsd(dtype, 0x1000, [b, h, sq, d]),
            bhsd(dtype, 0x2000, [b, hkv, skv, d]),
            bhsd(dtype, 0x3000, [b, hkv, skv, d]),
            bhsd(dtype, 0x4000, [b, h, sq, d]),
            TensorDesc::from_parts(0x5000, DType::F32, &[b, h, sq], &[h * sq, sq, 1]),
        ]
    }

    fn plan_of(t: &[TensorDesc; 7], causal: i32, window: i32, block: i32, step: i32) -> FfiResult<Plan> {
        plan(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], causal, 0.125, window, block, step, -1, -1, -1)
    }

    #[test]
    fn plan_packs_the_three_gradients_and_keeps_the_forward_mask() {
        let t = args(DType::BF16, [2, 32, 8, 1000, 4097, 128]);
        let p = plan_of(&t, 1, -1, -1, -1).unwrap();
        assert_eq!((p.block, p.step, p.kv_step, p.warps), (128, 64, 64, Some(8)));
        assert_eq!((p.parts(), p.out_stride), ((2 * 32 * 1000, 2 * 8 * 4097), 128));
        assert_eq!((p.fwd.diag, p.fwd.window, p.fwd.lse), (3097, None, true));
        assert_eq!(p.grids(), ((8 * 64, 1, 1), (33 * 16, 1, 1)));
        let w = plan_of(&t, 1, 512, 64, 32).unwrap();
        assert_eq!((w.fwd.window, w.block, w.step, w.kv_step, w.warps), (Some(512), 64, 32, 32, None));
        let [o_, d_, q_, k_, v_, oo, l_] = &t;
        let split = plan(o_, d_, q_, k_, v_, oo, l_, 1, 0.125, -1, 128, 64, 32, -1, 8).unwrap();
        assert_eq!((split.step, split.kv_step), (64, 32));
        assert_hints_checked(true, |occ, wp| {
            plan(&t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], 1, 0.5, -1, -1, -1, -1, occ, wp)
        });
    }

    #[test]
    fn plan_rejects_bad_input_naming_the_argument() {
        let [out, dout, q, k, v, o, lse] = args(DType::F16, [1, 4, 2, 8, 8, 64]);
        let short = TensorDesc::from_parts(0x9000, DType::F16, &[100, 64], &[64, 1]);
        let f32_out = TensorDesc::from_parts(0x9000, DType::F32, &[4 * 8 + 2 * 2 * 8, 64], &[64, 1]);
        let odd_o = bhsd(DType::F16, 0x4000, [1, 4, 9, 64]);
        let bad_lse = TensorDesc::from_parts(0x5000, DType::F16, &[1, 4, 8], &[32, 8, 1]);
        let cases: [([&TensorDesc; 7], &str); 6] = [
            ([&short, &dout, &q, &k, &v, &o, &lse], "`out` is f16 [100, 64]"),
            ([&f32_out, &dout, &q, &k, &v, &o, &lse], "`dout` is f16 but `out` is f32"),
            ([&out, &dout, &q, &k, &v, &odd_o, &lse], "`o` is f16 [1, 4, 9, 64]"),
            ([&out, &odd_o, &q, &k, &v, &o, &lse], "`dout` is f16 [1, 4, 9, 64]"),
            ([&out, &dout, &q, &k, &v, &o, &bad_lse], "`lse` is f16"),
            ([&q, &dout, &q, &k, &v, &o, &lse], "`out` must have 2 dims"),
        ];
        for ([a, b, c, d, e, f, g], needle) in cases {
            assert_fails(plan(a, b, c, d, e, f, g, 1, 0.125, -1, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, needle);
        }
        let t = [out, dout, q, k, v, o, lse];
        assert_fails(plan_of(&t, 1, -1, 256, -1), rc::INVALID_ARGUMENT, "block=256");
        assert_fails(plan_of(&t, 1, -1, -1, 16), rc::INVALID_ARGUMENT, "step=16");
        assert_fails(plan_of(&t, 0, 4, -1, -1), rc::INVALID_ARGUMENT, "window=4 with causal=0");
        let [out, dout, q, k, v, o, lse] = &t;
        let refused = plan(out, dout, q, k, v, o, lse, 1, 0.125, -1, 64, 64, -1, -1, 8);
        let kv_step = plan(out, dout, q, k, v, o, lse, 1, 0.125, -1, -1, -1, 16, -1, -1);
        assert_fails(kv_step, rc::INVALID_ARGUMENT, "kv_step=16");
        assert_fails(refused, rc::INVALID_ARGUMENT, "variant block=64 warps=8: refused");
        let same_as_q = plan(out, dout, q, k, v, q, lse, 1, 0.125, -1, -1, -1, -1, -1, -1);
        assert_fails(same_as_q, rc::INVALID_ARGUMENT, "`o` and `dout` must be the forward's output");
        let aliased = TensorDesc::from_parts(0x6000, DType::F16, &[4 * 8 + 2 * 2 * 8, 64], &[64, 1]);
        assert_fails(
            plan(&aliased, &t[1], &t[2], &t[3], &t[4], &t[5], &t[6], 1, 0.125, -1, -1, -1, -1, -1, -1),
            rc::INVALID_ARGUMENT,
            "must not alias",
        );
    }

    #[test]
    fn the_llama_tiles_lower_with_each_hint() {
        // d = 128 with 128-row own tiles at 8 worker warps (the default), and 64-row own tiles at
        // the default warps (TILEKIT_CUBIN_DIR keeps the cubins for cuobjdump -res-usage).
        for (block, step, options, what) in [
            ("128", "64", ffi_util::compile_options(None, Some(8)), "-warps8"),
            ("128", "32", ffi_util::compile_options(None, Some(8)), "-warps8"),
            ("64", "64", ffi_util::compile_options(None, None), "-default"),
        ] {
            let generics = ["bf16", block, step, "128", "false"];
            for entry in ["attention_bwd_dq", "attention_bwd_dkdv"] {
                let ir = DEVICE.lower(entry, &generics, &[], options.clone(), what);
                assert!(ir.contains("mma"), "{entry}{what}:\n{ir}");
            }
        }
    }

    #[test]
    fn both_entries_lower_to_tile_ir_for_sm90() {
        for dtype in ["f16", "bf16"] {
            for (block, step, d, window) in [
                ("128", "64", "128", "false"),
                ("64", "64", "64", "true"),
                ("128", "32", "128", "true"),
                ("64", "128", "64", "false"),
            ] {
                let generics = [dtype, block, step, d, window];
                DEVICE.assert_lowers("attention_bwd_dq", &generics, &["mma", "exp2", "store_view_tko"]);
                DEVICE.assert_lowers("attention_bwd_dkdv", &generics, &["mma", "exp2", "store_view_tko"]);
            }
        }
    }
}
