//! Paths of the guest components, built for `wasm32-wasip2` by this crate's
//! build script (once per target directory; cargo reruns it only when a
//! guest's source, the SDK or the WIT changes).
//!
//! The build adds the `wasm32-wasip2` target with rustup when the toolchain
//! lacks it, so `cargo test` works on a fresh clone.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
