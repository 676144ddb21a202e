//! wasi:sockets traffic counted into the run's [`Traffic`]: the same
//! figures as moat:net's, for stock programs.
//!
//! - TCP bytes, 0.2 and 0.3 alike: wasmtime-wasi tells of them
//!   (`WasiCtxBuilder::tcp_bytes_observer`, moat's patch of it:
//!   vendor/README.md), set up by [`super::WasiNet::configure`].
//! - TCP connections: `finish-connect` (0.2) and `connect` (0.3) here;
//!   accepts in [`super::count`] (0.2) and [`super::streams`]' relay (0.3).
//! - 0.2 UDP: `receive` and `send` of the datagram streams count each
//!   datagram.
//! - 0.3 UDP: `send` here, `receive` in [`super::count`] (which already
//!   shadows it).

use wasmtime::component::{Accessor, Linker, Resource};
use wasmtime_wasi::p2::bindings::sockets::network::ErrorCode;
use wasmtime_wasi::p2::bindings::sockets::{tcp, udp};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};
use wasmtime_wasi::p3::bindings::sockets::types::HostUdpSocketWithStore;
use wasmtime_wasi::p3::bindings::sockets::types::{self as p3, HostTcpSocketWithStore};
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};

use super::WasiNetView;
use crate::net::{Direction, Opened, Traffic};

const P2_TCP: &str = "wasi:sockets/tcp@0.2.12";
const P2_UDP: &str = "wasi:sockets/udp@0.2.12";
const P3_TYPES: &str = "wasi:sockets/types@0.3.0";

/// Counts into the run's traffic from a concurrent (0.3) call.
pub(super) fn count<T: WasiNetView + 'static>(accessor: &Accessor<T>, add: impl FnOnce(&Traffic)) {
    accessor.with(|mut access| add(access.get().wasi_net().gate().traffic()));
}

type P2Result<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;
type P3Result<T> = wasmtime::Result<(Result<T, p3::ErrorCode>,)>;

/// Defines the counted 0.2 `finish-connect` and datagram `receive` and
/// `send` on `linker` (shadowing wasmtime-wasi's).
pub(super) fn add_p2_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    use udp::{IncomingDatagramStream, OutgoingDatagramStream};
    use wasmtime_wasi::p2::TcpSocket as P2Tcp;

    linker.instance(P2_TCP)?.func_wrap(
        "[method]tcp-socket.finish-connect",
        |mut store,
         (this,): (Resource<P2Tcp>,)|
         -> P2Result<(Resource<DynInputStream>, Resource<DynOutputStream>)> {
            let state = store.data_mut();
            let (input, output) =
                match tcp::HostTcpSocket::finish_connect(&mut state.sockets(), this) {
                    Ok(streams) => streams,
                    Err(err) => return Ok((Err(err.downcast()?),)),
                };
            state
                .wasi_net()
                .gate()
                .traffic()
                .connection(Opened::Connected);
            Ok((Ok((input, output)),))
        },
    )?;
    let mut p2_udp = linker.instance(P2_UDP)?;
    p2_udp.func_wrap(
        "[method]incoming-datagram-stream.receive",
        |mut store,
         (this, max): (Resource<IncomingDatagramStream>, u64)|
         -> P2Result<Vec<udp::IncomingDatagram>> {
            let state = store.data_mut();
            match udp::HostIncomingDatagramStream::receive(&mut state.sockets(), this, max) {
                Ok(datagrams) => {
                    let traffic = state.wasi_net().gate().traffic();
                    for datagram in &datagrams {
                        traffic.datagram(Direction::Received, datagram.data.len());
                    }
                    Ok((Ok(datagrams),))
                }
                Err(err) => Ok((Err(err.downcast()?),)),
            }
        },
    )?;
    p2_udp.func_wrap(
        "[method]outgoing-datagram-stream.send",
        |mut store,
         (this, datagrams): (Resource<OutgoingDatagramStream>, Vec<udp::OutgoingDatagram>)|
         -> P2Result<u64> {
            let state = store.data_mut();
            let lengths: Vec<usize> = datagrams.iter().map(|d| d.data.len()).collect();
            match udp::HostOutgoingDatagramStream::send(&mut state.sockets(), this, datagrams) {
                Ok(sent) => {
                    let traffic = state.wasi_net().gate().traffic();
                    let sent_count = usize::try_from(sent).unwrap_or(usize::MAX);
                    for &len in lengths.iter().take(sent_count) {
                        traffic.datagram(Direction::Sent, len);
                    }
                    Ok((Ok(sent),))
                }
                Err(err) => Ok((Err(err.downcast()?),)),
            }
        },
    )?;
    Ok(())
}

/// Defines the counted 0.3 TCP `connect` and UDP `send` on `linker`
/// (shadowing wasmtime-wasi's).
pub(super) fn add_p3_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    use wasmtime_wasi::sockets::{TcpSocket as P3Tcp, UdpSocket as P3Udp};

    let mut types = linker.instance(P3_TYPES)?;
    types.func_wrap_concurrent(
        "[method]tcp-socket.connect",
        |accessor: &Accessor<T>, (socket, to): (Resource<P3Tcp>, p3::IpSocketAddress)| {
            Box::pin(async move {
                let wasi = accessor.with_getter::<WasiSockets>(<T as WasiSocketsView>::sockets);
                let connected: P3Result<()> =
                    match <WasiSockets as HostTcpSocketWithStore<T>>::connect(&wasi, socket, to)
                        .await
                    {
                        Ok(()) => {
                            count(accessor, |t| t.connection(Opened::Connected));
                            Ok((Ok(()),))
                        }
                        Err(err) => Ok((Err(err.downcast()?),)),
                    };
                connected
            })
        },
    )?;
    types.func_wrap_concurrent(
        "[method]udp-socket.send",
        |accessor: &Accessor<T>,
         (socket, data, to): (Resource<P3Udp>, Vec<u8>, Option<p3::IpSocketAddress>)| {
            Box::pin(async move {
                let len = data.len();
                let wasi = accessor.with_getter::<WasiSockets>(<T as WasiSocketsView>::sockets);
                let sent: P3Result<()> =
                    match <WasiSockets as HostUdpSocketWithStore<T>>::send(&wasi, socket, data, to)
                        .await
                    {
                        Ok(()) => {
                            count(accessor, |t| t.datagram(Direction::Sent, len));
                            Ok((Ok(()),))
                        }
                        Err(err) => Ok((Err(err.downcast()?),)),
                    };
                sent
            })
        },
    )?;
    Ok(())
}
