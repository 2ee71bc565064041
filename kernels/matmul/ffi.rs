//! C-ABI launchers of matmul: `cutile_matmul` and `cutile_matmul_acc` (declared for Python in
//! op.py's CDEF).
//!
//!   int32_t cutile_matmul(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
//!                         int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
//!                         int32_t occupancy, int32_t num_cta_in_cga, int32_t splits,
//!                         int32_t device_id, uint64_t stream);
//!
//! `cutile_matmul_acc` takes the same arguments and computes C += A · B: C's tiles are read and
//! added in f32 before the one rounding to T (the epilogue of `matmul_tiles`, or of the split-K
//! reduce).
//!
//! C = A · B: a (m, k), b (k, n), c (m, n), one dtype (f16 or bf16); c is contiguous in its last
//! dim with any row stride >= n; a and b are each row-major the same way or column-major (stride 1
//! in their first dim: the `.t()` view of a row-major matrix, e.g. an nn.Linear weight), read in
//! place either way; c must not be a or b. The variant: `bm`/`bn`/`bk`
//! the tile shape (powers of two), `group` the tile rows per band of the swizzled tile order,
//! `programs` 0 for one output tile per tile block or P > 0 for a persistent grid of min(P, tiles)
//! tile blocks, `occupancy` (1..=32) and `num_cta_in_cga` (1, 2, 4, 8, 16) compile hints for
//! tileiras. -1 for any of them picks the default (the compiler's, for the two hints). `splits`
//! (1..=16, -1 = 1) cuts each output tile's K-tiles over that many tile blocks (split-K: f32
//! partial tiles in a stream-ordered workspace, then a reduce kernel; grid = tiles x splits), for
//! products with too few output tiles to fill the GPU; it needs programs = 0. Every
//! descriptor is validated before anything touches the GPU: bad input returns -2/-5/-6 with a
//! message, never a launch.
use super::kernel::matmul_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, Launch, MmaVariant, StreamAlloc, TensorDesc};
use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "matmul";

/// A validated launch: sizes as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub lda: i32,
    pub ldb: i32,
    pub ldc: i32,
    /// a / b stored column-major (lda / ldb are then their column strides).
    pub a_t: bool,
    pub b_t: bool,
    pub variant: MmaVariant,
    /// Split-K: K-tiles per split and the split count (k_per = k_tiles, splits = 1: no split).
    pub k_per: i32,
    pub splits: i32,
}

/// Most splits of an output tile's K-tiles a variant may ask for.
pub const MAX_SPLITS: i32 = 16;

impl Plan {
    /// The const generics after the layout's: PERSISTENT, ACC (`acc`: C += A B) and C_TMA, C's tile
    /// stored through TMA only where its rows are whole 16-byte units (`ffi_util::tma_store_exact`;
    /// device_util's `store_tile_2d`). The split-K reduce takes the last two.
    pub fn epilogue_generics(&self, acc: bool) -> [String; 3] {
        let c_tma = ffi_util::tma_store_exact(self.dtype, self.n);
        [self.variant.programs.is_some(), acc, c_tma].map(|b| b.to_string())
    }

    pub fn tiles(&self) -> i64 {
        self.variant.tiles(1, self.m, self.n)
    }

    /// The launch grid in tile blocks (split-K: the first kernel's, tiles x splits).
    pub fn grid(&self) -> (u32, u32, u32) {
        let (tiles, ..) = self.variant.grid(self.tiles());
        (tiles, self.splits as u32, 1)
    }

    /// (tile rows, tile columns) of C: ceil(m / bm), ceil(n / bn).
    pub fn tile_dims(&self) -> (i64, i64) {
        let (bm, bn) = (self.variant.bm as i64, self.variant.bn as i64);
        ((self.m as i64 + bm - 1) / bm, (self.n as i64 + bn - 1) / bn)
    }

    /// f32 elements of the split-K workspace: `splits` copies of C padded to whole tile rows.
    pub fn workspace_elems(&self) -> i64 {
        self.splits as i64 * self.tile_dims().0 * self.variant.bm as i64 * self.n as i64
    }
}

