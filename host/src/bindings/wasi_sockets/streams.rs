//! wasi:sockets 0.3 TCP streams that keep their socket's place in the
//! run's socket count for as long as they hold its descriptor.
//!
//! In wasi 0.3 a socket's `receive` and `send` streams and a listener's
//! stream of connections are separate resources from the socket, each
//! holding the socket's descriptor: a guest can drop the socket and keep
//! its streams. So the place in `--max-sockets` is shared ([`Held`]) by the
//! socket resource and every stream taken from it, and given back when the
//! last of them is gone:
//!
//! - `receive` and `send`: wasmtime-wasi resolves each stream's result
//!   future when the stream lets go of the descriptor (at its end, its
//!   error, or its drop). moat hands the guest a future of its own and
//!   watches wasmtime-wasi's ([`Watch`]), holding the place until it
//!   resolves.
//! - `listen`: the stream of connections holds the listener. moat hands
//!   the guest a stream of its own, fed one connection at a time from
//!   wasmtime-wasi's ([`Relay`]), which holds the listener's place until
//!   wasmtime-wasi's stream is gone. Each connection takes its own place
//!   as it is handed over; at the cap it is closed. wasmtime-wasi's stream
//!   only ends between two connections, so when the guest drops its stream
//!   the host connects to the listener once itself ([`wake`]): that
//!   connection (let through the accept check, never handed over) ends
//!   wasmtime-wasi's stream, and the listener closes.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::net::Opened;
use std::time::Duration;

use tokio::sync::oneshot;
use wasmtime::component::{
    Access, Destination, FutureConsumer, FutureReader, Lift, Linker, Resource, Source,
    StreamConsumer, StreamProducer, StreamReader, StreamResult,
};
use wasmtime::{AsContextMut, StoreContextMut};
use wasmtime_wasi::p3::bindings::sockets::types::{
    self as p3, HostTcpSocket, HostTcpSocketWithStore,
};
use wasmtime_wasi::sockets::{TcpSocket, WasiSockets, WasiSocketsView};

use super::WasiNetView;
use crate::net::limits::SocketSlot;
use crate::net::own_listeners::OwnListener;

/// A socket's place in the run's count, shared by the socket resource and
/// the streams taken from it.
pub(crate) type Held = Arc<SocketSlot>;

/// The local addresses of the host's own connections to listeners whose
/// guest stream is gone ([`wake`]): the accept check lets them through,
/// at the cap too, once each.
#[derive(Clone, Default)]
pub(crate) struct Wakeups(Arc<Mutex<HashSet<SocketAddr>>>);

impl Wakeups {
    /// Whether `peer` is one of them (forgotten once asked).
    pub(crate) fn take(&self, peer: SocketAddr) -> bool {
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        !set.is_empty() && set.remove(&peer)
    }

    fn insert(&self, peer: SocketAddr) -> bool {
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        set.len() < MAX_WAKEUPS && set.insert(peer)
    }

    fn forget(&self, peer: SocketAddr) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&peer);
    }
}

/// Wake-up connections a run may have on their way at once: each is one
/// dropped listener whose stream has not ended yet; 256 is far more than a
/// program closes at once, and past it a listener simply waits for its next
/// real connection to end.
pub(crate) const MAX_WAKEUPS: usize = 256;

/// How long a wake-up connection may take to connect, and to be accepted
/// after: on loopback or a local address it takes microseconds.
const WAKE_TIMEOUT: Duration = Duration::from_secs(5);

const P3_TYPES: &str = "wasi:sockets/types@0.3.0";

type P3Result<T> = wasmtime::Result<(Result<T, p3::ErrorCode>,)>;

/// A stream's result, as the guest awaits it.
type Done = FutureReader<Result<(), p3::ErrorCode>>;

/// wasmtime-wasi's view of the store, for its own implementations.
fn sockets<T: WasiNetView + 'static>(store: StoreContextMut<'_, T>) -> Access<'_, T, WasiSockets> {
    Access::<T, WasiSockets>::new(store, <T as WasiSocketsView>::sockets)
}

