//! `moat serve`'s reloads: on SIGHUP, and with `--watch` on each settled
//! change of the component's file, the component is loaded again and put
//! in the serving handler's place ([`super::Reloader`]); what became of it
//! goes to stderr, to the metrics (`moat_reloads_total`) and to the trail.
//! A component that does not load, or is not a handler the server can run,
//! leaves the old one serving.
//!
//! The load (a compile, for a component not in the cache: seconds to tens
//! of seconds) runs on a blocking thread of its own, never on the task
//! that accepts connections: the old handler answers every connection,
//! old and new, until the new one is in place. A SIGHUP or change while a
//! load is under way is not lost and does not start a second one beside
//! it: however many come, one more load follows the current one (the file
//! may have changed since it was read), and stderr says so.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::JoinHandle;

use super::{Reloader, Server};
use crate::error::MoatError;
use crate::moat::Guest;

/// How often `moat serve --watch` looks at its component's file: a second,
/// so that a deployment's copy is picked up at once, for one `stat` a
/// second.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// What loads the component again: called on a blocking thread.
pub(crate) type Load = Arc<dyn Fn() -> Result<Guest, MoatError> + Send + Sync>;

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

/// A load under way, and whether another was asked for since it began.
struct Loading {
    task: JoinHandle<Result<Guest, MoatError>>,
    began: Instant,
    again: bool,
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
        load: Load,
    ) -> Result<(), MoatError> {
        let reloader = server.reloader();
        let mut serving = std::pin::pin!(server.serve(stop));
        let mut loading: Option<Loading> = None;
        loop {
            let why = tokio::select! {
                served = &mut serving => return served,
                Some(()) = next_hangup(&mut self.hangups) => "SIGHUP".to_owned(),
                () = next_change(&mut self.watched, &self.name) => format!("{} changed", self.name.display()),
                loaded = finished(&mut loading) => {
                    let (loaded, began, again) = loaded;
                    reloaded(&reloader, &self.name, loaded, began.elapsed());
                    if again {
                        loading = Some(start(&load, &self.name, "asked for again during the last load"));
                    }
                    continue;
                }
            };
            match &mut loading {
                Some(under_way) => {
                    under_way.again = true;
                    eprintln!(
                        "moat: {why}: a reload is under way; one more follows it (the old handler serves meanwhile)"
                    );
                }
                None => loading = Some(start(&load, &self.name, &why)),
            }
        }
    }
}

/// Starts loading the component on a blocking thread, saying why.
fn start(load: &Load, name: &Path, why: &str) -> Loading {
    eprintln!(
        "moat: {why}: loading {} again (the old handler serves meanwhile)",
        name.display()
    );
    let load = Arc::clone(load);
    Loading {
        task: tokio::task::spawn_blocking(move || load()),
        began: Instant::now(),
        again: false,
    }
}

/// The load under way, once it ends (with when it began and whether
/// another was asked for); never, without one.
async fn finished(loading: &mut Option<Loading>) -> (Result<Guest, MoatError>, Instant, bool) {
    let Some(under_way) = loading else {
        return std::future::pending().await;
    };
    let joined = (&mut under_way.task).await;
    let (began, again) = (under_way.began, under_way.again);
    *loading = None;
    let loaded = joined.unwrap_or_else(|e| {
        Err(MoatError::Thread {
            what: "reload",
            source: std::io::Error::other(e),
        })
    });
    (loaded, began, again)
}

/// The next SIGHUP; never, without a listener.
async fn next_hangup(hangups: &mut Option<Signal>) -> Option<()> {
    match hangups {
        Some(signal) => signal.recv().await,
        None => std::future::pending().await,
    }
}

/// The next change of the watched file; never, without a watch.
async fn next_change(watched: &mut Option<Watched>, name: &Path) {
    match watched {
        Some(watched) => watched.changed(name).await,
        None => std::future::pending().await,
    }
}

/// Puts what the load gave in the serving handler's place; says on stderr,
/// in the metrics and on the trail what became of it.
fn reloaded(
    reloader: &Reloader<'_>,
    name: &Path,
    loaded: Result<Guest, MoatError>,
    took: Duration,
) {
    let replaced = match loaded {
        Ok(guest) => reloader.reload(&guest, &name.display().to_string()),
        Err(e) => {
            reloader.load_failed(&name.display().to_string(), &e);
            Err(e)
        }
    };
    match replaced {
        Ok(()) => eprintln!(
            "moat: reloaded {} in {:.1} s: new requests go to it, requests in flight finish on the old one",
            name.display(),
            took.as_secs_f64()
        ),
        Err(e) => {
            eprintln!("moat: reload failed, still serving the handler it had: {e}");
        }
    }
}

/// A file `moat serve --watch` looks at: what it was when last seen.
struct Watched {
    path: PathBuf,
    seen: Option<FileState>,
    /// Whether stderr was told the file is gone (told again only after
    /// it came back).
    gone: bool,
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
            gone: false,
        }
    }

    /// Resolves once the file is other than it was and has stayed so for
    /// one more look (a copy still being written is not loaded half way).
    /// A file gone for a look (a deployment between its delete and its
    /// copy, or an operator's mistake) is said once on stderr, as `name`.
    async fn changed(&mut self, name: &Path) {
        loop {
            tokio::time::sleep(WATCH_INTERVAL).await;
            let now = FileState::of(&self.path);
            if now.is_none() {
                if !self.gone {
                    self.gone = true;
                    eprintln!(
                        "moat: {} is gone: still serving the handler it had; loading it again once it is back",
                        name.display()
                    );
                }
                continue;
            }
            self.gone = false;
            if now == self.seen {
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
