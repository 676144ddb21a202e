//! What wasi:http holds for a guest between its calls, counted and paid
//! from the run's host memory (`--max-host-memory`).
//!
//! wasmtime-wasi-http keeps every `fields`, request and response a guest
//! makes in the store's resource table, with their header maps and
//! strings, for as long as the guest holds them; nothing of its own bounds
//! their number. moat counts them: a census of the table ([`census`]) sums
//! the content of every wasi:http object in it (header maps once each,
//! however many handles share one; a request's method, authority and
//! path) and a fixed cost per object, and the run's [`Held`] charge is set
//! to that sum.
//!
//! - A call that can make the content grow (a `fields` mutation, a
//!   request's setters) pays what it may add before it runs; when the
//!   budget has no room, the table is counted again (what the guest gave
//!   back since is paid back) and, with still no room, the call fails
//!   instead of running (`size-exceeded`, or `forbidden` in 0.2, which has
//!   no such case).
//! - Every wasi:http call is counted, and after as many calls as the table
//!   had entries at the last count (at least [`RECOUNT_EVERY`]) the table
//!   is counted again: objects made where no payment is asked (a new
//!   `fields`, a `clone`, a `headers()` share) are paid, and what was
//!   dropped is given back.
//!
//! So a count costs the number of handles the guest holds, once per as
//! many calls: a constant per call, whatever the guest holds. Between
//! counts the charge may be more than the table holds (what was dropped
//! since, what a call paid for and did not use), never less, but for the
//! fixed cost of objects made since (at most [`RECOUNT_EVERY`] times
//! [`ENTRY_BYTES`], or as many as the table held).
//!
//! Bodies are paid apart, by the body itself (a 0.2 outgoing body's
//! buffer, see `ChargedBody`), since their bytes live in channels and in
//! hyper, not in the table.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::Resource;

use http::HeaderMap;
use wasmtime::component::ResourceTable;
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::p2::body::{HostFutureTrailers, HostOutgoingBody};
use wasmtime_wasi_http::p2::types::{
    HostFutureIncomingResponse, HostIncomingResponse, HostOutgoingRequest, HostOutgoingResponse,
};

use super::HttpView;
use crate::net::NetError;
use crate::net::budget::{Budget, Charge};

/// What one wasi:http object costs the host besides its content: its
/// table slot, its box, the `FieldMap` or request struct itself. Measured
/// objects are 100 to 250 bytes; 256 covers each.
pub(crate) const ENTRY_BYTES: usize = 256;

/// What one field name costs in a header map besides its text: the map's
/// bucket (hash, name, first value, links) and its index slot.
const NAME_BYTES: usize = 112;

/// What one further value of a name costs besides its text.
const VALUE_BYTES: usize = 80;

/// The fewest wasi:http calls between two counts of the table; more when
/// the table held more entries at the last count, so that counting costs
/// a constant per call.
pub(crate) const RECOUNT_EVERY: usize = 256;

/// The run's charge for what wasi:http holds for its guest.
pub(crate) struct Held {
    charge: Charge,
    /// Calls since the last count.
    calls: usize,
    /// Calls between two counts: the table's entries at the last count,
    /// at least [`RECOUNT_EVERY`].
    every: usize,
    /// The `fields` that a `clone` made share their map with another:
    /// their next change copies it.
    shared: HashSet<u32>,
}

impl Held {
    pub(crate) fn new(budget: &Arc<Budget>) -> Held {
        Held {
            charge: Charge::empty(budget),
            calls: 0,
            every: RECOUNT_EVERY,
            shared: HashSet::new(),
        }
    }

    /// The `fields` at `a` and `b` share one map (a `clone`).
    pub(crate) fn share(&mut self, a: u32, b: u32) {
        self.shared.insert(a);
        self.shared.insert(b);
    }

    /// Whether the `fields` at `rep` may share its map, so that a change
    /// copies it (asked once: the change that copies it makes it its own).
    fn copies(&mut self, rep: u32) -> bool {
        self.shared.remove(&rep)
    }

    /// Counts a wasi:http call; the table is counted again when its turn
    /// comes.
    pub(crate) fn tick(&mut self, table: &mut ResourceTable) {
        self.calls += 1;
        if self.calls >= self.every {
            self.recount(table);
        }
    }

