//! The files a later run trusts: the audit trail, the policy file, the
//! component (what `--watch` and SIGHUP read too), TLS certificates, keys
//! and CA files, and the compiled-code cache with its key.
//!
//! One rule for all of them, because a guest that can write one of them
//! decides what a later run does (grants itself everything through the
//! policy file, runs native code through the cache, appends a shell command
//! to a `.bashrc` through a trail that was turned into a symbolic link):
//!
//! - each is opened without following a symbolic link in its last component
//!   (`O_NOFOLLOW`), and must then be a regular file: a FIFO, a device
//!   (`/dev/zero`) or a directory is refused by what the descriptor is, not
//!   by what the path looked like before it was opened;
//! - what moat reads of one is bounded ([`Trusted::max_bytes`]): a sparse
//!   3 GiB file is refused by its size before a byte of it is read;
//! - no directory a guest gets may reach one ([`crate::preopen::check_against`]
//!   with [`Kept`]), judged by where the file lives in its filesystem, so a
//!   bind mount or a symbolic link above it does not hide it.
//!
//! docs/trusted-files.md has the table of these files and their rules.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A kind of file a later run trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Trusted {
    /// The audit trail (`--audit`): what the operator reads to learn what
    /// happened, and what a later run appends to.
    Trail,
    /// The policy file (`--policy`): the grants of every later run.
    Policy,
    /// The component: what runs, and what `--watch` and SIGHUP reload.
    Component,
    /// A TLS certificate chain (`--tls-cert`).
    TlsCertificate,
    /// A TLS private key (`--tls-key`): a secret.
    TlsKey,
    /// A CA file (`--ca-file`): whom a later run's TLS trusts.
    CaFile,
    /// The compiled-code cache directory, with its key: native code a later
    /// run executes, authenticated by a secret.
    Cache,
    /// A secret's value (`--secret`'s `from=file:`): what the guest is
    /// given a placeholder of and must never read.
    SecretFile,
    /// The run's figures ([`crate::figures`]): what a node agent reports
    /// of the run.
    Figures,
}

impl Trusted {
    /// How the refusals name it.
    pub fn describe(self) -> &'static str {
        match self {
            Trusted::Trail => "the audit trail",
            Trusted::Policy => "the policy file",
            Trusted::Component => "the component",
            Trusted::TlsCertificate => "the TLS certificate",
            Trusted::TlsKey => "the TLS private key",
            Trusted::CaFile => "the CA file",
            Trusted::Cache => "moat's compiled-code cache",
            Trusted::SecretFile => "a secret's file",
            Trusted::Figures => "the run's figures",
        }
    }

    /// What a guest that reached it could do, for the refusal.
    fn harm(self) -> &'static str {
        match self {
            Trusted::Trail => {
                "rewrite the record of what it did, or turn the file into a link to one a later run appends to"
            }
            Trusted::Policy => "grant itself everything on the next run",
            Trusted::Component => "replace what the next run (or a reload) executes",
            Trusted::TlsCertificate | Trusted::CaFile => "change whom a later run's TLS trusts",
            Trusted::TlsKey => "read the server's private key",
            Trusted::Cache => "plant native code that a later run executes",
            Trusted::SecretFile => "read the value it was given a placeholder of",
            Trusted::Figures => "rewrite what its operator is told it did",
        }
    }

    /// Whether a guest may not even read it: then no directory a guest
    /// gets may reach it, read-only or not. The others are kept from the
    /// directories a guest may write.
    pub fn is_secret(self) -> bool {
        matches!(self, Trusted::TlsKey | Trusted::Cache | Trusted::SecretFile)
    }

    /// The most moat reads of it: a bound against a file that only claims
    /// to be one (a sparse file, one that grows while it is read). Not
    /// settings: each is far above what the file holds in use.
    pub fn max_bytes(self) -> u64 {
        match self {
            // JavaScript and Python components weigh 14-40 MiB; a component
            // of 512 MiB would take minutes and gigabytes to compile.
            Trusted::Component => 512 << 20,
            // A policy file is a page of settings; 1 MiB is ten thousand
            // grants.
            Trusted::Policy => 1 << 20,
            // The webpki roots are ~200 KiB of PEM; a chain or a key is a
            // few KiB.
            Trusted::TlsCertificate | Trusted::TlsKey | Trusted::CaFile => 16 << 20,
            // An API key or a token is at most a few KiB.
            Trusted::SecretFile => 64 << 10,
            // Appended to, never read: its bound is --max-audit-size.
            Trusted::Trail | Trusted::Cache | Trusted::Figures => u64::MAX,
        }
    }
}

