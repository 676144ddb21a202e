//! Directories given to a guest, as a user sees them: read-only unless
//! asked for with `:rw`, never a kernel interface (procfs, sysfs,
//! devtmpfs, ...) or a directory holding one, and no way out of them for a
//! hostile std::fs guest (`tests/guests/fs-probe`), by `..`, absolute
//! paths, symlinks or links of its own.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::guests;
use moat_host::policy::Policy;
use moat_host::preopen::PreopenError;
use moat_host::{Input, MoatError, RunOptions};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// A variable in moat's own environment: a guest that read the host's
/// `/proc/self/environ` would print it.
const MARKER: &str = "MOAT_TEST_SECRET";
const MARKER_VALUE: &str = "host-environment-marker-5c1e0b";

/// What the escape test's `secret`, outside the granted directory, holds.
const SECRET: &str = "the-secret-outside-the-grant-9d27";

/// The filesystem types moat must never give a guest, spelled as
/// /proc/self/mountinfo spells them.
const KERNEL_FILESYSTEMS: &[&str] = &[
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "cgroup",
    "cgroup2",
    "debugfs",
    "tracefs",
    "securityfs",
    "bpf",
    "configfs",
    "mqueue",
    "binfmt_misc",
    "nsfs",
    "fusectl",
    "pstore",
    "efivarfs",
    "selinuxfs",
];

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("files-cache")
}

/// `moat run --cache-dir=... ARGS`, with [`MARKER`] alone in moat's
/// environment (so that it is within the 64 bytes fs-probe shows of a file).
fn moat_run(args: &[&str]) -> Output {
    Command::new(MOAT)
        .env_clear()
        .env(MARKER, MARKER_VALUE)
        .arg("run")
        .arg(format!("--cache-dir={}", cache_dir().display()))
        .args(args)
        .output()
        .expect("moat runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What a run printed, for assertion messages.
fn shown(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Nothing the guest must not see reached its output.
fn assert_nothing_leaked(out: &Output) {
    for output in [text(&out.stdout), text(&out.stderr)] {
        assert!(
            !output.contains(MARKER_VALUE),
            "the host's environment leaked:\n{}",
            shown(out)
        );
        assert!(
            !output.contains(SECRET),
            "the secret outside the grant leaked:\n{}",
            shown(out)
        );
        assert!(
            !output.contains("root:x:0:0"),
            "the host's /etc/passwd leaked:\n{}",
            shown(out)
        );
    }
}

/// fs-probe's report: (attempt, outcome) for each line, the outcome
/// starting with `ok` or `error`.
fn attempts(stdout: &str) -> Vec<(&str, &str)> {
    stdout
        .lines()
        .map(|line| {
            let (attempt, outcome) = line
                .split_once(": ")
                .unwrap_or_else(|| panic!("not an fs-probe report line: {line:?}"));
            assert!(
                outcome.starts_with("ok") || outcome.starts_with("error "),
                "not an fs-probe report line: {line:?}"
            );
            (attempt, outcome)
        })
        .collect()
}

/// Every attempt fs-probe reported failed.
fn assert_every_attempt_failed(what: &str, out: &Output) {
    let stdout = text(&out.stdout);
    let succeeded: Vec<_> = attempts(&stdout)
        .into_iter()
        .filter(|(_, outcome)| outcome.starts_with("ok"))
        .collect();
    assert!(
        succeeded.is_empty(),
        "{what}: these attempts succeeded: {succeeded:#?}\n{}",
        shown(out)
    );
}

/// A fresh directory of the test's own, removed when dropped unless
/// something is still mounted inside it (then it is left alone).
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("files")
            .join(format!("{name}-{}", std::process::id()));
        if path.exists() {
            assert!(
                mounts_under(&path).is_empty(),
                "{} has mounts inside it from an earlier run",
                path.display()
            );
            std::fs::remove_dir_all(&path).expect("remove an old scratch directory");
        }
        std::fs::create_dir_all(&path).expect("make a scratch directory");
        Scratch(path.canonicalize().expect("canonical scratch path"))
    }

    fn path(&self) -> &Path {
        &self.0
    }

    pub(crate) fn join(&self, relative: &str) -> PathBuf {
        self.0.join(relative)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mounted = mounts_under(&self.0);
        if mounted.is_empty() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            eprintln!(
                "leaving {} in place: {mounted:?} still mounted inside",
                self.0.display()
            );
        }
    }
}

