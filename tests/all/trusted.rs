//! Files a later run trusts (docs/trusted-files.md), as an attacker meets
//! them: a trail turned into a link to a shell's startup file, a policy
//! file, a component or a TLS key kept in a directory the guest may write,
//! a cache reached through the home the password database names or through
//! a bind mount. Each run is refused before the guest starts, and the file
//! outside is unchanged.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{self, cache_flag, guests};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// A fresh directory `name` under the tests' temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("trusted-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn moat(args: &[&str]) -> Output {
    Command::new(MOAT).args(args).output().expect("moat runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The run was refused as a bad command line (exit 2), saying `words`.
fn assert_refused(out: &Output, words: &[&str]) {
    assert_exit(out, 2, words);
}

/// The run ended with `code` before the guest ran, saying `words`.
fn assert_exit(out: &Output, code: i32, words: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    for word in words {
        assert!(err.contains(word), "{word:?} not in: {err}");
    }
}

/// A guest that, had it run, would have left `planted` in the directory
/// given as `/d`.
const PLANT: [&str; 4] = [guests::FS_PROBE, "write", "/d/planted", "x"];

/// Finding 1: a guest replaced the trail with a relative link to a shell's
/// startup file; the next run must not append to it (before, it wrote a
/// record whose path ran as a command when a shell started).
#[test]
fn a_trail_turned_into_a_link_is_not_appended_to() {
    let dir = scratch("trail-link");
    let bashrc = dir.join("bashrc");
    std::fs::write(&bashrc, "# mine\n").unwrap();
    std::os::unix::fs::symlink("bashrc", dir.join("audit.jsonl")).unwrap();
    let out = moat(&[
        "run",
        &cache_flag(),
        &format!("--audit={}", dir.join("audit.jsonl").display()),
        guests::FS_PROBE,
        "list",
        "/",
    ]);
    assert_refused(&out, &["the audit trail", "symbolic link"]);
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# mine\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Findings 1 and 7: the trail, the policy file and the component in a
/// directory the guest may write are refused (the guest could rewrite or
/// replace each for the next run, or a reload); the same directory
/// read-only is fine for them. A TLS key is a secret: kept even from a
/// read-only directory.
#[test]
fn no_directory_a_guest_may_write_holds_a_file_a_later_run_trusts() {
    let dir = scratch("writable");
    let component = dir.join("probe.wasm");
    std::fs::copy(guests::FS_PROBE, &component).unwrap();
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "allow-net = []\n").unwrap();
    let rw = format!("--dir={}::/d:rw", dir.display());
    let ro = format!("--dir={}::/d", dir.display());
    let trail = format!("--audit={}", dir.join("audit.jsonl").display());
    let policy_flag = format!("--policy={}", policy.display());
    let cache = cache_flag();

    let mut trail_args = vec!["run", &cache, &trail, &rw];
    trail_args.extend(PLANT);
    assert_refused(&moat(&trail_args), &["contains the audit trail", "/d:rw"]);

    let mut policy_args = vec!["run", &cache, &policy_flag, &rw];
    policy_args.extend(PLANT);
    assert_refused(
        &moat(&policy_args),
        &["contains the policy file", "grant itself everything"],
    );

    let component_arg = component.display().to_string();
    let refused = moat(&[
        "run",
        &cache,
        &rw,
        &component_arg,
        "write",
        "/d/planted",
        "x",
    ]);
    assert_refused(&refused, &["contains the component"]);
    assert!(!dir.join("planted").exists(), "no guest ran");
    assert!(
        !dir.join("audit.jsonl").exists(),
        "no trail was opened there"
    );

    // Read-only, the same files are no danger: the guest runs.
    let ok = moat(&[
        "run",
        &cache,
        &trail,
        &policy_flag,
        &ro,
        &component_arg,
        "list",
        "/d",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("policy.toml"));

    // A server's private key, even read-only.
    let key = dir.join("key.pem");
    let refused = moat(&[
        "serve",
        &cache,
        "--addr=127.0.0.1:0",
        &format!("--tls-cert={}", dir.join("cert.pem").display()),
        &format!("--tls-key={}", key.display()),
        &ro,
        guests::HTTP_HOSTILE,
    ]);
    assert_refused(&refused, &["contains the TLS private key"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 7's file half: a component that is a link to a device, or a
/// sparse file larger than any component, is refused before it is read
/// (before, `/dev/zero` grew the host to gigabytes).
#[test]
fn a_component_that_is_a_link_or_a_huge_sparse_file_is_not_read() {
    let dir = scratch("component-file");
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.wasm")).unwrap();
    let sparse = dir.join("sparse.wasm");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let cache = cache_flag();
    let out = moat(&["run", &cache, dir.join("zero.wasm").to_str().unwrap()]);
    // The exit of a run that cannot start.
    let cannot_start = i32::from(moat_host::START_FAILED_EXIT);
    assert_exit(&out, cannot_start, &["symbolic link"]);
    let out = moat(&["run", &cache, sparse.to_str().unwrap()]);
    assert_exit(&out, cannot_start, &["3221225472 bytes, more than"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// This user's home as the password database has it.
fn passwd_home() -> Option<PathBuf> {
    let uid = rustix::process::geteuid().as_raw().to_string();
    std::fs::read_to_string("/etc/passwd")
        .ok()?
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 7 && fields[2] == uid).then(|| PathBuf::from(fields[5]))
        })
}

/// Finding 2: with `HOME` unset (a systemd unit without `User=`), the cache
/// a service of this user keeps under the home the password database names
/// is kept from the guest all the same, and so is the shim's node cache.
#[test]
fn every_default_cache_is_kept_whatever_this_run_uses() {
    let home = passwd_home().filter(|home| home.is_dir() && home != Path::new("/"));
    if support::skip_unless(
        "the password database's home",
        home.is_none()
            .then(|| "this user has no home directory of its own".to_owned()),
    ) {
        return;
    }
    let home = home.unwrap();
    let out = Command::new(MOAT)
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .args([
            "run",
            &cache_flag(),
            &format!("--dir={}::/d", home.display()),
            guests::FS_PROBE,
            "list",
            "/d",
        ])
        .output()
        .unwrap();
    assert_refused(
        &out,
        &[&format!(
            "contains moat's compiled-code cache {}",
            home.join(".cache/moat").display()
        )],
    );
    let out = moat(&[
        "run",
        &cache_flag(),
        "--dir=/var/lib::/d",
        guests::FS_PROBE,
        "list",
        "/d",
    ]);
    assert_refused(
        &out,
        &["contains moat's compiled-code cache /var/lib/moat/cache"],
    );
}

/// Finding 2, through a bind mount: the run's own cache mounted inside the
/// directory given to the guest (as a hostPath or a container's volume
/// would) is refused; before, only the paths and the directories above each
/// were compared, and the guest read the key.
#[test]
fn a_cache_bind_mounted_into_a_guests_directory_is_refused() {
    let root = rustix::process::geteuid().is_root();
    if support::skip_unless(
        "bind mounts",
        (!root || !support::have("unshare"))
            .then(|| "needs root and unshare for a mount namespace".to_owned()),
    ) {
        return;
    }
    let dir = scratch("bind");
    let cache = dir.join("cache");
    let given = dir.join("given");
    std::fs::create_dir_all(given.join("view")).unwrap();
    let script = format!(
        "mount --make-rprivate / && mount --bind {cache} {view} && exec {moat} run \
         --cache-dir={cache} --dir={given}::/d {probe} list /d/view",
        cache = cache.display(),
        view = given.join("view").display(),
        moat = MOAT,
        given = given.display(),
        probe = guests::FS_PROBE,
    );
    // The cache exists before the mount: the run makes it and its key.
    let first = moat(&[
        "run",
        &format!("--cache-dir={}", cache.display()),
        guests::FS_PROBE,
        "list",
        "/",
    ]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(cache.join("key").exists());
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_refused(&out, &["contains moat's compiled-code cache"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("key"),
        "the guest listed the cache"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Round four's remainder of finding 1: the policy file and the cache
/// reached through a symbolic link that lies in the guest's writable
/// directory. Each path as resolved lies outside it, so the check by place
/// passed, but the guest could point the link at a policy or a cache of its
/// own for the next run. Refused, naming the link's holder; the same
/// directory read-only is fine.
#[test]
fn a_link_on_the_way_to_a_trusted_file_in_a_guests_directory_is_refused() {
    let dir = scratch("link-above");
    let given = dir.join("given");
    let etc = dir.join("etc");
    std::fs::create_dir_all(&given).unwrap();
    std::fs::create_dir_all(etc.join("cache")).unwrap();
    std::fs::write(etc.join("policy.toml"), "allow-net = []\n").unwrap();
    std::os::unix::fs::symlink("../etc", given.join("conf")).unwrap();
    let rw = format!("--dir={}::/d:rw", given.display());
    let ro = format!("--dir={}::/d", given.display());
    let policy = format!("--policy={}", given.join("conf/policy.toml").display());
    let cache = format!("--cache-dir={}", given.join("conf/cache").display());

    let mut args = vec!["run", &cache, &policy, &rw];
    args.extend(PLANT);
    assert_refused(
        &moat(&args),
        &[
            "holds a symbolic link on the way to the policy file",
            "grant itself everything",
        ],
    );
    let mut args = vec!["run", &cache, &rw];
    args.extend(PLANT);
    assert_refused(
        &moat(&args),
        &["holds a symbolic link on the way to moat's compiled-code cache"],
    );
    assert!(!given.join("planted").exists(), "no guest ran");

    let ok = moat(&["run", &cache, &policy, &ro, guests::FS_PROBE, "list", "/d"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let _ = std::fs::remove_dir_all(&dir);
}