impl fmt::Display for Trusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A file (or, for the cache, a directory) that no directory a guest gets
/// may reach ([`crate::preopen::check_against`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Where it is (it need not exist yet).
    pub path: PathBuf,
    /// What it is.
    pub what: Trusted,
}

impl Kept {
    /// `path`, kept as `what`.
    pub fn new(path: impl Into<PathBuf>, what: Trusted) -> Kept {
        Kept {
            path: path.into(),
            what,
        }
    }

    /// Whether a guest directory that reaches it is refused: any directory
    /// for a secret, a writable one for the rest.
    pub(crate) fn kept_from(&self, writable: bool) -> bool {
        writable || self.what.is_secret()
    }

    pub(crate) fn harm(&self) -> &'static str {
        self.what.harm()
    }
}

/// Why a trusted file was not opened. Its text is "WHAT PATH: REASON";
/// [`reason`](Self::reason) is the part after the colon.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustedFileError {
    /// Its last component is a symbolic link.
    Symlink {
        /// What it is.
        what: Trusted,
        /// As given.
        path: PathBuf,
    },
    /// It is not a regular file.
    NotRegular {
        /// What it is.
        what: Trusted,
        /// As given.
        path: PathBuf,
        /// What it is instead ("a directory", "a device", ...).
        kind: &'static str,
    },
    /// It is larger than moat reads of such a file.
    TooLarge {
        /// What it is.
        what: Trusted,
        /// As given.
        path: PathBuf,
        /// Its size (or what was read of it before the bound).
        size: u64,
        /// [`Trusted::max_bytes`].
        max: u64,
    },
    /// It has other names (hard links): another name could be in a
    /// directory a guest writes.
    Linked {
        /// What it is.
        what: Trusted,
        /// As given.
        path: PathBuf,
        /// Its link count.
        links: u64,
    },
    /// It could not be opened or read.
    Io {
        /// What it is.
        what: Trusted,
        /// As given.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
    },
}

impl fmt::Display for TrustedFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (what, path) = self.file();
        write!(f, "{what} {}: {}", path.display(), self.reason())
    }
}

impl TrustedFileError {
    /// What the file is, and its path as given.
    pub fn file(&self) -> (Trusted, &Path) {
        match self {
            TrustedFileError::Symlink { what, path }
            | TrustedFileError::NotRegular { what, path, .. }
            | TrustedFileError::TooLarge { what, path, .. }
            | TrustedFileError::Linked { what, path, .. }
            | TrustedFileError::Io { what, path, .. } => (*what, path),
        }
    }

    /// Why, without the file's name.
    pub fn reason(&self) -> String {
        match self {
            TrustedFileError::Symlink { what, .. } => format!(
                "it is a symbolic link; name the file itself (a link there could have been \
                 planted to make moat {} another file)",
                if *what == Trusted::Trail {
                    "append to"
                } else {
                    "read"
                }
            ),
            TrustedFileError::NotRegular { kind, .. } => {
                format!("it is {kind}, not a regular file")
            }
            TrustedFileError::TooLarge {
                what, size, max, ..
            } => format!("it is {size} bytes, more than the {max} moat reads of {what}"),
            TrustedFileError::Linked { links, .. } => format!(
                "it has {links} names (hard links); one of them could lie where a guest writes, \
                 so moat appends only to a file with one"
            ),
            TrustedFileError::Io { source, .. } => source.to_string(),
        }
    }

