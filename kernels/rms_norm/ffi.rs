//! C-ABI launcher of rms_norm: `cutile_rms_norm` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_rms_norm(const TensorDesc* out, const TensorDesc* x, const TensorDesc* weight,
//!                           float eps, int32_t block, int32_t rows, int32_t occupancy,
//!                           int32_t programs, int32_t tail, int32_t warps, int32_t form,
//!                           int32_t device_id, uint64_t stream);
//!
//! x and out are (m, n) with the same shape and dtype (f32, f16 or bf16), contiguous last dim, any
//! row stride >= n; weight is (n,) contiguous, same dtype. `block` is the tile width (a power of
//! two; n <= block selects the one-load kernel, else the two-pass one) and `rows` the rows per
//! tile block; `occupancy` the CTAs per SM tileiras should plan registers for (1..=32), `warps`
//! the worker warps per CTA (4 or 8, softmax's hint). -1 for any of them picks the default (the
//! compiler's, for occupancy and warps). `programs` > 0 (with n <= block,
//! or n <= block + tail) launches the persistent kernel on that many tile blocks (the caller sizes it from the SM count);
//! -1 or 0 launches one tile block per row tile; -2 (POINTER_ENTRIES) too, through the
//! pointer-tile entries even where the tile divides (m, n) (where their i32 offsets fit):
//! straight-line loads from the first instructions, for decode-sized m (NOTES.md); where a
//! whole-row tile divides (m, n) (n = block, m a multiple of rows), through their unmasked form
//! (`rms_norm_row_exact`: no masks, the mean as a product by an exact 1 / n). `tail` > 0 (a
//! power of two in [16, block], with block < n <= block + tail) holds each row whole as a
//! block-wide body tile and a tail-wide tail tile (`rms_norm_row_tail`; fewer idle lanes than the
//! power of two above n), one tile block per row tile or, with `programs` > 0, persistent; with
//! `programs` = -2 through pointer tiles (`rms_norm_row_tail_masked`, where the offsets up to the
//! tail's last lane fit i32; else `rms_norm_row_tail`); -1 or 0: no tail. `form` 1 with a tail and
//! `programs` > 0 runs the persistent tail through pointer tiles, loading the next row tile ahead
//! (`rms_norm_row_tail_prefetch`, where the offsets up to the tail's last lane fit i32; else the
//! persistent `rms_norm_row_tail`); -1 or 0 the other entries; anything else is refused.
//!
//! With no tail, rows that do not start or end on a 16-byte boundary (n = 4097, odd row
//! strides) run `rms_norm_row_aligned` where `ffi_util::aligned_rows_vec` allows it (16-byte-aligned
//! bases, the same head per row in x and out; its body fits `block`, so n = 4097 fits 4096), one
//! tile block per row tile whatever `programs` (-1, 0, -2) said, or with `programs` > 0
//! `rms_norm_row_aligned_persistent` on a grid rounded down to a multiple of VEC tile blocks
//! ([`aligned_grid`], at most `ffi_util::restage_grid_cap`), with a workspace of grid x rows x
//! block elements on the caller's stream (each tile block restages w there into x's layout; freed
//! in stream order). A `programs` > 0 whose row does not fit `block` but whose aligned body would
//! (4097 in 4096) runs one tile block per row tile (the masked entries) where the aligned entry
//! cannot run (bases off 16 bytes, different heads): the same variant serves every tensor. Every
//! descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with a
//! message, never a launch.
use super::kernel::rms_norm_device as device;
use crate::ffi_util::{self, check_same_shape, invalid, rc, to_i32, DType, Element, FfiResult, RowPlan, TensorDesc};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "rms_norm";
/// Largest tile (ROWS * BLOCK elements) a variant may ask for: beyond it registers spill.
const MAX_TILE_ELEMS: i32 = 1 << 16;
/// `programs` value: one tile block per row tile through the pointer-tile entries (masked, or
/// `rms_norm_row_exact` where a whole-row tile divides (m, n): `Plan::exact`).
pub const POINTER_ENTRIES: i32 = -2;

/// A validated launch: sizes as the kernel indexes them (layer_norm's too, with its affine flags).
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    /// The tile, the occupancy and worker-warps hints, the sizes and strides.
    pub row: RowPlan,
    pub eps: f32,
    /// Some(grid): the persistent kernel on min(grid, row tiles) tile blocks (with `aligned`, the
    /// aligned entry's persistent form on [`aligned_grid`] tile blocks).
    pub programs: Option<i32>,
    /// Some(tail): each row held as a `block`-wide body and a `tail`-wide tail tile (block < n <=
    /// block + tail): the tail entries, one tile block per row tile or on `programs`.
    pub tail: Option<i32>,
    /// Not persistent, i32 offsets of the padded tiles, and no tail with a tile that does not divide
    /// (m, n) or `programs` = POINTER_ENTRIES, or a tail with POINTER_ENTRIES: the masked
    /// pointer-tile entries (`rms_norm_row_masked`, `rms_norm_looped_masked`,
    /// `rms_norm_row_tail_masked`) run, or, where `exact` is set too, their unmasked form.
    pub masked: bool,
    /// Some(VEC): no tail, and rows off 16-byte boundaries whose aligned body fits the tile
    /// (`ffi_util::aligned_rows_vec`): the aligned entry (`rms_norm_row_aligned`, or with
    /// `programs` `rms_norm_row_aligned_persistent`) runs instead of the others.
    pub aligned: Option<i32>,
    /// The persistent tail loads the next row tile ahead through pointer tiles
    /// (`rms_norm_row_tail_prefetch`; the variant's `form` 1).
    pub prefetch: bool,
    /// The masked pointer-tile entries would run one whole-row tile per tile block on a tile that
    /// divides (m, n) (n = block, m a multiple of rows; no tail, not aligned): their unmasked form
    /// runs instead (`rms_norm_row_exact`).
    pub exact: bool,
}

