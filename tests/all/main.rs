//! moat's integration tests, as a user meets moat: the `moat` command, the
//! embedding API and real peers (curl, openssl, strace, network
//! namespaces). One module per behaviour; one binary, so that wasmtime is
//! linked once for all of them.
//!
//! The tests here run side by side. A test that measures or changes the
//! whole process (its heap, resident memory or descriptor limit) belongs
//! in `tests/whole_process/` instead.

#[path = "../support/mod.rs"]
mod support;

mod audit;
mod busy_guest;
mod chat;
mod cli;
mod dns_faults;
mod docs;
mod figures;
mod files;
mod foreign;
mod hostile;
mod http;
mod hyper;
mod inventory;
mod kit;
mod lan;
mod observe;
mod outside;
mod own_listener;
mod policy;
mod prompt;
mod secrets;
mod serve;
mod stock;
mod tasks;
mod tcp;
mod tls;
mod tls_core;
mod tls_faults;
mod trusted;
mod udp;
mod versions;
