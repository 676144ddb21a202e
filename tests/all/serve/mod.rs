//! `moat serve` as a user runs it: a `moat serve` process per test, on a
//! port of its own, answering curl and raw HTTP/1.1 clients; its bounds
//! (body size, header time, connections, a handler's memory and time), its
//! grants for the handler's own requests, SIGTERM, and the setups it
//! refuses.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{self, eventually, guests, have, within};
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::watch;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// What `moat serve` prints once it listens, before the URL.
const SERVING: &str = "moat: serving http";

/// wstd-serve's answer to `GET /`.
const HELLO: &str = "hello from a wasi:http handler\n";

fn cache_flag() -> String {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache");
    format!("--cache-dir={}", cache.display())
}

/// What a child printed on stderr so far, and whether the pipe closed.
#[derive(Clone, Default)]
struct Seen {
    text: String,
    closed: bool,
}

/// Reads `pipe` to its end into `seen`, so that the child never blocks on
/// a full pipe, however long the test goes on after it stops looking.
fn drain(mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> watch::Receiver<Seen> {
    let (tx, rx) = watch::channel(Seen::default());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let more = String::from_utf8_lossy(&buf[..n]).into_owned();
                    tx.send_modify(|seen| seen.text.push_str(&more));
                }
            }
        }
        tx.send_modify(|seen| seen.closed = true);
    });
    rx
}

/// A `moat serve` process on a port of its own; killed when dropped, so a
/// failing test leaves no server behind.
struct Serve {
    child: Child,
    stderr: watch::Receiver<Seen>,
    addr: SocketAddr,
}

impl Serve {
    /// `moat serve --addr=127.0.0.1:0 FLAGS COMPONENT`, once it says where
    /// it listens.
    async fn start(component: &str, flags: &[&str]) -> Serve {
        Serve::start_logging(component, flags, None).await
    }

    /// As [`start`](Self::start), with `RUST_LOG` set to `log`.
    async fn start_logging(component: &str, flags: &[&str], log: Option<&str>) -> Serve {
        Serve::start_with(component, flags, log, &cache_flag()).await
    }

    /// As [`start`](Self::start), compiling into (or loading from) the
    /// cache of `cache_flag` (`--cache-dir=DIR`).
    async fn start_cached(component: &str, flags: &[&str], cache_flag: &str) -> Serve {
        Serve::start_with(component, flags, None, cache_flag).await
    }

