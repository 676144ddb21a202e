//! A bind mount of a node's directory added to a container's OCI spec
//! before the container is created: how the shim gives a container the
//! node's compiled-code cache ([`crate::cache`], read-only) and its own
//! figures' directory ([`crate::figures`], writable).

use std::path::Path;

/// Adds to the spec of the container in `bundle` a bind mount of the
/// node's `source` at `destination`, read-only unless `writable`, with no
/// device, set-user-id or executable file.
///
/// # Errors
/// The spec's error, in a line.
pub(crate) fn bind(
    bundle: &Path,
    source: &Path,
    destination: &str,
    writable: bool,
) -> Result<(), String> {
    use oci_spec::runtime::{MountBuilder, Spec};
    let path = bundle.join("config.json");
    let spec_error = |e: &dyn std::fmt::Display| e.to_string();
    let mut spec = Spec::load(&path).map_err(|e| spec_error(&e))?;
    let access = if writable { "rw" } else { "ro" };
    let mount = MountBuilder::default()
        .destination(destination)
        .typ("bind")
        .source(source)
        .options(
            ["rbind", access, "nosuid", "nodev", "noexec"]
                .map(str::to_owned)
                .to_vec(),
        )
        .build()
        .map_err(|e| spec_error(&e))?;
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    mounts.push(mount);
    spec.set_mounts(Some(mounts));
    // Written beside it and renamed: libcontainer reads a whole spec.
    let written = path.with_extension("json.moat");
    spec.save(&written).map_err(|e| spec_error(&e))?;
    std::fs::rename(&written, &path).map_err(|e| spec_error(&e))
}
