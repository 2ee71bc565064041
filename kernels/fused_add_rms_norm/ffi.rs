//! C-ABI launcher of fused_add_rms_norm: `cutile_fused_add_rms_norm` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_fused_add_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* residual,
//!                                     const TensorDesc* weight, float eps, int32_t block, int32_t rows,
//!                                     int32_t occupancy, int32_t warps, int32_t tail, int32_t device_id,
//!                                     uint64_t stream);
//!
//! x and residual are (m, n), weight (n,), all of one dtype (f32, f16 or bf16) with contiguous last
//! dims, at any row strides >= n. Per row: s = x + residual (rounded to the dtype), y = s *
//! rsqrt(mean(s^2) + eps) * weight. Where they go depends on out's rank:
//!   * out (2, m, n), any plane and row strides whose planes do not overlap: y into out[0], s into
//!     out[1] (the functional form: op.py's entry and torch.ops.tilekit.fused_add_rms_norm);
//!   * out (m, n): y into out, s into residual itself (the in-place form of vLLM and FlashInfer;
//!     out may be x itself: every tile block reads its rows whole before it writes them).
//!
//! `block` is the tile width, a power of two >= n (the row is held whole: n <= MAX_BLOCK), `rows`
//! the rows per tile block, `occupancy` and `warps` the compiler hints (1..=32; 4 or 8); -1 picks
//! the default (rows: ~8K elements per tile). `tail` > 0 (a power of two in [16, block], with
//! block < n <= block + tail, rows 1) holds each row as a block-wide body and a tail-wide tail tile
//! (`fused_add_rms_norm_rows_tail`: n = 5120 in 4096 + 1024 lanes); -1 or 0: one whole-row tile.
//! One tile block per row tile, through masked pointer
//! tiles: every i32 offset of the padded tiles must fit (else -6, "split the rows"). Every
//! descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with a
//! message, never a launch.
use super::kernel::fused_add_rms_norm_device as device;
use crate::ffi_util::{self, check_same_shape, invalid, to_i32, DType, Element, FfiResult, RowPlan, TensorDesc};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "fused_add_rms_norm";
/// The widest row a tile block holds whole (x, residual, s and w of a row in registers).
pub const MAX_BLOCK: i32 = 16384;
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: beyond it registers spill.
const MAX_TILE_ELEMS: i32 = 16384;

