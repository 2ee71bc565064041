//! C-ABI launcher of softmax's gradient: `cutile_softmax_backward` (op.py's CDEF).
//!
//!   int32_t cutile_softmax_backward(const TensorDesc* out, const TensorDesc* dy, const TensorDesc* y,
//!                                   int32_t block, int32_t rows, int32_t occupancy, int32_t warps,
//!                                   int32_t chunk, int32_t lag, int32_t device_id, uint64_t stream);
//!
//! dy, y (the forward's output) and out are (m, n), one dtype (f32, f16 or bf16), contiguous last
//! dims, any row strides >= n; out receives dx = y * (dy - sum(y * dy)). `block` is the tile width
//! (a power of two: block >= n holds rows whole, block < n loops over column tiles, reading each
//! twice), `rows` the rows per tile block, `occupancy` the CTAs per SM tileiras should plan registers
//! for (1..=32), `warps` the worker warps per CTA (4 or 8); -1 picks the default (for the hints,
//! the compiler's; for the tile: rows whole up to DEFAULT_WHOLE columns, else LOOPED_BLOCK-wide
//! column tiles, rows for ~4 K elements a tile). `chunk` > 0 (a multiple of block, block < n) cuts
//! each row into chunks of that many columns, one tile block per (row tile, chunk) exchanging the
//! row's partial sums in one launch (`softmax_backward_split`: y and dy read from DRAM once); the
//! launch refuses (-6) a row of more chunks than the GPU has SMs or than MAX_PARTS. 0 never splits;
//! -1 splits rows past DEFAULT_WHOLE into DEFAULT_CHUNK-column chunks where the GPU has SMs for
//! them, else loops. `lag` > 0 runs a split as `softmax_backward_lagged` instead: tile blocks take
//! tickets, each sums one chunk and stores the dx of the chunk `lag` tickets before it (lag at least
//! the chunks of a row; any number of chunks a row up to MAX_PARTS, SMs or not); 0 the split above.
//! Every descriptor is validated before anything touches the GPU: bad input
//! returns -2/-5/-6 with a message, never a launch.
use super::kernel::softmax_backward_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, RowPlan, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "softmax_backward";
/// The widest row the default holds whole (dy and y in f32 registers).
pub const DEFAULT_WHOLE: i32 = 8192;
/// The default column tile of wider rows.
pub const LOOPED_BLOCK: i32 = 4096;
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: two f32 tiles in registers.
const MAX_TILE_ELEMS: i32 = 16384;
/// The default split's chunk (`chunk` -1 on rows past DEFAULT_WHOLE): 4 column tiles of
/// LOOPED_BLOCK, 32 KB of bf16 y and dy a tile block re-reads from L2 (autotune's pick over chunks
/// of 4 and 8 tiles on every vocabulary config of an H100 run: NOTES.md).
pub const DEFAULT_CHUNK: i32 = 4 * LOOPED_BLOCK;
/// Most chunks a row: the partials are loaded as one [rows, PARTS] tile.
pub const MAX_PARTS: i32 = 64;

/// A validated launch: `row.stride_x` is y's row stride, `row.stride_y` dy's; `split` the chunks.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub row: RowPlan,
    /// out's row stride.
    pub stride_out: i32,
    pub split: Option<Split>,
}

/// A split launch: chunks of `chunk_tiles` column tiles, `chunks` a row; `parts` the power of two
/// at least `chunks`; `required`: asked for by the variant (refused where the GPU has fewer SMs
/// than chunks, unless lagged), else the default's (which then loops instead, unless lagged).
#[derive(Debug, PartialEq)]
pub struct Split {
    pub chunk_tiles: i32,
    pub chunks: i32,
    pub parts: i32,
    pub required: bool,
    /// > 0: the lagged form, storing the chunk this many tickets back; 0: the exchange form.
    pub lag: i32,
}