/// Row stride of a 2-D descriptor; a single row has no meaningful stride, so `cols` is used. The
/// whole strided extent must be indexable with i32 (the kernel's views are i32-indexed).
fn row_stride(d: &TensorDesc, rows: i32, cols: i32, arg: &str) -> FfiResult<i32> {
    let s = if rows == 1 { cols } else { to_i32(d.strides[0], &format!("{arg} row stride"))? };
    if s < cols {
        return Err(invalid(format!("`{arg}` row stride {s} < its {cols} columns: rows would overlap")));
    }
    check_extent(rows, cols, s, arg)?;
    Ok(s)
}

/// (column-major?, leading stride) of an operand: row-major when its last dim is contiguous (or
/// has one element), else column-major when its first dim is (or has one element): then it is
/// stored as the (cols, rows) row-major matrix whose `.t()` it is, `ld` its column stride.
fn layout(d: &TensorDesc, arg: &str) -> FfiResult<(bool, i32)> {
    let (rows, cols) = (to_i32(d.shape[0], arg)?, to_i32(d.shape[1], arg)?);
    if d.strides[1] == 1 || cols == 1 {
        return Ok((false, row_stride(d, rows, cols, arg)?));
    }
    if d.strides[0] != 1 && rows != 1 {
        return Err(invalid(format!(
            "`{arg}` must be contiguous in its last dim (row-major) or its first (the .t() of a row-major \
             matrix), got strides {:?}",
            d.strides()
        )));
    }
    let ld = to_i32(d.strides[1], &format!("{arg} column stride"))?;
    if ld < rows {
        return Err(invalid(format!("`{arg}` column stride {ld} < its {rows} rows: columns would overlap")));
    }
    check_extent(cols, rows, ld, arg)?;
    Ok((true, ld))
}

/// `rows` lines of `cols` elements, `ld` apart, must be indexable with i32.
fn check_extent(rows: i32, cols: i32, s: i32, arg: &str) -> FfiResult<()> {
    let extent = (rows as i64 - 1) * s as i64 + cols as i64;
    if extent > i32::MAX as i64 {
        return Err(invalid(format!(
            "`{arg}` spans {extent} elements; the kernel indexes with i32 (at most {})",
            i32::MAX
        )));
    }
    Ok(())
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    c: &TensorDesc, a: &TensorDesc, b: &TensorDesc, bm: i32, bn: i32, bk: i32, group: i32, programs: i32,
    occupancy: i32, num_cta_in_cga: i32, splits: i32,
) -> FfiResult<Plan> {
    let tensors = [(a, "a", 2), (b, "b", 2), (c, "c", 2)];
    let dtype = ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    ffi_util::check_inner_dims(a, b, 1, 0)?;
    if c.shape() != [a.shape[0], b.shape[1]] {
        return Err(invalid(format!("`c` shape {:?} != (m, n) = ({}, {})", c.shape(), a.shape[0], b.shape[1])));
    }
    ffi_util::check_last_dims_contiguous(&[(c, "c")])?;
    let ((a_t, lda), (b_t, ldb)) = (layout(a, "a")?, layout(b, "b")?);
    if c.data == a.data || c.data == b.data {
        return Err(invalid(
            "`c` must not alias `a` or `b`: tiles of C are written while A and B are still being read",
        ));
    }
    let m = to_i32(a.shape[0], "m")?;
    let k = to_i32(a.shape[1], "k")?;
    let n = to_i32(b.shape[1], "n")?;
    let variant = MmaVariant::parse([bm, bn, bk, group, programs, occupancy, num_cta_in_cga])?;
    let (k_per, splits) = split_k(&variant, k, splits)?;
    let p = Plan { dtype, m, n, k, lda, ldb, ldc: row_stride(c, m, n, "c")?, a_t, b_t, variant, k_per, splits };
    MmaVariant::check_tiles(p.tiles())?;
    if p.splits > 1 && p.workspace_elems() > i32::MAX as i64 {
        return Err(invalid(format!(
            "splits={splits}: the split-K workspace of {} f32 elements exceeds i32 indexing; use fewer splits",
            p.workspace_elems()
        )));
    }
    // The reduce kernel's grid is (tile rows, tile columns): CUDA caps a grid's y at 65535.
    if p.splits > 1 && p.tile_dims().1 > 65535 {
        return Err(invalid(format!(
            "splits={splits}: n = {n} is more than 65535 tile columns of bn = {}; use a wider bn or no split",
            p.variant.bn
        )));
    }
    Ok(p)
}

