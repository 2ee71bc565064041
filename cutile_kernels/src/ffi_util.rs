//! The C ABI shared by every kernel export: the tensor descriptor, dtype codes, return codes,
//! the panic guard, descriptor validation, and the device/stream set-up borrowed from the caller.
//!
//! Python's side of the same facts is `tools/tilekit/ffi.py`; `tilekit_abi_json()` exports these
//! definitions so a test can prove the two agree (tests/kit/test_ffi.py).
//!
//! Rules every export follows (DESIGN.md "C ABI"): descriptors are borrowed, never freed; strides
//! are in elements; the last two arguments are `device_id: i32, stream: u64` (the caller's
//! stream, never a private one); the body runs inside [`guard`] so a panic becomes -7.
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// Bumped whenever the descriptor layout or a code's meaning changes.
pub const ABI_VERSION: i32 = 1;
/// Dimensions a descriptor can carry.
pub const MAX_DIMS: usize = 8;

/// One tensor crossing the boundary. `#[repr(C)]`: the Python cdef must match field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TensorDesc {
    /// Device pointer of element [0, 0, ...].
    pub data: u64,
    pub ndim: i32,
    /// A [`DType`] code.
    pub dtype: i32,
    pub shape: [i64; MAX_DIMS],
    /// In elements, not bytes.
    pub strides: [i64; MAX_DIMS],
}

/// dtype codes: extend, never renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum DType {
    F32 = 0,
    F16 = 1,
    BF16 = 2,
    I32 = 3,
    I64 = 4,
}

impl DType {
    pub const ALL: [DType; 5] = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64];

    pub fn from_code(code: i32) -> Option<DType> {
        DType::ALL.into_iter().find(|d| *d as i32 == code)
    }

    /// The short name used everywhere else (cutile generics, records): f32, f16, bf16, i32, i64.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
        }
    }

    pub fn size_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
        }
    }
}

/// Return codes of every export.
pub mod rc {
    pub const OK: i32 = 0;
    /// Not returned: the "let the compiler choose" value of optional compile options.
    pub const COMPILER_DEFAULT: i32 = -1;
    pub const UNSUPPORTED_DTYPE: i32 = -2;
    pub const JIT_OR_LAUNCH: i32 = -3;
    pub const DEVICE_OR_STREAM: i32 = -4;
    pub const NULL_DESCRIPTOR: i32 = -5;
    pub const INVALID_ARGUMENT: i32 = -6;
    pub const PANIC: i32 = -7;

    /// (code, name, meaning) — the table Python's exceptions quote.
    pub const TABLE: [(i32, &str, &str); 8] = [
        (OK, "OK", "ok"),
        (COMPILER_DEFAULT, "COMPILER_DEFAULT", "compiler default (sentinel for optional compile options)"),
        (UNSUPPORTED_DTYPE, "UNSUPPORTED_DTYPE", "unsupported dtype"),
        (JIT_OR_LAUNCH, "JIT_OR_LAUNCH", "JIT compile or kernel launch failed"),
        (DEVICE_OR_STREAM, "DEVICE_OR_STREAM", "CUDA device or stream set-up failed"),
        (NULL_DESCRIPTOR, "NULL_DESCRIPTOR", "null tensor descriptor"),
        (INVALID_ARGUMENT, "INVALID_ARGUMENT", "invalid argument (shape, stride, grid or variant)"),
        (PANIC, "PANIC", "Rust panic caught at the C boundary"),
    ];
}

/// An error on its way to becoming a return code; `msg` says what was wrong and how to fix it.
#[derive(Debug)]
pub struct FfiError {
    pub code: i32,
    pub msg: String,
}

pub type FfiResult<T> = Result<T, FfiError>;

pub fn err(code: i32, msg: impl Into<String>) -> FfiError {
    FfiError { code, msg: msg.into() }
}

pub fn invalid(msg: impl Into<String>) -> FfiError {
    err(rc::INVALID_ARGUMENT, msg)
}

/// A variant's compile hint: -1 (`rc::COMPILER_DEFAULT`) leaves it to tileiras, a value `ok`
/// accepts is passed on, anything else is refused naming the hint and the values it takes.
pub fn hint(v: i32, name: &str, ok: impl Fn(i32) -> bool, allowed: &str) -> FfiResult<Option<i32>> {
    match v {
        rc::COMPILER_DEFAULT => Ok(None),
        v if ok(v) => Ok(Some(v)),
        v => Err(invalid(format!("variant {name}={v}: use {allowed}, or -1 for the compiler's default"))),
    }
}

/// `occupancy`: the CTAs per SM tileiras plans registers for (Tile IR accepts 1..=32).
pub fn occupancy_hint(v: i32) -> FfiResult<Option<i32>> {
    hint(v, "occupancy", |o| (1..=32).contains(&o), "1..=32")
}

/// `warps`: worker warps per CTA (`num_worker_warps_per_cta`). The Tile IR 13.4 bytecode that
/// tileiras 13.4 reads accepts only 4 or 8 (13.3 and 13.5 take powers of two up to 32).
pub fn warps_hint(v: i32) -> FfiResult<Option<i32>> {
    hint(v, "warps", |w| w == 4 || w == 8, "4 or 8 (what Tile IR 13.4 accepts)")
}

/// Compile options carrying the optional occupancy and worker-warps hints.
pub fn compile_options(occupancy: Option<i32>, warps: Option<i32>) -> cutile::tile_kernel::CompileOptions {
    let mut o = cutile::tile_kernel::CompileOptions::default();
    if let Some(v) = occupancy {
        o = o.occupancy(v);
    }
    if let Some(v) = warps {
        o = o.num_worker_warps_per_cta(v);
    }
    o
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|slot| *slot.borrow_mut() = c);
}

/// Runs an export's body: `Ok` → 0, `Err(e)` → `e.code` (message kept for
/// `tilekit_last_error`), a panic → -7 with its message on stderr. Nothing unwinds into C.
pub fn guard(kernel: &str, body: impl FnOnce() -> FfiResult<()>) -> i32 {
    set_last_error("");
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => rc::OK,
        Ok(Err(e)) => {
            set_last_error(&format!("{kernel}: {}", e.msg));
            e.code
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            let msg = format!("{kernel}: Rust panic caught at the C boundary: {what}");
            eprintln!("tilekit: {msg}");
            set_last_error(&msg);
            rc::PANIC
        }
    }
}

/// The message of the last failed call on this thread ("" after a success).
#[no_mangle]
pub extern "C" fn tilekit_last_error() -> *const c_char {
    LAST_ERROR.with(|slot| slot.borrow().as_ptr())
}

/// The ABI as JSON (version, descriptor layout, dtype and return codes), for the cross-check test.
#[no_mangle]
pub extern "C" fn tilekit_abi_json() -> *const c_char {
    static JSON: OnceLock<CString> = OnceLock::new();
    JSON.get_or_init(|| CString::new(abi_json()).unwrap()).as_ptr()
}

/// cutile's JIT counters in this process as JSON: `compiles` (tileiras runs), and the disk cache's
/// `enabled`, `hits`, `misses`, `puts` and `io_errors` (a warm cache: no compile after start-up).
#[no_mangle]
pub extern "C" fn tilekit_jit_stats() -> *const c_char {
    thread_local! {
        static JSON: RefCell<CString> = RefCell::new(CString::default());
    }
    let s = cutile::jit_cache::stats();
    let text = format!(
        "{{\"compiles\": {}, \"enabled\": {}, \"hits\": {}, \"misses\": {}, \"puts\": {}, \"io_errors\": {}}}",
        cutile::jit_cache::jit_backend_compile_count(),
        cutile::jit_cache::is_enabled(),
        s.hits,
        s.misses,
        s.puts,
        s.io_errors
    );
    JSON.with(|slot| {
        *slot.borrow_mut() = CString::new(text).unwrap_or_default();
        slot.borrow().as_ptr()
    })
}

