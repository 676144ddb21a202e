//! One request: a fresh instance from the template, the guest's handler
//! called with the request, its response (or a 413 or a 500) handed to
//! hyper, and the instance dropped once the response body is sent.

use std::net::IpAddr;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::p3::Request as P3Request;
use wasmtime_wasi_http::p3::bindings::ServicePre;

use super::DEFAULT_REQUEST_TIMEOUT;
use super::body::{BodyBounds, BodyFlags, LimitedBody, Watched, response_cut_short};
use super::metrics::{Metrics, Refusal};
use super::share::Requests;
use super::share::Shares;
use super::watch::Watch;
use crate::bindings::http::HttpView;
use crate::bounds::{MemoryLimitReached, TimeLimitReached, deadline_callback};
use crate::error::MoatError;
use crate::kit::{self, MoatCtx};
use crate::net::{Abandoned, Net, Notices, Unfinished};
use crate::options::RunOptions;
use crate::run_state::RunState;

/// How often the server's ticker interrupts running handlers so that each
/// checks its request's deadline: 10 ms, so a handler in a loop is stopped
/// within 10 ms of its time, for one atomic add per tick and a check per
/// running handler.
const TIME_TICK: Duration = Duration::from_millis(10);

/// The handler, linked and type-checked once: a wasi:http 0.2 `proxy`
/// (`incoming-handler`) or a 0.3 `service` (`handler`).
#[derive(Clone)]
pub(crate) enum Template {
    P2(ProxyPre<RunState>),
    P3(ServicePre<RunState>),
}

/// What every request shares: the engine, the template, the network and
/// the run's settings.
pub(crate) struct Shared {
    pub(super) engine: Engine,
    /// Places for handler instances ([`crate::net::Limits::max_instances`]).
    pub(super) instances: Arc<Semaphore>,
    /// Each client address's share of them
    /// ([`crate::net::Limits::max_instances_per_client`]).
    shares: Arc<Shares>,
    /// Each client address's rate of records on the trail
    /// ([`crate::net::Limits::max_audit_rate_per_client`]); `None` when it
    /// is off.
    trail_rates: Option<Arc<crate::audit::ClientRates>>,
    /// The handler new requests get; [`Shared::replace`] puts another in
    /// its place, while requests in flight keep theirs.
    pre: std::sync::RwLock<Template>,
    pub(super) net: Net,
    notices: Notices,
    max_memory: u64,
    run: RunOptions,
    /// What no handler's directory may reach: the caches and the
    /// component's file.
    apart: Vec<crate::trusted::Kept>,
    /// The figures `--metrics` reports, if asked for.
    pub(super) metrics: Option<Arc<Metrics>>,
}

impl Shared {
    pub(super) fn new(
        engine: Engine,
        pre: Template,
        net: Net,
        notices: Notices,
        max_memory: u64,
        run: RunOptions,
        apart: Vec<crate::trusted::Kept>,
    ) -> Shared {
        let limits = net.limits();
        // Only with a trail: without one, nothing is recorded to pay for.
        let audited = run.audit_trail().is_on();
        let trail_rates = (audited && limits.max_audit_rate_per_client > 0).then(|| {
            crate::audit::ClientRates::new(
                limits.max_audit_rate_per_client,
                limits.max_audit_per_request,
                moat_policy::setting::Setting::MaxAuditRatePerClient
                    .spelled(net.policy().spelling()),
            )
        });
        Shared {
            trail_rates,
            instances: Arc::new(Semaphore::new(net.limits().max_instances.max(1) as usize)),
            shares: Shares::new(
                net.limits().max_instances_per_client,
                net.limits().max_waiting_per_client,
            ),
            engine,
            pre: std::sync::RwLock::new(pre),
            net,
            notices,
            max_memory,
            run,
            apart,
            metrics: None,
        }
    }

    /// Serves `pre` to every request from now on.
    pub(super) fn replace(&self, pre: Template) {
        *self
            .pre
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = pre;
    }

    fn refused(&self, why: Refusal) {
        if let Some(metrics) = &self.metrics {
            metrics.refused(why);
        }
    }

