//! C-ABI launcher of cross-entropy's loss: `cutile_cross_entropy` (op.py's CDEF).
//!
//!   int32_t cutile_cross_entropy(const TensorDesc* out, const TensorDesc* logits, const TensorDesc* target,
//!                                int32_t ignore_index, float smoothing, int32_t block, int32_t rows,
//!                                int32_t occupancy, int32_t warps, int32_t device_id, uint64_t stream);
//!
//! logits (m, n) f32, f16 or bf16 with a contiguous last dim and any row stride >= n; target (m,)
//! i32 or i64, any stride; out (m,) f32, contiguous, receives each row's loss (0 where the target
//! is ignore_index; op.py reduces them). smoothing is the label smoothing ε in [0, 1]. `block` is
//! the column tile (a power of two; the rows are read in ceil(n / block) tiles), `rows` the rows
//! per tile block, `occupancy` (1..=32) and `warps` (4 or 8) the compiler hints; -1 picks the
//! default (block min(pow2(n), 4096), rows for ~4 K elements a tile; the compiler's hints). A
//! target outside [0, n) that is not ignore_index fails a device assertion.
//!
//! `plan_rows` and `launch_rows` serve kernels/cross_entropy_backward too (the same entry, GRAD on:
//! the loss and the gradient in one launch). Every descriptor is validated before anything touches
//! the GPU: bad input returns -2/-5/-6 with a message, never a launch.
use super::kernel::cross_entropy_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, RowPlan, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "cross_entropy";
/// The default column tile.
pub const DEFAULT_BLOCK: i32 = 4096;
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: four f32 running tiles and the loaded
/// one in registers.
pub const MAX_TILE_ELEMS: i32 = 8192;
/// Version 3's chunk (form = 3), in columns: softmax's fastest chunk for bf16 vocabulary rows
/// (kernels/softmax/NOTES.md, the single pass that reads its chunk twice).
pub const SPLIT_CHUNK: i32 = 8192;
/// Most partials a row of version 3 combines (its [1, PARTS] tile, PARTS the power of two >= the
/// row's chunks): rows up to 128 x 8192 = 1 Mi columns.
pub const MAX_SPLIT_PARTS: i32 = 128;

/// Version 3's split of each row: `chunks` chunks of `chunk_tiles` BLOCK-wide tiles, one tile block
/// each; `parts` the power of two >= chunks; `lagged`: version 4's entry over the same chunks (form 4).
#[derive(Debug, PartialEq)]
pub struct Split {
    pub chunk_tiles: i32,
    pub chunks: i32,
    pub parts: i32,
    pub lagged: bool,
}

/// A validated launch. `row.stride_x` is the logits' row stride, `row.stride_y` the gradient's (0
/// without one); strides of the targets in i32 words, of the scales in elements (0: one scale).
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub row: RowPlan,
    /// Version 2's entry, `cross_entropy_row` (variant form = 2), else `cross_entropy_rows`.
    pub row_form: bool,
    /// Version 3's entry, `cross_entropy_split` (variant form = 3), or version 4's,
    /// `cross_entropy_lagged` (form = 4), and their split of the rows.
    pub split: Option<Split>,
    /// The losses are written.
    pub loss: bool,
    /// The gradient is written (kernels/cross_entropy_backward).
    pub grad: bool,
    /// The targets are i64 (read as i32 word pairs).
    pub wide: bool,
    pub stride_t: i32,
    pub stride_s: i32,
    pub ignore_index: i32,
    /// 1 - ε and ε / n.
    pub keep: f32,
    pub spread: f32,
}

/// The variant's knobs, as the exports take them: (block, rows, occupancy, warps, form).
pub type Knobs = (i32, i32, i32, i32, i32);

/// The gradient's tensors of a GRAD launch: (grad, its name) and (scale, its name).
pub type GradArgs<'a> = ((&'a TensorDesc, &'a str), (&'a TensorDesc, &'a str));