/// Whether the masked pointer-tile entries run: the tile leaves a partial tile (where the
/// zero-padded partition loads guard each access in its own branch, NOTES.md) and every offset of
/// the padded tiles of x and y fits i32. Shapes the tile divides keep the partition entries.
pub fn masked_fits(m: i32, n: i32, rows: i32, block: i32, stride_x: i32, stride_y: i32) -> bool {
    (n % block != 0 || m % rows != 0) && pointer_fits(m, n, rows, block, stride_x, stride_y)
}

/// Whether the masked pointer-tile entries may run for any tile: every offset of the padded tiles
/// of x and y fits i32 (asked for with `programs` = POINTER_ENTRIES, where the tile may divide).
pub fn pointer_fits(m: i32, n: i32, rows: i32, block: i32, stride_x: i32, stride_y: i32) -> bool {
    ffi_util::masked_offsets_fit(m, n, rows, block, &[stride_x, stride_y])
}

/// Default variant, from the H200 sweep that shaped spec.py's autotune space: tiles of ~8K
/// elements — the whole row with 8192/n rows per tile block up to n = 8192, else 4096-wide
/// column tiles, 2 rows. (One row per tile block was 3-10x slower.)
pub fn default_block(n: i32) -> i32 {
    ffi_util::whole_row_block(n, 8192).unwrap_or(4096)
}

/// ~8K elements per tile, but no more rows than m has (rounded up to a power of two) or 64.
pub fn default_rows(block: i32, m: i32) -> i32 {
    ffi_util::default_rows(8192, block, m)
}

/// The launch of an (m, n) norm of x into out in `dtype`, shared with layer_norm: eps checked
/// (finite and not negative), the tile (-1: the defaults), the occupancy hint, the persistent grid
/// (`programs` > 0, capped at the row tiles, only with whole rows: n <= block (+ tail), or the
/// aligned entry's body in the tile, [`aligned_grid`] tile blocks, one tile block per row tile where
/// the aligned entry cannot run), the tail tile
/// ([`ffi_util::tail_tile`]), the row strides, whether the masked entries run ([`masked_fits`]),
/// and whether the aligned entry does ([`ffi_util::aligned_rows_vec`]).
#[allow(clippy::too_many_arguments)]
pub fn rows_plan(
    dtype: DType, x: &TensorDesc, out: &TensorDesc, eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32,
    tail: i32, warps: i32, form: i32,
) -> FfiResult<Plan> {
    let m = to_i32(x.shape[0], "m")?;
    let n = to_i32(x.shape[1], "n")?;
    if !eps.is_finite() || eps < 0.0 {
        return Err(invalid(format!("eps={eps} must be finite and >= 0")));
    }
    let (block, rows) = ffi_util::row_tile(block, rows, default_block(n), |b| default_rows(b, m), 64, MAX_TILE_ELEMS)?;
    let occupancy = ffi_util::occupancy_hint(occupancy)?;
    let warps = ffi_util::warps_hint(warps)?;
    let tail = ffi_util::tail_tile(tail, block, rows, n, MAX_TILE_ELEMS)?;
    let pointer = programs == POINTER_ENTRIES;
    let stride_x = ffi_util::row_stride(x, n, "x", format_args!("n={n}"))?;
    let stride_y = ffi_util::row_stride(out, n, "out", format_args!("n={n}"))?;
    let aligned = tail
        .is_none()
        .then(|| ffi_util::aligned_rows_vec(dtype, m, n, rows, block, &[(x.data, stride_x), (out.data, stride_y)]))
        .flatten();
    let whole = n <= block + tail.unwrap_or(0);
    // n past the tile by less than VEC elements (4097 in 4096): whole rows for the aligned entry
    let aligned_whole = tail.is_none() && ffi_util::aligned_body_fits(dtype, n, block);
    let row = RowPlan { block, rows, occupancy, warps, m, n, stride_x, stride_y };
    let row_tiles = row.row_tiles();
    let programs = match (programs, aligned) {
        (rc::COMPILER_DEFAULT | 0 | POINTER_ENTRIES, _) => None,
        (g, Some(vec)) if g > 0 => {
            Some(aligned_grid(g.min(row_tiles).min(ffi_util::restage_grid_cap(rows, block)), row_tiles, vec))
        }
        (g, None) if g > 0 && whole => Some(g.min(row_tiles)),
        // the aligned entry's variant on rows it cannot take (bases off 16 bytes, x and out with
        // different heads): one tile block per row tile, through the masked entries
        (g, None) if g > 0 && aligned_whole => None,
        (g, _) if g > 0 => {
            return Err(invalid(format!(
            "variant programs={g}: the persistent kernel holds whole rows; needs n={n} <= block={block} (plus a tail)"
        )))
        }
        (g, _) => {
            return Err(invalid(format!(
                "variant programs={g}: use > 0 for a persistent grid, -1/0 for one tile block per row tile, or \
                 {POINTER_ENTRIES} for that through the pointer-tile entries"
            )))
        }
    };
    let masked = programs.is_none()
        && match tail {
            None => {
                masked_fits(m, n, rows, block, stride_x, stride_y)
                    || pointer && pointer_fits(m, n, rows, block, stride_x, stride_y)
            }
            // the tail's last lane is column block + tail: round_up(n, tail) (tail divides block)
            Some(t) => pointer && pointer_fits(m, n, rows, t, stride_x, stride_y),
        };
    // form 1 where the pointer tiles' offsets up to the tail's last lane fit i32, else the TMA tail
    let prefetch = match (form, tail) {
        (rc::COMPILER_DEFAULT | 0, _) => false,
        (1, Some(t)) if programs.is_some() => pointer_fits(m, n, rows, t, stride_x, stride_y),
        (f, _) => {
            return Err(invalid(format!(
                "variant form={f}: form 1 is the persistent body-and-tail loop that loads the next row tile ahead; \
                 it needs a tail (block < n <= block + tail) and programs > 0 (n={n}, block={block}, tail={tail:?}); \
                 use 0 or -1 for the other entries"
            )))
        }
    };
    let exact = masked && tail.is_none() && aligned.is_none() && n == block && m % rows == 0;
    Ok(Plan { dtype, row, eps, programs, tail, masked, aligned, prefetch, exact })
}

