//! The yardstick: a std::net guest on wasmtime-wasi's own p2 sockets, set
//! up the way `wasmtime run -S inherit-network` runs one (synchronous
//! bindings over wasmtime-wasi's shared tokio runtime).

use anyhow::Context;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// `moat-bench serve-wasi GUEST ARGS...`.
pub fn serve(args: &[String]) -> anyhow::Result<()> {
    let (guest, guest_args) = args.split_first().context("serve-wasi: no guest")?;
    run_guest(Engine::default(), guest, guest_args)
}

/// `moat-bench run-wasi [--cache-dir DIR] GUEST`: what `wasmtime run GUEST`
/// does (compile, with or without its cache, instantiate, call
/// `wasi:cli/run`), for `cold_start`'s column. A guest that exits (moat's
/// hello does: its synchronous entry point only says to use `moat run`)
/// has still been compiled and run, which is what is measured.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut config = wasmtime::Config::new();
    let guest = match args {
        [flag, dir, guest] if flag == "--cache-dir" => {
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir);
            config.cache(Some(wasmtime::Cache::new(cache)?));
            guest
        }
        [guest] => guest,
        _ => anyhow::bail!("usage: run-wasi [--cache-dir DIR] GUEST"),
    };
    match run_guest(Engine::new(&config)?, guest, &[]) {
        Err(e) if e.downcast_ref::<wasmtime_wasi::I32Exit>().is_some() => Ok(()),
        done => done,
    }
}

fn run_guest(engine: Engine, guest: &str, guest_args: &[String]) -> anyhow::Result<()> {
    let component = Component::from_file(&engine, guest)?;
    let mut linker = Linker::<State>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    let mut argv = vec![guest.to_owned()];
    argv.extend(guest_args.iter().cloned());
    let wasi = WasiCtxBuilder::new()
        .inherit_stdio()
        .args(&argv)
        .inherit_network()
        .allow_tcp(true)
        .allow_udp(true)
        .allow_ip_name_lookup(true)
        .build();
    let mut store = Store::new(
        &engine,
        State {
            wasi,
            table: ResourceTable::new(),
        },
    );
    let command =
        wasmtime_wasi::p2::bindings::sync::Command::instantiate(&mut store, &component, &linker)?;
    let _ = command.wasi_cli_run().call_run(&mut store)?;
    Ok(())
}