/// One line of /proc/self/mountinfo.
struct Mount {
    point: PathBuf,
    fstype: String,
}

/// The mounts of this process's mount namespace (moat, its child, shares it).
fn mounts() -> Vec<Mount> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("/proc/self/mountinfo");
    info.lines()
        .filter_map(|line| {
            // ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE ...
            let (before, after) = line.split_once(" - ")?;
            let point = before.split(' ').nth(4)?;
            let fstype = after.split(' ').next()?;
            Some(Mount {
                point: PathBuf::from(unescape(point)),
                fstype: fstype.to_owned(),
            })
        })
        .collect()
}

/// mountinfo's octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The mount points strictly inside `dir`.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .filter(|m| m.point.starts_with(dir) && m.point != dir)
        .map(|m| m.point)
        .collect()
}

/// The type of the filesystem `dir` (canonical) is on.
fn filesystem_of(dir: &Path) -> Option<String> {
    // The last of the longest mount points above it: later mounts hide
    // earlier ones at the same point.
    let mut found: Option<Mount> = None;
    for mount in mounts() {
        if dir.starts_with(&mount.point)
            && found
                .as_ref()
                .is_none_or(|f| mount.point.as_os_str().len() >= f.point.as_os_str().len())
        {
            found = Some(mount);
        }
    }
    found.map(|m| m.fstype)
}

/// The kernel filesystems at or under `dir` (canonical), by mountinfo.
fn kernel_filesystems_at_or_under(dir: &Path) -> Vec<String> {
    let mut types: Vec<String> = filesystem_of(dir).into_iter().collect();
    types.extend(
        mounts()
            .into_iter()
            .filter(|m| m.point.starts_with(dir) && m.point != dir)
            .map(|m| m.fstype),
    );
    types.retain(|t| KERNEL_FILESYSTEMS.contains(&t.as_str()));
    types.sort();
    types.dedup();
    types
}

/// `moat run --dir=SPEC fs-probe read ...` was refused before the guest
/// ran, naming a kernel filesystem: `exactly` when the directory is one
/// itself, or any of them when it holds one.
fn assert_refused(spec: &str, host: &str, guest: &str, exactly: Option<&str>) {
    let flag = format!("--dir={spec}");
    let out = moat_run(&[
        &flag,
        guests::FS_PROBE,
        "read",
        "/proc/self/environ",
        &format!("{guest}/self/environ"),
        &format!("{guest}/environ"),
        &format!("{guest}/proc/self/environ"),
        &format!("{guest}/etc/passwd"),
        &format!("{guest}/inner/self/environ"),
    ]);
    let err = text(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(0),
        "{flag} was not refused:\n{}",
        shown(&out)
    );
    assert!(
        out.stdout.is_empty(),
        "the guest ran with {flag}:\n{}",
        shown(&out)
    );
    assert_nothing_leaked(&out);
    assert!(
        err.contains("cannot give the guest"),
        "{flag}:\n{}",
        shown(&out)
    );
    // The directory as written, or where it led.
    let canonical = std::fs::canonicalize(host).map(|p| p.display().to_string());
    assert!(
        err.contains(host) || canonical.is_ok_and(|c| err.contains(&c)),
        "{flag}: the message does not name {host}:\n{err}"
    );
    match exactly {
        Some(fstype) => assert!(
            err.contains(&format!("a {fstype} filesystem")),
            "{flag}: the message does not name a {fstype} filesystem:\n{err}"
        ),
        None => assert!(
            KERNEL_FILESYSTEMS
                .iter()
                .any(|t| err.contains(&format!("a {t} filesystem"))),
            "{flag}: the message names no kernel filesystem:\n{err}"
        ),
    }
}

