//! A DNS server that misbehaves on purpose, with moat's own resolver
//! (hickory-dns, as `SystemResolver` runs it) pointed at it: what the
//! guest sees for an answer that is slow, absent, malformed, truncated,
//! huge, looping, or that names an address the deny list refuses, and that
//! the host answers the next lookup as if nothing happened.
//!
//! The server answers by the query name's first label; it speaks UDP and
//! TCP on one port, as a name server does (a truncated UDP answer is asked
//! again over TCP).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use moat_host::RunOptions;
use moat_host::net::{Limits, SystemResolver};
use moat_host::policy::Policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{self, connections, guests, start_with, watched_port};

/// How many A records `many.test` has: more than a UDP answer holds (it
/// is truncated and asked again over TCP), more than moat keeps of one
/// answer (`MAX_ANSWER_ADDRESSES`).
const MANY_RECORDS: u32 = 600;

/// What the fake server was asked, by transport.
#[derive(Default)]
struct Asked {
    udp: AtomicUsize,
    tcp: AtomicUsize,
}

/// The response to `query`, or `None` to say nothing.
fn respond(query: &[u8], over_tcp: bool) -> Option<Vec<u8>> {
    let Ok(query) = Message::from_vec(query) else {
        return None;
    };
    let question = query.queries.first()?.clone();
    let name = question.name().clone();
    let label = name
        .iter()
        .next()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .unwrap_or_default();
    let id = query.metadata.id;
    let mut reply = Message::response(id, OpCode::Query);
    reply.metadata.recursion_available = true;
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.add_query(question.clone());
    let wants = question.query_type();
    let a = |ip: Ipv4Addr| Record::from_rdata(name.clone(), 60, RData::A(A(ip)));
    let aaaa = |ip: Ipv6Addr| Record::from_rdata(name.clone(), 60, RData::AAAA(AAAA(ip)));
    match (label.as_str(), wants) {
        ("silent", _) => return None,
        // Bytes that are no DNS message, with the query's id.
        ("garbage", _) => {
            let mut bytes = id.to_be_bytes().to_vec();
            bytes.extend_from_slice(&[0x81, 0x80, 0xff, 0xff, 0, 7, 0xde, 0xad]);
            return Some(bytes);
        }
        // Another query's answer.
        ("stranger", RecordType::A) => {
            let mut other = Message::response(id.wrapping_add(1), OpCode::Query);
            other.add_query(question.clone());
            other.add_answer(a(Ipv4Addr::LOCALHOST));
            return other.to_vec().ok();
        }
        ("ok" | "slow", RecordType::A) => {
            reply.add_answer(a(Ipv4Addr::LOCALHOST));
        }
        ("truncated", RecordType::A) => {
            if over_tcp {
                reply.add_answer(a(Ipv4Addr::LOCALHOST));
            } else {
                reply.metadata.truncation = true;
            }
        }
        ("many", RecordType::A) => {
            if over_tcp {
                for i in 0..MANY_RECORDS {
                    reply.add_answer(a(Ipv4Addr::from(0x7f00_0001 + i)));
                }
            } else {
                reply.metadata.truncation = true;
            }
        }
        // loop.test is a CNAME for loop2.test, which is one for loop.test.
        ("loop" | "loop2", _) => {
            let other = if label == "loop" { "loop2" } else { "loop" };
            let target = Name::from_ascii(format!("{other}.test.")).ok()?;
            reply.add_answer(Record::from_rdata(
                name.clone(),
                60,
                RData::CNAME(CNAME(target)),
            ));
        }
        ("zero", RecordType::A) => {
            reply.add_answer(a(Ipv4Addr::UNSPECIFIED));
        }
        ("multicast", RecordType::A) => {
            reply.add_answer(a(Ipv4Addr::new(224, 0, 0, 251)));
        }
        ("broadcast", RecordType::A) => {
            reply.add_answer(a(Ipv4Addr::BROADCAST));
        }
        // Only an IPv6 answer, an IPv4-mapped one: loopback.
        ("mapped", RecordType::AAAA) => {
            reply.add_answer(aaaa(Ipv4Addr::LOCALHOST.to_ipv6_mapped()));
        }
        ("nxdomain", _) => {
            reply.metadata.response_code = ResponseCode::NXDomain;
        }
        ("servfail", _) => {
            reply.metadata.response_code = ResponseCode::ServFail;
        }
        _ => {}
    }
    reply.metadata.message_type = MessageType::Response;
    reply.to_vec().ok()
}

/// Whether the server waits before answering this query.
fn is_slow(query: &[u8]) -> bool {
    query.windows(5).any(|w| w == b"\x04slow")
}

/// The fake server: UDP and TCP on one loopback port.
async fn fake_dns() -> (SocketAddr, Arc<Asked>) {
    // The TCP port the kernel gave the UDP socket may be another test's
    // (an outgoing connection's own port): then another pair is taken.
    let (udp, addr, tcp) = 'bound: {
        for _ in 0..100 {
            let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let addr = udp.local_addr().unwrap();
            match tokio::net::TcpListener::bind(addr).await {
                Ok(tcp) => break 'bound (Arc::new(udp), addr, tcp),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(e) => panic!("bind {addr}: {e}"),
            }
        }
        panic!("no port free for both UDP and TCP in 100 tries");
    };
    let asked = Arc::new(Asked::default());
    let counted = Arc::clone(&asked);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, from)) = udp.recv_from(&mut buf).await {
            counted.udp.fetch_add(1, Ordering::SeqCst);
            let query = buf[..n].to_vec();
            let udp = Arc::clone(&udp);
            tokio::spawn(async move {
                if is_slow(&query) {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                if let Some(reply) = respond(&query, false) {
                    let _ = udp.send_to(&reply, from).await;
                }
            });
        }
    });
    let counted = Arc::clone(&asked);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = tcp.accept().await {
            counted.tcp.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                loop {
                    let Ok(len) = stream.read_u16().await else {
                        return;
                    };
                    let mut query = vec![0u8; usize::from(len)];
                    if stream.read_exact(&mut query).await.is_err() {
                        return;
                    }
                    let Some(reply) = respond(&query, true) else {
                        continue;
                    };
                    let Ok(len) = u16::try_from(reply.len()) else {
                        return;
                    };
                    if stream.write_u16(len).await.is_err()
                        || stream.write_all(&reply).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, asked)
}

