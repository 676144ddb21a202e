//! `wasi:sockets/ip-name-lookup`, 0.2 and 0.3, over
//! [`AddressGate::lookup`]: a name no grant names is refused with
//! `access-denied` before any DNS query; a granted name's addresses are
//! recorded as resolved from it.

use std::sync::Arc;

use futures::FutureExt;
use tokio::task::JoinHandle;
use wasmtime::component::{Accessor, Linker, Resource, ResourceType};
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddress};
use wasmtime_wasi::p2::{DynPollable, Network, Pollable, subscribe};
use wasmtime_wasi::p3::bindings::sockets::ip_name_lookup::ErrorCode as P3ErrorCode;
use wasmtime_wasi::p3::bindings::sockets::types::IpAddress as P3IpAddress;

use super::WasiNetView;
use crate::net::budget::Charge;
use crate::net::{AddressGate, Addresses, LookupError};
use moat_policy::setting::{Spelling, Worded as _};

/// The 0.2 interface moat defines (older 0.2 imports resolve to it).
const P2_INTERFACE: &str = "wasi:sockets/ip-name-lookup@0.2.12";
/// The 0.3 interface moat defines.
const P3_INTERFACE: &str = "wasi:sockets/ip-name-lookup@0.3.0";

/// A 0.2 `resolve-address-stream`: a lookup running as a task (aborted
/// when the guest drops the stream), then a cursor into its addresses.
/// The addresses are the run's one copy of the answer: a guest holding
/// many streams of one name holds one answer, not a copy per stream. The
/// stream itself (its table entry, its task) is paid from the run's host
/// memory.
pub struct NameLookup {
    lookup: Lookup,
    _charge: Charge,
}

/// What one lookup stream costs the host besides its answer: its table
/// entry, its task and the task's result; 0.9 KiB measured (20,000 streams
/// grew the host by 17.7 MiB).
const LOOKUP_STREAM_BYTES: usize = 1 << 10;

enum Lookup {
    Running(JoinHandle<Result<Arc<Addresses>, LookupError>>),
    Done(Result<(Arc<Addresses>, usize), ErrorCode>),
}

impl Drop for NameLookup {
    fn drop(&mut self) {
        if let Lookup::Running(task) = &self.lookup {
            task.abort();
        }
    }
}

impl NameLookup {
    fn start(gate: Arc<AddressGate>, name: String) -> Result<NameLookup, LookupError> {
        let charge = gate.charge(LOOKUP_STREAM_BYTES, "a name lookup stream")?;
        Ok(NameLookup {
            // Its records are paid from the share of the request whose
            // handler asked (`moat serve`).
            lookup: Lookup::Running(tokio::spawn(crate::audit::in_share(
                crate::audit::current_share(),
                async move { gate.lookup(&name).await },
            ))),
            _charge: charge,
        })
    }

    fn finish(
        &mut self,
        ended: Result<Result<Arc<Addresses>, LookupError>, tokio::task::JoinError>,
    ) {
        let result = match ended {
            Ok(Ok(addresses)) => Ok((addresses, 0)),
            Ok(Err(err)) => Err(p2_code(&err)),
            Err(_) => Err(ErrorCode::TemporaryResolverFailure),
        };
        self.lookup = Lookup::Done(result);
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for NameLookup {
    async fn ready(&mut self) {
        if let Lookup::Running(task) = &mut self.lookup {
            let ended = task.await;
            self.finish(ended);
        }
    }
}

fn p2_code(err: &LookupError) -> ErrorCode {
    match err {
        LookupError::Denied(_) => ErrorCode::AccessDenied,
        LookupError::InvalidName(_) => ErrorCode::InvalidArgument,
        LookupError::NotResolved(_) => ErrorCode::NameUnresolvable,
        LookupError::TimedOut(_) | LookupError::LimitReached(_) | LookupError::AuditFailed(_) => {
            ErrorCode::TemporaryResolverFailure
        }
    }
}

fn p3_code(err: LookupError, words: Spelling) -> P3ErrorCode {
    match err {
        LookupError::Denied(_) => P3ErrorCode::AccessDenied,
        LookupError::InvalidName(_) => P3ErrorCode::InvalidArgument,
        LookupError::NotResolved(_) => P3ErrorCode::NameUnresolvable,
        LookupError::TimedOut(_) => P3ErrorCode::TemporaryResolverFailure,
        LookupError::LimitReached(limit) => {
            P3ErrorCode::Other(Some(limit.worded(words).to_string()))
        }
        LookupError::AuditFailed(why) => P3ErrorCode::Other(Some(why.worded(words).to_string())),
    }
}

type P2Result<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Defines the 0.2 interface on `linker` (shadowing wasmtime-wasi's).
pub(super) fn add_p2_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    let mut p2 = linker.instance(P2_INTERFACE)?;
    p2.resource(
        "resolve-address-stream",
        ResourceType::host::<NameLookup>(),
        |mut store, rep| {
            store
                .data_mut()
                .ctx()
                .table
                .delete(Resource::<NameLookup>::new_own(rep))?;
            Ok(())
        },
    )?;
    p2.func_wrap(
        "resolve-addresses",
        |mut store,
         (network, name): (Resource<Network>, String)|
         -> P2Result<Resource<NameLookup>> {
            let state = store.data_mut();
            let gate = Arc::clone(state.wasi_net().gate());
            let table = state.ctx().table;
            table.get(&network)?;
            match NameLookup::start(gate, name) {
                Ok(lookup) => Ok((Ok(table.push(lookup)?),)),
                Err(err) => Ok((Err(p2_code(&err)),)),
            }
        },
    )?;
    p2.func_wrap(
        "[method]resolve-address-stream.resolve-next-address",
        |mut store, (this,): (Resource<NameLookup>,)| -> P2Result<Option<IpAddress>> {
            let lookup = store.data_mut().ctx().table.get_mut(&this)?;
            if let Lookup::Running(task) = &mut lookup.lookup {
                match task.now_or_never() {
                    Some(ended) => lookup.finish(ended),
                    None => return Ok((Err(ErrorCode::WouldBlock),)),
                }
            }
            Ok((match &mut lookup.lookup {
                Lookup::Done(Ok((addresses, next))) => {
                    let address = addresses.get(*next).copied();
                    *next += usize::from(address.is_some());
                    Ok(address.map(IpAddress::from))
                }
                Lookup::Done(Err(code)) => Err(*code),
                Lookup::Running(_) => Err(ErrorCode::WouldBlock),
            },))
        },
    )?;
    p2.func_wrap(
        "[method]resolve-address-stream.subscribe",
        |mut store,
         (this,): (Resource<NameLookup>,)|
         -> wasmtime::Result<(Resource<DynPollable>,)> {
            Ok((subscribe(store.data_mut().ctx().table, this)?,))
        },
    )?;
    Ok(())
}

/// Defines the 0.3 interface on `linker` (shadowing wasmtime-wasi's).
pub(super) fn add_p3_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    let mut p3 = linker.instance(P3_INTERFACE)?;
    p3.func_wrap_concurrent(
        "resolve-addresses",
        |accessor: &Accessor<T>, (name,): (String,)| {
            Box::pin(async move {
                let gate = accessor.with(|mut access| Arc::clone(access.get().wasi_net().gate()));
                let result = gate.lookup(&name).await;
                Ok((result
                    .map(|addresses| {
                        addresses
                            .iter()
                            .copied()
                            .map(P3IpAddress::from)
                            .collect::<Vec<_>>()
                    })
                    .map_err(|e| p3_code(e, gate.words())),))
            })
        },
    )?;
    Ok(())
}
