//! The norms' gradients (issue 43): RMSNorm's and LayerNorm's backward, one device entry and one
//! launcher, the const generic CENTERED telling them apart. Per row, with x̄ = mean(x) for LayerNorm
//! (0 for RMSNorm), r = rsqrt(mean((x - x̄)^2) + eps), x̂ = (x - x̄) * r and g = w * dy:
//!
//! ```text
//! dx = r * (g - x̂ * mean(g * x̂) - mean(g))      [RMSNorm: without the last term]
//! dw = sum over rows of dy * x̂                   db = sum over rows of dy  [LayerNorm only]
//! ```
//!
//! With the const generic ADD, dx also adds a gradient that reached x by another path, `dr`
//! (fused_add_rms_norm's: s = x + residual feeds both the norm and the residual stream, so
//! dx = dresidual = the norm's gradient of s + the residual stream's gradient of s), in the same pass.
//!
//! Element type T is f32, f16 or bf16 (dy, x, w and the output); everything inside is f32, x̄ and r
//! recomputed from x (as FlashAttention recomputes scores: one f32 per row is cheaper to recompute
//! than to store and read back).
//!
//!   * `norm_backward_rows` — n <= BLOCK, a persistent grid: each tile block loads w once, walks row
//!     tiles pid, pid + grid, ..., stores their dx and sums dy * x̂ (and dy) over its rows in f32
//!     registers, then writes the sums as row pid (and grid + pid) of the f32 workspace `part`. No
//!     atomics: every tile block owns its rows of partial sums.
//!   * `norm_backward_sum` — the second pass: tile block j sums column tile j of `programs` rows of
//!     `part` (CHUNK rows at a time) and stores it, rounded to T, as one output row (dw, or db).
//!
//! Partitions pad with zero and drop stores outside the view, so any m and n work: a padded row has
//! x = 0 and dy = 0, so x̂ = 0 and it adds nothing to the sums; past n, dy and w are 0 and LayerNorm
//! masks x - x̄ to 0 (RMSNorm's x is 0 there already). `unchecked_accesses`: row tiles stop at
//! ceil(m / ROWS), the one column tile covers n <= BLOCK (plan), the workspace rows stop at the grid
//! and its column tiles at ceil(n / BLOCK).
use crate::ffi_util::{self, invalid, rc, to_i32, DType, Element, FfiResult, Launch, RowPlan, StreamAlloc, TensorDesc};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

#[cutile::module]
pub mod norm_backward_device {
    use crate::device_util::tile_order::persistent_row_tiles;
    use crate::device_util::views::{strided_view, tile_mask, vector_view};
    use cutile::core::*;

    /// A per-row f32 value broadcast over the row tile.
    fn per_row<const ROWS: i32, const BLOCK: i32>(v: Tile<f32, { [ROWS] }>) -> Tile<f32, { [ROWS, BLOCK] }> {
        v.reshape(shape![ROWS, 1]).broadcast(shape![ROWS, BLOCK])
    }

    /// The row mean of `v` over n columns (lanes past n are 0), broadcast over the row tile.
    fn row_mean<const ROWS: i32, const BLOCK: i32>(
        v: Tile<f32, { [ROWS, BLOCK] }>, n_f: Tile<f32, { [ROWS] }>,
    ) -> Tile<f32, { [ROWS, BLOCK] }> {
        per_row::<ROWS, BLOCK>(divf(reduce_sum(v, 1i32), n_f, rounding::NearestEven, ftz::Disabled))
    }

