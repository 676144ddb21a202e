//! A secret's value, read where its binding says (`from=env:` or
//! `from=file:`) when the run starts; what the run does with it is
//! [`crate::net::secrets`]'s.

use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::net::Secret;
use crate::net::secrets::SecretValueError;
use crate::trusted::{self, Trusted, TrustedFileError};
use moat_policy::settings::{SecretBinding, SecretSource};

/// Why a secret's value could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The variable is not set in the environment the value is read
    /// from (moat's own; a container's, under the shim), or is not text.
    #[error("secret {name}: the variable {var} is not set (or is not UTF-8)")]
    Env {
        /// The secret's name.
        name: String,
        /// The variable.
        var: String,
    },
    /// The file could not be read as a trusted file is.
    #[error("secret {name}: {source}")]
    File {
        /// The secret's name.
        name: String,
        /// Why.
        #[source]
        source: TrustedFileError,
    },
    /// The file is not UTF-8 text.
    #[error("secret {name}: {} is not UTF-8 text", path.display())]
    NotText {
        /// The secret's name.
        name: String,
        /// The file.
        path: PathBuf,
    },
    /// The value cannot be a secret's.
    #[error(transparent)]
    Value(#[from] SecretValueError),
}

/// `binding`'s secret, its value read from where the binding says: a
/// variable of this process's environment, or a file read as a trusted
/// file is (no symbolic link at its end, a regular file, at most 64 KiB),
/// one trailing line break dropped.
///
/// # Errors
/// [`SecretError`]: the value is missing, unreadable, not text, or not
/// one a secret may have.
pub fn read(binding: SecretBinding) -> Result<Secret, SecretError> {
    read_from(binding, |var| std::env::var(var).ok(), Path::to_owned)
}

/// [`read`], with the variables of an environment other than this
/// process's (`env`: a variable's value, if set), and the file where
/// `place` puts the binding's path (the containerd shim reads both as
/// the container has them).
///
/// # Errors
/// As [`read`].
pub fn read_from(
    binding: SecretBinding,
    env: impl FnOnce(&str) -> Option<String>,
    place: impl FnOnce(&Path) -> PathBuf,
) -> Result<Secret, SecretError> {
    let name = binding.name.clone();
    let value = match &binding.from {
        SecretSource::Env(var) => env(var)
            .map(Zeroizing::new)
            .ok_or_else(|| SecretError::Env {
                name,
                var: var.clone(),
            })?,
        SecretSource::File(path) => {
            let bytes = trusted::read(&place(path), Trusted::SecretFile).map_err(|source| {
                SecretError::File {
                    name: name.clone(),
                    source,
                }
            })?;
            let mut text = match String::from_utf8(bytes) {
                Ok(text) => Zeroizing::new(text),
                Err(e) => {
                    drop(Zeroizing::new(e.into_bytes()));
                    return Err(SecretError::NotText {
                        name,
                        path: path.clone(),
                    });
                }
            };
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            text
        }
    };
    Ok(Secret::new(binding, value)?)
}

/// Marks this process as one whose memory goes into no core dump and
/// that no other process of the same user may read through `/proc` or
/// `ptrace` (Linux's `PR_SET_DUMPABLE` to 0): the run holds secrets'
/// values.
///
/// # Errors
/// The system's, where it refuses.
pub fn keep_out_of_core_dumps() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}
