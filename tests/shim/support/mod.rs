//! A containerd of the test's own, for the shim's tests that need one: its
//! own configuration, root, state and socket under a temporary directory,
//! stopped when dropped.
//!
//! Needs Debian's `containerd` package (binaries `containerd` and `ctr`)
//! and root (containerd mounts snapshots and creates namespaces). Outside
//! CI a test without them skips with the reason; with `CI` set it fails.

#![allow(dead_code)]

#[path = "../../support/certs.rs"]
pub mod certs;
pub mod cri;
pub mod recorder;
pub mod release;

pub use release::Release;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest containerd may take to open its socket; past it the test fails
/// with containerd's log.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// Why this machine cannot run containerd, if it cannot.
pub fn cannot_run_containerd() -> Option<String> {
    for tool in ["containerd", "ctr"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!(
                "`{tool}` is not installed (Debian's containerd package provides it)"
            ));
        }
    }
    if !is_root() {
        return Some("containerd needs root to mount snapshots and make namespaces".to_owned());
    }
    None
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Skips the test (returns true) when containerd cannot run here, saying
/// why; with `CI` set, fails instead.
pub fn skip_without_containerd(test: &str) -> bool {
    skip_unless(test, cannot_run_containerd())
}

/// Skips `test` (returns true) when `why_not` says this machine cannot run
/// it, saying why; with `CI` set, fails instead.
pub fn skip_unless(test: &str, why_not: Option<String>) -> bool {
    match why_not {
        None => false,
        Some(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: CI must run this test, but {why}")
        }
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
    }
}

/// `sha256:` and the hex of `bytes`' SHA-256, as OCI digests (and moat's
/// policy digests) are written.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let hex: String = sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// An OCI image archive (for `ctr image import`) built as a Linux image
/// is: one filesystem layer holding `files` (name, content) at its root,
/// `entrypoint` as the process's first argument, `env` (`KEY=VALUE`) as
/// the image's own environment. The shim runs such an image's component
/// from the container's root filesystem; containerd 1.6 runs it too.
pub fn rootfs_image_archive(
    dir: &Path,
    name: &str,
    files: &[(&str, &[u8])],
    entrypoint: &str,
    env: &[&str],
) -> PathBuf {
    let entries: Vec<Entry<'_>> = files
        .iter()
        .map(|(path, content)| Entry::File(path, content, 0o644))
        .collect();
    rootfs_image(dir, name, &entries, &[entrypoint], env)
}

/// One entry of an image's filesystem layer.
pub enum Entry<'a> {
    /// A file: its path, content and mode.
    File(&'a str, &'a [u8], u32),
    /// A directory.
    Dir(&'a str),
    /// A symbolic link: its path and target.
    Symlink(&'a str, &'a str),
}

/// As [`rootfs_image_archive`], with directories, symlinks and file modes,
/// and an entrypoint of several words.
pub fn rootfs_image(
    dir: &Path,
    name: &str,
    entries: &[Entry<'_>],
    entrypoint: &[&str],
    env: &[&str],
) -> PathBuf {
    use oci_spec::image::{
        Arch, ConfigBuilder, ImageConfigurationBuilder, MediaType, Os, RootFsBuilder,
    };
    let layer = dir.join(format!("{}.layer.tar", name.replace(['/', ':'], "_")));
    let mut tar = tar::Builder::new(std::fs::File::create(&layer).expect("the layer"));
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        match entry {
            Entry::File(path, content, mode) => {
                header.set_mode(*mode);
                header.set_size(content.len() as u64);
                header.set_cksum();
                tar.append_data(&mut header, path, *content)
                    .expect("a file in the layer");
            }
            Entry::Dir(path) => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                header.set_cksum();
                tar.append_data(&mut header, path, std::io::empty())
                    .expect("a directory in the layer");
            }
            Entry::Symlink(path, target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                tar.append_link(&mut header, path, target)
                    .expect("a symlink in the layer");
            }
        }
    }
    tar.finish().expect("the layer is written");
    drop(tar);
    let diff_id = sha256_digest(&std::fs::read(&layer).expect("the layer"));
    let mut builder = moat_oci_archive::Builder::default();
    builder.add_layer_with_media_type(&layer, "application/vnd.oci.image.layer.v1.tar".to_owned());
    let config = ConfigBuilder::default()
        .entrypoint(entrypoint.iter().map(|w| w.to_string()).collect::<Vec<_>>())
        .env(env.iter().map(|e| e.to_string()).collect::<Vec<_>>())
        .build()
        .expect("an image config");
    let image = ImageConfigurationBuilder::default()
        .config(config)
        .os(Os::Linux)
        .architecture(Arch::Amd64)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![diff_id])
                .build()
                .expect("rootfs"),
        )
        .build()
        .expect("an image configuration");
    builder.add_config(image, name.to_owned(), MediaType::ImageConfig);
    let archive = dir.join(format!("{}.tar", name.replace(['/', ':'], "_")));
    builder
        .build(std::fs::File::create(&archive).expect("the archive"))
        .expect("the archive is written");
    archive
}