fn abi_json() -> String {
    let dtypes: Vec<String> = DType::ALL.iter().map(|d| format!("\"{}\": {}", d.name(), *d as i32)).collect();
    let codes: Vec<String> = rc::TABLE.iter().map(|(c, n, _)| format!("\"{n}\": {c}")).collect();
    let d = TensorDesc { data: 0, ndim: 0, dtype: 0, shape: [0; MAX_DIMS], strides: [0; MAX_DIMS] };
    let base = &d as *const _ as usize;
    let off = |p: *const u8| p as usize - base;
    format!(
        "{{\"abi_version\": {ABI_VERSION}, \"max_dims\": {MAX_DIMS}, \"tensor_desc_size\": {size}, \
         \"tensor_desc_offsets\": {{\"data\": {o0}, \"ndim\": {o1}, \"dtype\": {o2}, \"shape\": {o3}, \"strides\": {o4}}}, \
         \"dtypes\": {{{dtypes}}}, \"return_codes\": {{{codes}}}, \"kernels_dir\": {kernels_dir:?}}}",
        size = std::mem::size_of::<TensorDesc>(),
        o0 = off(&d.data as *const u64 as *const u8),
        o1 = off(&d.ndim as *const i32 as *const u8),
        o2 = off(&d.dtype as *const i32 as *const u8),
        o3 = off(d.shape.as_ptr() as *const u8),
        o4 = off(d.strides.as_ptr() as *const u8),
        dtypes = dtypes.join(", "),
        codes = codes.join(", "),
        kernels_dir = env!("TILEKIT_KERNELS_DIR"),
    )
}

// ---------------------------------------------------------------------------------------------
// Descriptor validation. Every check names the argument and says what was expected.

/// Borrow a descriptor: null → -5.
///
/// # Safety
/// `p` is null or points to a live `TensorDesc` for the duration of the call (Python keeps each
/// packed descriptor alive until the call returns).
pub unsafe fn desc<'a>(p: *const TensorDesc, arg: &str) -> FfiResult<&'a TensorDesc> {
    p.as_ref().ok_or_else(|| err(rc::NULL_DESCRIPTOR, format!("descriptor `{arg}` is null")))
}

impl TensorDesc {
    /// A descriptor from its parts (the kernels' Rust tests build their inputs with it).
    /// Panics if `shape` and `strides` differ in length or exceed MAX_DIMS.
    pub fn from_parts(data: u64, dtype: DType, shape: &[i64], strides: &[i64]) -> TensorDesc {
        assert!(shape.len() == strides.len() && shape.len() <= MAX_DIMS, "shape {shape:?} / strides {strides:?}");
        let mut d = TensorDesc {
            data,
            ndim: shape.len() as i32,
            dtype: dtype as i32,
            shape: [0; MAX_DIMS],
            strides: [0; MAX_DIMS],
        };
        d.shape[..shape.len()].copy_from_slice(shape);
        d.strides[..strides.len()].copy_from_slice(strides);
        d
    }

    pub fn dtype(&self) -> FfiResult<DType> {
        DType::from_code(self.dtype).ok_or_else(|| {
            err(
                rc::UNSUPPORTED_DTYPE,
                format!("unknown dtype code {} (known: 0 f32, 1 f16, 2 bf16, 3 i32, 4 i64)", self.dtype),
            )
        })
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape[..(self.ndim.clamp(0, MAX_DIMS as i32) as usize)]
    }

    pub fn strides(&self) -> &[i64] {
        &self.strides[..(self.ndim.clamp(0, MAX_DIMS as i32) as usize)]
    }

    pub fn numel(&self) -> i64 {
        self.shape().iter().product()
    }
}

/// `arg` has exactly `ndim` dims, all > 0, a non-null pointer, and strides >= 0.
pub fn check_tensor(d: &TensorDesc, arg: &str, ndim: i32) -> FfiResult<()> {
    if d.ndim != ndim {
        return Err(invalid(format!("`{arg}` must have {ndim} dims, got ndim={}", d.ndim)));
    }
    if let Some(i) = d.shape().iter().position(|&s| s <= 0) {
        return Err(invalid(format!(
            "`{arg}` has an empty or negative dim {i} (shape {:?}); empty tensors are not launched",
            d.shape()
        )));
    }
    if let Some(i) = d.strides().iter().position(|&s| s < 0) {
        return Err(invalid(format!("`{arg}` has a negative stride in dim {i} (strides {:?})", d.strides())));
    }
    if d.data == 0 {
        return Err(invalid(format!("`{arg}` has a null data pointer")));
    }
    Ok(())
}

/// The last dim is contiguous (stride 1), as the row kernels load whole rows.
pub fn check_last_dim_contiguous(d: &TensorDesc, arg: &str) -> FfiResult<()> {
    match d.strides().last() {
        Some(1) => Ok(()),
        _ => Err(invalid(format!(
            "`{arg}` must be contiguous in its last dim (strides {:?}); pass .contiguous()",
            d.strides()
        ))),
    }
}

pub fn check_same_shape(a: &TensorDesc, an: &str, b: &TensorDesc, bn: &str) -> FfiResult<()> {
    if a.shape() == b.shape() {
        Ok(())
    } else {
        Err(invalid(format!("`{an}` shape {:?} != `{bn}` shape {:?}", a.shape(), b.shape())))
    }
}

pub fn check_same_dtype(a: &TensorDesc, an: &str, b: &TensorDesc, bn: &str) -> FfiResult<DType> {
    let (da, db) = (a.dtype()?, b.dtype()?);
    if da == db {
        Ok(da)
    } else {
        Err(invalid(format!("`{an}` is {} but `{bn}` is {}: all tensors must share one dtype", da.name(), db.name())))
    }
}

/// `v` is a power of two in [lo, hi] (tile widths, rows per tile block).
pub fn pow2_in(v: i32, lo: i32, hi: i32) -> bool {
    v >= lo && v <= hi && (v & (v - 1)) == 0
}

/// Row stride of a 2-D descriptor whose rows hold `len` elements; a single row has no meaningful
/// stride, so `len` is used. A stride below `len` is refused (`len_desc` names `len` in the
/// message, e.g. `n=8`).
pub fn row_stride(d: &TensorDesc, len: i32, arg: &str, len_desc: std::fmt::Arguments) -> FfiResult<i32> {
    if d.shape[0] == 1 {
        return Ok(len);
    }
    let s = to_i32(d.strides[0], &format!("{arg} row stride"))?;
    if s < len {
        return Err(invalid(format!("`{arg}` row stride {s} < {len_desc}: rows would overlap")));
    }
    Ok(s)
}

/// A value that must fit the i32 the kernels index with.
pub fn to_i32(v: i64, what: &str) -> FfiResult<i32> {
    i32::try_from(v).map_err(|_| invalid(format!("{what}={v} does not fit in i32")))
}

// ---------------------------------------------------------------------------------------------
// The steps every plan() shares, in the order the kernels run them.

/// The element types of the row kernels (rms_norm, softmax, silu_and_mul).
pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The checks a plan() starts with: the first tensor's dtype is one of `ok` (else -2, "`x` is i32;
/// `kernel` supports `ok_names`"), every other tensor has that dtype, then each tensor in turn has
/// its (arg, ndim) ([`check_tensor`]). Returns the dtype.
pub fn check_tensors(
    kernel: &str, ok: &[DType], ok_names: &str, tensors: &[(&TensorDesc, &str, i32)],
) -> FfiResult<DType> {
    let (first, first_arg, _) = tensors[0];
    let dtype = first.dtype()?;
    if !ok.contains(&dtype) {
        return Err(err(
            rc::UNSUPPORTED_DTYPE,
            format!("{first_arg} is {}; {kernel} supports {ok_names}", dtype.name()),
        ));
    }
    for &(d, arg, _) in &tensors[1..] {
        check_same_dtype(first, first_arg, d, arg)?;
    }
    for &(d, arg, ndim) in tensors {
        check_tensor(d, arg, ndim)?;
    }
    Ok(dtype)
}

