//! wasi:http for moat's guests: 0.2's `outgoing-handler`, 0.3's `client`
//! and 0.3's `handler` as the middleware world imports it, with
//! wasmtime-wasi-http's resources and bodies, and every
//! request sent by the run's [`HttpClient`] through moat's own
//! `send_request` hook.
//!
//! wasmtime-wasi-http is built without its default `send_request` (which
//! resolves the name itself and judges nothing), so there is no path by
//! which a request leaves without the core's checks. As in the rest of
//! this layer, no policy check lives here: the hook hands the request and
//! the guest's timeouts to the core, tells the run's notices about a
//! refusal (one stderr line per distinct denial, as stock socket guests
//! get), and turns the core's [`HttpError`] into wasi:http's `error-code`.
//!
//! What wasi:http holds for the guest between its calls (its `fields`,
//! requests, responses and bodies) is paid from the run's host memory:
//! [`held`] counts it, and the functions that can make it grow are moat's
//! ([`held_p2`], [`held_p3`]), which refuse what the budget has no room
//! for with the guest's own error (never a trap).

mod held;
mod held_p2;
mod held_p3;

use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi_http::p2::bindings::http::outgoing_handler;
use wasmtime_wasi_http::p2::bindings::http::types as p2_types;
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::p3;
use wasmtime_wasi_http::{
    Error as WasiHttpError, RequestOptions, WasiBody, WasiHttp, WasiHttpCtx, WasiHttpCtxView,
    WasiHttpHooks,
};

use crate::net::{
    Abandoned, BoxError, HttpClient, HttpError as CoreError, HttpRequestOptions, Net, NetError,
    Notices, Unfinished, request_cut_short,
};
use crate::net::{Declared, MIN_HTTP_HEADER_SIZE, request_longer_than_declared};
use held::Held;
use moat_policy::setting::{Spelling, Worded};

/// The most a guest may write to a wasi:http 0.2 outgoing body in one
/// write (what its stream's `check-write` says), and the size of each
/// chunk the body buffers: 64 KiB, as a socket's send backlog and an
/// HTTP/2 stream's send buffer. wasmtime-wasi-http's default is 1 MiB.
pub(crate) const BODY_CHUNK: usize = 64 << 10;

/// Chunks a 0.2 outgoing body buffers before its writer waits: one (and
/// wasmtime-wasi-http keeps one slot more), so a body the guest fills and
/// never sends holds `2 × BODY_CHUNK`, paid from the run's host memory
/// until the body is sent or dropped.
const BODY_BUFFER_CHUNKS: usize = 1;

/// What one 0.2 outgoing body may hold: its channel of
/// [`BODY_BUFFER_CHUNKS`] + 1 chunks.
pub(crate) const BODY_BYTES: usize = (BODY_BUFFER_CHUNKS + 1) * BODY_CHUNK;

/// One run's wasi:http state: wasmtime-wasi-http's context, moat's hooks
/// and what the guest's objects cost.
pub(crate) struct HttpState {
    ctx: WasiHttpCtx,
    hooks: MoatHooks,
    held: Held,
    /// The run's bound on an HTTP head; a request's method and authority
    /// are each at most this long.
    header_bound: usize,
}

impl HttpState {
    /// The wasi:http state of a run on `net`, its refusals told to
    /// `notices`. Response heads are bounded by the run's
    /// `max_http_header_size` in the core; a `fields` the guest builds
    /// holds at most twice that (wasmtime-wasi-http's measure, which
    /// counts each name and value with its bookkeeping), and all of them
    /// together are paid from the run's host memory ([`held`]).
    pub(crate) fn new(net: &Net, notices: Notices) -> HttpState {
        let header_bound = net.limits().max_http_header_size.max(MIN_HTTP_HEADER_SIZE);
        let mut ctx = WasiHttpCtx::new();
        ctx.set_field_size_limit(header_bound.saturating_mul(2));
        HttpState {
            ctx,
            hooks: MoatHooks {
                client: net.http_client(),
                notices,
                gone: Abandoned::default(),
            },
            held: Held::new(net.budget()),
            header_bound,
        }
    }

    /// Counts and pays for what the table holds plus `extra` bytes a call
    /// is about to add; `false` (the refusal told to the run's notices)
    /// when the run's host memory has no room.
    fn admit(&mut self, table: &mut ResourceTable, extra: usize, what: &str) -> bool {
        match self.held.admit(table, extra, what) {
            Ok(()) => true,
            Err(refused) => {
                tracing::debug!(target: "moat::http", %refused, "wasi:http: host memory budget reached");
                let words = self.hooks.client.words();
                self.hooks.notices.tell(refused.worded(words).to_string());
                false
            }
        }
    }

