//! Tests of UDP against plain tokio peers on loopback.

use moat_policy::setting::{Spelling, Worded as _};
use std::time::Duration;

use tokio::net::UdpSocket as Peer;

use super::pool::RECEIVE_BUFFER;
use super::*;
use crate::net::Net;
use crate::net::limits::POOL_KEEP;
use moat_policy::policy::Policy;

async fn bound(net: &Net, host: &str) -> UdpSocket {
    net.bind_udp(host, 0, &BindOptions::default())
        .await
        .unwrap()
}

fn everything() -> Net {
    Net::new(Policy::allow_all().spelled(Spelling::Flags))
}

#[tokio::test]
async fn datagrams_both_ways_zero_length_included_on_both_families() {
    let net = everything();
    for (host, peer_addr) in [("127.0.0.1", "127.0.0.1:0"), ("::1", "[::1]:0")] {
        let socket = bound(&net, host).await;
        let peer = Peer::bind(peer_addr).await.unwrap();
        let peer_at = peer.local_addr().unwrap();
        let local = socket.local_addr().unwrap();

        peer.send_to(b"", local).await.unwrap();
        peer.send_to(b"hello", local).await.unwrap();
        let empty = socket.receive().await.unwrap();
        assert_eq!(
            (empty.data.len(), empty.from, empty.truncated),
            (0, peer_at, false)
        );
        assert_eq!(socket.receive().await.unwrap().data, b"hello");

        let at = peer_at.ip().to_string();
        socket.send(b"", &at, peer_at.port()).await.unwrap();
        socket.send(b"back", &at, peer_at.port()).await.unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(peer.recv_from(&mut buf).await.unwrap(), (0, local));
        assert_eq!(peer.recv_from(&mut buf).await.unwrap().0, 4);
    }
}

#[tokio::test]
async fn the_largest_ipv4_datagram_fits_and_a_longer_one_is_truncated() {
    let net = everything();
    let v4 = bound(&net, "127.0.0.1").await;
    let peer = Peer::bind("127.0.0.1:0").await.unwrap();
    peer.send_to(&vec![7u8; MAX_DATAGRAM_V4], v4.local_addr().unwrap())
        .await
        .unwrap();
    let d = v4.receive().await.unwrap();
    assert_eq!((d.data.len(), d.truncated), (MAX_DATAGRAM_V4, false));

    // IPv6 carries up to 65,527 bytes: more than the buffer holds.
    let v6 = bound(&net, "::1").await;
    let peer6 = Peer::bind("[::1]:0").await.unwrap();
    peer6
        .send_to(&vec![9u8; 65_527], v6.local_addr().unwrap())
        .await
        .unwrap();
    let d = v6.receive().await.unwrap();
    assert_eq!((d.data.len(), d.truncated), (RECEIVE_BUFFER, true));
}

#[tokio::test]
async fn receive_many_takes_what_is_queued_and_send_many_sends_a_batch() {
    let net = everything();
    let socket = bound(&net, "127.0.0.1").await;
    let peer = Peer::bind("127.0.0.1:0").await.unwrap();
    let local = socket.local_addr().unwrap();
    for i in 0..5u8 {
        peer.send_to(&[i], local).await.unwrap();
    }
    // Loopback queues a datagram before send_to returns.
    let got = socket.receive_many(64).await.unwrap();
    assert_eq!(
        got.iter().map(|d| d.data[0]).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    assert_eq!(
        socket.receive_many(0).await,
        Err(NetError::InvalidArgument(
            "receive-many needs max of at least 1".into()
        ))
    );

    let at = peer.local_addr().unwrap();
    let batch: Vec<_> = (0..3u8)
        .map(|i| (vec![i; 3], at.ip().to_string(), at.port()))
        .collect();
    assert_eq!(socket.send_many(&batch).await.unwrap(), (3, None));
    let mut buf = [0u8; 8];
    for i in 0..3u8 {
        let (n, _) = peer.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], &[i; 3]);
    }
}

#[tokio::test]
async fn closing_wakes_a_parked_receive() {
    let socket = bound(&everything(), "127.0.0.1").await;
    let parked = {
        let socket = socket.clone();
        tokio::spawn(async move { socket.receive().await })
    };
    tokio::task::yield_now().await;
    socket.close();
    assert_eq!(parked.await.unwrap(), Err(NetError::Closed));
    assert_eq!(socket.receive().await, Err(NetError::Closed));
    assert_eq!(socket.local_addr(), Err(NetError::Closed));
}

