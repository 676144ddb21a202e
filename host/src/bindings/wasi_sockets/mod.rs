//! wasi:sockets (0.2 and 0.3) under the run's policy: the glue that puts
//! stock programs (std::net, mio, any language's socket library) behind
//! the same grants, deny rules and bounds as moat:net guests.
//!
//! The sockets are wasmtime-wasi's. This layer adds, over
//! [`crate::net::AddressGate`]:
//!
//! - the `socket_addr_check` hook wasmtime-wasi calls before each bind,
//!   connect, listen, send, accept and receive syscall
//!   ([`WasiNet::configure`]);
//! - moat's own `wasi:sockets/ip-name-lookup` in place of wasmtime-wasi's
//!   ([`lookup`]): names no grant names are refused before any query, and
//!   the addresses of granted names are recorded for the judge;
//! - the run's socket count on every socket created or accepted, and a
//!   bound on wasi 0.3 UDP receives waiting ([`count`]);
//! - the program's loopback listeners registered as its own, so that it
//!   may connect to itself without a connect grant ([`own`]);
//! - wasi 0.3 TCP streams that keep their socket's place in the count for
//!   as long as they hold its descriptor ([`streams`]);
//! - the run's traffic counted: TCP bytes (through wasmtime-wasi's
//!   observer, [`WasiNet::configure`]), connections and datagrams
//!   ([`traffic`]).
//!
//! An embedder gets it through the kit ([`crate::kit`]): its context
//! builder calls [`WasiNet::configure`] on the embedder's
//! `WasiCtxBuilder`, and its `add_to_linker` calls this module's.

pub mod count;
pub mod lookup;
mod own;
pub mod streams;
mod traffic;

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::component::Linker;
use wasmtime_wasi::sockets::{SocketAddrUse, TcpBytes};
use wasmtime_wasi::{WasiCtxBuilder, WasiView};

use crate::net::own_listeners::OwnListener;
use crate::net::{AddressGate, AddressUse, Direction, Net, Notices, Transport};
use streams::{Held, Wakeups};

/// One run's wasi:sockets state: its gate and the places its sockets hold
/// in the run's socket count.
pub struct WasiNet {
    gate: Arc<AddressGate>,
    /// Places of the sockets this layer created or accepted, by resource
    /// index (shared with the 0.3 streams taken from them).
    created: HashMap<u32, Held>,
    /// The host's own connections to dropped listeners, let through the
    /// accept check ([`streams`]).
    wakeups: Wakeups,
    /// The 0.2 loopback listeners registered as the program's own
    /// ([`own`]), by resource index.
    listening: HashMap<u32, OwnListener>,
}

/// Implemented by a store's data type to expose its [`WasiNet`].
pub trait WasiNetView: WasiView {
    /// The run's wasi:sockets state.
    fn wasi_net(&mut self) -> &mut WasiNet;
}

impl WasiNet {
    /// wasi:sockets for a run on `net`: the same policy, limits, socket
    /// count and lookups; denials reported to `notices`.
    pub fn new(net: &Net, notices: Notices) -> WasiNet {
        WasiNet {
            gate: Arc::new(net.address_gate(notices)),
            created: HashMap::new(),
            wakeups: Wakeups::default(),
            listening: HashMap::new(),
        }
    }

    /// The gate these sockets pass.
    pub fn gate(&self) -> &Arc<AddressGate> {
        &self.gate
    }

