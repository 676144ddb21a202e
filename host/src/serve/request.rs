//! One request: a fresh instance from the template, the guest's handler
//! called with the request, its response (or a 413 or a 500) handed to
//! hyper, and the instance dropped once the response body is sent.

use std::net::IpAddr;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::DEFAULT_REQUEST_TIMEOUT;
use super::body::{BodyBounds, BodyFlags, LimitedBody, response_cut_short};
use super::cost::CpuTimed;
use super::failures::{FailureLines, RequestIds};
use super::handler::Handler;
use super::metrics::Metrics;
use super::refused::Refused;
use super::share::{ClientShare, Requests, Shares};
use super::watch::Watch;
use crate::audit::IncomingRequest;
use crate::bounds::{MemoryLimitReached, TimeLimitReached, deadline_callback};
use crate::error::MoatError;
use crate::kit::{self, MoatCtx};
use crate::net::{Abandoned, Net, Notices, Unfinished};
use crate::options::RunOptions;
use crate::run_state::RunState;
use moat_policy::setting::{Spelling, Worded};

/// How often the server's ticker interrupts running handlers so that each
/// checks its request's deadline: 10 ms, so a handler in a loop is stopped
/// within 10 ms of its time, for one atomic add per tick and a check per
/// running handler.
const TIME_TICK: Duration = Duration::from_millis(10);

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
    handler: std::sync::RwLock<Handler>,
    pub(super) net: Net,
    notices: Notices,
    max_memory: u64,
    run: RunOptions,
    /// What no handler's directory may reach: the caches and the
    /// component's file.
    apart: Vec<crate::trusted::Kept>,
    /// The figures `--metrics` reports, if asked for.
    pub(super) metrics: Option<Arc<Metrics>>,
    /// Each request's id.
    ids: RequestIds,
    /// Whether a request's own id header is taken
    /// ([`super::ServeOptions::trust_request_id`]).
    pub(super) trust_request_id: bool,
    /// The operator's lines for failed handlers.
    failures: FailureLines,
}