    async fn start_with(
        component: &str,
        flags: &[&str],
        log: Option<&str>,
        cache_flag: &str,
    ) -> Serve {
        let mut command = Command::new(MOAT);
        match log {
            Some(filter) => command.env("RUST_LOG", filter),
            None => command.env_remove("RUST_LOG"),
        };
        let mut child = command
            .arg("serve")
            .arg(cache_flag)
            .arg("--addr=127.0.0.1:0")
            .args(flags)
            .arg(component)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("moat starts");
        let mut stderr = drain(child.stderr.take().unwrap());
        let seen = within(
            "moat serve saying where it serves",
            stderr.wait_for(|seen| {
                seen.closed
                    || seen
                        .text
                        .split_once(SERVING)
                        .is_some_and(|(_, rest)| rest.contains('\n'))
            }),
        )
        .await
        .expect("the stderr reader")
        .clone();
        let Some((_, rest)) = seen.text.split_once(SERVING) else {
            panic!("moat serve {flags:?} ended without serving:\n{}", seen.text);
        };
        let addr = rest
            .lines()
            .next()
            .map(|line| line.trim_start_matches("s://").trim_start_matches("://"))
            .and_then(|line| line.strip_suffix('/'))
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {:?}", seen.text));
        Serve {
            child,
            stderr,
            addr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.borrow().text.clone()
    }

    /// Waits until stderr holds `needle`.
    async fn wait_for_stderr(&mut self, needle: &str) {
        let seen = within(
            &format!("{needle:?} on moat serve's stderr"),
            self.stderr
                .wait_for(|seen| seen.closed || seen.text.contains(needle)),
        )
        .await
        .expect("the stderr reader")
        .clone();
        if !seen.text.contains(needle) {
            let status = within("moat serve exiting", self.child.wait()).await;
            panic!(
                "moat serve ended ({status:?}) without printing {needle:?}:\n{}",
                seen.text
            );
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM, as a process manager stops a server.
    fn terminate(&self) {
        let pid = self.child.id().expect("moat serve is running");
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .expect("SIGTERM sent");
    }

    /// Waits for the process to exit.
    async fn exited(&mut self) -> ExitStatus {
        within("moat serve exiting", self.child.wait())
            .await
            .expect("moat serve's status")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// `moat serve ARGS` that should not start serving: its exit status and
/// stderr.
async fn serve_refused(args: &[&str]) -> (Option<i32>, String) {
    let out = within(
        "moat serve giving up",
        Command::new(MOAT)
            .arg("serve")
            .arg(cache_flag())
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("moat runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One HTTP/1.1 response as a client reads it.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    /// The id of the request whose handler failed, from the 500 its
    /// client got (which names nothing else of the failure).
    fn failed_request(&self) -> String {
        let text = self.text();
        let id = text
            .strip_prefix("the handler failed (request ")
            .and_then(|rest| rest.strip_suffix(")\n"));
        match (self.status, id) {
            (500, Some(id)) if !id.is_empty() && !id.contains(' ') => id.to_owned(),
            _ => panic!("not a failed handler's 500: {self:?}"),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = &self.body[..self.body.len().min(300)];
        write!(
            f,
            "{}[{} body bytes] {:?}",
            self.head,
            self.body.len(),
            String::from_utf8_lossy(shown)
        )
    }
}

fn broken(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// A response head, up to and with its blank line.
async fn read_head(from: &mut (impl AsyncBufRead + Unpin)) -> io::Result<String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if from.read_until(b'\n', &mut head).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the connection ended in the head: {:?}",
                    String::from_utf8_lossy(&head)
                ),
            ));
        }
    }
    String::from_utf8(head).map_err(|e| broken(format!("a head that is not UTF-8: {e}")))
}

/// One response: the head, then the body as the head frames it (chunked,
/// a Content-Length, or up to the end of the connection).
async fn read_answer(from: &mut (impl AsyncBufRead + Unpin)) -> io::Result<Answer> {
    let head = read_head(from).await?;
    read_body(from, head).await
}

/// The body that follows `head`, framed as `head` says.
async fn read_body(from: &mut (impl AsyncBufRead + Unpin), head: String) -> io::Result<Answer> {
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| broken(format!("no status in {head:?}")))?;
    let mut answer = Answer {
        status,
        head,
        body: Vec::new(),
    };
    let chunked = answer
        .header("transfer-encoding")
        .is_some_and(|te| te.eq_ignore_ascii_case("chunked"));
    let length = answer.header("content-length").map(str::to_owned);
    if chunked {
        loop {
            let mut line = String::new();
            from.read_line(&mut line).await?;
            let size = line.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| broken(format!("a chunk size of {line:?}")))?;
            if size == 0 {
                // The trailers, if any, and the blank line.
                loop {
                    let mut trailer = String::new();
                    if from.read_line(&mut trailer).await? == 0 || trailer == "\r\n" {
                        break;
                    }
                }
                break;
            }
            let at = answer.body.len();
            answer.body.resize(at + size, 0);
            from.read_exact(&mut answer.body[at..]).await?;
            let mut crlf = [0u8; 2];
            from.read_exact(&mut crlf).await?;
            if &crlf != b"\r\n" {
                return Err(broken(format!("a chunk ending in {crlf:?}")));
            }
        }
    } else if let Some(length) = length {
        let length: usize = length
            .parse()
            .map_err(|_| broken(format!("a Content-Length of {length:?}")))?;
        answer.body.resize(length, 0);
        from.read_exact(&mut answer.body).await?;
    } else {
        from.read_to_end(&mut answer.body).await?;
    }
    Ok(answer)
}

/// Sends `head` and `body` on a new connection (the writing beside the
/// reading, as a client streaming a body does) and reads one answer.
async fn exchange(addr: SocketAddr, head: String, body: Vec<u8>) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("moat serve accepts");
    let (from, mut to) = stream.into_split();
    let writing = tokio::spawn(async move {
        to.write_all(head.as_bytes()).await?;
        to.write_all(&body).await?;
        // Kept open: some servers take a half-close for a client gone.
        Ok::<_, io::Error>(to)
    });
    let answer = within(
        "an answer from moat serve",
        read_answer(&mut BufReader::new(from)),
    )
    .await
    .expect("a whole answer");
    writing.await.unwrap().expect("the request is sent");
    answer
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    exchange(addr, head, Vec::new()).await
}

