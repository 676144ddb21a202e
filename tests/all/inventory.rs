//! The inventory of what a guest can make the host hold
//! (`docs/inventory.md`) against the functions moat's linkers serve: every
//! function of every world moat serves (WASI 0.2 and 0.3 commands,
//! wasi:http 0.2's proxy and 0.3's service and middleware, moat:net 0.3.0
//! and 0.2.0) has its row, with what one call can make the host keep and
//! the bound that holds it, and no row names a function that is not
//! served. A new import (a wasmtime upgrade, a moat:net version) fails here
//! until it is examined and written down.
//!
//! The worlds are read from the WIT that wasmtime-wasi-http and moat ship;
//! a component that imports everything in each is made from it
//! (wit-component's dummy), and moat's linker must link it: what the
//! inventory lists is exactly what a guest can call.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use moat_host::kit::{self, MoatCtx, MoatCtxView, MoatView};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wit_parser::{Resolve, TypeDefKind, WorldItem};

const INVENTORY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/inventory.md");

/// A store's data, for the linker's type alone: no store is made.
#[allow(dead_code)]
struct Host {
    wasi: WasiCtx,
    moat: MoatCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl MoatView for Host {
    fn moat(&mut self) -> MoatCtxView<'_> {
        MoatCtxView {
            ctx: &mut self.moat,
            table: &mut self.table,
        }
    }
}

/// Where cargo keeps `package`'s sources (the version this workspace
/// builds with).
fn package_dir(package: &str) -> PathBuf {
    // Not `--offline`: `cargo metadata` wants every package of the lock's
    // graph for the platform, built or not (an optional dependency that no
    // build enables among them), and fetches those cargo's cache lacks, as
    // a fresh machine's does. `--locked`: the lock is read, never
    // rewritten. This machine's platform only: no other's crates are
    // fetched.
    let platform = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version=1",
            "--locked",
            "--filter-platform",
        ])
        .arg(platform)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata (it downloads the packages of Cargo.lock that cargo's cache lacks):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == package)
        .unwrap_or_else(|| panic!("{package} is not in the workspace's dependencies"))["manifest_path"]
        .as_str()
        .unwrap()
        .to_owned();
    Path::new(&manifest).parent().unwrap().to_owned()
}

/// `wasi:io/streams@0.2.12` as the inventory writes it: `wasi:io/streams@0.2`
/// (a 0.x interface by its major and minor version).
fn interface_key(name: &str) -> String {
    match name.split_once('@') {
        Some((interface, version)) => {
            let minor: Vec<&str> = version.split('.').take(2).collect();
            format!("{interface}@{}", minor.join("."))
        }
        None => name.to_owned(),
    }
}