/// The plan of `kernel`'s launch: with `loss`, the losses into that (m,) f32; with `grad`, the
/// gradient into (m, n) grad.0 scaled per row by grad.1 ((1,): one scale, or (m,)).
#[allow(clippy::too_many_arguments)]
pub fn plan_rows(
    kernel: &str, loss: Option<(&TensorDesc, &str)>, logits: &TensorDesc, target: &TensorDesc, grad: Option<GradArgs>,
    ignore_index: i32, smoothing: f32, knobs: Knobs,
) -> FfiResult<Plan> {
    let (block, rows, occupancy, warps, form) = knobs;
    let mut floats = vec![(logits, "logits", 2)];
    if let Some(((g, g_name), _)) = grad {
        floats.push((g, g_name, 2));
    }
    let dtype = ffi_util::check_float_tensors(kernel, &floats)?;
    ffi_util::check_last_dim_contiguous(logits, "logits")?;
    let (m, n) = (to_i32(logits.shape[0], "m")?, to_i32(logits.shape[1], "n")?);
    let targets = ffi_util::check_tensors(kernel, &[DType::I32, DType::I64], "i32, i64", &[(target, "target", 1)])?;
    if target.shape[0] != m as i64 {
        return Err(invalid(format!("`target` is {:?}: it must be [{m}], a class per row of logits", target.shape())));
    }
    let words = if targets == DType::I64 { 2 } else { 1 };
    let stride_t = if m == 1 { words } else { to_i32(target.strides[0] * words as i64, "target stride")? };
    if (m as i64 - 1) * stride_t as i64 + words as i64 > i32::MAX as i64 {
        return Err(invalid(format!("`target` spans more than 2^31 words (m={m}, stride {stride_t} words)")));
    }
    if let Some((out, out_name)) = loss {
        ffi_util::check_tensors(kernel, &[DType::F32], "f32", &[(out, out_name, 1)])?;
        if out.shape[0] != m as i64 || (m > 1 && out.strides[0] != 1) {
            return Err(invalid(format!(
                "`{out_name}` is {:?} with strides {:?}: it must be a contiguous [{m}] f32 tensor",
                out.shape(),
                out.strides()
            )));
        }
    }
    let (mut stride_g, mut stride_s) = (0, 0);
    if let Some(((g, g_name), (scale, s_name))) = grad {
        ffi_util::check_same_shape(logits, "logits", g, g_name)?;
        ffi_util::check_last_dim_contiguous(g, g_name)?;
        stride_g = ffi_util::row_stride(g, n, g_name, format_args!("n={n}"))?;
        ffi_util::check_tensors(kernel, &[DType::F32], "f32", &[(scale, s_name, 1)])?;
        stride_s = match scale.shape[0] {
            1 => 0,
            len if len == m as i64 => to_i32(scale.strides[0], "scale stride")?,
            len => return Err(invalid(format!("`{s_name}` has {len} values: it must have 1 or m={m}"))),
        };
        if (m as i64 - 1) * stride_s as i64 >= i32::MAX as i64 {
            return Err(invalid(format!("`{s_name}` spans more than 2^31 elements")));
        }
    }
    if !(0.0..=1.0).contains(&smoothing) {
        return Err(invalid(format!("smoothing={smoothing}: label smoothing must lie in [0, 1]")));
    }
    let default_block = ffi_util::whole_row_block(n, DEFAULT_BLOCK).unwrap_or(DEFAULT_BLOCK);
    let (block, rows) =
        ffi_util::row_tile(block, rows, default_block, |b| ffi_util::default_rows(4096, b, m), 64, MAX_TILE_ELEMS)?;
    let (occupancy, warps) = (ffi_util::occupancy_hint(occupancy)?, ffi_util::warps_hint(warps)?);
    let stride_x = ffi_util::row_stride(logits, n, "logits", format_args!("n={n}"))?;
    let split = match form {
        3 | 4 => Some(Split { lagged: form == 4, ..split_rows(m, n, block, rows, stride_x, stride_g, form)? }),
        _ => None,
    };
    let row_form = match form {
        -1 | 1 | 3 | 4 => false,
        2 if rows == 1 && (m as i64 - 1) * stride_x as i64 + n as i64 <= i32::MAX as i64 => true,
        2 => {
            return Err(invalid(format!(
                "variant form=2 (one row a tile block) needs rows=1 (got {rows}) and every logit's offset \
                 inside i32 (m={m}, row stride {stride_x}); use form 1"
            )))
        }
        _ => {
            return Err(invalid(format!(
                "variant form={form}: use 1 (row tiles), 2 (one row a tile block), 3 (rows split), 4 (rows split, \
                 lagged) or -1"
            )))
        }
    };
    Ok(Plan {
        row_form,
        split,
        dtype,
        row: RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y: stride_g },
        loss: loss.is_some(),
        grad: grad.is_some(),
        wide: targets == DType::I64,
        stride_t,
        stride_s,
        ignore_index,
        keep: 1.0 - smoothing,
        spread: smoothing / n as f32,
    })
}

