//! libcutile_kernels: every tilekit kernel port in one cdylib.
//!
//! `ffi_util` holds the C ABI shared by all exports, `device_util` the device helpers the kernels'
//! device code shares. Each `kernels/<name>/` folder contributes `kernel.rs` (the cuTile device
//! code) and `ffi.rs` (its `extern "C" fn cutile_<name>`); build.rs finds them and writes the
//! module list included below.
pub mod device_util;
pub mod ffi_util;

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
