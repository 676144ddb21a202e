//! `moat serve --metrics=ADDR`: the server's figures for Prometheus, on an
//! address of their own.
//!
//! What it reports and why its labels are bounded: the Metrics paragraph
//! of [`crate::serve`]. The figures a request changes live in [`Metrics`];
//! what is read from the server at the scrape, in [`Now`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::listen::{Listener, Listening};
use super::process_metrics::gauge;
use super::refused::Refused;
use crate::audit::{Decided, DecisionCounts, GuestIdentity, Operation};
use crate::net::Net;

/// Scrape connections answered at once; more wait in the kernel's
/// backlog. A Prometheus server scrapes one target with one connection;
/// 64 leave room for scrapers and people with curl, and for clients that
/// connect and send nothing (each address holds at most
/// [`METRICS_CONNECTIONS_PER_CLIENT`], each for at most
/// [`METRICS_HEAD_TIME`]): 16 idle connections kept every scrape out for
/// 10 s when there were 4 places.
pub(crate) const METRICS_CONNECTIONS: usize = 64;

/// Scrape connections one client address holds at once: half the places,
/// so that one address leaves the other half to the scrapers, and a
/// scraper on the same address as a client that holds connections (both
/// on the node, say) still finds one; past it a connection is closed as
/// it is accepted.
pub(crate) const METRICS_CONNECTIONS_PER_CLIENT: u32 = 32;

/// Longest a scrape connection may take to send its request's head: a
/// scraper sends it at once; a client that sends nothing is closed after
/// this.
pub(crate) const METRICS_HEAD_TIME: Duration = Duration::from_secs(1);

/// Longest a scrape connection is kept, from its accept to its response
/// sent: a scrape takes milliseconds.
pub(crate) const METRICS_CONNECTION_TIME: Duration = Duration::from_secs(10);

/// The request latencies the histogram tells apart, in seconds: from a
/// cached handler's millisecond to the default request time of 60 s.
const LATENCY_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The handler CPU times a request's histogram tells apart, in seconds:
/// from a Rust handler's tens of microseconds to a Python one's tens of
/// milliseconds and a runaway's seconds.
const CPU_BUCKETS: [f64; 14] = [
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    1.0, 10.0,
];

/// The peak linear memories a request's histogram tells apart, in bytes:
/// 64 KiB to 4 GiB by fours (a Rust handler starts near 1 MiB, a
/// JavaScript one near 10 MiB, a Python one near 40 MiB).
const MEMORY_BUCKETS: [f64; 9] = [
    65_536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
    268_435_456.0,
    1_073_741_824.0,
    4_294_967_296.0,
];

type Labels<const N: usize> = [(&'static str, &'static str); N];

/// The figures the requests keep up to date.
pub(crate) struct Metrics {
    requests: Family<Labels<2>, Counter>,
    latency: Histogram,
    refused: Family<Labels<1>, Counter>,
    waiting: Gauge,
    connections: Gauge,
    reloads: Family<Labels<1>, Counter>,
    cpu: Histogram,
    memory: Histogram,
    /// The handler served now: its file's name and SHA-256, when known.
    handler: std::sync::Mutex<Option<GuestIdentity>>,
    /// Every decision of the server's network, given to its audit.
    pub(crate) decisions: Arc<DecisionCounts>,
}