/// [`check_tensors`] for a row kernel: its element types are [`FLOATS`].
pub fn check_float_tensors(kernel: &str, tensors: &[(&TensorDesc, &str, i32)]) -> FfiResult<DType> {
    check_tensors(kernel, &FLOATS, "f32, f16, bf16", tensors)
}

/// [`check_last_dim_contiguous`] for each (descriptor, arg) in turn.
pub fn check_last_dims_contiguous(tensors: &[(&TensorDesc, &str)]) -> FfiResult<()> {
    tensors.iter().try_for_each(|&(d, arg)| check_last_dim_contiguous(d, arg))
}

/// The inner dims of a product A · B agree: dim `a_k` of `a` (its columns) equals dim `b_k` of `b`
/// (its rows); else an invalid argument naming both shapes. matmul's (1, 0) and bmm's (2, 1).
pub fn check_inner_dims(a: &TensorDesc, b: &TensorDesc, a_k: usize, b_k: usize) -> FfiResult<()> {
    if a.shape[a_k] != b.shape[b_k] {
        return Err(invalid(format!(
            "inner dims differ: `a` is {:?} and `b` is {:?} (a's columns must equal b's rows)",
            a.shape(),
            b.shape()
        )));
    }
    Ok(())
}

/// A variant knob: -1 (`rc::COMPILER_DEFAULT`) picks `default`, anything else is kept as given.
pub fn or_default(v: i32, default: i32) -> i32 {
    if v == rc::COMPILER_DEFAULT {
        default
    } else {
        v
    }
}

/// A row kernel's tile, `block` columns by `rows` rows, after the defaults (-1: `default_block`,
/// then `default_rows(block)`): block a power of two in [16, max_elems], rows a power of two in
/// [1, max_rows], block * rows <= max_elems (beyond it registers spill).
pub fn row_tile(
    block: i32, rows: i32, default_block: i32, default_rows: impl FnOnce(i32) -> i32, max_rows: i32, max_elems: i32,
) -> FfiResult<(i32, i32)> {
    let block = or_default(block, default_block);
    let rows = if rows == rc::COMPILER_DEFAULT { default_rows(block) } else { rows };
    if !pow2_in(block, 16, max_elems) || !pow2_in(rows, 1, max_rows) || block * rows > max_elems {
        return Err(invalid(format!(
            "variant block={block} rows={rows}: block must be a power of two in [16, {max_elems}], rows a power of two in [1, {max_rows}], block*rows <= {max_elems}"
        )));
    }
    Ok((block, rows))
}

/// The tail tile of a row kernel's variant (rms_norm, layer_norm, softmax): -1 or 0, none; else a
/// power of two in [16, block] with block < n <= block + tail (the body tile full, the row inside
/// body and tail) and rows * (block + tail) <= max_elems; otherwise -6 naming the rule.
pub fn tail_tile(tail: i32, block: i32, rows: i32, n: i32, max_elems: i32) -> FfiResult<Option<i32>> {
    if tail == rc::COMPILER_DEFAULT || tail == 0 {
        return Ok(None);
    }
    let fits = (16..=block).contains(&tail) && (tail as u32).is_power_of_two();
    let covers = block < n && n as i64 <= block as i64 + tail as i64;
    if !fits || !covers || rows as i64 * (block as i64 + tail as i64) > max_elems as i64 {
        return Err(invalid(format!(
            "variant block={block} rows={rows} tail={tail}: tail must be a power of two in [16, block] with \
             block < n={n} <= block + tail and rows * (block + tail) <= {max_elems}; -1 or 0 for none"
        )));
    }
    Ok(Some(tail))
}

/// The default tile width that holds a whole row of `n`: the power of two >= n (at least 16), if
/// it is at most `max`.
pub fn whole_row_block(n: i32, max: i32) -> Option<i32> {
    // u64: the power of two above n > 2^30 is 2^31, past i32.
    let pow2 = (n.max(16) as u64).next_power_of_two();
    (pow2 <= max as u64).then_some(pow2 as i32)
}

/// The default rows per tile block: `tile_elems / block`, but no more rows than m has (rounded up
/// to a power of two) or 64.
pub fn default_rows(tile_elems: i32, block: i32, m: i32) -> i32 {
    let m_pow2 = (m.max(1) as u64).next_power_of_two().min(64) as i32; // u64: 2^31 for m > 2^30
    (tile_elems / block).clamp(1, 64).min(m_pow2)
}

/// A row kernel's validated launch (rms_norm, softmax, silu_and_mul): the variant, tiles of `rows`
/// x `block` and the compile hints, over `m` rows of `n` output columns whose rows lie `stride_x`
/// (x) and `stride_y` (out) elements apart.
#[derive(Debug, PartialEq)]
pub struct RowPlan {
    pub block: i32,
    pub rows: i32,
    /// None: the compiler's default.
    pub occupancy: Option<i32>,
    /// Worker warps per CTA; None: the compiler's default (always, for a kernel without the knob).
    pub warps: Option<i32>,
    pub m: i32,
    pub n: i32,
    pub stride_x: i32,
    pub stride_y: i32,
}

impl RowPlan {
    /// Tile blocks down the rows: ceil(m / rows) (counted in i64: m + rows - 1 wraps i32 for m
    /// near i32::MAX).
    pub fn row_tiles(&self) -> i32 {
        ((self.m as i64 + self.rows as i64 - 1) / self.rows as i64) as i32
    }

    /// The launch of `grid` tile blocks: generics T, ROWS, BLOCK (every row kernel's entries take
    /// them in that order) and the hints.
    pub fn launch<T: Element>(&self, grid: u32) -> Launch {
        Launch::new::<T>(&[self.rows, self.block], (grid, 1, 1), compile_options(self.occupancy, self.warps))
    }
}

/// A validated launch of a row kernel whose one output has a row stride of its own (the backward
/// kernels': silu_and_mul_backward, gelu_and_mul_backward, softmax_backward). Each says what `row.stride_x` and
/// `row.stride_y` hold for it.
#[derive(Debug, PartialEq)]
pub struct OutPlan {
    pub dtype: DType,
    pub row: RowPlan,
    /// out's row stride.
    pub stride_out: i32,
}

/// Whether a masked pointer-tile entry (`device_util::views::tile_pointers` + `tile_mask`) may run
/// over `m` rows of `width` elements in `rows` x `block` tiles, for each tensor it addresses with
/// its row stride in `strides`: every i32 element offset it forms fits, up to the last lane of the
/// last (padded) tile, so even the masked-off lanes' offsets do not wrap.
pub fn masked_offsets_fit(m: i32, width: i32, rows: i32, block: i32, strides: &[i32]) -> bool {
    let round_up = |v: i32, to: i32| (v as i64 + to as i64 - 1) / to as i64 * to as i64;
    strides.iter().all(|&s| (round_up(m, rows) - 1) * s as i64 + round_up(width, block) <= i32::MAX as i64)
}

