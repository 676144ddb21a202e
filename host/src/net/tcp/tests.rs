//! Tests of the socket core against real tokio peers on loopback.

use moat_policy::setting::{Spelling, Worded as _};
use std::future::poll_fn;
use std::task::Poll;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener as PeerListener;
use tokio::net::TcpStream as PeerStream;

use super::*;
use crate::net::{ConnectOptions, ListenOptions, Net};
use moat_policy::policy::Policy;

/// A socket from the core connected to a plain tokio peer.
async fn pair_with(options: ConnectOptions) -> (Net, TcpConn, PeerStream) {
    let peer_listener = PeerListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer_listener.local_addr().unwrap().port();
    let net = Net::new(Policy::allow_all().spelled(Spelling::Flags));
    let (conn, peer) = tokio::join!(
        net.connect("127.0.0.1", port, &options),
        peer_listener.accept()
    );
    (net, conn.unwrap(), peer.unwrap().0)
}

async fn pair() -> (Net, TcpConn, PeerStream) {
    pair_with(ConnectOptions::default()).await
}

async fn read(reader: &mut Reader, buf: &mut [u8]) -> Result<usize, NetError> {
    poll_fn(|cx| reader.poll_read(cx, buf)).await
}

async fn write_all(writer: &mut Writer, mut data: &[u8]) -> Result<(), NetError> {
    while !data.is_empty() {
        let n = poll_fn(|cx| writer.poll_write(cx, data)).await?;
        data = &data[n..];
    }
    Ok(())
}