impl Plan {
    /// The bool generics of versions 1 and 2 after T, (ROWS,) BLOCK: LOSS, GRAD, WIDE, version 2's
    /// SMOOTH, then G_TMA: the gradient stored through TMA only where its rows are whole 16-byte
    /// units (`ffi_util::tma_store_exact`; device_util's `store_tile_2d`), true without a gradient
    /// so that a loss alone compiles one form.
    pub fn flag_generics(&self) -> Vec<String> {
        let mut flags = vec![self.loss, self.grad, self.wide];
        if self.row_form {
            flags.push(self.spread != 0.0); // SMOOTH: ε > 0
        }
        flags.push(!self.grad || ffi_util::tma_store_exact(self.dtype, self.row.n));
        flags.iter().map(bool::to_string).collect()
    }
}

/// Version 3's split (form = 3, and version 4's, form = 4): rows=1, SPLIT_CHUNK-column chunks, at most MAX_SPLIT_PARTS of them
/// a row, and every element offset of the logits and of the gradient (row stride `stride_g`, 0
/// without one) inside i32 up to the row's padded last tile (`ffi_util::masked_offsets_fit`); else
/// -6 naming the limit.
pub fn split_rows(m: i32, n: i32, block: i32, rows: i32, stride_x: i32, stride_g: i32, form: i32) -> FfiResult<Split> {
    let bad = |why: String| Err(invalid(format!("variant form={form} (rows split) block={block} rows={rows}: {why}")));
    if rows != 1 {
        return bad("needs rows=1".into());
    }
    let chunk_tiles = SPLIT_CHUNK / block; // block: a power of two <= MAX_TILE_ELEMS (row_tile checked)
    let col_tiles = (n as i64 + block as i64 - 1) / block as i64;
    let chunks = (col_tiles + chunk_tiles as i64 - 1) / chunk_tiles as i64;
    let parts = (chunks as u64).next_power_of_two() as i64;
    if parts > MAX_SPLIT_PARTS as i64 {
        return bad(format!(
            "n={n} makes {chunks} chunks of {SPLIT_CHUNK} columns, more than {MAX_SPLIT_PARTS}; use form 2"
        ));
    }
    if !ffi_util::masked_offsets_fit(m, n, 1, block, &[stride_x, stride_g]) {
        return bad(format!(
            "an element offset passes i32 (m={m}, n={n}, row strides {stride_x} and {stride_g}); use form 1"
        ));
    }
    // the grid's tile block ids (row * chunks + chunk); only a row stride below n (rows that
    // overlap) gets here with m * n past i32
    if m as i64 * chunks > i32::MAX as i64 {
        return bad(format!("m={m} rows x {chunks} chunks is more tile blocks than a grid holds; use form 1"));
    }
    Ok(Split { chunk_tiles, chunks: chunks as i32, parts: parts as i32, lagged: false })
}

/// The export's arguments one for one (its C signature is fixed).
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, ignore_index: i32, smoothing: f32, block: i32,
    rows: i32, occupancy: i32, warps: i32, form: i32,
) -> FfiResult<Plan> {
    let knobs = (block, rows, occupancy, warps, form);
    plan_rows(KERNEL, Some((out, "out")), logits, target, None, ignore_index, smoothing, knobs)
}

