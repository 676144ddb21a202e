//! moat: a WebAssembly host that lets sandboxed components use the network,
//! and only as far as the person running them allows.
//!
//! - [`policy`]: the two capabilities (connect, listen), their allowlists
//!   and deny lists (the moat-policy crate, re-exported).
//! - [`limits`]: every bound a setting sets ([`limits::Limits`]), with its
//!   default and why (moat-policy's, re-exported).
//! - [`net`]: the socket core, plain tokio: policy-checked TCP, UDP, TLS,
//!   name lookups and HTTP, made once from a [`net::NetConfig`]; and the
//!   address gate that holds stock wasi:sockets programs to the same policy
//!   ([`net::AddressGate`]).
//! - [`bounds`]: the run's memory and time limits; [`descriptors`]: the
//!   process's descriptor limit that follows the socket cap.
//! - [`audit`]: the audit trail, a record of every network decision with
//!   the rule that made it.
//! - [`settings`]: grants, deny lists and bounds as flags, a policy file
//!   or a container's environment state them, and how they add up
//!   (moat-policy's, re-exported), with the limits and run options they
//!   give.
//! - [`Moat`], [`RunOptions`]: load and run a guest, everything set up;
//!   [`launch`]: one launch start to end, as `moat run`, `moat serve` and
//!   the containerd shim make it.
//! - [`kit`]: moat for a wasmtime engine, linker and store of your own, in
//!   three steps (a builder, a view trait, `add_to_linker`).
//!
//! The WIT glue (moat:net, and wasi:sockets under the policy) is private:
//! the [`kit`] adds it to a linker.
//!
//! The crate denies `unsafe` code; the one exception is loading compiled
//! code from the cache, whose soundness is argued where it is
//! (`cache.rs`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
mod bindings;
pub mod bounds;
mod cache;
pub mod descriptors;
mod engines;
mod error;
pub mod kit;
pub mod launch;
mod moat;
pub mod net;
mod options;
pub mod preopen;
mod run_state;
pub mod serve;
pub mod settings;
pub mod start;
mod ticker;

pub use cache::{CacheDir, CacheRefused, EVICTED, MAX_CACHE_BYTES};
pub use error::{MoatError, REFUSED_EXIT, START_FAILED_EXIT, TIMEOUT_EXIT, TRAP_EXIT};
pub use moat::{CacheUse, Guest, Moat};
pub use moat_policy::limits;
pub use moat_policy::policy;
pub use net::limits::DEFAULT_LINGER;
pub use options::{
    CAPTURE_LIMIT, Captured, Exit, Input, InstancePool, MoatConfig, Output, RunOptions,
};
pub use ticker::{EPOCH_TICK, EpochTicker};