    /// dx of the row tiles pid, pid + grid, ... into `dx_ptr` (m rows of n, `stride_dx` apart), plus,
    /// ADD, `dr_ptr`'s rows (`stride_dr` apart; unread otherwise); the sum of dy * x̂ over them into
    /// row pid of `part_ptr` (rows of n f32, contiguous) and, CENTERED, the sum of dy into row grid + pid.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn norm_backward_rows<
        T: ElementType,
        const ROWS: i32,
        const BLOCK: i32,
        const CENTERED: bool,
        const ADD: bool,
    >(
        dx_ptr: *mut T, part_ptr: *mut f32, dy_ptr: *mut T, dr_ptr: *mut T, x_ptr: *mut T, w_ptr: *mut T, m: i32,
        n: i32, stride_dy: i32, stride_dr: i32, stride_x: i32, stride_dx: i32, eps: f32,
    ) {
        let tile: Shape<{ [ROWS, BLOCK] }> = shape![ROWS, BLOCK];
        let (pid, programs, row_tiles) = persistent_row_tiles::<ROWS>(m);
        let tok: Token = new_token_unordered();
        let dy_view: Tensor<T, { [-1, -1] }> = strided_view(dy_ptr, m, n, stride_dy, tok);
        let x_view: Tensor<T, { [-1, -1] }> = strided_view(x_ptr, m, n, stride_x, tok);
        let dx_view: Tensor<T, { [-1, -1] }> = strided_view(dx_ptr, m, n, stride_dx, tok);
        let dr_view: Tensor<T, { [-1, -1] }> = strided_view(dr_ptr, m, n, stride_dr, tok);
        let part_rows: i32 = if CENTERED { 2i32 * programs } else { programs };
        let part_view: Tensor<f32, { [-1, -1] }> = strided_view(part_ptr, part_rows, n, n, tok);
        let w_view: Tensor<T, { [-1] }> = vector_view(w_ptr, n, tok);
        let dy_part: Partition<T, { [ROWS, BLOCK] }> = dy_view.partition(tile);
        let x_part: Partition<T, { [ROWS, BLOCK] }> = x_view.partition(tile);
        let dr_part: Partition<T, { [ROWS, BLOCK] }> = dr_view.partition(tile);
        let mut dx_part: PartitionMut<T, { [ROWS, BLOCK] }> = unsafe { dx_view.partition_full_mut(tile) };
        let mut sum_part: PartitionMut<f32, { [1, BLOCK] }> = unsafe { part_view.partition_full_mut(shape![1, BLOCK]) };
        let w_part: Partition<T, { [BLOCK] }> = w_view.partition(shape![BLOCK]);

        let w_row: Tile<T, { [BLOCK] }> = w_part.load([0i32]);
        let w: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(w_row.reshape(shape![1, BLOCK]).broadcast(tile));
        let n_scalar: f32 = convert_scalar(n);
        let n_f: Tile<f32, { [ROWS] }> = broadcast_scalar(n_scalar, shape![ROWS]);
        let eps_t: Tile<f32, { [ROWS] }> = broadcast_scalar(eps, shape![ROWS]);
        let zero: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        let inside: Tile<bool, { [ROWS, BLOCK] }> = tile_mask::<ROWS, BLOCK>(0i32, 0i32, ROWS, n);
        let mut dw: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        let mut db: Tile<f32, { [ROWS, BLOCK] }> = constant(0.0f32, tile);
        for rb in (pid..row_tiles).step_by(programs as usize) {
            let x: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(x_part.load([rb, 0i32]));
            let dy: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dy_part.load([rb, 0i32]));
            let mut xc: Tile<f32, { [ROWS, BLOCK] }> = x;
            if CENTERED {
                xc = select(inside, x - row_mean::<ROWS, BLOCK>(x, n_f), zero);
            }
            let mean_sq: Tile<f32, { [ROWS] }> =
                divf(reduce_sum(xc * xc, 1i32), n_f, rounding::NearestEven, ftz::Disabled);
            let r: Tile<f32, { [ROWS, BLOCK] }> = per_row::<ROWS, BLOCK>(rsqrt(mean_sq + eps_t, ftz::Disabled));
            let x_hat: Tile<f32, { [ROWS, BLOCK] }> = xc * r;
            let g: Tile<f32, { [ROWS, BLOCK] }> = w * dy;
            let mut g_c: Tile<f32, { [ROWS, BLOCK] }> = g;
            if CENTERED {
                g_c = g - row_mean::<ROWS, BLOCK>(g, n_f);
                db = db + dy;
            }
            let c: Tile<f32, { [ROWS, BLOCK] }> = row_mean::<ROWS, BLOCK>(g * x_hat, n_f);
            let mut dx_f: Tile<f32, { [ROWS, BLOCK] }> = (g_c - x_hat * c) * r;
            if ADD {
                let dr: Tile<f32, { [ROWS, BLOCK] }> = convert_tile(dr_part.load([rb, 0i32]));
                dx_f = dx_f + dr;
            }
            let dx: Tile<T, { [ROWS, BLOCK] }> = convert_tile(dx_f);
            dx_part.store(dx, [rb, 0i32]);
            dw = dw + dy * x_hat;
        }
        let sums: Tile<f32, { [BLOCK] }> = reduce_sum(dw, 0i32);
        sum_part.store(sums.reshape(shape![1, BLOCK]), [pid, 0i32]);
        if CENTERED {
            let db_sums: Tile<f32, { [BLOCK] }> = reduce_sum(db, 0i32);
            sum_part.store(db_sums.reshape(shape![1, BLOCK]), [programs + pid, 0i32]);
        }
    }

    /// out[j-th column tile] = the sum over the `programs` rows of `part_ptr` (n f32 each), rounded to T.
    #[cutile::entry(unchecked_accesses = true)]
    unsafe fn norm_backward_sum<T: ElementType, const CHUNK: i32, const BLOCK: i32>(
        out_ptr: *mut T, part_ptr: *mut f32, programs: i32, n: i32,
    ) {
        let j: i32 = get_tile_block_id().0;
        let tok: Token = new_token_unordered();
        let part_view: Tensor<f32, { [-1, -1] }> = strided_view(part_ptr, programs, n, n, tok);
        let out_view: Tensor<T, { [-1] }> = vector_view(out_ptr, n, tok);
        let part: Partition<f32, { [CHUNK, BLOCK] }> = part_view.partition(shape![CHUNK, BLOCK]);
        let mut out_part: PartitionMut<T, { [BLOCK] }> = unsafe { out_view.partition_full_mut(shape![BLOCK]) };
        let mut acc: Tile<f32, { [CHUNK, BLOCK] }> = constant(0.0f32, shape![CHUNK, BLOCK]);
        for i in 0i32..(programs + CHUNK - 1) / CHUNK {
            acc = acc + part.load([i, j]);
        }
        let sums: Tile<f32, { [BLOCK] }> = reduce_sum(acc, 0i32);
        let out: Tile<T, { [BLOCK] }> = convert_tile(sums);
        out_part.store(out, [j]);
    }
}