/// Refuses `host` given as `guest`: the spec's host part is `host` as
/// written; what the message must name comes from mountinfo.
fn assert_refused_dir(host: &str, guest: &str) {
    let canonical = std::fs::canonicalize(host).expect("canonical path");
    let kinds = kernel_filesystems_at_or_under(&canonical);
    assert!(
        !kinds.is_empty(),
        "{host} is neither on nor holds a kernel filesystem here"
    );
    let own = filesystem_of(&canonical).filter(|t| KERNEL_FILESYSTEMS.contains(&t.as_str()));
    let spec = if host == guest {
        host.to_owned()
    } else {
        format!("{host}::{guest}")
    };
    assert_refused(&spec, host, guest, own.as_deref());
}

#[test]
fn kernel_filesystems_are_refused_before_the_guest_runs() {
    for (host, guest) in [
        ("/", "/"),
        ("/proc", "/proc"),
        ("/proc/self", "/p"),
        ("/proc/1", "/p"),
        ("/sys", "/sys"),
        ("/dev", "/dev"),
    ] {
        assert_refused_dir(host, guest);
    }
    // Devices, cgroups and the rest, wherever this machine mounts them.
    let cgroups = Path::new("/sys/fs/cgroup");
    if cgroups.is_dir() {
        assert_refused_dir("/sys/fs/cgroup", "/cg");
    }
    let mut seen = Vec::new();
    for mount in mounts() {
        let standard = ["/proc", "/sys", "/dev"]
            .iter()
            .any(|top| mount.point.starts_with(top));
        if !standard
            || !KERNEL_FILESYSTEMS.contains(&mount.fstype.as_str())
            || seen.contains(&mount.point)
            || !mount.point.is_dir()
        {
            continue;
        }
        let point = mount
            .point
            .to_str()
            .expect("a UTF-8 mount point")
            .to_owned();
        assert_refused_dir(&point, "/k");
        seen.push(mount.point);
    }
    for wanted in ["/dev/pts", "/dev/mqueue", "/sys/fs/cgroup/unified"] {
        if !seen.iter().any(|p| p == Path::new(wanted)) {
            eprintln!("note: {wanted} is not a kernel filesystem mount here; not tried");
        }
    }
}

#[test]
fn kernel_filesystems_are_refused_however_the_path_is_spelled() {
    // By type, not by path: other spellings of /proc, and paths that only
    // lead there.
    for spec in ["/proc/.", "//proc", "/sys/../proc", "/proc/self/."] {
        assert_refused(&format!("{spec}::/p"), spec, "/p", Some("proc"));
    }
    let scratch = Scratch::new("links");
    let to_proc = scratch.join("to-proc");
    let to_root = scratch.join("to-root");
    std::os::unix::fs::symlink("/proc", &to_proc).expect("symlink to /proc");
    std::os::unix::fs::symlink("/", &to_root).expect("symlink to /");
    let to_proc = to_proc.to_str().expect("UTF-8 path");
    assert_refused(&format!("{to_proc}::/p"), to_proc, "/p", Some("proc"));
    let to_root = to_root.to_str().expect("UTF-8 path");
    assert_refused(&format!("{to_root}::/r"), to_root, "/r", None);
    // procfs's links to a process's root: the directory is /, which holds
    // /proc, whatever path led to it.
    assert_refused("/proc/self/root::/r", "/proc/self/root", "/r", None);
    if Path::new("/proc/1/root").is_dir() {
        assert_refused("/proc/1/root::/r", "/proc/1/root", "/r", None);
    }
}

/// A filesystem mounted for one test, unmounted when dropped (a panic
/// included).
pub(crate) struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Busy: detach it now, the kernel frees it when it can.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// `mount ARGS AT`, or why not; AT is made a directory unless it exists.
pub(crate) fn mount(args: &[&str], at: &Path) -> Result<Mounted, String> {
    if !at.exists() {
        std::fs::create_dir_all(at).expect("make a mount point");
    }
    let out = Command::new("mount")
        .args(args)
        .arg(at)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if out.status.success() {
        Ok(Mounted(at.to_owned()))
    } else {
        Err(format!(
            "mount {} {} failed: {}",
            args.join(" "),
            at.display(),
            text(&out.stderr).trim()
        ))
    }
}