/// One of a gauge's count (a request waiting for an instance, a client
/// connection open) until dropped.
pub(crate) struct Counted(Gauge);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// Every series there is from the start, at 0 (a dashboard's `rate()`
    /// and an alert on a refusal need the series before the first one);
    /// `handler` is the one served first.
    pub(crate) fn new(handler: Option<GuestIdentity>) -> Metrics {
        let metrics = Metrics {
            requests: Family::default(),
            latency: Histogram::new(LATENCY_BUCKETS),
            refused: Family::default(),
            waiting: Gauge::default(),
            connections: Gauge::default(),
            reloads: Family::default(),
            cpu: Histogram::new(CPU_BUCKETS),
            memory: Histogram::new(MEMORY_BUCKETS),
            handler: std::sync::Mutex::new(handler),
            decisions: Arc::default(),
        };
        for method in METHODS {
            for status in STATUS_CLASSES {
                drop(
                    metrics
                        .requests
                        .get_or_create(&[("method", method), ("status", status)]),
                );
            }
        }
        for reason in Refused::LABELS {
            drop(metrics.refused.get_or_create(&[("reason", reason)]));
        }
        for result in RELOAD_RESULTS {
            drop(metrics.reloads.get_or_create(&[("result", result)]));
        }
        metrics
    }

    /// Observes what one request's handler cost: `cpu` its instance ran,
    /// and the most linear memory it held (`memory` bytes).
    pub(crate) fn cost(&self, cpu: Duration, memory: u64) {
        self.cpu.observe(cpu.as_secs_f64());
        self.memory.observe(memory as f64);
    }

    /// Counts a reload: the handler replaced (by `handler`, when known),
    /// or not.
    pub(crate) fn reloaded(&self, replaced: bool, handler: Option<GuestIdentity>) {
        let result = RELOAD_RESULTS[usize::from(!replaced)];
        self.reloads.get_or_create(&[("result", result)]).inc();
        if replaced {
            *self
                .handler
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = handler;
        }
    }

    /// Counts a request answered with `status` after `elapsed` (the time
    /// to its response's head).
    pub(crate) fn answered(&self, method: &hyper::Method, status: StatusCode, elapsed: Duration) {
        let status = match status.as_u16() {
            100..=199 => STATUS_CLASSES[0],
            200..=299 => STATUS_CLASSES[1],
            300..=399 => STATUS_CLASSES[2],
            400..=499 => STATUS_CLASSES[3],
            _ => STATUS_CLASSES[4],
        };
        self.requests
            .get_or_create(&[("method", method_label(method)), ("status", status)])
            .inc();
        self.latency.observe(elapsed.as_secs_f64());
    }

    /// Counts a request moat answered itself, for `why`.
    pub(crate) fn refused(&self, why: &Refused) {
        if let Some(reason) = why.label() {
            self.refused.get_or_create(&[("reason", reason)]).inc();
        }
    }

    /// Counts a request as waiting for an instance until the guard drops.
    pub(crate) fn waiting(&self) -> Counted {
        self.waiting.inc();
        Counted(self.waiting.clone())
    }

    /// Counts a client connection as open until the guard drops.
    pub(crate) fn connection(&self) -> Counted {
        self.connections.inc();
        Counted(self.connections.clone())
    }

    /// The registry a scrape encodes: these figures, and what is read at
    /// the scrape from the server itself.
    pub(crate) fn registry(self: &Arc<Self>, now: Now) -> Registry {
        let mut registry = Registry::default();
        registry.register(
            "moat_http_requests",
            "Requests answered, by method and status class",
            self.requests.clone(),
        );
        registry.register_with_unit(
            "moat_http_request_duration",
            "Time from a request's head to its response's head",
            Unit::Seconds,
            self.latency.clone(),
        );
        registry.register(
            "moat_http_refused",
            "Requests moat answered itself instead of the handler, by reason",
            self.refused.clone(),
        );
        registry.register(
            "moat_instances_waiting",
            "Requests waiting for a handler instance",
            self.waiting.clone(),
        );
        registry.register(
            "moat_http_connections",
            "Client connections open",
            self.connections.clone(),
        );
        registry.register_with_unit(
            "moat_http_request_cpu",
            "CPU time a request's handler instance ran (its calls, on any thread; not \
             hyper's reading and writing)",
            Unit::Seconds,
            self.cpu.clone(),
        );
        registry.register_with_unit(
            "moat_http_request_memory_peak",
            "The most linear memory a request's handler instance held",
            Unit::Bytes,
            self.memory.clone(),
        );
        registry.register(
            "moat_reloads",
            "Reloads of the handler (SIGHUP, --watch), by result: ok (the new one serves) \
             or failed (the old one still serves)",
            self.reloads.clone(),
        );
        registry.register_collector(Box::new(Info {
            handler: Arc::clone(self),
        }));
        registry.register_collector(Box::new(now));
        registry.register_collector(Box::new(super::process_metrics::Process));
        registry
    }
}