/// Launches `plan`: `loss` is written only with plan.loss, `grad` and `scale` read or written only
/// with plan.grad (else pass any descriptor).
pub fn launch_rows<T: Element>(
    p: &Plan, loss: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, grad: &TensorDesc, scale: &TensorDesc,
    stream: &Arc<Stream>,
) -> FfiResult<()> {
    if let Some(split) = &p.split {
        if split.lagged {
            return launch_lagged::<T>(p, split, loss, logits, target, grad, scale, stream);
        }
        return launch_split::<T>(p, split, loss, logits, target, grad, scale, stream);
    }
    let RowPlan { m, n, stride_x, stride_y, .. } = p.row;
    let mut launch = p.row.launch::<T>(p.row.row_tiles() as u32);
    if p.row_form {
        launch.generics.remove(1); // no ROWS: one row a tile block
    }
    // LOSS, GRAD, WIDE, (SMOOTH,) G_TMA
    launch.generics.extend(p.flag_generics());
    // SAFETY: plan() checked the descriptors (dtypes, shapes, strides, the targets' and scales'
    // spans); the memory is PyTorch's, alive until the caller's stream has run the kernel.
    unsafe {
        let [x_ptr, g_ptr] = [logits, grad].map(|t| ffi_util::device_ptr::<T>(t));
        let [loss_ptr, s_ptr] = [loss, scale].map(|t| ffi_util::device_ptr::<f32>(t));
        let t_ptr = ffi_util::device_ptr::<i32>(target);
        let (g, l, x, t, sc) = (g_ptr, loss_ptr, x_ptr, t_ptr, s_ptr);
        let (sx, sg, st, ss, ii) = (stride_x, stride_y, p.stride_t, p.stride_s, p.ignore_index);
        if p.row_form {
            let entry = device::cross_entropy_row(g, l, x, t, sc, m, n, sx, sg, st, ss, ii, p.keep, p.spread);
            return launch.enqueue(entry, stream);
        }
        let entry = device::cross_entropy_rows(g, l, x, t, sc, m, n, sx, sg, st, ss, ii, p.keep, p.spread);
        launch.enqueue(entry, stream)
    }
}

/// Version 3's launch: m x chunks tile blocks, after a workspace on the caller's stream (the rows'
/// arrival counters, cleared on the stream, and three f32 partials a chunk:
/// `ffi_util::exchange_workspace`), freed in stream order. The entry's progress argument needs every
/// chunk of a row resident with the others (softmax_split_exchange's): chunks <= the SM count, else -6.
#[allow(clippy::too_many_arguments)]
fn launch_split<T: Element>(
    p: &Plan, s: &Split, loss: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, grad: &TensorDesc,
    scale: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x, stride_y, block, .. } = p.row;
    let sms = ffi_util::sm_count(stream)?;
    if s.chunks as u32 > sms {
        return Err(invalid(format!(
            "variant form=3: n={n} makes {} chunks a row, more than this GPU's {sms} SMs (every chunk of a row \
             must be resident at once); use form 2",
            s.chunks
        )));
    }
    let (arrived, [part_max, part_sum, part_x], ws) = ffi_util::exchange_workspace::<3>(m, 1, s.chunks, stream)?;
    let grid = (m as u32 * s.chunks as u32, 1, 1);
    let mut launch =
        ffi_util::Launch::new::<T>(&[block, s.parts], grid, ffi_util::compile_options(p.row.occupancy, p.row.warps));
    // LOSS, GRAD, WIDE, SMOOTH
    launch.generics.extend([p.loss, p.grad, p.wide, p.spread != 0.0].map(|b| b.to_string()));
    // SAFETY: plan() checked the descriptors and `split_rows` (rows=1, i32 offsets of the whole tiles
    // of x and of the gradient, m x chunks tile blocks); the counters are zero and the partials hold
    // every (row, chunk); chunks <= the SM count (the entry's progress argument); the workspace
    // outlives the kernel (freed in stream order).
    unsafe {
        let [x_ptr, g_ptr] = [logits, grad].map(|t| ffi_util::device_ptr::<T>(t));
        let [loss_ptr, s_ptr] = [loss, scale].map(|t| ffi_util::device_ptr::<f32>(t));
        let t_ptr = ffi_util::device_ptr::<i32>(target);
        let entry = device::cross_entropy_split(
            g_ptr,
            loss_ptr,
            x_ptr,
            t_ptr,
            s_ptr,
            m,
            n,
            stride_x,
            stride_y,
            p.stride_t,
            p.stride_s,
            p.ignore_index,
            p.keep,
            p.spread,
            part_max,
            part_sum,
            part_x,
            arrived,
            s.chunk_tiles,
            s.chunks,
        );
        launch.enqueue(entry, stream)?;
    }
    ws.free()
}

