//! The run's own listeners: a connect to one of them is the program
//! talking to itself, and needs no connect grant.
//!
//! Programs connect to themselves as a matter of course: CPython's
//! `socket.socketpair()` has no Unix sockets on WASI, so it listens on
//! `127.0.0.1:0` and connects to the port it got, and every `asyncio`
//! program makes such a pair at start. The port changes every run, so no
//! grant of one port can name it, and a grant of all of `127.0.0.1` would
//! let the program reach every local service. So a connect whose
//! destination is a listener the same run holds is admitted by the listen
//! grant that let the listener be made, and audited as such.
//!
//! What makes the destination the program's own:
//!
//! - **Loopback only.** The connect names a loopback address (`127.0.0.0/8`,
//!   `::1`) and a port on which the run holds a listener bound to that
//!   address, or to the unspecified address of its family (`0.0.0.0`,
//!   `::`), which takes loopback connections too. A loopback address never
//!   leaves the machine. A connect to any other address of the run's own
//!   listener (a LAN address of this machine) needs its grant as before:
//!   whether an address is this machine's is not the host's to guess.
//! - **Held at the moment of the connect.** A listener is registered once
//!   it listens and unregistered before its socket closes, and the connect
//!   is judged immediately before its syscall. While the run's socket
//!   listens on that address and port, no other socket can (moat's TCP
//!   listeners and wasmtime-wasi's never set `SO_REUSEPORT`, and Linux
//!   refuses a second listen on an address and port a listening socket
//!   covers, `SO_REUSEADDR` or not), so the connection is queued on the
//!   program's own listener, and the peer its accept returns is the
//!   program's own socket.
//! - **Any port.** The port need not be ephemeral: whatever port the
//!   listen grant let the listener take, a connection to it reaches only
//!   the program.
//!
//! Deny entries of the connect capability do not apply to such a connect
//! (`--deny-net=private` names loopback, and a program's own pair is not
//! the network it protects); the listen grant and `--deny-listen` judged
//! the listener itself.
//!
//! The registry holds one entry per listening socket, each of which holds
//! a place in the run's socket count, so `--max-sockets` bounds it.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use moat_policy::policy::Provenance;

/// How many closed listeners' addresses a run remembers, newest first, so
/// that a denied connect to one can say whose port it was: 64 covers a
/// program that opens and closes a socket pair now and then (CPython's
/// `socketpair()` closes its listener at once) many times over, at a few
/// KiB.
pub(crate) const CLOSED_REMEMBERED: usize = 64;

/// The listeners one run holds, by local address, and the last closed.
#[derive(Debug, Default)]
pub(crate) struct OwnListeners {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    open: HashMap<SocketAddr, Entry>,
    closed: VecDeque<SocketAddr>,
}

/// A listener of the run's on the port a connect named, reached through
/// an address that does not make it the program's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OnPort {
    /// The listener's local address.
    pub(crate) local: SocketAddr,
    /// Whether it still listens (or was closed since).
    pub(crate) open: bool,
}

#[derive(Debug)]
struct Entry {
    /// Listening sockets at the address: one, but for the moment between a
    /// listener closing and a new one on the same port registering.
    count: usize,
    /// The listen grant entry that allowed the (latest) listener.
    rule: Arc<Provenance>,
}

/// One registered listener; dropping it unregisters it. Its holder drops
/// it before (or as) the listening socket closes.
#[derive(Debug)]
pub(crate) struct OwnListener {
    registry: Arc<OwnListeners>,
    local: SocketAddr,
}

/// `addr` with its IP in canonical form (`::ffff:127.0.0.1` is
/// `127.0.0.1`).
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