/// The split of n-column rows in `block`-wide tiles for the `chunk` argument (module docs).
fn split(n: i32, block: i32, chunk: i32) -> FfiResult<Option<Split>> {
    let (chunk, required) = match chunk {
        0 => return Ok(None),
        -1 if n > DEFAULT_WHOLE && block < n => (DEFAULT_CHUNK.max(block) / block * block, false),
        -1 => return Ok(None),
        c if c > 0 && c % block == 0 && block < n => (c, true),
        c => {
            return Err(invalid(format!(
                "chunk={c}: a split's chunk must be a positive multiple of block={block} with block < n={n} \
                 (or 0: no split, -1: the default)"
            )))
        }
    };
    let chunk_tiles = chunk / block;
    let chunks = (n + chunk - 1) / chunk;
    if chunks > MAX_PARTS {
        return Err(invalid(format!(
            "chunk={chunk}: n={n} makes {chunks} chunks a row, past {MAX_PARTS}; take a wider chunk"
        )));
    }
    let parts = (chunks as u32).next_power_of_two() as i32;
    Ok(Some(Split { chunk_tiles, chunks, parts, required, lag: 0 }))
}

/// The lagged form's `lag` for a split of `chunks` chunks a row over `row_tiles` row tiles: refused
/// below the row's chunks (a ticket would wait on chunks of higher tickets) and where the tickets
/// (row tiles x chunks + lag) would pass i32.
fn check_lag(lag: i32, chunks: i32, row_tiles: i32) -> FfiResult<i32> {
    if lag < chunks {
        return Err(invalid(format!(
            "lag={lag}: a lagged split stores the chunk lag tickets back, which must be at least the {chunks} chunks of \
             a row; take lag >= {chunks} (or lag=0: the exchange split)"
        )));
    }
    if row_tiles as i64 * chunks as i64 + lag as i64 > i32::MAX as i64 {
        return Err(invalid(format!(
            "lag={lag}: {row_tiles} row tiles x {chunks} chunks + lag tickets pass i32; take lag=0"
        )));
    }
    Ok(lag)
}

#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, dy: &TensorDesc, y: &TensorDesc, block: i32, rows: i32, occupancy: i32, warps: i32, chunk: i32,
    lag: i32,
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
    let mut split = split(n, block, chunk)?;
    match (&mut split, lag) {
        (_, l) if l < 0 => return Err(invalid(format!("lag={l}: must be >= 0 (0: the exchange split)"))),
        (Some(s), l) if l > 0 => s.lag = check_lag(l, s.chunks, row.row_tiles())?,
        (None, l) if l > 0 && chunk == 0 => {
            return Err(invalid(format!("lag={l} with chunk=0: a lag needs a split (chunk > 0 or -1)")))
        }
        _ => {} // lag 0, or the default chunk on rows it does not split: nothing lags
    }
    Ok(Plan { dtype, row, stride_out, split })
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, dy: &TensorDesc, y: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x: sy, stride_y: sdy, block, .. } = p.row;
    if let Some(s) = &p.split {
        if s.lag > 0 {
            return launch_lagged::<T>(p, s, out, dy, y, stream);
        }
        let sms = ffi_util::sm_count(stream)?;
        if s.chunks as u32 <= sms {
            return launch_split::<T>(p, s, out, dy, y, stream);
        }
        if s.required {
            return Err(invalid(format!(
                "variant chunk={}: n={n} makes {} chunks a row, more than this GPU's {sms} SMs (every chunk of a \
                 row must be resident at once); take a wider chunk or chunk=0",
                s.chunk_tiles * block,
                s.chunks
            )));
        }
    }
    // SAFETY: plan() checked the descriptors (dtypes, one (m, n) shape, strides); the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        let [dx_ptr, dy_ptr, y_ptr] = [out, dy, y].map(|t| ffi_util::device_ptr::<T>(t));
        let mut launch = p.row.launch::<T>(p.row.row_tiles() as u32);
        launch.generics.push((block < n).to_string()); // LOOPED
        launch.enqueue(device::softmax_backward_rows(dx_ptr, dy_ptr, y_ptr, m, n, p.stride_out, sdy, sy), stream)
    }
}