    /// A charge for a new 0.2 outgoing body's buffer, or `None` (the
    /// refusal told) when the run's host memory has no room.
    fn charge_body(&mut self) -> Option<crate::net::budget::Charge> {
        match self
            .hooks
            .client
            .budget()
            .charge(BODY_BYTES, "a wasi:http outgoing body")
        {
            Ok(charge) => Some(charge),
            Err(refused) => {
                tracing::debug!(target: "moat::http", %refused, "wasi:http: host memory budget reached");
                let words = self.hooks.client.words();
                self.hooks.notices.tell(refused.worded(words).to_string());
                None
            }
        }
    }

    /// The guest is going away: request bodies it has not finished fail
    /// from now on instead of ending (see [`Unfinished`]). Called before
    /// the store is dropped, since a 0.3 body's ends live in the store's
    /// own state, which is dropped before its data; dropping this state
    /// does it too.
    pub(crate) fn guest_gone(&self) {
        self.hooks.gone.set();
    }

    /// The view wasmtime-wasi-http's host functions take; every call
    /// through it is counted ([`held::RECOUNT_EVERY`]).
    pub(crate) fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        self.held.tick(table);
        WasiHttpCtxView {
            hooks: &mut self.hooks,
            table,
            ctx: &mut self.ctx,
        }
    }
}

impl HttpState {
    /// Refuses a request whose authority is missing or empty with the
    /// run's notice (see [`add_p2_to_linker`]).
    fn refuse_no_authority(&self, authority: Option<&str>) -> bool {
        match self.hooks.client.check_authority(authority) {
            Ok(()) => false,
            Err(refusal) => {
                let words = self.hooks.client.words();
                self.hooks.notices.tell(refusal.worded(words).to_string());
                true
            }
        }
    }
}

impl Drop for HttpState {
    fn drop(&mut self) {
        // For a store dropped without `guest_gone` (an embedder's): a 0.2
        // body's sending end lives in the resource table, so with the
        // table dropped after this state (declared after it, as in moat's
        // own store data) its unfinished bodies still fail.
        self.guest_gone();
    }
}

struct MoatHooks {
    client: HttpClient,
    notices: Notices,
    /// Set when the guest is gone; the request bodies it wrote check it.
    gone: Abandoned,
}

type IoFuture = Box<dyn Future<Output = Result<(), WasiHttpError>> + Send>;

impl WasiHttpHooks for MoatHooks {
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        BODY_BUFFER_CHUNKS
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK
    }

    fn p3_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK
    }

    /// Every scheme reaches [`send_request`](Self::send_request), whose
    /// client refuses all but http and https and records the refusal with
    /// the authority as written (wasmtime-wasi-http's own check refused
    /// `ftp` or `HTTP` before moat saw them, and left no record).
    fn is_supported_scheme(&mut self, _scheme: &http::uri::Scheme) -> bool {
        true
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_done: IoFuture,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), WasiHttpError>> + Send>
    {
        let client = self.client.clone();
        let words = client.words();
        let notices = self.notices.clone();
        let options = HttpRequestOptions {
            connect_timeout: options.and_then(|o| o.connect_timeout),
            first_byte_timeout: options.and_then(|o| o.first_byte_timeout),
            between_bytes_timeout: options.and_then(|o| o.between_bytes_timeout),
        };
        let gone = self.gone.clone();
        // What the guest declared its body's length to be, if it did:
        // bytes past it fail the request rather than reach the server cut.
        let declared = request
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|length| length.to_str().ok()?.trim().parse::<u64>().ok());
        let request = request.map(|body| {
            let body = body.map_err(|e| Box::new(e) as BoxError).boxed_unsync();
            let body = Unfinished::new(body, gone, request_cut_short);
            match declared {
                Some(declared) => {
                    Declared::new(body, declared, request_longer_than_declared).boxed_unsync()
                }
                None => body.boxed_unsync(),
            }
        });
        // wasmtime-wasi-http runs the request on a task of its own: its
        // records are paid from the share of the request whose handler
        // made it (`moat serve`), as the handler's own are.
        let share = crate::audit::current_share();
        Box::new(crate::audit::in_share(share, async move {
            match client.send(request, options).await {
                Ok(response) => {
                    let response = response.map(|body| -> WasiBody {
                        UnsyncBoxBody::new(body.map_err(move |e| error_code(e, words)))
                    });
                    // The connection is driven by the run's own task, not
                    // by this future.
                    let io: IoFuture = Box::new(async { Ok(()) });
                    Ok((response, io))
                }
                Err(refused) => {
                    if tells_the_user(&refused) {
                        notices.tell(refused.worded(words).to_string());
                    }
                    Err(error_code(refused, words))
                }
            }
        }))
    }
}

