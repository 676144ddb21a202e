//! A wasi:http body is streamed, never held: a guest that downloads or
//! uploads far more than the host should keep grows the host's resident
//! memory by a bounded amount.

use crate::in_turn;
use crate::support::{guest, guests, moat, rss, start_with, within};
use moat_host::policy::Policy;
use moat_host::{Captured, Input, Output, RunOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a 256 MiB body may grow the host by: hyper's buffers, a chunk in
/// flight each way, wasmtime-wasi-http's 1 MiB outgoing chunk and the
/// guest's own memory, with room; far less than the body.
const GROWTH_BOUND: u64 = 96 << 20;

const BODY: usize = 256 << 20;

/// A server that answers one GET with `BODY` bytes, and one POST by
/// reading the whole body and answering its length.
async fn server() -> (u16, tokio::task::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await.unwrap() == 0 {
                return 0;
            }
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_lowercase();
        if head.starts_with("get") {
            stream
                .write_all(format!("HTTP/1.1 200 OK\r\ncontent-length: {BODY}\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..BODY >> 20 {
                stream.write_all(&chunk).await.unwrap();
            }
            BODY
        } else {
            // A chunked upload: read to the end, count what is not framing.
            let mut total = 0;
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                total += n;
                if buf[..n].ends_with(b"0\r\n\r\n") {
                    break;
                }
            }
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nyes")
                .await
                .unwrap();
            total
        }
    });
    (port, task)
}

#[test]
fn a_quarter_gib_body_streams_through_without_the_host_holding_it() {
    in_turn(async {
        // Down: the guest writes the body to a stdout that discards it.
        let (port, served) = server().await;
        let before = rss();
        let stderr = Captured::new();
        let options = RunOptions::new(
            Policy::new()
                .allow_connect(&format!("127.0.0.1:{port}"))
                .unwrap(),
        )
        .arg(guests::WSTD_FETCH)
        .arg(format!("http://127.0.0.1:{port}/big"))
        .stdin(Input::Empty)
        .stdout(Output::Discard)
        .stderr(Output::Capture(stderr.clone()));
        // Run here, not with `start_with`, whose captured stdout would
        // stop the guest at its 16 MiB bound.
        let exit = moat().run(&guest(guests::WSTD_FETCH), options).await;
        let stderr = String::from_utf8_lossy(&stderr.contents()).into_owned();
        assert_eq!(exit.map(|e| e.code()).ok(), Some(0), "{stderr}");
        assert_eq!(within("the server", served).await.unwrap(), BODY);
        let grown = rss().saturating_sub(before);
        assert!(
            grown < GROWTH_BOUND,
            "a {BODY}-byte download grew the host by {grown} bytes"
        );

        // Up: the guest streams a body it generates (http-probe's post).
        let (port, served) = server().await;
        let before = rss();
        let options = RunOptions::new(
            Policy::new()
                .allow_connect(&format!("127.0.0.1:{port}"))
                .unwrap(),
        )
        .arg(guests::HTTP_PROBE)
        .args([
            "post",
            &format!("http://127.0.0.1:{port}/up"),
            &BODY.to_string(),
        ])
        .stdin(Input::Empty);
        let done = start_with(guests::HTTP_PROBE, options).finish().await;
        assert!(
            done.stdout
                .starts_with(&format!("sent {BODY}\nstatus: 200\n")),
            "{}{}",
            done.stdout,
            done.stderr
        );
        assert!(within("the server", served).await.unwrap() > BODY);
        let grown = rss().saturating_sub(before);
        assert!(
            grown < GROWTH_BOUND,
            "a {BODY}-byte upload grew the host by {grown} bytes"
        );

        // Up through wasi:http 0.3: the guest writes its body to a stream
        // the host reads 64 KiB at a time while it sends.
        let (port, served) = server().await;
        let before = rss();
        let options = RunOptions::new(
            Policy::new()
                .allow_connect(&format!("127.0.0.1:{port}"))
                .unwrap(),
        )
        .arg(guests::HTTP_P3)
        .args([
            "post",
            &format!("http://127.0.0.1:{port}/up"),
            &BODY.to_string(),
        ])
        .stdin(Input::Empty);
        let done = start_with(guests::HTTP_P3, options).finish().await;
        assert!(
            done.stdout
                .starts_with(&format!("sent {BODY}\nstatus: 200\n")),
            "{}{}",
            done.stdout,
            done.stderr
        );
        assert!(within("the server", served).await.unwrap() > BODY);
        let grown = rss().saturating_sub(before);
        assert!(
            grown < GROWTH_BOUND,
            "a {BODY}-byte wasi:http 0.3 upload grew the host by {grown} bytes"
        );
    });
}
