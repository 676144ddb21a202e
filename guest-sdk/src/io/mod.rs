//! Asynchronous stdin, stdout and stderr.
//!
//! `std::io` works in a guest too (`println!`, `eprintln!`), but its calls
//! block the whole guest, every task, until the host has written the bytes:
//! a `println!` to a slow terminal or a full pipe stops every connection.
//! These do not: a guest can relay stdin to a socket while another task
//! relays the socket to stdout.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let mut stdin = moat_sdk::io::stdin();
//! let mut stdout = moat_sdk::io::stdout();
//! let mut buf = vec![0; 4096];
//! loop {
//!     let n = stdin.read(&mut buf).await?;
//!     if n == 0 {
//!         break;
//!     }
//!     stdout.write_all(&buf[..n]).await?;
//! }
//! stdout.close().await
//! # }
//! ```

pub(crate) mod incoming;
pub(crate) mod outgoing;
mod report;

use std::io;

use crate::bindings::wasi::cli::types::ErrorCode as CliError;
use crate::bindings::wasi::cli::{
    stderr as wasi_stderr, stdin as wasi_stdin, stdout as wasi_stdout,
};
use crate::bindings::wit_stream;
use incoming::Incoming;
use outgoing::{Outgoing, WriteError};
pub(crate) use report::Report;

fn cli_error(e: CliError) -> io::Error {
    match e {
        CliError::Pipe => io::Error::from(io::ErrorKind::BrokenPipe),
        CliError::IllegalByteSequence => {
            io::Error::new(io::ErrorKind::InvalidData, "illegal byte sequence")
        }
        CliError::Io => io::Error::other("I/O error"),
    }
}

fn write_error(e: WriteError<CliError>) -> io::Error {
    match e {
        WriteError::Failed(e) => cli_error(e),
        WriteError::Ended => io::Error::from(io::ErrorKind::BrokenPipe),
    }
}

/// The guest's standard input, read asynchronously.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let mut stdin = moat_sdk::io::stdin();
/// let mut line = Vec::new();
/// while stdin.read_buf(&mut line).await? > 0 {}
/// # Ok(())
/// # }
/// ```
pub struct Stdin(Incoming<CliError>);

/// Opens standard input.
pub fn stdin() -> Stdin {
    let mut incoming = Incoming::new();
    let (stream, outcome) = wasi_stdin::read_via_stream();
    incoming.open(stream, Report::Future(outcome));
    Stdin(incoming)
}

impl Stdin {
    /// Reads into `buf`; 0 at end of input.
    ///
    /// # Cancel safety
    /// Cancel-safe: bytes of a dropped read come first in the next one.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        crate::task::consume_budget().await;
        self.0.read(buf).await.map_err(cli_error)
    }

    /// Appends to `buf` (into its spare capacity, without a copy); 0 at end
    /// of input.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`read`](Self::read).
    pub async fn read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        crate::task::consume_budget().await;
        self.0.read_buf(buf).await.map_err(cli_error)
    }
}

/// Standard output or standard error, written asynchronously.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// let mut err = moat_sdk::io::stderr();
/// err.write_all(b"warning: something\n").await?;
/// err.close().await
/// # }
/// ```
pub struct Output(Outgoing<CliError>);

/// Opens standard output.
pub fn stdout() -> Output {
    let (tx, rx) = wit_stream::new::<u8>();
    let outcome = wasi_stdout::write_via_stream(rx);
    let mut out = Outgoing::new();
    out.open(tx, Report::Future(outcome));
    Output(out)
}

/// Opens standard error.
pub fn stderr() -> Output {
    let (tx, rx) = wit_stream::new::<u8>();
    let outcome = wasi_stderr::write_via_stream(rx);
    let mut out = Outgoing::new();
    out.open(tx, Report::Future(outcome));
    Output(out)
}

impl Output {
    /// Writes all of `data`.
    ///
    /// # Cancel safety
    /// Not cancel-safe: a dropped write may have written part of `data`.
    pub async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        crate::task::consume_budget().await;
        self.0
            .write_all(data.to_vec())
            .await
            .map(drop)
            .map_err(write_error)
    }

    /// Ends the stream and waits until the host has written everything.
    /// Call it before the program ends, or the last bytes may be lost.
    pub async fn close(mut self) -> io::Result<()> {
        self.0.close().await.map_err(cli_error)
    }
}