/// VEC (elements per 16 bytes) where the aligned-row entries (`device_util::views::aligned_rows`:
/// each row's 16-byte-aligned body through 16-byte accesses, its head and ragged end through a
/// narrow edge tile) should and may run a whole-row `rows` x `block` tile over `m` x `n`: some row
/// does not start or end on a 16-byte boundary (a row stride or n no multiple of VEC), which a
/// plain masked tile would read element by element; every tensor's base is 16-byte aligned and
/// its row stride has the same remainder mod VEC (so a row's head is the same in each); the body
/// of whole VEC groups fits the tile ((n / VEC) * VEC <= block, e.g. n = 4097 in 4096 lanes); and
/// every i32 offset formed, up to a padded row tile's body and edge, fits. None: the masked entry.
pub fn aligned_rows_vec(dtype: DType, m: i32, n: i32, rows: i32, block: i32, tensors: &[(u64, i32)]) -> Option<i32> {
    let vec = vec_elems(dtype);
    let &(_, first) = tensors.first()?;
    let strides: Vec<i32> = tensors.iter().map(|&(_, s)| s).collect();
    let misaligned = n % vec != 0 || strides.iter().any(|s| s % vec != 0);
    let same_heads = strides.iter().all(|s| s % vec == first % vec);
    let bases = tensors.iter().all(|&(p, _)| p % 16 == 0);
    let fits = aligned_body_fits(dtype, n, block) && masked_offsets_fit(m, block.max(n) + vec, rows, 1, &strides);
    (misaligned && same_heads && bases && fits).then_some(vec)
}

/// VEC: the elements of `dtype` in 16 bytes (one 16-byte access).
pub fn vec_elems(dtype: DType) -> i32 {
    (16 / dtype.size_bytes()) as i32
}

/// Whether a tile store into rows of `n` elements may go through TMA: only where a row is a whole
/// number of 16-byte units. An H100 (driver 580, tileiras 13.4) stored a matmul's ragged edge tile
/// through TMA with the rest of the row's last 16-byte unit too (the columns past n up to the next
/// multiple of 8 bf16 elements), which belong to the caller when the output is a column slice; its
/// TMA loads filled past n with zeros exactly (kernels/matmul/NOTES.md, "C += A B"). Entries whose
/// output may lie in padded rows take it as a const generic (matmul's and bmm's C_TMA,
/// cross_entropy's G_TMA) and store lane by lane where it is false (device_util's `store_tile_2d`).
///
/// ```
/// use cutile_kernels::ffi_util::{tma_store_exact, DType};
/// assert!(tma_store_exact(DType::BF16, 4096) && !tma_store_exact(DType::BF16, 257));
/// assert!(tma_store_exact(DType::F32, 4) && !tma_store_exact(DType::F16, 4));
/// ```
pub fn tma_store_exact(dtype: DType, n: i32) -> bool {
    n % vec_elems(dtype) == 0
}

/// Whether a row of n elements' body of whole 16-byte groups, (n / VEC) * VEC, fits a `block`-wide
/// tile (n = 4097 in 4096 lanes): the aligned-row entries hold such rows whole.
pub fn aligned_body_fits(dtype: DType, n: i32, block: i32) -> bool {
    let vec = vec_elems(dtype);
    n / vec * vec <= block
}

/// The aligned-row entries' generics after the others: VEC and EDGE = 2 * VEC, for
/// [`aligned_rows_vec`]'s Some(VEC) (none for None).
pub fn aligned_generics(vec: Option<i32>) -> impl Iterator<Item = String> {
    vec.into_iter().flat_map(|v| [v.to_string(), (2 * v).to_string()])
}

/// Bytes of the aligned persistent entries' workspace for one row vector (a norm's weight or bias):
/// ROWS x BLOCK elements of T per tile block of the `grid` (`device_util::views::restage`).
pub fn restage_bytes<T: Element>(grid: i32, row: &RowPlan) -> usize {
    grid.max(1) as usize * row.rows as usize * row.block as usize * std::mem::size_of::<T>()
}

/// Elements of the aligned persistent entries' workspace at most, per row vector (2^26: 128 MiB of
/// f16, far past any persistent grid the SMs hold).
pub const MAX_RESTAGE_ELEMS: i32 = 1 << 26;

/// The largest aligned persistent grid of `rows` x `block` tiles: its workspace holds at most
/// [`MAX_RESTAGE_ELEMS`] per vector, so the slice offsets (pid * 2 * rows * block + rows * block,
/// layer_norm's w and b) stay far inside i32 whatever `programs` the caller asked for.
pub fn restage_grid_cap(rows: i32, block: i32) -> i32 {
    (MAX_RESTAGE_ELEMS / (rows * block).max(1)).max(1)
}

/// The variant of an MMA kernel (matmul, bmm): output tiles of `bm` x `bn` walked in K steps of
/// `bk`, visited in bands of `group` tile rows, by one tile block per output tile or a persistent
/// grid, and the compile hints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MmaVariant {
    pub bm: i32,
    pub bn: i32,
    pub bk: i32,
    pub group: i32,
    /// None: one output tile per tile block; Some(p): persistent grid of p tile blocks.
    pub programs: Option<u32>,
    /// None: the compiler's default.
    pub occupancy: Option<i32>,
    pub num_cta_in_cga: Option<i32>,
}

impl MmaVariant {
    /// Default variant: 128 x 128 output tiles with 64-deep K steps, bands of 8 tile rows, one
    /// output tile per tile block, the compiler's occupancy and cluster size. On the H200 (sweep of
    /// 2026-11-29, kernels/matmul/NOTES.md) this was the fastest tile tileiras 13.4 builds; the
    /// usual Hopper 128 x 256 tile ran at ~45 TFLOP/s in one CTA on the default 4 worker warps (its
    /// accumulator does not fit their registers: tileiras spills) and reached ~650-690 TFLOP/s as a
    /// 2-CTA cluster; in one CTA it now runs on 8 worker warps ([`warps`](Self::warps)).
    pub const DEFAULT_BM: i32 = 128;
    pub const DEFAULT_BN: i32 = 128;
    pub const DEFAULT_BK: i32 = 64;
    pub const DEFAULT_GROUP: i32 = 8;
    /// Largest output tile (BM * BN) a variant may ask for: 256 x 256, the f32 accumulator of
    /// which fills the register file of a CTA pair.
    pub const MAX_TILE_ELEMS: i32 = 256 * 256;
    /// The output tile (128 x 256 or 256 x 128) that one CTA runs on 8 worker warps
    /// ([`warps`](Self::warps)).
    pub const WIDE_TILE_ELEMS: i32 = 128 * 256;

    /// The export's variant knobs [bm, bn, bk, group, programs, occupancy, num_cta_in_cga],
    /// validated: -1 picks the default of each (the compiler's, for the two hints); a bad one is an
    /// invalid argument naming it.
    pub fn parse(knobs: [i32; 7]) -> FfiResult<Self> {
        let [bm, bn, bk, group, programs, occupancy, num_cta_in_cga] = knobs;
        let (bm, bn, bk, group) = (
            or_default(bm, Self::DEFAULT_BM),
            or_default(bn, Self::DEFAULT_BN),
            or_default(bk, Self::DEFAULT_BK),
            or_default(group, Self::DEFAULT_GROUP),
        );
        if !pow2_in(bm, 16, 256) || !pow2_in(bn, 16, 256) || !pow2_in(bk, 16, 256) || bm * bn > Self::MAX_TILE_ELEMS {
            return Err(invalid(format!(
                "variant bm={bm} bn={bn} bk={bk}: each must be a power of two in [16, 256], bm*bn <= {}",
                Self::MAX_TILE_ELEMS
            )));
        }
        if !(1..=64).contains(&group) {
            return Err(invalid(format!(
                "variant group={group}: use 1..=64 tile rows per band, or -1 for {}",
                Self::DEFAULT_GROUP
            )));
        }
        let programs = match programs {
            rc::COMPILER_DEFAULT | 0 => None,
            p if p > 0 => Some(p as u32),
            p => {
                return Err(invalid(format!(
                    "variant programs={p}: use 0 (one tile per tile block), P > 0 (persistent grid), or -1"
                )))
            }
        };
        let occupancy = occupancy_hint(occupancy)?;
        let num_cta_in_cga =
            hint(num_cta_in_cga, "num_cta_in_cga", |v| pow2_in(v, 1, 16), "a power of two in [1, 16]")?;
        Ok(MmaVariant { bm, bn, bk, group, programs, occupancy, num_cta_in_cga })
    }