impl OwnListeners {
    /// Registers a socket now listening on `local`, allowed by `rule`;
    /// `None` (nothing registered) for port 0, which no socket listens on.
    pub(crate) fn register(
        self: &Arc<Self>,
        local: SocketAddr,
        rule: Arc<Provenance>,
    ) -> Option<OwnListener> {
        let local = canonical(local);
        if local.port() == 0 {
            return None;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.open
            .entry(local)
            .and_modify(|entry| {
                entry.count += 1;
                entry.rule = Arc::clone(&rule);
            })
            .or_insert(Entry { count: 1, rule });
        tracing::debug!(target: "moat::net", %local, "listening: the program's own");
        Some(OwnListener {
            registry: Arc::clone(self),
            local,
        })
    }

    /// The listen grant entry of the run's own listener that a connect to
    /// `destination` reaches, if `destination` is a loopback address and
    /// the run listens there (or on the unspecified address of its family)
    /// on that port.
    pub(crate) fn rule_for(&self, destination: SocketAddr) -> Option<Arc<Provenance>> {
        let destination = canonical(destination);
        if !destination.ip().is_loopback() {
            return None;
        }
        let every_interface = match destination.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.open
            .get(&destination)
            .or_else(|| {
                held.open
                    .get(&SocketAddr::new(every_interface, destination.port()))
            })
            .map(|entry| Arc::clone(&entry.rule))
    }

    /// A listener of the run's, open or among the last
    /// [`CLOSED_REMEMBERED`] closed, that a connect to `destination` was
    /// most likely meant for: on its port, and through a loopback address
    /// or the listener's own. A denied connect there names the program's
    /// own listener rather than a port to grant.
    pub(crate) fn meant(&self, destination: SocketAddr) -> Option<OnPort> {
        let destination = canonical(destination);
        let meant = |local: &&SocketAddr| {
            local.port() == destination.port()
                && (destination.ip().is_loopback() || local.ip() == destination.ip())
        };
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let open = held.open.keys().find(meant);
        let closed = || held.closed.iter().find(meant);
        match open {
            Some(&local) => Some(OnPort { local, open: true }),
            None => closed().map(|&local| OnPort { local, open: false }),
        }
    }
}

impl Drop for OwnListener {
    fn drop(&mut self) {
        let mut held = self
            .registry
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = held.open.get_mut(&self.local) {
            entry.count -= 1;
            if entry.count == 0 {
                held.open.remove(&self.local);
                if held.closed.len() == CLOSED_REMEMBERED {
                    held.closed.pop_back();
                }
                held.closed.push_front(self.local);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_policy::policy::Source;

    fn rule(entry: &str) -> Arc<Provenance> {
        Arc::new(Provenance {
            entry: entry.into(),
            source: Source::Flag {
                flag: "--allow-listen".into(),
            },
        })
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_loopback_listener_is_the_programs_own_until_dropped() {
        let own = Arc::new(OwnListeners::default());
        let listener = own.register(addr("127.0.0.1:41391"), rule("127.0.0.1:0"));
        assert!(listener.is_some());
        assert_eq!(
            own.rule_for(addr("127.0.0.1:41391")).unwrap().entry,
            "127.0.0.1:0"
        );
        // However the program writes the address.
        assert!(own.rule_for(addr("[::ffff:127.0.0.1]:41391")).is_some());
        // Another port, another loopback address: not its own.
        assert!(own.rule_for(addr("127.0.0.1:41392")).is_none());
        assert!(own.rule_for(addr("127.0.0.2:41391")).is_none());
        drop(listener);
        assert!(own.rule_for(addr("127.0.0.1:41391")).is_none());
    }

    #[test]
    fn a_listener_on_every_interface_is_reached_through_loopback_only() {
        let own = Arc::new(OwnListeners::default());
        assert!(own.register(addr("127.0.0.1:0"), rule("*")).is_none());
        let any = own.register(addr("0.0.0.0:7000"), rule("0.0.0.0:7000"));
        let lan = own.register(addr("10.0.0.5:7001"), rule("10.0.0.5:7001"));
        let v6 = own.register(addr("[::1]:7002"), rule("[::1]:7002"));
        assert!(any.is_some() && lan.is_some() && v6.is_some());
        assert!(own.rule_for(addr("127.0.0.1:7000")).is_some());
        assert!(own.rule_for(addr("127.0.0.9:7000")).is_some());
        // Not through another address of the machine's.
        assert!(own.rule_for(addr("10.0.0.5:7000")).is_none());
        assert!(own.rule_for(addr("10.0.0.5:7001")).is_none());
        assert!(own.rule_for(addr("127.0.0.1:7001")).is_none());
        // Nor across families.
        assert!(own.rule_for(addr("[::1]:7000")).is_none());
        assert!(own.rule_for(addr("127.0.0.1:7002")).is_none());
        assert!(own.rule_for(addr("[::1]:7002")).is_some());
        let meant = |to: &str| own.meant(addr(to)).map(|on| (on.local, on.open));
        assert_eq!(meant("10.0.0.5:7001"), Some((addr("10.0.0.5:7001"), true)));
        assert_eq!(meant("127.0.0.1:7001"), Some((addr("10.0.0.5:7001"), true)));
        assert_eq!(meant("127.0.0.1:7003"), None);
        // Another host on the same port is not the listener.
        assert_eq!(meant("192.0.2.7:7001"), None);
        drop(lan);
        assert_eq!(meant("10.0.0.5:7001"), Some((addr("10.0.0.5:7001"), false)));
    }

    #[test]
    fn two_registrations_of_one_address_need_two_drops() {
        let own = Arc::new(OwnListeners::default());
        let first = own.register(addr("127.0.0.1:9000"), rule("a"));
        let second = own.register(addr("127.0.0.1:9000"), rule("b"));
        drop(first);
        assert_eq!(own.rule_for(addr("127.0.0.1:9000")).unwrap().entry, "b");
        drop(second);
        assert!(own.rule_for(addr("127.0.0.1:9000")).is_none());
    }

    #[test]
    fn the_last_closed_listeners_are_remembered_within_the_bound() {
        let own = Arc::new(OwnListeners::default());
        let total = CLOSED_REMEMBERED + 10;
        for port in 1..=total {
            drop(own.register(SocketAddr::from(([127, 0, 0, 1], port as u16)), rule("*")));
        }
        assert_eq!(own.held.lock().unwrap().closed.len(), CLOSED_REMEMBERED);
        let at = |port: usize| SocketAddr::from(([127, 0, 0, 1], port as u16));
        assert!(own.meant(at(1)).is_none(), "the oldest is forgotten");
        let newest = own.meant(at(total)).unwrap();
        assert!(!newest.open);
    }
}
