//! A listener outlives a failing `accept`. With the process out of file
//! descriptors, the kernel completes a client's handshake but `accept`
//! fails with EMFILE; the accept task must log it, back off and retry, and
//! hand the connection over once descriptors are free again, for plain and
//! TLS listeners alike.
//!
//! The descriptor limit is the process's, so this is a test binary of its
//! own, and its tests take turns.

use crate::in_turn;

use std::fs::File;
use std::future::Future;
use std::future::poll_fn;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, OnceLock};

use crate::support::certs::Ca;
use crate::support::{eventually, within};
use moat_host::net::{ListenOptions, Net, TcpListener, TlsServerOptions};
use moat_host::policy::Policy;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use rustls::pki_types::ServerName;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

/// What the host logged, kept in memory to be searched.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// The log lines containing `needle`.
    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|line| line.contains(needle))
            .count()
    }
}

/// The process's log, captured from the first call on.
fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        logs
    })
}

/// Uses up every free file descriptor until dropped, then restores the
/// limit: the soft limit is lowered just above the descriptors open now,
/// and the gaps below it are filled with /dev/null.
struct Exhausted {
    fillers: Vec<File>,
    limit: Rlimit,
}

/// How many descriptors above the highest open one the lowered limit
/// leaves, to be filled: any small number proves the point.
const HEADROOM: u64 = 4;

impl Exhausted {
    fn now() -> Exhausted {
        let limit = getrlimit(Resource::Nofile);
        let highest = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u64>().ok())
            .max()
            .unwrap();
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(highest + 1 + HEADROOM),
                maximum: limit.maximum,
            },
        )
        .unwrap();
        let mut fillers = Vec::new();
        loop {
            match File::open("/dev/null") {
                Ok(file) => fillers.push(file),
                Err(e) if e.raw_os_error() == Some(24) => break, // EMFILE
                Err(e) => panic!("filling descriptors: {e}"),
            }
        }
        Exhausted { fillers, limit }
    }
}

impl Drop for Exhausted {
    fn drop(&mut self) {
        self.fillers.clear();
        setrlimit(Resource::Nofile, self.limit).unwrap();
    }
}

/// Connects a client while no descriptor is free, waits until the
/// listener has failed to accept it (twice: the first failure, then a retry
/// after the backoff), frees descriptors, takes the connection the listener
/// then hands out and sends `message` over it. `client` is the peer's side
/// (plain or TLS): it gets the connected stream and returns all it read.
async fn accepts_after_emfile<C, F>(listener: TcpListener, client: C, message: &[u8])
where
    C: FnOnce(TcpStream) -> F,
    F: Future<Output = Vec<u8>> + Send + 'static,
{
    let addr = listener.local_addr().unwrap();
    let failures_before = logs().count("Too many open files");
    // The client's socket is made first: connecting takes no descriptor.
    let socket = TcpSocket::new_v4().unwrap();
    let exhausted = Exhausted::now();
    let stream = within("connect", socket.connect(addr)).await.unwrap();
    let reading = tokio::spawn(client(stream));
    eventually("two failed accepts logged", || {
        logs().count("Too many open files") >= failures_before + 2
    })
    .await;
    drop(exhausted);
    let conn = within(
        "accept once descriptors are free",
        listener.queue().accept(),
    )
    .await
    .expect("the listener closed after accept failed");

    let (mut writer, _) = conn.writer().unwrap();
    let mut rest = message;
    while !rest.is_empty() {
        let n = poll_fn(|cx| writer.poll_write(cx, rest)).await.unwrap();
        rest = &rest[n..];
    }
    drop(writer);
    drop(conn);
    let got = within("the client reads", reading).await.unwrap();
    assert_eq!(got, message);
}

#[test]
fn a_plain_listener_accepts_again_once_descriptors_are_free() {
    in_turn(plain_listener());
}

async fn plain_listener() {
    let listener = Net::new(Policy::allow_all())
        .listen("127.0.0.1", 0, &ListenOptions::default())
        .await
        .unwrap();
    let client = |mut stream: TcpStream| async move {
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        got
    };
    accepts_after_emfile(listener, client, b"accepted after EMFILE").await;
}

#[test]
fn a_tls_listener_accepts_again_once_descriptors_are_free() {
    in_turn(tls_listener());
}

async fn tls_listener() {
    let ca = Ca::new("moat accept-errors CA");
    let options = TlsServerOptions {
        identity: ca.leaf(&["localhost"]).identity(),
        alpn: Vec::new(),
        client_roots_pem: None,
        handshake_timeout: None,
    };
    let listener = Net::new(Policy::allow_all())
        .listen_tls("127.0.0.1", 0, &ListenOptions::default(), &options)
        .await
        .unwrap();
    let connector = ca.connector(&[]);
    let client = |stream: TcpStream| async move {
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, stream).await.unwrap();
        let mut got = Vec::new();
        tls.read_to_end(&mut got).await.unwrap();
        got
    };
    accepts_after_emfile(listener, client, b"accepted over TLS after EMFILE").await;
}

/// With no descriptor free, a connect, a listen and a UDP bind each fail
/// at once with the operating system's reason (not a panic, not a hang),
/// and work again, bytes and all, once descriptors are free.
#[test]
fn connect_listen_and_bind_at_the_descriptor_limit_fail_with_the_reason_and_recover() {
    in_turn(at_the_limit());
}

async fn at_the_limit() {
    use moat_host::net::{BindOptions, ConnectOptions};
    use tokio::io::AsyncWriteExt;

    let net = Net::new(Policy::allow_all());
    let peer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let exhausted = Exhausted::now();
    let emfile = |what: &str, err: moat_host::net::NetError| {
        assert!(
            err.to_string().contains("Too many open files"),
            "{what}: {err:?}"
        );
    };
    emfile(
        "connect",
        within(
            "connect",
            net.connect("127.0.0.1", port, &ConnectOptions::default()),
        )
        .await
        .err()
        .expect("a connect with no descriptor"),
    );
    emfile(
        "listen",
        net.listen("127.0.0.1", 0, &ListenOptions::default())
            .await
            .err()
            .expect("a listen with no descriptor"),
    );
    emfile(
        "UDP bind",
        net.bind_udp("127.0.0.1", 0, &BindOptions::default())
            .await
            .err()
            .expect("a bind with no descriptor"),
    );
    drop(exhausted);

    let conn = within(
        "connect again",
        net.connect("127.0.0.1", port, &ConnectOptions::default()),
    )
    .await
    .unwrap();
    let (mut accepted, _) = within("accept", peer.accept()).await.unwrap();
    accepted.write_all(b"after EMFILE").await.unwrap();
    drop(accepted);
    let (mut reader, _) = conn.reader().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        match poll_fn(|cx| reader.poll_read(cx, &mut buf)).await.unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    assert_eq!(got, b"after EMFILE");
    assert!(
        net.listen("127.0.0.1", 0, &ListenOptions::default())
            .await
            .is_ok()
    );
}