    /// The output tiles of `batch` (m, n) products.
    pub fn tiles(&self, batch: i32, m: i32, n: i32) -> i64 {
        batch as i64 * ((m + self.bm - 1) / self.bm) as i64 * ((n + self.bn - 1) / self.bn) as i64
    }

    /// `tiles` output tiles must have i32 tile ids (the device's tile_id).
    pub fn check_tiles(tiles: i64) -> FfiResult<()> {
        if tiles > i32::MAX as i64 {
            return Err(invalid(format!("{tiles} output tiles exceed the i32 tile ids; use larger bm/bn")));
        }
        Ok(())
    }

    /// The launch grid over `tiles` output tiles (checked by [`check_tiles`](Self::check_tiles)).
    pub fn grid(&self, tiles: i64) -> (u32, u32, u32) {
        let tiles = tiles as u32;
        (self.programs.map_or(tiles, |p| p.min(tiles)), 1, 1)
    }

    /// The worker-warps hint: 8 for an output tile of 128 x 256 or 256 x 128 in one CTA (no
    /// cluster, or a cluster of one), else the compiler's default. tileiras 13.4 gives such a tile 4
    /// worker warps by default, whose f32 accumulator (128 KiB) does not fit their registers: 255 a
    /// thread and a 1808-byte stack, ~45 TFLOP/s on the H200. With 8 (two consumer warpgroups, as
    /// CUTLASS's cooperative Hopper GEMM) it assembles to `HGMMA.64x256x16` at 232 registers a
    /// consumer thread and no stack (kernels/matmul/NOTES.md, "Eight worker warps"). Clusters keep
    /// the compiler's choice: their tile is shared by the pair. So does 256 x 256 in one CTA, whose
    /// 256 KiB accumulator fits neither 4 nor 8 warps' registers (never assembled).
    pub fn warps(&self) -> Option<i32> {
        let one_cta = self.num_cta_in_cga.is_none_or(|g| g == 1);
        (one_cta && self.bm * self.bn == Self::WIDE_TILE_ELEMS).then_some(8)
    }

    /// The compile hints of the variant's launches: occupancy, worker warps, cluster size.
    pub fn options(&self) -> cutile::tile_kernel::CompileOptions {
        let options = compile_options(self.occupancy, self.warps());
        match self.num_cta_in_cga {
            Some(g) => options.num_cta_in_cga(g),
            None => options,
        }
    }

    /// The launch of either entry over `tiles` output tiles: generics T, BM, BN, BK, GROUP (every
    /// MMA kernel's entries take them first), then the kernel's `layout` generics, and the hints.
    pub fn launch<T: Element>(&self, layout: &[i32], tiles: i64) -> Launch {
        let generics = [&[self.bm, self.bn, self.bk, self.group][..], layout].concat();
        Launch::new::<T>(&generics, self.grid(tiles), self.options())
    }
}

// ---------------------------------------------------------------------------------------------
// Device, stream and launch, shared by every export.

use cutile::cuda_async::device_buffer::DevicePointer;
use cutile::cuda_async::device_operation::DeviceOp;
/// cutile's element-type trait (f32, f16, bf16, ...), which each launch is generic over; not the
/// descriptor's [`DType`] code.
pub use cutile::cuda_core::DType as Element;
use cutile::cuda_core::Stream;
use cutile::tile_kernel::{CompileOptions, TileKernel};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A stream-ordered device allocation, freed on its stream when dropped: after every kernel enqueued
/// on the stream before, and on every exit path (a failed enqueue, `?`, a panic unwinding to the
/// export's guard). `free` does the same and reports a failure.
pub struct StreamAlloc<'s> {
    /// The allocation's device address.
    pub ptr: u64,
    stream: &'s Arc<Stream>,
    what: &'static str,
    freed: bool,
}

impl<'s> StreamAlloc<'s> {
    pub fn new(bytes: usize, stream: &'s Arc<Stream>, what: &'static str) -> FfiResult<Self> {
        // SAFETY: `stream` is the caller's live stream; the allocation is freed on it (free, Drop).
        let ptr = unsafe { cutile::cuda_core::malloc_async(bytes, stream) }
            .map_err(|e| err(rc::JIT_OR_LAUNCH, format!("{what} of {bytes} bytes: {e}")))?;
        Ok(StreamAlloc { ptr, stream, what, freed: false })
    }

    fn free_async(&mut self) -> FfiResult<()> {
        if std::mem::replace(&mut self.freed, true) {
            return Ok(());
        }
        // SAFETY: allocated on this stream; every kernel that uses it was enqueued on it before.
        unsafe { cutile::cuda_core::free_async(self.ptr, self.stream) }
            .map_err(|e| err(rc::JIT_OR_LAUNCH, format!("freeing the {}: {e}", self.what)))
    }

    pub fn free(mut self) -> FfiResult<()> {
        self.free_async()
    }
}

impl Drop for StreamAlloc<'_> {
    fn drop(&mut self) {
        // On an early exit the caller already gets that failure (or the panic): a failed free adds
        // nothing it could act on.
        let _ = self.free_async();
    }
}

/// The stream's GPU's multiprocessor count.
pub fn sm_count(stream: &Arc<Stream>) -> FfiResult<u32> {
    stream.context().multiprocessor_count().map_err(|e| err(rc::DEVICE_OR_STREAM, format!("SM count: {e}")))
}

/// The workspace of a single-pass split (tile blocks that exchange per-row partials, device_util's
/// `arrive_and_wait`), one allocation on the caller's stream: `row_tiles` i32 arrival counters
/// (padded to 256 bytes, cleared on the stream: the kernel counts from zero), then N f32 arrays of
/// `row_tiles * rows` (rows padded to whole row tiles) x `chunks` partials. Returns the counters,
/// the arrays and the allocation (free it after the kernel is enqueued).
pub fn exchange_workspace<const N: usize>(
    row_tiles: i32, rows: i32, chunks: i32, stream: &Arc<Stream>,
) -> FfiResult<(DevicePointer<i32>, [DevicePointer<f32>; N], StreamAlloc<'_>)> {
    let counter_bytes = (row_tiles as usize * std::mem::size_of::<i32>()).next_multiple_of(256);
    let part_bytes = row_tiles as usize * rows as usize * chunks as usize * std::mem::size_of::<f32>();
    let ws = StreamAlloc::new(counter_bytes + N * part_bytes, stream, "split workspace")?;
    // SAFETY: the counters, then the N partial arrays, of the allocation just made.
    unsafe {
        cutile::cuda_core::memset_d8_async(ws.ptr, 0, counter_bytes, stream)
            .map_err(|e| err(rc::JIT_OR_LAUNCH, format!("clearing the split counters: {e}")))?;
        let arrays = std::array::from_fn(|i| {
            DevicePointer::<f32>::from_cu_deviceptr(ws.ptr + (counter_bytes + i * part_bytes) as u64)
        });
        Ok((DevicePointer::<i32>::from_cu_deviceptr(ws.ptr), arrays, ws))
    }
}

