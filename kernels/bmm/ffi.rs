//! C-ABI launcher of bmm: `cutile_bmm` (declared for Python in op.py's CDEF).
//!
//!   int32_t cutile_bmm(const TensorDesc* c, const TensorDesc* a, const TensorDesc* b,
//!                      int32_t bm, int32_t bn, int32_t bk, int32_t group, int32_t programs,
//!                      int32_t occupancy, int32_t num_cta_in_cga,
//!                      int32_t device_id, uint64_t stream);
//!
//! C[i] = A[i] · B[i]: a (batch, m, k), b (batch, k, n), c (batch, m, n), one dtype (f16 or bf16).
//! Each matrix of a and b is row-major (last dim contiguous, any row stride) or column-major (middle
//! dim contiguous: the transpose(1, 2) view of a row-major batch), read in place either way; any
//! batch stride, 0 included (one matrix shared by every product: `b.expand(batch, k, n)`). c is
//! row-major with its matrices apart (one after another, or with their rows interleaved: the
//! transpose(0, 1) view of an (m, batch, n) buffer) and must not be a or b. The variant knobs are
//! kernels/matmul's: `bm`/`bn`/`bk` the tile shape (powers of two), `group` the tile rows per band,
//! `programs` 0 for one output tile per tile block or P > 0 for a persistent grid of min(P, tiles)
//! tile blocks, `occupancy` (1..=32) and `num_cta_in_cga` (1, 2, 4, 8, 16) compile hints; -1 for
//! any picks the default. Every descriptor is validated before anything touches the GPU: bad input
//! returns -2/-5/-6 with a message, never a launch.
use super::kernel::bmm_device as device;
use crate::ffi_util::{self, invalid, to_i32, DType, Element, FfiResult, MmaVariant, TensorDesc};
use cutile::cuda_core::Stream;
use std::sync::Arc;

const KERNEL: &str = "bmm";

/// How the kernel reads one batch of matrices: stored as `batches` matrices `batch_stride` apart,
/// each `lines` lines (rows, or columns when column-major) `ld` apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Operand {
    /// Column-major (`ld` is then the column stride).
    pub t: bool,
    pub ld: i32,
    /// 1 when every product reads the same matrix (batch stride 0, or a batch of one), else batch.
    pub batches: i32,
    pub batch_stride: i32,
}

/// A validated launch: sizes as the kernel indexes them.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub dtype: DType,
    pub batch: i32,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub a: Operand,
    pub b: Operand,
    pub ldc: i32,
    pub sc: i32,
    /// matmul's variant knobs.
    pub variant: MmaVariant,
}

impl Plan {
    /// The const generics after the layout's: PERSISTENT, then C_TMA, C's tile stored through TMA
    /// only where its rows are whole 16-byte units (`ffi_util::tma_store_exact`; matmul's).
    pub fn epilogue_generics(&self) -> [String; 2] {
        [self.variant.programs.is_some(), ffi_util::tma_store_exact(self.dtype, self.n)].map(|b| b.to_string())
    }

    pub fn tiles(&self) -> i64 {
        self.variant.tiles(self.batch, self.m, self.n)
    }

    /// The launch grid in tile blocks.
    pub fn grid(&self) -> (u32, u32, u32) {
        self.variant.grid(self.tiles())
    }
}

/// The i32 dims of a 3-D descriptor.
fn dims(d: &TensorDesc, arg: &str) -> FfiResult<[i32; 3]> {
    Ok([to_i32(d.shape[0], arg)?, to_i32(d.shape[1], arg)?, to_i32(d.shape[2], arg)?])
}

/// Elements from the first to the last of `batches` matrices of `lines` lines of `len`, `ld` and
/// `batch_stride` apart; the kernel's views index with i32, so it must fit.
/// Returns that extent.
fn check_extent(arg: &str, batches: i32, batch_stride: i32, lines: i32, ld: i32, len: i32) -> FfiResult<i32> {
    let extent = (batches as i64 - 1) * batch_stride as i64 + (lines as i64 - 1) * ld as i64 + len as i64;
    i32::try_from(extent).map_err(|_| {
        invalid(format!("`{arg}` spans {extent} elements; the kernel indexes with i32 (at most {})", i32::MAX))
    })
}