    /// Pays for `extra` bytes a call is about to add; when the budget has
    /// no room, counts the table again first.
    ///
    /// # Errors
    /// [`NetError::LimitReached`] (naming `--max-host-memory`) when the
    /// budget has no room for it even then; the charge is then what the
    /// table holds.
    pub(crate) fn admit(
        &mut self,
        table: &mut ResourceTable,
        extra: usize,
        what: &str,
    ) -> Result<(), NetError> {
        if self.charge.grow(extra, what).is_ok() {
            return Ok(());
        }
        let held = self.recount(table);
        self.charge.grow(extra, what).map(|()| {
            tracing::debug!(target: "moat::http", held, extra, "wasi:http objects counted again to make room");
        })
    }

    /// Counts the table and sets the charge to what it holds, as far as
    /// the budget goes (what it cannot pay is refused at the next growth);
    /// returns what it holds.
    pub(crate) fn recount(&mut self, table: &mut ResourceTable) -> usize {
        let (bytes, entries) = census(table);
        self.calls = 0;
        // Handles gone since are forgotten (a rep reused by a new object
        // would only cost it one copy's payment more).
        if self.shared.len() > entries {
            self.shared.clear();
        }
        self.every = RECOUNT_EVERY.max(entries);
        let paid = self.charge.bytes();
        if bytes > paid {
            let room = self.charge.room().min(bytes - paid);
            let _ = self.charge.grow(room, "wasi:http objects");
        } else {
            self.charge.shrink(paid - bytes);
        }
        bytes
    }

    /// Bytes paid now (for tests).
    #[cfg(test)]
    pub(crate) fn paid(&self) -> usize {
        self.charge.bytes()
    }
}

/// What a change of the `fields` at `rep` may copy: its whole map, when a
/// `clone` shares it (wasmtime-wasi-http copies a shared map before it
/// changes it), else nothing.
pub(super) fn copied_bytes<T: HttpView>(store: &mut StoreContextMut<'_, T>, rep: u32) -> usize {
    let (state, table) = store.data_mut().http_parts();
    if !state.held.copies(rep) {
        return 0;
    }
    table
        .get(&Resource::<FieldMap>::new_borrow(rep))
        .map_or(0, |map| map_bytes(map))
}

/// Pays for a call that may add `extra` bytes; whether it may go on (a
/// refusal is told to the run's notices).
pub(super) fn admit<T: HttpView>(
    store: &mut StoreContextMut<'_, T>,
    extra: usize,
    what: &str,
) -> bool {
    let (state, table) = store.data_mut().http_parts();
    state.admit(table, extra, what)
}

/// The run's head bound, which a method or an authority may not pass.
pub(super) fn header_bound<T: HttpView>(store: &mut StoreContextMut<'_, T>) -> usize {
    store.data_mut().http_state().header_bound
}

/// Marks the `fields` at `a` and `b` as sharing one map.
pub(super) fn shared<T: HttpView>(store: &mut StoreContextMut<'_, T>, a: u32, b: u32) {
    store.data_mut().http_state().held.share(a, b);
}

/// The bytes a header map holds, as the census counts them.
pub(crate) fn map_bytes(map: &HeaderMap) -> usize {
    let names: usize = map
        .keys()
        .map(|name| NAME_BYTES + name.as_str().len())
        .sum();
    let values: usize = map.values().map(|value| VALUE_BYTES + value.len()).sum();
    names + values
}

/// The bytes a new field of `name` with `value` may add to a map.
pub(crate) fn field_bytes(name: &str, value: &[u8]) -> usize {
    NAME_BYTES + VALUE_BYTES + name.len() + value.len()
}

/// The bytes a new `fields` of `entries` may hold, its entry included.
pub(crate) fn list_bytes(entries: &[(String, Vec<u8>)]) -> usize {
    ENTRY_BYTES
        + entries
            .iter()
            .map(|(name, value)| field_bytes(name, value))
            .sum::<usize>()
}

/// The bytes `values` set under `name` may add to a map.
pub(crate) fn values_bytes(name: &str, values: &[Vec<u8>]) -> usize {
    values.iter().map(|value| field_bytes(name, value)).sum()
}