/// Version 4's lag: half the tile blocks resident at once (SMs x the occupancy hint, 8 without one),
/// at least a row's chunks (the entry's progress argument). Softmax_backward's sweep of lags of a
/// half and a whole of its resident tile blocks decides whether this stays (its NOTES.md).
pub fn lag(chunks: i32, sms: u32, occupancy: Option<i32>) -> i32 {
    (sms as i32 * occupancy.unwrap_or(8) / 2).max(chunks)
}

/// Version 4's launch: m x chunks + lag tile blocks, after version 3's workspace with a fourth array
/// (each chunk's copy of its row's target logit) and the ticket counter (`ffi_util::ticket_workspace`).
/// No SM-count limit: the entry's progress needs neither a resident row nor the dispatch order.
#[allow(clippy::too_many_arguments)]
fn launch_lagged<T: Element>(
    p: &Plan, s: &Split, loss: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, grad: &TensorDesc,
    scale: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, stride_x, stride_y, block, .. } = p.row;
    // capped at the chunks there are (more would only add idle tickets), still >= chunks
    let lag = lag(s.chunks, ffi_util::sm_count(stream)?, p.row.occupancy).min(m * s.chunks).max(s.chunks);
    if m as i64 * s.chunks as i64 + lag as i64 > i32::MAX as i64 {
        return Err(invalid(format!(
            "variant form=4: m={m} rows x {} chunks + a lag of {lag} is more tickets than i32 holds; use form 1",
            s.chunks
        )));
    }
    let (arrived, ticket, [part_max, part_sum, part_x, part_t], ws) =
        ffi_util::ticket_workspace::<4>(m, 1, s.chunks, stream)?;
    let grid = ((m * s.chunks + lag) as u32, 1, 1);
    let mut launch =
        ffi_util::Launch::new::<T>(&[block, s.parts], grid, ffi_util::compile_options(p.row.occupancy, p.row.warps));
    // LOSS, GRAD, WIDE, SMOOTH
    launch.generics.extend([p.loss, p.grad, p.wide, p.spread != 0.0].map(|b| b.to_string()));
    // SAFETY: as version 3's launch (plan() and `split_rows`), and the ticket counter is zero, the
    // tickets (m x chunks + lag, lag >= chunks) fit i32, one tile block each; the workspace outlives
    // the kernel (freed in stream order).
    unsafe {
        let [x_ptr, g_ptr] = [logits, grad].map(|t| ffi_util::device_ptr::<T>(t));
        let [loss_ptr, s_ptr] = [loss, scale].map(|t| ffi_util::device_ptr::<f32>(t));
        let t_ptr = ffi_util::device_ptr::<i32>(target);
        let entry = device::cross_entropy_lagged(
            g_ptr,
            loss_ptr,
            x_ptr,
            t_ptr,
            s_ptr,
            m,
            p.row.n,
            stride_x,
            stride_y,
            p.stride_t,
            p.stride_s,
            p.ignore_index,
            p.keep,
            p.spread,
            part_max,
            part_sum,
            part_x,
            part_t,
            arrived,
            ticket,
            s.chunk_tiles,
            s.chunks,
            lag,
        );
        launch.enqueue(entry, stream)?;
    }
    ws.free()
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, logits: &TensorDesc, target: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    launch_rows::<T>(p, out, logits, target, logits, out, stream)
}