    /// Answers one request; never fails: what goes wrong is the client's
    /// 408, 413, 429, 500 or 503, and a debug line on `moat::http`.
    /// `tls`: whether the client came over HTTPS (the handler sees the
    /// request's scheme as `https` then); `peer`: the client's address,
    /// whose share of the instances the request takes; `watch`: what
    /// stops the handler (see [`super::watch`]).
    pub(super) async fn handle(
        &self,
        request: Request<Incoming>,
        tls: bool,
        peer: IpAddr,
        watch: &Arc<Watch>,
        places: &Requests,
        place: &mut Option<OwnedSemaphorePermit>,
    ) -> Response<HyperOutgoingBody> {
        let started = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let version = request.version();
        let scheme = if tls { Scheme::Https } else { Scheme::Http };
        let response = self
            .answer(request, scheme, peer, watch, places, place)
            .await;
        if let Some(metrics) = &self.metrics {
            metrics.answered(&method, response.status(), started.elapsed());
        }
        tracing::debug!(
            target: "moat::http",
            %method, %path, status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64, ?version,
            "request"
        );
        response
    }

    async fn answer(
        &self,
        request: Request<Incoming>,
        scheme: Scheme,
        peer: IpAddr,
        watch: &Arc<Watch>,
        places: &Requests,
        place: &mut Option<OwnedSemaphorePermit>,
    ) -> Response<HyperOutgoingBody> {
        let limits = self.net.limits();
        let max_body = limits.max_http_body_size;
        let declared = request
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > max_body) {
            self.refused(Refusal::BodyTooLarge);
            return too_large(max_body);
        }
        let limit = self
            .run
            .net
            .limits
            .timeout
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        // One wait for both places, within the request's time: the
        // client's own share first, so that a client past its share waits
        // behind its own requests, never ahead of anyone else's.
        let deadline = tokio::time::Instant::now() + limit;
        let Ok(Ok(share)) = tokio::time::timeout_at(deadline, self.shares.take(peer)).await else {
            tracing::debug!(target: "moat::http", %peer, max = limits.max_instances_per_client, "a client past its share of instances");
            self.refused(Refusal::ClientShare);
            return too_many_from_client(limits.max_instances_per_client);
        };
        *place = places.try_take();
        if place.is_none() {
            tracing::debug!(target: "moat::http", "a request past the server's bound on requests at once");
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server is answering its {} requests at once\n",
                    moat_policy::setting::Setting::MaxHttpConnections.flag()
                ),
            );
        }
        let waiting = self.metrics.as_ref().map(|m| m.waiting());
        let waited =
            tokio::time::timeout_at(deadline, Arc::clone(&self.instances).acquire_owned()).await;
        drop(waiting);
        let Ok(Ok(instance)) = waited else {
            tracing::debug!(target: "moat::http", max = limits.max_instances, "no instance free within the request's time");
            self.refused(Refusal::InstancesBusy);
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server's {} handlers are all busy\n",
                    moat_policy::setting::Setting::MaxInstances.flag()
                ),
            );
        };
        tracing::debug!(target: "moat::http", %peer, "a handler instance taken");
        let flags = BodyFlags::default();
        let pause = limits.http_request_body_timeout;
        let bounds = BodyBounds {
            max: max_body,
            pause,
            rate: limits.min_http_body_rate,
        };
        let request = request.map(|body| LimitedBody::new(body, bounds, &flags, Arc::clone(watch)));
        let mut wasi = match crate::moat::wasi_ctx(&self.run, &self.apart) {
            Ok(wasi) => wasi,
            Err(e) => return internal(&format!("{e}")),
        };
        let spelling = self.run.net.policy.spelling();
        // The request's share of the trail: its handler's records, and its
        // outgoing requests' and sockets' (the context's hooks take it now),
        // are paid from it, and from its client's rate.
        let trail_share = self.run.audit_trail().is_on().then(|| {
            crate::audit::TrailShare::new(
                limits.max_audit_per_request,
                moat_policy::setting::Setting::MaxAuditPerRequest.spelled(spelling),
                self.trail_rates
                    .as_ref()
                    .map(|rates| rates.of(crate::net::limits::peer_of(peer))),
            )
        });
        let moat = crate::audit::with_share(trail_share.as_ref(), || {
            MoatCtx::on_net(
                self.net.clone(),
                self.notices.clone(),
                self.max_memory,
                Duration::ZERO,
                &mut wasi,
            )
        });
        let mut store = Store::new(
            &self.engine,
            RunState {
                wasi: wasi.build(),
                moat,
                table: ResourceTable::new(),
            },
        );
        kit::prepare(&mut store);
        let mut callback = deadline_callback(Instant::now() + limit, limit, spelling);
        store.epoch_deadline_callback(move |_| callback());

        let pre = self
            .pre
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // Set only when the handler ends in an error, not at every store
        // drop as for the guest's own request bodies: a handler returns
        // right after finishing its body, often before hyper has read the
        // end, and that whole body would be reported cut off.
        let stopped = Abandoned::default();
        let stopping = stopped.clone();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let handler = match pre {
            Template::P2(pre) => {
                let view = store.data_mut();
                let incoming = view.http_view().new_incoming_request(scheme, request);
                let outparam = view.http_view().new_response_outparam(sender);
                let (incoming, outparam) = match (incoming, outparam) {
                    (Ok(i), Ok(o)) => (i, o),
                    (Err(e), _) | (_, Err(e)) => return internal(&format!("{e:#}")),
                };
                // The handler runs on a task of its own: it goes on writing
                // the body after handing over the response, and the instance
                // lives until it returns or is stopped.
                let watch = Arc::clone(watch);
                tokio::spawn(crate::audit::in_share(trail_share, async move {
                    let call = async {
                        let proxy = pre.instantiate_async(&mut store).await?;
                        proxy
                            .wasi_http_incoming_handler()
                            .call_handle(&mut store, incoming, outparam)
                            .await
                    };
                    let ended = tokio::select! {
                        ended = bounded(limit, spelling, call) => ended,
                        () = watch.stopped() => Err(wasmtime::Error::new(Stopped)),
                    };
                    if ended.is_err() {
                        stopping.set();
                    }
                    store.data().moat.http.guest_gone();
                    // The instance's place is given back once its memory is.
                    drop(store);
                    drop(instance);
                    drop(share);
                    ended
                }))
            }
            Template::P3(pre) => {
                let view = store.data_mut().http_view();
                let (request, request_io) = P3Request::from_http(view.hooks, request);
                let request = match view.table.push(request) {
                    Ok(request) => request,
                    Err(e) => return internal(&format!("{e:#}")),
                };
                // As for 0.2, on a task of its own; and the store's event
                // loop must go on running while the body is sent (the
                // guest's tasks write it), so the call returns only once
                // hyper is done with the body.
                let watch = Arc::clone(watch);
                tokio::spawn(crate::audit::in_share(trail_share, async move {
                    let call = async {
                        let service = pre.instantiate_async(&mut store).await?;
                        store
                            .run_concurrent(async move |accessor| {
                                let answered = service
                                    .wasi_http_handler()
                                    .call_handle(accessor, request)
                                    .await?;
                                let response = match answered {
                                    Ok(response) => response,
                                    Err(code) => {
                                        let _ = sender.send(Err(p3_code(&code)));
                                        return Ok(());
                                    }
                                };
                                let response = accessor.with(|mut access| {
                                    let response =
                                        access.get().http_view().table.delete(response)?;
                                    response.into_http_with_getter(
                                        &mut access,
                                        request_io,
                                        http_view_of,
                                    )
                                })?;
                                let (over, body_over) = tokio::sync::oneshot::channel();
                                let response =
                                    response.map(|body| Watched::new(body, over).boxed_unsync());
                                let _ = sender.send(Ok(response));
                                let _ = body_over.await;
                                Ok(())
                            })
                            .await?
                    };
                    let ended = tokio::select! {
                        ended = bounded(limit, spelling, call) => ended,
                        () = watch.stopped() => Err(wasmtime::Error::new(Stopped)),
                    };
                    if ended.is_err() {
                        stopping.set();
                    }
                    store.data().moat.http.guest_gone();
                    drop(store);
                    drop(instance);
                    drop(share);
                    ended
                }))
            }
        };
        let answered = receiver.await;
        let handler_answered = matches!(answered, Ok(Ok(_)));
        let response = match answered {
            Ok(Ok(response)) => response
                .map(|body| Unfinished::new(body, stopped, response_cut_short).boxed_unsync()),
            Ok(Err(code)) => {
                tracing::debug!(target: "moat::http", ?code, "the handler answered with an error");
                internal(&format!("the handler failed: {code:?}"))
            }
            Err(_) => {
                // The handler ended without setting the response.
                let why = match handler.await {
                    Ok(Ok(())) => "the handler returned without a response".to_owned(),
                    Ok(Err(e)) => {
                        // The client can make a handler trap at will: the
                        // details (the guest's backtrace) go to the debug
                        // log, never to the client or the terminal.
                        tracing::debug!(target: "moat::http", error = format!("{e:#}"), "the handler failed");
                        describe(&e)
                    }
                    Err(e) => format!("the handler's task failed: {e}"),
                };
                internal(&why)
            }
        };
        if flags.paused.get() {
            self.refused(Refusal::BodyTimeout);
            return request_timeout(pause);
        }
        if flags.slow.get() {
            self.refused(Refusal::BodyTimeout);
            return body_too_slow(limits.min_http_body_rate);
        }
        if flags.exceeded.get() {
            self.refused(Refusal::BodyTooLarge);
            return too_large(max_body);
        }
        if !handler_answered {
            self.refused(Refusal::HandlerFailed);
        }
        response
    }
}