/// Whether a failure is the run's own doing (a grant, a deny entry, a
/// bound), which the user can act on, rather than the network's.
fn tells_the_user(e: &CoreError) -> bool {
    matches!(
        e,
        CoreError::NoAuthority(_)
            | CoreError::BadAuthority { .. }
            | CoreError::Scheme(_)
            | CoreError::Denied(_)
            | CoreError::SecretMisplaced(_)
            | CoreError::AddressDenied(_)
            | CoreError::LimitReached(_)
            | CoreError::AuditFailed(_)
    )
}

/// The wasi:http `error-code` of a core error, its texts naming settings
/// in `words`.
fn error_code(e: CoreError, words: Spelling) -> WasiHttpError {
    match e {
        CoreError::NoAuthority(_)
        | CoreError::Denied(_)
        | CoreError::Scheme(_)
        | CoreError::SecretMisplaced(_) => WasiHttpError::HttpRequestDenied,
        CoreError::BadAuthority { .. } => WasiHttpError::HttpRequestUriInvalid,
        CoreError::AddressDenied(_) => WasiHttpError::DestinationIpProhibited,
        CoreError::LimitReached(limit) => {
            tracing::debug!(target: "moat::http", %limit, "limit reached");
            WasiHttpError::ConnectionLimitReached
        }
        // Not a connection limit: the guest is told what stopped it, in
        // the words of the setting that would let it go on.
        CoreError::AuditFailed(why) => {
            tracing::debug!(target: "moat::http", %why, "audit trail failed");
            WasiHttpError::InternalError(Some(why.worded(words).to_string()))
        }
        CoreError::Lookup(e) => match e {
            NetError::TimedOut(_) => WasiHttpError::DnsTimeout,
            NetError::NameNotResolved(why) => WasiHttpError::DnsError {
                rcode: Some(why),
                info_code: None,
            },
            other => WasiHttpError::DnsError {
                rcode: Some(other.worded(words).to_string()),
                info_code: None,
            },
        },
        CoreError::Connect { source, .. } => match source {
            NetError::ConnectionRefused => WasiHttpError::ConnectionRefused,
            NetError::Unreachable => WasiHttpError::DestinationUnavailable,
            NetError::TimedOut(_) => WasiHttpError::ConnectionTimeout,
            NetError::ConnectionReset => WasiHttpError::ConnectionTerminated,
            other => WasiHttpError::InternalError(Some(other.worded(words).to_string())),
        },
        CoreError::Tls(e) => match e {
            NetError::CertificateUntrusted(_)
            | NetError::CertificateNameMismatch(_)
            | NetError::CertificateExpired(_) => WasiHttpError::TlsCertificateError,
            NetError::TimedOut(_) => WasiHttpError::ConnectionTimeout,
            _ => WasiHttpError::TlsProtocolError,
        },
        CoreError::ConnectTimeout { .. } => WasiHttpError::ConnectionTimeout,
        CoreError::FirstByteTimeout { .. } => WasiHttpError::HttpResponseTimeout,
        CoreError::BetweenBytesTimeout { .. } => WasiHttpError::ConnectionReadTimeout,
        CoreError::HeaderTooLarge { limit, .. } => {
            WasiHttpError::HttpResponseHeaderSectionSize(u32::try_from(limit).ok())
        }
        CoreError::Protocol(e) if e.is_incomplete_message() => {
            WasiHttpError::HttpResponseIncomplete
        }
        CoreError::Protocol(_) => WasiHttpError::HttpProtocolError,
        CoreError::RequestBody(why) => WasiHttpError::InternalError(Some(why)),
    }
}

/// What the wasi:http host functions need of a store's data.
pub(crate) trait HttpView: Send {
    /// The run's wasi:http state and the store's resource table.
    fn http_view(&mut self) -> WasiHttpCtxView<'_>;
    /// The run's wasi:http state alone.
    fn http_state(&mut self) -> &mut HttpState;
    /// The run's wasi:http state and the store's resource table, apart.
    fn http_parts(&mut self) -> (&mut HttpState, &mut ResourceTable);
}

