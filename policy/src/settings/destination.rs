//! Where the audit trail goes, as a setting names it.

use std::fmt;
use std::path::PathBuf;

/// Where `--audit`, the policy file's `audit` and `MOAT_AUDIT` send the
/// trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard error (under the shim, the container's log).
    Stderr,
    /// A file, appended to (created if missing).
    File(PathBuf),
}

impl Destination {
    /// `-` is standard error; anything else a file's path.
    pub fn parse(text: &str) -> Destination {
        match text {
            "-" => Destination::Stderr,
            path => Destination::File(PathBuf::from(path)),
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Stderr => f.write_str("-"),
            Destination::File(path) => write!(f, "{}", path.display()),
        }
    }
}