/// The layout of input `arg` (batch, rows, cols): row-major when its last dim is contiguous (or has
/// one element), else column-major when its middle dim is; a batch stride of 0, or a batch of one,
/// is one matrix shared by every product.
fn operand(d: &TensorDesc, arg: &str) -> FfiResult<Operand> {
    let [batch, rows, cols] = dims(d, arg)?;
    let t = if d.strides[2] == 1 || cols == 1 {
        false
    } else if d.strides[1] == 1 || rows == 1 {
        true
    } else {
        return Err(invalid(format!(
            "`{arg}` must be contiguous in its last dim (row-major matrices) or its middle dim (the \
             transpose(1, 2) of a row-major batch), got strides {:?}",
            d.strides()
        )));
    };
    // Stored as `lines` lines of `len` elements; a single line has no meaningful stride.
    let (lines, len, ld) = if t { (cols, rows, d.strides[2]) } else { (rows, cols, d.strides[1]) };
    let ld = if lines == 1 { len } else { to_i32(ld, &format!("{arg} line stride"))? };
    if ld < len {
        let what = if t { "column" } else { "row" };
        return Err(invalid(format!("`{arg}` {what} stride {ld} < its {len}-element {what}s: they would overlap")));
    }
    if batch == 1 || d.strides[0] == 0 {
        // The view's batch stride is then never multiplied by more than 0: one matrix's span (which
        // check_extent proved fits) keeps it a multiple of 16 where ld and len are, as TMA wants.
        let span = check_extent(arg, 1, 0, lines, ld, len)?;
        return Ok(Operand { t, ld, batches: 1, batch_stride: span });
    }
    let batch_stride = to_i32(d.strides[0], &format!("{arg} batch stride"))?;
    check_extent(arg, batch, batch_stride, lines, ld, len)?;
    Ok(Operand { t, ld, batches: batch, batch_stride })
}

/// (row stride, batch stride) of the output c (batch, m, n), row-major: its matrices must not
/// overlap (every tile of every product is written once), either one after another or with their
/// rows interleaved.
fn output(c: &TensorDesc) -> FfiResult<(i32, i32)> {
    let [batch, m, n] = dims(c, "c")?;
    let ldc = if m == 1 { n } else { to_i32(c.strides[1], "c row stride")? };
    // A single matrix: its span (which fits i32 when the output does) as the unused batch stride.
    let sc = if batch == 1 { check_extent("c", 1, 0, m, ldc, n)? } else { to_i32(c.strides[0], "c batch stride")? };
    let (ldc64, sc64) = (ldc as i64, sc as i64);
    let (after, interleaved) = (
        sc64 >= (m as i64 - 1) * ldc64 + n as i64 && ldc >= n,
        ldc64 >= (batch as i64 - 1) * sc64 + n as i64 && sc >= n,
    );
    if !after && !interleaved {
        return Err(invalid(format!(
            "`c` strides {:?} overlap its rows or matrices: every element of the (batch, m, n) output must \
             have its own place",
            c.strides()
        )));
    }
    check_extent("c", batch, sc, m, ldc, n)?;
    Ok((ldc, sc))
}

