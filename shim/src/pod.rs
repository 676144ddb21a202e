//! A container's place in a Kubernetes pod, as containerd's CRI plugin
//! (the path kubelet takes) marks it in the container's OCI spec.
//!
//! CRI starts every pod with a sandbox container (the "pause" container of
//! the node's `sandbox_image`) through the pod's runtime handler, then the
//! pod's own containers, which join the sandbox's network, IPC and UTS
//! namespaces by its process. Under moat the sandbox is never the image's
//! entrypoint (that is a native program): the shim holds the pod's
//! namespaces itself (the `pause` module), and no code of the pause image
//! runs.
//!
//! What marks the sandbox: CRI sets `io.kubernetes.cri.container-type` to
//! `sandbox` and `io.kubernetes.cri.sandbox-id` to the container's own id.
//! A pod's annotations can reach the spec too (the runtime's
//! `pod_annotations` list passes them through), but containerd sets its own
//! two after them (containerd 1.6 and 1.7, `sandbox_run_linux.go` and
//! `container_create_linux.go`), so through CRI a pod cannot make an app
//! container a sandbox. A spec that says `sandbox` with another container's
//! id is not CRI's sandbox (CRI never writes one), and is refused: it would
//! run nothing, and it is most likely a client forging the mark.

use std::collections::HashMap;

/// The annotation CRI sets to `sandbox` or `container`.
pub const CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";

/// The annotation CRI sets to the pod's sandbox id (on the sandbox, its own
/// id); containerd groups a pod's containers in one shim by it.
pub const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

/// The annotation CRI sets to the pod's Kubernetes namespace, on the
/// sandbox and on each container, in the same list as the two above.
pub const SANDBOX_NAMESPACE: &str = "io.kubernetes.cri.sandbox-namespace";

/// The Kubernetes namespace of the pod whose container's spec carries
/// `annotations`, when CRI said (`ctr run` says nothing).
pub fn namespace(annotations: Option<&HashMap<String, String>>) -> Option<String> {
    annotations?
        .get(SANDBOX_NAMESPACE)
        .filter(|ns| !ns.is_empty())
        .cloned()
}

/// What a container is to the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Role {
    /// A pod's sandbox: the shim holds its namespaces and runs nothing.
    Sandbox,
    /// A container whose component runs under moat (an app container of a
    /// pod, or a container started without CRI, as `ctr run` does).
    Workload,
}

/// Why a container's marks are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    /// The spec says `sandbox` but names another container as the sandbox.
    #[error(
        "its spec marks it as a pod's sandbox ({CONTAINER_TYPE}=sandbox) but names {claimed:?} \
         as the sandbox ({SANDBOX_ID}); CRI marks a sandbox with its own id, so this is not \
         CRI's sandbox and is not run"
    )]
    ForeignSandbox {
        /// The sandbox id the spec names (empty when it names none).
        claimed: String,
    },
    /// The container type is one CRI does not write.
    #[error("its spec's {CONTAINER_TYPE} is {value:?}; CRI writes `sandbox` or `container`")]
    UnknownType {
        /// The value found.
        value: String,
    },
}

/// The role of container `id` whose spec carries `annotations`.
pub fn role(annotations: Option<&HashMap<String, String>>, id: &str) -> Result<Role, RoleError> {
    let Some(annotations) = annotations else {
        return Ok(Role::Workload);
    };
    match annotations.get(CONTAINER_TYPE).map(String::as_str) {
        None | Some("container") => Ok(Role::Workload),
        Some("sandbox") => match annotations.get(SANDBOX_ID) {
            Some(sandbox) if sandbox == id => Ok(Role::Sandbox),
            claimed => Err(RoleError::ForeignSandbox {
                claimed: claimed.cloned().unwrap_or_default(),
            }),
        },
        Some(other) => Err(RoleError::UnknownType {
            value: other.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_a_sandbox_marked_with_its_own_id_is_one() {
        assert_eq!(role(None, "a"), Ok(Role::Workload));
        assert_eq!(role(Some(&marks(&[])), "a"), Ok(Role::Workload));
        let app = marks(&[(CONTAINER_TYPE, "container"), (SANDBOX_ID, "pod")]);
        assert_eq!(role(Some(&app), "a"), Ok(Role::Workload));
        let sandbox = marks(&[(CONTAINER_TYPE, "sandbox"), (SANDBOX_ID, "pod")]);
        assert_eq!(role(Some(&sandbox), "pod"), Ok(Role::Sandbox));
        assert_eq!(
            role(Some(&sandbox), "a"),
            Err(RoleError::ForeignSandbox {
                claimed: "pod".into()
            })
        );
        let unnamed = marks(&[(CONTAINER_TYPE, "sandbox")]);
        assert_eq!(
            role(Some(&unnamed), "a"),
            Err(RoleError::ForeignSandbox { claimed: "".into() })
        );
        let odd = marks(&[(CONTAINER_TYPE, "Sandbox"), (SANDBOX_ID, "a")]);
        assert!(matches!(
            role(Some(&odd), "a"),
            Err(RoleError::UnknownType { .. })
        ));
    }
}