    /// Enables TCP, UDP and name lookups on `builder`, with every address
    /// judged by this run's gate before its syscall, and the bytes of its
    /// TCP streams counted into the run's traffic.
    pub fn configure(&self, builder: &mut WasiCtxBuilder) {
        let traffic = Arc::clone(self.gate.traffic());
        builder.tcp_bytes_observer(move |way, n| {
            let direction = match way {
                TcpBytes::Sent => Direction::Sent,
                TcpBytes::Received => Direction::Received,
            };
            traffic.bytes_moved(Transport::Tcp, direction, n);
        });
        let gate = Arc::clone(&self.gate);
        let wakeups = self.wakeups.clone();
        // wasmtime-wasi calls the hook on tasks of its own: the records it
        // makes are paid from the trail share of the request this context
        // is made for (`moat serve`), taken now.
        let share = crate::audit::current_share();
        builder
            .allow_tcp(true)
            .allow_udp(true)
            .allow_ip_name_lookup(true)
            .socket_addr_check(move |addr, use_| {
                let admitted = (matches!(use_, SocketAddrUse::TcpAccept) && wakeups.take(addr))
                    || crate::audit::with_share(share.as_ref(), || judge(&gate, addr, use_));
                Box::pin(std::future::ready(admitted))
            });
    }

    /// Unregisters the socket at `rep` as an own listener, before it is
    /// closed.
    fn unlisten(&mut self, rep: u32) {
        self.listening.remove(&rep);
    }

    /// Gives back the place of the socket at `rep`, which was just
    /// dropped (the streams taken from it may hold it longer).
    fn release(&mut self, rep: u32) {
        self.created.remove(&rep);
    }
}

/// The `socket_addr_check` hook: the gate's judgement, and for an accepted
/// connection, whether the run has a place for it (refused at the cap,
/// which wasmtime-wasi answers with a reset). The place itself is taken
/// when the connection is handed to the guest as a socket ([`count`],
/// [`streams`]): one judged and then dropped unhanded (its listener went)
/// took none.
fn judge(gate: &AddressGate, addr: std::net::SocketAddr, use_: SocketAddrUse) -> bool {
    let use_ = match use_ {
        SocketAddrUse::TcpBind => AddressUse::Bind,
        SocketAddrUse::UdpBind => AddressUse::UdpBind,
        SocketAddrUse::TcpListen => AddressUse::Listen,
        SocketAddrUse::TcpConnect => AddressUse::Connect,
        SocketAddrUse::UdpSend => AddressUse::Send,
        SocketAddrUse::TcpAccept => AddressUse::Accept,
        SocketAddrUse::UdpReceive => AddressUse::Receive,
    };
    if gate.judge(addr, use_).is_err() {
        return false;
    }
    if use_ == AddressUse::Accept && !gate.has_socket_room() {
        tracing::debug!(target: "moat::net", peer = %addr, "socket limit reached: resetting an accepted connection");
        return false;
    }
    true
}

/// Adds wasi:sockets 0.2 and 0.3 to `linker` (with the rest of WASI 0.2
/// and 0.3, as `wasmtime_wasi::p2::add_to_linker_async` and
/// `wasmtime_wasi::p3::add_to_linker` do), with moat's name lookup and
/// socket count in place of wasmtime-wasi's. The store's [`WasiCtx`] must
/// come from a builder set up by [`WasiNet::configure`].
///
/// [`WasiCtx`]: wasmtime_wasi::WasiCtx
///
/// # Errors
/// If the linker already defines WASI.
pub fn add_to_linker<T: WasiNetView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    add_p2_to_linker(linker)?;
    add_p3_to_linker(linker)
}

/// [`add_to_linker`]'s WASI 0.2 half alone: what a linker of an engine
/// without the component model's concurrency support can hold (WASI
/// 0.3's functions need that support).
///
/// # Errors
/// If the linker already defines WASI 0.2.
pub(crate) fn add_p2_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    super::io_error::add_to_linker(linker)?;
    super::shadowing(linker, |linker| {
        lookup::add_p2_to_linker(linker)?;
        count::add_p2_to_linker(linker)?;
        traffic::add_p2_to_linker(linker)?;
        own::add_p2_to_linker(linker)
    })
}

/// [`add_to_linker`]'s WASI 0.3 half.
pub(crate) fn add_p3_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi::p3::add_to_linker(linker)?;
    super::shadowing(linker, |linker| {
        lookup::add_p3_to_linker(linker)?;
        count::add_p3_to_linker(linker)?;
        traffic::add_p3_to_linker(linker)?;
        streams::add_to_linker(linker)
    })
}