// The export's arguments one for one (its C signature is fixed): a struct would only repack them.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    c: &TensorDesc, a: &TensorDesc, b: &TensorDesc, bm: i32, bn: i32, bk: i32, group: i32, programs: i32,
    occupancy: i32, num_cta_in_cga: i32,
) -> FfiResult<Plan> {
    let tensors = [(a, "a", 3), (b, "b", 3), (c, "c", 3)];
    let dtype = ffi_util::check_tensors(KERNEL, &[DType::F16, DType::BF16], "f16 and bf16", &tensors)?;
    if a.shape[0] != b.shape[0] {
        return Err(invalid(format!(
            "batch dims differ: `a` is {:?} and `b` is {:?}; a shared b has batch stride 0 (b.expand(batch, k, n))",
            a.shape(),
            b.shape()
        )));
    }
    ffi_util::check_inner_dims(a, b, 2, 1)?;
    if c.shape() != [a.shape[0], a.shape[1], b.shape[2]] {
        return Err(invalid(format!(
            "`c` shape {:?} != (batch, m, n) = ({}, {}, {})",
            c.shape(),
            a.shape[0],
            a.shape[1],
            b.shape[2]
        )));
    }
    ffi_util::check_last_dims_contiguous(&[(c, "c")])?;
    let (a_op, b_op) = (operand(a, "a")?, operand(b, "b")?);
    let (ldc, sc) = output(c)?;
    if c.data == a.data || c.data == b.data {
        return Err(invalid(
            "`c` must not alias `a` or `b`: tiles of C are written while A and B are still being read",
        ));
    }
    let [batch, m, k] = dims(a, "a")?;
    let n = to_i32(b.shape[2], "n")?;
    let variant = MmaVariant::parse([bm, bn, bk, group, programs, occupancy, num_cta_in_cga])?;
    let p = Plan { dtype, batch, m, n, k, a: a_op, b: b_op, ldc, sc, variant };
    MmaVariant::check_tiles(p.tiles())?;
    Ok(p)
}

fn launch<T: Element>(p: &Plan, c: &TensorDesc, a: &TensorDesc, b: &TensorDesc, stream: &Arc<Stream>) -> FfiResult<()> {
    let (c_ptr, a_ptr, b_ptr) =
        unsafe { (ffi_util::device_ptr::<T>(c), ffi_util::device_ptr::<T>(a), ffi_util::device_ptr::<T>(b)) };
    // A_T, B_T, then the partitions' dim maps A_MAP, B_MAP: [0, 1, 2] row-major, [0, 2, 1] column-major.
    let (at, bt) = (p.a.t as i32, p.b.t as i32);
    let mut launch = p.variant.launch::<T>(&[at, bt, 0, 1 + at, 2 - at, 0, 1 + bt, 2 - bt], p.tiles());
    launch.generics.extend(p.epilogue_generics()); // PERSISTENT, C_TMA
    let (batch, m, n, k, ab, bb) = (p.batch, p.m, p.n, p.k, p.a.batches, p.b.batches);
    let (sa, sb, sc, lda, ldb, ldc) = (p.a.batch_stride, p.b.batch_stride, p.sc, p.a.ld, p.b.ld, p.ldc);
    // SAFETY: plan() checked shapes, strides and dtypes against the descriptors; the memory is
    // PyTorch's, alive until the caller's stream has run the kernel (stream-ordered allocator).
    unsafe {
        let op = device::bmm_tiles(c_ptr, a_ptr, b_ptr, batch, m, n, k, ab, bb, sa, sb, sc, lda, ldb, ldc);
        launch.enqueue(op, stream)
    }
}

// `cutile_bmm`: the descriptors, then plan(), the caller's stream and launch() (ffi_util::export!).
crate::export!(cutile_bmm(
    c, a, b; bm: i32, bn: i32, bk: i32, group: i32, programs: i32, occupancy: i32, num_cta_in_cga: i32
));

#[cfg(test)]
mod tests {
    //! CPU tests: validation, the tile order, and both forms of the entry lowered to Tile IR for sm_90 for
    //! every dtype and layout, then assembled by tileiras when the toolchain is there.
    use super::*;
    use crate::ffi_util::{assert_fails, rc, DeviceModule};

    const DEVICE: DeviceModule = DeviceModule { ast: device::__module_ast_self, name: "bmm_device" };

    fn desc(data: u64, shape: &[i64], strides: &[i64]) -> TensorDesc {
        TensorDesc::from_parts(data, DType::BF16, shape, strides)
    }

