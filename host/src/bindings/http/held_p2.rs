//! wasi:http 0.2's functions that can make what the host holds grow, as moat
//! defines them over wasmtime-wasi-http's own (see [`super::held`]).
//!
//! - `fields`: `from-list`, `set`, `append` and `delete` (each change of
//!   a map a `clone` shares copies it first, and pays for the copy) are
//!   admitted against the run's host memory first; one the
//!   budget has no room for fails with `forbidden`, and so does one past
//!   the per-`fields` bound, where wasmtime-wasi-http would trap the guest
//!   (0.2's `header-error` has no `size-exceeded`).
//! - A request's method and authority (at most the run's head bound each,
//!   `--max-http-header-size`) and path, admitted the same way; past it, the
//!   setter fails as for an invalid value.
//! - An outgoing body, request's or response's: its buffer
//!   ([`super::BODY_BYTES`]) is charged when it is made, and the charge
//!   goes with the body until it is sent or dropped; with no room, `body`
//!   fails as for a body asked twice.
//!
//! What the guest drops is paid back when the table is next counted
//! ([`super::held`]).

use http_body_util::BodyExt;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::p2::HeaderError as Trappable;
use wasmtime_wasi_http::p2::bindings::http::types::{self as t, HeaderError, Method};
use wasmtime_wasi_http::p2::body::HostOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostOutgoingRequest, HostOutgoingResponse};
use wasmtime_wasi_http::{FieldMap, FieldMapError};

use super::HttpView;
use super::held::{
    admit, copied_bytes, field_bytes, header_bound, list_bytes, shared, values_bytes,
};
use crate::net::ChargedBody;

/// wasi:http 0.2's `types`, as wasmtime-wasi-http's WIT names it.
const TYPES: &str = "wasi:http/types@0.2.12";

type HeaderOut<R> = wasmtime::Result<(Result<R, HeaderError>,)>;
type UnitOut<R> = wasmtime::Result<(Result<R, ()>,)>;

/// A `fields` call's result for the guest: wasmtime-wasi-http's error
/// code, or `forbidden` where it would have trapped for a map past its
/// bound.
fn header_result<R>(result: Result<R, Trappable>) -> HeaderOut<R> {
    match result {
        Ok(value) => Ok((Ok(value),)),
        Err(error) => match error.downcast() {
            Ok(code) => Ok((Err(code),)),
            Err(trap) => match trap.downcast_ref::<FieldMapError>() {
                Some(FieldMapError::TotalSizeTooBig | FieldMapError::TooManyFields) => {
                    tracing::debug!(target: "moat::http", "a fields past its bound: forbidden");
                    Ok((Err(HeaderError::Forbidden),))
                }
                _ => Err(trap),
            },
        },
    }
}

