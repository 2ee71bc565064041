//! The gated family's gradient (issue 43): for out = act(g) * u over (m, H) gate and up and an
//! output gradient dy (m, H), with act(g) = g * sigmoid(z(g)) (silu: z = g; the tanh GELU:
//! z = 2 sqrt(2/pi) (g + 0.044715 g^3), as gated.rs's forward computes it) and s = sigmoid(z):
//!
//! ```text
//! dg = dy * u * (s + g * s * (1 - s) * z'(g))        du = dy * g * s
//! ```
//!
//! (z' = 1 for silu: dg = dy * u * s * (1 + g * (1 - s))) in one pass. Its members differ in the
//! activation (the const generic ACT, gated.rs's `Act`) and in where g, u, dg and du lie:
//! silu_and_mul_backward and gelu_and_mul_backward read the halves of x = [g | u] and write those of
//! dx = [dg | du]; swiglu_backward reads a and b apart and writes dg and du as the two row blocks of
//! one (2m, H) output. So the entry takes a pointer and a row stride for each of the six tensors and
//! the member's ffi.rs passes them (the fused members' plan and launch are `fused_plan` and
//! `fused_launch`, their export `gated_fused_backward_export!`).
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

    /// dg and du of tile block (row tile, column tile) = (id / column tiles, id % column tiles), for
    /// the activation ACT (gated.rs's `Act`: 0 silu, 1 the tanh GELU).
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn act_mul_backward<T: ElementType, const ROWS: i32, const BLOCK: i32, const ACT: i32>(
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
        let mut z: Tile<f32, { [ROWS, BLOCK] }> = g;
        if ACT == 1i32 {
            // the tanh GELU, as gated.rs: z = g (k + kc g^2), k = 2 sqrt(2/pi), kc = k * 0.044715
            let k: Tile<f32, { [ROWS, BLOCK] }> = constant(1.5957691216057308f32, tile);
            let kc: Tile<f32, { [ROWS, BLOCK] }> = constant(0.07135481627260025f32, tile);
            z = g * (k + kc * g * g);
        }
        let denom: Tile<f32, { [ROWS, BLOCK] }> = one + exp2(z * neg_log2e, ftz::Enabled);
        let s: Tile<f32, { [ROWS, BLOCK] }> = divf(one, denom, rounding::Approx, ftz::Enabled);
        let act: Tile<f32, { [ROWS, BLOCK] }> = g * s;
        // d act / dg = s + g s (1 - s) z'; silu's z' = 1
        let mut slope: Tile<f32, { [ROWS, BLOCK] }> = s + act * (one - s);
        if ACT == 1i32 {
            // z' = k + 3 kc g^2
            let k: Tile<f32, { [ROWS, BLOCK] }> = constant(1.5957691216057308f32, tile);
            let kc3: Tile<f32, { [ROWS, BLOCK] }> = constant(0.21406444881780075f32, tile);
            slope = s + act * (one - s) * (k + kc3 * g * g);
        }
        let dg: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dy * u * slope);
        let du: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dy * act);
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
            for act in ["0", "1"] {
                // the tanh GELU's kc (2 sqrt(2/pi) * 0.044715) is in the IR exactly when ACT selects it
                let ir = device.assert_lowers("act_mul_backward", &[dtype, rows, block, act], &["exp2"]);
                assert_eq!(ir.contains("0.0713548"), act == "1", "act_mul_backward<{dtype},{rows},{block},{act}>");
            }
        }
    }
}

use crate::ffi_util::{self, invalid, to_i32, Element, FfiResult, OutPlan, RowPlan, TensorDesc};
use crate::gated::Act;
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

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

/// The launch of the entry for `act` over every tile of `row` (generics T, ROWS, BLOCK, then ACT).
pub fn launch_of<T: Element>(row: &RowPlan, act: Act) -> ffi_util::Launch {
    let mut launch = row.launch::<T>(tile_blocks(row) as u32);
    launch.generics.push((act as i32).to_string()); // ACT
    launch
}

/// A fused member's launch (x = [gate | up] (m, 2H), dy (m, H), out = dx (m, 2H), one dtype,
/// contiguous last dims, any row strides >= the row length), validated; `row.n` is H, `row.stride_x`
/// x's row stride, `row.stride_y` dy's.
pub fn fused_plan(
    kernel: &str, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32,
) -> FfiResult<OutPlan> {
    let dtype = ffi_util::check_float_tensors(kernel, &[(dy, "dy", 2), (x, "x", 2), (out, "out", 2)])?;
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
    let row = row_plan(m, h, stride_x, stride_y, block, rows, occupancy)?;
    Ok(OutPlan { dtype, row, stride_out })
}

/// A fused member's launch of `act`'s gradient on `stream`: g and u the halves of x, dg and du those
/// of out.
pub fn fused_launch<T: Element>(
    p: &OutPlan, act: Act, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n: h, stride_x: sx, stride_y, .. } = p.row;
    // the up halves start H elements into each row of x and of out
    let half = h as u64 * std::mem::size_of::<T>() as u64;
    // SAFETY: fused_plan() checked the descriptors (dtypes, shapes, strides: x and out are (m, 2H), so
    // their up halves start H elements into their rows); the memory is PyTorch's, alive until the
    // caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        let [dg_ptr, dy_ptr, g_ptr] = [out, dy, x].map(|t| ffi_util::device_ptr::<T>(t));
        let [du_ptr, u_ptr] = [out, x].map(|t| DevicePointer::<T>::from_cu_deviceptr(t.data + half));
        let so = p.stride_out;
        let op = gated_backward_device::act_mul_backward(
            dg_ptr, du_ptr, dy_ptr, g_ptr, u_ptr, m, h, so, so, stride_y, sx, sx,
        );
        launch_of::<T>(&p.row, act).enqueue(op, stream)
    }
}

/// A fused member's C export (its ffi.rs header gives the contract): its KERNEL name, its plan()
/// (`fused_plan`) and launch() (`fused_launch` of `act`), through ffi_util::export!.
#[macro_export]
macro_rules! gated_fused_backward_export {
    ($export:ident, $kernel:literal, $act:expr) => {
        use $crate::ffi_util::{Element, FfiResult, OutPlan, TensorDesc};
        use cutile::cuda_core::Stream;
        use std::sync::Arc;

        const KERNEL: &str = $kernel;

        /// The export's arguments one for one, validated by gated_backward::fused_plan.
        pub fn plan(
            out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, block: i32, rows: i32, occupancy: i32,
        ) -> FfiResult<OutPlan> {
            $crate::gated_backward::fused_plan(KERNEL, out, dy, x, block, rows, occupancy)
        }

        fn launch<T: Element>(
            p: &OutPlan, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, stream: &Arc<Stream>,
        ) -> FfiResult<()> {
            $crate::gated_backward::fused_launch::<T>(p, $act, out, dy, x, stream)
        }

        $crate::export!($export(out, dy, x; block: i32, rows: i32, occupancy: i32));
    };
}