    /// The system's error, if that is what it was (`NotFound` and the like).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            TrustedFileError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// `O_NOFOLLOW`: an open whose last component is a link fails with ELOOP.
fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// What a file that is not regular is, for the refusal.
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_file() {
        None
    } else if kind.is_dir() {
        Some("a directory")
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

fn opened(path: &Path, what: Trusted, result: io::Result<File>) -> Result<File, TrustedFileError> {
    result.map_err(|source| {
        if source.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            TrustedFileError::Symlink {
                what,
                path: path.to_owned(),
            }
        } else {
            TrustedFileError::Io {
                what,
                path: path.to_owned(),
                source,
            }
        }
    })
}

/// Reads the trusted file at `path` whole: not through a symbolic link, a
/// regular file, at most [`Trusted::max_bytes`].
///
/// # Errors
/// [`TrustedFileError`].
pub fn read(path: &Path, what: Trusted) -> Result<Vec<u8>, TrustedFileError> {
    // Non-blocking, so that a FIFO put there does not hang the open; the
    // flag does nothing to a regular file's reads.
    let file = opened(
        path,
        what,
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(no_follow() | rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path),
    )?;
    let io = |source| TrustedFileError::Io {
        what,
        path: path.to_owned(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(TrustedFileError::NotRegular {
            what,
            path: path.to_owned(),
            kind,
        });
    }
    let max = what.max_bytes();
    let too_large = |size| TrustedFileError::TooLarge {
        what,
        path: path.to_owned(),
        size,
        max,
    };
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // One byte past the bound tells a file that grew while it was read.
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Opens the trusted file at `path` for appending, creating it if it does
/// not exist: not through a symbolic link, a regular file with one name.
///
/// # Errors
/// [`TrustedFileError`].
pub fn append(path: &Path, what: Trusted) -> Result<File, TrustedFileError> {
    let file = opened(
        path,
        what,
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(no_follow() | rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path),
    )?;
    let meta = file.metadata().map_err(|source| TrustedFileError::Io {
        what,
        path: path.to_owned(),
        source,
    })?;
    if let Some(kind) = kind_of(&meta) {
        return Err(TrustedFileError::NotRegular {
            what,
            path: path.to_owned(),
            kind,
        });
    }
    if meta.nlink() > 1 {
        return Err(TrustedFileError::Linked {
            what,
            path: path.to_owned(),
            links: meta.nlink(),
        });
    }
    // Back to blocking writes: the trail's writer thread waits on the disk,
    // never spins on EAGAIN.
    let flags = rustix::fs::fcntl_getfl(&file).map_err(|e| TrustedFileError::Io {
        what,
        path: path.to_owned(),
        source: e.into(),
    })?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK).map_err(|e| {
        TrustedFileError::Io {
            what,
            path: path.to_owned(),
            source: e.into(),
        }
    })?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("moat-trusted-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_link_a_device_a_fifo_and_a_directory_are_refused_a_file_is_read() {
        let dir = scratch("read");
        let file = dir.join("policy.toml");
        std::fs::write(&file, b"allow-net = []\n").unwrap();
        assert_eq!(read(&file, Trusted::Policy).unwrap(), b"allow-net = []\n");
        std::os::unix::fs::symlink(&file, dir.join("link")).unwrap();
        assert!(matches!(
            read(&dir.join("link"), Trusted::Policy),
            Err(TrustedFileError::Symlink { .. })
        ));
        assert!(matches!(
            read(Path::new("/dev/zero"), Trusted::Component),
            Err(TrustedFileError::NotRegular {
                kind: "a device",
                ..
            })
        ));
        assert!(matches!(
            read(&dir, Trusted::Component),
            Err(TrustedFileError::NotRegular {
                kind: "a directory",
                ..
            })
        ));
        rustix::fs::mkfifoat(rustix::fs::CWD, dir.join("fifo"), rustix::fs::Mode::RUSR).unwrap();
        assert!(matches!(
            read(&dir.join("fifo"), Trusted::Policy),
            Err(TrustedFileError::NotRegular { kind: "a FIFO", .. })
        ));
        let sparse = File::create(dir.join("sparse")).unwrap();
        sparse.set_len(Trusted::Policy.max_bytes() + 1).unwrap();
        assert!(matches!(
            read(&dir.join("sparse"), Trusted::Policy),
            Err(TrustedFileError::TooLarge { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_trail_is_appended_to_only_as_a_file_of_its_own() {
        let dir = scratch("append");
        let target = dir.join("bashrc");
        std::fs::write(&target, b"# mine\n").unwrap();
        std::os::unix::fs::symlink("bashrc", dir.join("audit.jsonl")).unwrap();
        let e = append(&dir.join("audit.jsonl"), Trusted::Trail).unwrap_err();
        assert!(matches!(e, TrustedFileError::Symlink { .. }), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"# mine\n");
        std::fs::hard_link(&target, dir.join("second")).unwrap();
        assert!(matches!(
            append(&dir.join("second"), Trusted::Trail),
            Err(TrustedFileError::Linked { links: 2, .. })
        ));
        let mut fresh = append(&dir.join("fresh.jsonl"), Trusted::Trail).unwrap();
        std::io::Write::write_all(&mut fresh, b"{}\n").unwrap();
        assert_eq!(std::fs::read(dir.join("fresh.jsonl")).unwrap(), b"{}\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
