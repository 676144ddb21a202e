//! What `moat serve` answers in a handler's place, and why: each refusal
//! builds its own response, names the setting that bounds it as the run
//! spells its settings (`--max-instances`, `MOAT_MAX_INSTANCES`,
//! `Limits::max_instances`), and has the label `--metrics` counts it by.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use moat_policy::setting::{Setting, Spelling};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

/// A request answered by moat instead of its handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// 413: the body is, or says it is, larger than `max` bytes.
    BodyTooLarge {
        /// `--max-http-body-size`.
        max: u64,
    },
    /// 429: the client has `share` requests being answered already.
    ClientShare {
        /// `--max-instances-per-client`.
        share: u32,
    },
    /// 503: the server answers as many requests at once as it takes.
    ServerBusy,
    /// 503: no handler instance came free within the request's time.
    InstancesBusy,
    /// 408: the body paused for longer than `pause`.
    BodyPaused {
        /// `--http-request-body-timeout`.
        pause: Duration,
    },
    /// 408: the body came slower than `rate` bytes a second.
    BodyTooSlow {
        /// `--min-http-body-rate`.
        rate: u64,
    },
    /// 500: the handler trapped, reached a bound, or ended without an
    /// answer; `why` is what the operator's line says (never the guest's
    /// backtrace); the client is told the request's id alone.
    HandlerFailed {
        /// What happened, in a line.
        why: String,
    },
}

impl Refused {
    /// The setting that bounds what was refused, if one does.
    pub(crate) fn setting(&self) -> Option<Setting> {
        Some(match self {
            Refused::BodyTooLarge { .. } => Setting::MaxHttpBodySize,
            Refused::ClientShare { .. } => Setting::MaxInstancesPerClient,
            Refused::ServerBusy => Setting::MaxHttpConnections,
            Refused::InstancesBusy => Setting::MaxInstances,
            Refused::BodyPaused { .. } => Setting::HttpRequestBodyTimeout,
            Refused::BodyTooSlow { .. } => Setting::MinHttpBodyRate,
            Refused::HandlerFailed { .. } => return None,
        })
    }

    /// Every value of [`Self::label`].
    pub(crate) const LABELS: [&'static str; 5] = [
        "instances-busy",
        "client-share",
        "body-too-large",
        "body-timeout",
        "handler-failed",
    ];

    /// The `reason` label of `moat_http_refused_total`; `None` for a
    /// refusal not counted there (the server's own bound on requests at
    /// once, which a scrape sees as the connections gauge).
    pub(crate) fn label(&self) -> Option<&'static str> {
        Some(match self {
            Refused::InstancesBusy => Self::LABELS[0],
            Refused::ClientShare { .. } => Self::LABELS[1],
            Refused::BodyTooLarge { .. } => Self::LABELS[2],
            Refused::BodyPaused { .. } | Refused::BodyTooSlow { .. } => Self::LABELS[3],
            Refused::HandlerFailed { .. } => Self::LABELS[4],
            Refused::ServerBusy => return None,
        })
    }

    /// The response the client of request `id` gets, naming the setting
    /// as `spelling` writes it.
    pub(crate) fn response(&self, spelling: Spelling, id: &str) -> Response<HyperOutgoingBody> {
        let named = self.setting().map(|s| s.named(spelling)).unwrap_or("");
        match self {
            Refused::BodyTooLarge { max } => text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body larger than {max} bytes (the server's {named})\n"),
            ),
            Refused::ClientShare { share } => {
                let mut response = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "this client has {share} requests being answered already (the server's {named})\n"
                    ),
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            Refused::ServerBusy => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the server is answering its {named} requests at once\n"),
            ),
            Refused::InstancesBusy => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the server's {named} handlers are all busy\n"),
            ),
            Refused::BodyPaused { pause } => closing(text(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body paused for longer than {pause:?} (the server's {named})\n"
                ),
            )),
            Refused::BodyTooSlow { rate } => closing(text(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body came slower than {rate} bytes a second (the server's {named})\n"
                ),
            )),
            // What failed is the operator's to know (the server's line
            // names the id), not the client's: it would tell a prober the
            // server's bounds and which requests reach them.
            Refused::HandlerFailed { .. } => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the handler failed (request {id})\n"),
            ),
        }
    }
}

/// A plain-text response.
fn text(status: StatusCode, body: String) -> Response<HyperOutgoingBody> {
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `response` with the connection closed after it: the rest of the
/// request's body is not read.
fn closing(mut response: Response<HyperOutgoingBody>) -> Response<HyperOutgoingBody> {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