use norm_backward_device as device;

/// The widest row the kernels hold whole (dy, x, w and the sums in f32 registers).
pub const MAX_BLOCK: i32 = 16384;
/// Largest tile (ROWS * BLOCK elements) a variant may ask for.
const MAX_TILE_ELEMS: i32 = 16384;
/// The default persistent grid: tile blocks per SM (each adds a row of n f32 partials per sum).
pub const DEFAULT_BLOCKS_PER_SM: i32 = 2;
/// The second pass's tile: CHUNK partial rows by REDUCE_BLOCK columns, one column tile per tile block.
const CHUNK: i32 = 32;
const REDUCE_BLOCK: i32 = 64;

/// Which norm's gradient: the output rows after dx, and whether rows are centered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Norm {
    /// RMSNorm: out is (m + 1, n), dx then dw.
    Rms,
    /// LayerNorm: out is (m + 2, n), dx then dw then db.
    Layer,
}

impl Norm {
    fn sums(self) -> i32 {
        match self {
            Norm::Rms => 1,
            Norm::Layer => 2,
        }
    }

    fn out_rows(self) -> &'static str {
        match self {
            Norm::Rms => "(m + 1, n)",
            Norm::Layer => "(m + 2, n)",
        }
    }

    fn after_dx(self) -> &'static str {
        match self {
            Norm::Rms => "dx, then dw",
            Norm::Layer => "dx, then dw, then db",
        }
    }
}

