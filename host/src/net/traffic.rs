//! What a run's guest sent and received: bytes and datagrams by transport,
//! and the connections it opened and accepted.
//!
//! A fixed table of atomics per run (whatever the guest does, no count can
//! make the host keep more), added to where the bytes cross between the
//! guest and the host: what a write handed the host (sent into the kernel
//! or queued for it) and what a read handed the guest. Over TLS that is
//! the plaintext; over HTTP the bodies (`Transport::Http`: the request
//! bodies the guest sent and the response bodies it read; the connections
//! its client made count as TCP connections, their bytes as HTTP only).
//! These are the guest's figures, not the interface's: headers of the
//! HTTP exchange, TLS records, retransmissions and the kernel's own
//! traffic are not in them.

use std::sync::atomic::{AtomicU64, Ordering};

/// The transports the figures tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP streams: moat:net sockets (plain and TLS) and wasi:sockets TCP.
    Tcp,
    /// UDP datagrams: moat:net and wasi:sockets UDP.
    Udp,
    /// The bodies of outgoing wasi:http requests and their responses.
    Http,
}

impl Transport {
    /// Every transport, in the order of the table.
    pub const ALL: [Transport; 3] = [Transport::Tcp, Transport::Udp, Transport::Http];

    /// As metrics and records write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
            Transport::Http => "http",
        }
    }
}

/// Which way bytes went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the guest to a peer.
    Sent,
    /// From a peer to the guest.
    Received,
}

impl Direction {
    /// Both directions, in the order of the table.
    pub const ALL: [Direction; 2] = [Direction::Sent, Direction::Received];

    /// As metrics and records write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Sent => "sent",
            Direction::Received => "received",
        }
    }
}

/// How a TCP connection came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opened {
    /// The guest connected (its HTTP client's connections included).
    Connected,
    /// The guest's listener accepted it.
    Accepted,
}

impl Opened {
    /// Both, in the order of the table.
    pub const ALL: [Opened; 2] = [Opened::Connected, Opened::Accepted];

    /// As metrics and records write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Opened::Connected => "connected",
            Opened::Accepted => "accepted",
        }
    }
}

/// One run's traffic so far. Shared by every socket of the run; read at
/// any time ([`Traffic::bytes`], ...) by whoever reports it.
#[derive(Debug, Default)]
pub struct Traffic {
    bytes: [[AtomicU64; Direction::ALL.len()]; Transport::ALL.len()],
    datagrams: [AtomicU64; Direction::ALL.len()],
    connections: [AtomicU64; Opened::ALL.len()],
}

impl Traffic {
    /// Counts `n` bytes over `transport` going `direction`.
    pub(crate) fn bytes_moved(&self, transport: Transport, direction: Direction, n: usize) {
        if n > 0 {
            self.bytes[transport as usize][direction as usize]
                .fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Counts one UDP datagram of `len` bytes going `direction`.
    pub(crate) fn datagram(&self, direction: Direction, len: usize) {
        self.datagrams[direction as usize].fetch_add(1, Ordering::Relaxed);
        self.bytes_moved(Transport::Udp, direction, len);
    }

    /// Counts one TCP connection, `how` it was opened.
    pub(crate) fn connection(&self, how: Opened) {
        self.connections[how as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes over `transport` going `direction` so far.
    pub fn bytes(&self, transport: Transport, direction: Direction) -> u64 {
        self.bytes[transport as usize][direction as usize].load(Ordering::Relaxed)
    }

    /// UDP datagrams going `direction` so far.
    pub fn datagrams(&self, direction: Direction) -> u64 {
        self.datagrams[direction as usize].load(Ordering::Relaxed)
    }

    /// TCP connections opened `how` so far.
    pub fn connections(&self, how: Opened) -> u64 {
        self.connections[how as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_count_has_its_own_place() {
        let traffic = Traffic::default();
        traffic.bytes_moved(Transport::Tcp, Direction::Sent, 5);
        traffic.bytes_moved(Transport::Http, Direction::Received, 7);
        traffic.datagram(Direction::Sent, 3);
        traffic.datagram(Direction::Sent, 0);
        traffic.connection(Opened::Accepted);
        assert_eq!(traffic.bytes(Transport::Tcp, Direction::Sent), 5);
        assert_eq!(traffic.bytes(Transport::Tcp, Direction::Received), 0);
        assert_eq!(traffic.bytes(Transport::Http, Direction::Received), 7);
        assert_eq!(traffic.bytes(Transport::Udp, Direction::Sent), 3);
        assert_eq!(traffic.datagrams(Direction::Sent), 2);
        assert_eq!(traffic.datagrams(Direction::Received), 0);
        assert_eq!(traffic.connections(Opened::Accepted), 1);
        assert_eq!(traffic.connections(Opened::Connected), 0);
        for (i, t) in Transport::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
        }
        for (i, d) in Direction::ALL.iter().enumerate() {
            assert_eq!(*d as usize, i);
        }
        for (i, o) in Opened::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
    }
}