async fn read_to_end(reader: &mut Reader) -> Result<Vec<u8>, NetError> {
    let mut all = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    loop {
        match read(reader, &mut buf).await? {
            0 => return Ok(all),
            n => all.extend_from_slice(&buf[..n]),
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[tokio::test]
async fn bytes_flow_both_ways_and_fin_half_closes() {
    let (_net, conn, mut peer) = pair().await;
    let (mut writer, sent) = conn.writer().unwrap();
    let (mut reader, received) = conn.reader().unwrap();

    write_all(&mut writer, b"hello peer").await.unwrap();
    drop(writer); // FIN after the bytes
    let mut got = Vec::new();
    peer.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"hello peer");
    assert_eq!(sent.await, Ok(()));

    // Reading stays live after our FIN.
    peer.write_all(b"still here").await.unwrap();
    peer.shutdown().await.unwrap();
    assert_eq!(read_to_end(&mut reader).await.unwrap(), b"still here");
    assert_eq!(received.await, Ok(()));
}

#[tokio::test]
async fn a_full_socket_queues_one_backlog_then_waits_and_loses_nothing() {
    let options = ConnectOptions {
        send_buffer_size: Some(4096),
        ..ConnectOptions::default()
    };
    let (_net, conn, mut peer) = pair_with(options).await;
    let (mut writer, sent) = conn.writer().unwrap();
    let data = pattern(8 << 20);

    // With nobody reading, writes are accepted until the kernel is full and
    // one backlog is queued; then the writer waits instead of buffering more.
    let mut offset = 0;
    let accepted = poll_fn(|cx| {
        loop {
            match writer.poll_write(cx, &data[offset..]) {
                Poll::Ready(Ok(n)) => offset += n,
                Poll::Ready(Err(e)) => panic!("write failed: {e}"),
                Poll::Pending => return Poll::Ready(offset),
            }
        }
    })
    .await;
    assert!(accepted < data.len(), "the kernel took all 8 MiB unread");

    let reading = tokio::spawn(async move {
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        got
    });
    write_all(&mut writer, &data[accepted..]).await.unwrap();
    drop(writer);
    assert_eq!(sent.await, Ok(()));
    assert!(reading.await.unwrap() == data, "bytes differ");
}

#[tokio::test]
async fn a_spent_host_memory_budget_queues_nothing_and_the_write_waits_for_the_kernel() {
    let peer_listener = PeerListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer_listener.local_addr().unwrap().port();
    // A budget smaller than one backlog: nothing is ever queued.
    let config = crate::net::NetConfig {
        limits: crate::net::Limits {
            max_host_memory: Some(1024),
            ..crate::net::Limits::default()
        },
        ..crate::net::NetConfig::new(Policy::allow_all().spelled(Spelling::Flags))
    };
    let net = Net::build(config, crate::net::PendingWrites::new());
    let options = ConnectOptions {
        send_buffer_size: Some(4096),
        ..ConnectOptions::default()
    };
    let (conn, peer) = tokio::join!(
        net.connect("127.0.0.1", port, &options),
        peer_listener.accept()
    );
    let (conn, mut peer) = (conn.unwrap(), peer.unwrap().0);
    let (mut writer, sent) = conn.writer().unwrap();
    let data = pattern(4 << 20);
    let mut offset = 0;
    poll_fn(|cx| {
        loop {
            match writer.poll_write(cx, &data[offset..]) {
                Poll::Ready(Ok(n)) => offset += n,
                Poll::Ready(Err(e)) => panic!("write failed: {e}"),
                Poll::Pending => return Poll::Ready(()),
            }
        }
    })
    .await;
    assert!(offset < data.len(), "the kernel took all 4 MiB unread");
    assert_eq!(net.host_memory_used(), 0, "no backlog was paid for");
    // The writer waits on the kernel; when the peer reads, every byte
    // arrives, in order.
    let reading = tokio::spawn(async move {
        let mut got = Vec::new();
        peer.read_to_end(&mut got).await.unwrap();
        got
    });
    write_all(&mut writer, &data[offset..]).await.unwrap();
    drop(writer);
    assert_eq!(sent.await, Ok(()));
    assert!(reading.await.unwrap() == data, "bytes differ");
    assert_eq!(net.host_memory_used(), 0);
}

#[tokio::test]
async fn the_backlog_drains_without_anyone_polling_the_writer() {
    let options = ConnectOptions {
        send_buffer_size: Some(4096),
        ..ConnectOptions::default()
    };
    let (_net, conn, mut peer) = pair_with(options).await;
    let (mut writer, _sent) = conn.writer().unwrap();
    let data = pattern(1 << 20);
    let mut offset = 0;
    poll_fn(|cx| {
        loop {
            match writer.poll_write(cx, &data[offset..]) {
                Poll::Ready(Ok(n)) => offset += n,
                _ => return Poll::Ready(()),
            }
        }
    })
    .await;
    // Everything accepted reaches the peer by the drain task alone.
    let mut got = vec![0; offset];
    peer.read_exact(&mut got).await.unwrap();
    assert!(got == data[..offset]);
}

#[tokio::test]
async fn an_abandoned_read_loses_nothing_and_the_socket_stays_usable() {
    let (_net, conn, mut peer) = pair().await;
    let (mut reader, _) = conn.reader().unwrap();
    let mut buf = [0u8; 16];
    // Start a read that has to wait, then abandon it.
    let pending = poll_fn(|cx| Poll::Ready(reader.poll_read(cx, &mut buf).is_pending())).await;
    assert!(pending);
    drop(reader);

    peer.write_all(b"nothing lost").await.unwrap();
    let (mut reader, _) = conn.reader().unwrap();
    let n = read(&mut reader, &mut buf).await.unwrap();
    assert_eq!(&buf[..n], b"nothing lost");
}

#[tokio::test]
async fn one_reader_and_one_writer_at_a_time() {
    let (_net, conn, _peer) = pair().await;
    let reader = conn.reader().unwrap();
    assert!(matches!(conn.reader(), Err(NetError::InvalidState(_))));
    drop(reader);
    assert!(conn.reader().is_ok());

    let writer = conn.writer().unwrap();
    assert!(matches!(conn.writer(), Err(NetError::InvalidState(_))));
    drop(writer);
    // Sending ended with that writer: no second one.
    assert!(matches!(conn.writer(), Err(NetError::InvalidState(_))));
}

#[tokio::test]
async fn shutdown_ends_an_open_writer_after_its_bytes() {
    let (_net, conn, mut peer) = pair().await;
    let (mut writer, sent) = conn.writer().unwrap();
    write_all(&mut writer, b"before").await.unwrap();
    assert_eq!(conn.shutdown().await, Ok(()));
    assert_eq!(
        write_all(&mut writer, b"after").await,
        Err(NetError::Closed)
    );
    assert_eq!(sent.await, Ok(()));
    let mut got = Vec::new();
    peer.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"before");
    // Again: the first outcome.
    assert_eq!(conn.shutdown().await, Ok(()));
}

#[tokio::test]
async fn a_peer_reset_is_connection_reset() {
    let (_net, conn, peer) = pair().await;
    socket2::SockRef::from(&peer)
        .set_linger(Some(std::time::Duration::ZERO))
        .unwrap();
    drop(peer); // RST
    let (mut reader, outcome) = conn.reader().unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(
        read(&mut reader, &mut buf).await,
        Err(NetError::ConnectionReset)
    );
    assert_eq!(outcome.await, Err(NetError::ConnectionReset));
    // Reading again reports the same end.
    drop(reader);
    let (mut reader, _) = conn.reader().unwrap();
    assert_eq!(
        read(&mut reader, &mut buf).await,
        Err(NetError::ConnectionReset)
    );
}

#[tokio::test]
async fn dropping_the_socket_ends_its_streams_and_closes_it() {
    let (_net, conn, mut peer) = pair().await;
    let (mut reader, _) = conn.reader().unwrap();
    let (mut writer, _) = conn.writer().unwrap();
    let mut buf = [0u8; 8];
    let parked = tokio::spawn(async move { read(&mut reader, &mut buf).await });
    tokio::task::yield_now().await;
    drop(conn);
    assert_eq!(parked.await.unwrap(), Ok(0));
    assert_eq!(write_all(&mut writer, b"x").await, Err(NetError::Closed));
    let mut got = Vec::new();
    peer.read_to_end(&mut got).await.unwrap();
    assert!(got.is_empty());
}

#[tokio::test]
async fn closing_a_listener_wakes_a_parked_accept_and_frees_the_port() {
    let net = Net::new(Policy::allow_all().spelled(Spelling::Flags));
    let mut listener = net
        .listen("127.0.0.1", 0, &ListenOptions::default())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let queue = listener.queue();
    let parked = tokio::spawn(async move { queue.accept().await.is_none() });
    tokio::task::yield_now().await;
    listener.close().await;
    assert!(
        parked.await.unwrap(),
        "parked accept should resolve to None"
    );
    assert!(listener.queue().accept().await.is_none());
    // The port is free again at once.
    std::net::TcpListener::bind(addr).unwrap();
}

#[tokio::test]
async fn a_listener_hands_out_working_sockets() {
    let net = Net::new(Policy::allow_all().spelled(Spelling::Flags));
    let listener = net
        .listen("127.0.0.1", 0, &ListenOptions::default())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = PeerStream::connect(addr).await.unwrap();
    let conn = listener.queue().accept().await.unwrap();
    assert_eq!(conn.peer_addr().unwrap(), client.local_addr().unwrap());
    client.write_all(b"ping").await.unwrap();
    let (mut reader, _) = conn.reader().unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(read(&mut reader, &mut buf).await, Ok(4));
    assert_eq!(&buf, b"ping");
}

#[tokio::test]
async fn denied_calls_fail_before_any_socket() {
    let net = Net::new(Policy::new().spelled(Spelling::Flags));
    let err = net
        .connect("127.0.0.1", 9, &ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(
        err.worded(Spelling::Flags).to_string(),
        "connect to 127.0.0.1:9 denied: needs --allow-net=127.0.0.1:9"
    );
    let err = net
        .listen("127.0.0.1", 0, &ListenOptions::default())
        .await
        .err()
        .unwrap();
    assert!(matches!(err, NetError::Denied(_)));
    let err = net
        .connect("127.1", 9, &ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert!(matches!(err, NetError::InvalidArgument(_)), "{err}");
}

#[tokio::test]
async fn connect_errors_are_typed() {
    let net = Net::new(Policy::allow_all().spelled(Spelling::Flags));
    // A port nothing listens on: bind one, note it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = net
        .connect("127.0.0.1", port, &ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(err, NetError::ConnectionRefused);
    let err = net
        .connect("name.invalid", 80, &ConnectOptions::default())
        .await
        .err()
        .unwrap();
    assert!(matches!(err, NetError::NameNotResolved(_)), "{err}");
}

#[tokio::test]
async fn options_reach_the_socket() {
    let options = ConnectOptions {
        nodelay: true,
        keepalive: Some(Keepalive {
            idle: Some(std::time::Duration::from_secs(30)),
            interval: Some(std::time::Duration::from_secs(5)),
            retries: Some(3),
        }),
        ..ConnectOptions::default()
    };
    let (_net, conn, _peer) = pair_with(options).await;
    let Some(Io::Plain(stream)) = conn.open().map(|core| &core.io) else {
        panic!("a plaintext socket");
    };
    let sock = socket2::SockRef::from(stream);
    assert!(sock.tcp_nodelay().unwrap());
    assert!(sock.keepalive().unwrap());
    assert_eq!(sock.tcp_keepalive_time().unwrap().as_secs(), 30);
    conn.set_keepalive(None).unwrap();
    assert!(!sock.keepalive().unwrap());
    assert!(matches!(
        conn.set_keepalive(Some(Keepalive {
            idle: Some(std::time::Duration::ZERO),
            ..Keepalive::default()
        })),
        Err(NetError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn into_stream_takes_the_socket_out_with_nothing_lost_either_way() {
    let options = ConnectOptions {
        send_buffer_size: Some(4096),
        ..ConnectOptions::default()
    };
    let (_net, conn, mut peer) = pair_with(options).await;
    let (mut writer, sent) = conn.writer().unwrap();
    let (mut reader, _) = conn.reader().unwrap();

    // The peer sends before the upgrade; the guest reads none of it.
    peer.write_all(b"peer bytes the guest never read")
        .await
        .unwrap();
    // The guest writes more than the kernel takes: a backlog is queued.
    let before = pattern(1 << 20);
    let mut offset = 0;
    poll_fn(|cx| {
        loop {
            match writer.poll_write(cx, &before[offset..]) {
                Poll::Ready(Ok(n)) => offset += n,
                _ => return Poll::Ready(()),
            }
        }
    })
    .await;

    let reading = tokio::spawn(async move {
        let mut got = vec![0u8; offset];
        peer.read_exact(&mut got).await.unwrap();
        (peer, got)
    });
    let mut stream = conn.into_stream().await.unwrap();
    // The old reader and writer have ended, without a FIN.
    assert_eq!(read(&mut reader, &mut [0u8; 8]).await, Ok(0));
    assert_eq!(write_all(&mut writer, b"x").await, Err(NetError::Closed));
    assert_eq!(sent.await, Ok(()));

    // Every byte written before the upgrade arrived, in order...
    let (mut peer, got) = reading.await.unwrap();
    assert!(got == before[..offset]);
    // ...and what follows on the stream taken out comes after it, on the
    // same connection, which is still open both ways.
    stream.write_all(b"after the upgrade").await.unwrap();
    let mut after = [0u8; 17];
    peer.read_exact(&mut after).await.unwrap();
    assert_eq!(&after, b"after the upgrade");
    let mut unread = [0u8; 31];
    stream.read_exact(&mut unread).await.unwrap();
    assert_eq!(&unread, b"peer bytes the guest never read");
}

#[tokio::test]
async fn into_stream_after_shutdown_is_an_error() {
    let (_net, conn, _peer) = pair().await;
    conn.shutdown().await.unwrap();
    assert!(matches!(
        conn.into_stream().await,
        Err(NetError::InvalidState(_))
    ));
}

#[test]
fn an_idle_socket_stays_small() {
    // Every socket holds its core for as long as it is open: bench
    // idle_sockets measures the whole; this keeps the core from growing
    // unnoticed.
    let core = std::mem::size_of::<super::Core>();
    assert!(core <= 336, "Core is {core} bytes");
}
