//! C-ABI launcher of swiglu's gradient: `cutile_swiglu_backward` (op.py's CDEF).
//!
//!   int32_t cutile_swiglu_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* a,
//!                                  const TensorDesc* b, int32_t block, int32_t rows, int32_t occupancy,
//!                                  int32_t device_id, uint64_t stream);
//!
//! a (the gate), b (the up projection) and dy are (m, H), out is (2m, H): rows [0, m) receive da and
//! rows [m, 2m) db; one dtype (f32, f16 or bf16), contiguous last dims, any row strides >= H. The
//! gated family's gradient entry (cutile_kernels/src/gated_backward.rs) with a, b and the two row
//! blocks of out as its tensors. `block`, `rows` and `occupancy` as silu_and_mul_backward's; -1
//! picks the default. Every descriptor is validated before anything touches the GPU.
use crate::ffi_util::{self, invalid, DType, Element, FfiResult, RowPlan, TensorDesc};
use crate::gated::Act;
use crate::gated_backward::{self, gated_backward_device as device};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "swiglu_backward";

/// A validated launch: `row` over (m, H) with a's row stride as `stride_x` and dy's as `stride_y`.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub row: RowPlan,
    pub stride_b: i32,
    pub stride_out: i32,
}

pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, a: &TensorDesc, b: &TensorDesc, block: i32, rows: i32, occupancy: i32,
) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(dy, "dy", 2), (a, "a", 2), (b, "b", 2), (out, "out", 2)])?;
    ffi_util::check_same_shape(a, "a", b, "b")?;
    ffi_util::check_same_shape(a, "a", dy, "dy")?;
    if out.shape[..2] != [2 * a.shape[0], a.shape[1]] {
        return Err(invalid(format!(
            "`out` is {:?}: it must be (2m, H) = [{}, {}] (da, then db)",
            out.shape(),
            2 * a.shape[0],
            a.shape[1]
        )));
    }
    ffi_util::check_last_dims_contiguous(&[(dy, "dy"), (a, "a"), (b, "b"), (out, "out")])?;
    let (m, h) = (ffi_util::to_i32(a.shape[0], "m")?, ffi_util::to_i32(a.shape[1], "H")?);
    let [stride_a, stride_b, stride_dy, stride_out] = [(a, "a"), (b, "b"), (dy, "dy"), (out, "out")]
        .map(|(t, name)| ffi_util::row_stride(t, h, name, format_args!("H={h}")));
    let row = gated_backward::row_plan(m, h, stride_a?, stride_dy?, block, rows, occupancy)?;
    Ok(Plan { dtype, row, stride_b: stride_b?, stride_out: stride_out? })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sa, stride_y: sdy, .. } = p.row;
    // db's rows start at row m of out
    let db_at = m as u64 * p.stride_out as u64 * std::mem::size_of::<T>() as u64;
    // SAFETY: plan() checked the descriptors (dtypes, shapes, strides; out holds 2m rows of H,
    // stride_out apart, so db's block starts m * stride_out elements in); the memory is PyTorch's,
    // alive until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        let [da_ptr, dy_ptr, a_ptr, b_ptr] = [out, dy, a, b].map(|t| ffi_util::device_ptr::<T>(t));
        let db_ptr = DevicePointer::<T>::from_cu_deviceptr(out.data + db_at);
        let so = p.stride_out;
        let op = device::act_mul_backward(da_ptr, db_ptr, dy_ptr, a_ptr, b_ptr, m, h, so, so, sdy, sa, p.stride_b);
        gated_backward::launch_of::<T>(&p.row, Act::Silu).enqueue(op, stream)
    }
}

// `cutile_swiglu_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_swiglu_backward(out, dy, a, b; block: i32, rows: i32, occupancy: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation (the shared entry's lowering: gated_backward.rs, from silu_and_mul_backward's tests).
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2};

    #[test]
    fn plan_takes_each_tensors_row_stride() {
        let (a, b) = (desc2(DType::BF16, &[257, 4097], &[4100, 1]), desc2(DType::BF16, &[257, 4097], &[4104, 1]));
        let (dy, out) = (desc2(DType::BF16, &[257, 4097], &[4097, 1]), desc2(DType::BF16, &[514, 4097], &[4112, 1]));
        let p = plan(&out, &dy, &a, &b, -1, -1, -1).unwrap();
        assert_eq!((p.row.stride_x, p.stride_b, p.row.stride_y, p.stride_out), (4100, 4104, 4097, 4112));
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let x = desc2(DType::F32, &[4, 8], &[8, 1]);
        let out = desc2(DType::F32, &[8, 8], &[8, 1]);
        assert_fails(plan(&x, &x, &x, &x, -1, -1, -1), rc::INVALID_ARGUMENT, "it must be (2m, H) = [8, 8]");
        assert_fails(
            plan(&out, &x, &x, &desc2(DType::F32, &[4, 9], &[9, 1]), -1, -1, -1),
            rc::INVALID_ARGUMENT,
            "shape",
        );
        assert_fails(plan(&out, &x, &x, &x, 24, -1, -1), rc::INVALID_ARGUMENT, "power of two");
    }
}
