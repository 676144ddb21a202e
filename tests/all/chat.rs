//! The `chat` example under `moat run`: a client that does not read is
//! dropped as too slow, and the healthy ones still get every line, in
//! order, while the server keeps serving.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{eventually, guests, within};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::{TcpSocket, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::watch;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// Clients that read all the time; the first one sends the burst.
const HEALTHY: usize = 8;

/// Lines the sender writes at once. Rounds go on until the server drops the
/// slow client: how much its socket absorbs first depends on the kernel.
const ROUND: usize = 2_000;

/// Rounds after which the slow client should long have been dropped
/// (20 MB, several times what loopback buffers hold).
const MAX_ROUNDS: usize = 100;

/// `moat run` serving the chat guest, and its stdout so far.
struct Server {
    child: Child,
    stdout: watch::Receiver<String>,
}

impl Server {
    fn start() -> Server {
        let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("chat-cache");
        let mut child = Command::new(MOAT)
            .arg("run")
            .arg(format!("--cache-dir={}", cache.display()))
            .arg("--allow-listen=127.0.0.1:0")
            .args([guests::CHAT, "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("moat runs");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let (tx, stdout) = watch::channel(String::new());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                tx.send_modify(|out| {
                    out.push_str(&line);
                    out.push('\n');
                });
            }
        });
        Server { child, stdout }
    }

    fn printed(&self) -> String {
        self.stdout.borrow().clone()
    }

    /// Waits until stdout holds `needle`, and returns stdout.
    async fn wait_for(&mut self, needle: &str) -> String {
        let seen = self.stdout.wait_for(|out| out.contains(needle));
        // Copied out at once: the borrow of stdout ends here.
        let seen = within(&format!("waiting for {needle:?}"), seen)
            .await
            .map(|out| String::clone(&out));
        match seen {
            Ok(out) => out,
            Err(_) => panic!(
                "moat ended without printing {needle:?}:\n{}",
                self.printed()
            ),
        }
    }
}

/// Line `n` of the burst: 101 bytes, its number and a letter that changes
/// with it.
fn burst_line(n: usize) -> String {
    let letter = char::from(b'a' + (n % 26) as u8);
    format!("line {n:07} {}\n", letter.to_string().repeat(87))
}

/// The next line, `\n` included; the end of the stream fails the test.
async fn next_line(reader: &mut BufReader<OwnedReadHalf>, who: &str) -> Vec<u8> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).await.unwrap();
    assert!(
        line.ends_with(b"\n"),
        "{who}: the server closed the connection"
    );
    line
}

/// Every client in `readers` gets `hello` next. The client that sent it is
/// registered (the server registers a client before it reads from it), and
/// so is each client that got it.
async fn roll_call(readers: &mut [BufReader<OwnedReadHalf>], hello: &str) {
    for (i, reader) in readers.iter_mut().enumerate() {
        let got = within("the roll call", next_line(reader, &format!("client {i}"))).await;
        assert_eq!(String::from_utf8_lossy(&got), hello, "client {i}");
    }
}

#[tokio::test]
async fn a_client_that_does_not_read_is_dropped_and_the_others_get_every_line() {
    let mut server = Server::start();
    let out = server.wait_for("listening on ").await;
    let addr: SocketAddr = out
        .lines()
        .find_map(|l| l.strip_prefix("listening on "))
        .and_then(|a| a.trim().parse().ok())
        .unwrap_or_else(|| panic!("no address in {out:?}"));

    // One at a time, each new client's hello reaching all the earlier ones:
    // then every client is registered before the burst.
    let (mut readers, mut writers, mut addrs) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..HEALTHY {
        let (reader, mut writer) = TcpStream::connect(addr).await.unwrap().into_split();
        addrs.push(writer.local_addr().unwrap());
        writer
            .write_all(format!("hello from {k}\n").as_bytes())
            .await
            .unwrap();
        roll_call(&mut readers, &format!("{}: hello from {k}\n", addrs[k])).await;
        readers.push(BufReader::new(reader));
        writers.push(writer);
    }
    // The slow client: a small receive buffer, and it never reads.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut slow = socket.connect(addr).await.unwrap();
    let slow_addr = slow.local_addr().unwrap();
    slow.write_all(b"hello from slow\n").await.unwrap();
    roll_call(&mut readers, &format!("{slow_addr}: hello from slow\n")).await;

    // Every healthy client but the sender reads the burst as it comes.
    let sender = addrs[0];
    let mut readers = readers.into_iter();
    let sender_reader = readers.next().expect("the sender");
    // How many burst lines each receiver has: the sender waits for all of
    // them before its next round, so a healthy client never falls behind
    // (a test client reading slower than the sender writes would be, by
    // the server's rule, too slow).
    let progress: Arc<Vec<AtomicUsize>> =
        Arc::new((1..HEALTHY).map(|_| AtomicUsize::new(0)).collect());
    let receivers: Vec<_> = readers
        .enumerate()
        .map(|(i, mut reader)| {
            let who = format!("client {}", i + 1);
            let progress = Arc::clone(&progress);
            tokio::spawn(async move {
                let end = format!("{sender}: end\n");
                let mut n = 0;
                loop {
                    let got = next_line(&mut reader, &who).await;
                    if got == end.as_bytes() {
                        return (reader, n);
                    }
                    let want = format!("{sender}: {}", burst_line(n));
                    assert!(
                        got == want.as_bytes(),
                        "{who}: line {n} is {:?}, not {want:?}",
                        String::from_utf8_lossy(&got)
                    );
                    n += 1;
                    progress[i].store(n, Ordering::Relaxed);
                }
            })
        })
        .collect();

    let dropped = format!("dropped {slow_addr}: too slow");
    let mut sent = 0;
    within("the burst", async {
        while !server.stdout.borrow().contains(&dropped) {
            assert!(
                sent < MAX_ROUNDS * ROUND,
                "{sent} lines sent and the slow client is still there:\n{}",
                server.printed()
            );
            let round: String = (sent..sent + ROUND).map(burst_line).collect();
            writers[0].write_all(round.as_bytes()).await.unwrap();
            sent += ROUND;
            eventually("the healthy clients to catch up", || {
                progress.iter().all(|p| p.load(Ordering::Relaxed) >= sent)
                    || server.stdout.borrow().contains("dropped")
            })
            .await;
        }
        writers[0].write_all(b"end\n").await.unwrap();
    })
    .await;

    let mut readers = vec![sender_reader];
    for (i, receiver) in receivers.into_iter().enumerate() {
        let (reader, got) = within("a healthy client", receiver).await.unwrap();
        assert_eq!(got, sent, "client {}", i + 1);
        readers.push(reader);
    }
    let printed = server.printed();
    assert_eq!(printed.matches("dropped").count(), 1, "{printed}");

    // The slow client was disconnected: after what was buffered for it,
    // its connection ends (with a FIN, or a reset: either ends it).
    let mut buffered = Vec::new();
    let _ = within("the slow client's end", slow.read_to_end(&mut buffered)).await;

    // The server still runs, and still serves a newcomer.
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "moat exited:\n{printed}"
    );
    let mut late = TcpStream::connect(addr).await.unwrap();
    let late_addr = late.local_addr().unwrap();
    late.write_all(b"still here\n").await.unwrap();
    roll_call(&mut readers, &format!("{late_addr}: still here\n")).await;
    server.child.kill().await.unwrap();
}
