//! The compiled-code cache: a component's native code, kept on disk so
//! that its next load skips Cranelift.
//!
//! A cache entry is machine code that the next `moat run` maps executable
//! and calls, so whoever can write an entry runs code in every later run of
//! this user's, outside any sandbox. moat loads an entry only when both of
//! these hold:
//!
//! - **The directory is this user's alone**, judged as OpenSSH's
//!   StrictModes judges a home directory: the cache directory is owned by
//!   the running user and writable by nobody else, and every directory
//!   above it is owned by that user or root and writable by nobody else
//!   (or sticky, as `/tmp` is, where no one can replace what another
//!   made). A directory that fails is not read and not written: the run
//!   compiles afresh, and one warning says why ([`CacheRefused`]).
//! - **The entry is authenticated as written by this user's moat**: an
//!   HMAC-SHA-256 over the entry's name and its code, under a 32-byte key
//!   made at random the first time and kept in the cache directory
//!   (`key`, mode 0600). The name is the SHA-256 of the engine's
//!   configuration and the component's length and SHA-256, so an entry cannot be moved
//!   to stand for another component either. An entry that fails is never
//!   loaded: it is compiled afresh and replaced.
//!
//! No guest can reach the key or the entries: a directory that is,
//! contains or lies inside a cache directory is refused as a guest's
//! directory ([`crate::preopen::check_against`]). The entry is read
//! whole into memory, checked, and deserialized from those same bytes, so
//! nothing can change between the check and the load.
//!
//! Entries are the code as wasmtime serializes it, uncompressed (a load
//! maps it without a decompression pass). The directory is bounded by
//! [`crate::MoatConfig::max_cache_bytes`] (by default [`MAX_CACHE_BYTES`]):
//! past it, the entries used longest ago go.

use std::fs::{self, File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled code is cached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheDir {
    /// `$XDG_CACHE_HOME/moat`, else `$HOME/.cache/moat`; no cache if
    /// neither is set.
    #[default]
    Default,
    /// This directory (created if missing).
    At(PathBuf),
    /// No cache: every load compiles.
    Off,
}

impl CacheDir {
    pub(crate) fn resolve(&self) -> Option<PathBuf> {
        match self {
            CacheDir::Off => None,
            CacheDir::At(dir) => Some(dir.clone()),
            CacheDir::Default => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("moat")),
        }
    }
}

/// The node's cache of the containerd shim, unless its settings name
/// another: kept from every guest of every moat on the machine, since a pod
/// may be given it through a hostPath volume.
pub const NODE_CACHE_DIR: &str = "/var/lib/moat/cache";

/// Every cache directory a moat on this machine uses unless told otherwise:
/// the one `XDG_CACHE_HOME` names, the one under `HOME`, the one under the
/// home the password database gives this user (what a service started
/// without `HOME`, or with another, would find), and [`NODE_CACHE_DIR`].
/// No guest is given a directory that reaches one of them
/// ([`crate::preopen::check_against`]), whichever this run uses. Found once
/// a process (`moat serve` judges its directories for every request).
pub(crate) fn every_default() -> &'static [PathBuf] {
    static DEFAULTS: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    DEFAULTS.get_or_init(find_every_default)
}

fn find_every_default() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    homes.extend(passwd_home());
    let mut all: Vec<PathBuf> = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(|base| PathBuf::from(base).join("moat"))
        .into_iter()
        .chain(homes.into_iter().map(|home| home.join(".cache/moat")))
        .chain(std::iter::once(PathBuf::from(NODE_CACHE_DIR)))
        .collect();
    all.dedup();
    all
}

/// This user's home as `/etc/passwd` has it (the sixth field of the line
/// whose third is the effective user id), read without the C library's
/// name service so that no module is loaded into the host.
fn passwd_home() -> Option<PathBuf> {
    let uid = rustix::process::geteuid().as_raw().to_string();
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[2] == uid && fields[5].starts_with('/'))
            .then(|| PathBuf::from(fields[5]))
    })
}

/// Most bytes of entries the cache keeps by default
/// ([`crate::MoatConfig::max_cache_bytes`]): 2 GiB, room for forty of the
/// largest components seen here (a 22 MB componentize-py component
/// compiles to about 50 MB) and many hundreds of ordinary ones. Past it,
/// the entries used longest ago are removed until it holds three quarters
/// of this.
pub const MAX_CACHE_BYTES: u64 = 2 << 30;

/// The file of the cache's directory whose modification time says when
/// entries were last removed to keep the cache within its size.
pub(crate) const EVICTED: &str = "evicted";

