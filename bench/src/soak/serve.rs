//! Part `serve`: keep-alive `GET /` through `moat serve` with the
//! benchmark's wasi:http component (wstd-serve), which moat instantiates
//! afresh for every request. A few clients at once, each opening
//! connections one after another and sending [`PER_CONNECTION`] requests
//! on each; every response must be a 200 whose body is the component's
//! greeting. A failed request is counted, and its client goes on with a
//! new connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde::Serialize;

use super::conns::{Tally, runtime};
use crate::workloads::http_wasi::{Conn, GREETING};

/// Requests in all. 300,000 instances created, run and dropped (about 20 s
/// at the 14,000/s two cores serve) take the server's per-request setup
/// and teardown through enough cycles that a leak of a descriptor or a
/// hundred bytes each (30 MiB) shows.
pub const FULL: u64 = 300_000;
pub const QUICK: u64 = 20_000;

/// Requests on each keep-alive connection before the client closes it:
/// 3,000 connections in a full run, so connection setup and teardown are
/// soaked too.
pub const PER_CONNECTION: u64 = 100;

/// Clients at once: more than the two cores, so requests overlap and
/// several instances are alive together.
pub const CLIENTS: u64 = 8;

/// The longest a request may take: on loopback one is well under a
/// millisecond, so 30 s is a lost request, not a slow one.
const STEP: Duration = Duration::from_secs(30);

/// The figures of `serve`.
#[derive(Debug, Clone, Serialize)]
pub struct Serve {
    pub requests: u64,
    pub per_connection: u64,
    pub clients: u64,
    /// Responses that were a 200 with the greeting.
    pub ok: u64,
    /// Connections opened (more than planned if requests failed).
    pub connections: u64,
    pub tally: Tally,
    pub seconds: f64,
    pub per_second: f64,
}

impl Serve {
    pub fn failures(&self) -> Vec<String> {
        if self.tally.failures == 0 {
            return Vec::new();
        }
        let mut out = vec![format!(
            "serve: {} of {} requests failed",
            self.tally.failures, self.requests
        )];
        out.extend(self.tally.errors.iter().map(|e| format!("serve:   {e}")));
        out
    }

    pub fn rows(&self) -> Vec<(String, String)> {
        vec![
            ("requests".into(), self.requests.to_string()),
            (
                "clients at once, requests per connection".into(),
                format!("{}, {}", self.clients, self.per_connection),
            ),
            ("connections opened".into(), self.connections.to_string()),
            ("answered with the greeting".into(), self.ok.to_string()),
            ("failures".into(), self.tally.failures.to_string()),
            ("seconds".into(), format!("{:.1}", self.seconds)),
            ("requests/s".into(), format!("{:.0}", self.per_second)),
        ]
    }
}

/// What one client did.
struct Client {
    ok: u64,
    connections: u64,
    tally: Tally,
}

/// `requests` `GET /` to the `moat serve` at `addr`, from [`CLIENTS`]
/// clients at once.
pub fn run(addr: SocketAddr, requests: u64) -> anyhow::Result<Serve> {
    runtime()?.block_on(async {
        let start = Instant::now();
        let mut clients = tokio::task::JoinSet::new();
        for c in 0..CLIENTS {
            // The requests split as evenly as they go.
            let mine = requests / CLIENTS + u64::from(c < requests % CLIENTS);
            clients.spawn(client(addr, c, mine));
        }
        let mut serve = Serve {
            requests,
            per_connection: PER_CONNECTION,
            clients: CLIENTS,
            ok: 0,
            connections: 0,
            tally: Tally::default(),
            seconds: 0.0,
            per_second: 0.0,
        };
        while let Some(done) = clients.join_next().await {
            let client = done.map_err(|e| anyhow!("a client task: {e}"))?;
            serve.ok += client.ok;
            serve.connections += client.connections;
            serve.tally.failures += client.tally.failures;
            serve.tally.errors.extend(client.tally.errors);
        }
        serve.tally.errors.truncate(super::conns::KEPT_ERRORS);
        serve.seconds = start.elapsed().as_secs_f64();
        serve.per_second = requests as f64 / serve.seconds;
        Ok(serve)
    })
}

/// Client `c`: `requests` requests, [`PER_CONNECTION`] to a connection.
async fn client(addr: SocketAddr, c: u64, requests: u64) -> Client {
    let mut client = Client {
        ok: 0,
        connections: 0,
        tally: Tally::default(),
    };
    let mut conn: Option<(Conn, u64)> = None;
    for i in 0..requests {
        let result = async {
            let (mut open, used) = match conn.take() {
                Some(held) => held,
                None => {
                    client.connections += 1;
                    (tokio::time::timeout(STEP, Conn::open(addr)).await??, 0)
                }
            };
            let body = tokio::time::timeout(STEP, open.get()).await??;
            if body != GREETING {
                anyhow::bail!(
                    "the body was {:?}, not the greeting",
                    String::from_utf8_lossy(&body)
                );
            }
            if used + 1 < PER_CONNECTION {
                conn = Some((open, used + 1));
            }
            anyhow::Ok(())
        }
        .await;
        match result {
            Ok(()) => client.ok += 1,
            Err(e) => client.tally.fail(format!("client {c}, request {i}"), &e),
        }
    }
    client
}
