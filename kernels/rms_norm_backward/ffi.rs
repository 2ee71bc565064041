//! C-ABI launcher of RMSNorm's gradients: `cutile_rms_norm_backward` (op.py's CDEF).
//!
//!   int32_t cutile_rms_norm_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
//!                                    const TensorDesc* weight, float eps, int32_t block, int32_t rows,
//!                                    int32_t occupancy, int32_t programs, int32_t warps,
//!                                    int32_t device_id, uint64_t stream);
//!
//! dy and x are (m, n), weight (n,), all of one dtype (f32, f16 or bf16) with contiguous last dims,
//! at any row strides >= n; out is (m + 1, n): rows [0, m) receive dx and row m receives dw (one output, so the kit's contract of one out per export holds; op.py splits it).
//! `block` is the tile width, a power of two >= n (the rows are held whole: n <= MAX_BLOCK), `rows`
//! the rows per tile; `occupancy` and `warps` the compiler hints (1..=32; 4 or 8). `programs` > 0 is
//! the persistent grid (capped at the row tiles); -1 sizes it from the SM count
//! (DEFAULT_BLOCKS_PER_SM each). The kernel writes one row of f32 partial sums of dw per tile block
//! into a workspace of programs x n f32 on the caller's stream, and a second kernel sums them into
//! out's row m; the workspace is freed in stream order after it. -1 for the others picks the
//! default. Every descriptor is validated before anything touches the GPU.
use super::kernel::rms_norm_backward_device as device;
use crate::ffi_util::{self, invalid, rc, to_i32, DType, Element, FfiResult, Launch, RowPlan, StreamAlloc, TensorDesc};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "rms_norm_backward";
/// The widest row the kernel holds whole (dy, x, w and the dw sums in f32 registers).
pub const MAX_BLOCK: i32 = 16384;
/// Largest tile (ROWS * BLOCK elements) a variant may ask for.
const MAX_TILE_ELEMS: i32 = 16384;
/// The default persistent grid: tile blocks per SM (each adds a row of n f32 partials to dw's pass).
pub const DEFAULT_BLOCKS_PER_SM: i32 = 2;
/// The dw pass's tile: CHUNK partial rows by REDUCE_BLOCK columns, one column tile per tile block.
const CHUNK: i32 = 32;
const REDUCE_BLOCK: i32 = 64;

/// A validated launch. `row.stride_x` is x's row stride, `row.stride_y` dy's.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub row: RowPlan,
    /// out's row stride: dx's rows, and dw at row m.
    pub stride_out: i32,
    pub eps: f32,
    /// Some(grid): that many tile blocks (capped at the row tiles); None: from the SM count.
    pub programs: Option<i32>,
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, w: &TensorDesc, eps: f32, block: i32, rows: i32, occupancy: i32,
    programs: i32, warps: i32,
) -> FfiResult<Plan> {
    let tensors = [(dy, "dy", 2), (x, "x", 2), (out, "out", 2), (w, "weight", 1)];
    let dtype = ffi_util::check_float_tensors(KERNEL, &tensors)?;
    ffi_util::check_same_shape(x, "x", dy, "dy")?;
    let (m, n) = (to_i32(x.shape[0], "m")?, to_i32(x.shape[1], "n")?);
    if out.shape[..2] != [m as i64 + 1, n as i64] {
        return Err(invalid(format!(
            "`out` is {:?}: it must be (m + 1, n) = [{}, {n}] (dx, then dw)",
            out.shape(),
            m + 1
        )));
    }
    if w.shape[0] != n as i64 {
        return Err(invalid(format!("`weight` has {} elements but x has n={n} columns", w.shape[0])));
    }
    ffi_util::check_last_dims_contiguous(&[(dy, "dy"), (x, "x"), (out, "out"), (w, "weight")])?;
    let stride_out = ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?;
    // eps > 0, not >= 0 as the forward: a row tile past m is zero-padded, and its rsqrt(0 + 0) = inf
    // would make x̂ = 0 * inf = NaN in every column of dw
    if !eps.is_finite() || eps <= 0.0 {
        return Err(invalid(format!("eps={eps}: the backward needs a finite eps > 0")));
    }
    let whole = ffi_util::whole_row_block(n, MAX_BLOCK)
        .ok_or_else(|| invalid(format!("n={n}: the backward holds whole rows of at most {MAX_BLOCK} elements")))?;
    let (block, rows) =
        ffi_util::row_tile(block, rows, whole, |b| ffi_util::default_rows(4096, b, m), 64, MAX_TILE_ELEMS)?;
    if block < n {
        return Err(invalid(format!("variant block={block}: the backward holds whole rows; needs n={n} <= block")));
    }
    let (occupancy, warps) = (ffi_util::occupancy_hint(occupancy)?, ffi_util::warps_hint(warps)?);
    let stride_x = ffi_util::row_stride(x, n, "x", format_args!("n={n}"))?;
    let stride_y = ffi_util::row_stride(dy, n, "dy", format_args!("n={n}"))?;
    let row = RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y };
    let programs = match programs {
        rc::COMPILER_DEFAULT => None,
        g if g > 0 => Some(g.min(row.row_tiles())),
        g => {
            return Err(invalid(format!(
                "variant programs={g}: use > 0 tile blocks, or -1 for {DEFAULT_BLOCKS_PER_SM} an SM"
            )))
        }
    };
    // No i32 bound on the sizes: the partitions address dy, x and dx by tile index (their offsets
    // are the TMA's, as rms_norm's partition entries past 2^31 elements), dw's row starts at an offset
    // made here in u64, and the workspace is grid <= 2 x SMs rows.
    Ok(Plan { dtype, row, stride_out, eps, programs })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, w: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x, stride_y, .. } = p.row;
    let grid = match p.programs {
        Some(g) => g,
        None => (ffi_util::sm_count(stream)? as i32 * DEFAULT_BLOCKS_PER_SM).min(p.row.row_tiles()),
    };
    let f32s = std::mem::size_of::<f32>();
    let ws = StreamAlloc::new(grid as usize * n as usize * f32s, stream, "dw workspace")?;
    // SAFETY: plan() checked the descriptors (dtypes, shapes, strides; out holds m + 1 rows of n,
    // stride_out apart, so row m starts m * stride_out elements in); the workspace holds grid rows of
    // n f32, written by the first kernel before the second reads it (stream order), freed after both.
    unsafe {
        let [dx_ptr, dy_ptr, x_ptr, w_ptr] = [out, dy, x, w].map(|t| ffi_util::device_ptr::<T>(t));
        let dw_ptr = DevicePointer::<T>::from_cu_deviceptr(
            out.data + (m as u64 * p.stride_out as u64) * std::mem::size_of::<T>() as u64,
        );
        let part = DevicePointer::<f32>::from_cu_deviceptr(ws.ptr);
        let rows = device::rms_norm_backward_rows(
            dx_ptr,
            part,
            dy_ptr,
            x_ptr,
            w_ptr,
            m,
            n,
            stride_y,
            stride_x,
            p.stride_out,
            p.eps,
        );
        p.row.launch::<T>(grid as u32).enqueue(rows, stream)?;
        let columns = (n + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
        let reduce =
            Launch::new::<T>(&[CHUNK, REDUCE_BLOCK], (columns as u32, 1, 1), ffi_util::compile_options(None, None));
        reduce.enqueue(device::rms_norm_backward_dw(dw_ptr, part, grid, n), stream)?;
    }
    ws.free()
}

