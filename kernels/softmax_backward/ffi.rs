//! C-ABI launcher of softmax's gradient: `cutile_softmax_backward` (op.py's CDEF).
//!
//!   int32_t cutile_softmax_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* y,
//!                                   int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                                   int32_t device_id, uint64_t stream);
//!
//! dy, y (the forward's output) and out are (m, n), one dtype (f32, f16 or bf16), contiguous last
//! dims, any row strides >= n; out receives dx = y * (dy - sum(y * dy)). `block` is the tile width
//! (a power of two: block >= n holds rows whole, block < n loops over column tiles, reading each
//! twice), `rows` the rows per tile block, `occupancy` the CTAs per SM tileiras should plan registers
//! for (1..=32), `warps` the worker warps per CTA (4 or 8); -1 picks the default (for the hints,
//! the compiler's; for the tile: rows whole up to DEFAULT_WHOLE columns, else LOOPED_BLOCK-wide
//! column tiles, rows for ~4 K elements a tile). Every descriptor is validated before anything touches
//! the GPU: bad input returns -2/-5/-6 with a message, never a launch.
use super::kernel::softmax_backward_device as device;
use crate::ffi_util::{self, to_i32, Element, FfiResult, RowPlan, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "softmax_backward";
/// The widest row the default holds whole (dy and y in f32 registers).
pub const DEFAULT_WHOLE: i32 = 8192;
/// The default column tile of wider rows.
pub const LOOPED_BLOCK: i32 = 4096;
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: two f32 tiles in registers.
const MAX_TILE_ELEMS: i32 = 16384;

/// A validated launch (ffi_util::OutPlan): `row.stride_x` is y's row stride, `row.stride_y` dy's.
pub type Plan = ffi_util::OutPlan;

pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, y: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32,
) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(dy, "dy", 2), (y, "y", 2), (out, "out", 2)])?;
    ffi_util::check_same_shape(y, "y", dy, "dy")?;
    ffi_util::check_same_shape(y, "y", out, "out")?;
    ffi_util::check_last_dims_contiguous(&[(dy, "dy"), (y, "y"), (out, "out")])?;
    let (m, n) = (to_i32(y.shape[0], "m")?, to_i32(y.shape[1], "n")?);
    let default_block = ffi_util::whole_row_block(n, DEFAULT_WHOLE).unwrap_or(LOOPED_BLOCK);
    let (block, rows) =
        ffi_util::row_tile(block, rows, default_block, |b| ffi_util::default_rows(4096, b, m), 64, MAX_TILE_ELEMS)?;
    let (occupancy, warps) = (ffi_util::occupancy_hint(occupancy)?, ffi_util::warps_hint(warps)?);
    let stride_x = ffi_util::row_stride(y, n, "y", format_args!("n={n}"))?;
    let stride_y = ffi_util::row_stride(dy, n, "dy", format_args!("n={n}"))?;
    let stride_out = ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?;
    let row = RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y };
    Ok(Plan { dtype, row, stride_out })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, y: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x: sy, stride_y: sdy, block, .. } = p.row;
    // SAFETY: plan() checked the descriptors (dtypes, one (m, n) shape, strides); the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        let [dx_ptr, dy_ptr, y_ptr] = [out, dy, y].map(|t| ffi_util::device_ptr::<T>(t));
        let mut launch = p.row.launch::<T>(p.row.row_tiles() as u32);
        launch.generics.push((block < n).to_string()); // LOOPED
        launch.enqueue(device::softmax_backward_rows(dx_ptr, dy_ptr, y_ptr, m, n, p.stride_out, sdy, sy), stream)
    }
}

// `cutile_softmax_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_softmax_backward(out, dy, y; block: i32, rows: i32, occupancy: i32, warps: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and both forms of the entry lowered to Tile IR for sm_90 (then assembled by
    //! tileiras when it is there) for every dtype.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2, DType, DeviceModule};

    #[test]
    fn plan_takes_whole_rows_then_column_tiles() {
        let (y, dy) = (desc2(DType::BF16, &[257, 4097], &[4104, 1]), desc2(DType::BF16, &[257, 4097], &[4097, 1]));
        let p = plan(&dy, &dy, &y, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.row.stride_x, p.row.stride_y), (8192, 1, 4104, 4097));
        let wide = desc2(DType::F32, &[3, 128256], &[128256, 1]);
        let p = plan(&wide, &wide, &wide, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows), (LOOPED_BLOCK, 1));
        let small = desc2(DType::F16, &[100, 100], &[100, 1]);
        assert_eq!(plan(&small, &small, &small, -1, -1, -1, -1).unwrap().row.rows, 32);
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let y = desc2(DType::F32, &[4, 16], &[16, 1]);
        let other = desc2(DType::F32, &[4, 8], &[8, 1]);
        assert_fails(plan(&y, &other, &y, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "shape");
        assert_fails(plan(&other, &y, &y, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "shape");
        assert_fails(plan(&y, &y, &y, 24, -1, -1, -1), rc::INVALID_ARGUMENT, "power of two");
        assert_fails(plan(&y, &y, &y, 16384, 2, -1, -1), rc::INVALID_ARGUMENT, "block*rows <= 16384");
        let overlapping = desc2(DType::F32, &[4, 16], &[8, 1]);
        assert_fails(plan(&y, &overlapping, &y, -1, -1, -1, -1), rc::INVALID_ARGUMENT, "rows would overlap");
        assert_fails(plan(&y, &y, &y, -1, -1, -1, 6), rc::INVALID_ARGUMENT, "warps");
    }

    #[test]
    fn both_forms_lower_to_tile_ir_for_sm90() {
        let device = DeviceModule { ast: device::__module_ast_self, name: "softmax_backward_device" };
        for dtype in ["f32", "f16", "bf16"] {
            let forms = [("1", "8192", "false"), ("2", "1024", "false"), ("4", "16", "false"), ("1", "16384", "false")];
            for (rows, block, looped) in forms.into_iter().chain([("1", "4096", "true"), ("2", "2048", "true")]) {
                device.assert_lowers("softmax_backward_rows", &[dtype, rows, block, looped], &["reduce"]);
            }
        }
    }
}
