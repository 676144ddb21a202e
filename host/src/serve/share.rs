//! Each client address's share of `moat serve`'s handler instances
//! (`--max-instances-per-client`): one address (an IPv4 address, an IPv6
//! /64) holds at most that many at once, whatever it does (slow bodies,
//! unread responses, many HTTP/2 streams), so the rest of the server stays
//! free for the others. A request past its address's share waits for one
//! of that address's own, in that address's own queue, never ahead of
//! other clients' requests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::net::limits::peer_of;

/// The shares of every address with a request waiting or running.
pub(super) struct Shares {
    per_client: u32,
    held: Mutex<HashMap<IpAddr, Arc<Semaphore>>>,
}

/// One request's place in its address's share; given back when dropped
/// (and the address forgotten once it holds none).
pub(super) struct ClientShare {
    permit: Option<OwnedSemaphorePermit>,
    client: IpAddr,
    shares: Arc<Shares>,
}

impl Shares {
    pub(super) fn new(per_client: u32) -> Arc<Shares> {
        Arc::new(Shares {
            per_client: per_client.max(1),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// A place in `peer`'s share, waiting while the address holds all of
    /// it. Cancel safe: a wait that is dropped holds nothing.
    pub(super) async fn take(self: &Arc<Self>, peer: IpAddr) -> ClientShare {
        let client = peer_of(peer);
        let semaphore = {
            let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(
                held.entry(client)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.per_client as usize))),
            )
        };
        // Made before the wait, so that a wait dropped half way forgets
        // the address as a finished request does (the wait, and its
        // clone of the semaphore, goes first).
        let mut share = ClientShare {
            permit: None,
            client,
            shares: Arc::clone(self),
        };
        share.permit = semaphore.acquire_owned().await.ok();
        share
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

impl Drop for ClientShare {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut held = self
            .shares
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Nobody else holds or waits on the address's semaphore: forget it.
        if let Some(semaphore) = held.get(&self.client)
            && Arc::strong_count(semaphore) == 1
        {
            held.remove(&self.client);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn an_address_holds_its_share_and_no_more_and_is_forgotten_after() {
        let shares = Shares::new(2);
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let a = shares.take(one).await;
        // Another address of the same IPv6 /64 is the same client; an IPv4
        // address in mapped form is that address.
        let _b = shares.take("::ffff:10.0.0.1".parse().unwrap()).await;
        let third = tokio::time::timeout(Duration::from_millis(50), shares.take(one)).await;
        assert!(third.is_err(), "past its share, a request waits");
        let _other = shares.take("10.0.0.2".parse().unwrap()).await;
        drop(a);
        let _c = tokio::time::timeout(Duration::from_secs(5), shares.take(one))
            .await
            .expect("a place given back is taken");
        drop(_other);
        assert_eq!(shares.clients(), 1);
    }
}
