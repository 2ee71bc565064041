//! silu_and_mul device code: out[r, j] = silu(x[r, j]) * x[r, H + j] for j < H, where x is
//! (m, 2H), out is (m, H) and silu(a) = a * sigmoid(a) = a / (1 + exp(-a)).
//!
//! Element type T is f32, f16 or bf16 (in and out); the arithmetic is done in f32. The entry takes
//! raw device pointers (PyTorch owns the memory): the gate half x[:, :H] and the up half
//! x[:, H:] arrive as two pointers into the same rows (ffi.rs offsets the second by H elements),
//! so both are plain (m, H) strided views with the row stride of x; rows may be padded (row
//! stride >= 2H), the last dim is contiguous.
//!
//! Pure streaming: each tile block owns one ROWS x BLOCK tile of out, loads the matching gate and
//! up tiles once, and stores once. The launch grid is 1-D, ceil(m / ROWS) * ceil(H / BLOCK) tile
//! blocks, with the column tile varying fastest so neighbouring blocks walk along a row; the
//! (row tile, column tile) pair is decoded from the block id. Four entries, the same computation
//! with the tiles addressed four ways (ffi.rs picks one from the shape, the tile and the strides):
//!   * `silu_and_mul_exact` — the tile divides (m, H) and offsets fit i32 (ffi.rs `exact_fits`):
//!     pointer tiles, no masks, so a thread's loads are all in flight at once.
//!   * `silu_and_mul_masked` — any other shape whose padded tiles' offsets fit i32 (`masked_fits`):
//!     the same pointer tiles, each load and store masked to the lanes inside (m, H).
//!   * `silu_and_mul_masked_tail` — the masked entry where at most 64 columns are left past the
//!     whole tiles (H = 4097, `merged_tail_fits`): H / BLOCK column tiles, the last one also taking
//!     those columns through a 64-wide masked tile, so no tile block runs for them alone.
//!   * `silu_and_mul` — beyond i32 offsets (tensors of 2^31 elements and more): zero-padded
//!     partition views, stores outside [m, H] dropped, so any m and H work (a padded lane computes
//!     silu(0) * 0 = 0 and is never stored).
//!
//! The module name is unique across kernels: the JIT keys its kernel cache by module and entry.
//! `unchecked_accesses` (it drops the bounds checks of partition accesses, which only
//! `silu_and_mul` makes): the launcher (ffi.rs) launches exactly row_tiles * col_tiles blocks and
//! the kernel decodes col_tiles from the same h, so row tile < ceil(m / ROWS) and column tile <
//! ceil(H / BLOCK) for every block by construction; the per-access checks would only cost
//! instructions. The pointer-tile entries have no such checks: ffi.rs's `exact_fits` and
//! `masked_fits` (with the mask) keep every access inside the tensors.
#[cutile::module]
pub mod silu_and_mul_device {
    use crate::device_util::activations::{
        silu_mul_exact_tile, silu_mul_masked_tail_tile, silu_mul_masked_tile, silu_mul_padded_tile,
    };
    use cutile::core::*;

    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        // Gate and up: two (m, h) views with x's row stride; out: (m, h) with its own.
        silu_mul_padded_tile::<T, ROWS, BLOCK>(out_ptr, gate_ptr, up_ptr, m, h, stride_x, stride_x, stride_out);
    }

    /// Same result as `silu_and_mul`, for shapes the tile divides (m % ROWS == 0, h % BLOCK == 0)
    /// whose every element offset fits i32 (the launcher checks both): the gate, up and out tiles
    /// are addressed as pointer tiles and loaded and stored without masks. The padded entry's
    /// partition loads bounds-check each 16-byte access in its own branch and unpack it there,
    /// which serializes a thread's loads (one DRAM latency each, see NOTES.md); these have no
    /// branch, so a thread can issue all its loads before it uses the first.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul_exact<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        silu_mul_exact_tile::<T, ROWS, BLOCK>(out_ptr, gate_ptr, up_ptr, h, stride_x, stride_x, stride_out);
    }

    /// Same result as `silu_and_mul`, for shapes the tile does not divide (H = 11008, 4097, m = 37)
    /// whose every element offset, up to the last padded tile's, fits i32 (the launcher checks):
    /// pointer tiles as in `silu_and_mul_exact`, with a mask of the lanes inside (m, h) on each
    /// load and store. tileiras turns the mask into a predicate on each access (16-byte
    /// `LDG.E.128` where h and the strides divide by 8 elements), all issued before the first use
    /// and no branches, so interior and edge tiles alike keep every load in flight (NOTES.md).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul_masked<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        silu_mul_masked_tile::<T, ROWS, BLOCK>(out_ptr, gate_ptr, up_ptr, m, h, stride_x, stride_x, stride_out);
    }

    /// `silu_and_mul_masked` for h > BLOCK with a few columns past the whole tiles (h % BLOCK <=
    /// TAIL, e.g. H = 4097 in 512-wide tiles): h / BLOCK column tiles, the last one also covering
    /// those columns through a TAIL-wide masked tile (device_util's `silu_mul_masked_tail_tile`), so
    /// no tile block is launched for them alone.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_and_mul_masked_tail<T: ElementType, const ROWS: i32, const BLOCK: i32, const TAIL: i32>(
        out_ptr: *mut T, gate_ptr: *mut T, up_ptr: *mut T, m: i32, h: i32, stride_x: i32, stride_out: i32,
    ) {
        silu_mul_masked_tail_tile::<T, ROWS, BLOCK, TAIL>(
            out_ptr, gate_ptr, up_ptr, m, h, stride_x, stride_x, stride_out,
        );
    }
}
