//! Directories a guest may be given, and the ones it may never be given.
//!
//! A guest sees a host directory through wasi:filesystem, confined to it by
//! cap-std: no `..` past its root, no absolute paths, no symlink out. What
//! confinement cannot help with is a directory whose files *are* the host:
//! a procfs holds `/proc/self/mem` (the host process's memory, writable),
//! `/proc/self/environ` and every other process's; a sysfs or a cgroupfs
//! holds the kernel's and the machine's switches; a devtmpfs or devpts holds
//! devices. So a directory that is, or has mounted anywhere below it, one
//! of the kernel's filesystems below is refused before the guest runs
//! ([`check`]), judged by the filesystem's type (the kernel's `statfs` of
//! the directory and the process's mount table), never by its path: `/`,
//! a bind mount of `/proc` under `/srv`, and `/sys/fs/cgroup` are all
//! refused, and a `proc` directory that is plain files is not.
//!
//! The filesystems, as the kernel names them in `/proc/self/mountinfo`:
//! the host's processes (`proc`), kernel and machine state (`sysfs`,
//! `cgroup`, `cgroup2`, `debugfs`, `tracefs`, `securityfs`, `selinuxfs`,
//! `smackfs`, `apparmorfs`, `bpf`, `configfs`, `pstore`, `efivarfs`,
//! `resctrl`, `xenfs`), devices (`devtmpfs`, `devpts`, `devfs`, `binder`,
//! `usbfs`), and kernel objects a file stands for (`mqueue`, `binfmt_misc`
//! which registers interpreters, `nsfs` namespaces, `fusectl`,
//! `rpc_pipefs`, `nfsd`).
//!
//! Directories are read-only unless given as writable ([`Preopen`]): a guest
//! that only reads its configuration or certificates cannot change them.
//!
//! Nor may a guest's directory be, contain or lie inside a compiled-code
//! cache (moat's `cache` module): an entry there is native code that a later run
//! of this user's executes, and its key is what makes an entry authentic.
//! The run's own cache directory and the default one
//! (`$XDG_CACHE_HOME/moat` or `~/.cache/moat`, which a later `moat run`
//! uses) are both kept out, judged by path and by the directories'
//! identity (a bind mount of the cache elsewhere is the cache), whether or
//! not the cache exists yet.
//!
//! Not judged here: device nodes inside an ordinary filesystem (only root
//! can make them, and a container's device cgroup refuses them), and mounts
//! made under a directory after the guest started.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::trusted::{Kept, Trusted};

/// The filesystem types a guest's directory may not be or contain, as the
/// kernel names them in `/proc/self/mountinfo` (the module's docs group
/// them).
pub(crate) const PSEUDO_FILESYSTEMS: &[&str] = &[
    "proc",
    "sysfs",
    "cgroup",
    "cgroup2",
    "debugfs",
    "tracefs",
    "securityfs",
    "selinuxfs",
    "smackfs",
    "apparmorfs",
    "bpf",
    "configfs",
    "pstore",
    "efivarfs",
    "resctrl",
    "xenfs",
    "devtmpfs",
    "devpts",
    "devfs",
    "binder",
    "usbfs",
    "mqueue",
    "binfmt_misc",
    "nsfs",
    "fusectl",
    "rpc_pipefs",
    "nfsd",
];

/// The same filesystems by the magic number `statfs` reports (where the
/// kernel gives them one of their own: a devtmpfs reports tmpfs's, so the
/// mount table is what names it).
const PSEUDO_MAGIC: &[(u32, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x4341_5d53, "smackfs"),
    (0xcafe_4a11, "bpf"),
    (0x6265_6570, "configfs"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
    (0x1cd1, "devpts"),
    (0x1980_0202, "mqueue"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6e73_6673, "nsfs"),
    (0x6573_5543, "fusectl"),
];

/// Where the kernel lists the mounts this process sees.
const MOUNT_TABLE: &str = "/proc/self/mountinfo";

/// A host directory the guest may use, under a path of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the guest sees it.
    pub guest: String,
    /// Whether the guest may change what is in it (create, write, rename,
    /// remove); otherwise it may only read.
    pub writable: bool,
}