/// The place of socket `socket`, if this layer counted it.
fn held<T: WasiNetView>(state: &mut T, socket: u32) -> Option<Held> {
    state.wasi_net().created.get(&socket).cloned()
}

/// Defines `receive`, `send` and `listen` on 0.3 TCP sockets (shadowing
/// wasmtime-wasi's, which do the work).
pub(super) fn add_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    let mut types = linker.instance(P3_TYPES)?;
    types.func_wrap(
        "[method]tcp-socket.receive",
        |mut store: StoreContextMut<'_, T>,
         (socket,): (Resource<TcpSocket>,)|
         -> wasmtime::Result<((StreamReader<u8>, Done),)> {
            let place = held(store.data_mut(), socket.rep());
            let (data, done) = <WasiSockets as HostTcpSocketWithStore<T>>::receive(
                sockets(store.as_context_mut()),
                socket,
            )?;
            Ok(((data, watched(&mut store, done, place)?),))
        },
    )?;
    types.func_wrap(
        "[method]tcp-socket.send",
        |mut store: StoreContextMut<'_, T>,
         (socket, data): (Resource<TcpSocket>, StreamReader<u8>)|
         -> wasmtime::Result<(Done,)> {
            let place = held(store.data_mut(), socket.rep());
            let done = <WasiSockets as HostTcpSocketWithStore<T>>::send(
                sockets(store.as_context_mut()),
                socket,
                data,
            )?;
            Ok((watched(&mut store, done, place)?,))
        },
    )?;
    types.func_wrap_async(
        "[method]tcp-socket.listen",
        |mut store: StoreContextMut<'_, T>, (socket,): (Resource<TcpSocket>,)| {
            Box::new(async move {
                let rep = socket.rep();
                let place = held(store.data_mut(), rep);
                let listened = <WasiSockets as HostTcpSocketWithStore<T>>::listen(
                    sockets(store.as_context_mut()),
                    socket,
                )
                .await;
                let connections = match listened {
                    Ok(connections) => connections,
                    Err(err) => return Ok((Err(err.downcast()?),)),
                };
                let state = store.data_mut();
                let local = HostTcpSocket::get_local_address(
                    &mut state.sockets(),
                    Resource::new_borrow(rep),
                )
                .ok()
                .map(SocketAddr::from);
                let wakeups = state.wasi_net().wakeups.clone();
                let own = local.and_then(|local| state.wasi_net().gate().own_listener(local));
                let result: P3Result<StreamReader<Resource<TcpSocket>>> = Ok((Ok(relayed(
                    &mut store,
                    connections,
                    Kept {
                        _place: place,
                        _own: own,
                    },
                    local.map(|local| (reachable(local), wakeups)),
                )?),));
                result
            })
        },
    )?;
    Ok(())
}

/// A future that resolves with `inner`'s value, `place` held until then.
fn watched<T: 'static, V: Lift + Send + Sync + 'static>(
    store: &mut StoreContextMut<'_, T>,
    inner: FutureReader<Result<(), V>>,
    place: Option<Held>,
) -> wasmtime::Result<FutureReader<Result<(), V>>>
where
    Result<(), V>: Lift + wasmtime::component::Lower,
{
    let (tx, rx) = oneshot::channel();
    inner.pipe(
        &mut *store,
        Watch {
            tx: Some(tx),
            _place: place,
        },
    )?;
    FutureReader::new(&mut *store, async move {
        // wasmtime-wasi's future always resolves before it goes; if it
        // went without a value, the stream simply ended.
        wasmtime::error::Ok(rx.await.unwrap_or(Ok(())))
    })
}

/// Takes wasmtime-wasi's result future, passes its value on, and holds
/// the socket's place until then.
struct Watch<V> {
    tx: Option<oneshot::Sender<V>>,
    _place: Option<Held>,
}