/// A validated launch. `row.stride_x` is x's row stride, `row.stride_y` y's.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub row: RowPlan,
    pub stride_r: i32,
    /// s's row stride: out[1]'s, or residual's (in place).
    pub stride_s: i32,
    /// Elements from out's start to s's (out[1]); None: s goes into residual.
    pub s_plane: Option<u64>,
    pub eps: f32,
    /// Some(tail): each row as a `block`-wide body and a `tail`-wide tail (block < n <= block + tail).
    pub tail: Option<i32>,
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, x: &TensorDesc, r: &TensorDesc, w: &TensorDesc, eps: f32, block: i32, rows: i32, occupancy: i32,
    warps: i32, tail: i32,
) -> FfiResult<Plan> {
    let planes = out.ndim == 3;
    let out_dims = if planes { 3 } else { 2 };
    let tensors = [(x, "x", 2), (r, "residual", 2), (out, "out", out_dims), (w, "weight", 1)];
    let dtype = ffi_util::check_float_tensors(KERNEL, &tensors)?;
    check_same_shape(x, "x", r, "residual")?;
    let (m, n) = (to_i32(x.shape[0], "m")?, to_i32(x.shape[1], "n")?);
    let want: &[i64] = if planes { &[2, m as i64, n as i64] } else { &[m as i64, n as i64] };
    if out.shape() != want {
        return Err(invalid(format!(
            "`out` is {:?}: it must be [2, {m}, {n}] (y, then x + residual) or [{m}, {n}] (y; x + residual \
             written into residual)",
            out.shape()
        )));
    }
    if w.shape[0] != n as i64 {
        return Err(invalid(format!("`weight` has {} elements but x has n={n} columns", w.shape[0])));
    }
    ffi_util::check_last_dims_contiguous(&[(x, "x"), (r, "residual"), (out, "out"), (w, "weight")])?;
    if !eps.is_finite() || eps < 0.0 {
        return Err(invalid(format!("eps={eps}: must be finite and >= 0")));
    }
    let whole = ffi_util::whole_row_block(n, MAX_BLOCK)
        .ok_or_else(|| invalid(format!("n={n}: {KERNEL} holds whole rows of at most {MAX_BLOCK} elements")))?;
    let (block, rows) =
        ffi_util::row_tile(block, rows, whole, |b| ffi_util::default_rows(8192, b, m), 64, MAX_TILE_ELEMS)?;
    let tail = ffi_util::tail_tile(tail, block, rows, n, MAX_TILE_ELEMS)?;
    if tail.is_none() && block < n {
        return Err(invalid(format!(
            "variant block={block}: {KERNEL} holds whole rows; needs n={n} <= block, or a tail with n <= block + tail"
        )));
    }
    let (occupancy, warps) = (ffi_util::occupancy_hint(occupancy)?, ffi_util::warps_hint(warps)?);
    let stride_x = ffi_util::row_stride(x, n, "x", format_args!("n={n}"))?;
    let stride_r = ffi_util::row_stride(r, n, "residual", format_args!("n={n}"))?;
    let (stride_y, stride_s, s_plane) = if planes {
        let rows_of = |plane: usize| {
            let mut d = *out;
            d.ndim = 2;
            d.data += plane as u64 * out.strides[0] as u64 * dtype.size_bytes() as u64;
            d.shape[..2].copy_from_slice(&out.shape[1..3]);
            d.strides[..2].copy_from_slice(&out.strides[1..3]);
            d
        };
        let stride_y = ffi_util::row_stride(&rows_of(0), n, "out", format_args!("n={n}"))?;
        // the planes may lie apart at any stride, but must not overlap: y's last element before s's first
        let plane_len = (m as i64 - 1) * stride_y as i64 + n as i64;
        if out.strides[0] < plane_len {
            return Err(invalid(format!(
                "`out` plane stride {} < {plane_len} elements: its y and x + residual planes would overlap",
                out.strides[0]
            )));
        }
        (stride_y, stride_y, Some(out.strides[0] as u64))
    } else {
        let stride_y = ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?;
        (stride_y, stride_r, None)
    };
    // A tail tile of two rows over x itself went wrong on an H100 (n = 4097: y's tail lane off in some
    // rows; NOTES.md, "The three losers"), for a reason not found; one row a tile block was right in
    // both forms, so that is the only tail run.
    if tail.is_some() && rows > 1 {
        return Err(invalid(format!(
            "variant rows={rows} with a tail: a body and a tail run one row a tile block; use rows=1"
        )));
    }
    let strides = [stride_x, stride_r, stride_y, stride_s];
    // the padded tile's last lane: block, or with a tail block + tail = round_up(n, tail) (tail divides block)
    if !ffi_util::masked_offsets_fit(m, n, rows, tail.unwrap_or(block), &strides) {
        return Err(invalid(format!(
            "m={m} rows at strides {strides:?}: an offset past 2^31 elements; split the rows into calls"
        )));
    }
    let row = RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y };
    Ok(Plan { dtype, row, stride_r, stride_s, s_plane, eps, tail })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, x: &TensorDesc, r: &TensorDesc, w: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x, stride_y, .. } = p.row;
    let mut launch = p.row.launch::<T>(p.row.row_tiles() as u32);
    // the tail entry's TAIL after T, ROWS, BLOCK
    launch.generics.extend(p.tail.map(|t| t.to_string()));
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors (s's plane inside out,
    // not overlapping y's; every i32 offset of the padded tiles fits); the memory is PyTorch's, alive
    // until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        let [y_ptr, x_ptr, r_ptr, w_ptr] = [out, x, r, w].map(|t| ffi_util::device_ptr::<T>(t));
        let s_ptr = match p.s_plane {
            Some(plane) => DevicePointer::<T>::from_cu_deviceptr(out.data + plane * std::mem::size_of::<T>() as u64),
            None => r_ptr,
        };
        let (ss, sr, eps) = (p.stride_s, p.stride_r, p.eps);
        if p.tail.is_some() {
            let entry = device::fused_add_rms_norm_rows_tail(
                y_ptr, s_ptr, x_ptr, r_ptr, w_ptr, m, n, stride_y, ss, stride_x, sr, eps,
            );
            launch.enqueue(entry, stream)
        } else {
            let entry = device::fused_add_rms_norm_rows(
                y_ptr, s_ptr, x_ptr, r_ptr, w_ptr, m, n, stride_y, ss, stride_x, sr, eps,
            );
            launch.enqueue(entry, stream)
        }
    }
}