/// A `--dir` (or `MOAT_DIRS`) entry that does not say which directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid directory `{spec}`: {reason} (write HOST_DIR[::GUEST_DIR][:ro|:rw])")]
pub struct PreopenSpecError {
    /// The entry as written.
    pub spec: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Preopen {
    /// `host` as `guest`, read-only.
    pub fn read_only(host: impl Into<PathBuf>, guest: impl Into<String>) -> Preopen {
        Preopen {
            host: host.into(),
            guest: guest.into(),
            writable: false,
        }
    }

    /// `host` as `guest`, read-write.
    pub fn writable(host: impl Into<PathBuf>, guest: impl Into<String>) -> Preopen {
        Preopen {
            writable: true,
            ..Preopen::read_only(host, guest)
        }
    }

    /// Parses `HOST_DIR[::GUEST_DIR][:ro|:rw]`: the guest sees HOST_DIR
    /// under GUEST_DIR (or the same path), read-only unless `:rw`.
    ///
    /// # Errors
    /// [`PreopenSpecError`] for an empty directory on either side, or a
    /// suffix other than `:ro` and `:rw` after the guest path.
    pub fn parse(spec: &str) -> Result<Preopen, PreopenSpecError> {
        let invalid = |reason| PreopenSpecError {
            spec: spec.to_owned(),
            reason,
        };
        let (paths, writable) = match spec.rsplit_once(':') {
            Some((paths, "rw")) if !paths.ends_with(':') => (paths, true),
            Some((paths, "ro")) if !paths.ends_with(':') => (paths, false),
            _ => (spec, false),
        };
        let (host, guest) = paths.split_once("::").unwrap_or((paths, paths));
        if host.is_empty() {
            return Err(invalid("the host directory is empty"));
        }
        if guest.is_empty() {
            return Err(invalid("the guest directory is empty"));
        }
        if guest.contains("::") {
            return Err(invalid("`::` separates the two directories only once"));
        }
        if let Some((_, suffix)) = guest.rsplit_once(':')
            && !suffix.contains('/')
        {
            return Err(invalid("the only suffixes are `:ro` and `:rw`"));
        }
        Ok(Preopen {
            host: PathBuf::from(host),
            guest: guest.to_owned(),
            writable,
        })
    }
}

impl fmt::Display for Preopen {
    /// As [`Preopen::parse`] reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = if self.writable { "rw" } else { "ro" };
        write!(f, "{}::{}:{mode}", self.host.display(), self.guest)
    }
}

/// Why a directory cannot be given to a guest.
#[derive(Debug, thiserror::Error)]
pub enum PreopenError {
    /// The directory is, or has mounted below it, a filesystem of the
    /// host's internals (the module's docs list them).
    #[error(
        "{} {}, a {fstype} filesystem{}; a guest's directory may not hold proc, sysfs, \
         device or other kernel filesystems",
        if *.inside { "it contains" } else { "it is" },
        .mount.display(),
        explain(.fstype)
    )]
    PseudoFilesystem {
        /// Where that filesystem is mounted (the directory itself, or a
        /// mount point below it).
        mount: PathBuf,
        /// Its type, as the kernel names it.
        fstype: String,
        /// Whether it is mounted below the directory (rather than being it).
        inside: bool,
    },
    /// The directory is, contains or lies inside a compiled-code cache.
    #[error(
        "it {relation} moat's compiled-code cache {}: a guest that can reach it could plant \
         native code that a later run executes; give the guest a directory apart from it \
         (or keep the cache elsewhere with --cache-dir)",
        .cache.display()
    )]
    CodeCache {
        /// The cache directory.
        cache: PathBuf,
        /// How the two meet.
        relation: Overlap,
    },
    /// The directory is, or reaches, a file a later run trusts
    /// ([`crate::trusted`]).
    #[error(
        "it {relation} {what} {}: a guest that can reach it could {harm}; give the guest a \
         directory apart from it (or keep the file elsewhere)",
        .file.display()
    )]
    Trusted {
        /// What the file is.
        what: Trusted,
        /// What a guest could do with it.
        harm: &'static str,
        /// The file, as given.
        file: PathBuf,
        /// How the two meet.
        relation: Overlap,
    },
    /// The directory could not be found or examined.
    #[error("cannot examine it: {0}")]
    Inspect(#[source] io::Error),
    /// The mount table could not be read, so what the directory contains
    /// cannot be known.
    #[error("cannot read {MOUNT_TABLE} to see what is mounted in it: {0}")]
    MountTable(#[source] io::Error),
}

/// What a refused filesystem would have given the guest.
fn explain(fstype: &str) -> &'static str {
    match fstype {
        "proc" => " (the host's processes: their memory, environment and files)",
        "sysfs" | "cgroup" | "cgroup2" => " (the kernel's and the machine's settings)",
        "devtmpfs" | "devpts" | "devfs" => " (the host's devices)",
        _ => "",
    }
}