fn getter<T: HttpView>(data: &mut T) -> WasiHttpCtxView<'_> {
    data.http_view()
}

/// The 0.2 `outgoing-handler` interface, as wasmtime-wasi-http's WIT
/// names it.
const P2_OUTGOING_HANDLER: &str = "wasi:http/outgoing-handler@0.2.12";

type P2Result<T> = wasmtime::Result<(Result<T, p2_types::ErrorCode>,)>;

/// Adds wasi:http 0.2 (`types`, `outgoing-handler`) and 0.3 (`types`,
/// `client`, and `handler` as an import) to `linker`. The rest of the 0.2
/// `proxy` world (clocks, random, stdio) is WASI's, added with it.
///
/// # Errors
/// If the linker already defines one of them.
pub(crate) fn add_to_linker<T: HttpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    add_p2_to_linker(linker)?;
    p3::bindings::http::client::add_to_linker::<_, WasiHttp>(linker, getter::<T>)?;
    p3::bindings::http::types::add_to_linker::<_, WasiHttp>(linker, getter::<T>)?;
    super::shadowing(linker, held_p3::add_to_linker)?;
    add_p3_handler_import(linker)
}

/// wasi:http 0.2 alone (`types`, `outgoing-handler`): what a linker of an
/// engine without the component model's concurrency support can hold.
///
/// 0.2's `handle` is wasmtime-wasi-http's behind one check of moat's: a
/// request with no authority (or an empty one) is refused with the run's
/// notice and `HTTP-request-denied`; wasmtime-wasi-http would fail it as
/// an invalid URI before moat's hook could say why. (0.3 hands such a
/// request to the hook, which refuses it the same way.)
///
/// # Errors
/// If the linker already defines one of them.
pub(crate) fn add_p2_to_linker<T: HttpView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    use wasmtime_wasi_http::p2;
    let options = p2::bindings::LinkOptions::default();
    outgoing_handler::add_to_linker::<_, WasiHttp>(linker, getter::<T>)?;
    super::shadowing(linker, |linker| {
        linker.instance(P2_OUTGOING_HANDLER)?.func_wrap(
            "handle",
            |mut store: wasmtime::StoreContextMut<'_, T>,
             (request, options): (
                Resource<HostOutgoingRequest>,
                Option<Resource<p2_types::RequestOptions>>,
            )|
             -> P2Result<Resource<HostFutureIncomingResponse>> {
                let data = store.data_mut();
                let authority = data.http_view().table.get(&request)?.authority.clone();
                if data.http_state().refuse_no_authority(authority.as_deref()) {
                    data.http_view().table.delete(request)?;
                    return Ok((Err(p2_types::ErrorCode::HttpRequestDenied),));
                }
                let mut view = data.http_view();
                match outgoing_handler::Host::handle(&mut view, request, options) {
                    Ok(future) => Ok((Ok(future),)),
                    Err(e) => Ok((Err(p2_types::Host::convert_error_code(&mut view, e)?),)),
                }
            },
        )
    })?;
    p2::bindings::http::types::add_to_linker::<_, WasiHttp>(linker, &options.into(), getter::<T>)?;
    super::shadowing(linker, held_p2::add_to_linker)
}

/// wasi:http 0.3's `handler` interface as an import, as the `middleware`
/// world imports it (the next hop of a request a component forwards).
const P3_HANDLER: &str = "wasi:http/handler@0.3.0";

type P3Result<T> = wasmtime::Result<(Result<T, p3::bindings::http::types::ErrorCode>,)>;

/// An imported `handler.handle` is `client.send` under another name: the
/// request leaves through the run's HTTP client, under the same grants
/// (the WIT says as much: a `client.send` import may be linked to a
/// `handler.handle` export, and here the next hop is the network).
fn add_p3_handler_import<T: HttpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    use p3::bindings::http::client::HostWithStore;
    linker.instance(P3_HANDLER)?.func_wrap_concurrent(
        "handle",
        |accessor: &wasmtime::component::Accessor<T>,
         (request,): (Resource<p3::Request>,)|
         -> std::pin::Pin<
            Box<dyn Future<Output = P3Result<Resource<p3::Response>>> + Send + '_>,
        > {
            Box::pin(async move {
                let accessor = accessor.with_getter::<WasiHttp>(getter::<T>);
                match <WasiHttp as HostWithStore<T>>::send(&accessor, request).await {
                    Ok(response) => Ok((Ok(response),)),
                    Err(e) => Ok((Err(e.downcast()?),)),
                }
            })
        },
    )
}
