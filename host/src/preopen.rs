//! Directories a guest may be given, and the ones it may never be given.
//!
//! A guest sees a host directory through wasi:filesystem, confined to it by
//! cap-std: no `..` past its root, no absolute paths, no symlink out. What
//! confinement cannot help with is a directory whose files *are* the host:
//! a procfs holds `/proc/self/mem` (the host process's memory, writable),
//! `/proc/self/environ` and every other process's; a sysfs or a cgroupfs
//! holds the kernel's and the machine's switches; a devtmpfs or devpts holds
//! devices. So a directory that is, or has mounted anywhere below it, one
//! of [`PSEUDO_FILESYSTEMS`] is refused before the guest runs
//! ([`check`]), judged by the filesystem's type (the kernel's `statfs` of
//! the directory and the process's mount table), never by its path: `/`,
//! a bind mount of `/proc` under `/srv`, and `/sys/fs/cgroup` are all
//! refused, and a `proc` directory that is plain files is not.
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

/// The filesystem types a guest's directory may not be or contain, as the
/// kernel names them in `/proc/self/mountinfo`: the host's processes
/// (`proc`), kernel and machine state (`sysfs`, `cgroup`, `cgroup2`,
/// `debugfs`, `tracefs`, `securityfs` and the LSMs' own, `bpf`,
/// `configfs`, `pstore`, `efivarfs`, `resctrl`, `xenfs`), devices
/// (`devtmpfs`, `devpts`, `devfs`, `binder`, `usbfs`), and kernel objects a
/// file stands for (`mqueue`, `binfmt_misc` which registers interpreters,
/// `nsfs` namespaces, `fusectl`, `rpc_pipefs`, `nfsd`).
pub const PSEUDO_FILESYSTEMS: &[&str] = &[
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
    /// host's internals ([`PSEUDO_FILESYSTEMS`]).
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
    /// It is the cache directory.
    Is,
    /// The cache directory is inside it.
    Contains,
    /// It is inside the cache directory.
    LiesInside,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Overlap::Is => "is",
            Overlap::Contains => "contains",
            Overlap::LiesInside => "lies inside",
        })
    }
}

/// Checks that `dir` may be given to a guest: it exists, neither it nor
/// anything mounted below it is one of [`PSEUDO_FILESYSTEMS`], and it
/// keeps apart from the default compiled-code cache. Returns the
/// directory's canonical path, the one to open (so that what was judged is
/// what the guest gets). An embedder that gives its guests directories of
/// its own judges them with this.
///
/// # Errors
/// [`PreopenError`].
pub fn check(dir: &Path) -> Result<PathBuf, PreopenError> {
    check_against(dir, &[])
}

/// As [`check`], keeping `dir` apart from each of `caches` too (the
/// default cache is always kept out).
///
/// # Errors
/// [`PreopenError`].
pub fn check_against(dir: &Path, caches: &[PathBuf]) -> Result<PathBuf, PreopenError> {
    let dir = check_filesystems(dir)?;
    let default = crate::cache::CacheDir::Default.resolve();
    for cache in caches.iter().chain(default.iter()) {
        if let Some(relation) = overlap(&dir, cache) {
            return Err(PreopenError::CodeCache {
                cache: cache.clone(),
                relation,
            });
        }
    }
    Ok(dir)
}

/// How `dir` (canonical) meets `cache` (which may not exist yet): by their
/// paths, the cache's resolved through its nearest existing directory,
/// and by the identity (device and inode) of each existing directory on
/// either path, so that a bind mount of the cache, or of a directory
/// above it, is seen for what it is.
fn overlap(dir: &Path, cache: &Path) -> Option<Overlap> {
    use std::os::unix::fs::MetadataExt;
    let cache = resolved(cache);
    if dir == cache {
        return Some(Overlap::Is);
    }
    if dir.starts_with(&cache) {
        return Some(Overlap::LiesInside);
    }
    if cache.starts_with(dir) {
        return Some(Overlap::Contains);
    }
    let identity = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .map(|meta| (meta.dev(), meta.ino()))
    };
    let dir_id = identity(dir)?;
    if let Some(cache_id) = identity(&cache) {
        if dir_id == cache_id {
            return Some(Overlap::Is);
        }
        if dir
            .ancestors()
            .skip(1)
            .any(|up| identity(up) == Some(cache_id))
        {
            return Some(Overlap::LiesInside);
        }
    }
    cache
        .ancestors()
        .skip(1)
        .any(|up| identity(up) == Some(dir_id))
        .then_some(Overlap::Contains)
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
        let table = std::fs::read_to_string(MOUNT_TABLE).map_err(PreopenError::MountTable)?;
        judge_mounts(dir, &table)
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use super::*;

    /// Elsewhere the kernel has none of these filesystems.
    pub(super) fn check(_dir: &Path) -> Result<(), PreopenError> {
        Ok(())
    }
}

/// Judges `dir` (canonical) against a mount table in `mountinfo` form:
/// the mount that holds `dir`, then every mount below it.
fn judge_mounts(dir: &Path, table: &str) -> Result<(), PreopenError> {
    let mounts: Vec<(PathBuf, &str)> = table.lines().filter_map(parse_mount).collect();
    let pseudo = |fstype: &str| PSEUDO_FILESYSTEMS.contains(&fstype);
    // The mount that holds `dir` is the one at the longest mount point
    // above it, the last listed if several (a later mount covers).
    let holder = mounts
        .iter()
        .filter(|(mount, _)| dir.starts_with(mount))
        .max_by_key(|(mount, _)| mount.components().count());
    if let Some((_, fstype)) = holder.filter(|(_, fstype)| pseudo(fstype)) {
        return Err(PreopenError::PseudoFilesystem {
            mount: dir.to_owned(),
            fstype: (*fstype).to_owned(),
            inside: false,
        });
    }
    match mounts
        .into_iter()
        .find(|(mount, fstype)| mount != dir && mount.starts_with(dir) && pseudo(fstype))
    {
        Some((mount, fstype)) => Err(PreopenError::PseudoFilesystem {
            mount,
            fstype: fstype.to_owned(),
            inside: true,
        }),
        None => Ok(()),
    }
}

/// The mount point and filesystem type of one `mountinfo` line:
/// `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE
/// SUPER_OPTIONS`, with spaces, tabs, newlines and backslashes in paths
/// written as octal escapes.
fn parse_mount(line: &str) -> Option<(PathBuf, &str)> {
    let (head, tail) = line.split_once(" - ")?;
    let mount = head.split(' ').nth(4)?;
    let fstype = tail.split(' ').next()?;
    let mount = PathBuf::from(unescape(mount));
    // Only absolute, normal paths: anything else is not a mount point.
    mount
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        .then_some((mount, fstype))
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
        let caches = [cache.clone()];
        let relation = |dir: &Path| match check_against(dir, &caches) {
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
        let e = check_against(&home, &caches).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "it contains moat's compiled-code cache {}",
                cache.display()
            )),
            "{e}"
        );
        std::fs::remove_dir_all(&base).unwrap();
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
