//! `moat serve`'s reloads: on SIGHUP, and with `--watch` on each settled
//! change of the component's file, the component is loaded again and put
//! in the serving handler's place ([`super::Reloader`]); what became of it
//! goes to stderr. A component that does not load, or is not a handler the
//! server can run, leaves the old one serving.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use super::{Reloader, Server};
use crate::error::MoatError;
use crate::moat::Guest;

/// How often `moat serve --watch` looks at its component's file: a second,
/// so that a deployment's copy is picked up at once, for one `stat` a
/// second.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// What makes a server load its component again.
pub(crate) struct Reloads {
    /// The component's file, as messages name it.
    name: PathBuf,
    /// SIGHUP, taken over (so that it no longer ends the process); `None`
    /// if the process cannot listen for it.
    hangups: Option<Signal>,
    /// The file, with `--watch`.
    watched: Option<Watched>,
}

impl Reloads {
    /// Takes SIGHUP over now (before the line a supervisor waits for, so
    /// that a SIGHUP sent after it never ends the process), and with
    /// `watch` notes what `name`'s file is now.
    pub(crate) fn listen(name: &Path, watch: bool) -> Reloads {
        Reloads {
            name: name.to_owned(),
            hangups: signal(SignalKind::hangup()).ok(),
            watched: watch.then(|| Watched::new(name)),
        }
    }

    /// Serves with `server` until `stop`, loading the component again with
    /// `load` at each SIGHUP or change.
    ///
    /// # Errors
    /// The server's, as [`Server::serve`]'s.
    pub(crate) async fn serve(
        mut self,
        server: Server<'_>,
        stop: impl Future<Output = ()>,
        load: &dyn Fn() -> Result<Guest, MoatError>,
    ) -> Result<(), MoatError> {
        let reloader = server.reloader();
        let mut serving = std::pin::pin!(server.serve(stop));
        loop {
            tokio::select! {
                served = &mut serving => return served,
                Some(()) = next_hangup(&mut self.hangups) => {
                    eprintln!("moat: SIGHUP: loading {} again", self.name.display());
                    reload(&reloader, &self.name, load);
                }
                () = next_change(&mut self.watched) => {
                    eprintln!("moat: {} changed: loading it again", self.name.display());
                    reload(&reloader, &self.name, load);
                }
            }
        }
    }
}

/// The next SIGHUP; never, without a listener.
async fn next_hangup(hangups: &mut Option<Signal>) -> Option<()> {
    match hangups {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}

/// The next change of the watched file; never, without a watch.
async fn next_change(watched: &mut Option<Watched>) {
    match watched {
        Some(watched) => watched.changed().await,
        None => std::future::pending().await,
    }
}

/// Loads the component with `load` and puts it in the serving handler's
/// place; says on stderr what became of it.
fn reload(reloader: &Reloader<'_>, name: &Path, load: &dyn Fn() -> Result<Guest, MoatError>) {
    // Compiling takes a while: off the runtime's worker, so that the
    // requests on it go on being served meanwhile.
    let loaded = match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(load),
        _ => load(),
    };
    let replaced = loaded.and_then(|guest| reloader.reload(&guest, &name.display().to_string()));
    match replaced {
        Ok(()) => eprintln!(
            "moat: reloaded {}: new requests go to it, requests in flight finish on the old one",
            name.display()
        ),
        Err(e) => eprintln!("moat: reload failed, still serving the handler it had: {e}"),
    }
}

/// A file `moat serve --watch` looks at: what it was when last seen.
struct Watched {
    path: PathBuf,
    seen: Option<FileState>,
}

/// What tells a file's new version from its old: its identity (a
/// deployment's rename puts a new inode there), size and time of change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileState {
    inode: u64,
    len: u64,
    changed: Option<std::time::SystemTime>,
}

impl FileState {
    fn of(path: &Path) -> Option<FileState> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileState {
            inode: meta.ino(),
            len: meta.len(),
            changed: meta.modified().ok(),
        })
    }
}

impl Watched {
    fn new(path: &Path) -> Watched {
        Watched {
            path: path.to_owned(),
            seen: FileState::of(path),
        }
    }

    /// Resolves once the file is other than it was and has stayed so for
    /// one more look (a copy still being written is not loaded half way).
    async fn changed(&mut self) {
        loop {
            tokio::time::sleep(WATCH_INTERVAL).await;
            let now = FileState::of(&self.path);
            if now.is_none() || now == self.seen {
                // Gone (being replaced), or as it was.
                continue;
            }
            tokio::time::sleep(WATCH_INTERVAL).await;
            let settled = FileState::of(&self.path);
            if settled == now {
                self.seen = settled;
                return;
            }
        }
    }
}
