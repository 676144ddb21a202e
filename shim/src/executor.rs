//! The container's workload as youki's libcontainer runs it, in the
//! container's process once its namespaces, cgroups and root filesystem are
//! set up: moat's sandbox, and never anything else.
//!
//! runwasi's own executor runs an entrypoint that looks native (an ELF
//! file, a `#!` script) with `execve` before any wasm runtime is asked, so
//! an image `FROM scratch` with a static binary would get the pod's network
//! without moat. This one has no such path: whatever the image holds, the
//! process runs [`MoatSandbox::run`] and exits with its status; an
//! entrypoint that is not a component is refused there. A pod's sandbox
//! ([`Role::Sandbox`]) runs [`crate::pause::hold`] instead, and nothing of
//! its image.

use std::collections::HashMap;

use libcontainer::workload::{
    Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError,
};
use oci_spec::runtime::Spec;

use crate::pod::Role;
use crate::sandbox::{Container, Image, MoatSandbox};

/// Runs the container's component under moat.
#[derive(Clone)]
pub(crate) struct MoatExecutor {
    /// A pod's sandbox, or a container whose component runs.
    pub(crate) role: Role,
    /// Where the node's cache is mounted for this container, if it is.
    pub(crate) compiled_code: Option<std::path::PathBuf>,
    /// Whether the node's settings let this pod run in observe mode.
    pub(crate) observe_allowed: bool,
    /// Where its figures go, if anywhere.
    pub(crate) figures: Option<crate::figures::FiguresTarget>,
    /// What the shim read of the image before the container was created.
    pub(crate) image: Image,
    /// The container's containerd namespace and id, for the audit trail.
    pub(crate) namespace: String,
    pub(crate) id: String,
}

impl Executor for MoatExecutor {
    /// Runs the sandbox and ends the process with its exit status.
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if self.role == Role::Sandbox {
            std::process::exit(crate::pause::hold())
        }
        let process = spec.process().as_ref();
        let container = Container {
            args: process.and_then(|p| p.args().clone()).unwrap_or_default(),
            env: process.and_then(|p| p.env().clone()).unwrap_or_default(),
            image: self.image.clone(),
            namespace: self.namespace.clone(),
            id: self.id.clone(),
            compiled_code: self.compiled_code.clone(),
            observe_allowed: self.observe_allowed,
            figures: self.figures.clone(),
        };
        let status = MoatSandbox::default().run(&container);
        std::process::exit(status)
    }

    /// Every spec is the sandbox's to judge, when it runs: a refusal there
    /// reaches the termination log, which one here would not.
    fn validate(&self, _spec: &Spec) -> Result<(), ExecutorValidationError> {
        Ok(())
    }

    /// The sandbox hands the guest its environment itself; the process's
    /// own (the shim's) is not the guest's and is left as it is.
    fn setup_envs(&self, _envs: HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        Ok(())
    }
}