/// Defines the functions and destructors of the module doc on `linker`
/// (shadowing wasmtime-wasi-http's; call with shadowing allowed).
///
/// One piece: one registration of a few lines for each function the
/// module doc lists, in its order, so that the two are read side by side.
pub(super) fn add_to_linker<T: HttpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    let mut types = linker.instance(TYPES)?;
    types.func_wrap(
        "[static]fields.from-list",
        |mut store: StoreContextMut<'_, T>,
         (entries,): (Vec<(String, Vec<u8>)>,)|
         -> HeaderOut<Resource<FieldMap>> {
            let extra = list_bytes(&entries);
            if !admit(&mut store, extra, "a wasi:http fields") {
                return Ok((Err(HeaderError::Forbidden),));
            }
            let mut view = store.data_mut().http_view();
            header_result(t::HostFields::from_list(&mut view, entries))
        },
    )?;
    types.func_wrap(
        "[method]fields.clone",
        |mut store: StoreContextMut<'_, T>,
         (this,): (Resource<FieldMap>,)|
         -> wasmtime::Result<(Resource<FieldMap>,)> {
            let rep = this.rep();
            let mut view = store.data_mut().http_view();
            let copy = t::HostFields::clone(&mut view, this)?;
            // The two share one map until one of them changes.
            shared(&mut store, rep, copy.rep());
            Ok((copy,))
        },
    )?;
    types.func_wrap(
        "[method]fields.set",
        |mut store: StoreContextMut<'_, T>,
         (this, name, values): (Resource<FieldMap>, String, Vec<Vec<u8>>)|
         -> HeaderOut<()> {
            let extra = copied_bytes(&mut store, this.rep()) + values_bytes(&name, &values);
            if !admit(&mut store, extra, "a wasi:http field") {
                return Ok((Err(HeaderError::Forbidden),));
            }
            let mut view = store.data_mut().http_view();
            header_result(t::HostFields::set(&mut view, this, name, values))
        },
    )?;
    types.func_wrap(
        "[method]fields.append",
        |mut store: StoreContextMut<'_, T>,
         (this, name, value): (Resource<FieldMap>, String, Vec<u8>)|
         -> HeaderOut<()> {
            let extra = copied_bytes(&mut store, this.rep()) + field_bytes(&name, &value);
            if !admit(&mut store, extra, "a wasi:http field") {
                return Ok((Err(HeaderError::Forbidden),));
            }
            let mut view = store.data_mut().http_view();
            header_result(t::HostFields::append(&mut view, this, name, value))
        },
    )?;
    types.func_wrap(
        "[method]fields.delete",
        |mut store: StoreContextMut<'_, T>,
         (this, name): (Resource<FieldMap>, String)|
         -> HeaderOut<()> {
            // A map shared with another handle is copied before the name
            // goes.
            let extra = copied_bytes(&mut store, this.rep());
            if !admit(&mut store, extra, "a wasi:http fields") {
                return Ok((Err(HeaderError::Forbidden),));
            }
            let mut view = store.data_mut().http_view();
            header_result(t::HostFields::delete(&mut view, this, name))
        },
    )?;
    types.func_wrap(
        "[method]outgoing-request.set-method",
        |mut store: StoreContextMut<'_, T>,
         (this, method): (Resource<HostOutgoingRequest>, Method)|
         -> UnitOut<()> {
            let len = match &method {
                Method::Other(other) => other.len(),
                _ => 0,
            };
            if len > header_bound(&mut store) || !admit(&mut store, len, "a wasi:http method") {
                return Ok((Err(()),));
            }
            let mut view = store.data_mut().http_view();
            Ok((t::HostOutgoingRequest::set_method(&mut view, this, method)?,))
        },
    )?;
    types.func_wrap(
        "[method]outgoing-request.set-path-with-query",
        |mut store: StoreContextMut<'_, T>,
         (this, path): (Resource<HostOutgoingRequest>, Option<String>)|
         -> UnitOut<()> {
            let len = path.as_ref().map_or(0, String::len);
            if !admit(&mut store, len, "a wasi:http path") {
                return Ok((Err(()),));
            }
            let mut view = store.data_mut().http_view();
            Ok((t::HostOutgoingRequest::set_path_with_query(
                &mut view, this, path,
            )?,))
        },
    )?;
    types.func_wrap(
        "[method]outgoing-request.set-authority",
        |mut store: StoreContextMut<'_, T>,
         (this, authority): (Resource<HostOutgoingRequest>, Option<String>)|
         -> UnitOut<()> {
            let len = authority.as_ref().map_or(0, String::len);
            if len > header_bound(&mut store) || !admit(&mut store, len, "a wasi:http authority") {
                return Ok((Err(()),));
            }
            let mut view = store.data_mut().http_view();
            Ok((t::HostOutgoingRequest::set_authority(
                &mut view, this, authority,
            )?,))
        },
    )?;
    types.func_wrap(
        "[method]outgoing-request.body",
        |mut store: StoreContextMut<'_, T>,
         (this,): (Resource<HostOutgoingRequest>,)|
         -> UnitOut<Resource<HostOutgoingBody>> {
            let rep = this.rep();
            let (state, table) = store.data_mut().http_parts();
            let Some(charge) = state.charge_body() else {
                return Ok((Err(()),));
            };
            let mut view = state.view(table);
            let made = t::HostOutgoingRequest::body(&mut view, this)?;
            if made.is_ok() {
                let request = view
                    .table
                    .get_mut(&Resource::<HostOutgoingRequest>::new_borrow(rep))?;
                request.body = request
                    .body
                    .take()
                    .map(|body| ChargedBody::new(body, charge).boxed_unsync());
            }
            Ok((made,))
        },
    )?;
    types.func_wrap(
        "[method]outgoing-response.body",
        |mut store: StoreContextMut<'_, T>,
         (this,): (Resource<HostOutgoingResponse>,)|
         -> UnitOut<Resource<HostOutgoingBody>> {
            let rep = this.rep();
            let (state, table) = store.data_mut().http_parts();
            let Some(charge) = state.charge_body() else {
                return Ok((Err(()),));
            };
            let mut view = state.view(table);
            let made = t::HostOutgoingResponse::body(&mut view, this)?;
            if made.is_ok() {
                let response = view
                    .table
                    .get_mut(&Resource::<HostOutgoingResponse>::new_borrow(rep))?;
                response.body = response
                    .body
                    .take()
                    .map(|body| ChargedBody::new(body, charge).boxed_unsync());
            }
            Ok((made,))
        },
    )?;
    Ok(())
}