/// The aligned entry's persistent grid for a requested `grid` (already capped at `row_tiles`): every
/// row tile, or a multiple of VEC tile blocks (at least VEC), so that the row tiles one tile block
/// walks are a multiple of VEC rows apart and all have the heads of its first one, whatever the row
/// stride (`rms_norm_row_aligned_persistent` reads w's columns once, at those heads).
pub fn aligned_grid(grid: i32, row_tiles: i32, vec: i32) -> i32 {
    if grid >= row_tiles {
        row_tiles
    } else {
        (grid / vec * vec).max(vec).min(row_tiles)
    }
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    out: &TensorDesc, x: &TensorDesc, w: &TensorDesc, eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32,
    tail: i32, warps: i32, form: i32,
) -> FfiResult<Plan> {
    let dtype = ffi_util::check_float_tensors(KERNEL, &[(x, "x", 2), (out, "out", 2), (w, "weight", 1)])?;
    check_same_shape(x, "x", out, "out")?;
    if w.shape[0] != x.shape[1] {
        return Err(invalid(format!("`weight` has {} elements but x has n={} columns", w.shape[0], x.shape[1])));
    }
    ffi_util::check_last_dims_contiguous(&[(x, "x"), (out, "out"), (w, "weight")])?;
    rows_plan(dtype, x, out, eps, block, rows, occupancy, programs, tail, warps, form)
}

