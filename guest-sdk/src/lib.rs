//! Write network programs for moat: async TCP for WebAssembly components.
//!
//! A moat guest is a `wasm32-wasip2` binary whose `main` is `async`. The
//! API is shaped like `tokio::net`, and the host decides what the guest may
//! reach: every call is checked against the capabilities the person running
//! it granted (`moat run --allow-net=... --allow-listen=...`).
//!
//! ```no_run
//! use moat_sdk::{Error, TcpListener};
//!
//! #[moat_sdk::main]
//! async fn main() -> Result<(), Error> {
//!     let listener = TcpListener::bind("127.0.0.1", 7000).await?;
//!     while let Some(mut conn) = listener.accept().await? {
//!         moat_sdk::spawn(async move {
//!             let mut buf = vec![0; 4096];
//!             while let Ok(n @ 1..) = conn.read(&mut buf).await {
//!                 if conn.write_all(&buf[..n]).await.is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//!     Ok(())
//! }
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` and run it
//! with `moat run --allow-listen=127.0.0.1:7000 target/wasm32-wasip2/release/NAME.wasm`.
//! `lto = true` in the release profile is worth having: the component is
//! smaller, so its first start (when moat compiles it) is faster.
//!
//! # Concurrency
//!
//! A guest is one thread. [`spawn`] runs a task beside the others (each
//! connection in its own task, say); a task that awaits lets the others
//! run. A task that computes without awaiting holds the others back, but
//! not its sockets: bytes it already wrote keep flowing (the host writes
//! them out while the guest computes).
//!
//! A program whose tasks all wait on one another, and none on the host (a
//! socket, a timer, stdin), can never run again: it stops with a panic
//! ("cannot sleep waiting only on Rust-originating events") instead of
//! hanging, and `moat run` exits as for any trap.
#![warn(missing_docs)]

mod addr;
mod error;
pub mod io;
mod listener;
mod stream;
mod task;
pub mod time;
mod tls;
mod udp;

pub use addr::split_host_port;
pub use error::{Capability, Denial, Error};
pub use listener::{ListenOptions, TcpListener};
pub use moat_sdk_macros::main;
pub use stream::{ConnectOptions, Keepalive, OwnedReadHalf, OwnedWriteHalf, TcpStream};
pub use task::{JoinHandle, spawn};
pub use tls::{Identity, TlsConnectOptions, TlsListenOptions};
pub use udp::{Datagram, MulticastInterface, UdpBindOptions, UdpSocket};

/// Ends the program now with exit status `code`, as `std::process::exit`
/// would if it could: std's own `exit` reports only success or failure
/// (any non-zero code becomes 1), this reports the code itself. Output
/// buffered by `std::io::stdout` is flushed first.
pub fn exit(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    bindings::wasi::cli::exit::exit_with_code(code);
    unreachable!("wasi:cli/exit returned")
}

/// What `#[moat_sdk::main]` expands to; not a public API.
#[doc(hidden)]
// `Result<(), ()>` is what wasi:cli/run's `result` lowers to.
#[allow(clippy::result_unit_err)]
pub mod __private {
    pub use crate::bindings::export;
    pub use crate::bindings::exports::wasi::cli::run::Guest as RunGuest;

    /// Reports how `main` ended: an error is printed to stderr, the exit
    /// code is 1.
    pub trait MainResult {
        /// `Ok` for success, `Err` after printing the error.
        fn report(self) -> Result<(), ()>;
    }

    /// Ends `main`: reports its result, then flushes what `std::io` still
    /// buffers (a guest's std runtime does not run its exit hooks when the
    /// asynchronous entry point returns).
    pub fn finish(result: impl MainResult) -> Result<(), ()> {
        use std::io::Write;
        let status = result.report();
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        status
    }

    impl MainResult for () {
        fn report(self) -> Result<(), ()> {
            Ok(())
        }
    }

    impl<E: std::fmt::Display> MainResult for Result<(), E> {
        fn report(self) -> Result<(), ()> {
            self.map_err(|e| eprintln!("error: {e}"))
        }
    }

    /// The body of the synchronous `main` a guest binary still needs: it is
    /// what a host without `wasi:cli/run@0.3.0` (an older wasmtime, say)
    /// calls, and all it can do is say so.
    pub fn sync_main_unsupported() {
        eprintln!(
            "this program is a moat guest: run it with `moat run`, which calls its asynchronous entry point (wasi:cli/run@0.3.0)"
        );
        std::process::exit(1);
    }
}

/// The generated WIT bindings (world `moat:net/guest`).
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "moat:net/guest",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "::moat_sdk::bindings",
        generate_all,
    });
}
