//! The classes of wasmtime's November 2026 advisories that apply to moat
//! (GHSA-5m8g-xhq4-4h93 and GHSA-f8mm-ggr3-89wh: zero-length writes queue
//! without bound; a UDP send that names another address on a connected
//! socket; an outgoing body that disagrees with its `Content-Length`),
//! each as a hostile guest tries it through raw wasi 0.2 calls, checked by
//! what the host holds and what the peer receives.

use std::io::Read as _;
use std::net::{TcpListener, UdpSocket};

use std::sync::Arc;

use crate::support::{self, guests};
use moat_host::net::{Resolver, TlsTrust};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};

/// Zero-length writes a guest makes on each stream: the advisories' floods
/// grew the host by a job (tens of bytes) per write, 10^6 of them by tens
/// of MiB.
const EMPTY_WRITES: u64 = 1_000_000;

/// What the host's peak resident memory may grow by during one flood:
/// the guest's own memory and the allocator's slack, with room; a queued
/// job per write would take more.
const FLOOD_PEAK_BOUND: u64 = 24 << 20;

/// How much the process's peak resident memory rose above what it held
/// when `f` began, while `f` ran.
async fn peak_growth<T>(f: impl Future<Output = T>) -> (T, u64) {
    support::reset_peak_rss();
    let before = support::rss();
    let out = f.await;
    (out, support::peak_rss().saturating_sub(before))
}

/// A listener on loopback whose first connection is read to its end on a
/// thread; the bytes read.
fn sink() -> (u16, std::thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut all = Vec::new();
        conn.read_to_end(&mut all).unwrap();
        all
    });
    (port, reader)
}

/// An HTTP/1.1 server on loopback that reads one request (a body by
/// `Content-Length` or chunked), answers 200 and closes; the request's
/// head and body (as sent, chunk framing included).
fn http_sink() -> (u16, std::thread::JoinHandle<(String, Vec<u8>)>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(support::PATIENCE)).unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let lower = head.to_ascii_lowercase();
        let mut body = Vec::new();
        if let Some(length) = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|n| n.trim().parse::<usize>().ok())
        {
            body.resize(length, 0);
            let got = reader.read(&mut body).unwrap_or(0);
            let mut got = got;
            while got < length {
                match reader.read(&mut body[got..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            body.truncate(got);
        } else {
            // Chunked: to the last chunk (or the connection's end).
            while !body.ends_with(b"0\r\n\r\n") {
                let mut line = Vec::new();
                if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                    break;
                }
                body.extend_from_slice(&line);
            }
        }
        let mut conn = conn;
        let _ =
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        (head, body)
    });
    (port, reader)
}

/// An HTTPS server for `h2.test` that speaks HTTP/2 only and answers each
/// request with how many body bytes it read, as `read N`; its port.
async fn h2_sink(ca: &support::certs::Ca) -> u16 {
    use http_body_util::{BodyExt as _, Full};
    use hyper::server::conn::http2;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let acceptor = ca.leaf(&["h2.test"]).acceptor(&["h2"]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        let read = req.into_body().collect().await.map(|b| b.to_bytes().len());
                        let text = format!("read {}", read.unwrap_or(0));
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            bytes::Bytes::from(text),
                        )))
                    },
                );
                let _ = http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

/// Runs the hostile guest with `args` under a grant of 127.0.0.1:`port`;
/// its stdout, and how far the host's peak rose above what it held when
/// the guest started.
async fn hostile(port: u16, args: &[&str]) -> (String, u64) {
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let (done, grown) = peak_growth(support::run(guests::HOSTILE, policy, args)).await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    (done.stdout, grown)
}