/// A validated launch. `row.stride_x` is x's row stride, `row.stride_y` dy's.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub norm: Norm,
    pub dtype: DType,
    pub row: RowPlan,
    /// out's row stride: dx's rows, then the sums' (dw, db) at rows m, m + 1.
    pub stride_out: i32,
    pub eps: f32,
    /// Some(grid): that many tile blocks (capped at the row tiles); None: from the SM count.
    pub programs: Option<i32>,
    /// Some(row stride): dx adds the rows of a second gradient input, `dresidual` (the kernel's ADD;
    /// fused_add_rms_norm_backward); None: the norm's gradient alone.
    pub stride_dr: Option<i32>,
}

/// Validate a norm backward's descriptors and variant (the export's arguments one for one; its C
/// signature is fixed). The member's ffi.rs header gives the contract.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    kernel: &str, norm: Norm, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, w: &TensorDesc, eps: f32, block: i32,
    rows: i32, occupancy: i32, programs: i32, warps: i32,
) -> FfiResult<Plan> {
    let tensors = [(dy, "dy", 2), (x, "x", 2), (out, "out", 2), (w, "weight", 1)];
    let dtype = ffi_util::check_float_tensors(kernel, &tensors)?;
    ffi_util::check_same_shape(x, "x", dy, "dy")?;
    let (m, n) = (to_i32(x.shape[0], "m")?, to_i32(x.shape[1], "n")?);
    if out.shape[..2] != [m as i64 + norm.sums() as i64, n as i64] {
        return Err(invalid(format!(
            "`out` is {:?}: it must be {} = [{}, {n}] ({})",
            out.shape(),
            norm.out_rows(),
            m as i64 + norm.sums() as i64,
            norm.after_dx()
        )));
    }
    if w.shape[0] != n as i64 {
        return Err(invalid(format!("`weight` has {} elements but x has n={n} columns", w.shape[0])));
    }
    ffi_util::check_last_dims_contiguous(&[(dy, "dy"), (x, "x"), (out, "out"), (w, "weight")])?;
    let stride_out = ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?;
    // eps > 0, not >= 0 as the forwards: a row tile past m is zero-padded, and its rsqrt(0 + 0) = inf
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
    // are the TMA's, as the forwards' partition entries past 2^31 elements), the sums' rows start at
    // offsets made here in u64, and the workspace is <= 2 x grid <= 4 x SMs rows.
    Ok(Plan { norm, dtype, row, stride_out, eps, programs, stride_dr: None })
}

/// [`plan`] for RMSNorm's gradient with a second gradient of x added to dx (fused_add_rms_norm_backward:
/// `dr` is the residual stream's gradient of s = x + residual, shaped and typed like dy).
#[allow(clippy::too_many_arguments)]
pub fn plan_added(
    kernel: &str, out: &TensorDesc, dy: &TensorDesc, dr: &TensorDesc, x: &TensorDesc, w: &TensorDesc, eps: f32,
    block: i32, rows: i32, occupancy: i32, programs: i32, warps: i32,
) -> FfiResult<Plan> {
    let mut p = plan(kernel, Norm::Rms, out, dy, x, w, eps, block, rows, occupancy, programs, warps)?;
    ffi_util::check_tensor(dr, "dresidual", 2)?;
    ffi_util::check_same_dtype(dy, "dy", dr, "dresidual")?;
    ffi_util::check_same_shape(dy, "dy", dr, "dresidual")?;
    ffi_util::check_last_dim_contiguous(dr, "dresidual")?;
    p.stride_dr = Some(ffi_util::row_stride(dr, p.row.n, "dresidual", format_args!("n={}", p.row.n))?);
    Ok(p)
}

/// Launch a planned norm backward on `stream`: the rows kernel, then one sum pass per output row
/// after dx (dw; db), the f32 workspace between them freed in stream order after both.
pub fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, w: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    launch_added::<T>(p, out, dy, None, x, w, stream)
}