/// Why a handler was stopped before it ended: its client paused its
/// request body, left its response untaken, or went away.
#[derive(Debug, thiserror::Error)]
#[error("the handler was stopped: its client paused, stopped reading or went away")]
struct Stopped;

/// `call`, stopped at the request's time limit.
async fn bounded(
    limit: Duration,
    spelling: moat_policy::setting::Spelling,
    call: impl Future<Output = wasmtime::Result<()>>,
) -> wasmtime::Result<()> {
    match tokio::time::timeout(limit, call).await {
        Ok(ended) => ended,
        Err(_) => Err(wasmtime::Error::new(TimeLimitReached {
            limit,
            setting: moat_policy::setting::Setting::Timeout.spelled(spelling),
        })),
    }
}

fn http_view_of(state: &mut RunState) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
    state.http_view()
}

/// A 0.3 handler's error code as the 0.2 one the answer is built from.
fn p3_code(code: &wasmtime_wasi_http::p3::bindings::http::types::ErrorCode) -> ErrorCode {
    ErrorCode::InternalError(Some(format!("{code:?}")))
}

/// What a client is told of a handler that ended without answering.
fn describe(e: &wasmtime::Error) -> String {
    if let Some(reached) = e.downcast_ref::<MemoryLimitReached>() {
        format!("the handler was stopped: {reached}")
    } else if let Some(reached) = e.downcast_ref::<TimeLimitReached>() {
        format!("the handler was stopped: {reached}")
    } else {
        "the handler trapped".to_owned()
    }
}

