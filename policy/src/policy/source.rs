//! Where a grant or deny entry came from, so that a decision can name the
//! statement that made it: a flag, a policy file's line, a container's
//! variable, the image's policy, or an embedder's call.

use std::fmt;
use std::path::PathBuf;

/// Where one grant or deny entry was written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Source {
    /// A command-line flag (`--allow-net`).
    Flag {
        /// The flag, as `moat run --help` spells it.
        flag: String,
    },
    /// A policy file (`moat run --policy`), at a 1-based line.
    PolicyFile {
        /// The file as its reader named it.
        path: PathBuf,
        /// The line of the entry.
        line: usize,
    },
    /// A container's environment under the containerd shim
    /// (`MOAT_ALLOW_NET`).
    Environment {
        /// The variable.
        variable: String,
    },
    /// The policy an image carries (a policy layer or `/moat-policy.toml`),
    /// applied because the pod spec said so.
    ImagePolicy {
        /// `sha256:` and the hex of the policy's SHA-256.
        digest: String,
        /// The line of the entry in the policy.
        line: usize,
    },
    /// A call of the embedding API (`Policy::allow_connect`, ...).
    #[default]
    Embedding,
}

impl fmt::Display for Source {
    /// `--allow-net`, `moat.toml:3`, `MOAT_ALLOW_NET`, `image policy
    /// sha256:...:3`, `the embedding API`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag { flag } => f.write_str(flag),
            Source::PolicyFile { path, line } => write!(f, "{}:{line}", path.display()),
            Source::Environment { variable } => f.write_str(variable),
            Source::ImagePolicy { digest, line } => write!(f, "image policy {digest}:{line}"),
            Source::Embedding => f.write_str("the embedding API"),
        }
    }
}

/// A grant or deny entry as written, and where.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Provenance {
    /// The entry as written (`example.com:443`, `private`, `*`).
    pub entry: String,
    /// Where it was written.
    pub source: Source,
}

impl fmt::Display for Provenance {
    /// `example.com:443 (--allow-net)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.entry, self.source)
    }
}