/// When the cache at `dir` last removed entries to keep within its size;
/// `None` when it never has (or the note cannot be read). Whoever
/// remembers which components the cache holds (the containerd shim)
/// forgets what it learnt before this.
pub fn last_eviction(dir: &Path) -> Option<SystemTime> {
    fs::metadata(dir.join(EVICTED))
        .and_then(|m| m.modified())
        .ok()
}

/// The largest entry read: 4 GiB. A file past it is not code moat wrote
/// (wasmtime's own limit on a module's code is smaller), and reading it
/// would cost that much memory before the check could refuse it.
const MAX_ENTRY_BYTES: u64 = 4 << 30;

/// The first bytes of every entry: the format, so that a later layout is
/// never taken for this one.
const MAGIC: &[u8; 16] = b"moat-code-v1\0\0\0\0";

/// The length of the key and of each entry's tag.
const TAG_BYTES: usize = 32;

/// Where an entry's code starts: after the magic and the tag.
const HEADER_BYTES: usize = MAGIC.len() + TAG_BYTES;

type HmacSha256 = hmac::Hmac<Sha256>;

/// Why a cache directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheRefused {
    /// The directory, or one above it, belongs to another user.
    #[error("{} belongs to uid {owner}, not to this user (uid {user}) or root", path.display())]
    Owner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The running user.
        user: u32,
    },
    /// The directory, or one above it, may be written by other users.
    #[error("{} may be written by other users (mode {mode:04o})", path.display())]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file is not a private regular file of this user's.
    #[error("{} is not a file only this user can read (mode {mode:04o}, uid {owner})", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// Its owner.
        owner: u32,
    },
    /// It is not a directory, or could not be made or examined.
    #[error("{}: {source}", path.display())]
    Io {
        /// What was being examined.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// A cache directory judged fit, and its key.
pub(crate) struct CodeCache {
    dir: PathBuf,
    key: [u8; TAG_BYTES],
    /// Most bytes of entries kept ([`crate::MoatConfig::max_cache_bytes`]).
    max_bytes: u64,
    hits: AtomicUsize,
    misses: AtomicUsize,
}

impl std::fmt::Debug for CodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeCache").field("dir", &self.dir).finish()
    }
}

impl CodeCache {
    /// Opens the cache at `dir` (made, mode 0700, if missing), after
    /// judging it and everything above it; makes its key if it has none.
    /// It keeps at most `max_bytes` of entries.
    ///
    /// # Errors
    /// [`CacheRefused`]: the directory is not used.
    pub(crate) fn open(dir: &Path, max_bytes: u64) -> Result<CodeCache, CacheRefused> {
        let io_error = |path: &Path| {
            let path = path.to_owned();
            move |source| CacheRefused::Io { path, source }
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_error(dir))?;
        let dir = fs::canonicalize(dir).map_err(io_error(dir))?;
        let user = rustix::process::geteuid().as_raw();
        judge_directory(&dir, user, true)?;
        for above in dir.ancestors().skip(1) {
            judge_directory(above, user, false)?;
        }
        let code = dir.join("code");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&code)
            .or_else(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(io_error(&code))?;
        judge_directory(&code, user, true)?;
        let key = key(&dir, user)?;
        Ok(CodeCache {
            dir,
            key,
            max_bytes,
            hits: AtomicUsize::new(0),
            misses: AtomicUsize::new(0),
        })
    }

    /// The directory (canonical).
    pub(crate) fn directory(&self) -> &Path {
        &self.dir
    }