/// Every function the world `world` (in the WIT at `dir`) imports, by
/// interface: its functions, methods, constructors and statics, and each
/// resource's drop. Also checks that moat's linker links a component
/// importing all of it.
fn served(
    dir: &Path,
    world: &str,
    linker: &Linker<Host>,
    engine: &Engine,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
    let world_id = resolve
        .select_world(&[package], Some(world))
        .unwrap_or_else(|e| panic!("{world}: {e:#}"));
    let mut module =
        wit_component::dummy_module(&resolve, world_id, wit_parser::ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world_id,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .unwrap();
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .validate(true)
        .encode()
        .unwrap_or_else(|e| panic!("{world}: {e:#}"));
    let component = Component::new(engine, &component).unwrap();
    if let Err(e) = linker.instantiate_pre(&component) {
        panic!("moat's linker does not serve all of {world}: {e:#}");
    }
    let mut functions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (key, item) in &resolve.worlds[world_id].imports {
        let WorldItem::Interface { id, .. } = item else {
            let name = resolve.name_world_key(key);
            functions.entry(world.to_owned()).or_default().insert(name);
            continue;
        };
        let interface = &resolve.interfaces[*id];
        let name = interface_key(&resolve.id_of(*id).unwrap());
        let entry = functions.entry(name).or_default();
        for function in interface.functions.keys() {
            entry.insert(function.clone());
        }
        for (type_name, ty) in &interface.types {
            if matches!(resolve.types[*ty].kind, TypeDefKind::Resource) {
                entry.insert(format!("[resource-drop]{type_name}"));
            }
        }
    }
    functions
}

/// The inventory's rows: `| interface | functions | holds | bound |`, the
/// functions comma-separated.
fn inventory() -> BTreeMap<String, BTreeMap<String, (String, String)>> {
    let text = std::fs::read_to_string(INVENTORY).expect("docs/inventory.md");
    let mut rows: BTreeMap<String, BTreeMap<String, (String, String)>> = BTreeMap::new();
    for line in text.lines() {
        let Some(row) = line.strip_prefix("| `") else {
            continue;
        };
        let cells: Vec<&str> = row.split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 4, "a row of four cells: {line}");
        let interface = cells[0].trim_end_matches('`').to_owned();
        let holds = cells[2].to_owned();
        let bound = cells[3].trim_end_matches('|').trim().to_owned();
        assert!(
            !holds.is_empty() && !bound.is_empty(),
            "an empty cell: {line}"
        );
        for function in cells[1].split(',') {
            let function = function.trim().trim_matches('`').to_owned();
            let before = rows
                .entry(interface.clone())
                .or_default()
                .insert(function.clone(), (holds.clone(), bound.clone()));
            assert!(before.is_none(), "{interface}#{function} has two rows");
        }
    }
    rows
}

#[test]
fn every_function_a_guest_can_call_has_its_row_in_the_inventory() {
    let engine = Engine::new(kit::configure(&mut Config::new())).unwrap();
    let mut linker = Linker::<Host>::new(&engine);
    kit::add_to_linker(&mut linker).unwrap();
    let http = package_dir("wasmtime-wasi-http");
    let moat_wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let worlds: [(PathBuf, &str); 7] = [
        (http.join("wit"), "wasi:cli/command@0.2.12"),
        (http.join("wit"), "wasi:http/proxy@0.2.12"),
        (http.join("src/p3/wit"), "wasi:cli/command@0.3.0"),
        (http.join("src/p3/wit"), "wasi:http/service@0.3.0"),
        (http.join("src/p3/wit"), "wasi:http/middleware@0.3.0"),
        (moat_wit.join("guest-sdk/wit"), "moat:net/imports@0.3.0"),
        (
            moat_wit.join("host/wit/moat-net-0.2.0"),
            "moat:net/imports@0.2.0",
        ),
    ];
    let mut served_all: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (dir, world) in &worlds {
        for (interface, functions) in served(dir, world, &linker, &engine) {
            served_all.entry(interface).or_default().extend(functions);
        }
    }
    let rows = inventory();
    let mut missing = String::new();
    for (interface, functions) in &served_all {
        let listed = rows.get(interface);
        let absent: Vec<&String> = functions
            .iter()
            .filter(|f| listed.is_none_or(|l| !l.contains_key(*f)))
            .collect();
        if !absent.is_empty() {
            missing.push_str(&format!(
                "| `{interface}` | {} | ? | ? |\n",
                absent
                    .iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let mut stale = Vec::new();
    for (interface, functions) in &rows {
        for function in functions.keys() {
            if !served_all
                .get(interface)
                .is_some_and(|served| served.contains(function))
            {
                stale.push(format!("{interface}#{function}"));
            }
        }
    }
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/inventory.md is not the functions moat serves.\nWithout a row:\n{missing}\nRows for no function served: {stale:?}"
    );
    // Every function the host holds something for names a bound.
    for (interface, functions) in &rows {
        for (function, (holds, bound)) in functions {
            assert!(
                holds == "nothing" || bound != "none",
                "{interface}#{function}: holds {holds} with no bound"
            );
        }
    }
}