/// [`exchange_workspace`] with one counter more after the row tiles' (cleared with them): the ticket
/// counter of a split whose tile blocks take tickets (device_util's `take_ticket`). Each array is
/// sized for row_tiles + 1 row tiles (one unused: the workspace is `exchange_workspace`'s for one
/// counter more). Returns the row tiles' counters, the ticket counter, the arrays and the allocation.
#[allow(clippy::type_complexity)]
pub fn ticket_workspace<const N: usize>(
    row_tiles: i32, rows: i32, chunks: i32, stream: &Arc<Stream>,
) -> FfiResult<(DevicePointer<i32>, DevicePointer<i32>, [DevicePointer<f32>; N], StreamAlloc<'_>)> {
    let (arrived, arrays, ws) = exchange_workspace::<N>(row_tiles + 1, rows, chunks, stream)?;
    // SAFETY: counter row_tiles of the row_tiles + 1 counters just allocated and cleared.
    let ticket = unsafe {
        DevicePointer::<i32>::from_cu_deviceptr(
            arrived.cu_deviceptr() + (row_tiles as u64) * std::mem::size_of::<i32>() as u64,
        )
    };
    Ok((arrived, ticket, arrays, ws))
}

/// Stream wrappers by (device_id, raw stream handle).
type StreamCache = HashMap<(i32, u64), Arc<Stream>>;

/// The caller's stream on device `device_id`, wrapped once per (device, stream) and kept.
///
/// The context is cutile's process-wide primary-context handle (the one its JIT loads modules
/// into, and the one PyTorch uses). The `Stream` wrappers are cached and never dropped: dropping
/// one queries the stream, which is wasted work per call and illegal during graph capture.
pub fn caller_stream(device_id: i32, stream: u64) -> FfiResult<Arc<Stream>> {
    static STREAMS: Mutex<Option<StreamCache>> = Mutex::new(None);
    enable_jit_cache();
    if device_id < 0 {
        return Err(err(rc::DEVICE_OR_STREAM, format!("device_id={device_id} is negative")));
    }
    let mut cache = STREAMS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(s) = cache.get(&(device_id, stream)) {
        return Ok(s.clone());
    }
    let context = cutile::cuda_async::device_context::with_device(device_id as usize, |c| c.clone())
        .map_err(|e| err(rc::DEVICE_OR_STREAM, format!("CUDA device {device_id} unavailable: {e}")))?;
    // SAFETY: `stream` is the caller's current stream on that device's primary context
    // (torch.cuda.current_stream(device).cuda_stream); it outlives every launch we enqueue on it.
    let s = unsafe { Stream::borrow_raw(stream as *mut std::ffi::c_void, &context) };
    cache.insert((device_id, stream), s.clone());
    Ok(s)
}

/// The environment variable naming cutile's disk JIT cache directory (tilekit.ffi sets it).
pub const JIT_CACHE_VAR: &str = "TILEKIT_JIT_CACHE";

/// cutile's disk cache of compiled cubins, opt-in in cutile 0.5 (it has no environment switch):
/// enabled once per process, before the first JIT, when `TILEKIT_JIT_CACHE` names a directory.
/// tilekit.ffi points it at `$TILEKIT_CACHE/jit/<key>`, the key naming the tileiras release, the
/// GPU and the crate, so a new process (a sweep worker, the next run) loads cubins instead of
/// running tileiras. A store that cannot be opened is reported and the JIT goes on without it.
fn enable_jit_cache() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let Some(dir) = std::env::var_os(JIT_CACHE_VAR).filter(|d| !d.is_empty()) else { return };
        match cutile::jit_cache::FileSystemJitStore::new(&dir) {
            Ok(store) => cutile::jit_cache::enable(Arc::new(store)),
            Err(e) => eprintln!(
                "tilekit: {JIT_CACHE_VAR}={}: cannot open the JIT cache ({e}); compiling without it",
                dir.to_string_lossy()
            ),
        }
    });
}

/// A typed device pointer for a descriptor's data.
///
/// # Safety
/// `d.data` is a device allocation holding elements of `T` (dtype checked by the caller).
pub unsafe fn device_ptr<T: Element>(d: &TensorDesc) -> DevicePointer<T> {
    DevicePointer::<T>::from_cu_deviceptr(d.data)
}

/// Enqueue a kernel on `stream` without waiting for it (the caller's stream orders it).
/// A JIT (tileiras) or launch failure becomes -3 with cutile's message.
///
/// # Safety
/// Every pointer the op carries stays valid until the stream has executed it.
pub unsafe fn enqueue<O: DeviceOp>(op: O, stream: &Arc<Stream>) -> FfiResult<()> {
    op.async_on(stream).map(|_| ()).map_err(|e| err(rc::JIT_OR_LAUNCH, format!("JIT compile or launch failed: {e}")))
}

/// How a kernel's entries are launched: the generics (element type T, then the entry's const
/// generics in order), the grid and the compile options. [`Launch::enqueue`] applies them to one
/// entry's op.
pub struct Launch {
    pub generics: Vec<String>,
    pub grid: (u32, u32, u32),
    pub options: CompileOptions,
}

impl Launch {
    pub fn new<T: Element>(consts: &[i32], grid: (u32, u32, u32), options: CompileOptions) -> Launch {
        let generics =
            std::iter::once(T::DTYPE.as_str().to_string()).chain(consts.iter().map(i32::to_string)).collect();
        Launch { generics, grid, options }
    }

    /// [`enqueue`] `op` with these generics, grid and options.
    ///
    /// # Safety
    /// As for [`enqueue`]: every pointer the op carries stays valid until the stream has run it.
    pub unsafe fn enqueue<A: Send, D: DeviceOp<Output = S>, S: Send>(
        self, op: impl TileKernel<A, D, S>, stream: &Arc<Stream>,
    ) -> FfiResult<()> {
        enqueue(op.generics(self.generics).grid(self.grid).compile_options(self.options), stream)
    }
}

/// `$launch::<T>(args)` with T the element type `dtype` names: f32, f16 or bf16, the dtypes plan()
/// admits (it refused any other with -2 before the launch).
#[macro_export]
macro_rules! launch_as {
    ($dtype:expr, $launch:ident($($arg:expr),* $(,)?)) => {
        match $dtype {
            $crate::ffi_util::DType::F32 => $launch::<f32>($($arg),*),
            $crate::ffi_util::DType::F16 => $launch::<cutile::half::f16>($($arg),*),
            $crate::ffi_util::DType::BF16 => $launch::<cutile::half::bf16>($($arg),*),
            d => unreachable!("plan() admits f32, f16 and bf16 only, not {}", d.name()),
        }
    };
}