impl Shared {
    pub(super) fn new(
        engine: Engine,
        handler: Handler,
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
            handler: std::sync::RwLock::new(handler),
            net,
            notices,
            max_memory,
            run,
            apart,
            metrics: None,
            ids: RequestIds::new(),
            trust_request_id: false,
            failures: FailureLines::new(),
        }
    }

    /// Serves `handler` to every request from now on.
    pub(super) fn replace(&self, handler: Handler) {
        *self
            .handler
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = handler;
    }

    fn refused(&self, why: &Refused) {
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
        let given = self
            .trust_request_id
            .then(|| super::failures::given_id(request.headers()))
            .flatten();
        let incoming = self.ids.next(peer, &method, &path, given);
        let response = self
            .answer(request, scheme, &incoming, watch, places, place)
            .await;
        if let Some(metrics) = &self.metrics {
            metrics.answered(&method, response.status(), started.elapsed());
        }
        tracing::debug!(
            target: "moat::http",
            %method, %path, status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64, ?version, id = incoming.id,
            "request"
        );
        response
    }

    async fn answer(
        &self,
        request: Request<Incoming>,
        scheme: Scheme,
        incoming: &Arc<IncomingRequest>,
        watch: &Arc<Watch>,
        places: &Requests,
        place: &mut Option<OwnedSemaphorePermit>,
    ) -> Response<HyperOutgoingBody> {
        let peer = incoming.peer;
        let answered = async {
            let admitted = self.admit(&request, peer, places, place).await?;
            tracing::debug!(target: "moat::http", %peer, "a handler instance taken");
            let flags = BodyFlags::default();
            let limits = self.net.limits();
            let bounds = BodyBounds {
                max: limits.max_http_body_size,
                pause: limits.http_request_body_timeout,
                rate: limits.min_http_body_rate,
            };
            let request =
                request.map(|body| LimitedBody::new(body, bounds, &flags, Arc::clone(watch)));
            let answered = self.call(request, scheme, incoming, admitted, watch).await;
            self.shape(answered, &flags)
        };
        answered.await.unwrap_or_else(|refused| {
            self.refused(&refused);
            // A handler its client stopped (by pausing, not reading or
            // going away) did not fail: the client's doing, on debug.
            if let Refused::HandlerFailed { why } = &refused
                && !watch.is_stopped()
            {
                self.failures.failed(incoming, why);
            }
            refused.response(self.net.words(), &incoming.id)
        })
    }

    /// Admits `request` from `peer`: its body not declared past the
    /// bound, a place within the client's share, among the requests at
    /// once (kept in `place`), and an instance; waiting for the share and
    /// the instance within the request's time.
    async fn admit(
        &self,
        request: &Request<Incoming>,
        peer: IpAddr,
        places: &Requests,
        place: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<Admitted, Refused> {
        let limits = self.net.limits();
        let max = limits.max_http_body_size;
        let declared = request
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > max) {
            return Err(Refused::BodyTooLarge { max });
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
            return Err(Refused::ClientShare {
                share: limits.max_instances_per_client,
            });
        };
        *place = places.try_take();
        if place.is_none() {
            tracing::debug!(target: "moat::http", "a request past the server's bound on requests at once");
            return Err(Refused::ServerBusy);
        }
        let waiting = self.metrics.as_ref().map(|m| m.waiting());
        let waited =
            tokio::time::timeout_at(deadline, Arc::clone(&self.instances).acquire_owned()).await;
        drop(waiting);
        let Ok(Ok(instance)) = waited else {
            tracing::debug!(target: "moat::http", max = limits.max_instances, "no instance free within the request's time");
            return Err(Refused::InstancesBusy);
        };
        Ok(Admitted {
            _instance: instance,
            _share: share,
            limit,
        })
    }

    /// A store for one instance of the handler, its trail records paid
    /// from `trail_share`, stopped at `limit`.
    fn store(
        &self,
        limit: Duration,
        trail_share: Option<&Arc<crate::audit::TrailShare>>,
    ) -> Result<Store<RunState>, Refused> {
        let mut wasi =
            crate::moat::wasi_ctx(&self.run, &self.apart).map_err(|e| Refused::HandlerFailed {
                why: format!("{e}"),
            })?;
        let moat = crate::audit::with_share(trail_share, || {
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
        let mut callback = deadline_callback(Instant::now() + limit, limit);
        store.epoch_deadline_callback(move |_| callback());
        Ok(store)
    }

    /// Calls the handler with `request` in a fresh instance, on a task of
    /// its own (it goes on writing the body after handing over the
    /// response, and the instance lives until it returns or is stopped),
    /// and waits for the response's head.
    async fn call(
        &self,
        request: Request<LimitedBody>,
        scheme: Scheme,
        incoming: &Arc<IncomingRequest>,
        admitted: Admitted,
        watch: &Arc<Watch>,
    ) -> Result<Response<HyperOutgoingBody>, Refused> {
        let spelling = self.net.words();
        let trail_share = self.trail_share(incoming);
        let mut store = self.store(admitted.limit, trail_share.as_ref())?;
        let handler = self
            .handler
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let (answer, answered) = tokio::sync::oneshot::channel();
        let prepared = handler
            .prepare(&mut store, request, scheme, answer)
            .map_err(|e| Refused::HandlerFailed {
                why: format!("{e:#}"),
            })?;
        // Set only when the handler ends in an error, not at every store
        // drop as for the guest's own request bodies: a handler returns
        // right after finishing its body, often before hyper has read the
        // end, and that whole body would be reported cut off.
        let stopped = Abandoned::default();
        let stopping = stopped.clone();
        let watch = Arc::clone(watch);
        let limit = admitted.limit;
        let metrics = self.metrics.clone();
        let handler = tokio::spawn(crate::audit::in_share(trail_share, async move {
            let (ended, cpu) = {
                let called = std::pin::pin!(bounded(limit, prepared.call(&mut store)));
                let mut call = CpuTimed::new(called, metrics.is_some());
                let ended = tokio::select! {
                    ended = &mut call => ended,
                    () = watch.stopped() => Err(wasmtime::Error::new(Stopped)),
                };
                (ended, call.spent())
            };
            if ended.is_err() {
                stopping.set();
            }
            if let Some(metrics) = &metrics {
                metrics.cost(cpu, store.data().moat.limiter.memory());
            }
            store.data().moat.http.guest_gone();
            // The instance's place is given back once its memory is.
            drop(store);
            drop(admitted);
            ended
        }));
        match answered.await {
            Ok(Ok(response)) => Ok(response
                .map(|body| Unfinished::new(body, stopped, response_cut_short).boxed_unsync())),
            Ok(Err(code)) => {
                tracing::debug!(target: "moat::http", ?code, "the handler answered with an error");
                Err(Refused::HandlerFailed {
                    why: format!("the handler failed: {code:?}"),
                })
            }
            // The handler ended without setting the response.
            Err(_) => Err(Refused::HandlerFailed {
                why: why_no_response(handler, spelling).await,
            }),
        }
    }

    /// The request's share of the trail, when the run keeps one: its
    /// handler's records, and its outgoing requests' and sockets' (the
    /// context's hooks take it when the handler runs), are paid from it,
    /// and from its client's rate.
    fn trail_share(
        &self,
        incoming: &Arc<IncomingRequest>,
    ) -> Option<Arc<crate::audit::TrailShare>> {
        self.run.audit_trail().is_on().then(|| {
            crate::audit::TrailShare::new(
                self.net.limits().max_audit_per_request,
                self.trail_rates
                    .as_ref()
                    .map(|rates| rates.of(crate::net::limits::peer_of(incoming.peer))),
                Some(Arc::clone(incoming)),
            )
        })
    }

    /// What the client gets: the handler's answer, unless its request's
    /// body broke a bound on the way (which the handler may have seen only
    /// as a body cut short).
    fn shape(
        &self,
        answered: Result<Response<HyperOutgoingBody>, Refused>,
        flags: &BodyFlags,
    ) -> Result<Response<HyperOutgoingBody>, Refused> {
        let limits = self.net.limits();
        if flags.paused.get() {
            return Err(Refused::BodyPaused {
                pause: limits.http_request_body_timeout,
            });
        }
        if flags.slow.get() {
            return Err(Refused::BodyTooSlow {
                rate: limits.min_http_body_rate,
            });
        }
        if flags.exceeded.get() {
            return Err(Refused::BodyTooLarge {
                max: limits.max_http_body_size,
            });
        }
        answered
    }
}

/// A request's places, held until its handler's store is gone (in this
/// order: the instance, then the client's share).
struct Admitted {
    _instance: OwnedSemaphorePermit,
    _share: ClientShare,
    /// The request's time.
    limit: Duration,
}

/// Why a handler was stopped before it ended: its client paused its
/// request body, left its response untaken, or went away.
#[derive(Debug, thiserror::Error)]
#[error("the handler was stopped: its client paused, stopped reading or went away")]
struct Stopped;

/// `call`, stopped at the request's time limit.
async fn bounded(
    limit: Duration,
    call: impl Future<Output = wasmtime::Result<()>>,
) -> wasmtime::Result<()> {
    match tokio::time::timeout(limit, call).await {
        Ok(ended) => ended,
        Err(_) => Err(wasmtime::Error::new(TimeLimitReached { limit })),
    }
}

/// What the operator's line says of a handler that ended without
/// answering, naming a limit in `spelling`'s words: the bound it reached,
/// or the trap's kind (never the guest's backtrace).
fn describe(e: &wasmtime::Error, spelling: Spelling) -> String {
    if let Some(reached) = e.downcast_ref::<MemoryLimitReached>() {
        format!("the handler was stopped: {}", reached.worded(spelling))
    } else if let Some(reached) = e.downcast_ref::<TimeLimitReached>() {
        format!("the handler was stopped: {}", reached.worded(spelling))
    } else if let Some(stopped) = e.downcast_ref::<Stopped>() {
        stopped.to_string()
    } else if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        format!("the handler trapped: {trap}")
    } else {
        "the handler trapped".to_owned()
    }
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

/// Why a handler that ended set no response, for the client's 500: it
/// returned without one, it failed (trapped or was stopped), or its task
/// did.
async fn why_no_response(
    handler: tokio::task::JoinHandle<wasmtime::Result<()>>,
    spelling: Spelling,
) -> String {
    match handler.await {
        Ok(Ok(())) => "the handler returned without a response".to_owned(),
        Ok(Err(e)) => {
            // The client can make a handler trap at will: the details (the
            // guest's backtrace) go to the debug log, never to the client
            // or the terminal.
            tracing::debug!(target: "moat::http", error = format!("{e:#}"), "the handler failed");
            describe(&e, spelling)
        }
        Err(e) => format!("the handler's task failed: {e}"),
    }
}