impl<D, V: Lift + Send + Sync + 'static> FutureConsumer<D> for Watch<V> {
    type Item = V;

    fn poll_consume(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut store: StoreContextMut<'_, D>,
        mut source: Source<'_, V>,
        _: bool,
    ) -> Poll<wasmtime::Result<()>> {
        let mut value = None;
        source.read(&mut store, &mut value)?;
        if let (Some(value), Some(tx)) = (value, self.tx.take()) {
            let _ = tx.send(value);
        }
        Poll::Ready(Ok(()))
    }
}

/// The address the host connects to to reach a listener on `local`: the
/// same, or loopback for a listener on every interface.
fn reachable(local: SocketAddr) -> SocketAddr {
    let ip = match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, local.port())
}

/// What a listener's relay keeps while wasmtime-wasi's stream (which holds
/// the listening socket) lives: its place in the socket count, and its
/// registration as the program's own listener.
struct Kept {
    _place: Option<Held>,
    _own: Option<OwnListener>,
}

/// A stream of connections fed from `inner`, one at a time, keeping the
/// listener's place and registration while `inner` lives; `wake` is where
/// to connect to end `inner` once the guest's stream is gone.
fn relayed<T: WasiNetView + 'static>(
    store: &mut StoreContextMut<'_, T>,
    inner: StreamReader<Resource<TcpSocket>>,
    kept: Kept,
    wake: Option<(SocketAddr, Wakeups)>,
) -> wasmtime::Result<StreamReader<Resource<TcpSocket>>> {
    let handoff = Arc::new(Mutex::new(Handoff {
        wake,
        ..Handoff::default()
    }));
    inner.pipe(
        &mut *store,
        Relay {
            handoff: Arc::clone(&handoff),
            _kept: kept,
        },
    )?;
    StreamReader::new(&mut *store, Hand { handoff })
}

/// One connection on its way from wasmtime-wasi's stream to the guest's.
#[derive(Default)]
struct Handoff {
    /// Taken from wasmtime-wasi's stream (its place counted), not yet
    /// read by the guest.
    connection: Option<Resource<TcpSocket>>,
    /// The guest's stream waits for a connection.
    hand: Option<Waker>,
    /// wasmtime-wasi's stream waits for the last connection to be read.
    relay: Option<Waker>,
    /// The guest dropped its stream.
    hand_gone: bool,
    /// wasmtime-wasi's stream ended.
    relay_gone: bool,
    /// The listener's address, to end wasmtime-wasi's stream by.
    wake: Option<(SocketAddr, Wakeups)>,
}

fn lock(handoff: &Mutex<Handoff>) -> std::sync::MutexGuard<'_, Handoff> {
    handoff.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The consumer of wasmtime-wasi's stream of connections.
struct Relay {
    handoff: Arc<Mutex<Handoff>>,
    _kept: Kept,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let mut handoff = lock(&self.handoff);
        handoff.relay_gone = true;
        if let Some(hand) = handoff.hand.take() {
            hand.wake();
        }
    }
}

/// Closes `connection`, which no guest will read (its place, if filed,
/// goes back with it).
fn close<T: WasiNetView>(state: &mut T, connection: Resource<TcpSocket>) -> wasmtime::Result<()> {
    let rep = connection.rep();
    drop(state.ctx().table.delete(connection)?);
    state.wasi_net().created.remove(&rep);
    Ok(())
}