/// [`launch`] with the second gradient `dr` added to dx where the plan has one (plan_added).
pub fn launch_added<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, dr: Option<&TensorDesc>, x: &TensorDesc, w: &TensorDesc,
    stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x, stride_y, .. } = p.row;
    let grid = match p.programs {
        Some(g) => g,
        None => (ffi_util::sm_count(stream)? as i32 * DEFAULT_BLOCKS_PER_SM).min(p.row.row_tiles()),
    };
    let sums = p.norm.sums();
    let f32s = std::mem::size_of::<f32>() as u64;
    let ws = StreamAlloc::new((sums * grid) as usize * n as usize * f32s as usize, stream, "dw workspace")?;
    let row_bytes = p.stride_out as u64 * std::mem::size_of::<T>() as u64;
    // SAFETY: plan() checked the descriptors (dtypes, shapes, strides; out holds m + sums rows of n,
    // stride_out apart, so sum row s starts (m + s) * stride_out elements in; plan_added dr like dy,
    // and without it the kernel does not read dr_ptr, dy's pointer standing in); the workspace holds
    // sums x grid rows of n f32, written by the first kernel before the second reads them (stream
    // order), freed after both.
    unsafe {
        let [dx_ptr, dy_ptr, x_ptr, w_ptr] = [out, dy, x, w].map(|t| ffi_util::device_ptr::<T>(t));
        let (added, dr_ptr, sr) = match (dr, p.stride_dr) {
            (Some(dr), Some(sr)) => (true, ffi_util::device_ptr::<T>(dr), sr),
            _ => (false, dy_ptr, stride_y),
        };
        let part = DevicePointer::<f32>::from_cu_deviceptr(ws.ptr);
        let (sy, sx, so, eps) = (stride_y, stride_x, p.stride_out, p.eps);
        let mut launch = p.row.launch::<T>(grid as u32);
        launch.generics.push((p.norm == Norm::Layer).to_string()); // CENTERED
        launch.generics.push(added.to_string()); // ADD
        let rows = device::norm_backward_rows(dx_ptr, part, dy_ptr, dr_ptr, x_ptr, w_ptr, m, n, sy, sr, sx, so, eps);
        launch.enqueue(rows, stream)?;
        let columns = (n + REDUCE_BLOCK - 1) / REDUCE_BLOCK;
        for s in 0..sums as u64 {
            let out_row = DevicePointer::<T>::from_cu_deviceptr(out.data + (m as u64 + s) * row_bytes);
            let part_s = DevicePointer::<f32>::from_cu_deviceptr(ws.ptr + s * grid as u64 * n as u64 * f32s);
            let options = ffi_util::compile_options(None, None);
            let reduce = Launch::new::<T>(&[CHUNK, REDUCE_BLOCK], (columns as u32, 1, 1), options);
            reduce.enqueue(device::norm_backward_sum(out_row, part_s, grid, n), stream)?;
        }
    }
    ws.free()
}

