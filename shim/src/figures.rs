//! Each container's figures on the node, for a node agent to collect: its
//! network decisions, connections and bytes, and how its component was
//! loaded (from the node's cache or compiled), in Prometheus' text format
//! ([`moat_host::figures`]).
//!
//! - **Where**: `figures-dir` of the node's settings (`/run/moat/figures`
//!   unless they say otherwise, or `"off"`), a directory of the shim's
//!   user that no one else may write, nor any directory above it (a
//!   sticky one such as `/tmp` aside). Each pod gets a directory there,
//!   named by its sandbox's id, and each of its containers one inside,
//!   named by the container's name in the pod, holding one file,
//!   `figures.prom`: node_exporter's textfile collector reads them all
//!   with `--collector.textfile.directory=/run/moat/figures/*/*`. A
//!   container run without a pod (`ctr run`) is a pod of its own, both
//!   directories named by its id.
//! - **Who writes**: the container's own moat, which the shim's mount
//!   gives that one directory at [`MOUNT`] (under `/dev`, which no guest
//!   is ever given), writable, owned by the container's user. A container
//!   sees no other container's figures; its guest sees none at all, and a
//!   directory given to the guest that reaches the mount is refused, as
//!   for every file a later reader trusts.
//! - **What labels them**: the pod's namespace and name, the container's
//!   name (as CRI's annotations say, which containerd sets after any of
//!   the pod's own) and its id. A series never names anything the guest
//!   chose.
//! - **How long**: rewritten every `figures-interval` while the container
//!   runs (10 s unless the settings say otherwise), and once more at its
//!   end. An ended container's figures stay until kubelet starts its next
//!   attempt (which takes its directory over, the ended one's file
//!   removed first) or the pod's sandbox ends: as many files as the pod
//!   has containers, however often they restart, and none once the pod is
//!   gone.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{Mode, OFlags};

use crate::pod;
use moat_host::figures::FiguresFile;

/// Where the figures go when the node's settings say nothing.
pub const DEFAULT_FIGURES_DIR: &str = "/run/moat/figures";

/// Where a container sees its own figures' directory, writable.
pub const MOUNT: &str = "/dev/moat/figures";

/// The annotation CRI sets to the pod's name.
const SANDBOX_NAME: &str = "io.kubernetes.cri.sandbox-name";

/// The annotation CRI sets to the container's name in its pod.
const CONTAINER_NAME: &str = "io.kubernetes.cri.container-name";

/// Where a container's moat writes its figures, and what labels them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FiguresTarget {
    /// The directory, as the container sees it ([`MOUNT`]).
    pub dir: PathBuf,
    /// The labels of every series.
    pub labels: Vec<(String, String)>,
    /// How often the file is brought up to date.
    pub interval: Duration,
}

/// Why a container's figures are not written (the container starts all
/// the same).
#[derive(Debug, thiserror::Error)]
pub enum FiguresRefused {
    /// A pod's sandbox id or a container's name that could name another
    /// file.
    #[error(
        "{0:?} is not a name the shim makes a directory of (a pod's sandbox id or a \
         container's name: letters, digits and ._-, not starting with a dot)"
    )]
    Id(String),
    /// The directory or its parents are not the shim's alone.
    #[error(
        "{} is owned by uid {owner} with mode {mode:o}: the figures directory and every \
         directory above it must be the shim's user's (or root's), writable by no one else \
         (unless sticky, as /tmp is)",
        .path.display()
    )]
    NotPrivate {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Its mode.
        mode: u32,
    },
    /// The system refused.
    #[error("{}: {source}", .path.display())]
    Io {
        /// What it was doing it on.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The container's spec could not be given the mount.
    #[error("the container's spec: {0}")]
    Spec(String),
}

/// The labels of the container `id` whose spec carries `annotations`.
pub fn labels(annotations: Option<&HashMap<String, String>>, id: &str) -> Vec<(String, String)> {
    let annotation = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .cloned()
            .unwrap_or_default()
    };
    vec![
        (
            "namespace".to_owned(),
            pod::namespace(annotations).unwrap_or_default(),
        ),
        ("pod".to_owned(), annotation(SANDBOX_NAME)),
        ("container".to_owned(), annotation(CONTAINER_NAME)),
        ("container_id".to_owned(), id.to_owned()),
    ]
}

/// Where a container's figures go under the node's figures directory:
/// its pod's directory, and its own in that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The pod's sandbox id (the container's own id without a pod).
    pub pod: String,
    /// The container's name in its pod (its id without a pod).
    pub container: String,
}

