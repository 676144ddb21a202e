//! Each client address's share of `moat serve`'s handler instances
//! (`--max-instances-per-client`): one address (an IPv4 address, an IPv6
//! /64) holds at most that many at once, whatever it does (slow bodies,
//! unread responses, many HTTP/2 streams), so the rest of the server stays
//! free for the others. A request past its address's share waits for one
//! of that address's own, in that address's own queue, never ahead of
//! other clients' requests; the queue holds `--max-waiting-per-client`,
//! and a request past it is refused at once (before, it held its place, and the
//! server's, for a whole `--timeout`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::net::Limits;
use crate::net::limits::peer_of;

/// The shares of every address with a request waiting or running.
pub(super) struct Shares {
    per_client: u32,
    /// Requests of one address that may wait for its share.
    queue: u32,
    held: Mutex<HashMap<IpAddr, Arc<Place>>>,
}

/// One address's share: its places, and how many of its requests wait.
struct Place {
    share: Arc<Semaphore>,
    waiting: AtomicU32,
}

/// A request past its address's share and its queue.
#[derive(Debug)]
pub(super) struct QueueFull;

/// One request's place in its address's share; given back when dropped
/// (and the address forgotten once it holds none).
pub(super) struct ClientShare {
    permit: Option<OwnedSemaphorePermit>,
    client: IpAddr,
    shares: Arc<Shares>,
}

impl Shares {
    pub(super) fn new(per_client: u32, queue: u32) -> Arc<Shares> {
        Arc::new(Shares {
            per_client: per_client.max(1),
            queue,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A place in `peer`'s share, waiting while the address holds all of
    /// it, unless `--max-waiting-per-client` of its requests wait already:
    /// then [`QueueFull`] at once. Cancel safe: a wait that is dropped holds
    /// nothing.
    pub(super) async fn take(self: &Arc<Self>, peer: IpAddr) -> Result<ClientShare, QueueFull> {
        let client = peer_of(peer);
        let place = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(held.entry(client).or_insert_with(|| {
                Arc::new(Place {
                    share: Arc::new(Semaphore::new(self.per_client as usize)),
                    waiting: AtomicU32::new(0),
                })
            }))
        };
        // Made before the wait, so that a wait dropped half way forgets
        // the address as a finished request does (the wait, and its
        // clone of the place, goes first).
        let mut share = ClientShare {
            permit: None,
            client,
            shares: Arc::clone(self),
        };
        if let Ok(permit) = Arc::clone(&place.share).try_acquire_owned() {
            share.permit = Some(permit);
            return Ok(share);
        }
        if place.waiting.fetch_add(1, Ordering::AcqRel) >= self.queue {
            place.waiting.fetch_sub(1, Ordering::AcqRel);
            drop(place);
            return Err(QueueFull);
        }
        let waiting = Waiting(&place);
        share.permit = Arc::clone(&place.share).acquire_owned().await.ok();
        drop(waiting);
        drop(place);
        Ok(share)
    }

    /// Requests of `peer`'s address waiting (for tests).
    #[cfg(test)]
    fn waiting(&self, peer: IpAddr) -> u32 {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&peer_of(peer))
            .map_or(0, |place| place.waiting.load(Ordering::Acquire))
    }

    /// Addresses with a request waiting or running (for tests).
    #[cfg(test)]
    fn clients(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One request counted among its address's waiting, until it stops
/// waiting (its place taken, or its wait dropped).
struct Waiting<'a>(&'a Place);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut held = self
            .shares
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Nobody else holds (a permit keeps a clone of the semaphore) or
        // waits on (a wait keeps a clone of the place) the address's
        // place: forget it.
        if let Some(place) = held.get(&self.client)
            && Arc::strong_count(place) == 1
            && Arc::strong_count(&place.share) == 1
        {
            held.remove(&self.client);
        }
    }
}