/// `mount ARGS AT` after the first mount of a test worked: a failure
/// skips the rest of the test (returns `None`), or fails it in CI.
fn also_mount(test: &str, args: &[&str], at: &Path) -> Option<Mounted> {
    match mount(args, at) {
        Ok(mounted) => Some(mounted),
        Err(why) => {
            skip_without_mount(test, Some(why));
            None
        }
    }
}

/// Skips the test (returns true) when it cannot mount filesystems here,
/// saying why; with `CI` set, fails instead.
pub(crate) fn skip_without_mount(test: &str, why: Option<String>) -> bool {
    let why = if !rustix::process::geteuid().is_root() {
        Some("mounting a filesystem needs root".to_owned())
    } else {
        why
    };
    support::skip_unless(test, why)
}

#[test]
fn a_directory_holding_a_kernel_filesystem_is_refused() {
    const TEST: &str = "a_directory_holding_a_kernel_filesystem_is_refused";
    if skip_without_mount(TEST, None) {
        return;
    }
    let scratch = Scratch::new("holding");
    std::fs::write(scratch.join("plain.txt"), "an ordinary file\n").expect("write");

    // procfs one level down.
    let proc_inside = match mount(&["-t", "proc", "proc"], &scratch.join("proc-inside/inner")) {
        Ok(mounted) => mounted,
        Err(why) => {
            // Root, but mounting is not allowed here (a container without
            // CAP_SYS_ADMIN): skipped, or failed in CI.
            skip_without_mount(TEST, Some(why));
            return;
        }
    };
    let outer = scratch.join("proc-inside");
    let outer = outer.to_str().expect("UTF-8 path");
    assert_contains_refused(outer, "proc");
    // The mount point itself: it is one.
    let inner = format!("{outer}/inner");
    assert_refused(&format!("{inner}::/data"), &inner, "/data", Some("proc"));
    drop(proc_inside);

    // sysfs three levels down.
    let Some(_sys) = also_mount(
        TEST,
        &["-t", "sysfs", "sysfs"],
        &scratch.join("sys-deep/a/b/c"),
    ) else {
        return;
    };
    let deep = scratch.join("sys-deep");
    assert_contains_refused(deep.to_str().expect("UTF-8 path"), "sysfs");

    // Bind mounts of /proc and of a directory inside it: what counts is
    // the filesystem, not where it was mounted from.
    let Some(_bind) = also_mount(TEST, &["--bind", "/proc"], &scratch.join("bound/proc")) else {
        return;
    };
    let bound = scratch.join("bound");
    assert_contains_refused(bound.to_str().expect("UTF-8 path"), "proc");
    let Some(_sub) = also_mount(TEST, &["--bind", "/proc/sys"], &scratch.join("bound-sub/x"))
    else {
        return;
    };
    let sub = scratch.join("bound-sub");
    assert_contains_refused(sub.to_str().expect("UTF-8 path"), "proc");

    // procfs inside a tmpfs inside the directory.
    let Some(_tmpfs) = also_mount(TEST, &["-t", "tmpfs", "tmpfs"], &scratch.join("nested/t"))
    else {
        return;
    };
    let Some(_nested) = also_mount(TEST, &["-t", "proc", "proc"], &scratch.join("nested/t/a/p"))
    else {
        return;
    };
    let nested = scratch.join("nested");
    assert_contains_refused(nested.to_str().expect("UTF-8 path"), "proc");

    // A namespace, bind-mounted on a file (as `ip netns add` does).
    let ns_file = scratch.join("netns/net");
    std::fs::create_dir_all(scratch.join("netns")).expect("mkdir");
    std::fs::write(&ns_file, "").expect("a file to mount on");
    let Some(_ns) = also_mount(TEST, &["--bind", "/proc/self/ns/net"], &ns_file) else {
        return;
    };
    let netns = scratch.join("netns");
    assert_contains_refused(netns.to_str().expect("UTF-8 path"), "nsfs");

    // A message-queue filesystem and a cgroup2 hierarchy.
    let Some(_mq) = also_mount(TEST, &["-t", "mqueue", "mqueue"], &scratch.join("mq/q")) else {
        return;
    };
    let mq = scratch.join("mq");
    assert_contains_refused(mq.to_str().expect("UTF-8 path"), "mqueue");
    let Some(_cg) = also_mount(TEST, &["-t", "cgroup2", "cgroup2"], &scratch.join("cg/c")) else {
        return;
    };
    let cg = scratch.join("cg");
    assert_contains_refused(cg.to_str().expect("UTF-8 path"), "cgroup2");

    // The whole scratch directory holds all of them; a plain sibling
    // directory with nothing mounted in it is still given.
    let whole = scratch.path().to_str().expect("UTF-8 path");
    assert_refused(&format!("{whole}::/data"), whole, "/data", None);
    let plain = scratch.join("plain");
    std::fs::create_dir_all(&plain).expect("mkdir");
    std::fs::write(plain.join("f.txt"), "given\n").expect("write");
    let flag = format!("--dir={}::/data", plain.display());
    let out = moat_run(&[&flag, guests::FS_PROBE, "read", "/data/f.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
    assert_eq!(
        text(&out.stdout),
        "read /data/f.txt: ok 6 bytes: given\\n\n"
    );
}

/// `--dir=HOST::/data` is refused as holding a `fstype` filesystem.
fn assert_contains_refused(host: &str, fstype: &str) {
    assert_refused(&format!("{host}::/data"), host, "/data", Some(fstype));
    let out = moat_run(&[
        &format!("--dir={host}::/data"),
        guests::FS_PROBE,
        "list",
        "/data",
    ]);
    let err = text(&out.stderr);
    assert!(
        err.contains("contains"),
        "--dir={host}: the message does not say the directory contains one:\n{err}"
    );
}

/// The escape test's directories: `secret` beside `granted`, and in
/// `granted` the symlinks `root -> /`, `p -> /proc`, `up -> ..` and a
/// file of its own.
fn escape_layout(scratch: &Scratch) -> PathBuf {
    let granted = scratch.join("granted");
    std::fs::create_dir_all(&granted).expect("mkdir");
    std::fs::write(scratch.join("secret"), SECRET).expect("write the secret");
    std::fs::write(granted.join("inside.txt"), "inside the grant\n").expect("write");
    for (target, link) in [("/", "root"), ("/proc", "p"), ("..", "up")] {
        std::os::unix::fs::symlink(target, granted.join(link)).expect("symlink");
    }
    granted
}

#[test]
fn a_guest_cannot_get_out_of_its_directory() {
    for mode in ["", ":rw"] {
        let scratch = Scratch::new(&format!("escape{}", mode.replace(':', "-")));
        let granted = escape_layout(&scratch);
        let flag = format!("--dir={}::/data{mode}", granted.display());
        let outside = scratch.path().to_str().expect("UTF-8 path");

        // The directory is there, through std and through open-at itself:
        // the attempts below fail for being outside it, not for a missing
        // preopen.
        let out = moat_run(&[
            &flag,
            guests::FS_PROBE,
            "read",
            "/data/inside.txt",
            "/data/./inside.txt",
        ]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", shown(&out));
        assert_eq!(
            text(&out.stdout),
            "read /data/inside.txt: ok 17 bytes: inside the grant\\n\n\
             read /data/./inside.txt: ok 17 bytes: inside the grant\\n\n",
            "{flag}: {}",
            shown(&out)
        );
        let out = moat_run(&[&flag, guests::FS_PROBE, "raw-read", "/data", "inside.txt"]);
        assert_eq!(
            text(&out.stdout),
            "raw-read /data \"inside.txt\": ok 17 bytes: inside the grant\\n\n",
            "{flag}: {}",
            shown(&out)
        );

        let out = moat_run(&[&flag, guests::FS_PROBE, "escape", "/data", outside]);
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", shown(&out));
        assert_nothing_leaked(&out);
        assert_every_attempt_failed(&flag, &out);
        let stdout = text(&out.stdout);
        let tried = attempts(&stdout);
        for wanted in [
            "read /data/../../../etc/passwd",
            "read /etc/passwd",
            "read /proc/self/environ",
            "poke /proc/self/mem",
            "append /dev/termination-log",
            "read /data/root/etc/passwd",
            "read /data/p/self/environ",
            "read /data/up/secret",
            "symlink /data/made-up -> ../secret, read it",
            "hardlink /data/hard-secret = /data/../secret, read it",
            "raw openat(3, ../secret)",
            "open-at /data \"../secret\" follow",
            "open-at /data \"/etc/passwd\" nofollow",
        ] {
            assert!(
                tried.iter().any(|(attempt, _)| *attempt == wanted),
                "fs-probe did not try {wanted:?}:\n{stdout}"
            );
        }

        // Nothing was written outside, and the secret is as it was.
        for planted in ["planted", "planted-dir", "planted-link", "moved"] {
            assert!(
                std::fs::symlink_metadata(scratch.join(planted)).is_err(),
                "{flag}: the guest made {planted} outside its directory\n{stdout}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(scratch.join("secret")).expect("read the secret"),
            SECRET
        );
    }
}

/// Everything under `dir`: each entry's kind, contents or target, and
/// modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("metadata");
        let modified = meta.modified().expect("mtime");
        let what = if meta.is_symlink() {
            format!("link to {:?}", std::fs::read_link(&path).expect("readlink"))
        } else if meta.is_dir() {
            for entry in std::fs::read_dir(&path).expect("read_dir") {
                pending.push(entry.expect("entry").path());
            }
            "directory".to_owned()
        } else {
            format!("file {:?}", std::fs::read(&path).expect("read"))
        };
        let relative = path.strip_prefix(dir).expect("inside").to_owned();
        entries.insert(relative, format!("{what}, modified {modified:?}"));
    }
    entries
}

/// A directory with a file `existing` and `subdir/empty`, as fs-probe's
/// `mutate` expects.
fn mutable_layout(scratch: &Scratch) -> PathBuf {
    let dir = scratch.join("data");
    std::fs::create_dir_all(dir.join("subdir/empty")).expect("mkdir");
    std::fs::write(dir.join("existing"), "original\n").expect("write");
    std::fs::write(dir.join("subdir/inner"), "inner\n").expect("write");
    dir
}

#[test]
fn a_directory_is_read_only_unless_given_with_rw() {
    let scratch = Scratch::new("read-only");
    let dir = mutable_layout(&scratch);
    let host = dir.to_str().expect("UTF-8 path");
    let before = snapshot(&dir);

    for flag in [
        format!("--dir={host}::/data"),
        format!("--dir={host}::/data:ro"),
    ] {
        // Reading is what it is for.
        let out = moat_run(&[&flag, guests::FS_PROBE, "read", "/data/existing"]);
        assert_eq!(
            text(&out.stdout),
            "read /data/existing: ok 9 bytes: original\\n\n",
            "{}",
            shown(&out)
        );
        for target in ["/data/f", "/data/existing", "/data/subdir/f"] {
            let out = moat_run(&[&flag, guests::FS_PROBE, "write", target, "hello"]);
            assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
            assert!(
                text(&out.stdout).starts_with(&format!("write {target}: error ")),
                "{flag}: the guest wrote {target}:\n{}",
                shown(&out)
            );
        }
        // Every other way of changing it.
        let out = moat_run(&[&flag, guests::FS_PROBE, "mutate", "/data"]);
        assert_eq!(out.status.code(), Some(0), "{}", shown(&out));
        assert!(attempts(&text(&out.stdout)).len() >= 15, "{}", shown(&out));
        assert_every_attempt_failed(&flag, &out);
        assert_eq!(snapshot(&dir), before, "{flag} changed the directory");
    }
    // Without a guest path, the guest sees it at the same path, read-only.
    let out = moat_run(&[
        &format!("--dir={host}"),
        guests::FS_PROBE,
        "write",
        &format!("{host}/f"),
        "hello",
    ]);
    assert!(
        text(&out.stdout).starts_with(&format!("write {host}/f: error ")),
        "{}",
        shown(&out)
    );
    assert_eq!(snapshot(&dir), before, "--dir={host} changed the directory");

    // With :rw the guest writes, and the host holds exactly what it wrote.
    let out = moat_run(&[
        &format!("--dir={host}::/data:rw"),
        guests::FS_PROBE,
        "write",
        "/data/f",
        "hello",
    ]);
    assert_eq!(
        text(&out.stdout),
        "write /data/f: ok wrote 5 bytes\n",
        "{}",
        shown(&out)
    );
    assert_eq!(std::fs::read(dir.join("f")).expect("the file"), b"hello");
    let out = moat_run(&[
        &format!("--dir={host}:rw"),
        guests::FS_PROBE,
        "write",
        &format!("{host}/existing"),
        "hello",
    ]);
    assert_eq!(
        text(&out.stdout),
        format!("write {host}/existing: ok wrote 5 bytes\n"),
        "{}",
        shown(&out)
    );
    assert_eq!(
        std::fs::read(dir.join("existing")).expect("the file"),
        b"hello"
    );
}

#[tokio::test]
async fn the_embedding_api_refuses_a_kernel_filesystem_with_a_typed_error() {
    let options = RunOptions::new(Policy::new())
        .arg(guests::FS_PROBE)
        .args(["read", "/proc/self/environ"])
        .stdin(Input::Empty)
        .dir("/proc", "/proc");
    let finished = support::start_with(guests::FS_PROBE, options)
        .finish()
        .await;
    assert!(
        finished.stdout.is_empty(),
        "the guest ran: {}",
        finished.stdout
    );
    let error = match finished.exit {
        Err(error) => error,
        Ok(exit) => panic!(
            "the guest was given /proc and exited {}: {}",
            exit.code(),
            finished.stdout
        ),
    };
    let message = error.to_string();
    match &error {
        MoatError::PreopenRefused {
            host,
            guest,
            source,
        } => {
            assert_eq!(host, Path::new("/proc"));
            assert_eq!(guest, "/proc");
            let source: &PreopenError = source;
            assert!(source.to_string().contains("a proc filesystem"), "{source}");
        }
        other => panic!("not PreopenRefused: {other:?}"),
    }
    assert!(
        message.contains("cannot give the guest") && message.contains("a proc filesystem"),
        "{message}"
    );
    // The source is reachable as a std error too, as an embedder walks it.
    let source = std::error::Error::source(&error).expect("a source");
    assert!(source.is::<PreopenError>(), "{source:?}");
}

#[tokio::test]
async fn the_embedding_api_gives_directories_read_only_or_writable() {
    let scratch = Scratch::new("embedding");
    let dir = scratch.path().to_owned();
    let run = |writable: bool, file: &'static str| {
        let options = RunOptions::new(Policy::new())
            .arg(guests::FS_PROBE)
            .args(["write", &format!("/data/{file}"), "hello"])
            .stdin(Input::Empty);
        let options = if writable {
            options.dir_writable(&dir, "/data")
        } else {
            options.dir(&dir, "/data")
        };
        support::start_with(guests::FS_PROBE, options).finish()
    };
    let finished = run(false, "read-only").await;
    assert_eq!(finished.code(), 0, "{}", finished.stderr);
    assert!(
        finished.stdout.starts_with("write /data/read-only: error "),
        "{}",
        finished.stdout
    );
    assert!(std::fs::symlink_metadata(dir.join("read-only")).is_err());

    let finished = run(true, "writable").await;
    assert_eq!(finished.code(), 0, "{}", finished.stderr);
    assert_eq!(finished.stdout, "write /data/writable: ok wrote 5 bytes\n");
    assert_eq!(
        std::fs::read(dir.join("writable")).expect("the file"),
        b"hello"
    );
}

#[test]
fn a_bad_dir_spec_is_a_bad_command_line() {
    for spec in ["::/x", "/tmp:rx", ""] {
        let flag = format!("--dir={spec}");
        let out = moat_run(&[&flag, guests::FS_PROBE, "list", "/"]);
        assert_eq!(out.status.code(), Some(2), "{flag}:\n{}", shown(&out));
        assert!(
            out.stdout.is_empty(),
            "{flag}: the guest ran:\n{}",
            shown(&out)
        );
        let err = text(&out.stderr);
        assert!(
            err.contains(spec) && (err.contains("--dir") || err.contains("HOST_DIR")),
            "{flag}: the message does not say which --dir:\n{err}"
        );
    }
}