    /// (c, a, b) of a batch x m x n x k problem, every tensor contiguous.
    fn mats(batch: i64, m: i64, n: i64, k: i64) -> (TensorDesc, TensorDesc, TensorDesc) {
        (
            desc(0x3000, &[batch, m, n], &[m * n, n, 1]),
            desc(0x1000, &[batch, m, k], &[m * k, k, 1]),
            desc(0x2000, &[batch, k, n], &[k * n, n, 1]),
        )
    }

    fn default_plan(c: &TensorDesc, a: &TensorDesc, b: &TensorDesc) -> FfiResult<Plan> {
        plan(c, a, b, -1, -1, -1, -1, -1, -1, -1)
    }

    #[test]
    fn plan_takes_batch_strides_and_defaults() {
        let (c, a, b) = mats(3, 129, 257, 65);
        let p = default_plan(&c, &a, &b).unwrap();
        let row_major = |ld, batch_stride| Operand { t: false, ld, batches: 3, batch_stride };
        assert_eq!(
            (p.batch, p.m, p.n, p.k, p.a, p.b),
            (3, 129, 257, 65, row_major(65, 129 * 65), row_major(257, 65 * 257))
        );
        assert_eq!(
            (p.ldc, p.sc, p.variant.bm, p.variant.bn, p.variant.bk, p.variant.group, p.variant.programs),
            (257, 129 * 257, 128, 128, 64, 8, None)
        );
        assert_eq!((p.tiles(), p.grid()), (3 * 2 * 3, (18, 1, 1)));
    }

    #[test]
    fn transposed_operands_are_read_in_place() {
        // a = X.transpose(1, 2) of X (2, 8, 4); b = K.transpose(1, 2) of an attention K (2, 16, 8)
        // whose rows are 10 apart.
        let (c, _, _) = mats(2, 4, 16, 8);
        let a = desc(0x1000, &[2, 4, 8], &[32, 1, 4]);
        let b = desc(0x2000, &[2, 8, 16], &[160, 1, 10]);
        let p = default_plan(&c, &a, &b).unwrap();
        assert_eq!(p.a, Operand { t: true, ld: 4, batches: 2, batch_stride: 32 });
        assert_eq!(p.b, Operand { t: true, ld: 10, batches: 2, batch_stride: 160 });
    }

    #[test]
    fn a_shared_operand_is_a_batch_of_one() {
        // b.expand(5, k, n): batch stride 0; a of a batch of one has any batch stride.
        let (c, a, _) = mats(5, 4, 16, 8);
        let b = desc(0x2000, &[5, 8, 16], &[0, 16, 1]);
        assert_eq!(default_plan(&c, &a, &b).unwrap().b, Operand { t: false, ld: 16, batches: 1, batch_stride: 128 });
        // padded rows: the unused batch stride is the span of the matrix, which fits i32
        let padded = desc(0x2000, &[5, 2, 16], &[0, (1 << 31) - 32, 1]);
        let (c2, a2, _) = mats(5, 4, 16, 2);
        assert_eq!(default_plan(&c2, &a2, &padded).unwrap().b.batch_stride, i32::MAX - 15);
        let (c1, _, b1) = mats(1, 4, 16, 8);
        let a1 = desc(0x1000, &[1, 4, 8], &[7, 8, 1]);
        assert_eq!(default_plan(&c1, &a1, &b1).unwrap().a.batches, 1);
    }

    #[test]
    fn interleaved_batches_are_valid_strides() {
        // q (seq, heads, dim) seen as (heads, seq, dim): rows of the batches interleave; the output
        // likewise.
        let a = desc(0x1000, &[4, 6, 8], &[8, 32, 1]);
        let b = desc(0x2000, &[4, 8, 16], &[128, 16, 1]);
        let c = desc(0x3000, &[4, 6, 16], &[16, 64, 1]);
        let p = default_plan(&c, &a, &b).unwrap();
        assert_eq!((p.a.ld, p.a.batch_stride, p.ldc, p.sc), (32, 8, 64, 16));
    }