/// The server-wide bound on requests being answered at once, of HTTP/1.1
/// and HTTP/2 alike: `--max-http-connections` of them. An HTTP/1.1
/// connection has at most one request at a time, so the bound only ever
/// refuses HTTP/2 streams past it (with a 503), which would otherwise let
/// each connection hold [`super::conn::H2_MAX_STREAMS`] requests' heads and bodies.
#[derive(Clone)]
pub(super) struct Requests(Arc<Semaphore>);

impl Requests {
    pub(super) fn new(limits: &Limits) -> Requests {
        Requests(Arc::new(Semaphore::new(
            limits.max_http_connections.max(1) as usize
        )))
    }

    pub(super) fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.0).try_acquire_owned().ok()
    }
}

/// The connections each client address holds open
/// (`--max-http-connections-per-client`): one address that opens many and
/// sends nothing holds that many of the server's, never all of them.
pub(super) struct Connections {
    per_client: u32,
    open: Mutex<HashMap<IpAddr, u32>>,
}

/// One connection counted against its address, until dropped.
pub(super) struct OpenConnection {
    client: IpAddr,
    connections: Arc<Connections>,
}

impl Connections {
    pub(super) fn new(per_client: u32) -> Arc<Connections> {
        Arc::new(Connections {
            per_client: per_client.max(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A connection from `peer` counted, or `None` if its address holds
    /// its share open already.
    pub(super) fn open(self: &Arc<Self>, peer: IpAddr) -> Option<OpenConnection> {
        let client = peer_of(peer);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(client).or_insert(0);
        if *count >= self.per_client {
            return None;
        }
        *count += 1;
        Some(OpenConnection {
            client,
            connections: Arc::clone(self),
        })
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_address_holds_its_share_and_no_more_and_is_forgotten_after() {
        let shares = Shares::new(2, 2);
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let a = shares.take(one).await.unwrap();
        // Another address of the same IPv6 /64 is the same client; an IPv4
        // address in mapped form is that address.
        let b = shares
            .take("::ffff:10.0.0.1".parse().unwrap())
            .await
            .unwrap();
        let third = tokio::time::timeout(Duration::from_millis(50), shares.take(one)).await;
        assert!(third.is_err(), "past its share, a request waits");
        let _other = shares.take("10.0.0.2".parse().unwrap()).await.unwrap();
        drop(a);
        let c = tokio::time::timeout(Duration::from_secs(5), shares.take(one))
            .await
            .expect("a place given back is taken")
            .unwrap();
        drop(_other);
        assert_eq!(shares.clients(), 1);
        // One running request ending does not forget an address whose
        // other request still runs: its share holds.
        drop(b);
        let d = shares.take(one).await.unwrap();
        let past = tokio::time::timeout(Duration::from_millis(50), shares.take(one)).await;
        assert!(past.is_err(), "c and d hold the share");
        drop((c, d));
        assert_eq!(shares.clients(), 0);
    }

    #[test]
    fn an_address_holds_its_connections_and_no_more() {
        let connections = Connections::new(2);
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let a = connections.open(one).unwrap();
        let _b = connections.open(one).unwrap();
        assert!(connections.open(one).is_none());
        assert!(connections.open("10.0.0.2".parse().unwrap()).is_some());
        drop(a);
        assert!(connections.open(one).is_some());
    }

    #[tokio::test]
    async fn past_its_share_and_as_many_waiting_a_request_is_refused_at_once() {
        let shares = Shares::new(2, 2);
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let _running = [
            shares.take(one).await.unwrap(),
            shares.take(one).await.unwrap(),
        ];
        let waiting: Vec<_> = (0..2)
            .map(|_| {
                let shares = Arc::clone(&shares);
                tokio::spawn(async move { shares.take(one).await.map(drop) })
            })
            .collect();
        while shares.waiting(one) < 2 {
            tokio::task::yield_now().await;
        }
        assert!(
            matches!(shares.take(one).await, Err(QueueFull)),
            "a fifth request past a share of two and two waiting"
        );
        assert!(shares.take("10.0.0.2".parse().unwrap()).await.is_ok());
        drop(waiting);
    }
}