/// How a guest's directory meets a cache directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// It is the kept directory.
    Is,
    /// The kept file or directory is inside it.
    Contains,
    /// It is inside the kept directory.
    LiesInside,
    /// It holds a symbolic link that the path to the kept file or
    /// directory goes through.
    HoldsLink,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Overlap::Is => "is",
            Overlap::Contains => "contains",
            Overlap::LiesInside => "lies inside",
            Overlap::HoldsLink => "holds a symbolic link on the way to",
        })
    }
}

/// Checks that `dir` may be given to a guest: it exists, neither it nor
/// anything mounted below it is one of the kernel's (the module's docs), and it
/// reaches no compiled-code cache moat uses by default. Returns the
/// directory's canonical path, the one to open (so that what was judged is
/// what the guest gets). An embedder that gives its guests directories of
/// its own judges them with this, or with [`check_against`] to keep its own
/// trusted files out of them too.
///
/// # Errors
/// [`PreopenError`].
pub fn check(dir: &Path) -> Result<PathBuf, PreopenError> {
    check_against(dir, true, &[])
}

/// As [`check`], keeping `dir` apart from each of `kept` too: a directory
/// that reaches a [secret](crate::trusted::Trusted::is_secret) is refused,
/// and a `writable` one that reaches any of them. Every cache moat could
/// use by default is always kept out (the one `XDG_CACHE_HOME` names, the
/// one under `HOME`, the one under the home the password database gives
/// when `HOME` is unset or another, and the shim's node cache).
///
/// "Reaches" is judged by identity, not by the paths as written: each path
/// is resolved (symbolic links above it followed), then placed in its
/// filesystem (the device of the mount that holds it, and its path from that
/// filesystem's root, from `/proc/self/mountinfo`), and `dir` gives its own
/// place and that of every mount below it. So a bind mount of a cache, of a
/// directory above it, or of the directory itself somewhere else is seen for
/// what it is.
///
/// # Errors
/// [`PreopenError`].
pub fn check_against(dir: &Path, writable: bool, kept: &[Kept]) -> Result<PathBuf, PreopenError> {
    let dir = check_filesystems(dir)?;
    let mounts = platform::mount_table()?;
    let mounts: Vec<Mount<'_>> = mounts.lines().filter_map(parse_mount).collect();
    let defaults = crate::cache::every_default()
        .iter()
        .map(|cache| Kept::new(cache, Trusted::Cache));
    for kept in kept.iter().cloned().chain(defaults) {
        if !kept.kept_from(writable) {
            continue;
        }
        let both_ways = kept.what == Trusted::Cache;
        // A symbolic link on the way to the file, in a directory the guest
        // may write, lets the guest point the next run elsewhere: at a
        // policy, a component or a cache of its own making.
        let through_link = || {
            writable
                && links_on_the_way(&kept.path).iter().any(|link| {
                    link.parent()
                        .is_some_and(|holder| overlap(&dir, holder, false, &mounts).is_some())
                })
        };
        let relation = overlap(&dir, &kept.path, both_ways, &mounts)
            .or_else(|| through_link().then_some(Overlap::HoldsLink));
        if let Some(relation) = relation {
            return Err(match kept.what {
                Trusted::Cache => PreopenError::CodeCache {
                    cache: kept.path,
                    relation,
                },
                what => PreopenError::Trusted {
                    what,
                    harm: kept.harm(),
                    file: kept.path,
                    relation,
                },
            });
        }
    }
    Ok(dir)
}

