//! Part `bytes`: a pseudo-random stream ([`Stream`]) through moat's TCP
//! echo and then its TLS echo, byte for byte. One task writes it and
//! hashes what it wrote; another reads the echo at the same time (so
//! neither end waits on a full buffer), hashes it and compares it with the
//! stream made again. The part fails unless as many bytes came back as
//! went out, with the same SHA-256.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use super::stream::Stream;

/// The stream's length: 1 GiB, enough that a leak per chunk or a slow
/// drift in the server's buffers shows in its RSS.
pub const FULL: u64 = 1 << 30;
/// Under `--quick`: 64 MiB.
pub const QUICK: u64 = 64 << 20;

/// Bytes per write and per read buffer: the SDK's read chunk.
const CHUNK: usize = 64 * 1024;

/// The longest a read or a write may make no progress before the part
/// gives up: an echo on loopback moves 64 KiB in well under a millisecond,
/// so 30 s of nothing is a stuck server, not a slow one.
const STALL: Duration = Duration::from_secs(30);

/// The seeds of the two streams (any fixed values; different so that an
/// echo from the wrong connection could not match).
const TCP_SEED: u64 = 0x6d6f_6174_0000_0001;
const TLS_SEED: u64 = 0x6d6f_6174_0000_0002;

/// One stream through one echo server.
#[derive(Debug, Clone, Serialize)]
pub struct ByteStream {
    /// `tcp` or `tls`.
    pub path: &'static str,
    pub seed: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub sha256_sent: String,
    pub sha256_received: String,
    /// The offset of the first byte that came back different, if any.
    pub first_difference: Option<u64>,
    /// From connect to the end of the echo.
    pub seconds: f64,
    /// Bytes sent over `seconds`, MiB/s (each byte also came back).
    pub mib_per_s: f64,
}

impl ByteStream {
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.bytes_received != self.bytes_sent {
            out.push(format!(
                "{} echo: sent {} bytes, received {}",
                self.path, self.bytes_sent, self.bytes_received
            ));
        }
        if self.sha256_received != self.sha256_sent {
            out.push(format!(
                "{} echo: SHA-256 sent {} but received {}",
                self.path, self.sha256_sent, self.sha256_received
            ));
        }
        if let Some(at) = self.first_difference {
            out.push(format!(
                "{} echo: the echo differs from what was sent from byte {at}",
                self.path
            ));
        }
        out
    }

    pub fn rows(&self) -> Vec<(String, String)> {
        let same = |ok: bool| if ok { "match" } else { "DIFFER" };
        vec![
            ("bytes sent".into(), self.bytes_sent.to_string()),
            ("bytes received".into(), self.bytes_received.to_string()),
            (
                "byte counts".into(),
                same(self.bytes_sent == self.bytes_received).into(),
            ),
            ("SHA-256 sent".into(), format!("`{}`", self.sha256_sent)),
            (
                "SHA-256 received".into(),
                format!("`{}`", self.sha256_received),
            ),
            (
                "digests".into(),
                same(self.sha256_sent == self.sha256_received).into(),
            ),
            ("seconds".into(), format!("{:.1}", self.seconds)),
            ("MiB/s".into(), format!("{:.1}", self.mib_per_s)),
        ]
    }
}

/// `total` bytes through the TCP echo at `addr`.
pub fn tcp(addr: SocketAddr, total: u64) -> anyhow::Result<ByteStream> {
    runtime()?.block_on(async {
        let start = Instant::now();
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to the TCP echo at {addr}"))?;
        stream.set_nodelay(true)?;
        let (rx, tx) = stream.into_split();
        through("tcp", rx, tx, total, TCP_SEED, start).await
    })
}

/// `total` bytes through the TLS echo at `addr`, trusting the
/// certificate in `certs`.
pub fn tls(addr: SocketAddr, certs: &Path, total: u64) -> anyhow::Result<ByteStream> {
    let connector = connector(certs)?;
    runtime()?.block_on(async {
        let start = Instant::now();
        let tcp = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to the TLS echo at {addr}"))?;
        tcp.set_nodelay(true)?;
        let name = rustls::pki_types::ServerName::try_from("localhost")?;
        let tls = timeout(STALL, connector.connect(name, tcp))
            .await
            .context("no TLS handshake within 30 s")?
            .context("the TLS handshake failed")?;
        let (rx, tx) = tokio::io::split(tls);
        through("tls", rx, tx, total, TLS_SEED, start).await
    })
}