/// A wasm OCI image archive (for `ctr image import`), as runwasi's shims
/// and wasm OCI tooling lay one out: `component` as a layer of media type
/// `application/wasm` (not a filesystem diff, so the image has no root
/// filesystem), its configuration's architecture `wasm` and OS `wasip2`,
/// `entrypoint` the process's first argument.
pub fn wasm_layer_image(dir: &Path, name: &str, component: &[u8], entrypoint: &[&str]) -> PathBuf {
    use oci_spec::image::{
        Arch, ConfigBuilder, ImageConfigurationBuilder, MediaType, Os, RootFsBuilder,
    };
    let file = name.replace(['/', ':'], "_");
    let layer = dir.join(format!("{file}.wasm"));
    std::fs::write(&layer, component).expect("the component layer");
    let mut builder = moat_oci_archive::Builder::default();
    builder.add_layer_with_media_type(&layer, "application/wasm".to_owned());
    let config = ConfigBuilder::default()
        .entrypoint(entrypoint.iter().map(|w| w.to_string()).collect::<Vec<_>>())
        .build()
        .expect("an image config");
    let image = ImageConfigurationBuilder::default()
        .config(config)
        .os(Os::Other("wasip2".to_owned()))
        .architecture(Arch::Wasm)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(Vec::<String>::new())
                .build()
                .expect("rootfs"),
        )
        .build()
        .expect("an image configuration");
    builder.add_config(image, name.to_owned(), MediaType::ImageConfig);
    let archive = dir.join(format!("{file}.tar"));
    builder
        .build(std::fs::File::create(&archive).expect("the archive"))
        .expect("the archive is written");
    archive
}

/// A running containerd.
pub struct Containerd {
    child: Child,
    dir: tempfile::TempDir,
    socket: PathBuf,
    release: Release,
}

impl Containerd {
    /// Starts containerd listening on `socket` (a path under its own
    /// directory when `None`), with `shim_dir` first on its PATH so that it
    /// finds `containerd-shim-moat-v1` there.
    pub fn start(socket: Option<&Path>, shim_dir: &Path) -> Containerd {
        let release = Release::system().expect("the system's containerd");
        Containerd::start_with(socket, shim_dir, None, &release)
    }

