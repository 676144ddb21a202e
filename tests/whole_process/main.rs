//! The tests that measure or change the whole process: the heap its
//! allocator counts ([`tls_memory`]), its resident memory and open sockets
//! ([`held`], [`cleanup`], [`hostile_stock`], [`hostile_udp`],
//! [`http_memory`], [`http_held`]), its
//! descriptor limit ([`accept_errors`]); the boundary guest's random call
//! sequences ([`boundary`]). They run one at a
//! time ([`in_turn`]), in a binary of their own, so that nothing else in
//! the process moves what they measure.

use std::sync::Mutex;

#[path = "../support/mod.rs"]
mod support;

mod accept_errors;
mod advisories;
mod boundary;
mod cleanup;
mod held;
mod hostile_stock;
mod hostile_udp;
mod http_held;
mod http_memory;
mod tls_memory;

/// The one turn every test of this binary takes.
static TURN: Mutex<()> = Mutex::new(());

/// Runs `test` in its turn ([`support::in_turn`]): alone in the process.
fn in_turn(test: impl Future<Output = ()>) {
    support::in_turn(&TURN, test);
}
