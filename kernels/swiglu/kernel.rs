//! swiglu device code: out[r, j] = silu(a[r, j]) * b[r, j], where a (the gate projection), b (the
//! up projection) and out are (m, H) tensors stored apart and silu(a) = a * sigmoid(a).
//!
//! Element type T is f32, f16 or bf16 (in and out); the arithmetic is done in f32
//! (`device_util::activations::silu_mul`, silu_and_mul's). The entries take raw device pointers
//! (PyTorch owns the memory) and one row stride per tensor: rows may be padded (stride >= H), the
//! last dim is contiguous.
//!
//! Pure streaming, as silu_and_mul (whose x = [gate | up] is this op with both halves in one
//! tensor): each tile block owns one ROWS x BLOCK tile of out, loads the matching a and b tiles
//! once and stores once. The grid is 1-D, ceil(m / ROWS) * ceil(H / BLOCK) tile blocks, the column
//! tile varying fastest. Four entries, which ffi.rs picks:
//!   * `swiglu_exact`  — the tile divides (m, H) and offsets fit i32: pointer tiles, no masks, so a
//!     thread's loads are all in flight at once.
//!   * `swiglu_masked` — any other shape whose padded tiles' offsets fit i32: the same pointer
//!     tiles, each load and store masked to the lanes inside (m, H) (predicated, no branches).
//!   * `swiglu_masked_tail` — `swiglu_masked` where a few columns (<= 64) are left past the whole
//!     tiles (H = 4097): the last whole column tile takes them, so no tile block runs for them alone.
//!   * `swiglu`        — zero-padded partition views, for offsets beyond i32 (2^31 elements).
//!
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses`: the launcher launches exactly row_tiles * col_tiles blocks and the kernel
//! decodes col_tiles from the same h, so every block's tile indices are in range by construction.
#[cutile::module]
pub mod swiglu_device {
    use crate::device_util::activations::{
        silu_mul_exact_tile, silu_mul_masked_tail_tile, silu_mul_masked_tile, silu_mul_padded_tile,
    };
    use cutile::core::*;

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn swiglu<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        silu_mul_padded_tile::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, m, h, stride_a, stride_b, stride_out);
    }

    /// Same result as `swiglu`, for shapes the tile divides (m % ROWS == 0, h % BLOCK == 0) whose
    /// every element offset fits i32 (the launcher checks both): unmasked pointer-tile loads and
    /// stores, which tileiras issues back to back (silu_and_mul's NOTES.md, "Third run").
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn swiglu_exact<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        silu_mul_exact_tile::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, h, stride_a, stride_b, stride_out);
    }

    /// Same result as `swiglu`, for shapes the tile does not divide (H = 11008, 4097, m = 37) whose
    /// every element offset, up to the last padded tile's, fits i32 (the launcher checks): the
    /// pointer tiles of `swiglu_exact` with a mask of the lanes inside (m, h) on each load and
    /// store, which tileiras turns into a predicate per access.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn swiglu_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        silu_mul_masked_tile::<T, ROWS, BLOCK>(out_ptr, a_ptr, b_ptr, m, h, stride_a, stride_b, stride_out);
    }

    /// `swiglu_masked` for h > BLOCK with a few columns past the whole tiles (h % BLOCK <= TAIL):
    /// h / BLOCK column tiles, the last one also covering those columns (silu_and_mul's
    /// `silu_and_mul_masked_tail`; device_util's `silu_mul_masked_tail_tile`).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn swiglu_masked_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        out_ptr: *mut T, a_ptr: *mut T, b_ptr: *mut T, m: i32, h: i32, stride_a: i32, stride_b: i32, stride_out: i32,
    ) {
        silu_mul_masked_tail_tile::<T, ROWS, BLOCK, TAIL>(out_ptr, a_ptr, b_ptr, m, h, stride_a, stride_b, stride_out);
    }
}
