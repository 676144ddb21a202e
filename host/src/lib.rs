//! moat: a WebAssembly host that lets sandboxed components use the network,
//! and only as far as the person running them allows.
//!
//! - [`policy`]: the two capabilities (connect, listen), their allowlists
//!   and deny lists.
//! - [`net`]: the socket core, plain tokio: policy-checked TCP sockets,
//!   listeners and UDP, within the run's [`net::Limits`]; and the address
//!   gate that holds stock wasi:sockets programs to the same policy
//!   ([`net::AddressGate`]).
//! - [`bindings`]: the WIT glue: moat:net, and wasi:sockets under the
//!   policy ([`bindings::wasi_sockets`]), for a linker of your own.
//! - [`bounds`]: the run's memory and time limits; [`descriptors`]: the
//!   process's descriptor limit that follows the socket cap.
//! - [`setting`]: each setting's name, as a flag, a policy file's key or
//!   a container's variable; [`settings`]: grants, deny lists and bounds as flags, a policy file
//!   or a container's environment state them, and how they add up.
//! - [`Moat`], [`RunOptions`]: load and run a guest, everything set up.
//!
//! The crate forbids `unsafe` code.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bindings;
pub mod bounds;
pub mod descriptors;
mod error;
mod moat;
pub mod net;
mod options;
pub mod policy;
pub mod policy_file;
pub mod preopen;
pub mod setting;
pub mod settings;
mod ticker;

pub use error::{MoatError, REFUSED_EXIT, START_FAILED_EXIT, TIMEOUT_EXIT, TRAP_EXIT};
pub use moat::{Guest, Moat};
pub use options::{
    CAPTURE_LIMIT, CacheDir, Captured, DEFAULT_LINGER, Exit, Input, MoatConfig, Output, RunOptions,
};
pub use preopen::Preopen;
pub use ticker::{EPOCH_TICK, EpochTicker};
