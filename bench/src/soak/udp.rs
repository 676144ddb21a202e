//! Part `udp`: datagrams at a steady rate through moat's UDP echo. Each
//! carries its sequence number (8 bytes, little-endian) and then bytes of
//! [`Stream`] seeded with that number, so every echo can be checked on
//! its own. One thread sends on schedule; the caller's thread receives
//! and counts what came back: once, twice, out of order, not at all, or
//! changed. UDP may drop; only a changed payload fails the part.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;

use super::stream::Stream;

/// Datagrams a second: 2.5 MB/s of 512-byte datagrams, far under what
/// loopback carries, so any loss is the server's.
pub const RATE: u64 = 5_000;
/// How long: a minute is 300,000 datagrams, enough to see the server's
/// memory hold still under steady traffic.
pub const FULL: Duration = Duration::from_secs(60);
pub const QUICK: Duration = Duration::from_secs(10);
/// Bytes per datagram.
pub const SIZE: usize = 512;

/// How long after the last send the receiver keeps listening for late
/// echoes: far more than a loopback round trip.
const DRAIN: Duration = Duration::from_secs(2);

/// The receiver's kernel buffer: deep, so the client drops nothing of its
/// own while it is busy checking.
const RECV_BUFFER: usize = 8 << 20;

/// The figures of `udp`.
#[derive(Debug, Clone, Serialize)]
pub struct Udp {
    pub rate_per_s: u64,
    pub seconds_planned: f64,
    pub datagram_bytes: usize,
    pub sent: u64,
    /// Sends the operating system refused (counted, not retried).
    pub send_errors: u64,
    /// Echoes received, duplicates included.
    pub echoes: u64,
    /// Distinct sequence numbers echoed.
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Echoes with a lower sequence number than one already received.
    pub out_of_order: u64,
    /// Echoes whose length or bytes were not what was sent.
    pub corrupted: u64,
    pub first_corruption: Option<String>,
    /// The send schedule's actual length.
    pub send_seconds: f64,
    /// Sends a second actually achieved.
    pub achieved_rate: f64,
}

impl Udp {
    pub fn failures(&self) -> Vec<String> {
        if self.corrupted == 0 {
            return Vec::new();
        }
        vec![format!(
            "udp: {} corrupted echoes (first: {})",
            self.corrupted,
            self.first_corruption.as_deref().unwrap_or("?")
        )]
    }

    pub fn rows(&self) -> Vec<(String, String)> {
        vec![
            (
                "schedule".into(),
                format!(
                    "{} B datagrams, {}/s for {:.0} s",
                    self.datagram_bytes, self.rate_per_s, self.seconds_planned
                ),
            ),
            ("sent".into(), self.sent.to_string()),
            (
                "achieved send rate (/s)".into(),
                format!("{:.0}", self.achieved_rate),
            ),
            ("send errors".into(), self.send_errors.to_string()),
            ("received (distinct)".into(), self.received.to_string()),
            ("lost".into(), self.lost.to_string()),
            ("duplicated".into(), self.duplicated.to_string()),
            ("out of order".into(), self.out_of_order.to_string()),
            ("corrupted".into(), self.corrupted.to_string()),
        ]
    }
}

/// Sends `RATE` datagrams a second for `length` to the echo at `addr`,
/// and counts the echoes.
pub fn run(addr: SocketAddr, length: Duration) -> anyhow::Result<Udp> {
    let total = RATE * length.as_secs();
    let socket = UdpSocket::bind("127.0.0.1:0").context("cannot bind the client's UDP socket")?;
    socket
        .connect(addr)
        .with_context(|| format!("cannot connect the UDP socket to {addr}"))?;
    // Best effort: without it the default buffer still holds ~200 echoes.
    let _ = socket2::SockRef::from(&socket).set_recv_buffer_size(RECV_BUFFER);
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .context("setting the read timeout")?;
    let sending = socket.try_clone().context("cloning the UDP socket")?;
    let done = Arc::new(AtomicBool::new(false));
    let sender = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let sent = send(&sending, total);
            done.store(true, Ordering::Release);
            sent
        })
    };
    let counts = receive(&socket, total, &done);
    let (sent, send_errors, send_time) = sender
        .join()
        .map_err(|_| anyhow::anyhow!("the sending thread panicked"))?;
    let counts = counts?;
    let send_seconds = send_time.as_secs_f64();
    Ok(Udp {
        rate_per_s: RATE,
        seconds_planned: length.as_secs_f64(),
        datagram_bytes: SIZE,
        sent,
        send_errors,
        echoes: counts.echoes,
        received: counts.distinct,
        lost: sent.saturating_sub(counts.distinct),
        duplicated: counts.duplicated,
        out_of_order: counts.out_of_order,
        corrupted: counts.corrupted,
        first_corruption: counts.first_corruption,
        send_seconds,
        achieved_rate: (sent + send_errors) as f64 / send_seconds,
    })
}

