//! Kept-alive connections of one run, by scheme, host and port.
//!
//! An HTTP/1.1 connection goes back in as soon as its response's head
//! arrived; it is busy until that body ends, and [`Pool::checkout`] hands
//! out only the ones hyper says are ready for a request. An HTTP/2
//! connection stays in and is shared by the requests that find it ready
//! (it multiplexes them; the run's bound on requests in flight holds for
//! all of them). Closed ones are dropped when
//! met. Bounded: [`POOL_MAX_PER_AUTHORITY`] per authority; idle ones close
//! after [`POOL_IDLE_TIMEOUT`] (a sweep runs while the pool holds any),
//! and give way when the run is at its socket cap.
//!
//! Keyed by the host as the policy judges it (a name in lower case,
//! without a trailing dot; an IP address in its one canonical form) and
//! the port, explicit or the scheme's: `example.com`, `EXAMPLE.com.` and
//! `example.com:80` share connections and the per-authority bound, since
//! they were judged as one destination; a name never shares a connection
//! with the address it resolved to. (User information never reaches the
//! pool: such a request is refused.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use hyper::client::conn::{http1, http2};
use tokio::time::Instant;

use super::exchange::Made;
use super::{POOL_IDLE_TIMEOUT, POOL_MAX_PER_AUTHORITY};
use tokio_util::sync::CancellationToken;

use crate::net::tasks::Tasks;
use moat_policy::policy::Host;

/// Which connections may carry a request: the scheme, and the host and
/// port as judged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    https: bool,
    host: Host,
    port: u16,
}

impl Key {
    pub(crate) fn new(https: bool, host: &Host, port: u16) -> Key {
        Key {
            https,
            host: host.clone(),
            port,
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}:{}", self.host, self.port)
    }
}

/// A connection's handle: HTTP/1.1 carries one request at a time, HTTP/2
/// many (its handle is shared while it stays in the pool).
pub(crate) enum Sender<B> {
    H1(http1::SendRequest<B>),
    H2(http2::SendRequest<B>),
}

impl<B> Sender<B> {
    pub(crate) fn is_ready(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_ready(),
            Sender::H2(s) => s.is_ready(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
        }
    }

    fn shared(&self) -> Option<Sender<B>> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
        }
    }
}

struct Kept<B> {
    sender: Sender<B>,
    /// The connection, as the requests on it record it.
    made: Arc<Made>,
    /// When it was put back (its last request's head arrived).
    since: Instant,
}

struct State<B> {
    kept: HashMap<Key, Vec<Kept<B>>>,
    /// Whether a sweep task is running.
    sweeping: bool,
}

/// The run's kept-alive connections.
pub(crate) struct Pool<B> {
    state: Arc<Mutex<State<B>>>,
}