/// A kernel's C export: `export!(cutile_<name>(descriptors...; scalar: type, ...))` defines
/// `#[no_mangle] pub unsafe extern "C" fn cutile_<name>(descriptors..., scalars..., device_id: i32,
/// stream: u64) -> i32`, each descriptor a `*const TensorDesc`. Inside [`guard`]`(KERNEL, ..)` it
/// borrows the descriptors in order ([`desc`]: null is -5 naming it), then runs the calling module's
/// `plan(descriptors..., scalars...)` (all validation, before any device work), [`caller_stream`],
/// and `launch::<T>(&plan, descriptors..., &stream)` for the plan's `dtype` ([`launch_as!`]).
/// `export!(cutile_<name>(descriptors...; optional descriptors...; scalars...))` adds descriptors
/// that may be null, meaning absent (layer_norm's weight and bias): they follow the others in the C
/// signature and reach plan() and launch() as `Option<&TensorDesc>`.
#[macro_export]
macro_rules! export {
    ($name:ident($($d:ident),+; optional $($o:ident),+; $($a:ident: $t:ty),* $(,)?)) => {
        $crate::export!(@impl $name($($d),+; $($o),*; $($a: $t),*));
    };
    ($name:ident($($d:ident),+; $($a:ident: $t:ty),* $(,)?)) => {
        $crate::export!(@impl $name($($d),+; ; $($a: $t),*));
    };
    (@impl $name:ident($($d:ident),+; $($o:ident),*; $($a:ident: $t:ty),*)) => {
        /// The C export (the file header gives its contract). Returns 0 or a negative code
        /// (DESIGN.md "C ABI").
        ///
        /// # Safety
        /// Each descriptor pointer is null (refused with -5, or for an optional descriptor: absent)
        /// or points to a live `TensorDesc` for the whole call, whose `data` is a device allocation
        /// on `device_id` matching its shape, strides and dtype; `stream` is 0 or a live CUDA stream
        /// of that device. tilekit.ffi packs its arguments so.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            $($d: *const $crate::ffi_util::TensorDesc,)+
            $($o: *const $crate::ffi_util::TensorDesc,)*
            $($a: $t,)*
            device_id: i32,
            stream: u64,
        ) -> i32 {
            $crate::ffi_util::guard(KERNEL, || {
                $(let $d = unsafe { $crate::ffi_util::desc($d, stringify!($d))? };)+
                $(let $o = unsafe { $o.as_ref() };)*
                let p = plan($($d,)+ $($o,)* $($a),*)?;
                let stream = $crate::ffi_util::caller_stream(device_id, stream)?;
                $crate::launch_as!(p.dtype, launch(&p, $($d,)+ $($o,)* &stream))
            })
        }
    };
}

/// Test helper: when `CUTILE_TILEIRAS_PATH` names a tileiras (make check sets it when the Tile IR
/// toolchain of env/tileir-toolchain.txt is in the cache), assemble the kernel's bytecode to an
/// sm_90 cubin on the CPU, so a kernel tileiras rejects fails `make check`, not the first GPU run.
/// TILEKIT_IR_DIR keeps each kernel's Tile IR text (`<what>.tileir`), e.g. to diff two versions of
/// the device code.
#[cfg(test)]
pub fn assemble_for_sm90_if_tileiras(artifacts: &cutile::compile_api::CompileArtifacts, what: &str) {
    let name: String = what.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
    if let Ok(keep) = std::env::var("TILEKIT_IR_DIR") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::write(std::path::Path::new(&keep).join(format!("{name}.tileir")), artifacts.ir_text()).unwrap();
    }
    let Ok(tileiras) = std::env::var("CUTILE_TILEIRAS_PATH") else { return };
    let bytecode = artifacts.bytecode().unwrap_or_else(|e| panic!("{what}: no bytecode: {e}"));
    // One folder per call: cargo runs tests on parallel threads, and kernels share this helper.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tilekit-test-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (bc, cubin) = (dir.join("k.bc"), dir.join("k.cubin"));
    std::fs::write(&bc, bytecode).unwrap();
    let out = std::process::Command::new(&tileiras)
        .args(["--gpu-name", "sm_90", "--opt-level", "3", "-o"])
        .arg(&cubin)
        .arg(&bc)
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {tileiras}: {e}"));
    assert!(
        out.status.success(),
        "{what}: tileiras failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&cubin).map(|m| m.len() > 0).unwrap_or(false), "{what}: tileiras wrote no cubin");
    // TILEKIT_CUBIN_DIR keeps each cubin (named after `what`) for `cuobjdump -sass` / `-res-usage`:
    // the disassembly and register report of every kernel, with no GPU.
    if let Ok(keep) = std::env::var("TILEKIT_CUBIN_DIR") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&cubin, std::path::Path::new(&keep).join(format!("{name}.cubin"))).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// Test helpers shared by the kernels' Rust tests.

/// Test helper: a row kernel's generics T, ROWS, then the tile `sizes` written "BLOCK" or
/// "BLOCK/TAIL" (the tail entries' two widths), then `rest` (layer_norm's HAS_W, HAS_B).
#[cfg(test)]
pub fn row_generics<'a>(dtype: &'a str, rows: &'a str, sizes: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    [dtype, rows].into_iter().chain(sizes.split('/')).chain(rest.iter().copied()).collect()
}

/// Test helper: `result` is an error with `code` whose message mentions `needle`.
#[cfg(test)]
pub fn assert_fails<T: std::fmt::Debug>(result: FfiResult<T>, code: i32, needle: &str) {
    match result {
        Err(e) => assert!(
            e.code == code && e.msg.contains(needle),
            "expected code {code} and a message mentioning {needle:?}, got code {}: {:?}",
            e.code,
            e.msg
        ),
        Ok(v) => panic!("expected code {code} ({needle:?}), got Ok({v:?})"),
    }
}

/// Test helper: `plan(occupancy, warps)` takes -1 for both, and refuses with -6 naming the knob and
/// its values an occupancy outside 1..=32 and (where the kernel has the knob, `warps`) warps other
/// than 4 or 8.
#[cfg(test)]
pub fn assert_hints_checked<T: std::fmt::Debug>(warps: bool, plan: impl Fn(i32, i32) -> FfiResult<T>) {
    plan(-1, -1).unwrap();
    for occupancy in [0, 33, -2, -7] {
        assert_fails(plan(occupancy, -1), rc::INVALID_ARGUMENT, &format!("occupancy={occupancy}: use 1..=32"));
    }
    if warps {
        plan(8, 8).unwrap();
        for w in [0, 1, 2, 16, -2, -3] {
            assert_fails(plan(-1, w), rc::INVALID_ARGUMENT, &format!("warps={w}: use 4 or 8"));
        }
    }
}

/// Test helper: `plan(block, rows)` of a row tiling ([`row_tile`], tiles of at most `max_elems`
/// elements) refuses with -6 a block or rows that is not a power of two (or below 16 for the
/// block) and a tile past `max_elems`, each naming the knob.
#[cfg(test)]
pub fn assert_row_tile_checked<T: std::fmt::Debug>(max_elems: i32, plan: impl Fn(i32, i32) -> FfiResult<T>) {
    for (block, rows) in [(24, 1), (-2, 1), (8, 1), (16, 3), (max_elems, 2)] {
        let needle = if rows == 2 { "block*rows" } else { "power of two" };
        assert_fails(plan(block, rows), rc::INVALID_ARGUMENT, needle);
    }
}

/// Test helper: `plan(knobs)` of an MMA kernel (matmul, bmm), `knobs` its variant knobs in
/// [`MmaVariant::parse`]'s order [bm, bn, bk, group, programs, occupancy, num_cta_in_cga], refuses
/// with -6 a tile that is not a power of two in [16, 256] or too large, a group, programs, occupancy
/// or cluster size out of range, each naming the knob.
#[cfg(test)]
pub fn assert_mma_variant_checked<T: std::fmt::Debug>(plan: impl Fn([i32; 7]) -> FfiResult<T>) {
    let cases = [
        ([96, 128, 64, 8, 0, -1, -1], "bm=96"),
        ([128, 256, 8, 8, 0, -1, -1], "bk=8"),
        ([512, 256, 64, 8, 0, -1, -1], "bm=512"),
        ([128, 256, 64, 0, 0, -1, -1], "group=0"),
        ([128, 256, 64, 8, -3, -1, -1], "programs=-3"),
        ([128, 256, 64, 8, 0, 33, -1], "occupancy=33"),
        ([128, 256, 64, 8, 0, 1, 3], "num_cta_in_cga=3"),
    ];
    for (knobs, needle) in cases {
        assert_fails(plan(knobs), rc::INVALID_ARGUMENT, needle);
    }
}

/// A 16-byte-aligned device address, as PyTorch's allocator hands out: the pointer hints of the
/// perf-config specializations.
#[cfg(test)]
pub const ALIGNED_PTR: u64 = 0x7f00_0000_0000;