/// Two workers: the writer and the reader each have a core, as the
/// hashing on both sides is the client's main cost.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the client's runtime")
}

/// A client trusting `certs/cert.pem` (the soak servers' certificate).
fn connector(certs: &Path) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let file = certs.join("cert.pem");
    let pem = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::pem::PemObject::pem_slice_iter(&pem) {
        roots.add(der?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// What one side saw: its byte count and SHA-256.
struct Side {
    bytes: u64,
    sha256: String,
}

/// Sends `seed`'s first `total` bytes on `tx` (then half-closes) while
/// reading the echo from `rx`, each in a task of its own.
async fn through<R, W>(
    path: &'static str,
    rx: R,
    tx: W,
    total: u64,
    seed: u64,
    start: Instant,
) -> anyhow::Result<ByteStream>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer = tokio::spawn(send(tx, total, seed));
    let reader = tokio::spawn(receive(rx, seed));
    let (sent, received) = tokio::join!(writer, reader);
    let sent = sent.context("the writing task")??;
    let (received, first_difference) = received.context("the reading task")??;
    let seconds = start.elapsed().as_secs_f64();
    Ok(ByteStream {
        path,
        seed,
        bytes_sent: sent.bytes,
        bytes_received: received.bytes,
        sha256_sent: sent.sha256,
        sha256_received: received.sha256,
        first_difference,
        seconds,
        mib_per_s: sent.bytes as f64 / f64::from(1 << 20) / seconds,
    })
}

async fn send(mut tx: impl AsyncWrite + Unpin, total: u64, seed: u64) -> anyhow::Result<Side> {
    let mut stream = Stream::new(seed);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut sent = 0u64;
    while sent < total {
        let n = usize::try_from(total - sent).map_or(CHUNK, |left| left.min(CHUNK));
        stream.fill(&mut buf[..n]);
        hasher.update(&buf[..n]);
        timeout(STALL, tx.write_all(&buf[..n]))
            .await
            .with_context(|| format!("the server took nothing for 30 s after {sent} bytes"))?
            .with_context(|| format!("writing after {sent} bytes"))?;
        sent += n as u64;
    }
    timeout(STALL, tx.shutdown())
        .await
        .context("no half-close within 30 s")?
        .context("half-closing")?;
    Ok(Side {
        bytes: sent,
        sha256: hex(&hasher.finalize()),
    })
}

/// Reads to the end; also returns the offset of the first byte unlike
/// the stream's.
async fn receive(mut rx: impl AsyncRead + Unpin, seed: u64) -> anyhow::Result<(Side, Option<u64>)> {
    let mut expected = Stream::new(seed);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut want = vec![0u8; CHUNK];
    let mut got = 0u64;
    let mut first_difference = None;
    loop {
        let n = timeout(STALL, rx.read(&mut buf))
            .await
            .with_context(|| format!("nothing echoed for 30 s after {got} bytes"))?
            .with_context(|| format!("reading the echo after {got} bytes"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if first_difference.is_none() {
            expected.fill(&mut want[..n]);
            if let Some(i) = buf[..n].iter().zip(&want[..n]).position(|(a, b)| a != b) {
                first_difference = Some(got + i as u64);
            }
        }
        got += n as u64;
    }
    Ok((
        Side {
            bytes: got,
            sha256: hex(&hasher.finalize()),
        },
        first_difference,
    ))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::ByteStream;

    #[test]
    fn a_differing_echo_fails() {
        let good = ByteStream {
            path: "tcp",
            seed: 1,
            bytes_sent: 10,
            bytes_received: 10,
            sha256_sent: "aa".into(),
            sha256_received: "aa".into(),
            first_difference: None,
            seconds: 1.0,
            mib_per_s: 1.0,
        };
        assert!(good.failures().is_empty());
        let short = ByteStream {
            bytes_received: 9,
            sha256_received: "bb".into(),
            ..good.clone()
        };
        assert_eq!(short.failures().len(), 2);
        let changed = ByteStream {
            sha256_received: "bb".into(),
            first_difference: Some(3),
            ..good
        };
        assert_eq!(changed.failures().len(), 2);
    }

    #[test]
    fn hex_of_sha256() {
        use sha2::{Digest, Sha256};
        assert_eq!(
            super::hex(&Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
