//! The node installer (`deploy/installer/install.sh`, what the DaemonSet of
//! `deploy/installer.yaml` runs) against a scratch root standing for a
//! node: the shim put in place, containerd's configuration given the
//! `moat` runtime once (checked by Debian's containerd itself), containerd
//! restarted only when that changed, and a configuration containerd would
//! refuse left as it was.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../deploy/installer/install.sh"
);

/// A node's root of the test's own, a shim to install, and a RESTART that
/// counts its calls.
struct ScratchNode {
    dir: tempfile::TempDir,
}

impl ScratchNode {
    fn new() -> ScratchNode {
        let node = ScratchNode {
            dir: tempfile::tempdir().expect("a temporary directory"),
        };
        std::fs::create_dir_all(node.root().join("etc/containerd")).expect("etc");
        node.set_shim(b"the shim, one build");
        node
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn config(&self) -> PathBuf {
        self.root().join("etc/containerd/config.toml")
    }

    fn set_shim(&self, bytes: &[u8]) {
        std::fs::write(self.dir.path().join("shim"), bytes).expect("the shim");
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
        let mut cmd = Command::new("sh");
        cmd.arg(SCRIPT)
            .env("HOST_ROOT", self.root())
            .env("SHIM_SOURCE", self.dir.path().join("shim"))
            .env(
                "RESTART",
                format!(
                    "echo restarted >> '{}'",
                    self.dir.path().join("restarts").display()
                ),
            )
            .env(
                "VALIDATE",
                validate.unwrap_or(r#"containerd --config "$HOST_ROOT$1" config dump"#),
            );
        let out = cmd.output().expect("sh runs");
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
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
    let out = Command::new("containerd")
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

    // Version 3 (containerd 2.x): the CRI runtime plugin's table. Debian's
    // containerd (1.6) cannot read it, so the check here is the file's.
    let node = ScratchNode::new();
    std::fs::write(node.config(), "version = 3\n").expect("config");
    let (ok, said) = node.install(Some(r#"cat "$HOST_ROOT$1""#));
    assert!(ok, "{said}");
    assert!(
        std::fs::read_to_string(node.config()).expect("config").contains(
            "[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.moat]\n  runtime_type = \"io.containerd.moat.v1\""
        )
    );

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
