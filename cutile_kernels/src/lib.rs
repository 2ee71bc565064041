//! libcutile_kernels: every tilekit kernel port in one cdylib.
//!
//! `ffi_util` holds the C ABI shared by all exports, `device_util` the device helpers the kernels'
//! device code shares, `gated` the gated family (silu_and_mul, swiglu, gelu_and_mul: device entries
//! generic over the activation, their plans and launches), `gated_backward` and `norm_backward` the
//! gradient entries and launchers those families' backward kernels share. Each `kernels/<name>/` folder
//! contributes `kernel.rs` (the cuTile device code, or a family member's choice of it) and `ffi.rs`
//! (its `extern "C" fn cutile_<name>`); build.rs finds them and writes the module list included
//! below.
pub mod device_util;
pub mod ffi_util;
pub mod gated;
pub mod gated_backward;
pub mod norm_backward;

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
