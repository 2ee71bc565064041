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
//! message, never a launch. Plan, launch and export are the fused members' (gated_backward.rs,
//! `gated_fused_backward_export!` with `Act::Silu`).
// `cutile_silu_and_mul_backward`: KERNEL, plan(), launch() and the export (gated_backward.rs).
crate::gated_fused_backward_export!(cutile_silu_and_mul_backward, "silu_and_mul_backward", crate::gated::Act::Silu);

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and the family's entry lowered to Tile IR for sm_90 (then assembled by
    //! tileiras when it is there) for every dtype (swiglu_backward runs it too).
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2, DType};
    use crate::gated_backward;

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
    fn the_launch_names_the_activation_last() {
        let x = desc2(DType::F32, &[3, 200], &[200, 1]);
        let dy = desc2(DType::F32, &[3, 100], &[100, 1]);
        let p = plan(&x, &dy, &x, -1, -1, -1).unwrap();
        for (act, code) in [(crate::gated::Act::Silu, "0"), (crate::gated::Act::GeluTanh, "1")] {
            assert_eq!(gated_backward::launch_of::<f32>(&p.row, act).generics, ["f32", "4", "128", code]);
        }
    }

    #[test]
    fn the_entry_lowers_to_tile_ir_for_sm90() {
        gated_backward::assert_entry_lowers();
    }
}