/// The split form: one workspace on the caller's stream holds the row tiles' arrival counters
/// (cleared) and the (row, chunk) partial sums (`ffi_util::exchange_workspace`).
fn launch_split<T: Element>(
    p: &Plan, s: &Split, out: &TensorDesc, dy: &TensorDesc, y: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x: sy, stride_y: sdy, rows, .. } = p.row;
    let row_tiles = p.row.row_tiles();
    let (arrived, [parts], ws) = ffi_util::exchange_workspace::<1>(row_tiles, rows, s.chunks, stream)?;
    let mut launch = p.row.launch::<T>((row_tiles * s.chunks) as u32);
    launch.generics.push(s.parts.to_string()); // PARTS
    launch.generics.push((s.chunk_tiles == 1).to_string()); // HELD
    let (ct, chunks) = (s.chunk_tiles, s.chunks);
    // SAFETY: plan() checked the descriptors; the workspace holds row_tiles counters (cleared on
    // the stream) and (row_tiles * rows) x chunks f32 partials, and outlives the kernel (freed in
    // stream order); the grid has row_tiles * chunks tile blocks with chunks <= the SM count (the
    // entry's progress argument).
    unsafe {
        let [dx_ptr, dy_ptr, y_ptr] = [out, dy, y].map(|t| ffi_util::device_ptr::<T>(t));
        let (so, entry) = (p.stride_out, device::softmax_backward_split);
        launch.enqueue(entry(dx_ptr, dy_ptr, y_ptr, parts, arrived, m, n, so, sdy, sy, ct, chunks), stream)?;
    }
    ws.free()
}

/// The lagged form: the same workspace with the ticket counter after the row tiles' counters
/// (`ffi_util::ticket_workspace`), row tiles x chunks + lag tile blocks.
fn launch_lagged<T: Element>(
    p: &Plan, s: &Split, out: &TensorDesc, dy: &TensorDesc, y: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let RowPlan { m, n, stride_x: sy, stride_y: sdy, rows, .. } = p.row;
    let row_tiles = p.row.row_tiles();
    let (arrived, ticket, [parts], ws) = ffi_util::ticket_workspace::<1>(row_tiles, rows, s.chunks, stream)?;
    // a lag past the chunks there are would only add idle tickets: capped (still >= chunks)
    let lag = s.lag.min(row_tiles * s.chunks).max(s.chunks);
    let mut launch = p.row.launch::<T>((row_tiles * s.chunks + lag) as u32);
    launch.generics.push(s.parts.to_string()); // PARTS
    let (ct, chunks) = (s.chunk_tiles, s.chunks);
    // SAFETY: plan() checked the descriptors and lag (>= chunks, tickets within i32); the workspace
    // holds row_tiles counters and the ticket counter (cleared on the stream) and at least
    // (row_tiles * rows) x chunks f32 partials, and outlives the kernel (freed in stream order); the grid has one tile
    // block per ticket.
    unsafe {
        let [dx_ptr, dy_ptr, y_ptr] = [out, dy, y].map(|t| ffi_util::device_ptr::<T>(t));
        let (so, entry) = (p.stride_out, device::softmax_backward_lagged);
        launch.enqueue(
            entry(dx_ptr, dy_ptr, y_ptr, parts, arrived, ticket, m, n, so, sdy, sy, ct, chunks, lag),
            stream,
        )?;
    }
    ws.free()
}

