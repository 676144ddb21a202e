//! wasi:http 0.3's functions that can make what the host holds grow, as moat
//! defines them over wasmtime-wasi-http's own (see [`super::held`]).
//!
//! - `fields`: `from-list`, `set`, `append`, `delete` and
//!   `get-and-delete` (each change of a map a `clone` shares copies it
//!   first, and pays for the copy) are admitted
//!   against the run's host memory first; one the budget has no room for
//!   fails with `size-exceeded`, as one past the per-`fields` bound does.
//! - A request's method and authority (at most the run's head bound each,
//!   `--max-http-header-size`) and path, admitted the same way.
//!
//! What the guest drops is paid back when the table is next counted
//! ([`super::held`]).
//!
//! A 0.3 body holds nothing in the host until its request or response is
//! sent: the guest's writes wait in its own memory, and a sent body is
//! read [`super::BODY_CHUNK`] at a time.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::p3::Request;
use wasmtime_wasi_http::p3::bindings::http::types::{self as t, HeaderError, Method};

use super::HttpView;
use super::held::{
    admit, copied_bytes, field_bytes, header_bound, list_bytes, shared, values_bytes,
};

/// wasi:http 0.3's `types`, as wasmtime-wasi-http's WIT names it.
const TYPES: &str = "wasi:http/types@0.3.0";

type HeaderOut<R> = wasmtime::Result<(Result<R, HeaderError>,)>;
type UnitOut<R> = wasmtime::Result<(Result<R, ()>,)>;

/// A `fields` call's result for the guest: wasmtime-wasi-http's error
/// code, or the trap it was.
fn header_result<R>(result: Result<R, wasmtime_wasi::TrappableError<HeaderError>>) -> HeaderOut<R> {
    match result {
        Ok(value) => Ok((Ok(value),)),
        Err(error) => Ok((Err(error.downcast()?),)),
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
                return Ok((Err(HeaderError::SizeExceeded),));
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
                return Ok((Err(HeaderError::SizeExceeded),));
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
                return Ok((Err(HeaderError::SizeExceeded),));
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
            let extra = copied_bytes(&mut store, this.rep());
            if !admit(&mut store, extra, "a wasi:http fields") {
                return Ok((Err(HeaderError::SizeExceeded),));
            }
            let mut view = store.data_mut().http_view();
            header_result(t::HostFields::delete(&mut view, this, name))
        },
    )?;
    types.func_wrap(
        "[method]fields.get-and-delete",
        |mut store: StoreContextMut<'_, T>,
         (this, name): (Resource<FieldMap>, String)|
         -> HeaderOut<Vec<Vec<u8>>> {
            let extra = copied_bytes(&mut store, this.rep());
            if !admit(&mut store, extra, "a wasi:http fields") {
                return Ok((Err(HeaderError::SizeExceeded),));
            }
            let mut view = store.data_mut().http_view();
            header_result(t::HostFields::get_and_delete(&mut view, this, name))
        },
    )?;
    types.func_wrap(
        "[method]request.set-method",
        |mut store: StoreContextMut<'_, T>,
         (this, method): (Resource<Request>, Method)|
         -> UnitOut<()> {
            let len = match &method {
                Method::Other(other) => other.len(),
                _ => 0,
            };
            if len > header_bound(&mut store) || !admit(&mut store, len, "a wasi:http method") {
                return Ok((Err(()),));
            }
            let mut view = store.data_mut().http_view();
            Ok((t::HostRequest::set_method(&mut view, this, method)?,))
        },
    )?;
    types.func_wrap(
        "[method]request.set-path-with-query",
        |mut store: StoreContextMut<'_, T>,
         (this, path): (Resource<Request>, Option<String>)|
         -> UnitOut<()> {
            let len = path.as_ref().map_or(0, String::len);
            if !admit(&mut store, len, "a wasi:http path") {
                return Ok((Err(()),));
            }
            let mut view = store.data_mut().http_view();
            Ok((t::HostRequest::set_path_with_query(&mut view, this, path)?,))
        },
    )?;
    types.func_wrap(
        "[method]request.set-authority",
        |mut store: StoreContextMut<'_, T>,
         (this, authority): (Resource<Request>, Option<String>)|
         -> UnitOut<()> {
            let len = authority.as_ref().map_or(0, String::len);
            if len > header_bound(&mut store) || !admit(&mut store, len, "a wasi:http authority") {
                return Ok((Err(()),));
            }
            let mut view = store.data_mut().http_view();
            Ok((t::HostRequest::set_authority(&mut view, this, authority)?,))
        },
    )?;
    Ok(())
}
