//! `containerd-shim-moat-v1`: a containerd shim, built on runwasi's
//! `containerd-shim-wasm`, that runs a container's WebAssembly component
//! under moat, so that Kubernetes schedules, restarts and scales moat guests
//! like any pod whose RuntimeClass handler is `moat`.
//!
//! - [`deployment`]: what the pod spec grants (`MOAT_*` variables) and what
//!   becomes of the image's policy layer; the one place a container's
//!   grants are decided.
//! - [`sandbox`]: one container's run, in the container's process.
//!
//! Nothing is granted unless the deployment says so: a pod with no `MOAT_*`
//! variables runs with no network at all.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod deployment;
pub mod sandbox;

use containerd_shim_wasm::shim::{Shim, Version, version};

pub use deployment::POLICY_LAYER_MEDIA_TYPE;
pub use sandbox::{MoatSandbox, StartError};

/// The media types of the layers the shim takes from an image: components
/// (runwasi's component layer type, and plain `application/wasm`) and a
/// moat policy.
pub const LAYER_TYPES: &[&str] = &[
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm",
    "application/wasm",
    POLICY_LAYER_MEDIA_TYPE,
];

/// The shim: its name (`moat`: the runtime `io.containerd.moat.v1`), its
/// version and the layers it reads.
pub struct MoatShim;

impl Shim for MoatShim {
    fn name() -> &'static str {
        "moat"
    }

    fn version() -> Version {
        version!()
    }

    type Sandbox = MoatSandbox;

    fn supported_layers_types() -> &'static [&'static str] {
        LAYER_TYPES
    }
}