fn launch<T: Element>(
    p: &Plan, out: &TensorDesc, x: &TensorDesc, w: &TensorDesc, stream: &Arc<Stream>,
) -> FfiResult<()> {
    let (y_ptr, x_ptr, w_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(out), ffi_util::device_ptr::<T>(x), ffi_util::device_ptr::<T>(w)) };
    // One tile block per row tile, or the persistent grid plan() capped at the row tiles; the tail
    // entry's TAIL after T, ROWS, BLOCK.
    let grid = p.programs.unwrap_or(p.row.row_tiles());
    let mut launch = p.row.launch::<T>(grid as u32);
    launch.generics.extend(p.tail.map(|t| t.to_string()));
    launch.generics.extend(ffi_util::aligned_generics(p.aligned));
    let RowPlan { m, n, stride_x: sx, stride_y: sy, .. } = p.row;
    let eps = p.eps;
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    // The masked entries additionally rely on plan()'s `masked_fits` / `pointer_fits` (i32 offsets),
    // the exact one also on `Plan::exact` (n = block, m a multiple of rows: every tile inside),
    // the aligned ones on `aligned_rows_vec` (i32 offsets, 16-byte-aligned bases); the aligned
    // persistent one also on its workspace (w): allocated here on the caller's stream for exactly
    // the grid launched (a 16-byte-aligned slice per tile block: block >= 16), its slice offsets in
    // i32 (`restage_grid_cap` in plan()), freed in stream order after the kernel.
    unsafe {
        if p.prefetch {
            launch.enqueue(device::rms_norm_row_tail_prefetch(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if p.tail.is_some() && p.masked {
            launch.enqueue(device::rms_norm_row_tail_masked(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if p.tail.is_some() {
            launch.enqueue(device::rms_norm_row_tail(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if p.aligned.is_some() && p.programs.is_some() {
            // each tile block's w at its rows' body columns, ROWS x BLOCK elements (device_util::views::restage)
            let ws =
                ffi_util::StreamAlloc::new(ffi_util::restage_bytes::<T>(grid, &p.row), stream, "weight workspace")?;
            let ws_ptr = DevicePointer::<T>::from_cu_deviceptr(ws.ptr);
            let entry = device::rms_norm_row_aligned_persistent(y_ptr, x_ptr, w_ptr, ws_ptr, m, n, sx, sy, eps);
            launch.enqueue(entry, stream)?;
            ws.free()
        } else if p.aligned.is_some() {
            launch.enqueue(device::rms_norm_row_aligned(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if p.programs.is_some() {
            launch.enqueue(device::rms_norm_row_persistent(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if p.exact {
            launch.enqueue(device::rms_norm_row_exact(y_ptr, x_ptr, w_ptr, sx, sy, 1.0 / n as f32, eps), stream)
        } else if p.masked && n <= p.row.block {
            launch.enqueue(device::rms_norm_row_masked(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if p.masked {
            launch.enqueue(device::rms_norm_looped_masked(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else if n <= p.row.block {
            launch.enqueue(device::rms_norm_row(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        } else {
            launch.enqueue(device::rms_norm_looped(y_ptr, x_ptr, w_ptr, m, n, sx, sy, eps), stream)
        }
    }
}

// `cutile_rms_norm`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_rms_norm(out, x, weight; eps: f32, block: i32, rows: i32, occupancy: i32, programs: i32, tail: i32, warps: i32, form: i32));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, and both entries lowered to Tile IR for sm_90 (stage 1 of
    //! the JIT, which needs no GPU) for every dtype — a DSL mistake fails here, not on the GPU.
    use super::*;
    use crate::ffi_util::{assert_fails, test_desc as desc2, test_rows, DeviceModule, ALIGNED_PTR};
    use cutile::tile_kernel::CompileOptions;

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "rms_norm_device" };

    #[test]
    fn plan_takes_row_strides_and_defaults() {
        let x = desc2(DType::F16, &[257, 4097], &[5000, 1]);
        let (y, w) = test_rows(DType::F16, 257, 4097);
        let Plan { dtype, row, eps, programs, tail, masked, aligned, prefetch, exact } =
            plan(&y, &x, &w, 1e-6, -1, -1, -1, -1, -1, -1, 0).unwrap();
        assert_eq!((dtype, eps, programs, tail, masked, prefetch), (DType::F16, 1e-6, None, None, true, false));
        assert!(!exact); // 4097 in 8192 lanes: masked
        assert_eq!(aligned, None); // x's rows start 16-byte aligned, y's not: different heads
        assert_eq!((row.m, row.n, row.stride_x, row.stride_y), (257, 4097, 5000, 4097));
        assert_eq!((row.block, row.rows, row.occupancy, row.warps), (8192, 1, None, None));
        assert_eq!(plan(&y, &x, &w, 1e-6, 1024, -1, -1, -1, -1, -1, 0).unwrap().row.rows, 8);
        assert_eq!(default_rows(16, 1000), 64);
        assert_eq!(default_rows(16, 3), 4);
        assert_eq!(plan(&y, &x, &w, 1e-6, 16384, 2, 4, -1, -1, -1, 0).unwrap().row.occupancy, Some(4));
        assert_eq!(default_block(16384), 4096);
        assert_eq!(default_block(1), 16);
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (x, w) = test_rows(DType::F32, 4, 8);
        let cases = [
            (desc2(DType::F32, &[4, 9], &[9, 1]), w, 16, "shape"),
            (x, desc2(DType::F32, &[7], &[1]), 16, "weight"),
            (desc2(DType::F32, &[4, 8], &[1, 4]), w, 16, "contiguous"),
            (desc2(DType::F32, &[4, 8], &[4, 1]), w, 16, "overlap"),
            (x, w, 24, "power of two"),
            (x, w, -2, "power of two"),
        ];
        for (out, w, block, needle) in cases {
            assert_fails(plan(&out, &x, &w, 1e-6, block, 1, -1, -1, -1, -1, 0), rc::INVALID_ARGUMENT, needle);
        }
    }

    #[test]
    fn plan_rejects_integer_dtype_as_unsupported() {
        let (x, w) = test_rows(DType::I32, 4, 8);
        assert_fails(
            plan(&x, &x, &w, 1e-6, -1, -1, -1, -1, -1, -1, 0),
            rc::UNSUPPORTED_DTYPE,
            "rms_norm supports f32, f16, bf16",
        );
    }

    #[test]
    fn plan_checks_the_occupancy_and_warps_hints() {
        let (x, w) = test_rows(DType::F32, 4, 8);
        ffi_util::assert_hints_checked(true, |occupancy, warps| {
            plan(&x, &x, &w, 1e-6, -1, -1, occupancy, -1, -1, warps, 0)
        });
        assert_eq!(plan(&x, &x, &w, 1e-6, -1, -1, -1, -1, -1, 8, 0).unwrap().row.warps, Some(8));
        assert_eq!(plan(&x, &x, &w, 1e-6, -1, -1, -1, -1, -1, -1, 0).unwrap().row.warps, None);
    }

    #[test]
    fn plan_caps_the_persistent_grid_at_the_row_tiles_and_needs_whole_rows() {
        let (x, w) = test_rows(DType::F16, 100, 1000);
        assert_eq!(plan(&x, &x, &w, 1e-6, 1024, 8, 4, 528, -1, -1, 0).unwrap().programs, Some(13)); // ceil(100 / 8)
        assert_eq!(plan(&x, &x, &w, 1e-6, 1024, 8, 4, 0, -1, -1, 0).unwrap().programs, None);
        assert_fails(
            plan(&x, &x, &w, 1e-6, 512, 8, 4, 528, -1, -1, 0),
            rc::INVALID_ARGUMENT,
            "needs n=1000 <= block=512",
        );
    }

    #[test]
    fn pointer_entries_on_request_where_their_offsets_fit() {
        let (x, w) = test_rows(DType::BF16, 256, 4096);
        let p = plan(&x, &x, &w, 1e-6, 4096, 1, 4, POINTER_ENTRIES, -1, -1, 0).unwrap();
        assert_eq!((p.masked, p.exact, p.programs, p.row.rows), (true, true, None, 1)); // the tile divides: unmasked
        assert!(!plan(&x, &x, &w, 1e-6, 4096, 1, 4, 0, -1, -1, 0).unwrap().masked); // the tile divides
        assert!(!pointer_fits(131072, 16384, 1, 16384, 16384, 16384)); // 2^31 elements: partition entries
        let (big, wb) = test_rows(DType::BF16, 131072, 16384);
        assert!(!plan(&big, &big, &wb, 1e-6, 16384, 1, 4, POINTER_ENTRIES, -1, -1, 0).unwrap().masked);
        assert_fails(plan(&x, &x, &w, 1e-6, 4096, 1, 4, -3, -1, -1, 0), rc::INVALID_ARGUMENT, "or -2 for that");
    }

    /// The exact entry: a pointer variant whose one whole-row tile divides (m, n); anything that
    /// leaves a partial tile (columns or rows), a tail, a wider tile or a persistent grid keeps its
    /// entry.
    #[test]
    fn exact_entry_only_where_the_pointer_tile_divides() {
        let exact = |m: i64, n: i64, block: i32, rows: i32, programs: i32, tail: i32| {
            let (x, w) = test_rows(DType::BF16, m, n);
            plan(&x, &x, &w, 1e-6, block, rows, 2, programs, tail, -1, 0).unwrap().exact
        };
        assert!(exact(256, 4096, 4096, 1, POINTER_ENTRIES, -1));
        assert!(exact(256, 2048, 2048, 2, POINTER_ENTRIES, -1));
        assert!(!exact(255, 2048, 2048, 2, POINTER_ENTRIES, -1)); // a partial row tile
        assert!(!exact(256, 4000, 4096, 1, POINTER_ENTRIES, -1)); // a partial column tile
        assert!(!exact(256, 4096, 8192, 1, POINTER_ENTRIES, -1)); // the tile is wider than the row
        assert!(!exact(256, 8192, 4096, 1, POINTER_ENTRIES, -1)); // looped
        assert!(!exact(256, 4096, 4096, 1, 0, -1)); // no pointer variant: the partition entry
        assert!(!exact(256, 4096, 4096, 1, 264, -1)); // persistent
        assert!(!exact(256, 5120, 4096, 1, POINTER_ENTRIES, 1024)); // a tail
        let odd = desc2(DType::BF16, &[256, 4096], &[4097, 1]); // rows off 16 bytes: the aligned entry
        let w = desc2(DType::BF16, &[4096], &[1]);
        let p = plan(&odd, &odd, &w, 1e-6, 4096, 1, 2, POINTER_ENTRIES, -1, -1, 0).unwrap();
        assert_eq!((p.aligned, p.exact), (Some(8), false));
    }

    #[test]
    fn tail_tiles_cover_the_row_past_a_full_body() {
        let (x, w) = test_rows(DType::BF16, 100, 11008);
        let p = plan(&x, &x, &w, 1e-6, 8192, 1, 2, 264, 4096, -1, 0).unwrap();
        assert_eq!((p.tail, p.programs, p.masked), (Some(4096), Some(100), false));
        let p = plan(&x, &x, &w, 1e-6, 8192, 2, 4, 0, 4096, -1, 0).unwrap();
        assert_eq!((p.tail, p.programs, p.masked), (Some(4096), None, false)); // partial row tile: no mask
        assert_eq!(plan(&x, &x, &w, 1e-6, 16384, 1, 4, 0, 0, -1, 0).unwrap().tail, None);
        for (block, rows, tail, why) in [
            (8192, 1, 2048, "block < n=11008 <= block + tail"), // the row does not fit
            (16384, 1, 4096, "block < n=11008"),                // no body-sized part past the body
            (8192, 1, 24, "power of two"),
            (4096, 1, 8192, "[16, block]"),
            (8192, 8, 4096, "rows * (block + tail)"),
        ] {
            assert_fails(plan(&x, &x, &w, 1e-6, block, rows, 4, 0, tail, -1, 0), rc::INVALID_ARGUMENT, why);
        }
        // through pointer tiles on request, one tile block per row tile; past i32 offsets the TMA tail entry
        let p = plan(&x, &x, &w, 1e-6, 8192, 1, 4, POINTER_ENTRIES, 4096, -1, 0).unwrap();
        assert_eq!((p.tail, p.programs, p.masked), (Some(4096), None, true));
        let tall = desc2(DType::BF16, &[200000, 11008], &[11008, 1]);
        let p = plan(&tall, &tall, &w, 1e-6, 8192, 1, 4, POINTER_ENTRIES, 4096, -1, 0).unwrap();
        assert_eq!((p.tail, p.masked), (Some(4096), false));
        // the i32 bound at the tail's last lane (column block + tail = 12288 of the last row)
        let at = |m: i64| desc2(DType::BF16, &[m, 11008], &[11008, 1]);
        let masked_at = |x: &TensorDesc| plan(x, x, &w, 1e-6, 8192, 1, 4, POINTER_ENTRIES, 4096, -1, 0).unwrap().masked;
        assert!(masked_at(&at(195083))); // (m - 1) * 11008 + 12288 <= i32::MAX
        assert!(!masked_at(&at(195084))); // one row more: the TMA tail entry
        assert_fails(plan(&x, &x, &w, 1e-6, 4096, 1, 4, 264, 0, -1, 0), rc::INVALID_ARGUMENT, "plus a tail");
    }

    #[test]
    fn masked_entries_only_for_partial_tiles_with_i32_offsets() {
        assert!(masked_fits(4096, 11008, 1, 16384, 11008, 11008)); // whole row, padded columns
        assert!(masked_fits(4096, 18944, 2, 4096, 18944, 18944)); // looped, partial last column tile
        assert!(masked_fits(37, 4096, 2, 4096, 4096, 4096)); // partial row tile
        assert!(!masked_fits(4096, 4096, 2, 4096, 4096, 4096)); // whole tiles: partition entries
        assert!(!masked_fits(131072, 16385, 1, 32768, 16385, 16385)); // x spans 2^31 elements
        let (x, w) = test_rows(DType::F16, 100, 1000);
        assert!(plan(&x, &x, &w, 1e-6, 1024, 8, 4, -1, -1, -1, 0).unwrap().masked);
        // the persistent kernel, not the masked entries
        assert!(!plan(&x, &x, &w, 1e-6, 1024, 8, 4, 528, -1, -1, 0).unwrap().masked);
    }

    #[test]
    fn aligned_entry_for_rows_off_16_byte_boundaries_one_tile_block_per_row_tile() {
        let (x, w) = test_rows(DType::F16, 257, 4097);
        let p = plan(&x, &x, &w, 1e-6, 8192, 1, 5, POINTER_ENTRIES, -1, -1, 0).unwrap();
        let generics: Vec<String> = ffi_util::aligned_generics(p.aligned).collect();
        assert_eq!((p.aligned, generics), (Some(8), vec!["8".into(), "16".into()]));
        assert_eq!(plan(&x, &x, &w, 1e-6, 8192, 1, 4, -1, -1, -1, 0).unwrap().aligned, Some(8));
        assert_eq!(plan(&x, &x, &w, 1e-6, 4096, 1, 4, -1, -1, -1, 0).unwrap().aligned, Some(8)); // 4097 in 4096 lanes
        assert_eq!(plan(&x, &x, &w, 1e-6, 4096, 1, 4, 100, -1, -1, 0).unwrap().programs, Some(96)); // multiple of 8
        assert_eq!(plan(&x, &x, &w, 1e-6, 4096, 1, 4, -1, 16, -1, 0).unwrap().aligned, None); // tail
        let (whole, w4096) = test_rows(DType::F16, 257, 4096);
        assert_eq!(plan(&whole, &whole, &w4096, 1e-6, 4096, 1, 4, POINTER_ENTRIES, -1, -1, 0).unwrap().aligned, None);
    }

    /// The workspace the aligned persistent entry restages w into: one ROWS x BLOCK slice of T per
    /// tile block of the grid the plan launches (`ws_ptr`'s slice pid * ROWS * BLOCK).
    #[test]
    fn aligned_persistent_workspace_is_a_slice_per_tile_block() {
        let (x, w) = test_rows(DType::F16, 16384, 4097);
        let p = plan(&x, &x, &w, 1e-6, 4096, 1, 5, 660, -1, -1, 0).unwrap();
        assert_eq!((p.aligned, p.programs), (Some(8), Some(656)));
        assert_eq!(ffi_util::restage_bytes::<cutile::half::f16>(p.programs.unwrap(), &p.row), 656 * 4096 * 2);
        let p2 = plan(&x, &x, &w, 1e-6, 4096, 2, 4, 100, -1, -1, 0).unwrap();
        assert_eq!(ffi_util::restage_bytes::<cutile::half::f16>(p2.programs.unwrap(), &p2.row), 96 * 2 * 4096 * 2);
        // whatever `programs` asks for, the slice offsets stay in i32 (layer_norm's two slices too):
        // 2^26 elements a vector at most, the grid still a multiple of VEC
        let tall = desc2(DType::F16, &[1 << 18, 4097], &[4097, 1]);
        for (rows, block) in [(1, 4096), (1, 8192), (16, 4096)] {
            let grid = plan(&tall, &tall, &w, 1e-6, block, rows, 4, i32::MAX, -1, -1, 0).unwrap().programs.unwrap();
            assert!(grid <= ffi_util::restage_grid_cap(rows, block) && grid % 8 == 0, "{rows} x {block}: {grid}");
            assert!(2 * grid as i64 * (rows * block) as i64 <= i32::MAX as i64);
        }
    }

    /// The worker-warps hint reaches the norms' IR and tileiras 13.4 accepts it (softmax's test).
    #[test]
    fn warps_hint_lowers_and_assembles_for_sm90() {
        let options = ffi_util::compile_options(Some(4), Some(8));
        let ir = DEVICE.lower("rms_norm_row_masked", &["bf16", "1", "4096"], &[], options, " with 8 warps");
        assert!(ir.contains("num_worker_warps_per_cta = 8"), "hint missing from the IR:\n{ir}");
    }

    #[test]
    fn aligned_persistent_grid_keeps_each_tile_blocks_heads() {
        assert_eq!(aligned_grid(792, 16384, 8), 792); // 6 x 132 SMs: already a multiple of 8
        assert_eq!(aligned_grid(100, 16384, 8), 96);
        assert_eq!(aligned_grid(3, 16384, 4), 4); // at least VEC
        assert_eq!(aligned_grid(5, 6, 8), 6); // VEC past the row tiles: one row tile each
        assert_eq!(aligned_grid(257, 257, 8), 257); // every row tile

        // every row a tile block walks (pid + k * grid, ROWS rows each) starts with its first's head
        for vec in [4, 8] {
            for (m, rows, stride) in [(16384, 1, 4097), (1201, 2, 4099), (257, 3, 1001), (37, 1, 4097)] {
                let row_tiles = (m + rows - 1) / rows;
                for requested in [1, 3, 100, 132, 528, 792, 5000] {
                    let grid = aligned_grid(requested.min(row_tiles), row_tiles, vec);
                    let head = |row: i32| (vec - row * stride % vec) % vec;
                    for pid in 0..grid {
                        let walked = (pid..row_tiles).step_by(grid as usize);
                        assert!(walked
                            .into_iter()
                            .all(|t| (0..rows).all(|r| head(t * rows + r) == head(pid * rows + r))));
                    }
                }
            }
        }
        let (x, w) = test_rows(DType::BF16, 257, 4097);
        let p = plan(&x, &x, &w, 1e-6, 4096, 1, 4, 132, -1, -1, 0).unwrap();
        assert_eq!((p.aligned, p.programs, p.masked), (Some(8), Some(128), false));
        assert_eq!(plan(&x, &x, &w, 1e-6, 4096, 1, 4, 1000, -1, -1, 0).unwrap().programs, Some(257));
    }

    #[test]
    fn aligned_entry_lowers_and_assembles_for_sm90() {
        for (entry, ptrs) in [
            ("rms_norm_row_aligned", &["y_ptr", "x_ptr", "w_ptr"][..]),
            ("rms_norm_row_aligned_persistent", &["y_ptr", "x_ptr", "w_ptr", "ws_ptr"]),
        ] {
            // f16 1 x 4096: the tile autotune picks at 16384 x 4097 (NOTES.md has its SASS)
            for (dtype, rows, block) in [("f16", "1", "4096"), ("bf16", "2", "4096"), ("f32", "1", "4096")] {
                DEVICE.assert_aligned_lowers(entry, dtype, rows, block, &[], ptrs);
            }
        }
    }

    /// The specializations the H200's autotune picked for the f16 perf configs, compiled as the
    /// launcher compiles them at run time: every pointer and integer argument carries its
    /// divisibility (16-byte-aligned pointers, sizes and strides divisible by 16), so tileiras can
    /// emit 16-byte loads. (The unhinted tests above load element by element.)
    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        for (entry, rows, block, m, n, occupancy) in [
            ("rms_norm_row", "8", "1024", 262144, 1024, 4),
            ("rms_norm_row", "2", "4096", 262144, 4096, 4),
            ("rms_norm_row_persistent", "1", "16384", 65536, 16384, 4),
            // n the tile does not divide (issue 13): the masked entries (predicated 16-byte
            // loads where n divides by 8, 2-byte ones at n = 4097), and the partition entries
            // as they ran there before, for the SASS comparison.
            ("rms_norm_row", "1", "16384", 4096, 11008, 4),
            ("rms_norm_row_masked", "1", "16384", 4096, 11008, 4),
            ("rms_norm_row_masked", "1", "16384", 4096, 13824, 4),
            ("rms_norm_row", "1", "8192", 4096, 4097, 4),
            ("rms_norm_row_masked", "1", "8192", 4096, 4097, 4),
            ("rms_norm_looped", "2", "4096", 4096, 11008, 4),
            ("rms_norm_looped_masked", "2", "4096", 4096, 11008, 4),
            ("rms_norm_looped_masked", "2", "4096", 4096, 18944, 4),
            // The body-and-tail tiles of the same n: 8192 + 4096 and 16384 + 4096 lanes (the
            // TAIL generic follows BLOCK).
            ("rms_norm_row_tail", "1", "8192/4096", 4096, 11008, 2),
            ("rms_norm_row_tail", "1", "16384/4096", 4096, 18944, 2),
            ("rms_norm_row_tail", "1", "4096/1024", 4096, 5120, 4),
            // ... and through pointer tiles (NOTES.md, "A body and a tail through pointer tiles")
            ("rms_norm_row_tail_masked", "1", "16384/4096", 16384, 18944, 2),
            ("rms_norm_row_tail_masked", "1", "16384/4096", 16384, 18944, 3),
            ("rms_norm_row_tail_masked", "1", "8192/4096", 16384, 11008, 4),
            // The pointer-tile entries autotune picks at large batches now (NOTES.md, "Pointer tiles
            // for every batch"), beside the partition entry they beat.
            ("rms_norm_row", "1", "8192", 65536, 8192, 4),
            ("rms_norm_row_masked", "1", "8192", 65536, 8192, 4),
            ("rms_norm_looped_masked", "1", "8192", 16384, 18944, 4),
            ("rms_norm_row_masked", "1", "16384", 65536, 16384, 2),
            ("rms_norm_row_masked", "1", "16384", 65536, 16384, 3),
            ("rms_norm_row_persistent", "1", "16384", 65536, 16384, 2),
            // the decode batch's pick, masked (NOTES.md, "Decode rows without masks")
            ("rms_norm_row_masked", "1", "4096", 256, 4096, 2),
        ] {
            let (generics, options) = (ffi_util::row_generics("f16", rows, block, &[]), CompileOptions::default());
            let note = format!(" at occupancy {occupancy}");
            DEVICE.assert_row_spec_lowers(
                entry,
                &generics,
                &["y_ptr", "x_ptr", "w_ptr"],
                m,
                n,
                options.occupancy(occupancy),
                &note,
            );
        }
    }

    /// The exact entry as the launcher compiles it for the decode batch (bf16 256 x 4096, one-row
    /// tiles at occupancy 2) and a large one (f16 65536 x 8192): no masks, and the mean over BLOCK as
    /// a product (no division sequence; NOTES.md, "Decode rows without masks").
    #[test]
    fn exact_entry_specializations_lower_and_assemble_for_sm90() {
        for (dtype, rows, block, m, n, occupancy) in [
            ("bf16", "1", "4096", 256, 4096, 2),
            ("f16", "1", "8192", 65536, 8192, 4),
            ("f32", "2", "1024", 256, 1024, 4),
        ] {
            let ptrs = [("y_ptr", ALIGNED_PTR), ("x_ptr", ALIGNED_PTR), ("w_ptr", ALIGNED_PTR)];
            let ints = [("stride_x", n), ("stride_y", n)];
            let options = CompileOptions::default().occupancy(occupancy);
            let what = format!(" for {m}x{n} at occupancy {occupancy}");
            let generics = ffi_util::row_generics(dtype, rows, block, &[]);
            DEVICE.assert_div_hints_lower("rms_norm_row_exact", &generics, &ptrs, &ints, options, &what);
        }
        for (rows, block) in [("1", "4096"), ("4", "256")] {
            let ir = DEVICE.assert_lowers("rms_norm_row_exact", &["bf16", rows, block], &["rsqrt", "reduce"]);
            assert!(!ir.contains("divf") && !ir.contains("select"), "a division or a mask in the IR:\n{ir}");
        }
        DEVICE.assert_each_lowers(&["rms_norm_row_exact"], &[("1", "1024"), ("4", "256")], &["rsqrt", "reduce"]);
    }

    #[test]
    fn both_entries_lower_to_tile_ir_for_sm90() {
        for dtype in ["f32", "f16", "bf16"] {
            for (entry, rows, block) in [
                ("rms_norm_row", "1", "1024"),
                ("rms_norm_row", "4", "256"),
                ("rms_norm_row_persistent", "8", "1024"),
                ("rms_norm_looped", "1", "4096"),
                ("rms_norm_looped", "2", "512"),
                ("rms_norm_row_masked", "1", "1024"),
                ("rms_norm_row_masked", "4", "256"),
                ("rms_norm_looped_masked", "1", "4096"),
                ("rms_norm_looped_masked", "2", "512"),
                ("rms_norm_row_tail", "1", "1024/256"),
                ("rms_norm_row_tail", "4", "256/16"),
                ("rms_norm_row_tail_masked", "1", "1024/256"),
                ("rms_norm_row_tail_masked", "4", "256/16"),
                ("rms_norm_row_tail_prefetch", "1", "1024/256"),
                ("rms_norm_row_tail_prefetch", "4", "256/16"),
            ] {
                DEVICE.assert_lowers(entry, &ffi_util::row_generics(dtype, rows, block, &[]), &["rsqrt", "reduce"]);
            }
        }
    }

    #[test]
    fn prefetching_tail_lowers_at_its_candidates() {
        // norm.variants' form 1: 8 warps, occupancy 2 up to 12288 lanes a row tile, 1 past that
        // (NOTES.md, "The next row tile ahead"); bf16 and f16 (the same bytes), and f32 at 11008.
        for (dtype, rows, block, n, occupancy) in [
            ("bf16", "1", "8192/4096", 11008, 2),
            ("f16", "1", "8192/4096", 11008, 2),
            ("bf16", "2", "4096/1024", 5120, 2),
            ("bf16", "1", "16384/4096", 18944, 1),
            ("f32", "1", "8192/4096", 11008, 2),
        ] {
            let (generics, options) =
                (ffi_util::row_generics(dtype, rows, block, &[]), ffi_util::compile_options(Some(occupancy), Some(8)));
            let (entry, note) = ("rms_norm_row_tail_prefetch", format!(" at occupancy {occupancy}, 8 warps"));
            DEVICE.assert_row_spec_lowers(entry, &generics, &["y_ptr", "x_ptr", "w_ptr"], 16384, n, options, &note);
        }
    }

    #[test]
    fn form_1_selects_the_prefetching_tail_where_its_offsets_fit() {
        let (x, w) = test_rows(DType::BF16, 100, 11008);
        let p = plan(&x, &x, &w, 1e-6, 8192, 1, 2, 264, 4096, 8, 1).unwrap();
        assert_eq!((p.tail, p.programs, p.masked, p.prefetch), (Some(4096), Some(100), false, true));
        assert!(!plan(&x, &x, &w, 1e-6, 8192, 1, 2, 264, 4096, 8, 0).unwrap().prefetch);
        assert!(!plan(&x, &x, &w, 1e-6, 8192, 1, 2, 264, 4096, 8, -1).unwrap().prefetch);
        // the i32 bound at the tail's last lane, as the pointer tails': past it the persistent TMA tail
        let at = |m: i64| desc2(DType::BF16, &[m, 11008], &[11008, 1]);
        let prefetch_at = |x: &TensorDesc| plan(x, x, &w, 1e-6, 8192, 1, 2, 264, 4096, 8, 1).unwrap();
        assert!(prefetch_at(&at(195083)).prefetch); // (m - 1) * 11008 + 12288 <= i32::MAX
        let p = prefetch_at(&at(195084));
        assert_eq!((p.prefetch, p.programs, p.tail), (false, Some(264), Some(4096)));
        // no tail, no persistent grid, or another form: refused, naming what form 1 needs
        let needs = "form 1 is the persistent body-and-tail loop that loads the next row tile ahead; it needs a tail";
        let cases = [(16384, 264, 0, 1), (8192, 0, 4096, 1), (8192, POINTER_ENTRIES, 4096, 1), (8192, 264, 4096, 2)];
        for (block, programs, tail, form) in cases {
            let r = plan(&x, &x, &w, 1e-6, block, 1, 2, programs, tail, 8, form);
            assert_fails(r, rc::INVALID_ARGUMENT, &format!("variant form={form}: {needs}"));
        }
    }
}
