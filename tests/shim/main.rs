//! The containerd shim's tests: its sandbox called in-process
//! ([`shim_sandbox`]), the shim under a real containerd
//! ([`shim_containerd`]), and pods through containerd's CRI plugin as
//! kubelet drives it ([`shim_cri`]); and the node installer
//! ([`installer`]). One binary, so that wasmtime is linked once.

mod support;

mod installer;
mod node_compile;
mod shim_containerd;
mod shim_cri;
mod shim_sandbox;