/// A norm backward's C export (the member's ffi.rs header gives its contract): its KERNEL name, its
/// plan() (this module's, for `norm`) and this module's launch(), through ffi_util::export!.
#[macro_export]
macro_rules! norm_backward_export {
    ($export:ident, $kernel:literal, $norm:expr) => {
        use $crate::ffi_util::{FfiResult, TensorDesc};
        use $crate::norm_backward::{launch, Plan};

        const KERNEL: &str = $kernel;

        /// The export's arguments one for one (its C signature is fixed), validated by norm_backward::plan.
        #[allow(clippy::too_many_arguments)]
        pub fn plan(
            out: &TensorDesc, dy: &TensorDesc, x: &TensorDesc, w: &TensorDesc, eps: f32, block: i32, rows: i32,
            occupancy: i32, programs: i32, warps: i32,
        ) -> FfiResult<Plan> {
            $crate::norm_backward::plan(KERNEL, $norm, out, dy, x, w, eps, block, rows, occupancy, programs, warps)
        }

        $crate::export!($export(out, dy, x, weight; eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32, warps: i32));
    };
}

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and both entries lowered to Tile IR for sm_90 (then assembled by
    //! tileiras when it is there) for every dtype and both norms.
    use super::*;
    use crate::ffi_util::{assert_fails, test_desc as desc2, test_rows, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "norm_backward_device" };

    fn plan_of(
        norm: Norm, out: &TensorDesc, x: &TensorDesc, w: &TensorDesc, block: i32, rows: i32, programs: i32,
    ) -> FfiResult<Plan> {
        plan("norm_backward", norm, out, x, x, w, 1e-6, block, rows, -1, programs, -1)
    }

    #[test]
    fn plan_takes_whole_rows_and_defaults() {
        let (x, w) = test_rows(DType::BF16, 257, 4097);
        let out = desc2(DType::BF16, &[258, 4097], &[4097, 1]);
        let p = plan_of(Norm::Rms, &out, &x, &w, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.programs, p.row.stride_x), (8192, 1, None, 4097));
        let (x, w) = test_rows(DType::F32, 100, 1000);
        let out = desc2(DType::F32, &[102, 1000], &[1000, 1]);
        let p = plan_of(Norm::Layer, &out, &x, &w, -1, -1, 500).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.programs), (1024, 4, Some(25))); // capped at ceil(100 / 4)
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (x, w) = test_rows(DType::F32, 4, 8);
        let out = desc2(DType::F32, &[5, 8], &[8, 1]);
        let cases = [
            (Norm::Rms, desc2(DType::F32, &[4, 8], &[8, 1]), w, -1, -1, "(m + 1, n) = [5, 8] (dx, then dw)"),
            (Norm::Layer, out, w, -1, -1, "(m + 2, n) = [6, 8] (dx, then dw, then db)"),
            (Norm::Rms, desc2(DType::F32, &[5, 8], &[7, 1]), w, -1, -1, "rows would overlap"),
            (Norm::Rms, out, desc2(DType::F32, &[7], &[1]), -1, -1, "weight"),
            (Norm::Rms, out, w, 16, 0, "programs=0"),
            (Norm::Rms, out, w, 24, -1, "power of two"),
        ];
        for (norm, out, w, block, programs, needle) in cases {
            assert_fails(plan_of(norm, &out, &x, &w, block, 1, programs), rc::INVALID_ARGUMENT, needle);
        }
        let (wide, ww) = test_rows(DType::F32, 4, 16385);
        let out = desc2(DType::F32, &[5, 16385], &[16385, 1]);
        assert_fails(plan_of(Norm::Rms, &out, &wide, &ww, -1, -1, -1), rc::INVALID_ARGUMENT, "at most 16384");
        let (x, w) = test_rows(DType::F32, 4, 100);
        let out = desc2(DType::F32, &[5, 100], &[100, 1]);
        assert_fails(plan_of(Norm::Rms, &out, &x, &w, 64, 1, -1), rc::INVALID_ARGUMENT, "needs n=100 <= block");
        let zero_eps = plan("norm_backward", Norm::Rms, &out, &x, &x, &w, 0.0, -1, -1, -1, -1, -1);
        assert_fails(zero_eps, rc::INVALID_ARGUMENT, "finite eps > 0");
    }

    #[test]
    fn both_entries_lower_to_tile_ir_for_sm90() {
        for dtype in ["f32", "f16", "bf16"] {
            for (rows, block) in [("1", "4096"), ("2", "1024"), ("1", "8192"), ("1", "16384"), ("4", "16")] {
                for (centered, added) in [("false", "false"), ("true", "false"), ("false", "true")] {
                    let generics = [dtype, rows, block, centered, added];
                    DEVICE.assert_lowers("norm_backward_rows", &generics, &["rsqrt", "reduce"]);
                }
            }
            let (chunk, block) = (CHUNK.to_string(), REDUCE_BLOCK.to_string());
            DEVICE.assert_lowers("norm_backward_sum", &[dtype, &chunk, &block], &["reduce"]);
        }
    }
}
