//! The handler, over wasi:http 0.2 and 0.3 alike: linked and type-checked
//! once ([`Handler`]), then for each request made ready in the request's
//! store ([`Handler::prepare`]) and called ([`Prepared::call`]). The shape
//! is wasmtime-wasi-http's own `ProxyPre` and `Prepared`; moat keeps its
//! own because its 0.2 handlers are called plainly, not as concurrent
//! calls, and its 0.3 call returns only once hyper is done with the body.

use std::pin::Pin;

use http_body_util::BodyExt;
use hyper::{Request, Response};
use tokio::sync::oneshot;
use wasmtime::Store;
use wasmtime::component::Resource;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};
use wasmtime_wasi_http::p3::Request as P3Request;
use wasmtime_wasi_http::p3::bindings::ServicePre;

use super::body::{LimitedBody, Watched};
use crate::bindings::http::HttpView;
use crate::run_state::RunState;

/// Where the handler's response goes: its head, or the error code it
/// answered with instead.
pub(crate) type Answer = oneshot::Sender<Result<Response<HyperOutgoingBody>, ErrorCode>>;

/// The handler, linked and type-checked once: a wasi:http 0.2 `proxy`
/// (`incoming-handler`) or a 0.3 `service` (`handler`).
#[derive(Clone)]
pub(crate) enum Handler {
    P2(ProxyPre<RunState>),
    P3(ServicePre<RunState>),
}

/// The body of a 0.3 request, flowing to the guest while it runs.
type RequestIo = Pin<Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>>;

/// One request's call of the handler, ready in its store: the request and
/// the place for its answer are in the store's table.
pub(crate) enum Prepared {
    P2 {
        pre: ProxyPre<RunState>,
        request: Resource<HostIncomingRequest>,
        answer: Resource<HostResponseOutparam>,
    },
    P3 {
        pre: ServicePre<RunState>,
        request: Resource<P3Request>,
        request_io: RequestIo,
        answer: Answer,
    },
}

impl Handler {
    /// Puts `request` (which came over `scheme`) and `answer` in the
    /// store's table, for [`Prepared::call`].
    ///
    /// # Errors
    /// The store's table is full (a bug: a fresh store holds nothing).
    pub(crate) fn prepare(
        self,
        store: &mut Store<RunState>,
        request: Request<LimitedBody>,
        scheme: Scheme,
        answer: Answer,
    ) -> wasmtime::Result<Prepared> {
        let mut view = store.data_mut().http_view();
        Ok(match self {
            Handler::P2(pre) => Prepared::P2 {
                pre,
                request: view.new_incoming_request(scheme, request)?,
                answer: view.new_response_outparam(answer)?,
            },
            Handler::P3(pre) => {
                let (request, request_io) = P3Request::from_http(view.hooks, request);
                Prepared::P3 {
                    pre,
                    request: view.table.push(request)?,
                    request_io: Box::pin(request_io),
                    answer,
                }
            }
        })
    }
}

impl Prepared {
    /// Instantiates the handler in `store` and calls it with the request.
    /// Returns when the handler has returned; a 0.3 handler, once hyper is
    /// done with the response's body too, since the store's event loop
    /// runs the guest's tasks that write it.
    ///
    /// # Errors
    /// The guest trapped, or failed to instantiate.
    pub(crate) async fn call(self, store: &mut Store<RunState>) -> wasmtime::Result<()> {
        match self {
            Prepared::P2 {
                pre,
                request,
                answer,
            } => {
                let proxy = pre.instantiate_async(&mut *store).await?;
                proxy
                    .wasi_http_incoming_handler()
                    .call_handle(&mut *store, request, answer)
                    .await
            }
            Prepared::P3 {
                pre,
                request,
                request_io,
                answer,
            } => {
                let service = pre.instantiate_async(&mut *store).await?;
                store
                    .run_concurrent(async move |accessor| {
                        let answered = service
                            .wasi_http_handler()
                            .call_handle(accessor, request)
                            .await?;
                        let response = match answered {
                            Ok(response) => response,
                            Err(code) => {
                                let _ = answer.send(Err(p3_code(&code)));
                                return Ok(());
                            }
                        };
                        let response = accessor.with(|mut access| {
                            let response = access.get().http_view().table.delete(response)?;
                            response.into_http_with_getter(&mut access, request_io, http_view_of)
                        })?;
                        let (over, body_over) = oneshot::channel();
                        let response = response.map(|body| Watched::new(body, over).boxed_unsync());
                        let _ = answer.send(Ok(response));
                        let _ = body_over.await;
                        Ok(())
                    })
                    .await?
            }
        }
    }
}

fn http_view_of(state: &mut RunState) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
    state.http_view()
}

/// A 0.3 handler's error code as the 0.2 one the answer is built from.
fn p3_code(code: &wasmtime_wasi_http::p3::bindings::http::types::ErrorCode) -> ErrorCode {
    ErrorCode::InternalError(Some(format!("{code:?}")))
}
