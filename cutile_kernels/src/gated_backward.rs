//! The gated family's gradient (issue 43): for out = silu(g) * u over (m, H) gate and up, with
//! s = sigmoid(g) and an output gradient dy (m, H),
//!
//! ```text
//! dg = dy * u * s * (1 + g * (1 - s))        du = dy * g * s
//! ```
//!
//! in one pass. Its members differ in where g, u, dg and du lie: silu_and_mul_backward reads the
//! halves of x = [g | u] and writes those of dx = [dg | du]; swiglu_backward reads a and b apart and
//! writes dg and du as the two row blocks of one (2m, H) output. So the entry takes a pointer and a
//! row stride for each of the six tensors and the member's ffi.rs passes them.
//!
//! T is f32, f16 or bf16 (every tensor), the arithmetic f32, s as the forward computes it (exp2 and
//! the approximate reciprocal: gated.rs's `act_mul`). Pure streaming, one ROWS x BLOCK tile of (m, H)
//! per tile block, the column tile fastest in the 1-D grid: it loads dy, g and u there once and stores
//! dg and du once. Partitions pad with zero and drop stores outside (m, H), so any m and H work
//! without masks. `unchecked_accesses`: the launcher launches row tiles x column tiles tile blocks
//! and the kernel decodes the column tiles from the same H, so every tile index is inside its
//! partition.
#[cutile::module]
pub mod gated_backward_device {
    use crate::device_util::views::strided_view;
    use cutile::core::*;

    /// dg and du of tile block (row tile, column tile) = (id / column tiles, id % column tiles).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn silu_mul_backward<T: ElementType, const ROWS: i32, const BLOCK: i32>(
        dg_ptr: *mut T, du_ptr: *mut T, dy_ptr: *mut T, g_ptr: *mut T, u_ptr: *mut T, m: i32, h: i32, stride_dg: i32,
        stride_du: i32, stride_dy: i32, stride_g: i32, stride_u: i32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let col_tiles: i32 = (h + BLOCK - 1) / BLOCK;
        let id: i32 = get_tile_block_id().0;
        let rb: i32 = id / col_tiles;
        let cb: i32 = id % col_tiles;
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, h, stride_dy, tok);
        let g_view: Tensor<T, { [-1, -1] }> = strided_view(g_ptr, m, h, stride_g, tok);
        let u_view: Tensor<T, { [-1, -1] }> = strided_view(u_ptr, m, h, stride_u, tok);
        let dg_view: Tensor<T, { [-1, -1] }> = strided_view(dg_ptr, m, h, stride_dg, tok);
        let du_view: Tensor<T, { [-1, -1] }> = strided_view(du_ptr, m, h, stride_du, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let g_part: Partition<T, { [ROWS, BLOCK] }> = g_view.partition(tile);
        let u_part: Partition<T, { [ROWS, BLOCK] }> = u_view.partition(tile);
        let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, cb]));
        let g: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(g_part.load([rb, cb]));
        let u: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(u_part.load([rb, cb]));

        let one: Tile<f32, { [ROWS, BLOCK] }> = constant(1.0f32, tile);
        let neg_log2e: Tile<f32, { [ROWS, BLOCK] }> = constant(-1.4426950408889634f32, tile);
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(g * neg_log2e, ftz::Enabled);
        let s: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let silu: Tile<f32, { [ROWS, BLOCK] }> = g * s;
        let dg: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dy * u * (s + silu * (one - s)));
        let du: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dy * silu);
        let mut dg_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dg_view.partition_full_mut(tile) };
        let mut du_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { du_view.partition_full_mut(tile) };
        dg_part.store(dg, [rb, cb]);
        du_part.store(du, [rb, cb]);
    }
}

/// Test helper: the shared entry lowered to Tile IR for sm_90 (then assembled by tileiras when it is
/// there) in every dtype at a few tiles: each member's ffi.rs tests call it.
#[cfg(test)]
pub fn assert_entry_lowers() {
    let device =
        crate::ffi_util::DeviceModule { ast: gated_backward_device::__module_ast_self, name: "gated_backward_device" };
    for dtype in ["f32", "f16", "bf16"] {
        for (rows, block) in [("1", "2048"), ("2", "1024"), ("4", "16"), ("1", "8192")] {
            device.assert_lowers("silu_mul_backward", &[dtype, rows, block], &["exp2"]);
        }
    }
}

use crate::ffi_util::{self, invalid, FfiResult, RowPlan};

/// Largest tile (ROWS * BLOCK elements) a variant may ask for: three f32 tiles in, two out.
pub const MAX_TILE_ELEMS: i32 = 8192;

/// A member's launch over (m, H) after its own shape checks: the tile (-1: BLOCK the power of two at
/// least H, up to 2048, and ROWS for ~4 K elements), the occupancy hint, and the gate's and dy's row
/// strides (as RowPlan's `stride_x` and `stride_y`).
pub fn row_plan(
    m: i32, h: i32, stride_g: i32, stride_dy: i32, block: i32, rows: i32, occupancy: i32,
) -> FfiResult<RowPlan> {
    let default_block = ffi_util::whole_row_block(h, 2048).unwrap_or(2048);
    let (block, rows) =
        ffi_util::row_tile(block, rows, default_block, |b| ffi_util::default_rows(4096, b, m), 64, MAX_TILE_ELEMS)?;
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let row = RowPlan { block, rows, occupancy, warps: None, m, n: h, stride_x: stride_g, stride_y: stride_dy };
    if tile_blocks(&row) > i32::MAX as i64 {
        return Err(invalid(format!(
            "{} tile blocks of {rows} x {block}: past the grid; use a larger tile",
            tile_blocks(&row)
        )));
    }
    Ok(row)
}

/// The launch grid: row tiles x column tiles of (m, H), in i64 (row_plan keeps it in i32).
pub fn tile_blocks(row: &RowPlan) -> i64 {
    row.row_tiles() as i64 * ((row.n as i64 + row.block as i64 - 1) / row.block as i64)
}