/// (K-tiles per split, splits) for the `splits` knob: the K-tiles ceil(k / bk) cut into at most
/// `splits` non-empty runs of equal length (the last may be shorter), so a split count above the
/// K-tile count gives one K-tile per split.
fn split_k(v: &MmaVariant, k: i32, splits: i32) -> FfiResult<(i32, i32)> {
    let asked = ffi_util::or_default(splits, 1);
    if !(1..=MAX_SPLITS).contains(&asked) {
        return Err(invalid(format!("variant splits={splits}: use 1..={MAX_SPLITS} K splits, or -1 for 1")));
    }
    if asked > 1 && v.programs.is_some() {
        return Err(invalid(format!(
            "variant splits={asked} with programs={}: split-K runs one tile block per (output tile, split); \
             use programs=0",
            v.programs.unwrap_or(0)
        )));
    }
    let k_tiles = ((k as i64 + v.bk as i64 - 1) / v.bk as i64).max(1) as i32;
    let k_per = (k_tiles + asked - 1) / asked;
    Ok((k_per, (k_tiles + k_per - 1) / k_per))
}

fn launch<T: Element>(p: &Plan, c: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    launch_with::<T>(p, c, a, b, stream, false)
}

/// Launches `plan`: C = A B, or with `acc` C += A B (also fused_linear_cross_entropy's products).
pub fn launch_with<T: Element>(
    p: &Plan, c: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>, acc: bool,
) -> FfiResult<()> {
    let (c_ptr, a_ptr, b_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(c), ffi_util::device_ptr::<T>(a), ffi_util::device_ptr::<T>(b)) };
    // A_T, B_T, then the partitions' dim maps A_MAP, B_MAP: [0, 1] row-major, [1, 0] column-major.
    let (at, bt) = (p.a_t as i32, p.b_t as i32);
    let mut launch = p.variant.launch::<T>(&[at, bt, at, 1 - at, bt, 1 - bt], p.tiles());
    let (m, n, k, lda, ldb, ldc) = (p.m, p.n, p.k, p.lda, p.ldb, p.ldc);
    if p.splits > 1 {
        return launch_split::<T>(p, launch, c_ptr, a_ptr, b_ptr, stream, acc);
    }
    // PERSISTENT, ACC, C_TMA
    launch.generics.extend(p.epilogue_generics(acc));
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe { launch.enqueue(device::matmul_tiles(c_ptr, a_ptr, b_ptr, m, n, k, lda, ldb, ldc), stream) }
}

/// Split-K: matmul_split_partials over grid (tiles, splits) writes the f32 partial tiles to a
/// workspace allocated on the caller's stream, matmul_split_reduce adds them (and with `acc` C's
/// tile) into C; the workspace is freed in stream order after the reduce, and on every other way
/// out (StreamAlloc).
fn launch_split<T: Element>(
    p: &Plan, mut partials: Launch, c_ptr: DevicePointer<T>, a_ptr: DevicePointer<T>, b_ptr: DevicePointer<T>,
    stream: &Arc<Stream>, acc: bool,
) -> FfiResult<()> {
    let ws = StreamAlloc::new(p.workspace_elems() as usize * std::mem::size_of::<f32>(), stream, "split-K workspace")?;
    let (tiles_m, tiles_n) = p.tile_dims();
    let mut reduce = Launch::new::<T>(
        &[p.variant.bm, p.variant.bn],
        (tiles_m as u32, tiles_n as u32, 1),
        ffi_util::compile_options(None, None),
    );
    // ACC, C_TMA (no PERSISTENT)
    reduce.generics.extend(p.epilogue_generics(acc).into_iter().skip(1));
    // SAFETY: plan() checked the descriptors and the workspace's i32 extent; the workspace holds
    // workspace_elems() f32 and outlives both kernels (freed in stream order after them).
    unsafe {
        let w_ptr = DevicePointer::<f32>::from_cu_deviceptr(ws.ptr);
        let (m, n, k, lda, ldb, ldc) = (p.m, p.n, p.k, p.lda, p.ldb, p.ldc);
        partials.grid = p.grid();
        partials.enqueue(device::matmul_split_partials(w_ptr, a_ptr, b_ptr, m, n, k, lda, ldb, p.k_per), stream)?;
        reduce.enqueue(device::matmul_split_reduce(c_ptr, w_ptr, m, n, ldc, p.splits), stream)?;
    }
    ws.free()
}