    /// As [`Containerd::start`], containerd `release`, with its CRI plugin
    /// on and `cri` (its plugins' TOML tables, in the configuration
    /// version the release reads, `{d}` standing for containerd's own
    /// directory) as its configuration; with `None`, the plugin is off.
    /// The release's own binaries come before the system's on its PATH
    /// (its runc shim is the one it starts).
    pub fn start_with(
        socket: Option<&Path>,
        shim_dir: &Path,
        cri: Option<&str>,
        release: &Release,
    ) -> Containerd {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let socket = socket
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.path().join("containerd.sock"));
        if let Some(parent) = socket.parent() {
            std::fs::create_dir_all(parent).expect("the socket's directory");
        }
        let _ = std::fs::remove_file(&socket);
        let d = dir.path().display();
        let plugins = match cri {
            // The CRI plugin serves kubelets; these tests talk to
            // containerd directly.
            None if release.config_version() >= 3 => r#"disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.images"]"#.to_owned(),
            None => r#"disabled_plugins = ["io.containerd.grpc.v1.cri"]"#.to_owned(),
            Some(cri) => cri.replace("{d}", &d.to_string()),
        };
        let config = format!(
            r#"version = {version}
root = "{d}/root"
state = "{d}/state"
{plugins}

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  address = "{d}/debug.sock"
"#,
            socket = socket.display(),
            version = release.config_version(),
        );
        std::fs::write(dir.path().join("config.toml"), config).expect("the configuration");
        let log = std::fs::File::create(dir.path().join("containerd.log")).expect("the log");
        let path = std::env::join_paths(
            std::iter::once(shim_dir.to_path_buf())
                .chain(release.bin.clone())
                .chain(std::env::split_paths(
                    &std::env::var_os("PATH").unwrap_or_default(),
                )),
        )
        .expect("a PATH");
        // The shim's node settings: a compiled-code cache and a figures
        // directory of this containerd's own.
        let settings = dir.path().join("moat-shim.toml");
        std::fs::write(
            &settings,
            format!(
                "cache-dir = \"{d}/moat-cache\"\nfigures-dir = \"{d}/moat-figures\"\n",
                d = dir.path().display()
            ),
        )
        .expect("the shim's settings");
        let child = release
            .command("containerd")
            .args(["--log-level", "debug"])
            .arg("--config")
            .arg(dir.path().join("config.toml"))
            .env("PATH", path)
            .env("MOAT_SHIM_SETTINGS", &settings)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .spawn()
            .expect("containerd starts");
        let mut containerd = Containerd {
            child,
            dir,
            socket,
            release: release.clone(),
        };
        let started = Instant::now();
        loop {
            if std::os::unix::net::UnixStream::connect(&containerd.socket).is_ok() {
                break;
            }
            if let Ok(Some(status)) = containerd.child.try_wait() {
                panic!("containerd exited ({status}):\n{}", containerd.log());
            }
            assert!(
                started.elapsed() < START_DEADLINE,
                "containerd did not open {} in {START_DEADLINE:?}:\n{}",
                containerd.socket.display(),
                containerd.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        containerd
    }

    /// Which containerd it is.
    pub fn release(&self) -> &Release {
        &self.release
    }

    /// Its socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The compiled-code cache of its shims.
    pub fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("moat-cache")
    }

    /// Where its shims write each container's figures.
    pub fn figures_dir(&self) -> PathBuf {
        self.dir.path().join("moat-figures")
    }

    /// Adds `line` to the node's settings for its shims (read at each
    /// container's start).
    pub fn add_shim_setting(&self, line: &str) {
        use std::io::Write as _;
        let mut settings = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("moat-shim.toml"))
            .expect("the shim's settings");
        writeln!(settings, "{line}").expect("the setting is written");
    }

    /// Its own directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What containerd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    /// `ctr` against this containerd, in `namespace`.
    pub fn ctr(&self, namespace: &str) -> Command {
        let mut ctr = self.release.command("ctr");
        ctr.arg("--address")
            .arg(&self.socket)
            .arg("--namespace")
            .arg(namespace);
        ctr
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Shims outlive containerd; a test that failed may have left
        // containers running. Each shim names its containerd's socket.
        let socket = self.socket.display().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&socket)
                && let Some(pid) = entry.file_name().to_str()
            {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(self.socket.with_extension("sock.ttrpc"));
        // Snapshots are mounts under its root: take them down before the
        // directory goes.
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") {
            let root = self.dir.path().display().to_string();
            for line in mounts.lines().rev() {
                if let Some(target) = line.split(' ').nth(1)
                    && target.starts_with(&root)
                {
                    let _ = Command::new("umount").arg("-l").arg(target).status();
                }
            }
        }
    }
}
