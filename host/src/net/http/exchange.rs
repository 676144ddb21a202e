//! An allowed outgoing request's record on the audit trail, written once
//! it ended ([`HttpExchange`]): the request as written, the connection it
//! went on (with what its name resolved to and the address used), the
//! status, how it ended, and the bytes of each body. The request's
//! decision and the connect of a connection made for it carry the same
//! request id, and the connect the connection's id too.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::request::Parts;
use http_body::Frame;
use http_body_util::BodyExt as _;

use super::{HttpError, RequestBody};
use crate::audit::{HttpConnection, HttpEnd, HttpExchange, HttpRequest, TrailShare};
use crate::net::budget::Charge;
use crate::net::run::Run;
use crate::net::traffic::{Direction, Traffic, Transport};
use moat_policy::policy::Host;
use moat_policy::setting::Worded as _;

/// A request's facts as written (each text cut as records keep it),
/// numbered `id` within the run.
pub(super) fn request_of(parts: &Parts, id: u64) -> HttpRequest {
    let uri = &parts.uri;
    HttpRequest {
        id,
        method: parts.method.as_str().to_owned(),
        scheme: uri.scheme_str().unwrap_or_default().to_owned(),
        authority: uri
            .authority()
            .map_or_else(String::new, |a| a.as_str().to_owned()),
        path: uri.path().to_owned(),
        query: uri.query().is_some(),
    }
    // What every record of it keeps, and what its charge pays for.
    .cut()
}

/// A connection the client made, as the requests that go on it record it.
#[derive(Debug)]
pub(super) struct Made {
    /// Its number within the run (on its connect record too).
    pub(super) id: u64,
    /// `HTTP/1.1` or `HTTP/2`.
    pub(super) protocol: &'static str,
    /// What its name resolved to (kept only with an audit trail).
    pub(super) resolved: Vec<IpAddr>,
    /// The peer.
    pub(super) address: SocketAddr,
}

/// `body`, counting the bytes of its data into the run's `traffic` (and
/// into `sent`, for a record) as hyper takes them.
fn counted(body: RequestBody, traffic: Arc<Traffic>, sent: Option<Arc<AtomicU64>>) -> RequestBody {
    body.map_frame(move |frame: Frame<Bytes>| {
        if let Some(data) = frame.data_ref() {
            traffic.bytes_moved(Transport::Http, Direction::Sent, data.len());
            if let Some(sent) = &sent {
                sent.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        frame
    })
    .boxed_unsync()
}

/// An allowed request under way, until its record is written: at its
/// end, or, dropped before, as abandoned.
pub(crate) struct Exchange {
    run: Arc<Run>,
    /// `None` without an audit trail, and once written.
    record: Option<HttpExchange>,
    /// The request body's bytes so far, counted only for a record.
    sent: Option<Arc<AtomicU64>>,
    /// The request's facts, paid from the run's host memory while held.
    _charge: Option<Charge>,
    /// The trail share of the request that made it (`moat serve`), which
    /// pays its record wherever it ends.
    share: Option<Arc<TrailShare>>,
}

impl Exchange {
    /// The exchange of the request `noted` (its facts, and their charge on
    /// the run's host memory) to `host`:`port`; nothing is kept when
    /// nothing is noted (no audit trail).
    pub(super) fn new(
        run: Arc<Run>,
        noted: Option<(Arc<HttpRequest>, Charge)>,
        host: &Host,
        port: u16,
    ) -> Exchange {
        let (request, charge) = noted.unzip();
        let sent = request.is_some().then(|| Arc::new(AtomicU64::new(0)));
        let record = request.map(|request| HttpExchange {
            request,
            host: host.to_string(),
            port,
            connection: None,
            status: None,
            end: HttpEnd::Abandoned,
            error: None,
            sent: 0,
            received: 0,
        });
        Exchange {
            run,
            share: record.as_ref().and_then(|_| crate::audit::current_share()),
            record,
            sent,
            _charge: charge,
        }
    }

    /// `body`, its bytes counted into the run's traffic and the record.
    pub(super) fn counting(&self, body: RequestBody) -> RequestBody {
        counted(body, Arc::clone(&self.run.traffic), self.sent.clone())
    }

    /// The request goes on `made`, `reused` from an earlier one or not.
    pub(super) fn on(&mut self, made: &Made, reused: bool) {
        if let Some(record) = &mut self.record {
            record.connection = Some(HttpConnection {
                id: made.id,
                reused,
                protocol: made.protocol,
                resolved: made.resolved.clone(),
                address: made.address,
            });
        }
    }

    /// The response's head arrived with `status`.
    pub(super) fn status(&mut self, status: u16) {
        if let Some(record) = &mut self.record {
            record.status = Some(status);
        }
    }

    /// `bytes` more of the response's body arrived.
    pub(super) fn received(&mut self, bytes: usize) {
        self.run
            .traffic
            .bytes_moved(Transport::Http, Direction::Received, bytes);
        if let Some(record) = &mut self.record {
            record.received += bytes as u64;
        }
    }

    /// The request ended so, with `error` for [`HttpEnd::Failed`]: its
    /// record is written, the error in the run's words.
    pub(super) fn end(&mut self, end: HttpEnd, error: Option<&HttpError>) {
        let Some(mut record) = self.record.take() else {
            return;
        };
        record.end = end;
        record.error = error.map(|e| e.worded(self.run.words()).to_string());
        record.sent = self.sent.as_ref().map_or(0, |s| s.load(Ordering::Relaxed));
        // The request is over: a trail that cannot take the record
        // changes nothing for it (and refuses the run's next call).
        let _ = crate::audit::with_share(self.share.as_ref(), || {
            self.run.audit.http_exchange(|| record)
        });
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        self.end(HttpEnd::Abandoned, None);
    }
}
