//! wasi:io 0.2's `error.to-debug-string`, without the host's stack.
//!
//! wasmtime-wasi-io answers it with the error's `Debug` form, which under
//! `RUST_BACKTRACE=1` (or `RUST_LIB_BACKTRACE=1`) ends with the host's
//! backtrace captured where the error was made: kilobytes of moat's and
//! wasmtime's symbols, handed to a guest that may pass them on (a handler
//! answering a client's bad request body with them in a 500). moat's
//! answer is the error and its causes, one line, whatever the environment
//! says.

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::WasiView;

/// wasi:io's `error` interface, as wasmtime-wasi-io's WIT names it.
const IO_ERROR: &str = "wasi:io/error@0.2.12";

/// Defines `[method]error.to-debug-string` on `linker`, shadowing
/// wasmtime-wasi-io's.
///
/// # Errors
/// If the linker has no wasi:io instance to shadow.
pub(crate) fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    super::shadowing(linker, |linker| {
        linker.instance(IO_ERROR)?.func_wrap(
            "[method]error.to-debug-string",
            |mut store: wasmtime::StoreContextMut<'_, T>,
             (error,): (Resource<wasmtime::Error>,)| {
                let error = store.data_mut().ctx().table.get(&error)?;
                Ok((describe(error),))
            },
        )
    })
}

/// The error and its causes, `outer: inner: ...`, with no backtrace.
pub(crate) fn describe(error: &wasmtime::Error) -> String {
    format!("{error:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_the_error_and_its_causes_on_one_line() {
        let error = wasmtime::Error::msg("inner").context("outer");
        assert_eq!(describe(&error), "outer: inner");
    }
}