/// What every wasi:http object in `table` holds ([`ENTRY_BYTES`] each,
/// and their content, each header map counted once), and how many entries
/// the table has, wasi:http's or not.
pub(crate) fn census(table: &mut ResourceTable) -> (usize, usize) {
    let mut maps = HashSet::new();
    let mut map = |map: &HeaderMap| -> usize {
        // Handles that share a map (a `clone`, `headers()`) share its
        // memory: counted by its address, once.
        if maps.insert(std::ptr::from_ref(map).addr()) {
            map_bytes(map)
        } else {
            0
        }
    };
    let mut total = 0usize;
    let mut entries = 0usize;
    for (_, entry) in table.iter_mut() {
        entries += 1;
        let entry: &dyn Any = entry;
        let held = if let Some(fields) = entry.downcast_ref::<FieldMap>() {
            map(fields)
        } else if let Some(request) = entry.downcast_ref::<HostOutgoingRequest>() {
            map(&request.headers)
                + request.authority.as_ref().map_or(0, String::len)
                + request.path_with_query.as_ref().map_or(0, String::len)
                + p2_method_bytes(&request.method)
        } else if let Some(response) = entry.downcast_ref::<HostOutgoingResponse>() {
            map(&response.headers)
        } else if let Some(response) = entry.downcast_ref::<HostIncomingResponse>() {
            map(&response.headers)
        } else if let Some(trailers) = entry.downcast_ref::<HostFutureTrailers>() {
            match trailers {
                HostFutureTrailers::Done(Ok(Some(trailers))) => map(trailers),
                _ => 0,
            }
        } else if let Some(request) = entry.downcast_ref::<wasmtime_wasi_http::p3::Request>() {
            map(&request.headers)
                + request.authority.as_ref().map_or(0, |a| a.as_str().len())
                + request
                    .path_with_query
                    .as_ref()
                    .map_or(0, |p| p.as_str().len())
                + request.method.as_str().len()
        } else if let Some(response) = entry.downcast_ref::<wasmtime_wasi_http::p3::Response>() {
            map(&response.headers)
        } else if entry.is::<HostOutgoingBody>()
            || entry.is::<HostFutureIncomingResponse>()
            || entry.is::<wasmtime_wasi_http::RequestOptions>()
            || entry
                .is::<wasmtime_wasi_http::p3::MaybeMutable<wasmtime_wasi_http::RequestOptions>>()
        {
            0
        } else {
            // Not wasi:http's: sockets, streams and pollables are bounded
            // where they are made.
            continue;
        };
        total = total.saturating_add(ENTRY_BYTES + held);
    }
    (total, entries)
}

fn p2_method_bytes(method: &wasmtime_wasi_http::p2::bindings::http::types::Method) -> usize {
    match method {
        wasmtime_wasi_http::p2::bindings::http::types::Method::Other(other) => other.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(entries: &[(&str, &str)]) -> FieldMap {
        let mut map = FieldMap::new_mutable(1 << 20);
        for (name, value) in entries {
            map.append_raw(name.parse().unwrap(), value.parse().unwrap())
                .unwrap();
        }
        map
    }

    #[test]
    fn a_census_counts_each_map_once_and_every_object() {
        let mut table = ResourceTable::new();
        let big = fields(&[("a", "1"), ("b", "22")]);
        let one = table.push(big.clone()).unwrap();
        // A share of the same map: its own entry, no more content.
        table.push(big).unwrap();
        let expected = 2 * ENTRY_BYTES
            + (NAME_BYTES + 1 + VALUE_BYTES + 1)
            + (NAME_BYTES + 1 + VALUE_BYTES + 2);
        assert_eq!(census(&mut table), (expected, 2));
        table.delete(one).unwrap();
        assert_eq!(census(&mut table), (expected - ENTRY_BYTES, 1));
        // Not wasi:http's: not counted, but an entry all the same.
        table.push(7u32).unwrap();
        assert_eq!(census(&mut table), (expected - ENTRY_BYTES, 2));
    }

    #[test]
    fn a_run_pays_for_what_the_table_holds_and_no_more_than_its_budget() {
        let budget = Budget::new(Some(4 * ENTRY_BYTES));
        let mut held = Held::new(&budget);
        let mut table = ResourceTable::new();
        held.admit(&mut table, ENTRY_BYTES, "a test").unwrap();
        table.push(FieldMap::new_mutable(1024)).unwrap();
        held.admit(&mut table, 2 * ENTRY_BYTES, "a test").unwrap();
        assert_eq!(held.paid(), 3 * ENTRY_BYTES, "paid ahead, not counted");
        // No room: counted again (one entry), then still no room.
        let refused = held
            .admit(&mut table, 4 * ENTRY_BYTES, "a test")
            .unwrap_err();
        assert!(matches!(refused, NetError::LimitReached(_)), "{refused}");
        assert_eq!(held.paid(), ENTRY_BYTES, "what the table holds");
        // What the guest gave back is paid back at the next count.
        table = ResourceTable::new();
        for _ in 0..RECOUNT_EVERY {
            held.tick(&mut table);
        }
        assert_eq!(held.paid(), 0);
        assert_eq!(budget.used(), 0);
    }
}
