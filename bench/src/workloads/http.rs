//! HTTP/1.1: http_rr, keep-alive `GET /` round trips against native hyper,
//! moat's http-server and moat's hyper-serve.

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::report::Workload;
use crate::servers::{Kind, Mode};

use super::rr::{CpuSpan, Plan, round_trips};
use super::{Run, ratio, start_all};

/// Reads one HTTP/1.1 response with a Content-Length body; its length.
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<usize> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end])?;
            if !head.starts_with("HTTP/1.1 200") {
                bail!("not a 200: {head}");
            }
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .context("no content-length")?;
            let total = end + 4 + length;
            while buf.len() < total {
                if stream.read_buf(buf).await? == 0 {
                    bail!("closed mid-body");
                }
            }
            buf.drain(..total);
            return Ok(total);
        }
        if stream.read_buf(buf).await? == 0 {
            bail!("closed mid-head");
        }
    }
}

/// Keep-alive `GET /` requests on one connection: p50, p99 and server CPU
/// per request.
pub fn http_rr(run: &Run) -> anyhow::Result<Workload> {
    let requests = run.scale(10_000, 2_000);
    let kinds = vec![Kind::Native, Kind::Moat, Kind::MoatHyper];
    let servers = start_all(run, kinds, Mode::Http, true)?;
    let plan = Plan {
        noun: "request",
        trips: requests,
        cpu: CpuSpan::Connection,
    };
    let rr = round_trips(
        run,
        &servers,
        &plan,
        async |addr| {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok((stream, Vec::with_capacity(4096)))
        },
        async |(stream, buf): &mut (TcpStream, Vec<u8>)| {
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
                .await?;
            read_response(stream, buf).await?;
            Ok(())
        },
    )?;
    Ok(Workload {
        name: "http_rr".into(),
        what: format!(
            "{requests} keep-alive GET / on one connection: native is hyper on tokio, moat runs http-server (HTTP by hand) and hyper-serve (hyper on moat-sdk); client and server pinned to CPU 0"
        ),
        goal: "none yet: hyper-serve beside http-server".into(),
        met: None,
        verdict: format!(
            "p50: http-server {:.2}×, hyper-serve {:.2}× native hyper",
            ratio(&rr.p50, Kind::Moat),
            ratio(&rr.p50, Kind::MoatHyper)
        ),
        metrics: rr.metrics(),
    })
}