pub(super) fn text(status: StatusCode, body: String) -> Response<HyperOutgoingBody> {
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn internal(why: &str) -> Response<HyperOutgoingBody> {
    text(StatusCode::INTERNAL_SERVER_ERROR, format!("{why}\n"))
}

fn body_too_slow(rate: u64) -> Response<HyperOutgoingBody> {
    body_timed_out(format!(
        "the request body came slower than {rate} bytes a second (the server's {})\n",
        moat_policy::setting::Setting::MinHttpBodyRate.flag()
    ))
}

fn request_timeout(pause: Duration) -> Response<HyperOutgoingBody> {
    body_timed_out(format!(
        "the request body paused for longer than {pause:?} (the server's {})\n",
        moat_policy::setting::Setting::HttpRequestBodyTimeout.flag()
    ))
}

/// A 408 saying `why`, the connection closed after it: the rest of the
/// body is not read.
fn body_timed_out(why: String) -> Response<HyperOutgoingBody> {
    let mut response = text(StatusCode::REQUEST_TIMEOUT, why);
    response.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

fn too_many_from_client(share: u32) -> Response<HyperOutgoingBody> {
    let mut response = text(
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "this client has {share} requests being answered already (the server's {})\n",
            moat_policy::setting::Setting::MaxInstancesPerClient.flag()
        ),
    );
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

fn too_large(max: u64) -> Response<HyperOutgoingBody> {
    text(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "request body larger than {max} bytes (the server's {})\n",
            moat_policy::setting::Setting::MaxHttpBodySize.flag()
        ),
    )
}

/// Advances the engine's epoch every [`TIME_TICK`] while the server runs,
/// so that a handler that computes without end reaches its deadline
/// check. Stops when dropped.
pub(super) struct TimeTicker(Option<mpsc::Sender<()>>);

impl TimeTicker {
    pub(super) fn start(engine: Engine) -> Result<TimeTicker, MoatError> {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("moat-serve-time".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TIME_TICK) {
                    engine.increment_epoch();
                }
            })
            .map_err(|source| MoatError::Thread {
                what: "request-time",
                source,
            })?;
        Ok(TimeTicker(Some(stop)))
    }
}

impl Drop for TimeTicker {
    fn drop(&mut self) {
        drop(self.0.take());
    }
}