/// The lookup timeout of these runs: long enough for an answer over
/// loopback on a busy machine, short enough that a silent server costs
/// the test little.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs the probe with `args` under `policy`, its lookups going to the
/// fake server at `dns`.
async fn probe(dns: SocketAddr, policy: Policy, args: &[&str]) -> support::Finished {
    let options = RunOptions::new(policy)
        .arg(guests::PROBE)
        .args(args.iter().copied())
        .limits(Limits {
            lookup_timeout: LOOKUP_TIMEOUT,
            ..Limits::default()
        })
        .resolver(Arc::new(SystemResolver::with_name_servers(&[dns])))
        .stdin(moat_host::Input::Empty);
    start_with(guests::PROBE, options).finish().await
}

/// Every name the fake server knows, granted on every port.
fn granted() -> Policy {
    Policy::new().allow_connect("*.test").unwrap()
}

#[tokio::test]
async fn answers_that_fail_are_errors_the_guest_reads_and_the_next_lookup_works() {
    let (dns, _) = fake_dns().await;
    let (listener, port) = watched_port();
    let p = port.to_string();
    let not_resolved = |name: &str, why: &str| format!("error: name not resolved: {name}: {why}");
    // The guest reads which lookup took too long, and the flag to change.
    let timed_out = |name: &str| {
        format!(
            "error: lookup of {name} took longer than {LOOKUP_TIMEOUT:?}, the run's lookup \
             timeout (--lookup-timeout)"
        )
    };
    for (name, expected) in [
        ("silent.test", timed_out("silent.test")),
        ("slow.test", timed_out("slow.test")),
        // An answer to another query is no answer.
        ("stranger.test", timed_out("stranger.test")),
        (
            "garbage.test",
            not_resolved(
                "garbage.test",
                "the DNS server's answer is malformed: decoding error: unexpected end of \
                 input reached",
            ),
        ),
        (
            "nxdomain.test",
            not_resolved(
                "nxdomain.test",
                "no such name (the DNS server answered NXDOMAIN)",
            ),
        ),
        (
            "servfail.test",
            not_resolved("servfail.test", "the DNS server answered Server Failure"),
        ),
        (
            "loop.test",
            not_resolved("loop.test", "the name has no address"),
        ),
    ] {
        let done = probe(dns, granted(), &["connect", name, &p]).await;
        assert_eq!(done.code(), 1, "{name}: {}", done.stdout);
        assert_eq!(done.stderr.trim(), expected, "{name}");
    }
    assert_eq!(connections(&listener), 0);
    // The same host, the same resolver configuration: an answer that works.
    let done = probe(dns, granted(), &["connect", "ok.test", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout.trim(), format!("connected to 127.0.0.1:{port}"));
    assert_eq!(connections(&listener), 1);
}

#[tokio::test]
async fn a_truncated_answer_is_asked_again_over_tcp_and_a_huge_one_still_connects() {
    let (dns, asked) = fake_dns().await;
    let (listener, port) = watched_port();
    let p = port.to_string();
    let done = probe(dns, granted(), &["connect", "truncated.test", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout.trim(), format!("connected to 127.0.0.1:{port}"));
    assert!(asked.tcp.load(Ordering::SeqCst) >= 1, "no query over TCP");
    // 600 addresses: the first is where the listener is.
    let done = probe(dns, granted(), &["connect", "many.test", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout.trim(), format!("connected to 127.0.0.1:{port}"));
    assert_eq!(connections(&listener), 2);
}

#[tokio::test]
async fn answers_that_name_a_refused_address_are_denied_by_the_deny_list() {
    let (dns, _) = fake_dns().await;
    let (listener, port) = watched_port();
    let p = port.to_string();
    let fenced = granted().deny_connect("private").unwrap();
    for (name, address) in [
        ("multicast.test", "224.0.0.251"),
        ("broadcast.test", "255.255.255.255"),
        // An IPv6 answer that carries an IPv4 one: judged as 127.0.0.1.
        ("mapped.test", "127.0.0.1"),
        ("ok.test", "127.0.0.1"),
    ] {
        let done = probe(dns, fenced.clone(), &["connect", name, &p]).await;
        assert_eq!(done.code(), 1, "{name}: {}", done.stdout);
        assert_eq!(
            done.stderr.trim(),
            format!(
                "error: connect to {name}:{port} denied by --deny-net=private \
                 (it resolved to {address})"
            )
        );
    }
    // 0.0.0.0 is this machine to Linux: never a destination, deny list or
    // not.
    for policy in [granted(), fenced] {
        let done = probe(dns, policy, &["connect", "zero.test", &p]).await;
        assert_eq!(
            done.stderr.trim(),
            "error: invalid argument: zero.test resolved to 0.0.0.0, the unspecified \
             address, which is not a destination"
        );
    }
    assert_eq!(connections(&listener), 0);
}