    #[test]
    fn plan_rejects_bad_input_with_invalid_argument() {
        let (c, a, b) = mats(2, 4, 16, 8);
        let cases = [
            (c, a, desc(0x2000, &[3, 8, 16], &[128, 16, 1]), "batch dims differ"),
            (c, a, desc(0x2000, &[2, 9, 16], &[144, 16, 1]), "inner dims differ"),
            (desc(0x3000, &[2, 4, 17], &[68, 17, 1]), a, b, "(batch, m, n) = (2, 4, 16)"),
            (c, desc(0x1000, &[2, 4, 8], &[64, 16, 2]), b, "`a` must be contiguous in its last dim"),
            (c, desc(0x1000, &[2, 4, 8], &[32, 1, 3]), b, "`a` column stride 3 < its 4-element columns"),
            (c, desc(0x1000, &[2, 4, 8], &[32, 4, 1]), b, "`a` row stride 4 < its 8-element rows"),
            (desc(0x3000, &[2, 4, 16], &[64, 1, 4]), a, b, "`c` must be contiguous in its last dim"),
            (desc(0x3000, &[2, 4, 16], &[0, 16, 1]), a, b, "`c` strides [0, 16, 1] overlap"),
            (desc(0x3000, &[2, 4, 16], &[32, 16, 1]), a, b, "overlap its rows or matrices"),
            (c, a, desc(0x2000, &[8, 16], &[16, 1]), "3 dims"),
            (desc(0x1000, &[2, 4, 16], &[64, 16, 1]), a, b, "alias"),
        ];
        for (c, a, b, needle) in cases {
            assert_fails(default_plan(&c, &a, &b), rc::INVALID_ARGUMENT, needle);
        }
    }

    #[test]
    fn plan_rejects_an_extent_beyond_i32() {
        let (c, a, b) = mats(65536, 256, 64, 128);
        assert_fails(default_plan(&c, &a, &b), rc::INVALID_ARGUMENT, "`a` spans 2147483648 elements");
        // The same b shared by every product spans one matrix.
        let (c, a, _) = mats(32768, 256, 64, 128);
        let shared = desc(0x2000, &[32768, 128, 64], &[0, 64, 1]);
        assert_eq!(default_plan(&c, &a, &shared).unwrap().b.batches, 1);
    }

    #[test]
    fn plan_rejects_bad_variants_naming_the_knob() {
        let (c, a, b) = mats(2, 64, 64, 64);
        ffi_util::assert_mma_variant_checked(|[bm, bn, bk, g, prog, occ, cga]| {
            plan(&c, &a, &b, bm, bn, bk, g, prog, occ, cga)
        });
    }

    #[test]
    fn persistent_grid_is_capped_at_the_tile_count_of_the_whole_batch() {
        let (c, a, b) = mats(16, 2048, 2048, 2048);
        let p = plan(&c, &a, &b, 128, 128, 64, 8, 132, -1, -1).unwrap();
        assert_eq!((p.tiles(), p.grid()), (16 * 256, (132, 1, 1)));
        let (c, a, b) = mats(3, 100, 100, 64);
        assert_eq!(plan(&c, &a, &b, 128, 128, 64, 8, 132, -1, -1).unwrap().grid(), (3, 1, 1));
    }

