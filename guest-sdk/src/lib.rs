//! The SDK for moat's guests: async TCP, UDP and TLS, timers, tasks and hyper
//! for WebAssembly components.
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
//!     let listener = TcpListener::bind("127.0.0.1:7000").await?;
//!     loop {
//!         let (mut conn, _peer) = listener.accept().await?;
//!         moat_sdk::spawn(async move {
//!             let mut buf = vec![0; 4096];
//!             while let Ok(n @ 1..) = conn.read(&mut buf).await {
//!                 if conn.write_all(&buf[..n]).await.is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//! }
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` and run it
//! with `moat run --allow-listen=127.0.0.1:7000 target/wasm32-wasip2/release/NAME.wasm`.
//! docs/guests.md has the release profile worth having (a
//! smaller component starts faster the first time, when moat compiles it).
//!
//! # Concurrency
//!
//! A guest is one thread. [`spawn`] runs a task beside the others (each
//! connection in its own task, say) and returns a [`JoinHandle`] to await
//! or abort. Tasks take turns: a task gives the others theirs when it
//! awaits something not ready yet, when it calls [`task::yield_now`], and
//! after [`task::BUDGET`] socket operations that completed at once (so a
//! task reading a flood cannot starve the rest). A task that computes
//! without awaiting holds the others back, but not its sockets: bytes it
//! already wrote keep flowing (the host writes them out while the guest
//! computes). `println!` and the rest of `std::io` block every task until
//! the host has the bytes; [`io::stdout`] does not.
//!
//! Channels, `select!` and locks from the `futures` crate work between
//! tasks (see [`task`]).
//!
//! # The async ecosystem
//!
//! [`TcpStream`] and its halves implement `futures-io`'s `AsyncRead` and
//! `AsyncWrite`; with the `tokio` feature, tokio's too; with the `hyper`
//! feature, hyper 1's `rt::Read` and `rt::Write`, so hyper's HTTP/1 client
//! and server run on them (`examples/hyper-fetch`, `examples/hyper-serve`),
//! and a `hyper::Timer` for hyper's timeouts (a hyper server's
//! `header_read_timeout` does nothing without one).
//!
//! A program whose tasks all wait on one another, and none on the host (a
//! socket, a timer, stdin), can never run again: it stops with a panic
//! ("cannot sleep waiting only on Rust-originating events") instead of
//! hanging, and `moat run` exits as for any trap.
#![warn(missing_docs)]

mod addr;
mod compat;
mod error;
#[cfg(feature = "hyper")]
pub mod hyper;
pub mod io;
mod listener;
mod stream;
pub mod task;
pub mod time;
mod tls;
mod udp;

pub use addr::{ToHostPort, split_host_port};
pub use error::{Capability, Denial, Error};
pub use listener::{ListenOptions, TcpListener};
pub use moat_sdk_macros::main;
pub use stream::{
    ConnectOptions, Keepalive, OwnedReadHalf, OwnedWriteHalf, ReuniteError, TcpStream,
};
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

/// What `#[moat_sdk::main]`'s `async fn main` may return: `()`,
/// [`ExitCode`](std::process::ExitCode), or a `Result` of either whose error
/// is `Display` (printed to stderr as `error: ...`, exit code 1).
///
/// ```no_run
/// use std::process::ExitCode;
///
/// #[moat_sdk::main]
/// async fn main() -> ExitCode {
///     match moat_sdk::TcpStream::connect("127.0.0.1:7000").await {
///         Ok(_) => ExitCode::SUCCESS,
///         Err(_) => ExitCode::from(3),
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`#[moat_sdk::main]` cannot return `{Self}`",
    label = "`main` returns this",
    note = "`main` may return (), std::process::ExitCode, Result<(), E> or Result<ExitCode, E> where E: Display"
)]
pub trait Termination {
    /// The exit code, after printing an error to stderr.
    fn report(self) -> u8;
}

impl Termination for () {
    fn report(self) -> u8 {
        0
    }
}

impl Termination for std::process::ExitCode {
    fn report(self) -> u8 {
        // std gives no way to read the code back; ExitCode is PartialEq, so
        // find it among the 256 it can be (this runs once, at exit).
        (0..=u8::MAX)
            .find(|&code| std::process::ExitCode::from(code) == self)
            .unwrap_or(1)
    }
}

impl<T: Termination, E: std::fmt::Display> Termination for Result<T, E> {
    fn report(self) -> u8 {
        match self {
            Ok(value) => value.report(),
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        }
    }
}

/// What `#[moat_sdk::main]` expands to; not a public API.
#[doc(hidden)]
// `Result<(), ()>` is what wasi:cli/run's `result` lowers to.
#[allow(clippy::result_unit_err)]
pub mod __private {
    use crate::Termination;
    pub use crate::bindings::export;
    pub use crate::bindings::exports::wasi::cli::run::Guest as RunGuest;

    /// Runs `main` as the first task, reports how it ended, then flushes
    /// what `std::io` still buffers (a guest's std runtime does not run its
    /// exit hooks when the asynchronous entry point returns). Exit codes
    /// other than 0 and 1 end the program here, with that code.
    pub async fn run_main<T: Termination>(
        main: impl std::future::Future<Output = T>,
    ) -> Result<(), ()> {
        use std::io::Write;
        let code = crate::task::run_budgeted(main).await.report();
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        match code {
            0 => Ok(()),
            1 => Err(()),
            code => crate::exit(code),
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
        path: "wit",
        world: "moat:net/guest",
        pub_export_macro: true,
        export_macro_name: "export",
        default_bindings_module: "::moat_sdk::bindings",
        generate_all,
    });
}