/// Test helper: the divisibility hints the launcher passes at run time, for pointer arguments at
/// these addresses and integer arguments of these values.
#[cfg(test)]
pub fn div_hints<'a>(
    ptrs: &[(&'a str, u64)], ints: &[(&'a str, i32)],
) -> Vec<(&'a str, cutile::cutile_compiler::specialization::DivHint)> {
    use cutile::cutile_compiler::specialization::DivHint;
    let ptrs = ptrs.iter().map(|&(name, p)| (name, DivHint::from_ptr(p)));
    ptrs.chain(ints.iter().map(|&(name, v)| (name, DivHint::from_value(v)))).collect()
}

/// Test helper: a descriptor at a fixed non-null address (0x1000), for tests of plan().
#[cfg(test)]
pub fn test_desc(dtype: DType, shape: &[i64], strides: &[i64]) -> TensorDesc {
    TensorDesc::from_parts(0x1000, dtype, shape, strides)
}

/// Test helper: a contiguous (m, n) matrix and an (n,) vector of one dtype, as test_desc makes
/// them: a row kernel's x and its weight.
#[cfg(test)]
pub fn test_rows(dtype: DType, m: i64, n: i64) -> (TensorDesc, TensorDesc) {
    (test_desc(dtype, &[m, n], &[n, 1]), test_desc(dtype, &[n], &[1]))
}

/// A kernel's device module, as its Rust tests compile it.
#[cfg(test)]
pub struct DeviceModule {
    /// `device::__module_ast_self`, which `#[cutile::module]` generates.
    pub ast: fn() -> cutile::cutile_compiler::ast::Module,
    /// The module's name, e.g. "softmax_device".
    pub name: &'static str,
}

#[cfg(test)]
impl DeviceModule {
    /// Test helper: `entry<generics>` lowered to Tile IR for sm_90 with these scalar hints and
    /// options (stage 1 of the JIT, which needs no GPU), then assembled by tileiras where it is found
    /// ([`assemble_for_sm90_if_tileiras`]). Panics naming the kernel when either fails; returns the
    /// IR text. `what_suffix` tells specializations of the same generics apart (their cubins'
    /// names under TILEKIT_CUBIN_DIR).
    pub fn lower(
        &self, entry: &str, generics: &[&str], hints: &[(&str, cutile::cutile_compiler::specialization::DivHint)],
        options: CompileOptions, what_suffix: &str,
    ) -> String {
        let what = format!("{entry}<{}>{what_suffix}", generics.join(","));
        let artifacts = cutile::compile_api::KernelCompiler::new(self.ast, self.name, entry)
            .target("sm_90")
            .generics(generics.iter().map(|g| g.to_string()).collect())
            .scalar_hints(hints)
            .options(options)
            .compile()
            .unwrap_or_else(|e| panic!("{what} does not lower: {e}"));
        assemble_for_sm90_if_tileiras(&artifacts, &what);
        artifacts.ir_text()
    }

    /// Test helper: `entry<generics>` lowered with the default options and no hints (and assembled,
    /// as [`lower`](Self::lower) does); its IR contains each of `needles`. Returns the IR.
    pub fn assert_lowers(&self, entry: &str, generics: &[&str], needles: &[&str]) -> String {
        let ir = self.lower(entry, generics, &[], CompileOptions::default(), "");
        let missing: Vec<&&str> = needles.iter().filter(|n| !ir.contains(**n)).collect();
        assert!(missing.is_empty(), "{entry}<{}>: IR lacks {missing:?}:\n{ir}", generics.join(","));
        ir
    }

    /// Test helper: [`assert_lowers`](Self::assert_lowers) for each of `entries` in every float
    /// dtype (f32, f16, bf16) and each (ROWS, BLOCK) of `tiles`, the entries' generics.
    pub fn assert_each_lowers(&self, entries: &[&str], tiles: &[(&str, &str)], needles: &[&str]) {
        for dtype in ["f32", "f16", "bf16"] {
            for &(rows, block) in tiles {
                for entry in entries {
                    self.assert_lowers(entry, &[dtype, rows, block], needles);
                }
            }
        }
    }

    /// Test helper: `entry<generics>` lowered as the launcher compiles it at run time, with the
    /// divisibility hints of these pointer addresses and integer values ([`div_hints`]). Each
    /// argument whose value divides by 16 (all of them, in the perf configs) reaches the IR as one
    /// `assume div_by<16>` (what lets tileiras emit 16-byte loads); a hint missing from the IR fails.
    pub fn assert_div_hints_lower(
        &self, entry: &str, generics: &[&str], ptrs: &[(&str, u64)], ints: &[(&str, i32)], options: CompileOptions,
        what_suffix: &str,
    ) {
        let hints = div_hints(ptrs, ints);
        let ir = self.lower(entry, generics, &hints, options, what_suffix);
        let found = ir.matches("assume div_by<16>").count();
        let expected =
            ptrs.iter().filter(|&&(_, p)| p % 16 == 0).count() + ints.iter().filter(|&&(_, v)| v % 16 == 0).count();
        assert_eq!(found, expected, "{entry}{what_suffix}: hints missing from the IR:\n{ir}");
    }

    /// Test helper: a row entry as the launcher compiles it for m contiguous rows of n elements:
    /// the pointers `ptrs` 16-byte aligned and m, n and both row strides (n) as integer arguments,
    /// each carrying its divisibility ([`Self::assert_div_hints_lower`]); `note` follows "for m x n"
    /// in a failure.
    #[allow(clippy::too_many_arguments)] // the specialization's parts one for one
    pub fn assert_row_spec_lowers(
        &self, entry: &str, generics: &[&str], ptrs: &[&str], m: i32, n: i32, options: CompileOptions, note: &str,
    ) {
        let ptrs: Vec<(&str, u64)> = ptrs.iter().map(|&p| (p, ALIGNED_PTR)).collect();
        let ints = [("m", m), ("n", n), ("stride_x", n), ("stride_y", n)];
        self.assert_div_hints_lower(entry, generics, &ptrs, &ints, options, &format!(" for {m}x{n}{note}"));
    }

    /// Test helper: an aligned-row entry (`aligned_rows_vec`) of `dtype` and a `rows` x `block` tile,
    /// specialized as the launcher compiles it for 16384 x 4097 (16-byte-aligned pointers, odd n and
    /// strides; `flags` are the generics between BLOCK and VEC): its IR asserts a body of whole VEC
    /// groups and 16-byte alignment of its row starts in x and in y (three `assume div_by<VEC>`, which
    /// tileiras turns into one 16-byte access per VEC lanes; the kernels' NOTES.md have the SASS).
    #[cfg(test)]
    pub fn assert_aligned_lowers(
        &self, entry: &str, dtype: &str, rows: &str, block: &str, flags: &[&str], ptrs: &[&str],
    ) {
        let vec = if dtype == "f32" { 4 } else { 8 };
        let (vec_s, edge_s) = (vec.to_string(), (2 * vec).to_string());
        let generics: Vec<&str> =
            [dtype, rows, block].into_iter().chain(flags.iter().copied()).chain([&vec_s[..], &edge_s]).collect();
        let ptrs: Vec<(&str, u64)> = ptrs.iter().map(|&p| (p, ALIGNED_PTR)).collect();
        let ints = [("m", 16384), ("n", 4097), ("stride_x", 4097), ("stride_y", 4097)];
        let what = " for 16384x4097";
        let ir = self.lower(entry, &generics, &div_hints(&ptrs, &ints), CompileOptions::default().occupancy(4), what);
        let found = ir.matches(&format!("assume div_by<{vec}>")).count();
        assert!(
            found >= 3,
            "{entry}<{}>{what}: {found} alignment assumptions, expected at least 3:\n{ir}",
            generics.join(",")
        );
    }
}
