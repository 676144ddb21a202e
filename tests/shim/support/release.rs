//! Which containerd a test runs: the system's (Debian 12's 1.6), or one of
//! the releases `tests/shim/fetch-containerd` extracts from Debian's own
//! packages into `target/containerd/` (1.7 from Debian 13, 2.1 from
//! unstable), beside it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The releases the CRI tests run on: the system's, and those
/// `tests/shim/fetch-containerd` fetches.
pub const FETCHED: &[&str] = &["1.7.24", "2.1.9"];

/// One containerd release: where its binaries are, and its version.
#[derive(Debug, Clone)]
pub struct Release {
    /// The directory holding `containerd`, `ctr` and its runc shim;
    /// `None` for the system's, found on PATH.
    pub bin: Option<PathBuf>,
    /// (major, minor).
    pub version: (u32, u32),
    /// What `containerd --version` printed, for messages.
    pub name: String,
}

impl Release {
    /// The system's containerd, or why there is none.
    pub fn system() -> Result<Release, String> {
        Release::at(None)
    }

    /// Release `upstream` (one of [`FETCHED`]), fetched into
    /// `target/containerd/` by `tests/shim/fetch-containerd` when it is not
    /// there yet (once a process), or why it cannot be had.
    pub fn fetched(upstream: &str) -> Result<Release, String> {
        static FETCH: OnceLock<Result<(), String>> = OnceLock::new();
        let dir = cache_dir();
        let bin = dir.join(upstream).join("usr/bin");
        if !bin.join("containerd").exists() {
            FETCH.get_or_init(|| fetch(&dir)).clone()?;
        }
        Release::at(Some(bin))
    }

    fn at(bin: Option<PathBuf>) -> Result<Release, String> {
        let containerd = match &bin {
            Some(bin) => bin.join("containerd"),
            None => PathBuf::from("containerd"),
        };
        let out = Command::new(&containerd)
            .arg("--version")
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("`{}` cannot run: {e}", containerd.display()))?;
        let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let version = parse_version(&name)
            .ok_or_else(|| format!("`{} --version` said {name:?}", containerd.display()))?;
        Ok(Release { bin, version, name })
    }

    /// `program` of this release (`containerd`, `ctr`).
    pub fn command(&self, program: &str) -> Command {
        match &self.bin {
            Some(bin) => Command::new(bin.join(program)),
            None => Command::new(program),
        }
    }

    /// The version of configuration file this release reads: 3 for 2.x
    /// (its CRI plugin split in `io.containerd.cri.v1.images` and
    /// `io.containerd.cri.v1.runtime`), 2 for 1.x.
    pub fn config_version(&self) -> u32 {
        if self.version >= (2, 0) { 3 } else { 2 }
    }

    /// Whether it runs images whose layers are not filesystem diffs (a
    /// wasm component, a moat policy). 1.6 unpacks every image it imports
    /// or runs and refuses one whose layers outnumber its rootfs diffs
    /// ("mismatched image rootfs and manifest layers"); 1.7 leaves such
    /// layers out of the unpack.
    pub fn runs_wasm_layers(&self) -> bool {
        self.version >= (1, 7)
    }

    /// `major.minor`, for test names and tables.
    pub fn short(&self) -> String {
        format!("{}.{}", self.version.0, self.version.1)
    }
}

/// "containerd github.com/containerd/containerd 1.6.20~ds1 ..." and
/// ".../containerd/v2 2.1.9+unknown": the third word.
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let version = text.split_whitespace().nth(2)?.trim_start_matches('v');
    let mut parts = version.split(['.', '~', '-', '+']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// `target/containerd/` of this workspace.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/containerd")
}

fn fetch(dir: &Path) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/shim/fetch-containerd");
    let out = Command::new("bash")
        .arg(&script)
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} cannot run: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tests/shim/fetch-containerd could not fetch it: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions_are_read_as_each_release_prints_them() {
        for (text, version) in [
            (
                "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
                (1, 6),
            ),
            (
                "containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+deb13u1",
                (1, 7),
            ),
            (
                "containerd github.com/containerd/containerd/v2 2.1.9+unknown ",
                (2, 1),
            ),
            ("containerd containerd.io v2.0.0 207ad71", (2, 0)),
        ] {
            assert_eq!(super::parse_version(text), Some(version), "{text}");
        }
    }
}