// `cutile_matmul`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_matmul(
    c, a, b; bm: i32, bn: i32, bk: i32, group: i32, programs: i32, occupancy: i32, num_cta_in_cga: i32,
    splits: i32
));

/// `cutile_matmul_acc`: C += A · B, `cutile_matmul`'s plan (the same checks; C must not alias A or
/// B) with the accumulating epilogue.
mod acc {
    use super::{launch_with, plan, Arc, Element, FfiResult, Stream, TensorDesc, KERNEL};

    fn launch<T: Element>(
        p: &super::Plan, c: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        launch_with::<T>(p, c, a, b, stream, true)
    }

    crate::export!(cutile_matmul_acc(
        c, a, b; bm: i32, bn: i32, bk: i32, group: i32, programs: i32, occupancy: i32, num_cta_in_cga: i32,
        splits: i32
    ));
}

#[cfg(test)]
mod tests {
    //! CPU tests: validation, the grid, and every entry lowered to Tile IR for sm_90 (stage 1 of
    //! the JIT, which needs no GPU) for every dtype, then assembled by tileiras when the toolchain
    //! is there — a DSL mistake fails here, not on the GPU.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "matmul_device" };

    fn desc2(dtype: DType, data: u64, shape: &[i64], strides: &[i64]) -> TensorDesc {
        TensorDesc::from_parts(data, dtype, shape, strides)
    }

    /// (c, a, b) for an m x n x k problem whose rows are [ldc, lda, ldb] elements apart.
    fn strided_mats(
        dtype: DType, [m, n, k]: [i64; 3], [ldc, lda, ldb]: [i64; 3],
    ) -> (TensorDesc, TensorDesc, TensorDesc) {
        (
            desc2(dtype, 0x3000, &[m, n], &[ldc, 1]),
            desc2(dtype, 0x1000, &[m, k], &[lda, 1]),
            desc2(dtype, 0x2000, &[k, n], &[ldb, 1]),
        )
    }

    /// (c, a, b) for an m x n x k problem with contiguous rows.
    fn mats(dtype: DType, m: i64, n: i64, k: i64) -> (TensorDesc, TensorDesc, TensorDesc) {
        strided_mats(dtype, [m, n, k], [n, k, n])
    }