// `cutile_cross_entropy`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_cross_entropy(out, logits, target; ignore_index: i32, smoothing: f32, block: i32, rows: i32, occupancy: i32, warps: i32, form: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and the entry lowered to Tile IR for sm_90 (then assembled by tileiras
    //! when it is there) for every dtype, target width and pass.
    use super::*;
    use crate::ffi_util::{assert_fails, div_hints, rc, test_desc, DType, DeviceModule, ALIGNED_PTR};

    fn loss(m: i64) -> TensorDesc {
        test_desc(DType::F32, &[m], &[1])
    }

    #[test]
    fn plan_reads_targets_in_words_and_tiles_the_rows() {
        let x = test_desc(DType::BF16, &[4096, 128256], &[128256, 1]);
        let t64 = test_desc(DType::I64, &[4096], &[1]);
        let p = plan(&loss(4096), &x, &t64, -100, 0.1, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.wide, p.stride_t, p.grad), (4096, 1, true, 2, false));
        assert_eq!((p.ignore_index, p.keep, p.spread), (-100, 0.9, 0.1 / 128256.0));
        let small = test_desc(DType::F32, &[100, 100], &[104, 1]);
        let t32 = test_desc(DType::I32, &[100], &[3]);
        let p = plan(&loss(100), &small, &t32, -1, 0.0, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.row.stride_x, p.wide, p.stride_t), (128, 32, 104, false, 3));
    }

    #[test]
    fn form_2_is_one_row_a_tile_block_where_its_offsets_fit() {
        let x = test_desc(DType::BF16, &[4096, 128256], &[128256, 1]);
        let t = test_desc(DType::I64, &[4096], &[1]);
        let p = plan(&loss(4096), &x, &t, -100, 0.0, 4096, 1, -1, -1, 2).unwrap();
        assert!(p.row_form && !plan(&loss(4096), &x, &t, -100, 0.0, 4096, 1, -1, -1, -1).unwrap().row_form);
        assert_fails(plan(&loss(4096), &x, &t, -100, 0.0, 2048, 2, -1, -1, 2), rc::INVALID_ARGUMENT, "rows=1");
        assert!(plan(&loss(4096), &x, &t, i32::MIN, 0.0, 4096, 1, -1, -1, 2).unwrap().row_form);
        let huge = test_desc(DType::BF16, &[16384, 151936], &[151936, 1]);
        let t16k = test_desc(DType::I64, &[16384], &[1]);
        assert_fails(
            plan(&loss(16384), &huge, &t16k, -100, 0.0, 4096, 1, -1, -1, 2),
            rc::INVALID_ARGUMENT,
            "inside i32",
        );
        assert_fails(plan(&loss(4096), &x, &t, -100, 0.0, 4096, 1, -1, -1, 5), rc::INVALID_ARGUMENT, "form=5");
    }

    #[test]
    fn form_3_splits_rows_into_8192_column_chunks_where_its_offsets_fit() {
        let x = test_desc(DType::BF16, &[4096, 128256], &[128256, 1]);
        let t = test_desc(DType::I64, &[4096], &[1]);
        let p = plan(&loss(4096), &x, &t, -100, 0.0, 4096, 1, 8, -1, 3).unwrap();
        assert_eq!(p.split, Some(Split { chunk_tiles: 2, chunks: 16, parts: 16, lagged: false }));
        assert!(!p.row_form && plan(&loss(4096), &x, &t, -100, 0.0, 4096, 1, -1, -1, 2).unwrap().split.is_none());
        // 2048-wide tiles: 63 of them, four a chunk, the last chunk two whole tiles and a ragged one
        let p = plan(&loss(4096), &x, &t, -100, 0.0, 2048, 1, -1, -1, 3).unwrap();
        assert_eq!(p.split, Some(Split { chunk_tiles: 4, chunks: 16, parts: 16, lagged: false }));
        let small = test_desc(DType::F32, &[3, 8193], &[8200, 1]);
        let t3 = test_desc(DType::I32, &[3], &[1]);
        let p = plan(&loss(3), &small, &t3, -100, 0.0, 4096, 1, -1, -1, 3).unwrap();
        assert_eq!(p.split, Some(Split { chunk_tiles: 2, chunks: 2, parts: 2, lagged: false }));
        assert_fails(plan(&loss(4096), &x, &t, -100, 0.0, 2048, 2, -1, -1, 3), rc::INVALID_ARGUMENT, "rows=1");
        let huge = test_desc(DType::BF16, &[16384, 151936], &[151936, 1]);
        let t16k = test_desc(DType::I64, &[16384], &[1]);
        let call = plan(&loss(16384), &huge, &t16k, -100, 0.0, 4096, 1, -1, -1, 3);
        assert_fails(call, rc::INVALID_ARGUMENT, "passes i32");
        let wide = test_desc(DType::BF16, &[2, (1 << 20) + 1], &[(1 << 20) + 1, 1]);
        let t2 = test_desc(DType::I64, &[2], &[1]);
        let call = plan(&loss(2), &wide, &t2, -100, 0.0, 8192, 1, -1, -1, 3);
        assert_fails(call, rc::INVALID_ARGUMENT, "129 chunks");
        // form 4: version 3's split, lagged; its lag half the resident tile blocks, at least a row's chunks
        let p = plan(&loss(4096), &x, &t, -100, 0.0, 4096, 1, 8, 4, 4).unwrap();
        assert_eq!(p.split, Some(Split { chunk_tiles: 2, chunks: 16, parts: 16, lagged: true }));
        assert_eq!(
            (lag(16, 132, Some(8)), lag(16, 132, None), lag(16, 132, Some(4)), lag(100, 8, Some(2))),
            (528, 528, 264, 100)
        );
        let call = plan(&loss(2), &wide, &t2, -100, 0.0, 8192, 1, -1, -1, 4);
        assert_fails(call, rc::INVALID_ARGUMENT, "129 chunks");
        // rows that overlap (a row stride of 0) keep every offset small but not the grid
        let grid = split_rows(1 << 30, 16384, 4096, 1, 0, 0, 3);
        assert_fails(grid, rc::INVALID_ARGUMENT, "more tile blocks than a grid holds");
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let x = test_desc(DType::F32, &[4, 16], &[16, 1]);
        let t = test_desc(DType::I64, &[4], &[1]);
        let call = |out: &TensorDesc, x: &TensorDesc, t: &TensorDesc, s: f32, block: i32| {
            plan(out, x, t, -100, s, block, -1, -1, -1, -1)
        };
        assert_fails(call(&loss(4), &x, &test_desc(DType::I64, &[5], &[1]), 0.0, -1), rc::INVALID_ARGUMENT, "[4]");
        assert_fails(
            call(&loss(4), &x, &test_desc(DType::F32, &[4], &[1]), 0.0, -1),
            rc::UNSUPPORTED_DTYPE,
            "i32, i64",
        );
        assert_fails(call(&loss(3), &x, &t, 0.0, -1), rc::INVALID_ARGUMENT, "contiguous [4] f32");
        assert_fails(call(&test_desc(DType::F32, &[4], &[2]), &x, &t, 0.0, -1), rc::INVALID_ARGUMENT, "contiguous");
        assert_fails(call(&loss(4), &x, &t, 1.5, -1), rc::INVALID_ARGUMENT, "[0, 1]");
        assert_fails(call(&loss(4), &x, &t, 0.0, 24), rc::INVALID_ARGUMENT, "power of two");
        let strided = test_desc(DType::F32, &[4, 16], &[32, 2]);
        assert_fails(call(&loss(4), &strided, &t, 0.0, -1), rc::INVALID_ARGUMENT, "contiguous in its last dim");
        let ints = test_desc(DType::I32, &[4, 16], &[16, 1]);
        assert_fails(call(&loss(4), &ints, &t, 0.0, -1), rc::UNSUPPORTED_DTYPE, "f32, f16, bf16");
    }

    #[test]
    fn the_entry_lowers_to_tile_ir_for_sm90() {
        let device = DeviceModule { ast: device::__module_ast_self, name: "cross_entropy_device" };
        for dtype in ["f32", "f16", "bf16"] {
            // Versions 1 (ROWS, BLOCK, LOSS, GRAD, WIDE, G_TMA) and 2 (BLOCK, LOSS, GRAD, WIDE, SMOOTH,
            // G_TMA): G_TMA false stores the gradient lane by lane (allow_tma = false)
            let forms = [
                ("cross_entropy_rows", ["1", "4096", "true", "false", "true", "true"]),
                ("cross_entropy_rows", ["1", "4096", "true", "true", "true", "true"]),
                ("cross_entropy_rows", ["4", "1024", "true", "true", "false", "false"]),
                ("cross_entropy_rows", ["1", "8192", "false", "true", "true", "true"]),
                ("cross_entropy_row", ["4096", "true", "false", "true", "false", "true"]),
                ("cross_entropy_row", ["4096", "true", "true", "true", "true", "false"]),
                ("cross_entropy_row", ["2048", "false", "true", "false", "false", "true"]),
                ("cross_entropy_row", ["8192", "true", "true", "false", "true", "true"]),
            ];
            for (entry, knobs) in forms {
                let generics = [&[dtype][..], &knobs[..]].concat();
                let ir = device.assert_lowers(entry, &generics, &["reduce"]);
                assert_eq!(ir.contains("allow_tma = false"), knobs[5] == "false", "{entry}<{}>", generics.join(","));
            }
            // version 3: (BLOCK, PARTS, LOSS, GRAD, WIDE, SMOOTH); its exchange's atomics in the IR
            let split_forms = [
                ("4096", "16", "true", "true", "true", "false"),
                ("2048", "16", "false", "true", "false", "true"),
                ("4096", "2", "true", "false", "true", "true"),
            ];
            for (block, parts, loss, grad, wide, smooth) in split_forms {
                let generics = [dtype, block, parts, loss, grad, wide, smooth];
                device.assert_lowers("cross_entropy_split", &generics, &["reduce", "atomic_rmw_tko release"]);
            }
            // version 4: the same generics; the ticket, the arrival and the poll
            for (block, parts, loss, grad, wide, smooth) in split_forms {
                let generics = [dtype, block, parts, loss, grad, wide, smooth];
                let needles = ["reduce", "atomic_rmw_tko relaxed", "atomic_rmw_tko release", "atomic_rmw_tko acquire"];
                device.assert_lowers("cross_entropy_lagged", &generics, &needles);
            }
        }
    }

    /// Version 3 as the launcher compiles the training op's candidates for Llama-3's logits (4096 x
    /// 128256, i64 targets, one scale): 16-byte-aligned pointers, the sizes and strides as integer
    /// hints. Its IR has the exchange's release arrival and acquire poll as atomics and the join of
    /// the target's logit read into the arrival (the order that lets the gradient lie over the
    /// logits: every read of the row before any store).
    #[test]
    fn split_entry_lowers_as_launched() {
        let device = DeviceModule { ast: device::__module_ast_self, name: "cross_entropy_device" };
        let (m, n) = (4096, 128256);
        let names = ["grad_ptr", "loss_ptr", "x_ptr", "target_ptr", "scale_ptr", "part_max", "part_sum", "part_x"];
        let mut ptrs: Vec<(&str, u64)> = names.iter().map(|&p| (p, ALIGNED_PTR)).collect();
        ptrs.push(("arrived", ALIGNED_PTR));
        let candidates = [
            ("bf16", 4096, 8, 4, "false"),
            ("bf16", 2048, 8, 4, "false"),
            ("bf16", 4096, 4, 8, "false"),
            ("bf16", 4096, 4, 4, "false"),
            ("bf16", 2048, 4, 4, "false"),
            ("f32", 4096, 8, 4, "true"),
        ];
        for (dtype, block, occupancy, warps, smooth) in candidates {
            let ints = [("m", m), ("n", n), ("stride_x", n), ("stride_g", n), ("chunks", 16)];
            let options = ffi_util::compile_options(Some(occupancy), Some(warps));
            let what = format!(" for {m}x{n} at occupancy {occupancy} over {warps} warps");
            let generics = [dtype, &block.to_string(), "16", "true", "true", "true", smooth];
            let ir = device.lower("cross_entropy_split", &generics, &div_hints(&ptrs, &ints), options, &what);
            for needle in ["atomic_rmw_tko release", "atomic_rmw_tko acquire", "join_tokens"] {
                assert!(ir.contains(needle), "cross_entropy_split{what}: no {needle} in the IR");
            }
        }
        // version 4's two candidates (op.py): the lagged split as launched, lag 528 and 264
        ptrs.extend([("part_t", ALIGNED_PTR), ("ticket", ALIGNED_PTR + 16 * 1024)]);
        for (dtype, block, occupancy, warps, lag) in [("bf16", 4096, 8, 4, 528), ("f32", 4096, 4, 8, 264)] {
            let ints = [("m", m), ("n", n), ("stride_x", n), ("stride_g", n), ("chunks", 16), ("lag", lag)];
            let options = ffi_util::compile_options(Some(occupancy), Some(warps));
            let what = format!(" for {m}x{n} at occupancy {occupancy} over {warps} warps");
            let generics = [dtype, &block.to_string(), "16", "true", "true", "true", "false"];
            let ir = device.lower("cross_entropy_lagged", &generics, &div_hints(&ptrs, &ints), options, &what);
            assert!(!ir.contains("load_ptr_tko acquire"), "cross_entropy_lagged{what}: a polling load");
        }
    }
}
