//! `moat`: run a WebAssembly component with the network access you grant.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
