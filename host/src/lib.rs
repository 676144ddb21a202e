//! moat: a WebAssembly host that lets sandboxed components use the network,
//! and only as far as the person running them allows.
//!
//! - [`policy`]: the two capabilities (connect, listen), their allowlists
//!   and deny lists (the moat-policy crate, re-exported).
//! - [`limits`]: every bound a setting sets ([`limits::Limits`]), and the
//!   fixed caps no setting raises, with their values.
//! - [`net`]: the socket core, plain tokio: policy-checked TCP, UDP, TLS,
//!   name lookups and HTTP, made once from a [`net::NetConfig`]; and the
//!   address gate that holds stock wasi:sockets programs to the same policy
//!   ([`net::AddressGate`]).
//! - [`bounds`]: the run's memory and time limits; [`descriptors`]: the
//!   process's descriptor limit that follows the socket cap.
//! - [`audit`]: the audit trail, a record of every network decision with
//!   the rule that made it.
//! - [`figures`]: a run's counts (decisions, connections, bytes, its
//!   component's load) for a node agent, as a file in Prometheus' text
//!   format.
//! - [`settings`]: grants, deny lists and bounds as flags, a policy file
//!   or a container's environment state them, and how they add up
//!   (moat-policy's, re-exported), with the limits and run options they
//!   give.
//! - [`Moat`], [`RunOptions`]: load and run a guest, everything set up;
//!   [`launch`]: one launch start to end, as `moat run`, `moat serve` and
//!   the containerd shim make it.
//! - [`kit`]: moat for a wasmtime engine, linker and store of your own, in
//!   three steps (a builder, a view trait, `add_to_linker`).
//!
//! The WIT glue (moat:net, and wasi:sockets under the policy) is private:
//! the [`kit`] adds it to a linker.
//!
//! # Embedding, three ways
//!
//! **Run a command component** ([`Moat::run`]): moat makes the engine,
//! the linker and the store. The policy is built in code; its denials name
//! what the code writes (`needs Policy::allow_connect("10.0.0.5:80")`,
//! [`settings::Spelling::Embedding`]), and the run's denial lines go to
//! `tracing` (target `moat::notice`, debug) unless you give a callback.
//! A [`MoatConfig`] names the compiled-code cache ([`CacheDir`]: by
//! default `$XDG_CACHE_HOME/moat`).
//!
//! ```no_run
//! use moat_host::net::Notices;
//! use moat_host::policy::Policy;
//! use moat_host::{Captured, Moat, MoatConfig, Output, RunOptions};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let moat = Moat::new(&MoatConfig::default())?;
//! let guest = moat.load("fetch.wasm")?;
//! let policy = Policy::new()
//!     .allow_connect("api.example.com:443")?
//!     .deny_connect("private,metadata")?;
//! let stdout = Captured::new();
//! let options = RunOptions::new(policy)
//!     .args(["fetch", "https://api.example.com/"])
//!     .stdout(Output::Capture(stdout.clone()))
//!     .max_memory(64 << 20)
//!     .notices(Notices::new(|line| eprintln!("guest: {line}")));
//! let exit = moat.run(&guest, options).await?;
//! println!("{}: {}", exit.code(), String::from_utf8_lossy(&stdout.contents()));
//! # Ok(())
//! # }
//! ```
//!
//! **Serve a wasi:http handler** ([`Moat::bind_server`], what `moat serve`
//! does): a fresh instance per request, HTTP/1.1 and HTTP/2, every bound
//! of [`serve`]; [`serve::ServeOptions`] takes more addresses
//! (`unix:PATH`, `systemd`), TLS and a Prometheus address;
//! [`serve::Server::reloader`] swaps the handler while it serves. Run it
//! on a multi-threaded tokio runtime: requests go side by side.
//!
//! ```no_run
//! use moat_host::policy::Policy;
//! use moat_host::serve::{ServeOptions, stop_signal};
//! use moat_host::{Moat, MoatConfig, RunOptions};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let moat = Moat::new(&MoatConfig::default())?;
//! let guest = moat.load("handler.wasm")?;
//! let run = RunOptions::new(Policy::new().allow_connect("api.example.com:443")?)
//!     .arg("handler");
//! let options = ServeOptions::new("127.0.0.1:8080", run).metrics("127.0.0.1:9090");
//! let server = moat.bind_server(&guest, options).await?;
//! println!("serving on {:?}", server.local_addr());
//! let reloader = server.reloader();
//! // Later, with a new version: reloader.reload(&moat.load("handler.wasm")?, "handler.wasm")?;
//! # drop(reloader);
//! server.serve(stop_signal()).await?;
//! # Ok(())
//! # }
//! ```
//!
//! **Your own engine, linker and store** ([`kit`]): four calls,
//! [`kit::engine`] (an engine and the [`EpochTicker`] its runs share),
//! [`kit::add_to_linker`] (WASI 0.2 and 0.3, wasi:http 0.2 and 0.3 with
//! moat's HTTP client, and moat:net: it serves wasi:http too, no
//! wasmtime-wasi-http linker needed), [`kit::MoatCtx::new`] and
//! [`kit::run_to_end`]; your store's data implements [`kit::MoatView`]
//! (returning a [`kit::MoatCtxView`]) beside wasmtime-wasi's `WasiView`.
//! The [`kit`] module has the whole program; [`kit::CompileCache`] gives
//! your engine moat's compiled-code cache.
//!
//! The crate denies `unsafe` code; the one exception is loading compiled
//! code from the cache, whose soundness is argued where it is
//! (`cache.rs`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
mod bindings;
pub mod bounds;
mod cache;
pub mod descriptors;
mod engines;
mod error;
pub mod figures;
pub mod kit;
pub mod launch;
pub mod limits;
mod memory_reset;
mod moat;
pub mod net;
mod not_wasm;
mod options;
pub mod preopen;
mod run_state;
pub mod secrets;
pub mod serve;
pub mod settings;
pub mod start;
mod start_memory;
mod ticker;
pub mod trusted;

pub use cache::{CacheDir, CacheRefused, MAX_CACHE_BYTES, NODE_CACHE_DIR, last_eviction};
pub use error::{MoatError, REFUSED_EXIT, START_FAILED_EXIT, TIMEOUT_EXIT, TRAP_EXIT};
pub use memory_reset::MemoryReset;
pub use moat::{CacheUse, Guest, Moat};
pub use moat_policy::policy;
pub use options::{Captured, Exit, Input, InstancePool, MoatConfig, Output, RunOptions};
pub use ticker::EpochTicker;