/// Datagram `seq`: its number, then `seq`'s stream.
fn datagram(seq: u64) -> [u8; SIZE] {
    let mut out = [0u8; SIZE];
    out[..8].copy_from_slice(&seq.to_le_bytes());
    Stream::new(seq).fill(&mut out[8..]);
    out
}

/// Sends datagrams 0..`total`, datagram i at i/`RATE` s after the start
/// (those that fell due during a sleep go out together). Returns (sent,
/// refused, time taken).
fn send(socket: &UdpSocket, total: u64) -> (u64, u64, Duration) {
    let start = Instant::now();
    let (mut sent, mut refused) = (0, 0);
    for seq in 0..total {
        let due = start + Duration::from_secs_f64(seq as f64 / RATE as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        // A send can fail on loopback when an earlier echo found no one
        // (ECONNREFUSED reported on the next call): counted, not fatal.
        match socket.send(&datagram(seq)) {
            Ok(_) => sent += 1,
            Err(_) => refused += 1,
        }
    }
    (sent, refused, start.elapsed())
}

/// What came back.
#[derive(Default)]
struct Counts {
    echoes: u64,
    distinct: u64,
    duplicated: u64,
    out_of_order: u64,
    corrupted: u64,
    first_corruption: Option<String>,
}

/// Receives until the sender is done and [`DRAIN`] has passed with
/// nothing more.
fn receive(socket: &UdpSocket, total: u64, done: &AtomicBool) -> anyhow::Result<Counts> {
    let mut seen = vec![false; usize::try_from(total).context("too many datagrams")?];
    let mut counts = Counts::default();
    let mut highest: Option<u64> = None;
    let mut buf = [0u8; SIZE * 2];
    let mut quiet_since: Option<Instant> = None;
    loop {
        match socket.recv(&mut buf) {
            Ok(n) => {
                counts.echoes += 1;
                quiet_since = None;
                let got = &buf[..n];
                let seq = (n >= 8).then(|| {
                    let mut number = [0u8; 8];
                    number.copy_from_slice(&got[..8]);
                    u64::from_le_bytes(number)
                });
                let slot = seq.and_then(|s| usize::try_from(s).ok().filter(|&s| s < seen.len()));
                let (Some(seq), Some(slot)) = (seq, slot) else {
                    counts.corrupt(format!("{n} bytes with no valid sequence number"));
                    continue;
                };
                if got != datagram(seq) {
                    counts.corrupt(format!("datagram {seq} came back as {n} different bytes"));
                    continue;
                }
                if seen[slot] {
                    counts.duplicated += 1;
                    continue;
                }
                seen[slot] = true;
                counts.distinct += 1;
                if highest.is_some_and(|h| seq < h) {
                    counts.out_of_order += 1;
                }
                highest = highest.max(Some(seq));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                if done.load(Ordering::Acquire) {
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= DRAIN {
                        break;
                    }
                }
            }
            Err(e) => return Err(e).context("receiving echoes"),
        }
    }
    Ok(counts)
}

impl Counts {
    fn corrupt(&mut self, what: String) {
        self.corrupted += 1;
        self.first_corruption.get_or_insert(what);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn datagrams_carry_their_number_and_differ() {
        let a = super::datagram(0);
        let b = super::datagram(1);
        assert_eq!(a[..8], 0u64.to_le_bytes());
        assert_eq!(b[..8], 1u64.to_le_bytes());
        assert_ne!(a[8..], b[8..]);
    }
}
