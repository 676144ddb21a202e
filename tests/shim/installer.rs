//! The node installer (`deploy/installer/install.sh`, what the DaemonSet of
//! `deploy/installer.yaml` runs) against scratch roots standing for nodes,
//! laid out as each distribution lays out its containerd (stock, k3s,
//! RKE2, microk8s): the shim put in place, the `moat` runtime added once
//! to the file that containerd reads (or renders from), checked by a real
//! containerd of the version the file asks for, the distribution's own
//! unit restarted only when that changed, one node at a time under a
//! Lease, the node labelled; and all of it taken back by an uninstall.
//!
//! What stands in for the node: `chroot` and `nsenter` are scripts on the
//! installer's PATH that record what they were asked (and run the real
//! containerd on the scratch root's file); the API server is
//! `support/fake_kube_api.py` (Leases and node labels). No k3s, RKE2,
//! microk8s or cluster runs here.

use crate::support::{self, Release};

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/installer/install.sh"
);

const FAKE_API: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/shim/support/fake_kube_api.py"
);

/// Longest a step may take here before the test fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// The scripts standing for the node's `chroot` (which runs the real
/// containerd, `$REAL_CONTAINERD`, on the scratch root's file, after
/// checking that the layout's own containerd is where the installer said)
/// and `nsenter` (which records the command it was given).
const CHROOT: &str = r#"#!/bin/sh
root=$1; bin=$2; shift 2
echo "$bin" >> "$RECORD/chroot"
case $bin in
  /*) [ -x "$root$bin" ] || { echo "no $bin on the node" >&2; exit 127; } ;;
esac
[ "$1" = --config ] || exit 2
exec "$REAL_CONTAINERD" --config "$root$2" config dump
"#;
const NSENTER: &str = r#"#!/bin/sh
echo "$*" >> "$RECORD/nsenter"
"#;

/// A node's root of the test's own, a shim to install, and a RESTART that
/// counts its calls.
struct ScratchNode {
    dir: tempfile::TempDir,
}

impl ScratchNode {
    /// A node with /etc/containerd (a stock layout).
    fn new() -> ScratchNode {
        let node = ScratchNode::bare();
        std::fs::create_dir_all(node.root().join("etc/containerd")).expect("etc");
        node
    }

    /// A node with nothing of containerd on it.
    fn bare() -> ScratchNode {
        let node = ScratchNode {
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        std::fs::create_dir_all(node.root()).expect("the root");
        node.set_shim(b"the shim, one build");
        let bin = node.dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin");
        for (name, script) in [("chroot", CHROOT), ("nsenter", NSENTER)] {
            write_exec(&bin.join(name), script.as_bytes());
        }
        node
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn config(&self) -> PathBuf {
        self.root().join("etc/containerd/config.toml")
    }

    /// Writes `content` at `path` of the node's root.
    fn put(&self, path: &str, content: &str) {
        let at = self.root().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().expect("a parent")).expect("the directory");
        std::fs::write(at, content).expect("the file");
    }

    /// The node's file at `path`, if there.
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(self.root().join(path.trim_start_matches('/'))).ok()
    }

    fn set_shim(&self, bytes: &[u8]) {
        std::fs::write(self.dir.path().join("shim"), bytes).expect("the shim");
    }

    /// What `chroot` or `nsenter` were asked, a line a call.
    fn recorded(&self, tool: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(tool))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// How often the installer restarted containerd.
    fn restarts(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("restarts"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    /// Runs the installer: its exit status and what it said. `validate`
    /// replaces the check by Debian's containerd.
    fn install(&self, validate: Option<&str>) -> (bool, String) {
        let validate = validate.unwrap_or(r#"containerd --config "$HOST_ROOT$1" config dump"#);
        self.run(&[
            ("VALIDATE", validate.to_owned()),
            (
                "RESTART",
                format!(
                    "echo restarted >> '{}'",
                    self.dir.path().join("restarts").display()
                ),
            ),
        ])
    }

    /// The installer with `env` on top of the node's own: its root, its
    /// shim, `chroot` and `nsenter` of the test's own, the system's
    /// containerd for `chroot` to run, no API.
    fn command(&self, env: &[(&str, String)]) -> Command {
        let mut cmd = Command::new("sh");
        let path = std::env::join_paths(std::iter::once(self.dir.path().join("bin")).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ))
        .expect("a PATH");
        cmd.arg(SCRIPT)
            .env("HOST_ROOT", self.root())
            .env("SHIM_SOURCE", self.dir.path().join("shim"))
            .env("RECORD", self.dir.path())
            .env("REAL_CONTAINERD", "containerd")
            .env("PATH", path)
            .env_remove("NODE_NAME")
            .env_remove("VALIDATE")
            .env_remove("RESTART")
            .env_remove("LAYOUT")
            .env_remove("MODE");
        for (key, value) in env {
            cmd.env(key, value);
        }
        cmd
    }

    fn run(&self, env: &[(&str, String)]) -> (bool, String) {
        said(self.command(env).output().expect("sh runs"))
    }
}

fn said(out: std::process::Output) -> (bool, String) {
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn write_exec(path: &Path, content: &[u8]) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, content).expect("the script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("its mode");
}

/// containerd `upstream` fetched beside the system's, or `None` (outside
/// CI, with the reason) when it cannot be.
fn fetched(test: &str, upstream: &str) -> Option<Release> {
    match Release::fetched(upstream) {
        Ok(release) => Some(release),
        Err(why) => {
            support::skip_unless(test, Some(why));
            None
        }
    }
}

fn skip(test: &str) -> bool {
    let missing = Command::new("containerd")
        .arg("--version")
        .output()
        .is_err()
        .then(|| "`containerd` is not installed (Debian's containerd package provides it)".into());
    support::skip_unless(test, missing)
}

/// containerd's own reading of `config`: its runtimes.moat table's type.
fn moat_runtime_type(config: &Path) -> Option<String> {
    moat_runtime_type_by(&Release::system().expect("containerd"), config)
}

/// As [`moat_runtime_type`], read by containerd `release`.
fn moat_runtime_type_by(release: &Release, config: &Path) -> Option<String> {
    let out = release
        .command("containerd")
        .arg("--config")
        .arg(config)
        .args(["config", "dump"])
        .output()
        .expect("containerd runs");
    let dump = String::from_utf8_lossy(&out.stdout);
    let mut lines = dump
        .lines()
        .skip_while(|l| !l.trim().ends_with("runtimes.moat]"));
    lines.next()?;
    lines
        .take_while(|l| !l.trim().starts_with('['))
        .find_map(|l| l.trim().strip_prefix("runtime_type = ").map(str::to_owned))
}

#[test]
fn the_installer_adds_the_runtime_once_and_restarts_containerd_only_then() {
    let test = "the_installer_adds_the_runtime_once_and_restarts_containerd_only_then";
    if skip(test) {
        return;
    }
    let node = ScratchNode::new();
    let before = "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.9\"\n";
    std::fs::write(node.config(), before).expect("the configuration");

    let (ok, said) = node.install(None);
    assert!(ok, "{said}");
    assert_eq!(
        std::fs::read(node.root().join("usr/local/bin/containerd-shim-moat-v1")).expect("the shim"),
        b"the shim, one build"
    );
    assert_eq!(
        moat_runtime_type(&node.config()).as_deref(),
        Some("\"io.containerd.moat.v1\""),
        "containerd reads the runtime from:\n{}",
        std::fs::read_to_string(node.config()).unwrap_or_default()
    );
    let after = std::fs::read_to_string(node.config()).expect("the configuration");
    assert!(
        after.starts_with(before),
        "the node's own settings kept:\n{after}"
    );
    assert_eq!(
        std::fs::read_to_string(node.config().with_extension("toml.before-moat"))
            .expect("the backup"),
        before
    );
    assert_eq!(node.restarts(), 1);

    // A second run: nothing changes, nothing restarts.
    let (ok, said) = node.install(None);
    assert!(ok, "{said}");
    assert_eq!(
        std::fs::read_to_string(node.config()).expect("config"),
        after
    );
    assert_eq!(node.restarts(), 1, "{said}");
    assert!(said.contains("already has the moat runtime"), "{said}");

    // A new shim: replaced, and containerd is not restarted for it (the
    // next container start runs it).
    node.set_shim(b"the shim, the next build");
    let (ok, said) = node.install(None);
    assert!(ok, "{said}");
    assert_eq!(
        std::fs::read(node.root().join("usr/local/bin/containerd-shim-moat-v1")).expect("the shim"),
        b"the shim, the next build"
    );
    assert_eq!(node.restarts(), 1, "{said}");
}

#[test]
fn the_installer_writes_a_configuration_a_node_lacks_and_knows_each_version() {
    let test = "the_installer_writes_a_configuration_a_node_lacks_and_knows_each_version";
    if skip(test) {
        return;
    }
    // No configuration: containerd 1.x's version 2, read by containerd.
    let node = ScratchNode::new();
    let (ok, said) = node.install(None);
    assert!(ok, "{said}");
    assert_eq!(
        moat_runtime_type(&node.config()).as_deref(),
        Some("\"io.containerd.moat.v1\"")
    );
    assert_eq!(node.restarts(), 1);

    // Version 1 (no version line): its own table name, which containerd
    // 1.6 reads as the same runtime.
    let node = ScratchNode::new();
    std::fs::write(
        node.config(),
        "[plugins.cri]\n  sandbox_image = \"pause\"\n",
    )
    .expect("config");
    let (ok, said) = node.install(None);
    assert!(ok, "{said}");
    assert!(
        std::fs::read_to_string(node.config())
            .expect("config")
            .contains("[plugins.cri.containerd.runtimes.moat]")
    );
    assert_eq!(
        moat_runtime_type(&node.config()).as_deref(),
        Some("\"io.containerd.moat.v1\"")
    );

    // Version 3 (containerd 2.x): the CRI runtime plugin's table, checked
    // and read by containerd 2.1.
    if let Some(two) = fetched(test, "2.1.9") {
        let node = ScratchNode::new();
        std::fs::write(node.config(), "version = 3\n").expect("config");
        let validate = format!(
            r#"'{}' --config "$HOST_ROOT$1" config dump"#,
            two.bin
                .as_ref()
                .expect("fetched")
                .join("containerd")
                .display()
        );
        let (ok, said) = node.install(Some(&validate));
        assert!(ok, "{said}");
        assert!(
            std::fs::read_to_string(node.config()).expect("config").contains(
                "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.moat]\n  runtime_type = \"io.containerd.moat.v1\""
            )
        );
        assert_eq!(
            moat_runtime_type_by(&two, &node.config()).as_deref(),
            Some("'io.containerd.moat.v1'")
        );
    }

    // The table already there, spelled another way: left alone.
    let node = ScratchNode::new();
    let spelled = "version = 2\n[ plugins.'io.containerd.grpc.v1.cri'.containerd.runtimes.'moat' ]\n  runtime_type = \"io.containerd.moat.v1\"\n";
    std::fs::write(node.config(), spelled).expect("config");
    let (ok, said) = node.install(None);
    assert!(ok, "{said}");
    assert_eq!(
        std::fs::read_to_string(node.config()).expect("config"),
        spelled
    );
    assert_eq!(node.restarts(), 0);
}

#[test]
fn the_installer_leaves_a_configuration_containerd_refuses_as_it_was() {
    let test = "the_installer_leaves_a_configuration_containerd_refuses_as_it_was";
    if skip(test) {
        return;
    }
    let node = ScratchNode::new();
    let broken = "version = 2\n[plugins\n";
    std::fs::write(node.config(), broken).expect("config");
    let (ok, said) = node.install(None);
    assert!(!ok, "{said}");
    assert!(
        said.contains("containerd refuses the new configuration, left as it was"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(node.config()).expect("config"),
        broken
    );
    assert!(!node.config().with_extension("toml.moat-new").exists());
    assert_eq!(node.restarts(), 0);
}

/// `support/fake_kube_api.py`, running: Leases and node labels.
struct FakeApi {
    child: Child,
    state: tempfile::TempDir,
    url: String,
}

impl FakeApi {
    fn start() -> FakeApi {
        let state = tempfile::tempdir().expect("a temporary directory");
        let child = Command::new("python3")
            .arg(FAKE_API)
            .arg(state.path())
            .stdin(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let started = Instant::now();
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(state.path().join("port")) {
                break port;
            }
            assert!(started.elapsed() < DEADLINE, "the fake API never listened");
            std::thread::sleep(Duration::from_millis(20));
        };
        FakeApi {
            child,
            state,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// What the API holds of `kind` `name` (`lease`, `node`).
    fn get(&self, kind: &str, name: &str) -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(self.state.path().join(format!("{kind}-{name}.json")));
        text.ok()
            .map(|t| serde_json::from_str(&t).expect("the fake API's JSON"))
    }

    /// Node `name`'s labels.
    fn labels(&self, name: &str) -> serde_json::Value {
        self.get("node", name)
            .map(|n| n["metadata"]["labels"].clone())
            .unwrap_or_default()
    }

    /// The installer's environment for node `name` against this API.
    fn env(&self, name: &str) -> Vec<(&'static str, String)> {
        vec![
            ("NODE_NAME", name.to_owned()),
            ("API", self.url.clone()),
            ("API_TOKEN_FILE", "/nonexistent".to_owned()),
            ("API_CA_FILE", "/nonexistent".to_owned()),
            ("LOCK_POLL", "1".to_owned()),
        ]
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Issue 58: each distribution's containerd, found by its layout: the
/// file the installer writes (k3s and RKE2 render their containerd's
/// configuration from a template at each start, so the table goes into
/// the template, made from their base template when the node has none;
/// microk8s's template is its own), the containerd that checks it (the
/// distribution's own binary, here run as the version its file asks for),
/// and the unit restarted. Before, the installer wrote
/// /etc/containerd/config.toml on every node and restarted `containerd`,
/// a unit k3s, RKE2 and microk8s do not have.
#[test]
fn the_installer_finds_each_distributions_containerd_and_restarts_its_unit() {
    let test = "the_installer_finds_each_distributions_containerd_and_restarts_its_unit";
    if skip(test) {
        return;
    }
    let v2 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause\"\n";
    let table_v2 = "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.moat]\n  runtime_type = \"io.containerd.moat.v1\"\n  runtime_path = \"/usr/local/bin/containerd-shim-moat-v1\"\n";
    let table_v3 = "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.moat]\n  runtime_type = \"io.containerd.moat.v1\"\n  runtime_path = \"/usr/local/bin/containerd-shim-moat-v1\"\n";
    let two = fetched(test, "2.1.9");
    struct Case<'a> {
        layout: &'a str,
        files: Vec<(&'a str, &'a str)>,
        /// containerd's binary on the node, as the layout keeps it.
        bin: &'a str,
        /// 3 when the file asks for containerd 2.x.
        version: u32,
        written: &'a str,
        /// What the written file was before, if it was there.
        before: Option<&'a str>,
        unit: &'a str,
    }
    let rancher_k3s = "/var/lib/rancher/k3s/agent/etc/containerd";
    let rancher_rke2 = "/var/lib/rancher/rke2/agent/etc/containerd";
    let cases = [
        Case {
            layout: "stock",
            files: vec![("/etc/containerd/config.toml", v2)],
            bin: "containerd",
            version: 2,
            written: "/etc/containerd/config.toml",
            before: Some(v2),
            unit: "systemctl restart containerd",
        },
        Case {
            layout: "k3s",
            files: vec![
                ("/var/lib/rancher/k3s/agent/etc/containerd/config.toml", v2),
                ("/etc/systemd/system/k3s.service", "[Service]\n"),
            ],
            bin: "/var/lib/rancher/k3s/data/current/bin/containerd",
            version: 2,
            written: "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl",
            before: None,
            unit: "systemctl restart k3s",
        },
        Case {
            layout: "k3s",
            files: vec![
                (
                    "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
                    "version = 3\n",
                ),
                ("/etc/systemd/system/k3s-agent.service", "[Service]\n"),
            ],
            bin: "/var/lib/rancher/k3s/data/current/bin/containerd",
            version: 3,
            written: "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl",
            before: None,
            unit: "systemctl restart k3s-agent",
        },
        Case {
            layout: "rke2",
            files: vec![
                ("/var/lib/rancher/rke2/agent/etc/containerd/config.toml", v2),
                (
                    "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl",
                    "{{ template \"base\" . }}\n# the node's own additions\n",
                ),
                (
                    "/usr/local/lib/systemd/system/rke2-server.service",
                    "[Service]\n",
                ),
            ],
            bin: "/var/lib/rancher/rke2/bin/containerd",
            version: 2,
            written: "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl",
            before: Some("{{ template \"base\" . }}\n# the node's own additions\n"),
            unit: "systemctl restart rke2-server",
        },
        Case {
            layout: "microk8s",
            files: vec![(
                "/var/snap/microk8s/current/args/containerd-template.toml",
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"${RUNTIME}\"\n",
            )],
            bin: "/snap/microk8s/current/bin/containerd",
            version: 2,
            written: "/var/snap/microk8s/current/args/containerd-template.toml",
            before: Some(
                "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"${RUNTIME}\"\n",
            ),
            unit: "snap restart microk8s.daemon-containerd",
        },
    ];
    for case in cases {
        let real = match case.version {
            3 => match &two {
                Some(two) => two.bin.as_ref().expect("fetched").join("containerd"),
                None => continue,
            },
            _ => PathBuf::from("containerd"),
        };
        let node = ScratchNode::bare();
        for (path, content) in &case.files {
            node.put(path, content);
        }
        if case.bin.starts_with('/') {
            node.put(case.bin, "");
            write_exec(&node.root().join(&case.bin[1..]), b"");
        }
        let (ok, said) = node.run(&[("REAL_CONTAINERD", real.display().to_string())]);
        let what = format!("{} ({}):\n{said}", case.layout, case.written);
        assert!(ok, "{what}");
        assert!(
            said.contains(&format!("install on a {} node", case.layout)),
            "{what}"
        );
        let written = node.read(case.written).unwrap_or_default();
        let table = if case.version == 3 {
            table_v3
        } else {
            table_v2
        };
        let expected = match case.before {
            Some(before) => format!(
                "{before}\n# Added by moat-installer: pods with runtimeClassName moat.\n{table}"
            ),
            None => format!(
                "{{{{ template \"base\" . }}}}\n\n# Added by moat-installer: pods with runtimeClassName moat.\n{table}"
            ),
        };
        assert_eq!(written, expected, "{what}");
        if case.layout == "k3s" || case.layout == "rke2" {
            // The file k3s or RKE2 rendered is theirs: left as it was.
            let rendered = format!(
                "{}/config.toml",
                if case.layout == "k3s" {
                    rancher_k3s
                } else {
                    rancher_rke2
                }
            );
            assert_eq!(
                node.read(&rendered).as_deref(),
                Some(case.files[0].1),
                "{what}"
            );
            assert!(
                node.read(&format!("{rendered}.moat-check")).is_none(),
                "{what}"
            );
        }
        let bin = if case.bin.starts_with('/') {
            case.bin
        } else {
            "containerd"
        };
        assert_eq!(node.recorded("chroot"), [bin], "{what}");
        let restarts = node.recorded("nsenter");
        assert_eq!(restarts.len(), 1, "{what}");
        assert!(restarts[0].ends_with(case.unit), "{restarts:?} {what}");

        // Again: nothing changes, nothing restarts.
        let (ok, said) = node.run(&[("REAL_CONTAINERD", real.display().to_string())]);
        assert!(ok, "{said}");
        assert_eq!(node.read(case.written).unwrap_or_default(), expected);
        assert_eq!(node.recorded("nsenter").len(), 1, "{said}");
    }
}

/// Issue 58: a node whose containerd the installer does not know, or a
/// k3s node without k3s's units, is refused by name with what to set, and
/// nothing on it changes.
#[test]
fn the_installer_refuses_a_node_it_does_not_know_and_says_what_to_set() {
    let node = ScratchNode::bare();
    let (ok, said) = node.run(&[]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("no containerd layout this installer knows"),
        "{said}"
    );
    assert!(
        said.contains("LAYOUT=stock with CONTAINERD_CONFIG, VALIDATE and RESTART"),
        "{said}"
    );
    assert!(
        node.read("/usr/local/bin/containerd-shim-moat-v1")
            .is_none()
    );

    let node = ScratchNode::bare();
    node.put(
        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        "version = 2\n",
    );
    let (ok, said) = node.run(&[]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("k3s: none of the units k3s k3s-agent is on the node"),
        "{said}"
    );
    assert!(node.recorded("nsenter").is_empty());

    let (ok, said) = node.run(&[("MODE", "remove".to_owned())]);
    assert!(!ok, "{said}");
    assert!(
        said.contains("MODE=remove: expected install or uninstall"),
        "{said}"
    );
}

/// Issue 58: an uninstall takes the node's label off first, then exactly
/// what the installer added to the configuration (a file as it was before
/// comes back byte for byte; a change made since stays; a template the
/// installer wrote goes), restarts containerd for it, and removes the
/// shim last. Before, there was no uninstall.
#[test]
fn an_uninstall_takes_back_what_the_install_did_and_nothing_else() {
    let test = "an_uninstall_takes_back_what_the_install_did_and_nothing_else";
    if skip(test) {
        return;
    }
    let api = FakeApi::start();
    let before = "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.9\"\n";
    let node = ScratchNode::new();
    std::fs::write(node.config(), before).expect("the configuration");
    let mut env = api.env("node-a");
    let (ok, said) = node.run(&env);
    assert!(ok, "{said}");
    assert_eq!(api.labels("node-a")["moat.dev/runtime"], "true", "{said}");
    assert!(
        api.get("lease", "moat-installer-restart").is_none(),
        "released: {said}"
    );

    env.push(("MODE", "uninstall".to_owned()));
    let (ok, said) = node.run(&env);
    assert!(ok, "{said}");
    assert_eq!(api.labels("node-a").get("moat.dev/runtime"), None, "{said}");
    assert_eq!(
        std::fs::read_to_string(node.config()).expect("config"),
        before
    );
    assert!(said.contains("is again as it was before moat"), "{said}");
    assert!(!node.config().with_extension("toml.before-moat").exists());
    assert!(
        node.read("/usr/local/bin/containerd-shim-moat-v1")
            .is_none(),
        "{said}"
    );
    assert_eq!(node.recorded("nsenter").len(), 2, "{said}");
    let label_off = said
        .find("label: node-a moat.dev/runtime removed")
        .expect("label");
    let restarted = said.find("containerd: restarted").expect("restart");
    assert!(label_off < restarted, "the label goes first:\n{said}");

    // Changed after the install: the change stays, the table goes.
    env.pop();
    let (ok, said) = node.run(&env);
    assert!(ok, "{said}");
    let mut changed = std::fs::read_to_string(node.config()).expect("config");
    changed.push_str("\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n");
    std::fs::write(node.config(), &changed).expect("config");
    env.push(("MODE", "uninstall".to_owned()));
    let (ok, said) = node.run(&env);
    assert!(ok, "{said}");
    let after = std::fs::read_to_string(node.config()).expect("config");
    assert!(!after.contains("runtimes.moat"), "{after}");
    assert!(
        after.contains("config_path = \"/etc/containerd/certs.d\""),
        "{after}"
    );
    assert!(after.starts_with(before), "{after}");
    assert!(
        said.contains("it changed since; the changes stay"),
        "{said}"
    );

    // A template the installer wrote (k3s without one of its own) goes.
    let node = ScratchNode::bare();
    node.put(
        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        "version = 2\n",
    );
    node.put("/etc/systemd/system/k3s.service", "");
    node.put("/var/lib/rancher/k3s/data/current/bin/containerd", "");
    write_exec(
        &node
            .root()
            .join("var/lib/rancher/k3s/data/current/bin/containerd"),
        b"",
    );
    let (ok, said) = node.run(&[]);
    assert!(ok, "{said}");
    let template = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl";
    assert!(node.read(template).is_some(), "{said}");
    let (ok, said) = node.run(&[("MODE", "uninstall".to_owned())]);
    assert!(ok, "{said}");
    assert!(node.read(template).is_none(), "{said}");
    assert!(
        node.read(&format!("{template}.moat-created")).is_none(),
        "{said}"
    );
    assert_eq!(node.recorded("nsenter").len(), 2, "{said}");

    // A moat runtime the installer did not add is not its to take.
    let node = ScratchNode::new();
    let own = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.moat]\n  runtime_type = \"io.containerd.moat.v1\"\n";
    std::fs::write(node.config(), own).expect("config");
    let (ok, said) = node.run(&[("MODE", "uninstall".to_owned())]);
    assert!(ok, "{said}");
    assert_eq!(std::fs::read_to_string(node.config()).expect("config"), own);
    assert!(
        said.contains("a moat runtime this installer did not add; left as it is"),
        "{said}"
    );
    assert!(node.recorded("nsenter").is_empty());
}

/// Issue 58: nodes restart their containerd one at a time. Two nodes
/// install at once against one API; the first to take the Lease restarts
/// (its restart waits, here, until the test lets it end) while the other
/// waits for the Lease, and restarts only after it is released. A Lease
/// left by a node that died (renewed long ago) is taken over. Before,
/// every node restarted containerd at the same moment on the first apply.
#[test]
fn nodes_restart_their_containerd_one_at_a_time() {
    let test = "nodes_restart_their_containerd_one_at_a_time";
    if skip(test) {
        return;
    }
    let api = FakeApi::start();
    let shared = tempfile::tempdir().expect("a temporary directory");
    let log = shared.path().join("restarts");
    let nodes = [ScratchNode::new(), ScratchNode::new()];
    let mut children = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let name = format!("node-{i}");
        let go = shared.path().join(format!("go-{name}"));
        // The restart: says it began, waits for the test's word, says it
        // ended.
        let restart = format!(
            "echo 'begin {name}' >> '{log}'; while [ ! -e '{go}' ]; do sleep 0.05; done; echo 'end {name}' >> '{log}'",
            log = log.display(),
            go = go.display()
        );
        let mut env = api.env(&name);
        env.push(("RESTART", restart));
        env.push((
            "VALIDATE",
            r#"containerd --config "$HOST_ROOT$1" config dump"#.to_owned(),
        ));
        let out = shared.path().join(format!("{name}.out"));
        let child = node
            .command(&env)
            .stdout(std::fs::File::create(&out).expect("out"))
            .stderr(Stdio::null())
            .spawn()
            .expect("sh runs");
        children.push((name, child, out));
    }
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let until = |what: &str, check: &dyn Fn() -> bool| {
        let started = Instant::now();
        while !check() {
            assert!(
                started.elapsed() < DEADLINE,
                "{what}: restarts {:?}",
                read(&log)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    until("a first restart begins", &|| read(&log).contains("begin"));
    let first = if read(&log).contains("begin node-0") {
        0
    } else {
        1
    };
    let second = 1 - first;
    let (second_name, second_out) = (&children[second].0, &children[second].2);
    until("the other node waits for the lock", &|| {
        read(second_out).contains("is restarting its containerd; waiting")
    });
    assert_eq!(
        read(&log).lines().count(),
        1,
        "{second_name} did not restart while node-{first} did"
    );
    std::fs::write(shared.path().join(format!("go-node-{first}")), "").expect("go");
    until("the second restart begins", &|| {
        read(&log).lines().count() == 3
    });
    std::fs::write(shared.path().join(format!("go-{second_name}")), "").expect("go");
    for (name, mut child, out) in children {
        let status = child.wait().expect("the installer ends");
        let mut text = String::new();
        std::fs::File::open(&out)
            .expect("out")
            .read_to_string(&mut text)
            .expect("read");
        assert!(status.success(), "{name}:\n{text}");
        assert_eq!(api.labels(&name)["moat.dev/runtime"], "true", "{text}");
    }
    assert_eq!(
        read(&log),
        format!("begin node-{first}\nend node-{first}\nbegin node-{second}\nend node-{second}\n")
    );
    assert!(api.get("lease", "moat-installer-restart").is_none());

    // A Lease a dead node left, renewed long ago: taken over.
    std::fs::write(
        api.state.path().join("lease-moat-installer-restart.json"),
        r#"{"metadata":{"name":"moat-installer-restart","resourceVersion":"1000"},"spec":{"holderIdentity":"gone","renewTime":"2020-01-01T00:00:00.000000Z"}}"#,
    )
    .expect("a stale lease");
    let node = ScratchNode::new();
    let mut env = api.env("node-late");
    env.push((
        "VALIDATE",
        r#"containerd --config "$HOST_ROOT$1" config dump"#.to_owned(),
    ));
    let (ok, said) = node.run(&env);
    assert!(ok, "{said}");
    assert!(
        said.contains("lock: taking over moat-installer-restart from gone"),
        "{said}"
    );
    assert_eq!(node.recorded("nsenter").len(), 1, "{said}");
    assert!(
        api.get("lease", "moat-installer-restart").is_none(),
        "{said}"
    );

    // A Lease another node holds that the API fails to show: not taken
    // over blind (an unread Lease has no version to delete it by); the
    // installer waits, then gives up, restarting nothing.
    let now = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.000000Z"])
        .output()
        .expect("date");
    let fresh = format!(
        r#"{{"metadata":{{"name":"moat-installer-restart","resourceVersion":"2000"}},"spec":{{"holderIdentity":"busy","renewTime":"{}"}}}}"#,
        String::from_utf8_lossy(&now.stdout).trim()
    );
    std::fs::write(
        api.state.path().join("lease-moat-installer-restart.json"),
        fresh,
    )
    .expect("a held lease");
    std::fs::write(api.state.path().join("fail-get"), "").expect("GETs fail");
    let node = ScratchNode::new();
    let mut env = api.env("node-blind");
    env.push(("LOCK_WAIT", "2".to_owned()));
    env.push((
        "VALIDATE",
        r#"containerd --config "$HOST_ROOT$1" config dump"#.to_owned(),
    ));
    let (ok, said) = node.run(&env);
    assert!(!ok, "{said}");
    assert!(said.contains("waited 2 s (LOCK_WAIT)"), "{said}");
    assert!(node.recorded("nsenter").is_empty(), "{said}");
    assert_eq!(
        api.get("lease", "moat-installer-restart")
            .expect("still held")["spec"]["holderIdentity"],
        "busy"
    );
}
