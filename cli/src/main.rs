//! `moat`: run a WebAssembly component with the network access you grant.
//!
//! The command line only: flags in, one run of `moat_host::Moat` out. What
//! a flag means lives in moat-host, so that an embedder and the containerd
//! shim read it the same way.

// The flags' doc comments are clap's help text, written as a user reads
// it (`[::]`, `argv[0]`): brackets there are not links.
#![allow(rustdoc::broken_intra_doc_links)]

mod args;
mod grants;
mod progress;
mod prompt;
mod run;

fn main() -> std::process::ExitCode {
    // Before anything opens a descriptor: the sockets a launcher handed
    // over (`--addr=systemd`) are then the only ones from 3 up.
    moat_host::serve::listen::take_handed_over();
    run::main()
}