#[tokio::test]
async fn a_waiting_receive_holds_no_buffer() {
    let socket = bound(&everything(), "127.0.0.1").await;
    let abandoned = tokio::time::timeout(Duration::from_millis(1), socket.receive()).await;
    assert!(abandoned.is_err());
    // It never took one: the pool never allocated.
    assert_eq!(socket.shared.pool.kept(), 0);
    // A thousand parked receives, three datagrams: three buffers at most
    // were ever out, and they came back.
    let parked: Vec<_> = (0..1000)
        .map(|_| {
            let socket = socket.clone();
            tokio::spawn(async move { socket.receive().await })
        })
        .collect();
    tokio::task::yield_now().await;
    let peer = Peer::bind("127.0.0.1:0").await.unwrap();
    let to = socket.local_addr().unwrap();
    for i in 0..3u8 {
        peer.send_to(&[i], to).await.unwrap();
    }
    // Wait (on the condition) until three receives have their datagram.
    while parked.iter().filter(|t| t.is_finished()).count() < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    socket.close();
    let mut payloads = Vec::new();
    let mut closed = 0;
    for task in parked {
        match task.await.unwrap() {
            Ok(datagram) => payloads.extend(datagram.data),
            Err(NetError::Closed) => closed += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    payloads.sort();
    assert_eq!(payloads, [0, 1, 2]);
    assert_eq!(closed, 997);
    assert!(socket.shared.pool.kept() <= 3);
    // Receives in flight at once take more; the pool keeps only POOL_KEEP.
    let many: Vec<_> = (0..POOL_KEEP + 3)
        .map(|_| socket.shared.pool.take().unwrap())
        .collect();
    drop(many);
    assert_eq!(socket.shared.pool.kept(), POOL_KEEP);
}

#[tokio::test]
async fn a_denied_destination_gets_nothing() {
    let peer = Peer::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let net = Net::new(
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_listen("127.0.0.1")
            .unwrap(),
    );
    let socket = bound(&net, "127.0.0.1").await;
    let err = socket.send(b"x", "127.0.0.1", port).await.unwrap_err();
    assert_eq!(
        err.worded(Spelling::Flags).to_string(),
        format!("connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}")
    );
    // One denied destination in a batch: nothing of the batch is sent.
    let net = Net::new(
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_listen("127.0.0.1")
            .unwrap()
            .allow_connect(&format!("127.0.0.1:{port}"))
            .unwrap(),
    );
    let socket = bound(&net, "127.0.0.1").await;
    let batch = vec![
        (b"allowed".to_vec(), "127.0.0.1".to_owned(), port),
        (b"denied".to_vec(), "127.0.0.1".to_owned(), port + 1),
    ];
    assert!(matches!(
        socket.send_many(&batch).await,
        Err(NetError::Denied(_))
    ));
    // Answering by address is judged as the IP literal it is.
    let denied_at = SocketAddr::new("127.0.0.1".parse().unwrap(), port + 1);
    assert!(matches!(
        socket.send_to_addr(b"x", denied_at).await,
        Err(NetError::Denied(_))
    ));
    let mut buf = [0u8; 16];
    assert!(peer.try_recv_from(&mut buf).is_err(), "a datagram got out");
}

#[tokio::test]
async fn bind_needs_the_listen_grant_even_for_an_ephemeral_port() {
    let net = Net::new(
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("*")
            .unwrap(),
    );
    let err = net
        .bind_udp("127.0.0.1", 0, &BindOptions::default())
        .await
        .err()
        .unwrap();
    assert_eq!(
        err.worded(Spelling::Flags).to_string(),
        "listen on 127.0.0.1:0 denied: needs --allow-listen=127.0.0.1:0"
    );
}

#[tokio::test]
async fn options_follow_the_family_and_broadcast_on_ipv6_is_an_error() {
    let net = everything();
    let options = BindOptions {
        ttl: Some(7),
        multicast_ttl: Some(3),
        multicast_loopback: Some(false),
        reuse_address: true,
        ..BindOptions::default()
    };
    let v4 = net.bind_udp("127.0.0.1", 0, &options).await.unwrap();
    let sock = socket2::SockRef::from(&v4.shared.socket);
    assert_eq!(sock.ttl_v4().unwrap(), 7);
    assert_eq!(sock.multicast_ttl_v4().unwrap(), 3);
    assert!(!sock.multicast_loop_v4().unwrap());
    let v6 = net.bind_udp("::1", 0, &options).await.unwrap();
    let sock = socket2::SockRef::from(&v6.shared.socket);
    assert_eq!(sock.unicast_hops_v6().unwrap(), 7);
    assert_eq!(sock.multicast_hops_v6().unwrap(), 3);

    let broadcast = BindOptions {
        broadcast: true,
        ..BindOptions::default()
    };
    assert!(net.bind_udp("127.0.0.1", 0, &broadcast).await.is_ok());
    assert!(matches!(
        net.bind_udp("::1", 0, &broadcast).await,
        Err(NetError::InvalidArgument(_))
    ));
}

#[tokio::test]
async fn multicast_membership_checks_families() {
    let net = everything();
    let v4 = bound(&net, "0.0.0.0").await;
    let group: IpAddr = "239.255.0.1".parse().unwrap();
    assert!(matches!(
        v4.join_multicast("10.0.0.1".parse().unwrap(), MulticastInterface::Any),
        Err(NetError::InvalidArgument(_))
    ));
    assert!(matches!(
        v4.join_multicast(group, MulticastInterface::Index(1)),
        Err(NetError::InvalidArgument(_))
    ));
    assert!(matches!(
        v4.join_multicast("ff02::1".parse().unwrap(), MulticastInterface::Any),
        Err(NetError::InvalidArgument(_))
    ));
}