/// The `status` label's values: a response's class.
const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// The `method` label's values.
const METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "other",
];

/// The `result` label of `moat_reloads_total`.
const RELOAD_RESULTS: [&str; 2] = ["ok", "failed"];

/// One of the methods a label names, or `other`.
fn method_label(method: &hyper::Method) -> &'static str {
    use hyper::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// The info series: the build, and the handler served now.
struct Info {
    handler: Arc<Metrics>,
}

impl std::fmt::Debug for Info {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Info").finish_non_exhaustive()
    }
}

impl Collector for Info {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let one = ConstGauge::new(1i64);
        let mut build = encoder.encode_descriptor(
            "moat_build_info",
            "The moat serving: 1, with its version",
            None,
            one.metric_type(),
        )?;
        one.encode(build.encode_family(&[("version", env!("CARGO_PKG_VERSION"))])?)?;
        let handler = self
            .handler
            .handler
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(handler) = handler {
            let mut family = encoder.encode_descriptor(
                "moat_handler_info",
                "The handler served now: 1, with its file's name and the SHA-256 of its bytes",
                None,
                one.metric_type(),
            )?;
            let labels = [
                ("file", handler.file.as_str()),
                ("sha256", handler.sha256.as_str()),
            ];
            one.encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// What a scrape reads from the server as it is then.
pub(crate) struct Now {
    pub(crate) instances: Arc<Semaphore>,
    pub(crate) max_instances: usize,
    pub(crate) max_connections: usize,
    pub(crate) net: Net,
    pub(crate) decisions: Arc<DecisionCounts>,
    /// The instance pool's figures; `None` when instances are made on
    /// demand.
    pub(crate) pool: Option<wasmtime::PoolingAllocatorMetrics>,
}

impl std::fmt::Debug for Now {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Now").finish_non_exhaustive()
    }
}

impl Collector for Now {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let busy = self
            .max_instances
            .saturating_sub(self.instances.available_permits());
        gauge(
            &mut encoder,
            "moat_instances_busy",
            "Handler instances in use",
            None,
            busy as u64,
        )?;
        gauge(
            &mut encoder,
            "moat_instances_max",
            "Handler instances at most (--max-instances)",
            None,
            self.max_instances as u64,
        )?;
        gauge(
            &mut encoder,
            "moat_http_connections_max",
            "Client connections at most (--max-http-connections)",
            None,
            self.max_connections as u64,
        )?;
        gauge(
            &mut encoder,
            "moat_host_memory",
            "Host memory the handlers make the host keep (what --max-host-memory bounds)",
            Some(&Unit::Bytes),
            self.net.host_memory_used() as u64,
        )?;
        if let Some(max) = self.net.limits().max_host_memory {
            gauge(
                &mut encoder,
                "moat_host_memory_budget",
                "The host-memory budget (--max-host-memory)",
                Some(&Unit::Bytes),
                max as u64,
            )?;
        }
        if let Some(pool) = &self.pool {
            let reset = ConstCounter::new(pool.memory_bytes_reset());
            let metric = encoder.encode_descriptor(
                "moat_instance_memory_reset",
                "Bytes of handler memory restored to their initial contents when instances ended",
                Some(&Unit::Bytes),
                reset.metric_type(),
            )?;
            reset.encode(metric)?;
            let mode = ConstGauge::new(1i64);
            let mut family = encoder.encode_descriptor(
                "moat_instance_memory_reset_mode",
                "How an ended instance's memory is restored: 1 for the way in use \
                 (written-pages: only the pages it wrote; lowest-bytes: the lowest bytes, \
                 written or not)",
                None,
                mode.metric_type(),
            )?;
            let labels = [("mode", crate::MemoryReset::available().as_str())];
            mode.encode(family.encode_family(&labels)?)?;
        }
        let kind = ConstCounter::new(0u64).metric_type();
        let mut decisions = encoder.encode_descriptor(
            "moat_decisions",
            "Network decisions of the handlers and the server, by operation and outcome",
            None,
            kind,
        )?;
        for operation in Operation::ALL {
            for decided in Decided::ALL {
                let labels = [
                    ("operation", operation.as_str()),
                    ("outcome", decided.as_str()),
                ];
                let count = ConstCounter::new(self.decisions.get(operation, decided));
                count.encode(decisions.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// Answers scrapes on `listeners` until `stopping` is cancelled.
pub(crate) async fn serve_scrapes(
    listeners: Vec<(Listener, Listening)>,
    registry: Registry,
    stopping: CancellationToken,
) {
    let mut next = 0;
    let registry = Arc::new(registry);
    let places = Arc::new(Semaphore::new(METRICS_CONNECTIONS));
    let per_client = super::share::Connections::new(METRICS_CONNECTIONS_PER_CLIENT);
    loop {
        let place = tokio::select! {
            () = stopping.cancelled() => return,
            place = Arc::clone(&places).acquire_owned() => place,
        };
        let Ok(place) = place else {
            return;
        };
        let (accepted, bound) = tokio::select! {
            () = stopping.cancelled() => return,
            accepted = super::accept_any(&listeners, &mut next) => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                tracing::debug!(target: "moat::http", %bound, error = %e, "metrics accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(counted) = per_client.open(peer) else {
            tracing::debug!(target: "moat::http", %peer, "a metrics connection past its address's share, closed");
            continue;
        };
        let registry = Arc::clone(&registry);
        let stopping = stopping.clone();
        tokio::spawn(async move {
            let _place = place;
            let _counted = counted;
            let service = hyper::service::service_fn(move |request| {
                let response = scrape(&request, &registry, stopping.is_cancelled());
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(METRICS_HEAD_TIME)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(METRICS_CONNECTION_TIME, connection).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(target: "moat::http", %peer, error = %e, "metrics connection failed");
                }
                Err(_) => {
                    tracing::debug!(target: "moat::http", %peer, "metrics connection timed out");
                }
            }
        });
    }
}

/// The answer to one request to the metrics address: `/metrics`, or the
/// health checks. `/healthz` is 200 while the process answers at all;
/// `/readyz` 200 while it serves a handler and is not `stopping` (this
/// address is answered only once the handler is loaded, and a reload
/// keeps the old one serving, so a load balancer that asks it sends
/// requests only where they are answered).
fn scrape<B>(request: &Request<B>, registry: &Registry, stopping: bool) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *response.status_mut() = status;
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    };
    let path = request.uri().path();
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") {
        return plain(
            StatusCode::NOT_FOUND,
            "moat answers /metrics, /healthz and /readyz here\n",
        );
    }
    if request.method() != hyper::Method::GET && request.method() != hyper::Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only\n");
    }
    match path {
        "/healthz" => return plain(StatusCode::OK, "ok\n"),
        "/readyz" if stopping => {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "stopping\n");
        }
        "/readyz" => return plain(StatusCode::OK, "ready\n"),
        _ => {}
    }
    let openmetrics = request
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let mut text = String::new();
    let (encoded, content_type) = if openmetrics {
        (
            prometheus_client::encoding::text::encode(&mut text, registry),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
    } else {
        (
            prometheus_client::encoding::prometheus_text::encode(&mut text, registry),
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )
    };
    if encoded.is_err() {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded\n",
        );
    }
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
