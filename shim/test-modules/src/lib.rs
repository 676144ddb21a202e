//! An empty stand-in for runwasi's `containerd-shim-wasm-test-modules`,
//! put in its place by `[patch.crates-io]` in the workspace manifest.
//!
//! `containerd-shim-wasm`'s `testing` feature, the harness the shim's tests
//! use, depends on that crate only to re-export its sample modules. Its
//! published 0.4.1 compiles them in a build script for `wasm32-wasi`, a
//! target Rust removed in 1.84, so it fails to build on the toolchain this
//! repository pins (runwasi's main branch builds them for `wasm32-wasip1`,
//! unreleased as of 1.0.1). moat's tests run moat's own guests and never
//! read those modules. Remove this crate and the patch once a release of
//! the real crate builds.