    #[test]
    fn plan_takes_row_strides_and_defaults() {
        let (c, a, b) = strided_mats(DType::BF16, [129, 257, 65], [264, 72, 257]);
        let p = plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1).unwrap();
        assert_eq!(
            p,
            Plan {
                dtype: DType::BF16,
                m: 129,
                n: 257,
                k: 65,
                lda: 72,
                ldb: 257,
                ldc: 264,
                a_t: false,
                b_t: false,
                variant: MmaVariant {
                    bm: 128,
                    bn: 128,
                    bk: 64,
                    group: 8,
                    programs: None,
                    occupancy: None,
                    num_cta_in_cga: None,
                },
                k_per: 2,
                splits: 1,
            }
        );
        assert_eq!((p.tiles(), p.grid()), (6, (6, 1, 1)));
    }

    #[test]
    fn persistent_grid_is_capped_at_the_tile_count() {
        let (c, a, b) = mats(DType::F16, 4096, 4096, 4096);
        let p = plan(&c, &a, &b, 128, 256, 64, 8, 132, 1, 2, -1).unwrap();
        assert_eq!(
            (p.tiles(), p.grid(), p.variant.occupancy, p.variant.num_cta_in_cga),
            (512, (132, 1, 1), Some(1), Some(2))
        );
        let small = plan(&c, &a, &b, 256, 256, 64, 8, 1000, -1, -1, -1).unwrap();
        assert_eq!(small.grid(), (256, 1, 1));
        assert_eq!(plan(&c, &a, &b, 128, 128, 64, 8, 0, -1, -1, -1).unwrap().grid(), (1024, 1, 1));
    }

    #[test]
    fn split_k_cuts_the_k_tiles_into_non_empty_runs() {
        let (c, a, b) = mats(DType::BF16, 64, 4096, 4096);
        // 4096 / 128 = 32 K-tiles: 4 splits of 8; a 32 x 64 tile gives 2 x 64 output tiles.
        let p = plan(&c, &a, &b, 32, 64, 128, 8, 0, 2, -1, 4).unwrap();
        assert_eq!((p.k_per, p.splits, p.grid(), p.workspace_elems()), (8, 4, (128, 4, 1), 4 * 64 * 4096));
        // 1000 / 128 -> 8 K-tiles over 3 splits: runs of 3, 3, 2; more splits than K-tiles: one each.
        let (c, a, b) = mats(DType::BF16, 17, 100, 1000);
        let p = plan(&c, &a, &b, 16, 64, 128, 8, 0, -1, -1, 3).unwrap();
        assert_eq!((p.k_per, p.splits, p.grid(), p.workspace_elems()), (3, 3, (4, 3, 1), 3 * 32 * 100));
        assert_eq!(plan(&c, &a, &b, 16, 64, 128, 8, 0, -1, -1, 16).map(|p| (p.k_per, p.splits)).unwrap(), (1, 8));
        // k shorter than one K-tile, and the default: no split.
        let (c, a, b) = mats(DType::F16, 16, 64, 8);
        assert_eq!(plan(&c, &a, &b, 16, 64, 128, 8, 0, -1, -1, 4).map(|p| (p.k_per, p.splits)).unwrap(), (1, 1));
        assert_eq!(plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1).map(|p| p.splits).unwrap(), 1);
    }

    #[test]
    fn split_k_rejects_bad_counts_and_persistent_grids() {
        let (c, a, b) = mats(DType::BF16, 64, 4096, 4096);
        for (prog, splits, needle) in
            [(0, 0, "splits=0"), (0, 17, "splits=17"), (0, -2, "splits=-2"), (132, 2, "use programs=0")]
        {
            assert_fails(plan(&c, &a, &b, 64, 64, 128, 8, prog, -1, -1, splits), rc::INVALID_ARGUMENT, needle);
        }
        // 16 copies of a (32768 x 8192) C exceed i32 indexing.
        let (c, a, b) = mats(DType::BF16, 32768, 8192, 4096);
        assert_fails(plan(&c, &a, &b, 128, 128, 64, 8, 0, -1, -1, 16), rc::INVALID_ARGUMENT, "split-K workspace");
        // 65536 tile columns of 16: past the reduce grid's y limit; 32-wide tiles fit.
        let (c, a, b) = mats(DType::BF16, 1, 1 << 20, 64);
        assert_fails(plan(&c, &a, &b, 16, 16, 16, 8, 0, -1, -1, 2), rc::INVALID_ARGUMENT, "65535 tile columns");
        assert_eq!(plan(&c, &a, &b, 16, 32, 16, 8, 0, -1, -1, 2).map(|p| p.splits).unwrap(), 2);
    }

    #[test]
    fn a_single_row_needs_no_row_stride() {
        let (c, a, b) = strided_mats(DType::F16, [1, 16, 8], [0, 0, 16]);
        let p = plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.lda, p.ldb, p.ldc), (8, 16, 16));
    }

    #[test]
    fn column_major_operands_are_read_in_place() {
        // b = W.t() for an nn.Linear weight W (n, k) = (16, 8) with padded rows; a = X.t().
        let (c, _, _) = mats(DType::BF16, 4, 16, 8);
        let a = desc2(DType::BF16, 0x1000, &[4, 8], &[1, 6]);
        let b = desc2(DType::BF16, 0x2000, &[8, 16], &[1, 10]);
        let p = plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1).unwrap();
        assert_eq!((p.a_t, p.lda, p.b_t, p.ldb, p.ldc), (true, 6, true, 10, 16));
        // A single column is row-major whatever its stride; a single row of a strided vector is
        // one column-major column.
        let b1 = desc2(DType::BF16, 0x2000, &[8, 1], &[5, 7]);
        let c1 = desc2(DType::BF16, 0x3000, &[4, 1], &[1, 1]);
        let (_, a1, _) = mats(DType::BF16, 4, 1, 8);
        assert_eq!(plan(&c1, &a1, &b1, -1, -1, -1, -1, -1, -1, -1, -1).map(|p| (p.b_t, p.ldb)).unwrap(), (false, 5));
        let a2 = desc2(DType::BF16, 0x1000, &[1, 8], &[16, 2]);
        let (c2, _, b2) = mats(DType::BF16, 1, 16, 8);
        assert_eq!(plan(&c2, &a2, &b2, -1, -1, -1, -1, -1, -1, -1, -1).map(|p| (p.a_t, p.lda)).unwrap(), (true, 2));
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (c, a, b) = mats(DType::F16, 4, 16, 8);
        let cases = [
            (c, a, desc2(DType::F16, 0x2000, &[9, 16], &[16, 1]), "inner dims"),
            (desc2(DType::F16, 0x3000, &[4, 17], &[17, 1]), a, b, "(m, n) = (4, 16)"),
            (
                c,
                desc2(DType::F16, 0x1000, &[4, 8], &[16, 2]),
                b,
                "`a` must be contiguous in its last dim (row-major) or",
            ),
            (c, desc2(DType::F16, 0x1000, &[4, 8], &[1, 3]), b, "column stride 3 < its 4 rows"),
            (desc2(DType::F16, 0x3000, &[4, 16], &[1, 4]), a, b, "`c` must be contiguous in its last dim"),
            (c, desc2(DType::F16, 0x1000, &[4, 8], &[4, 1]), b, "overlap"),
            (c, a, desc2(DType::F16, 0x2000, &[8], &[1]), "2 dims"),
            (desc2(DType::F16, 0x1000, &[4, 16], &[16, 1]), a, b, "alias"),
            (c, a, desc2(DType::F32, 0x2000, &[8, 16], &[16, 1]), "share one dtype"),
        ];
        for (c, a, b, needle) in cases {
            assert_fails(plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1), rc::INVALID_ARGUMENT, needle);
        }
    }

    #[test]
    fn plan_rejects_an_extent_beyond_i32() {
        let a = desc2(DType::BF16, 0x1000, &[65536, 64], &[65536, 1]);
        let b = desc2(DType::BF16, 0x2000, &[64, 64], &[64, 1]);
        let c = desc2(DType::BF16, 0x3000, &[65536, 64], &[64, 1]);
        let e = plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1);
        assert_fails(e, rc::INVALID_ARGUMENT, "`a` spans 4294901824 elements");
    }

    #[test]
    fn plan_rejects_bad_variants_naming_the_knob() {
        let (c, a, b) = mats(DType::BF16, 64, 64, 64);
        ffi_util::assert_mma_variant_checked(|[bm, bn, bk, g, prog, occ, cga]| {
            plan(&c, &a, &b, bm, bn, bk, g, prog, occ, cga, -1)
        });
    }

    #[test]
    fn band_order_visits_every_output_tile_once() {
        // The device's own mapping (plain i32 arithmetic, also compiled for the host): every tile
        // id below tiles_m * tiles_n lands on a distinct in-range tile, which is what makes the
        // entries' `unchecked_accesses` sound. Ragged last bands included (tiles_m % group != 0).
        for (tiles_m, tiles_n, group) in [(1, 1, 8), (9, 5, 8), (17, 8, 8), (64, 32, 8), (3, 7, 1), (5, 4, 64)] {
            let mut seen = vec![false; (tiles_m * tiles_n) as usize];
            for id in 0..tiles_m * tiles_n {
                let (bm, bn) = device::tile_coords(id, tiles_m, tiles_n, group);
                assert!(
                    (0..tiles_m).contains(&bm) && (0..tiles_n).contains(&bn),
                    "id {id} -> ({bm}, {bn}) outside {tiles_m}x{tiles_n}"
                );
                let slot = &mut seen[(bm * tiles_n + bn) as usize];
                assert!(!*slot, "id {id} -> ({bm}, {bn}) twice in {tiles_m}x{tiles_n}, group {group}");
                *slot = true;
            }
        }
        // Within a band, consecutive ids walk down the band's tile rows first.
        assert_eq!(
            (0..4).map(|id| device::tile_coords(id, 16, 16, 2)).collect::<Vec<_>>(),
            [(0, 0), (1, 0), (0, 1), (1, 1)]
        );
    }

    #[test]
    fn plan_rejects_f32_and_integers_as_unsupported() {
        for dtype in [DType::F32, DType::I32] {
            let (c, a, b) = mats(dtype, 4, 16, 8);
            let e = plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1);
            assert_fails(e, rc::UNSUPPORTED_DTYPE, "matmul supports f16 and bf16");
        }
    }

    #[test]
    fn every_entry_lowers_to_tile_ir_for_sm90() {
        for dtype in ["f16", "bf16"] {
            for persistent in ["false", "true"] {
                // Row-major A and B; then column-major B (x @ W.t()) and both column-major.
                for (bm, bn, bk, maps) in [
                    ("128", "256", "64", ["0", "0", "0", "1", "0", "1"]),
                    ("64", "64", "32", ["0", "0", "0", "1", "0", "1"]),
                    ("128", "128", "64", ["0", "1", "0", "1", "1", "0"]),
                    ("16", "64", "128", ["1", "1", "1", "0", "1", "0"]),
                ] {
                    // PERSISTENT, ACC false, C_TMA true and false (C's store through TMA or lane by lane)
                    for (c_tma, no_tma) in [("true", false), ("false", true)] {
                        let generics =
                            [&[dtype, bm, bn, bk, "8"][..], &maps[..], &[persistent, "false", c_tma]].concat();
                        let ir = DEVICE.assert_lowers("matmul_tiles", &generics, &["mma", "store_view_tko"]);
                        assert_eq!(ir.contains("allow_tma = false"), no_tma, "matmul_tiles<{}>", generics.join(","));
                    }
                }
            }
            let generics = [dtype, "32", "64", "128", "8", "0", "1", "0", "1", "1", "0"];
            DEVICE.assert_lowers("matmul_split_partials", &generics, &["mma", "store_view_tko"]);
            for (c_tma, no_tma) in [("true", false), ("false", true)] {
                let generics = [dtype, "32", "64", "false", c_tma];
                let ir = DEVICE.assert_lowers("matmul_split_reduce", &generics, &["load_view_tko", "store_view_tko"]);
                assert_eq!(ir.contains("allow_tma = false"), no_tma, "matmul_split_reduce<{}>", generics.join(","));
            }
        }
    }

    #[test]
    fn the_accumulating_entries_load_c_once_more() {
        // C += A B (cutile_matmul_acc): one load more than the plain entry (C's tile), persistent or
        // not, column-major B; and the split-K reduce's (the first partial, the loop's, C's).
        for dtype in ["f16", "bf16"] {
            for persistent in ["false", "true"] {
                let generics =
                    [dtype, "128", "128", "64", "8", "0", "1", "0", "1", "1", "0", persistent, "true", "true"];
                let ir = DEVICE.assert_lowers("matmul_tiles", &generics, &["mma", "load_view_tko", "store_view_tko"]);
                let plain = [dtype, "128", "128", "64", "8", "0", "1", "0", "1", "1", "0", persistent, "false", "true"];
                let plain_ir = DEVICE.assert_lowers("matmul_tiles", &plain, &["mma", "store_view_tko"]);
                assert!(
                    ir.matches("load_view_tko").count() == plain_ir.matches("load_view_tko").count() + 1,
                    "ACC adds one load (C's tile)"
                );
            }
            let ir =
                DEVICE.assert_lowers("matmul_split_reduce", &[dtype, "32", "64", "true", "true"], &["load_view_tko"]);
            assert_eq!(ir.matches("load_view_tko").count(), 3, "the first partial, the loop's and C's");
        }
    }

    #[test]
    fn a_c_whose_rows_end_inside_16_bytes_is_stored_without_tma() {
        // The H100 runs' failing case (NOTES.md, "C += A B"), as the launcher specializes it:
        // 129 x 257 x 1000 with c a column slice (ldc 264), every pointer 16-byte aligned. 257 bf16
        // columns end inside a 16-byte unit, so the launcher passes C_TMA false and the store of C's
        // tile (plain and accumulating) carries allow_tma = false; 256 columns keep TMA.
        use crate::ffi_util::{div_hints, tma_store_exact, ALIGNED_PTR};
        assert!(!tma_store_exact(DType::BF16, 257) && tma_store_exact(DType::BF16, 256));
        let ptrs = [("c_ptr", ALIGNED_PTR), ("a_ptr", ALIGNED_PTR), ("b_ptr", ALIGNED_PTR)];
        let ints = [("m", 129), ("n", 257), ("k", 1000), ("lda", 1000), ("ldb", 257), ("ldc", 264)];
        let hints = div_hints(&ptrs, &ints);
        for acc in ["false", "true"] {
            let ir_of = |c_tma| {
                let generics = ["bf16", "128", "128", "64", "8", "0", "0", "0", "1", "0", "1", "false", acc, c_tma];
                let what = format!("-ldc264-acc-{acc}");
                DEVICE.lower("matmul_tiles", &generics, &hints, cutile::tile_kernel::CompileOptions::default(), &what)
            };
            // C's store: the one store_view_tko of each form
            let store = |ir: String| ir.lines().filter(|l| l.contains("store_view_tko")).collect::<Vec<_>>().join("\n");
            let (lanes, tma) = (store(ir_of("false")), store(ir_of("true")));
            assert!(
                lanes.contains("allow_tma = false") && lanes.lines().count() == 1,
                "acc {acc}, C_TMA false:\n{lanes}"
            );
            assert!(!tma.contains("allow_tma") && tma.lines().count() == 1, "acc {acc}, C_TMA true:\n{tma}");
        }
    }

    #[test]
    fn the_launch_stores_c_through_tma_only_into_whole_16_byte_rows() {
        // The H100 runs' failing case, c a column slice (257 of 264 columns): C_TMA false, for the
        // accumulating and the plain epilogue and for the split-K reduce (the last two); 256
        // columns in the same rows: true.
        let (c, a, b) = strided_mats(DType::BF16, [129, 257, 65], [264, 72, 257]);
        let p = plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1, -1).unwrap();
        assert_eq!(p.epilogue_generics(true), ["false", "true", "false"]);
        let (c, a, b) = strided_mats(DType::BF16, [129, 256, 65], [264, 72, 256]);
        let p = plan(&c, &a, &b, -1, -1, -1, -1, 4, -1, -1, -1).unwrap(); // a persistent grid of 4
        assert_eq!(p.epilogue_generics(false), ["true", "false", "true"]);
    }

    #[test]
    fn a_wide_tile_in_one_cta_runs_on_eight_worker_warps() {
        // 128 x 256 and 256 x 128 in one CTA, persistent or not, get the hint; 128 x 128, and the
        // 2-CTA cluster of a wide tile, keep the compiler's choice (their code is as before)
        let (c, a, b) = mats(DType::BF16, 4096, 4096, 4096);
        for (bm, bn, programs, cga, eight) in [
            (128, 256, 0, -1, true),
            (256, 128, 132, 1, true),
            (128, 128, 0, -1, false),
            (128, 256, 0, 2, false),
            (64, 256, 0, -1, false),
            (256, 256, 0, -1, false),
        ] {
            let p = plan(&c, &a, &b, bm, bn, 64, -1, programs, 1, cga, -1).unwrap();
            assert_eq!(p.variant.warps(), eight.then_some(8), "{bm} x {bn}, programs {programs}, cga {cga}");
            if eight {
                // as the launcher builds it: the hint reaches the IR, and tileiras 13.4 takes it
                let mut launch = p.variant.launch::<cutile::half::bf16>(&[0, 0, 0, 1, 0, 1], p.tiles());
                launch.generics.extend(p.epilogue_generics(false));
                let ir = DEVICE.lower(
                    "matmul_tiles",
                    &launch.generics.iter().map(String::as_str).collect::<Vec<_>>(),
                    &[],
                    launch.options,
                    " on 8 warps",
                );
                assert!(ir.contains("num_worker_warps_per_cta = 8"), "{bm} x {bn}: hint missing:\n{ir}");
            }
        }
        // split-K's partial tiles go through the same launch (fused_linear_cross_entropy's dh splits
        // a wide pair's tiles where they are fewer than the SMs): the hint reaches them too
        let (c, a, b) = mats(DType::BF16, 1024, 4096, 128256);
        let p = plan(&c, &a, &b, 128, 256, 64, -1, 0, 1, 1, 2).unwrap();
        assert_eq!((p.splits, p.variant.warps()), (2, Some(8)));
        let launch = p.variant.launch::<cutile::half::bf16>(&[0, 0, 0, 1, 0, 1], p.tiles());
        let generics: Vec<&str> = launch.generics.iter().map(String::as_str).collect();
        let ir = DEVICE.lower("matmul_split_partials", &generics, &[], launch.options, " on 8 warps");
        assert!(ir.contains("num_worker_warps_per_cta = 8"), "split partials: hint missing:\n{ir}");
    }
}