    /// Loads served from the cache.
    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::Relaxed)
    }

    /// Loads compiled and then kept.
    pub(crate) fn misses(&self) -> usize {
        self.misses.load(Ordering::Relaxed)
    }

    /// The component in `bytes` for `engine`: its authenticated entry if
    /// there is one, else compiled, then kept.
    ///
    /// # Errors
    /// wasmtime's, when the bytes do not compile. A cache that cannot be
    /// read or written only costs the compile.
    pub(crate) fn component(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &ComponentDigest,
    ) -> wasmtime::Result<Component> {
        debug_assert_eq!(digest.len, bytes.len() as u64);
        let name = entry_name(engine, digest);
        let path = self.dir.join("code").join(&name);
        match self.read(&path, &name) {
            Ok(Some(entry)) => match load(engine, &entry[HEADER_BYTES..]) {
                Ok(component) => {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(entry = %path.display(), "loaded from the compiled-code cache");
                    // Used now: the last to go when the cache is trimmed.
                    if let Ok(file) = File::options().write(true).open(&path) {
                        let _ = file.set_modified(SystemTime::now());
                    }
                    return Ok(component);
                }
                Err(e) => {
                    tracing::debug!(entry = %path.display(), error = %e, "a cache entry wasmtime does not load: compiling afresh");
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(
                    "compiled-code cache: {}: {e}; compiling afresh (the entry is not used)",
                    path.display()
                );
            }
        }
        let component = Component::from_binary(engine, bytes)?;
        match component.serialize() {
            Ok(code) => match self.write(&path, &name, &code) {
                Ok(()) => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(entry = %path.display(), "compiled, and kept in the compiled-code cache");
                    self.trim();
                }
                // A cache mounted read-only (the containerd shim's, in a
                // container) is read, never written, by design.
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error()) => {
                    tracing::debug!(
                        "the compiled-code cache {} is read-only: this component's code is not kept",
                        self.dir.display()
                    );
                }
                Err(e) => tracing::warn!(
                    "the compiled-code cache {}: cannot keep this component's code: {e}",
                    self.dir.display()
                ),
            },
            Err(e) => tracing::debug!(error = %e, "cannot serialize a compiled component"),
        }
        Ok(component)
    }

    /// The entry at `path` (its code from [`HEADER_BYTES`] on), if there is
    /// one and it is authentic; an error for an entry that is there and is
    /// not.
    fn read(&self, path: &Path, name: &str) -> Result<Option<Vec<u8>>, EntryRefused> {
        let mut file = match OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(EntryRefused::Io(e)),
        };
        let meta = file.metadata().map_err(EntryRefused::Io)?;
        if !meta.is_file() {
            return Err(EntryRefused::NotAFile);
        }
        if meta.len() > MAX_ENTRY_BYTES {
            return Err(EntryRefused::TooLarge(meta.len()));
        }
        let mut entry = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut entry).map_err(EntryRefused::Io)?;
        let Some(rest) = entry.strip_prefix(MAGIC.as_slice()) else {
            return Err(EntryRefused::Forged);
        };
        let Some((tag, _)) = rest.split_at_checked(TAG_BYTES) else {
            return Err(EntryRefused::Forged);
        };
        let mut mac = self.mac(name);
        mac.update(&rest[TAG_BYTES..]);
        mac.verify_slice(tag).map_err(|_| EntryRefused::Forged)?;
        Ok(Some(entry))
    }

    /// Writes `code` as the entry at `path`: to a file of its own first
    /// (mode 0600), renamed into place, so that a reader finds a whole
    /// entry or none.
    fn write(&self, path: &Path, name: &str, code: &[u8]) -> io::Result<()> {
        let mut mac = self.mac(name);
        mac.update(code);
        let tag = mac.finalize().into_bytes();
        let temporary = path.with_file_name(format!(".{name}.{}", random_suffix()?));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temporary)?;
            file.write_all(MAGIC)?;
            file.write_all(&tag)?;
            file.write_all(code)?;
            fs::rename(&temporary, path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        written
    }

    fn mac(&self, name: &str) -> HmacSha256 {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        mac.update(name.as_bytes());
        mac.update(b"\0");
        mac
    }

    /// Removes the entries used longest ago while the cache holds more
    /// than its `max_bytes`, until it holds three quarters of them.
    fn trim(&self) {
        let Ok(listing) = fs::read_dir(self.dir.join("code")) else {
            return;
        };
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = listing
            .flatten()
            .filter_map(|entry| {
                let meta = entry.metadata().ok()?;
                let modified = meta.modified().ok()?;
                meta.is_file().then(|| (modified, meta.len(), entry.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        if total <= self.max_bytes {
            return;
        }
        entries.sort();
        for (_, len, path) in entries {
            if total <= self.max_bytes / 4 * 3 {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
        // When entries last went: whoever remembers which components the
        // cache holds (the containerd shim) forgets what it learnt before.
        let _ = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(self.dir.join(EVICTED))
            .and_then(|file| file.set_modified(SystemTime::now()));
    }
}

/// Why an entry that is there was not loaded.
#[derive(Debug, thiserror::Error)]
enum EntryRefused {
    #[error("it is not a regular file")]
    NotAFile,
    #[error("it is {0} bytes, more than any entry moat writes")]
    TooLarge(u64),
    #[error("it was not written by this user's moat (its authentication tag does not match)")]
    Forged,
    #[error("{0}")]
    Io(io::Error),
}

/// Loads code moat compiled and authenticated.
#[allow(unsafe_code)]
fn load(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `Component::deserialize` requires bytes that wasmtime's own
    // `serialize` produced (wasmtime checks the format, its version and the
    // engine's configuration, but not the code itself). These bytes carry
    // an HMAC-SHA-256 under this user's cache key over the entry's name and
    // the bytes, checked just before by `CodeCache::read`, and only
    // `CodeCache::write` makes such a tag: it tags the output of
    // `Component::serialize` for an entry named after the engine's
    // configuration and the component's bytes, so these are wasmtime's
    // bytes for this component on an engine like this one. The key is
    // readable by this user alone, in a directory only this user can
    // write, which no guest is ever given. The bytes are in memory owned
    // here, so they cannot change between the check and this call.
    unsafe { Component::deserialize(engine, code) }
}

/// The SHA-256 of a component's bytes: taken once a load, it names the
/// component on the trail and its entry in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ComponentDigest {
    sha256: [u8; 32],
    len: u64,
}

impl ComponentDigest {
    pub(crate) fn of(bytes: &[u8]) -> ComponentDigest {
        ComponentDigest {
            sha256: Sha256::digest(bytes).into(),
            len: bytes.len() as u64,
        }
    }

    /// The SHA-256, in hex.
    pub(crate) fn hex(&self) -> String {
        self.sha256.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The entry's name: the SHA-256, in hex, of the engine's configuration
/// (what makes compiled code fit an engine, wasmtime's version included),
/// the component's length and its SHA-256 (taken once, for the trail
/// too; as collision-resistant as hashing the bytes again).
fn entry_name(engine: &Engine, component: &ComponentDigest) -> String {
    let mut hasher = DigestHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let mut digest = hasher.0;
    digest.update(component.len.to_le_bytes());
    digest.update(component.sha256);
    digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A [`Hasher`] that feeds a SHA-256 (std's hashers are not meant to be
/// stable or collision-resistant).
struct DigestHasher(Sha256);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

/// Judges one directory of the cache's path: `own` for the cache's own
/// directories (this user's, writable by no one else), else one above it
/// (this user's or root's, writable by no one else unless sticky).
fn judge_directory(path: &Path, user: u32, own: bool) -> Result<(), CacheRefused> {
    let meta = fs::symlink_metadata(path).map_err(|source| CacheRefused::Io {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(CacheRefused::Io {
            path: path.to_owned(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    let owner = meta.uid();
    if owner != user && (own || owner != 0) {
        return Err(CacheRefused::Owner {
            path: path.to_owned(),
            owner,
            user,
        });
    }
    let mode = meta.mode() & 0o7777;
    let sticky = mode & 0o1000 != 0;
    if mode & 0o022 != 0 && (own || !sticky) {
        return Err(CacheRefused::Writable {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// The cache's key: read from `dir/key`, or made and written there (mode
/// 0600) the first time. Two processes making it at once agree on one:
/// each writes its own file and links it into place, and the one whose
/// link fails reads the other's.
fn key(dir: &Path, user: u32) -> Result<[u8; TAG_BYTES], CacheRefused> {
    let path = dir.join("key");
    let io_error = |source| CacheRefused::Io {
        path: path.clone(),
        source,
    };
    loop {
        match read_key(&path, user) {
            Ok(key) => return Ok(key),
            Err(KeyRead::Missing) => {}
            Err(KeyRead::CacheRefused(e)) => return Err(e),
            Err(KeyRead::Io(e)) => return Err(io_error(e)),
        }
        let mut fresh = [0u8; TAG_BYTES];
        getrandom::fill(&mut fresh).map_err(|e| io_error(io::Error::other(e.to_string())))?;
        let temporary = dir.join(format!(".key.{}", random_suffix().map_err(io_error)?));
        let made = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temporary)?;
            file.write_all(&fresh)?;
            file.sync_all()?;
            fs::hard_link(&temporary, &path)
        })();
        let _ = fs::remove_file(&temporary);
        match made {
            Ok(()) => return Ok(fresh),
            // Another process made it first: read theirs.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error(e)),
        }
    }
}

enum KeyRead {
    Missing,
    CacheRefused(CacheRefused),
    Io(io::Error),
}

fn read_key(path: &Path, user: u32) -> Result<[u8; TAG_BYTES], KeyRead> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(KeyRead::Missing),
        Err(e) => return Err(KeyRead::Io(e)),
    };
    let meta = file.metadata().map_err(KeyRead::Io)?;
    let mode = meta.mode() & 0o7777;
    if !meta.is_file() || meta.uid() != user || mode & 0o077 != 0 || meta.len() != TAG_BYTES as u64
    {
        return Err(KeyRead::CacheRefused(CacheRefused::Key {
            path: path.to_owned(),
            mode,
            owner: meta.uid(),
        }));
    }
    let mut key = [0u8; TAG_BYTES];
    file.read_exact(&mut key).map_err(KeyRead::Io)?;
    Ok(key)
}

/// A suffix that makes a temporary file's name this process's own.
fn random_suffix() -> io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(format!(
        "{}-{}",
        std::process::id(),
        u64::from_le_bytes(bytes)
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn engine() -> Engine {
        Engine::default()
    }

    const EMPTY: &str = "(component)";

    #[test]
    fn an_entry_is_kept_then_loaded_and_a_changed_one_is_compiled_afresh() {
        let dir = tempfile_dir();
        let cache = CodeCache::open(&dir, MAX_CACHE_BYTES).unwrap();
        let bytes = wat::parse_str(EMPTY).unwrap();
        cache
            .component(&engine(), &bytes, &ComponentDigest::of(&bytes))
            .unwrap();
        assert_eq!((cache.hits(), cache.misses()), (0, 1));
        cache
            .component(&engine(), &bytes, &ComponentDigest::of(&bytes))
            .unwrap();
        assert_eq!((cache.hits(), cache.misses()), (1, 1));

        // One byte of the code changed: not loaded, compiled and replaced.
        let entry = dir
            .join("code")
            .join(entry_name(&engine(), &ComponentDigest::of(&bytes)));
        let mut code = fs::read(&entry).unwrap();
        let last = code.len() - 1;
        code[last] ^= 1;
        fs::write(&entry, &code).unwrap();
        let again = CodeCache::open(&dir, MAX_CACHE_BYTES).unwrap();
        again
            .component(&engine(), &bytes, &ComponentDigest::of(&bytes))
            .unwrap();
        assert_eq!((again.hits(), again.misses()), (0, 1));
        again
            .component(&engine(), &bytes, &ComponentDigest::of(&bytes))
            .unwrap();
        assert_eq!(again.hits(), 1, "the replaced entry is authentic");
    }

    #[test]
    fn past_its_size_the_entries_used_longest_ago_go() {
        let dir = tempfile_dir();
        // Two components alike but for their names: entries of one size.
        let one = wat::parse_str("(component $one)").unwrap();
        let other = wat::parse_str("(component $two)").unwrap();
        let entry = |bytes: &[u8]| {
            dir.join("code")
                .join(entry_name(&engine(), &ComponentDigest::of(bytes)))
        };
        let roomy = CodeCache::open(&dir, MAX_CACHE_BYTES).unwrap();
        roomy
            .component(&engine(), &one, &ComponentDigest::of(&one))
            .unwrap();
        let size = fs::metadata(entry(&one)).unwrap().len();
        // Room for one entry of this size and not two: the second one's
        // write removes the first.
        let tight = CodeCache::open(&dir, size + size / 2).unwrap();
        tight
            .component(&engine(), &other, &ComponentDigest::of(&other))
            .unwrap();
        assert!(entry(&other).exists(), "the newest entry is kept");
        assert!(!entry(&one).exists(), "the older entry went");
        assert!(dir.join(EVICTED).exists(), "and when is noted");
    }

    #[test]
    fn an_authentic_entry_under_another_name_is_not_loaded() {
        let dir = tempfile_dir();
        let cache = CodeCache::open(&dir, MAX_CACHE_BYTES).unwrap();
        let one = wat::parse_str(EMPTY).unwrap();
        let other = wat::parse_str("(component (core module))").unwrap();
        cache
            .component(&engine(), &one, &ComponentDigest::of(&one))
            .unwrap();
        let code = dir.join("code");
        fs::copy(
            code.join(entry_name(&engine(), &ComponentDigest::of(&one))),
            code.join(entry_name(&engine(), &ComponentDigest::of(&other))),
        )
        .unwrap();
        let name = entry_name(&engine(), &ComponentDigest::of(&other));
        assert!(matches!(
            cache.read(&code.join(&name), &name),
            Err(EntryRefused::Forged)
        ));
    }

    #[test]
    fn a_directory_others_may_write_is_not_used() {
        let dir = tempfile_dir();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let refused = CodeCache::open(&dir, MAX_CACHE_BYTES).unwrap_err();
        assert!(
            matches!(&refused, CacheRefused::Writable { mode: 0o777, .. }),
            "{refused}"
        );
        // Above it, a sticky directory others may write (as /tmp) is fine.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        let inside = dir.join("cache");
        CodeCache::open(&inside, MAX_CACHE_BYTES).unwrap();
        // The key must be private.
        fs::set_permissions(inside.join("key"), fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            CodeCache::open(&inside, MAX_CACHE_BYTES),
            Err(CacheRefused::Key { mode: 0o644, .. })
        ));
    }

    /// A new directory under the system's temporary directory.
    fn tempfile_dir() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("moat-cache-test-{}", random_suffix().unwrap()));
        fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        dir
    }
}