impl Place {
    /// The place of container `id` whose spec carries `annotations`.
    pub fn of(annotations: Option<&HashMap<String, String>>, id: &str) -> Place {
        let annotation = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        Place {
            pod: annotation(pod::SANDBOX_ID).unwrap_or_else(|| id.to_owned()),
            container: annotation(CONTAINER_NAME).unwrap_or_else(|| id.to_owned()),
        }
    }

    /// Whether the container is a pod of its own (no CRI sandbox), whose
    /// figures go with it.
    pub fn alone(&self, id: &str) -> bool {
        self.pod == id
    }
}

/// Whether `id` is a name of one path component that names nothing else
/// (containerd's ids and Kubernetes' container names are letters, digits
/// and `._-`, not starting with `.`, at most 76 characters).
fn plain_id(id: &str) -> bool {
    (1..=76).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Opens (making it if missing) directory `name` in `parent`, never
/// through a link.
fn open_or_make(parent: &OwnedFd, name: &str, path: &Path) -> Result<OwnedFd, FiguresRefused> {
    let io = |e: rustix::io::Errno| FiguresRefused::Io {
        path: path.to_owned(),
        source: e.into(),
    };
    match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(io(e)),
    }
    rustix::fs::openat(
        parent,
        name,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)
}

/// Makes the directory of the container at `place` under `base` (and
/// `base`, if it is missing), with no figures of an earlier attempt in it,
/// owned by `owner` (the container process's uid and gid) so that the
/// container's moat can write there, and mounts it into the container of
/// `bundle` at [`MOUNT`]. Returns the node's path of it.
///
/// # Errors
/// [`FiguresRefused`]: a name that could lead elsewhere, a directory
/// others may write, or the system's error.
pub fn prepare(
    base: &Path,
    place: &Place,
    owner: (u32, u32),
    bundle: &Path,
) -> Result<PathBuf, FiguresRefused> {
    for name in [&place.pod, &place.container] {
        if !plain_id(name) {
            return Err(FiguresRefused::Id(name.clone()));
        }
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(base)
        .map_err(|source| FiguresRefused::Io {
            path: base.to_owned(),
            source,
        })?;
    let dir = open_private(base)?;
    for above in base.ancestors().skip(1) {
        judge(&open_dir(above)?, above, true)?;
    }
    let pod_dir = base.join(&place.pod);
    let own = pod_dir.join(&place.container);
    let io = |e: rustix::io::Errno| FiguresRefused::Io {
        path: own.clone(),
        source: e.into(),
    };
    let pod = open_or_make(&dir, &place.pod, &pod_dir)?;
    let made = open_or_make(&pod, &place.container, &own)?;
    match rustix::fs::unlinkat(&made, FiguresFile::NAME, rustix::fs::AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(io(e)),
    }
    rustix::fs::fchown(
        &made,
        Some(rustix::process::Uid::from_raw(owner.0)),
        Some(rustix::process::Gid::from_raw(owner.1)),
    )
    .map_err(io)?;
    crate::spec_mount::bind(bundle, &own, MOUNT, true).map_err(FiguresRefused::Spec)?;
    Ok(own)
}

/// Removes pod `pod`'s directory under `base`, and every container's
/// figures in it.
pub fn remove(base: &Path, pod: &str) {
    if !plain_id(pod) {
        return;
    }
    match std::fs::remove_dir_all(base.join(pod)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::info!(pod = %pod, error = %e, "its figures could not be removed"),
    }
}

fn open_dir(path: &Path) -> Result<OwnedFd, FiguresRefused> {
    rustix::fs::open(
        path,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FiguresRefused::Io {
        path: path.to_owned(),
        source: e.into(),
    })
}

/// The figures directory, opened, once judged the shim's alone.
fn open_private(base: &Path) -> Result<OwnedFd, FiguresRefused> {
    let dir = open_dir(base)?;
    judge(&dir, base, false)?;
    Ok(dir)
}

/// Judges the directory open as `dir`: the shim's user's (or, `above` the
/// figures directory, root's), writable by no one else (unless sticky,
/// above it).
fn judge(dir: &OwnedFd, path: &Path, above: bool) -> Result<(), FiguresRefused> {
    let stat = rustix::fs::fstat(dir).map_err(|e| FiguresRefused::Io {
        path: path.to_owned(),
        source: e.into(),
    })?;
    let user = rustix::process::geteuid().as_raw();
    let mode = stat.st_mode & 0o7777;
    let sticky = mode & 0o1000 != 0;
    let owner_ok = stat.st_uid == user || (above && stat.st_uid == 0);
    let writers_ok = mode & 0o022 == 0 || (above && sticky);
    if owner_ok && writers_ok {
        Ok(())
    } else {
        Err(FiguresRefused::NotPrivate {
            path: path.to_owned(),
            owner: stat.st_uid,
            mode,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("moat-shim-figures-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A bundle whose spec has no mounts yet.
    fn bundle(dir: &Path) -> PathBuf {
        let bundle = dir.join("bundle");
        std::fs::create_dir_all(&bundle).unwrap();
        let spec = oci_spec::runtime::Spec::default();
        spec.save(bundle.join("config.json")).unwrap();
        bundle
    }

    fn place(pod: &str, container: &str) -> Place {
        Place {
            pod: pod.to_owned(),
            container: container.to_owned(),
        }
    }

    #[test]
    fn each_container_gets_a_directory_of_its_own_in_its_pods_mounted_writable() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = scratch("own");
        let base = dir.join("figures");
        let bundle = bundle(&dir);
        let own = prepare(&base, &place("pod1", "echo"), (1000, 1000), &bundle).unwrap();
        assert_eq!(own, base.join("pod1/echo"));
        let meta = std::fs::symlink_metadata(&own).unwrap();
        assert!(meta.is_dir());
        assert_eq!((meta.uid(), meta.gid()), (1000, 1000));
        let spec = oci_spec::runtime::Spec::load(bundle.join("config.json")).unwrap();
        let mount = spec
            .mounts()
            .iter()
            .flatten()
            .find(|m| m.destination() == Path::new(MOUNT))
            .unwrap();
        assert_eq!(mount.source().as_deref(), Some(own.as_path()));
        assert!(mount.options().iter().flatten().any(|o| o == "rw"));
        // The next attempt takes the directory over, without the last one's
        // figures; another container of the pod gets its own.
        std::fs::write(own.join(FiguresFile::NAME), "the last attempt's").unwrap();
        assert_eq!(
            prepare(&base, &place("pod1", "echo"), (1000, 1000), &bundle).unwrap(),
            own
        );
        assert!(!own.join(FiguresFile::NAME).exists());
        let other = prepare(&base, &place("pod1", "sidecar"), (0, 0), &bundle).unwrap();
        assert_eq!(other, base.join("pod1/sidecar"));
        // The pod's end takes them all.
        remove(&base, "pod1");
        assert!(!base.join("pod1").exists());
        assert!(base.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_figures_directory_others_may_write_or_a_link_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("refused");
        let base = dir.join("figures");
        let bundle = bundle(&dir);
        std::fs::create_dir_all(&base).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = prepare(&base, &place("p", "c"), (0, 0), &bundle).unwrap_err();
        assert!(
            matches!(refused, FiguresRefused::NotPrivate { .. }),
            "{refused}"
        );
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A link left where a pod's or a container's directory goes is not
        // followed.
        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, base.join("p")).unwrap();
        let refused = prepare(&base, &place("p", "c"), (0, 0), &bundle).unwrap_err();
        assert!(matches!(refused, FiguresRefused::Io { .. }), "{refused}");
        std::fs::create_dir(base.join("q")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, base.join("q/c")).unwrap();
        let refused = prepare(&base, &place("q", "c"), (0, 0), &bundle).unwrap_err();
        assert!(matches!(refused, FiguresRefused::Io { .. }), "{refused}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        for name in ["..", "../x", ".hidden", "a/b", ""] {
            for place in [place(name, "c"), place("p", name)] {
                assert!(matches!(
                    prepare(&base, &place, (0, 0), &bundle),
                    Err(FiguresRefused::Id(_))
                ));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_container_without_a_pod_is_a_pod_of_its_own() {
        let alone = Place::of(None, "c1");
        assert_eq!(alone, place("c1", "c1"));
        assert!(alone.alone("c1"));
        let annotations: HashMap<String, String> =
            [(pod::SANDBOX_ID, "sb"), (CONTAINER_NAME, "echo")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        let in_pod = Place::of(Some(&annotations), "c2");
        assert_eq!(in_pod, place("sb", "echo"));
        assert!(!in_pod.alone("c2"));
    }

    #[test]
    fn the_labels_are_cri_s_names() {
        let annotations: HashMap<String, String> = [
            (pod::SANDBOX_NAMESPACE, "team-a"),
            (SANDBOX_NAME, "echo-7f9c"),
            (CONTAINER_NAME, "echo"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(
            labels(Some(&annotations), "c0ffee"),
            [
                ("namespace", "team-a"),
                ("pod", "echo-7f9c"),
                ("container", "echo"),
                ("container_id", "c0ffee"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }
}