// `cutile_rms_norm_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_rms_norm_backward(out, dy, x, weight; eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and both entries lowered to Tile IR for sm_90 (then assembled by
    //! tileiras when it is there) for every dtype.
    use super::*;
    use crate::ffi_util::{assert_fails, test_desc as desc2, test_rows, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "rms_norm_backward_device" };

    fn plan_of(
        out: &TensorDesc, x: &TensorDesc, w: &TensorDesc, block: i32, rows: i32, programs: i32,
    ) -> FfiResult<Plan> {
        plan(out, x, x, w, 1e-6, block, rows, -1, programs, -1)
    }

    #[test]
    fn plan_takes_whole_rows_and_defaults() {
        let (x, w) = test_rows(DType::BF16, 257, 4097);
        let out = desc2(DType::BF16, &[258, 4097], &[4097, 1]);
        let p = plan_of(&out, &x, &w, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.programs, p.row.stride_x), (8192, 1, None, 4097));
        let (x, w) = test_rows(DType::F32, 100, 1000);
        let out = desc2(DType::F32, &[101, 1000], &[1000, 1]);
        let p = plan_of(&out, &x, &w, -1, -1, 500).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.programs), (1024, 4, Some(25))); // capped at ceil(100 / 4)
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (x, w) = test_rows(DType::F32, 4, 8);
        let out = desc2(DType::F32, &[5, 8], &[8, 1]);
        let cases = [
            (desc2(DType::F32, &[4, 8], &[8, 1]), w, -1, -1, "(m + 1, n)"),
            (desc2(DType::F32, &[5, 8], &[7, 1]), w, -1, -1, "rows would overlap"),
            (out, desc2(DType::F32, &[7], &[1]), -1, -1, "weight"),
            (out, w, 16, 0, "programs=0"),
            (out, w, 24, -1, "power of two"),
        ];
        for (out, w, block, programs, needle) in cases {
            assert_fails(plan_of(&out, &x, &w, block, 1, programs), rc::INVALID_ARGUMENT, needle);
        }
        let (wide, ww) = test_rows(DType::F32, 4, 16385);
        let out = desc2(DType::F32, &[5, 16385], &[16385, 1]);
        assert_fails(plan_of(&out, &wide, &ww, -1, -1, -1), rc::INVALID_ARGUMENT, "at most 16384");
        let (x, w) = test_rows(DType::F32, 4, 100);
        let out = desc2(DType::F32, &[5, 100], &[100, 1]);
        assert_fails(plan_of(&out, &x, &w, 64, 1, -1), rc::INVALID_ARGUMENT, "needs n=100 <= block");
        assert_fails(plan(&out, &x, &x, &w, 0.0, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "finite eps > 0");
    }

    #[test]
    fn both_entries_lower_to_tile_ir_for_sm90() {
        for dtype in ["f32", "f16", "bf16"] {
            for (rows, block) in [("1", "4096"), ("2", "1024"), ("1", "8192"), ("1", "16384"), ("4", "16")] {
                DEVICE.assert_lowers("rms_norm_backward_rows", &[dtype, rows, block], &["rsqrt", "reduce"]);
            }
            let (chunk, block) = (CHUNK.to_string(), REDUCE_BLOCK.to_string());
            DEVICE.assert_lowers("rms_norm_backward_dw", &[dtype, &chunk, &block], &["reduce"]);
        }
    }
}