/// A million zero-length writes to stdout, to a wasi:sockets TCP stream
/// and to an outgoing wasi:http body over HTTP/1.1 and over HTTP/2: each
/// is taken as nothing, the peer gets exactly the bytes after them, and
/// the host's peak grows by less than [`FLOOD_PEAK_BOUND`].
#[test]
fn a_million_empty_writes_on_every_stream_hold_nothing() {
    crate::in_turn(async {
        let n = EMPTY_WRITES.to_string();
        // A first run warms the engine, the compiled guest and the allocator.
        hostile(9, &["empty-writes", "1000", "stdout"]).await;
        hostile(9, &["empty-writes", &n, "stdout"]).await;
        let (out, grown) = hostile(9, &["empty-writes", &n, "stdout"]).await;
        assert!(out.ends_with(&format!("end\nwrote {n} empty\n")), "{out}");
        let mut growth = vec![("stdout", grown)];

        let (port, read) = sink();
        let (out, grown) = hostile(port, &["empty-writes", &n, "tcp", &port.to_string()]).await;
        assert_eq!(out, format!("wrote {n} empty\n"));
        assert_eq!(read.join().unwrap(), b"end", "the bytes after them, alone");
        growth.push(("a wasi:sockets stream", grown));

        let (port, read) = http_sink();
        let (out, grown) = hostile(port, &["empty-writes", &n, "http", &port.to_string()]).await;
        assert_eq!(out, format!("wrote {n} empty\nresponse: status 200\n"));
        let (_, body) = read.join().unwrap();
        assert_eq!(body, b"3\r\nend\r\n0\r\n\r\n", "one chunk, no empty ones");
        growth.push(("an outgoing wasi:http body", grown));

        // Over HTTP/2 (GHSA-f8mm-ggr3-89wh): each empty write was an empty
        // DATA frame queued in h2 without bound.
        let ca = support::certs::Ca::new("moat advisories CA");
        let port = h2_sink(&ca).await;
        let options = RunOptions::new(Policy::new().allow_connect("h2.test").unwrap())
            .arg(guests::HOSTILE)
            .args(["empty-writes", &n, "https", &format!("h2.test:{port}")])
            .stdin(Input::Empty)
            .resolver(support::Names::new(&[("h2.test", "127.0.0.1")]) as Arc<dyn Resolver>)
            .tls_trust(TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap());
        let (done, grown) =
            peak_growth(support::start_with(guests::HOSTILE, options).finish()).await;
        assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
        assert_eq!(
            done.stdout,
            format!("wrote {n} empty\nresponse: status 200\n")
        );
        growth.push(("an outgoing wasi:http body over HTTP/2", grown));

        for (stream, grown) in growth {
            eprintln!(
                "{n} empty writes to {stream}: the host's peak grew {} KiB",
                grown >> 10
            );
            assert!(
                grown < FLOOD_PEAK_BOUND,
                "{n} empty writes to {stream} grew the host's peak by {} MiB",
                grown >> 20
            );
        }
    });
}

/// A UDP socket streamed to a granted address sends a datagram naming an
/// address no grant covers: refused as an invalid argument, and nothing
/// arrives there; its own remote still gets its datagram.
#[test]
fn a_connected_udp_socket_sends_only_to_its_remote() {
    crate::in_turn(async {
        let granted = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        other.set_nonblocking(true).unwrap();
        granted.set_read_timeout(Some(support::PATIENCE)).unwrap();
        let (g, o) = (
            granted.local_addr().unwrap().port(),
            other.local_addr().unwrap().port(),
        );
        let (out, _) = hostile(g, &["udp-elsewhere", &g.to_string(), &o.to_string()]).await;
        let (elsewhere, own) = out.split_once('\n').unwrap_or_default();
        assert!(elsewhere.contains("invalid-argument"), "{out}");
        assert_eq!(own, "own: sent 1\n");
        let mut buf = [0u8; 64];
        let (len, _) = granted.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"own");
        // The own datagram was sent after the other, and loopback delivers
        // at the send: had the other gone out, it would be there by now.
        assert!(
            other.recv_from(&mut buf).is_err(),
            "nothing reached the other address"
        );
    });
}

/// A body shorter than its `Content-Length` and one longer: the guest is
/// told (the write or the finish fails, the request errs), and the server
/// never gets a whole request. Before, a 10-byte write under a declared 5
/// failed for the guest, but hyper sent the first 5 bytes, a whole request
/// the server acted on (it answered 200).
#[test]
fn an_outgoing_body_that_disagrees_with_its_content_length_is_refused() {
    crate::in_turn(async {
        for (declared, written) in [(10u64, 5u64), (5, 10)] {
            let (port, read) = http_sink();
            let (out, _) = hostile(
                port,
                &[
                    "content-length",
                    &port.to_string(),
                    &declared.to_string(),
                    &written.to_string(),
                ],
            )
            .await;
            // The guest is told: the write past the length or the finish
            // short of it fails, and the request with it.
            assert!(
                out.contains("finish: ErrorCode::HttpRequestBodySize")
                    && out.contains("response: ErrorCode::"),
                "declared {declared}, wrote {written}: {out}"
            );
            let (head, body) = read.join().unwrap();
            eprintln!(
                "declared {declared}, wrote {written}: {out:?}, the server read {head:?} {body:?}"
            );
            assert!(
                head.is_empty()
                    || head
                        .to_ascii_lowercase()
                        .contains(&format!("content-length: {declared}")),
                "{head}"
            );
            assert!(
                (body.len() as u64) < declared,
                "declared {declared}, wrote {written}: the server read {} bytes",
                body.len()
            );
        }
    });
}