impl<T: WasiNetView + 'static> StreamConsumer<T> for Relay {
    type Item = Resource<TcpSocket>;

    fn poll_consume(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut store: StoreContextMut<'_, T>,
        mut source: Source<'_, Self::Item>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut handoff = lock(&self.handoff);
        if handoff.hand_gone {
            // Nobody reads any more: close what is on its way, and end
            // (which drops wasmtime-wasi's stream, and the listener).
            let mut connection = None;
            source.read(&mut store, &mut connection)?;
            let waiting = handoff.connection.take();
            drop(handoff);
            for connection in connection.into_iter().chain(waiting) {
                close(store.data_mut(), connection)?;
            }
            return Poll::Ready(Ok(StreamResult::Dropped));
        }
        if handoff.connection.is_some() {
            if finish {
                return Poll::Ready(Ok(StreamResult::Cancelled));
            }
            handoff.relay = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let mut connection = None;
        source.read(&mut store, &mut connection)?;
        let Some(connection) = connection else {
            return Poll::Ready(Ok(StreamResult::Completed));
        };
        let state = store.data_mut();
        match state.wasi_net().gate().socket_slot() {
            Ok(slot) => {
                state
                    .wasi_net()
                    .created
                    .insert(connection.rep(), Arc::new(slot));
                state
                    .wasi_net()
                    .gate()
                    .traffic()
                    .connection(Opened::Accepted);
                handoff.connection = Some(connection);
                if let Some(hand) = handoff.hand.take() {
                    hand.wake();
                }
            }
            Err(_) => {
                tracing::debug!(target: "moat::net", "socket limit reached: closing an accepted connection");
                drop(handoff);
                close(state, connection)?;
            }
        }
        Poll::Ready(Ok(StreamResult::Completed))
    }
}

/// The producer of the guest's stream of connections.
struct Hand {
    handoff: Arc<Mutex<Handoff>>,
}

impl Drop for Hand {
    fn drop(&mut self) {
        let mut handoff = lock(&self.handoff);
        handoff.hand_gone = true;
        if let Some(relay) = handoff.relay.take() {
            // The relay waits with a connection: it ends now.
            relay.wake();
            return;
        }
        if handoff.relay_gone {
            return;
        }
        // The relay ends at wasmtime-wasi's next connection: make one.
        if let (Some((listener, wakeups)), Ok(runtime)) =
            (handoff.wake.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(wake(listener, wakeups));
        }
    }
}

/// Connects to `listener` once, from an address `wakeups` lets through
/// the accept check, so that wasmtime-wasi's stream of connections yields
/// one more and the relay, whose guest stream is gone, ends it. The
/// connection carries nothing; the relay closes it.
async fn wake(listener: SocketAddr, wakeups: Wakeups) {
    let local = SocketAddr::new(listener.ip(), 0);
    let socket = match listener {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    };
    let Ok(socket) = socket else { return };
    let Ok(from) = socket.bind(local).and_then(|()| socket.local_addr()) else {
        return;
    };
    if !wakeups.insert(from) {
        return;
    }
    tracing::debug!(target: "moat::net", %listener, "ending a dropped listener's stream");
    let connected = tokio::time::timeout(WAKE_TIMEOUT, socket.connect(listener)).await;
    if let Ok(Ok(stream)) = connected {
        drop(stream);
        // The accept check forgets it when it sees it; if the listener
        // closed first, it never will.
        tokio::time::sleep(WAKE_TIMEOUT).await;
    }
    wakeups.forget(from);
}

impl<D> StreamProducer<D> for Hand {
    type Item = Resource<TcpSocket>;
    type Buffer = Option<Resource<TcpSocket>>;

    fn poll_produce<'a>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut store: StoreContextMut<'a, D>,
        mut dst: Destination<'a, Self::Item, Self::Buffer>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut handoff = lock(&self.handoff);
        if handoff.connection.is_some() {
            if dst.remaining(&mut store) != Some(0) {
                dst.set_buffer(handoff.connection.take());
                if let Some(relay) = handoff.relay.take() {
                    relay.wake();
                }
            }
            return Poll::Ready(Ok(StreamResult::Completed));
        }
        if handoff.relay_gone {
            return Poll::Ready(Ok(StreamResult::Dropped));
        }
        if finish {
            return Poll::Ready(Ok(StreamResult::Cancelled));
        }
        handoff.hand = Some(cx.waker().clone());
        Poll::Pending
    }
}
