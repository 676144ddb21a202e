//! `containerd-shim-moat-v1`: a containerd shim, built on runwasi's
//! containerd-shimkit and youki's libcontainer, that runs a container's
//! WebAssembly component under moat, so that Kubernetes schedules,
//! restarts and scales moat guests like any pod whose RuntimeClass handler
//! is `moat`.
//!
//! - [`cache`]: the node's compiled-code cache, which only the shim
//!   writes and containers read.
//! - [`deployment`]: what the pod spec grants (`MOAT_*` variables), what
//!   becomes of the image's policy, and which directories the guest sees;
//!   the one place a container's grants are decided.
//! - [`figures`]: each container's figures on the node (decisions,
//!   connections, bytes, its component's load), for a node agent.
//! - [`image`]: what the shim reads of the image from containerd (its own
//!   environment, its wasm layers), so that the image cannot grant.
//! - [`instance`]: the container's lifecycle for containerd.
//! - [`pod`]: what a container is to its pod under CRI (the pod's sandbox,
//!   or a container whose component runs).
//! - `pause`: a pod's sandbox, held by the shim's own code.
//! - `confine`: where the node's compile of a tenant's component runs.
//! - `reaper`: the exit status of a process the shim library reaped first.
//! - `spec_mount`: a node directory bind-mounted into a container's spec.
//! - [`sandbox`]: one container's run, in the container's process: a
//!   component under moat, or a refusal. Nothing else ever runs there.
//!
//! Nothing is granted unless the deployment says so: a pod with no `MOAT_*`
//! variables runs with no network and no files at all.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cache;
mod confine;
pub mod deployment;
mod executor;
pub mod figures;
pub mod image;
pub mod instance;
mod pause;
pub mod pod;
mod reaper;
pub mod sandbox;
mod spec_mount;

pub use deployment::POLICY_LAYER_MEDIA_TYPE;
pub use image::{COMPONENT_LAYER_MEDIA_TYPE, LAYER_TYPES};
pub use instance::{MoatInstance, RUNTIME_NAME};
pub use sandbox::{Container, Image, MoatSandbox, StartError};