    #[test]
    fn tile_order_visits_every_output_tile_of_every_product_once() {
        // The device's own mapping (plain i32 arithmetic, also compiled for the host): every id below
        // batch * tiles_m * tiles_n lands on a distinct in-range tile, which makes the entries'
        // `unchecked_accesses` sound. Ragged last bands included (tiles_m % group != 0).
        for (batch, tiles_m, tiles_n, group) in [(1, 1, 1, 8), (3, 9, 5, 8), (2, 17, 8, 8), (4, 3, 7, 1), (2, 5, 4, 64)]
        {
            let mut seen = vec![false; (batch * tiles_m * tiles_n) as usize];
            for id in 0..batch * tiles_m * tiles_n {
                let (q, bm, bn) = device::tile_coords(id, tiles_m, tiles_n, group);
                assert!((0..batch).contains(&q) && (0..tiles_m).contains(&bm) && (0..tiles_n).contains(&bn));
                let slot = &mut seen[((q * tiles_m + bm) * tiles_n + bn) as usize];
                assert!(!*slot, "id {id} -> ({q}, {bm}, {bn}) twice");
                *slot = true;
            }
        }
        // One product's tiles first, in bands: ids walk down the band's tile rows.
        let order: Vec<_> = (0..5).map(|id| device::tile_coords(id, 2, 2, 2)).collect();
        assert_eq!(order, [(0, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 1), (1, 0, 0)]);
    }

    #[test]
    fn plan_rejects_f32_and_integers_as_unsupported() {
        for dtype in [DType::F32, DType::I32] {
            let (c, a, b) = mats(2, 4, 16, 8);
            let with = |d: TensorDesc| TensorDesc { dtype: dtype as i32, ..d };
            let e = default_plan(&with(c), &with(a), &with(b));
            assert_fails(e, rc::UNSUPPORTED_DTYPE, "bmm supports f16 and bf16");
        }
    }

    #[test]
    fn both_forms_lower_to_tile_ir_for_sm90() {
        for dtype in ["f16", "bf16"] {
            for persistent in ["false", "true"] {
                // Row-major A and B; column-major B (Q @ K^T); both column-major.
                for (tile, layout) in [
                    (["128", "128", "64"], ["0", "0", "0", "1", "2", "0", "1", "2"]),
                    (["64", "64", "32"], ["0", "1", "0", "1", "2", "0", "2", "1"]),
                    (["128", "256", "64"], ["1", "1", "0", "2", "1", "0", "2", "1"]),
                ] {
                    // C_TMA true and false: C's store through TMA or lane by lane (allow_tma = false)
                    for (c_tma, no_tma) in [("true", false), ("false", true)] {
                        let generics =
                            [&[dtype][..], &tile[..], &["8"][..], &layout[..], &[persistent, c_tma]].concat();
                        let ir = DEVICE.assert_lowers("bmm_tiles", &generics, &["mma", "store_view_tko"]);
                        assert_eq!(ir.contains("allow_tma = false"), no_tma, "bmm_tiles<{}>", generics.join(","));
                    }
                }
            }
        }
    }

