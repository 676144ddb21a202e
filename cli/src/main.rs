//! `moat`: run a WebAssembly component with the network access you grant.
//!
//! The command line only: flags in, one run of `moat_host::Moat` out. What
//! a flag means lives in moat-host, so that an embedder and the containerd
//! shim read it the same way.

mod args;
mod progress;
mod run;

fn main() -> std::process::ExitCode {
    run::main()
}
