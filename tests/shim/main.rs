//! The containerd shim's tests: its sandbox called in-process
//! ([`shim_sandbox`]) and the shim under a real containerd
//! ([`shim_containerd`]). One binary, so that wasmtime is linked once.

mod support;

mod shim_containerd;
mod shim_sandbox;