    /// The perf configs' integer arguments as the launcher passes them (batch, m, n, k, B as given,
    /// transposed or shared): what the run-time JIT specializes on (`assume div_by<16>` each).
    fn perf_ints(batch: i32, m: i32, n: i32, k: i32, b_t: bool, shared: bool) -> [(&'static str, i32); 12] {
        let ldb = if b_t { k } else { n };
        [
            ("batch", batch),
            ("m", m),
            ("n", n),
            ("k", k),
            ("a_batches", batch),
            ("b_batches", if shared { 1 } else { batch }),
            ("sa", m * k),
            ("sb", k * n),
            ("sc", m * n),
            ("lda", k),
            ("ldb", ldb),
            ("ldc", n),
        ]
    }

    #[test]
    fn perf_config_specializations_lower_and_assemble_for_sm90() {
        // As the launcher compiles the shapes at run time (every pointer 16-byte aligned,
        // every size a multiple of 16: one `assume div_by<16>` each): each form of op.py's
        // FLOP_BOUND at 16x2048^3, its first at B shared, and at Q @ K^T (B transposed, k = 128) the
        // forms STORE_BOUND adds and the two it starts from. The cubins to read in the SASS
        // (TILEKIT_CUBIN_DIR; NOTES.md, "The variant space": spills, smem, multicast loads).
        use crate::ffi_util::ALIGNED_PTR;
        let ptrs = [("c_ptr", ALIGNED_PTR), ("a_ptr", ALIGNED_PTR), ("b_ptr", ALIGNED_PTR)];
        let (row, bt) = (["0", "0", "0", "1", "2", "0", "1", "2"], ["0", "1", "0", "1", "2", "0", "2", "1"]);
        let (cube, shared, qkt) = (
            perf_ints(16, 2048, 2048, 2048, false, false),
            perf_ints(16, 1024, 4096, 4096, false, true),
            perf_ints(128, 2048, 2048, 128, true, false),
        );
        // bmm_tiles' PERSISTENT (C_TMA true: every n here is a multiple of 16)
        let (tiles, persistent) = ("false", "true");
        // (PERSISTENT, [bm, bn, bk], occupancy, num_cta_in_cga, layout, ints, name)
        let cases = [
            (tiles, ["128", "128", "64"], 2, 1, row, cube, "16x2048^3"),
            (tiles, ["128", "128", "64"], 1, 1, row, cube, "16x2048^3"),
            (tiles, ["128", "256", "64"], 1, 2, row, cube, "16x2048^3"),
            (tiles, ["256", "128", "64"], 1, 2, row, cube, "16x2048^3"),
            (tiles, ["128", "128", "64"], 2, 2, row, cube, "16x2048^3"),
            (persistent, ["128", "128", "64"], 1, 1, row, cube, "16x2048^3"),
            (persistent, ["128", "128", "64"], 1, 2, row, cube, "16x2048^3"),
            (persistent, ["128", "256", "64"], 1, 2, row, cube, "16x2048^3"),
            (persistent, ["256", "128", "64"], 1, 2, row, cube, "16x2048^3"),
            (tiles, ["128", "256", "64"], 1, 1, row, cube, "16x2048^3"), // one CTA: 8 worker warps
            (persistent, ["128", "256", "64"], 1, 1, row, cube, "16x2048^3"),
            (tiles, ["128", "128", "64"], 2, 1, row, shared, "B shared"),
            (tiles, ["128", "128", "64"], 2, 1, bt, qkt, "QKt"),
            (tiles, ["128", "128", "128"], 2, 1, bt, qkt, "QKt"),
            (persistent, ["128", "128", "64"], 1, 1, bt, qkt, "QKt"),
            (persistent, ["128", "128", "128"], 1, 1, bt, qkt, "QKt"),
        ];
        for (persistent, tile, occupancy, cga, layout, ints, name) in cases {
            let generics = [&["bf16"][..], &tile[..], &["8"][..], &layout[..], &[persistent, "true"]].concat();
            // the hints the launch gives (MmaVariant::options; warps: 8 for a one-CTA 128 x 256)
            let [bm, bn, bk] = tile.map(|t| t.parse::<i32>().unwrap());
            let variant = MmaVariant::parse([bm, bn, bk, 8, 0, occupancy, cga]).unwrap();
            assert_eq!(variant.warps().is_some(), bm * bn == 128 * 256 && cga == 1, "{name} {tile:?} cga {cga}");
            let options = variant.options();
            let what = format!(" {name} occupancy {occupancy} cga {cga} persistent {persistent}");
            DEVICE.assert_div_hints_lower("bmm_tiles", &generics, &ptrs, &ints, options, &what);
        }
    }

    #[test]
    fn the_launch_stores_c_through_tma_only_into_whole_16_byte_rows() {
        // c's rows 264 elements apart: 257 columns (a column slice) C_TMA false, 256 true.
        let (_, a, b) = mats(2, 129, 257, 65);
        let c = desc(0x3000, &[2, 129, 257], &[129 * 264, 264, 1]);
        assert_eq!(plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1).unwrap().epilogue_generics(), ["false", "false"]);
        let (_, a, b) = mats(2, 129, 256, 65);
        let c = desc(0x3000, &[2, 129, 256], &[129 * 264, 264, 1]);
        assert_eq!(plan(&c, &a, &b, -1, -1, -1, -1, -1, -1, -1).unwrap().epilogue_generics(), ["false", "true"]);
    }
}