// `cutile_fused_add_rms_norm`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_fused_add_rms_norm(out, x, residual, weight; eps: f32, block: i32, rows: i32, occupancy: i32, warps: i32, tail: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and the entry lowered to Tile IR for sm_90 (then assembled by tileiras
    //! when it is there) for every dtype and the tiles the autotune space asks for.
    use super::*;
    use crate::ffi_util::{assert_fails, assert_hints_checked, assert_row_tile_checked, rc, test_desc, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "fused_add_rms_norm_device" };

    fn rows(m: i64, n: i64) -> (TensorDesc, TensorDesc) {
        (test_desc(DType::BF16, &[m, n], &[n, 1]), test_desc(DType::BF16, &[n], &[1]))
    }

    #[test]
    fn plan_takes_both_forms_and_defaults() {
        let (x, w) = rows(257, 4097);
        let out = test_desc(DType::BF16, &[2, 257, 4097], &[257 * 4097, 4097, 1]);
        let p = plan(&out, &x, &x, &w, 1e-6, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.s_plane, p.stride_s), (8192, 1, Some(257 * 4097), 4097));
        // in place: s goes into residual, at its own row stride
        let r = test_desc(DType::BF16, &[257, 4097], &[5000, 1]);
        let p = plan(&x, &x, &r, &w, 1e-6, -1, -1, 4, 8, -1).unwrap();
        assert_eq!(
            (p.s_plane, p.stride_s, p.stride_r, p.row.occupancy, p.row.warps),
            (None, 5000, 5000, Some(4), Some(8))
        );
        let (x, w) = rows(3, 1000);
        let p = plan(&x, &x, &x, &w, 1e-6, -1, -1, -1, -1, -1).unwrap();
        // ~8K elements, no more rows than m has
        assert_eq!((p.row.block, p.row.rows, p.tail), (1024, 4, None));
        // a body and a tail: 5120 = 4096 + 1024
        let (x, w) = rows(16384, 5120);
        let p = plan(&x, &x, &x, &w, 1e-6, 4096, 1, -1, -1, 1024).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.tail), (4096, 1, Some(1024)));
        // block < n, no tail
        assert_eq!(plan(&x, &x, &x, &w, 1e-6, 4096, 2, -1, -1, 0).map(|p| p.tail).ok(), None);
        // one row a tile block with a tail, in place (out is x) and functional
        assert_fails(plan(&x, &x, &x, &w, 1e-6, 4096, 2, -1, -1, 1024), rc::INVALID_ARGUMENT, "use rows=1");
        let planes = test_desc(DType::BF16, &[2, 16384, 5120], &[16384 * 5120, 5120, 1]);
        assert_fails(plan(&planes, &x, &x, &w, 1e-6, 4096, 2, -1, -1, 1024), rc::INVALID_ARGUMENT, "use rows=1");
    }

    #[test]
    fn plan_checks_the_tail() {
        let (x, w) = rows(8, 5120);
        for (block, rows, tail, needle) in [
            (4096, 1, 512, "tail must be a power of two in [16, block] with block < n=5120 <= block + tail"),
            (4096, 1, 1000, "tail must be a power of two"),
            (8192, 1, 1024, "block < n=5120"),
            (4096, 4, 1024, "rows * (block + tail) <= 16384"),
            (4096, 2, 1024, "rows=2 with a tail"),
            (4096, 1, 0, "needs n=5120 <= block, or a tail"),
        ] {
            assert_fails(plan(&x, &x, &x, &w, 1e-6, block, rows, -1, -1, tail), rc::INVALID_ARGUMENT, needle);
        }
        // the padded tail's last lane (column 5119) counts in the i32 offsets
        let (tall, tw) = rows(419_430, 5120); // 419430 * 5120 = 2147481600: the tail's last lane just fits
        assert!(plan(&tall, &tall, &tall, &tw, 1e-6, 4096, 1, -1, -1, 1024).is_ok());
        let (taller, tw) = rows(419_431, 5120);
        assert_fails(plan(&taller, &taller, &taller, &tw, 1e-6, 4096, 1, -1, -1, 1024), rc::INVALID_ARGUMENT, "split");
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (x, w) = rows(4, 8);
        let planes = test_desc(DType::BF16, &[2, 4, 8], &[32, 8, 1]);
        let cases = [
            (test_desc(DType::BF16, &[3, 4, 8], &[32, 8, 1]), x, w, "must be [2, 4, 8]"),
            (test_desc(DType::BF16, &[2, 4, 8], &[31, 8, 1]), x, w, "planes would overlap"),
            (planes, test_desc(DType::BF16, &[4, 9], &[9, 1]), w, "`x` shape [4, 8] != `residual` shape [4, 9]"),
            (planes, x, test_desc(DType::BF16, &[7], &[1]), "`weight` has 7 elements"),
            (planes, x, test_desc(DType::F16, &[8], &[1]), "share one dtype"),
            (test_desc(DType::BF16, &[4, 8], &[7, 1]), x, w, "rows would overlap"),
        ];
        for (out, r, w, needle) in cases {
            assert_fails(plan(&out, &x, &r, &w, 1e-6, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, needle);
        }
        let (wide, ww) = rows(4, 16385);
        assert_fails(plan(&wide, &wide, &wide, &ww, 1e-6, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "at most 16384");
        assert_fails(plan(&planes, &x, &x, &w, -1.0, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "eps=-1");
        let (x, w) = rows(4, 100);
        assert_fails(plan(&x, &x, &x, &w, 1e-6, 64, 1, -1, -1, -1), rc::INVALID_ARGUMENT, "needs n=100 <= block");
        let (tall, tw) = rows(1 << 20, 4096);
        let far = test_desc(DType::BF16, &[1 << 20, 4096], &[4096, 1]);
        assert_fails(plan(&far, &tall, &far, &tw, 1e-6, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "split the rows");
        let (x, w) = rows(4, 16);
        assert_row_tile_checked(MAX_TILE_ELEMS, |block, rows| plan(&x, &x, &x, &w, 1e-6, block, rows, -1, -1, -1));
        assert_hints_checked(true, |occupancy, warps| plan(&x, &x, &x, &w, 1e-6, -1, -1, occupancy, warps, -1));
    }

    #[test]
    fn entry_lowers_to_tile_ir_for_sm90() {
        let tiles = [("1", "4096"), ("2", "4096"), ("1", "8192"), ("1", "16384"), ("4", "1024"), ("64", "16")];
        // join_tokens: every store of s and y ordered after the loads of x and residual (in place)
        DEVICE.assert_each_lowers(&["fused_add_rms_norm_rows"], &tiles, &["rsqrt", "reduce", "join_tokens"]);
        for dtype in ["f32", "f16", "bf16"] {
            for generics in [["1", "4096", "1024"], ["2", "4096", "1024"], ["1", "8192", "4096"], ["4", "2048", "1024"]]
            {
                let generics = [&[dtype][..], &generics].concat();
                DEVICE.assert_lowers("fused_add_rms_norm_rows_tail", &generics, &["rsqrt", "join_tokens"]);
            }
        }
        // w first: its loads take no token and every load of x and residual takes one, so tileiras
        // issues them after w's and w's are not sunk below the reduction (NOTES.md, "w's loads after
        // the reduction")
        for (entry, tiles, ordered) in
            [("fused_add_rms_norm_rows", "4096", 2), ("fused_add_rms_norm_rows_tail", "4096/1024", 4)]
        {
            let ir = DEVICE.assert_lowers(entry, &ffi_util::row_generics("bf16", "1", tiles, &[]), &[]);
            let loads: Vec<&str> = ir.lines().filter(|l| l.contains("load_ptr_tko")).collect();
            let (w, rows) = loads.split_at(loads.len() - ordered);
            assert!(
                w.len() == ordered / 2
                    && w.iter().all(|l| !l.contains(" token="))
                    && rows.iter().all(|l| l.contains(" token=")),
                "{entry}: w's loads first without a token, then x's and residual's with one:\n{ir}"
            );
        }
    }

    #[test]
    fn autotune_picks_lower_as_launched() {
        // the H100 run's picks (results/h100/fused_add_rms_norm/: bf16, functional form, y and s the
        // planes of one output), with the divisibility hints the launcher passes at run time
        // (TILEKIT_CUBIN_DIR keeps the cubins for cuobjdump: NOTES.md, "w's loads")
        use crate::ffi_util::{compile_options, ALIGNED_PTR};
        let ptrs = ["y_ptr", "s_ptr", "x_ptr", "r_ptr", "w_ptr"].map(|p| (p, ALIGNED_PTR));
        // (ROWS, BLOCK[/TAIL]), m, n, occupancy, warps (-1: the compiler's)
        let picks = [
            ("1", "8192", 64, 8192, 2, 8),
            ("1", "4096", 256, 4096, 2, 8),
            ("2", "4096", 4096, 4096, 2, -1),
            ("1", "4096", 16384, 4096, 4, -1),
            ("1", "8192", 16384, 8192, 2, 8),
            ("1", "4096/1024", 16384, 5120, 2, -1),
        ];
        for (rows, tiles, m, n, occupancy, warps) in picks {
            let ints = [("m", m), ("n", n), ("stride_y", n), ("stride_s", n), ("stride_x", n), ("stride_r", n)];
            let generics = ffi_util::row_generics("bf16", rows, tiles, &[]);
            let entry = if tiles.contains('/') { "fused_add_rms_norm_rows_tail" } else { "fused_add_rms_norm_rows" };
            let warps = (warps > 0).then_some(warps);
            let what = format!("-{m}x{n}");
            let options = compile_options(Some(occupancy), warps);
            DEVICE.assert_div_hints_lower(entry, &generics, &ptrs, &ints, options, &what);
        }
    }
}
