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
//! - [`settings`]: grants, deny lists and bounds as flags, a policy file
//!   or a container's environment state them, and how they add up.
//! - [`Moat`], [`RunOptions`]: load and run a guest, everything set up.
//!
//! The crate forbids `unsafe` code.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bindings;
pub mod bounds;
pub mod descriptors;
mod engine;
mod error;
pub mod net;
pub mod policy;
pub mod policy_file;
pub mod preopen;
mod run;
pub mod settings;
mod state;
mod ticker;

pub use engine::{CacheDir, DEFAULT_LINGER, Guest, Moat, MoatConfig};
pub use error::{MoatError, REFUSED_EXIT, START_FAILED_EXIT, TIMEOUT_EXIT, TRAP_EXIT};
pub use preopen::Preopen;
pub use run::{CAPTURE_LIMIT, Captured, Exit, Input, Output, RunOptions};
pub use ticker::{EPOCH_TICK, EpochTicker};