/// How `dir` (canonical) meets `kept` (which may not exist yet): by their
/// paths, `kept`'s resolved through its nearest existing directory; by the
/// identity (device and inode) of each existing directory on either path;
/// and by their places in their filesystems ([`gives`]). With `both_ways`,
/// `dir` lying inside `kept` counts too (`kept` is a directory).
fn overlap(dir: &Path, kept: &Path, both_ways: bool, mounts: &[Mount<'_>]) -> Option<Overlap> {
    use std::os::unix::fs::MetadataExt;
    let kept = resolved(kept);
    if dir == kept {
        return Some(Overlap::Is);
    }
    if both_ways && dir.starts_with(&kept) {
        return Some(Overlap::LiesInside);
    }
    if kept.starts_with(dir) {
        return Some(Overlap::Contains);
    }
    let identity = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .map(|meta| (meta.dev(), meta.ino()))
    };
    let dir_id = identity(dir);
    if let (Some(dir_id), Some(kept_id)) = (dir_id, identity(&kept)) {
        if dir_id == kept_id {
            return Some(Overlap::Is);
        }
        if both_ways
            && dir
                .ancestors()
                .skip(1)
                .any(|up| identity(up) == Some(kept_id))
        {
            return Some(Overlap::LiesInside);
        }
    }
    if let Some(dir_id) = dir_id
        && kept
            .ancestors()
            .skip(1)
            .any(|up| identity(up) == Some(dir_id))
    {
        return Some(Overlap::Contains);
    }
    if gives(mounts, dir, &kept) {
        return Some(Overlap::Contains);
    }
    (both_ways && gives(mounts, &kept, dir)).then_some(Overlap::LiesInside)
}

/// Where `path` (absolute, resolved) lives: the device of the mount that
/// holds it and its path from that filesystem's root.
fn place(mounts: &[Mount<'_>], path: &Path) -> Option<(String, PathBuf)> {
    // The mount at the longest mount point above it, the last listed if
    // several (a later mount covers an earlier one).
    let holder = mounts
        .iter()
        .filter(|mount| path.starts_with(&mount.point))
        .max_by_key(|mount| mount.point.components().count())?;
    let rest = path.strip_prefix(&holder.point).ok()?;
    Some((holder.dev.to_owned(), holder.root.as_ref()?.join(rest)))
}

/// Whether `target` lies in what `dir` gives a guest: the part of its own
/// filesystem below it, and every filesystem (or part of one, for a bind
/// mount) mounted below it.
fn gives(mounts: &[Mount<'_>], dir: &Path, target: &Path) -> bool {
    let Some((device, at)) = place(mounts, target) else {
        return false;
    };
    place(mounts, dir)
        .into_iter()
        .chain(
            mounts
                .iter()
                .filter(|mount| mount.point.starts_with(dir))
                .filter_map(|mount| Some((mount.dev.to_owned(), mount.root.clone()?))),
        )
        .any(|(given, root)| given == device && at.starts_with(&root))
}

/// The kernel's own bound on links followed resolving one path.
const MAX_LINKS_FOLLOWED: usize = 40;

/// Each symbolic link that resolving `path` goes through, as it lies (its
/// directory resolved, its own name as is), in the order met, the last
/// component's included; resolution stops where the path stops existing,
/// or past [`MAX_LINKS_FOLLOWED`]. Whoever may write the directory that
/// holds one of them decides where the path leads.
fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    use std::ffi::OsString;
    use std::path::Component;
    let mut links = Vec::new();
    let Ok(absolute) = std::path::absolute(path) else {
        return links;
    };
    // What is left to walk, the next component last.
    let owned = |path: &Path| -> Vec<OsString> {
        path.components()
            .rev()
            .map(|part| part.as_os_str().to_owned())
            .collect()
    };
    let mut left = owned(&absolute);
    let mut at = PathBuf::from("/");
    while let Some(part) = left.pop() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir) => at = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                at.pop();
            }
            Some(Component::Normal(name)) => {
                let next = at.join(name);
                let Ok(meta) = std::fs::symlink_metadata(&next) else {
                    break;
                };
                if !meta.file_type().is_symlink() {
                    at = next;
                    continue;
                }
                let Ok(target) = std::fs::read_link(&next) else {
                    break;
                };
                links.push(next);
                if links.len() > MAX_LINKS_FOLLOWED {
                    break;
                }
                left.extend(owned(&target));
            }
            _ => {}
        }
    }
    links
}