// `cutile_softmax_backward`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_softmax_backward(out, dy, y; block: i32, rows: i32, occupancy: i32, warps: i32, chunk: i32, lag: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and both forms of the entry lowered to Tile IR for sm_90 (then assembled by
    //! tileiras when it is there) for every dtype.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, test_desc as desc2, DType, DeviceModule};

    #[test]
    fn plan_takes_whole_rows_then_column_tiles() {
        let (y, dy) = (desc2(DType::BF16, &[257, 4097], &[4104, 1]), desc2(DType::BF16, &[257, 4097], &[4097, 1]));
        let p = plan(&dy, &dy, &y, -1, -1, -1, -1, -1, 0).unwrap();
        assert_eq!((p.row.block, p.row.rows, p.row.stride_x, p.row.stride_y), (8192, 1, 4104, 4097));
        let wide = desc2(DType::F32, &[3, 128256], &[128256, 1]);
        let p = plan(&wide, &wide, &wide, -1, -1, -1, -1, -1, 0).unwrap();
        assert_eq!((p.row.block, p.row.rows), (LOOPED_BLOCK, 1));
        // the default split of a vocabulary row: 32 column tiles of 4096 (the last ragged) in 8
        // chunks of 4, taken where the GPU has the SMs (not required)
        let split = Split { chunk_tiles: 4, chunks: 8, parts: 8, required: false, lag: 0 };
        assert_eq!(p.split, Some(split));
        // rows held whole, and chunk 0, never split
        assert_eq!(plan(&dy, &dy, &y, -1, -1, -1, -1, -1, 0).unwrap().split, None);
        assert_eq!(plan(&wide, &wide, &wide, -1, -1, -1, -1, 0, 0).unwrap().split, None);
        // an asked-for chunk: 151936 columns in 2048-wide tiles, chunks of 4 tiles: 19 chunks, 32 parts
        let qwen = desc2(DType::BF16, &[2, 151936], &[151936, 1]);
        let s = plan(&qwen, &qwen, &qwen, 2048, 1, -1, -1, 8192, 0).unwrap().split.unwrap();
        assert_eq!((s.chunk_tiles, s.chunks, s.parts, s.required), (4, 19, 32, true));
        let small = desc2(DType::F16, &[100, 100], &[100, 1]);
        assert_eq!(plan(&small, &small, &small, -1, -1, -1, -1, -1, 0).unwrap().row.rows, 32);
    }

    #[test]
    fn a_lag_runs_a_split_lagged_and_needs_a_chunk_per_ticket_of_distance() {
        let wide = desc2(DType::BF16, &[4096, 128256], &[128256, 1]);
        // 2-tile chunks of 4096: 16 a row; lag 256 tickets
        let s = plan(&wide, &wide, &wide, 4096, 1, 4, 8, 8192, 256).unwrap().split.unwrap();
        assert_eq!((s.chunk_tiles, s.chunks, s.parts, s.lag), (2, 16, 16, 256));
        // the default chunk lags too; rows it does not split ignore the lag
        assert_eq!(plan(&wide, &wide, &wide, -1, -1, -1, -1, -1, 64).unwrap().split.unwrap().lag, 64);
        let narrow = desc2(DType::F32, &[8, 4096], &[4096, 1]);
        assert_eq!(plan(&narrow, &narrow, &narrow, -1, -1, -1, -1, -1, 64).unwrap().split, None);
        // a lag under the row's chunks, a negative one, a lag without a split, tickets past i32
        let message = "must be at least the 16 chunks of a row; take lag >= 16";
        assert_fails(plan(&wide, &wide, &wide, 4096, 1, -1, -1, 8192, 15), rc::INVALID_ARGUMENT, message);
        assert_fails(plan(&wide, &wide, &wide, 4096, 1, -1, -1, 8192, -1), rc::INVALID_ARGUMENT, "must be >= 0");
        assert_fails(plan(&wide, &wide, &wide, 4096, 1, -1, -1, 0, 256), rc::INVALID_ARGUMENT, "a lag needs a split");
        let tall = desc2(DType::BF16, &[1 << 29, 40000], &[40000, 1]);
        assert_fails(plan(&tall, &tall, &tall, 4096, 1, -1, -1, 8192, 256), rc::INVALID_ARGUMENT, "pass i32");
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let y = desc2(DType::F32, &[4, 16], &[16, 1]);
        let other = desc2(DType::F32, &[4, 8], &[8, 1]);
        assert_fails(plan(&y, &other, &y, -1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, "shape");
        assert_fails(plan(&other, &y, &y, -1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, "shape");
        assert_fails(plan(&y, &y, &y, 24, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, "power of two");
        assert_fails(plan(&y, &y, &y, 16384, 2, -1, -1, -1, 0), rc::INVALID_ARGUMENT, "block*rows <= 16384");
        let overlapping = desc2(DType::F32, &[4, 16], &[8, 1]);
        assert_fails(plan(&y, &overlapping, &y, -1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, "rows would overlap");
        assert_fails(plan(&y, &y, &y, -1, -1, -1, 6, -1, 0), rc::INVALID_ARGUMENT, "warps");
        // a chunk that is no multiple of block, a split of rows held whole, more chunks than MAX_PARTS
        let wide = desc2(DType::BF16, &[2, 128256], &[128256, 1]);
        let message = "multiple of block=4096 with block < n=128256 (or 0: no split, -1: the default)";
        assert_fails(plan(&wide, &wide, &wide, 4096, 1, -1, -1, 6000, 0), rc::INVALID_ARGUMENT, message);
        assert_fails(plan(&y, &y, &y, 16, 1, -1, -1, 16, 0), rc::INVALID_ARGUMENT, "block < n");
        assert_fails(plan(&wide, &wide, &wide, 1024, 1, -1, -1, 1024, 0), rc::INVALID_ARGUMENT, "past 64");
    }

    #[test]
    fn both_forms_lower_to_tile_ir_for_sm90() {
        let device = DeviceModule { ast: device::__module_ast_self, name: "softmax_backward_device" };
        for dtype in ["f32", "f16", "bf16"] {
            let forms = [("1", "8192", "false"), ("2", "1024", "false"), ("4", "16", "false"), ("1", "16384", "false")];
            for (rows, block, looped) in forms.into_iter().chain([("1", "4096", "true"), ("2", "2048", "true")]) {
                device.assert_lowers("softmax_backward_rows", &[dtype, rows, block, looped], &["reduce"]);
            }
            // the split: one row or two a tile block, 4 to 64 partials
            // (one-tile chunks held in registers: HELD)
            for (rows, block, parts, held) in [
                ("1", "4096", "4", "false"),
                ("2", "2048", "32", "false"),
                ("1", "4096", "64", "false"),
                ("1", "4096", "32", "true"),
            ] {
                device.assert_lowers("softmax_backward_split", &[dtype, rows, block, parts, held], &["atomic_rmw"]);
            }
            // the lagged split: the ticket, the arrival and the poll are atomics
            for (rows, block, parts) in [("1", "4096", "16"), ("2", "2048", "64")] {
                device.assert_lowers("softmax_backward_lagged", &[dtype, rows, block, parts], &["atomic_rmw"]);
            }
        }
    }

    /// Both splits as the launcher compiles them for the vocabulary rows (16-byte-aligned pointers,
    /// n and strides divisible by 16 where they are, the autotune candidates' hints), so
    /// TILEKIT_CUBIN_DIR dumps what the GPU runs (NOTES.md has their machine code).
    #[test]
    fn the_splits_lower_as_launched() {
        use crate::ffi_util::{div_hints, ALIGNED_PTR};
        let device = DeviceModule { ast: device::__module_ast_self, name: "softmax_backward_device" };
        for (dtype, m, n, chunk_tiles) in
            [("bf16", 4096, 128256, 2), ("bf16", 2048, 151936, 4), ("f32", 4096, 128256, 2)]
        {
            let chunks = (n + 4096 * chunk_tiles - 1) / (4096 * chunk_tiles);
            let parts = (chunks as u32).next_power_of_two().to_string();
            let ptrs =
                [("dx_ptr", ALIGNED_PTR), ("dy_ptr", ALIGNED_PTR), ("y_ptr", ALIGNED_PTR), ("parts", ALIGNED_PTR)];
            let mut ptrs: Vec<(&str, u64)> = ptrs.to_vec();
            ptrs.extend([("arrived", ALIGNED_PTR), ("ticket", ALIGNED_PTR + 16 * 1024)]);
            let strides = [("m", m), ("n", n), ("stride_dx", n), ("stride_dy", n), ("stride_y", n)];
            let ints = [&strides[..], &[("chunk_tiles", chunk_tiles), ("chunks", chunks), ("lag", 256)]].concat();
            let options = || ffi_util::compile_options(Some(4), Some(8));
            let what = format!(" for {m}x{n} in {chunk_tiles}-tile chunks");
            let split_ptrs: Vec<(&str, u64)> = ptrs.iter().copied().filter(|(p, _)| *p != "ticket").collect();
            let split_ints: Vec<(&str, i32)> = ints.iter().copied().filter(|(i, _)| *i != "lag").collect();
            let generics = [dtype, "1", "4096", &parts];
            let split_hints = div_hints(&split_ptrs, &split_ints);
            device.lower(
                "softmax_backward_split",
                &[dtype, "1", "4096", &parts, "false"],
                &split_hints,
                options(),
                &what,
            );
            let ir = device.lower("softmax_backward_lagged", &generics, &div_hints(&ptrs, &ints), options(), &what);
            // the ticket, the arrival (release) and the poll (acquire): atomics, no polling load
            for needle in ["atomic_rmw_tko relaxed", "atomic_rmw_tko release", "atomic_rmw_tko acquire"] {
                assert!(ir.contains(needle), "softmax_backward_lagged{what}: no {needle} in the IR");
            }
            assert!(!ir.contains("load_ptr_tko acquire"), "softmax_backward_lagged{what}: a polling load");
        }
    }
}