/// `GET /slow` on a connection of its own, returned once the handler's
/// fifth tick is in (it ticks every 100 ms until its time is up): the
/// handler then holds an instance and a place in 127.0.0.1's share until
/// its --timeout cuts it off.
async fn slow_and_ticking(addr: SocketAddr) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    let mut ticks = 0;
    while ticks < 5 {
        line.clear();
        within("the slow handler's ticks", stream.read_line(&mut line))
            .await
            .unwrap();
        ticks += usize::from(line.contains("tick"));
    }
    stream
}

/// `GET /slow` from 127.0.0.1 on a task of its own: the whole answer, as
/// text, once the server closes the connection.
fn slow_answer(addr: SocketAddr) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut all = Vec::new();
        let _ = stream.read_to_end(&mut all).await;
        String::from_utf8_lossy(&all).into_owned()
    })
}

async fn post(addr: SocketAddr, path: &str, body: Vec<u8>) -> Answer {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    exchange(addr, head, body).await
}

/// `body` in chunked framing, `chunk` bytes a chunk, with the last chunk.
fn chunked(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut framed = Vec::with_capacity(body.len() + body.len() / chunk * 10 + 5);
    for piece in body.chunks(chunk) {
        framed.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        framed.extend_from_slice(piece);
        framed.extend_from_slice(b"\r\n");
    }
    framed.extend_from_slice(b"0\r\n\r\n");
    framed
}

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// POSTs `body` to `url` with curl (from its stdin, with `extra` flags);
/// the status code and the response body.
async fn curl_post(url: &str, body: &[u8], extra: &[&str]) -> (String, Vec<u8>) {
    let mut curl = Command::new("curl")
        .args(["-sS", "--http1.1", "--data-binary", "@-"])
        .args(extra)
        .args(["--write-out", "\n%{http_code}", url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("curl runs");
    let mut stdin = curl.stdin.take().unwrap();
    let body = body.to_vec();
    let writing = tokio::spawn(async move { stdin.write_all(&body).await });
    let out = within("curl posting", curl.wait_with_output())
        .await
        .unwrap();
    writing.await.unwrap().expect("curl reads the body");
    assert!(
        out.status.success(),
        "curl {extra:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let split = out
        .stdout
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("curl's status line");
    (
        String::from_utf8_lossy(&out.stdout[split + 1..]).into_owned(),
        out.stdout[..split].to_vec(),
    )
}

mod audit;
mod engines;
mod h2;
mod http10;
mod isolation;
mod listen;
mod metrics;
mod observe;
mod p3;
mod reload;
/// An HTTP server on 127.0.0.1 that answers every request with 200 and
/// `body`, one request a connection; its port, and how many connections
/// it accepted.
async fn upstream(body: &'static str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                if read_head(&mut stream).await.is_err() {
                    return;
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.get_mut().write_all(answer.as_bytes()).await;
                let _ = stream.get_mut().shutdown().await;
            });
        }
    });
    (port, accepted)
}

/// A test CA and a leaf for `localhost`, written to a directory of their
/// own (`ca.pem`, `cert.pem`, `key.pem`): the directory and moat serve's
/// `--tls-cert=` and `--tls-key=` flags for them.
fn tls_files(name: &str) -> (PathBuf, String, String) {
    let ca = crate::support::certs::Ca::new("moat serve test CA");
    let leaf = ca.leaf(&["localhost"]);
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &leaf.key_pem).unwrap();
    let cert = format!("--tls-cert={}", dir.join("cert.pem").display());
    let key = format!("--tls-key={}", dir.join("key.pem").display());
    (dir, cert, key)
}

mod requests;
mod secrets;
mod slow_clients;
mod tls;