/// `path` made absolute, through the canonical form of its nearest
/// existing ancestor (symbolic links there resolved), the rest as written.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            return rest
                .iter()
                .rev()
                .fold(canonical, |path, part| path.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// The filesystem half of [`check`].
fn check_filesystems(dir: &Path) -> Result<PathBuf, PreopenError> {
    let dir = std::fs::canonicalize(dir).map_err(PreopenError::Inspect)?;
    if !dir.is_dir() {
        return Err(PreopenError::Inspect(io::Error::new(
            io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    platform::check(&dir)?;
    Ok(dir)
}

#[cfg(target_os = "linux")]
mod platform {
    use super::*;

    pub(super) fn check(dir: &Path) -> Result<(), PreopenError> {
        let stat = rustix::fs::statfs(dir).map_err(|e| PreopenError::Inspect(e.into()))?;
        // The kernel's word is a long; magic numbers are 32 bits.
        let magic = stat.f_type as u64 as u32;
        if let Some((_, fstype)) = PSEUDO_MAGIC.iter().find(|(m, _)| *m == magic) {
            return Err(PreopenError::PseudoFilesystem {
                mount: dir.to_owned(),
                fstype: (*fstype).to_owned(),
                inside: false,
            });
        }
        judge_mounts(dir, &mount_table()?)
    }

    pub(super) fn mount_table() -> Result<String, PreopenError> {
        std::fs::read_to_string(MOUNT_TABLE).map_err(PreopenError::MountTable)
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use super::*;

    /// Elsewhere the kernel has none of these filesystems.
    pub(super) fn check(_dir: &Path) -> Result<(), PreopenError> {
        Ok(())
    }

    /// No table: paths and identities judge alone.
    pub(super) fn mount_table() -> Result<String, PreopenError> {
        Ok(String::new())
    }
}

/// Judges `dir` (canonical) against a mount table in `mountinfo` form:
/// the mount that holds `dir`, then every mount below it.
fn judge_mounts(dir: &Path, table: &str) -> Result<(), PreopenError> {
    let mounts: Vec<Mount<'_>> = table.lines().filter_map(parse_mount).collect();
    let pseudo = |fstype: &str| PSEUDO_FILESYSTEMS.contains(&fstype);
    // The mount that holds `dir` is the one at the longest mount point
    // above it, the last listed if several (a later mount covers).
    let holder = mounts
        .iter()
        .filter(|mount| dir.starts_with(&mount.point))
        .max_by_key(|mount| mount.point.components().count());
    if let Some(mount) = holder.filter(|mount| pseudo(mount.fstype)) {
        return Err(PreopenError::PseudoFilesystem {
            mount: dir.to_owned(),
            fstype: mount.fstype.to_owned(),
            inside: false,
        });
    }
    match mounts
        .into_iter()
        .find(|mount| mount.point != dir && mount.point.starts_with(dir) && pseudo(mount.fstype))
    {
        Some(mount) => Err(PreopenError::PseudoFilesystem {
            mount: mount.point,
            fstype: mount.fstype.to_owned(),
            inside: true,
        }),
        None => Ok(()),
    }
}

/// One line of `mountinfo`.
struct Mount<'a> {
    /// The filesystem's device, `MAJ:MIN`.
    dev: &'a str,
    /// The directory of that filesystem mounted here (`/` unless a bind
    /// mount of a part of it); none if the kernel names something else
    /// (`net:[4026531840]` for a namespace).
    root: Option<PathBuf>,
    /// Where it is mounted.
    point: PathBuf,
    /// Its type, as the kernel names it.
    fstype: &'a str,
}

/// One `mountinfo` line: `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS
/// [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS`, with spaces, tabs, newlines
/// and backslashes in paths written as octal escapes.
fn parse_mount(line: &str) -> Option<Mount<'_>> {
    let (head, tail) = line.split_once(" - ")?;
    let mut fields = head.split(' ');
    let dev = fields.nth(2)?;
    let root = PathBuf::from(unescape(fields.next()?));
    let point = PathBuf::from(unescape(fields.next()?));
    let fstype = tail.split(' ').next()?;
    // Only absolute, normal paths: anything else is not a mount point.
    let normal = |path: &Path| {
        path.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
    };
    let root = normal(&root).then_some(root);
    normal(&point).then_some(Mount {
        dev,
        root,
        point,
        fstype,
    })
}

/// Undoes mountinfo's `\ooo` escapes.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .map(|d| d.iter().fold(0u32, |n, b| n * 8 + u32::from(b - b'0')));
        match octal.and_then(|n| u8::try_from(n).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
25 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw
26 22 0:5 / /dev rw,nosuid,relatime shared:8 - devtmpfs udev rw,size=4096k
27 26 0:24 / /dev/pts rw,nosuid,noexec,relatime shared:9 - devpts devpts rw
28 22 0:25 / /srv/data rw,relatime shared:20 - tmpfs tmpfs rw
29 28 0:21 / /srv/data/inner\\040proc rw,relatime shared:21 - proc proc rw
30 22 0:26 / /srv/plain rw,relatime shared:22 - tmpfs tmpfs rw
";

    fn judged(dir: &str) -> Result<(), PreopenError> {
        judge_mounts(Path::new(dir), TABLE)
    }

    fn refused(dir: &str) -> (String, String, bool) {
        match judged(dir) {
            Err(PreopenError::PseudoFilesystem {
                mount,
                fstype,
                inside,
            }) => (mount.display().to_string(), fstype, inside),
            other => panic!("{dir}: {other:?}"),
        }
    }

    #[test]
    fn a_directory_that_holds_a_kernel_filesystem_anywhere_below_is_refused() {
        assert_eq!(refused("/"), ("/proc".into(), "proc".into(), true));
        assert_eq!(refused("/sys"), ("/sys".into(), "sysfs".into(), false));
        assert_eq!(
            refused("/sys/fs"),
            ("/sys/fs".into(), "sysfs".into(), false),
            "inside a sysfs"
        );
        assert_eq!(
            refused("/sys/fs/cgroup"),
            ("/sys/fs/cgroup".into(), "cgroup2".into(), false)
        );
        assert_eq!(
            refused("/dev"),
            ("/dev".into(), "devtmpfs".into(), false),
            "a devtmpfs is named by the mount table"
        );
        assert_eq!(
            refused("/proc/self"),
            ("/proc/self".into(), "proc".into(), false)
        );
        assert_eq!(
            refused("/srv/data"),
            ("/srv/data/inner proc".into(), "proc".into(), true),
            "a bind mount of procfs, its path escaped"
        );
        assert_eq!(
            refused("/srv"),
            ("/srv/data/inner proc".into(), "proc".into(), true)
        );
    }

    #[test]
    fn ordinary_directories_pass() {
        for dir in [
            "/srv/plain",
            "/srv/plain/certs",
            "/home/user",
            "/procs",
            "/srv/data2",
        ] {
            assert!(judged(dir).is_ok(), "{dir}");
        }
    }

    #[test]
    fn the_refusal_says_what_the_filesystem_would_have_given() {
        let e = judged("/").unwrap_err().to_string();
        assert_eq!(
            e,
            "it contains /proc, a proc filesystem (the host's processes: their memory, \
             environment and files); a guest's directory may not hold proc, sysfs, device \
             or other kernel filesystems"
        );
    }

    #[test]
    fn this_machines_proc_and_root_are_refused_and_a_temporary_directory_is_not() {
        assert!(matches!(
            check(Path::new("/proc/self")),
            Err(PreopenError::PseudoFilesystem { .. })
        ));
        assert!(matches!(
            check(Path::new("/")),
            Err(PreopenError::PseudoFilesystem { inside: true, .. })
        ));
        // A directory of its own there, not the temporary directory itself:
        // with HOME under it (HOME=/tmp in some containers and CI jobs) it
        // holds the default cache and is refused for that.
        let tmp = std::env::temp_dir().join(format!("moat-preopen-tmp-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let judged = check(&tmp);
        std::fs::remove_dir(&tmp).unwrap();
        assert!(judged.is_ok(), "{}: {judged:?}", tmp.display());
        assert!(matches!(
            check(Path::new("/no/such/dir")),
            Err(PreopenError::Inspect(_))
        ));
    }

    #[test]
    fn a_directory_that_meets_a_cache_is_refused_whether_or_not_the_cache_exists() {
        let base = std::env::temp_dir().join(format!("moat-preopen-test-{}", std::process::id()));
        let home = base.join("home");
        let cache = home.join(".cache/moat");
        std::fs::create_dir_all(home.join("work")).unwrap();
        let caches = [Kept::new(&cache, Trusted::Cache)];
        let relation = |dir: &Path| match check_against(dir, false, &caches) {
            Err(PreopenError::CodeCache { relation, .. }) => Some(relation),
            Ok(_) => None,
            Err(other) => panic!("{}: {other}", dir.display()),
        };
        assert_eq!(relation(&home), Some(Overlap::Contains), "not made yet");
        assert_eq!(relation(&home.join("work")), None);
        std::fs::create_dir_all(cache.join("code")).unwrap();
        assert_eq!(relation(&home), Some(Overlap::Contains));
        assert_eq!(relation(&home.join(".cache")), Some(Overlap::Contains));
        assert_eq!(relation(&cache), Some(Overlap::Is));
        assert_eq!(relation(&cache.join("code")), Some(Overlap::LiesInside));
        // A symbolic link to the cache is the cache.
        std::os::unix::fs::symlink(&cache, base.join("link")).unwrap();
        assert_eq!(relation(&base.join("link")), Some(Overlap::Is));
        let e = check_against(&home, false, &caches)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "it contains moat's compiled-code cache {}",
                cache.display()
            )),
            "{e}"
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A link on the way to a kept file, in a directory the guest may
    /// write, is the guest's to point elsewhere: refused, wherever the
    /// link leads now and whether it is relative, absolute, or one of a
    /// chain; the same directory read-only is fine.
    #[test]
    fn a_directory_holding_a_link_on_the_way_to_a_kept_file_is_refused_writable() {
        let base = std::env::temp_dir().join(format!("moat-preopen-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let guest = base.join("guest");
        let etc = base.join("etc");
        std::fs::create_dir_all(&guest).unwrap();
        std::fs::create_dir_all(etc.join("moat")).unwrap();
        std::fs::write(etc.join("moat/policy.toml"), "").unwrap();
        // guest/conf -> ../etc (relative), guest/abs -> base/guest/conf
        // (absolute, to the first link), guest/file -> the policy itself.
        std::os::unix::fs::symlink("../etc", guest.join("conf")).unwrap();
        std::os::unix::fs::symlink(guest.join("conf"), guest.join("abs")).unwrap();
        std::os::unix::fs::symlink(etc.join("moat/policy.toml"), guest.join("file")).unwrap();
        let judged = |kept: &Path, writable: bool| match check_against(
            &guest,
            writable,
            &[Kept::new(kept, Trusted::Policy)],
        ) {
            Err(PreopenError::Trusted { relation, .. }) => Some(relation),
            Ok(_) => None,
            Err(other) => panic!("{}: {other}", kept.display()),
        };
        for through in ["conf/moat/policy.toml", "abs/moat/policy.toml", "file"] {
            let kept = guest.join(through);
            assert_eq!(judged(&kept, true), Some(Overlap::HoldsLink), "{through}");
            assert_eq!(judged(&kept, false), None, "{through}, read-only");
        }
        // The file as it is, with no link the guest holds on the way.
        assert_eq!(judged(&etc.join("moat/policy.toml"), true), None);
        // A link outside the guest's directory is the user's own.
        std::os::unix::fs::symlink(&etc, base.join("mine")).unwrap();
        assert_eq!(judged(&base.join("mine/moat/policy.toml"), true), None);
        let links = links_on_the_way(&guest.join("abs/moat/policy.toml"));
        assert_eq!(links, [guest.join("abs"), guest.join("conf")]);
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A table where `/srv/view` is a bind mount of `/home/u/.cache` (root
    /// `/home/u/.cache` of the root filesystem's device 8:1) and
    /// `/mnt/data` one of `/srv/data`'s tmpfs's `/sub`.
    const BINDS: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
28 22 0:25 / /srv/data rw,relatime shared:20 - tmpfs tmpfs rw
31 22 8:1 /home/u/.cache /srv/view rw,relatime shared:1 - ext4 /dev/sda1 rw
32 22 0:25 /sub /mnt/data rw,relatime shared:20 - tmpfs tmpfs rw
33 22 0:4 net:[4026531840] /run/netns/x rw shared:5 - nsfs nsfs rw
";

    #[test]
    fn what_a_directory_gives_is_judged_in_its_filesystem_not_by_its_path() {
        let mounts: Vec<Mount<'_>> = BINDS.lines().filter_map(parse_mount).collect();
        assert_eq!(mounts.len(), 5, "a namespace's mount is still a mount");
        let gives = |dir: &str, target: &str| gives(&mounts, Path::new(dir), Path::new(target));
        // The cache under its own path, and through the bind mount of its
        // parent: the directory that holds the mount point gives it.
        assert!(gives("/home/u", "/home/u/.cache/moat/key"));
        assert!(
            gives("/srv", "/home/u/.cache/moat/key"),
            "through /srv/view"
        );
        assert!(gives("/srv/view", "/home/u/.cache/moat/key"));
        assert!(gives("/srv/view/moat", "/home/u/.cache/moat/key"));
        // And the other way: a path through the bind lies where it leads.
        assert!(gives("/home/u/.cache/moat", "/srv/view/moat/code/x"));
        assert!(gives("/srv/data/sub", "/mnt/data/file"));
        assert!(gives("/mnt", "/srv/data/sub/file"));
        // Apart.
        assert!(!gives("/srv/data", "/home/u/.cache/moat/key"));
        assert!(!gives("/mnt/data", "/srv/data/other"));
        assert!(!gives("/home/u/work", "/home/u/.cache/moat/key"));
        assert!(!gives("/srv/view/other", "/home/u/.cache/moat/key"));
    }

    #[test]
    fn specs_parse_with_their_mode() {
        let p = |s: &str| Preopen::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(p("certs"), Preopen::read_only("certs", "certs"));
        assert_eq!(
            p("./certs::/certs"),
            Preopen::read_only("./certs", "/certs")
        );
        assert_eq!(p("/data:rw"), Preopen::writable("/data", "/data"));
        assert_eq!(p("/srv/x::/x:rw"), Preopen::writable("/srv/x", "/x"));
        assert_eq!(p("/srv/x::/x:ro"), Preopen::read_only("/srv/x", "/x"));
        assert_eq!(
            p(&Preopen::writable("/a", "/b").to_string()),
            Preopen::writable("/a", "/b")
        );
        for bad in ["", "::/x", "/x::", "/x:rx", "/a::/b::/c", ":rw"] {
            assert!(Preopen::parse(bad).is_err(), "{bad:?}");
        }
        assert!(
            Preopen::parse("/x:rx")
                .unwrap_err()
                .to_string()
                .contains("HOST_DIR[::GUEST_DIR][:ro|:rw]")
        );
    }
}
