//! C-ABI launcher of silu_and_mul's gradient: `cutile_silu_and_mul_backward` (op.py's CDEF).
//!
//!   int32_t cutile_silu_and_mul_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* x,
//!                                        int32_t block, int32_t rows, int32_t occupancy,
//!                                        int32_t device_id, uint64_t stream);
//!
//! x is (m, 2H) (gate | up), dy (m, H) and out (m, 2H), one dtype (f32, f16 or bf16), contiguous last
//! dims, any row strides >= the row length; out receives dx = (dgate | dup). `block` is the tile
//! width and `rows` the rows per tile block (powers of two), `occupancy` the CTAs per SM tileiras
//! should plan registers for (1..=32); -1 picks the default (gated_backward.rs's `row_plan`). Every
//! descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with a
//! message, never a launch.
use crate::ffi_util::{self, invalid, to_i32, Element, FfiResult, RowPlan, TensorDesc};
use crate::gated_backward::{self, gated_backward_device as device};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "silu_and_mul_backward";

/// A validated launch (ffi_util::OutPlan): `row.n` is H, `row.stride_x` x's row stride, `row.stride_y` dy's.
pub type Plan = ffi_util::OutPlan;

pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32,
) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(dy, "dy", 2), (x, "x", 2), (out, "out", 2)])?;
    let (m, two_h) = (to_i32(x.shape[0], "m")?, x.shape[1]);
    if two_h % 2 != 0 {
        return Err(invalid(format!("`x` has {two_h} columns: it must be (m, 2H), gate then up")));
    }
    let h = to_i32(two_h / 2, "H")?;
    if dy.shape[..2] != [m as i64, h as i64] {
        return Err(invalid(format!("`dy` is {:?}: it must be (m, H) = [{m}, {h}] for x {:?}", dy.shape(), x.shape())));
    }
    ffi_util::check_same_shape(x, "x", out, "out")?;
    ffi_util::check_last_dims_contiguous(&[(dy, "dy"), (x, "x"), (out, "out")])?;
    let stride_x = ffi_util::row_stride(x, 2 * h, "x", format_args!("2H={}", 2 * h))?;
    let stride_out = ffi_util::row_stride(out, 2 * h, "out", format_args!("2H={}", 2 * h))?;
    let stride_y = ffi_util::row_stride(dy, h, "dy", format_args!("H={h}"))?;
    let row = gated_backward::row_plan(m, h, stride_x, stride_y, block, rows, occupancy)?;
    Ok(Plan { dtype, row, stride_out })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sx, stride_y, .. } = p.row;
    // the up halves start H elements into each row of x and of out
    let half = h as u64 * std::mem::size_of::<T>() as u64;
    // SAFETY: plan() checked the descriptors (dtypes, shapes, strides: x and out are (m, 2H), so their
    // up halves start H elements into their rows); the memory is PyTorch's, alive until the caller's
    // stream has run the kernel (stream-ordered allocator).
    unsafe {
        let [dg_ptr, dy_ptr, g_ptr] = [out, dy, x].map(|t| ffi_util::device_ptr::<T>(t));
        let [du_ptr, u_ptr] = [out, x].map(|t| DevicePointer::<T>::from_cu_deviceptr(t.data + half));
        let so = p.stride_out;
        let op = device::silu_mul_backward(dg_ptr, du_ptr, dy_ptr, g_ptr, u_ptr, m, h, so, so, stride_y, sx, sx);
        p.row.launch::<T>(gated_backward::tile_blocks(&p.row) as u32).enqueue(op, stream)
    }
}

// `cutile_silu_and_mul_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_silu_and_mul_backward(out, dy, x; block: i32, rows: i32, occupancy: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and the family's entry lowered to Tile IR for sm_90 (then assembled by
    //! tileiras when it is there) for every dtype (swiglu_backward runs it too).
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2, DType};

    #[test]
    fn plan_takes_the_halves_strides_and_defaults() {
        let x = desc2(DType::BF16, &[257, 8194], &[8200, 1]);
        let dy = desc2(DType::BF16, &[257, 4097], &[4097, 1]);
        let out = desc2(DType::BF16, &[257, 8194], &[8194, 1]);
        let p = plan(&out, &dy, &x, -1, -1, -1).unwrap();
        assert_eq!(
            (p.row.n, p.row.block, p.row.rows, p.row.stride_x, p.row.stride_y, p.stride_out),
            (4097, 2048, 2, 8200, 4097, 8194)
        );
        assert_eq!(gated_backward::tile_blocks(&p.row), 129 * 3);
        let x = desc2(DType::F32, &[3, 200], &[200, 1]);
        let (dy, out) = (desc2(DType::F32, &[3, 100], &[100, 1]), x);
        assert_eq!(
            (plan(&out, &dy, &x, -1, -1, -1).unwrap().row.block, plan(&out, &dy, &x, -1, -1, -1).unwrap().row.rows),
            (128, 4)
        );
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let x = desc2(DType::F32, &[4, 16], &[16, 1]);
        let dy = desc2(DType::F32, &[4, 8], &[8, 1]);
        let odd = desc2(DType::F32, &[4, 15], &[15, 1]);
        assert_fails(plan(&odd, &dy, &odd, -1, -1, -1), rc::INVALID_ARGUMENT, "it must be (m, 2H)");
        assert_fails(plan(&x, &x, &x, -1, -1, -1), rc::INVALID_ARGUMENT, "it must be (m, H) = [4, 8]");
        assert_fails(plan(&dy, &dy, &x, -1, -1, -1), rc::INVALID_ARGUMENT, "shape");
        assert_fails(plan(&x, &dy, &x, 24, -1, -1), rc::INVALID_ARGUMENT, "power of two");
        assert_fails(plan(&x, &dy, &x, 8192, 2, -1), rc::INVALID_ARGUMENT, "block*rows <= 8192");
    }

    #[test]
    fn the_entry_lowers_to_tile_ir_for_sm90() {
        gated_backward::assert_entry_lowers();
    }
}