impl<B: Send + 'static> Pool<B> {
    pub(crate) fn new() -> Pool<B> {
        Pool {
            state: Arc::new(Mutex::new(State {
                kept: HashMap::new(),
                sweeping: false,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection for `key` that is ready for a request now, if one is
    /// kept: an HTTP/1.1 one is taken out ([`put`](Self::put) it back
    /// after its response), an HTTP/2 one is shared and stays.
    pub(crate) fn checkout(&self, key: &Key) -> Option<(Sender<B>, Arc<Made>)> {
        let mut state = self.lock();
        let list = state.kept.get_mut(key)?;
        let now = Instant::now();
        list.retain(|k| !k.sender.is_closed() && !expired(k, now));
        let ready = list.iter().position(|k| k.sender.is_ready());
        let found = ready.map(|i| match list[i].sender.shared() {
            Some(shared) => {
                list[i].since = now;
                (shared, Arc::clone(&list[i].made))
            }
            None => {
                let kept = list.swap_remove(i);
                (kept.sender, kept.made)
            }
        });
        if list.is_empty() {
            state.kept.remove(key);
        }
        if found.is_some() {
            tracing::debug!(target: "moat::http", destination = %key, "reusing a kept-alive connection");
        }
        found
    }

    /// Keeps `sender` for `key`, unless that authority has its share
    /// already (then it closes once its response ends).
    pub(crate) fn put(
        &self,
        key: Key,
        sender: Sender<B>,
        made: Arc<Made>,
        tasks: &Tasks,
        closing: &CancellationToken,
        fresh: bool,
    ) {
        if sender.is_closed() {
            return;
        }
        // A shared HTTP/2 handle is in the pool already, unless its
        // connection is new.
        if matches!(sender, Sender::H2(_)) && !fresh {
            return;
        }
        let start_sweep = {
            let mut state = self.lock();
            let list = state.kept.entry(key).or_default();
            if list.len() >= POOL_MAX_PER_AUTHORITY {
                return;
            }
            list.push(Kept {
                sender,
                made,
                since: Instant::now(),
            });
            !std::mem::replace(&mut state.sweeping, true)
        };
        if start_sweep {
            let state = Arc::downgrade(&self.state);
            let closing = closing.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = closing.cancelled() => {}
                    () = sweep(state) => {}
                }
            });
        }
    }

    /// Closes the idle connection kept longest, to make room under the
    /// socket cap. Whether there was one.
    pub(crate) fn close_oldest_idle(&self) -> bool {
        let mut state = self.lock();
        let oldest = state
            .kept
            .iter()
            .flat_map(|(key, list)| {
                list.iter()
                    .enumerate()
                    .filter(|(_, k)| k.sender.is_ready())
                    .map(move |(i, k)| (k.since, key.clone(), i))
            })
            .min_by_key(|(since, _, _)| *since);
        let Some((_, key, i)) = oldest else {
            return false;
        };
        if let Some(list) = state.kept.get_mut(&key) {
            // Dropping the last handle of an idle HTTP/1 connection closes
            // it, and its driver gives the socket slot back.
            drop(list.swap_remove(i));
            if list.is_empty() {
                state.kept.remove(&key);
            }
        }
        tracing::debug!(target: "moat::http", destination = %key, "closed an idle connection for a new one");
        true
    }
}

fn expired<B>(kept: &Kept<B>, now: Instant) -> bool {
    now.duration_since(kept.since) >= POOL_IDLE_TIMEOUT
}

/// Closes expired and closed connections every [`POOL_IDLE_TIMEOUT`] while
/// any is kept; ends when the pool is empty or gone.
async fn sweep<B>(state: Weak<Mutex<State<B>>>) {
    loop {
        tokio::time::sleep(POOL_IDLE_TIMEOUT / 2).await;
        let Some(state) = state.upgrade() else { return };
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        state.kept.retain(|_, list| {
            list.retain(|k| !k.sender.is_closed() && !(k.sender.is_ready() && expired(k, now)));
            !list.is_empty()
        });
        if state.kept.is_empty() {
            state.sweeping = false;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper_util::rt::TokioIo;

    use super::*;
    use crate::net::tasks::PendingWrites;

    /// A sender over an in-memory pipe whose far end nobody reads: ready,
    /// never used.
    async fn sender() -> Sender<Empty<Bytes>> {
        let (near, far) = tokio::io::duplex(1024);
        std::mem::forget(far);
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(near))
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.ready().await.unwrap();
        Sender::H1(sender)
    }

    fn made() -> Arc<Made> {
        Arc::new(Made {
            id: 1,
            protocol: "HTTP/1.1",
            resolved: Vec::new(),
            address: "127.0.0.1:80".parse().unwrap(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_kept_for_its_authority_until_it_expires() {
        let pool = Pool::new();
        let tasks = Tasks::new(PendingWrites::new());
        let closing = CancellationToken::new();
        let name = Host::parse("example.com").unwrap();
        let key = Key::new(false, &name, 80);
        pool.put(key.clone(), sender().await, made(), &tasks, &closing, true);
        assert!(
            pool.checkout(&Key::new(true, &name, 80)).is_none(),
            "not for https"
        );
        assert!(
            pool.checkout(&Key::new(false, &name, 8080)).is_none(),
            "nor on another port"
        );
        let shared = pool
            .checkout(&Key::new(false, &Host::parse("EXAMPLE.com.").unwrap(), 80))
            .expect("another spelling of the same host and port");
        pool.put(key.clone(), shared.0, shared.1, &tasks, &closing, false);
        let again = pool.checkout(&key).expect("reused");
        pool.put(key.clone(), again.0, again.1, &tasks, &closing, false);
        tokio::time::advance(POOL_IDLE_TIMEOUT + Duration::from_secs(1)).await;
        assert!(
            pool.checkout(&key).is_none(),
            "expired after the idle timeout"
        );
    }

    #[tokio::test]
    async fn an_authority_keeps_its_share_and_no_more_and_the_oldest_idle_gives_way() {
        let pool = Pool::new();
        let tasks = Tasks::new(PendingWrites::new());
        let closing = CancellationToken::new();
        let key = Key::new(false, &Host::parse("example.com").unwrap(), 80);
        for _ in 0..POOL_MAX_PER_AUTHORITY + 3 {
            pool.put(key.clone(), sender().await, made(), &tasks, &closing, true);
        }
        let mut taken = Vec::new();
        while let Some(sender) = pool.checkout(&key) {
            taken.push(sender);
        }
        assert_eq!(taken.len(), POOL_MAX_PER_AUTHORITY);
        for (sender, made) in taken {
            pool.put(key.clone(), sender, made, &tasks, &closing, false);
        }
        let mut closed = 0;
        while pool.close_oldest_idle() {
            closed += 1;
        }
        assert_eq!(closed, POOL_MAX_PER_AUTHORITY);
        assert!(pool.checkout(&key).is_none());
    }
}
