//! moat-policy: what a moat run may reach and where it may listen, and the
//! settings people state that in. It knows nothing of wasmtime, sockets or
//! tokio: the host (moat-host) asks it, before any socket exists, and it
//! answers from the grants and deny lists alone.
//!
//! - [`policy`]: the two capabilities (connect, listen), their allowlists
//!   and deny lists, and the one check of a host as the guest wrote it.
//! - [`limits`]: the bounds of a run as plain data, with their defaults,
//!   read and written by setting.
//! - [`setting`]: the table of settings: each one's flag, policy-file key
//!   and container variable.
//! - [`settings`]: grants, deny lists and bounds as flags, a policy file or
//!   a container's environment state them, and how they add up.
//!
//! moat-host re-exports all three (`moat_host::policy`,
//! `moat_host::settings`); an embedder of moat-host does not need this
//! crate by name. It is a crate of its own so that everything here, which
//! reads what people and guests write, can be fuzzed without building
//! wasmtime (`fuzz/`).
//!
//! The crate forbids `unsafe` code.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod limits;
pub mod policy;
pub mod setting;
pub mod settings;
