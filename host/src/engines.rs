//! The two engines a [`crate::Moat`] compiles guests for, and which one a
//! component gets.
//!
//! **Concurrent** (every guest, unless below): the component model's
//! concurrency support on, which moat:net's and WASI 0.3's asynchronous
//! functions need. That support has a price on every call between host
//! and guest, whether the guest uses it or not: a task recorded per call,
//! an event loop around each export called, a fiber handed back when a
//! store is dropped.
//!
//! **Plain**: that support off, for a wasi:http 0.2 proxy (a component
//! exporting `wasi:http/incoming-handler@0.2`) that imports nothing but
//! WASI 0.2. `moat serve` makes an instance of such a handler per request,
//! and the support costs a tenth of the instructions of a request to a
//! small handler (BENCHMARKS.md). Its linker holds WASI 0.2 and wasi:http 0.2
//! with moat's sockets, name lookups and HTTP client, the same as the
//! concurrent engine's 0.2 half: the grants, deny lists and bounds are
//! the same code on both.
//!
//! Which engine is chosen from the component's outermost import and
//! export names, read before compiling ([`is_plain_proxy`]). A component
//! that passes that reading but uses the concurrency features inside
//! (async canonical options, async function types) fails the plain
//! engine's validation, which comes before any code is compiled, and is
//! compiled for the concurrent one instead; one that compiles for the
//! plain engine but does not link there (an import of a name WASI 0.2 does
//! not have) is compiled a second time, for the concurrent one. No
//! component is compiled more than twice.

use std::sync::OnceLock;

use wasmtime::component::{Component, Linker};
use wasmtime::wasmparser::{Chunk, Encoding, Parser, Payload};
use wasmtime::{Config, Engine};

use crate::bindings::{self, http as wasi_http, wasi_sockets};
use crate::kit;
use crate::options::InstancePool;
use crate::run_state::RunState;

/// Which engine a guest was compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Support {
    /// With the component model's concurrency support.
    Concurrent,
    /// Without it: a wasi:http 0.2 proxy of WASI 0.2 imports only.
    Plain,
}

/// An engine, and linkers of what moat gives guests on it.
///
/// A linker holds only the parts ([`Parts`]) the components it links
/// import from: defining an interface costs the host functions' types and
/// names, and WASI 0.3, wasi:http and moat:net together are a third of
/// what a cached `moat run` of a small guest spends making its linker
/// (BENCHMARKS.md). Each set of parts gets its linker on first use, then
/// keeps it for every later guest and instance.
pub(crate) struct Linked {
    pub(crate) engine: Engine,
    support: Support,
    /// One cell per set of parts, indexed by [`Parts::index`].
    linkers: [OnceLock<Linker<RunState>>; Parts::SETS],
}

impl Linked {
    /// The concurrent engine: `base` (the cache, set by the caller), with
    /// [`kit::configure`]'s settings, and the instance pool if asked for.
    pub(crate) fn concurrent(
        base: &Config,
        pool: Option<InstancePool>,
    ) -> wasmtime::Result<Linked> {
        let mut config = base.clone();
        kit::configure(&mut config);
        Ok(Linked::new(engine(&config, pool)?, Support::Concurrent))
    }

    /// The plain engine: as the concurrent one, without the component
    /// model's concurrency support; its linkers hold WASI 0.2 and wasi:http
    /// 0.2 at most.
    pub(crate) fn plain(base: &Config, pool: Option<InstancePool>) -> wasmtime::Result<Linked> {
        let mut config = base.clone();
        kit::configure(&mut config);
        config
            .wasm_component_model_async(false)
            .concurrency_support(false);
        Ok(Linked::new(engine(&config, pool)?, Support::Plain))
    }

    fn new(engine: Engine, support: Support) -> Linked {
        Linked {
            engine,
            support,
            linkers: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The linker of `parts` on this engine, made on first use. On the
    /// concurrent engine a linker of every part is what
    /// [`kit::add_to_linker`] makes.
    ///
    /// # Errors
    /// If wasmtime refuses a definition (two of the same name).
    pub(crate) fn linker(&self, parts: Parts) -> wasmtime::Result<&Linker<RunState>> {
        let Some(cell) = self.linkers.get(parts.index()) else {
            return Err(wasmtime::format_err!("no linker for parts {parts:?}"));
        };
        if let Some(linker) = cell.get() {
            return Ok(linker);
        }
        let mut linker = Linker::new(&self.engine);
        if parts.has(Parts::WASI_0_2) {
            wasi_sockets::add_p2_to_linker(&mut linker)?;
        }
        match self.support {
            Support::Concurrent => {
                if parts.has(Parts::WASI_0_3) {
                    wasi_sockets::add_p3_to_linker(&mut linker)?;
                }
                if parts.has(Parts::HTTP) {
                    wasi_http::add_to_linker(&mut linker)?;
                }
                if parts.has(Parts::MOAT) {
                    bindings::add_to_linker(&mut linker)?;
                }
            }
            Support::Plain => {
                if parts.has(Parts::HTTP) {
                    wasi_http::add_p2_to_linker(&mut linker)?;
                }
            }
        }
        Ok(cell.get_or_init(|| linker))
    }
}

/// The parts of what moat links that a component imports from: WASI 0.2,
/// WASI 0.3, wasi:http (both versions) and moat's own interfaces. A part
/// is linked whole; what a component imports from no part is missing
/// whatever the linker holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parts(u8);

impl Parts {
    const WASI_0_2: u8 = 1;
    const WASI_0_3: u8 = 1 << 1;
    const HTTP: u8 = 1 << 2;
    const MOAT: u8 = 1 << 3;
    /// How many sets of parts there are.
    const SETS: usize = 16;

    /// The parts `component`'s imports come from.
    pub(crate) fn imported_by(component: &Component) -> Parts {
        let engine = component.engine();
        let bits = component
            .component_type()
            .imports(engine)
            .fold(0, |bits, (name, _)| bits | Parts::of(name).0);
        Parts(bits)
    }

    /// The parts an import of `name` needs: `wasi:http/...` is wasi:http
    /// and its WASI version, any other `wasi:` name its WASI version (0.2,
    /// or 0.3 for every other), `moat:` moat's own.
    fn of(name: &str) -> Parts {
        let mut bits = 0;
        if name.starts_with("moat:") {
            bits |= Self::MOAT;
        }
        if name.starts_with("wasi:") {
            bits |= if is_wasi_p2(name) {
                Self::WASI_0_2
            } else {
                Self::WASI_0_3
            };
            if name.starts_with("wasi:http/") {
                bits |= Self::HTTP;
            }
        }
        Parts(bits)
    }

    fn has(self, part: u8) -> bool {
        self.0 & part != 0
    }

    fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// An engine for `config`, its instances from `pool` if given and the
/// process can reserve it.
fn engine(config: &Config, pool: Option<InstancePool>) -> wasmtime::Result<Engine> {
    let Some(pool) = pool else {
        return Engine::new(config);
    };
    let mut pooled = config.clone();
    pooled.allocation_strategy(pool.strategy());
    Engine::new(&pooled).or_else(|e| {
        // A process whose address space is limited (ulimit -v) cannot
        // reserve the slots: instances are then made one by one, correct
        // and slower.
        tracing::warn!("instance pool unavailable, making instances on demand: {e:#}");
        Engine::new(config)
    })
}

/// The export `moat serve` calls on a wasi:http 0.2 proxy.
pub(crate) const INCOMING_HANDLER: &str = "wasi:http/incoming-handler@0.2";
/// The export `moat serve` calls on a wasi:http 0.3 service.
pub(crate) const SERVICE_HANDLER: &str = "wasi:http/handler@0.3";

/// Whether the component in `bytes` is a wasi:http 0.2 proxy that asks
/// for nothing but WASI 0.2: it exports `wasi:http/incoming-handler@0.2`,
/// every import it names is a `wasi:` interface at version 0.2, and so is
/// every `wasi:` interface it exports. Read
/// from the outermost component's import and export sections alone: the
/// bytes of nested modules and components are passed over unread (they
/// are the component's own business, and a reading that descended would
/// hold state per level of nesting), and nothing is validated (the plain
/// engine's compile does that). `false` for anything that does not parse
/// or is a core module.
pub(crate) fn is_plain_proxy(mut bytes: &[u8]) -> bool {
    let mut parser = Parser::new(0);
    let mut handler = false;
    loop {
        // With `eof` set, the parser never asks for more data.
        let Ok(Chunk::Parsed { consumed, payload }) = parser.parse(bytes, true) else {
            return false;
        };
        let Some(rest) = bytes.get(consumed..) else {
            return false;
        };
        bytes = rest;
        match payload {
            Payload::Version {
                encoding: Encoding::Module,
                ..
            } => return false,
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                let nested = usize::try_from(unchecked_range.end - unchecked_range.start);
                let Some(rest) = nested.ok().and_then(|n| bytes.get(n..)) else {
                    return false;
                };
                bytes = rest;
            }
            Payload::ComponentImportSection(imports) => {
                for import in imports {
                    match import {
                        Ok(import) if is_wasi_p2(&import.name.full_name()) => {}
                        _ => return false,
                    }
                }
            }
            Payload::ComponentExportSection(exports) => {
                for export in exports {
                    let Ok(export) = export else {
                        return false;
                    };
                    let name = export.name.full_name();
                    // moat drives a WASI 0.3 export (`wasi:cli/run`,
                    // `wasi:http/handler`) concurrently, whatever its type
                    // says: such a component needs the other engine.
                    if name.starts_with("wasi:") && !is_wasi_p2(&name) {
                        return false;
                    }
                    handler |= name.starts_with(INCOMING_HANDLER);
                }
            }
            Payload::End(_) => return handler,
            _ => {}
        }
    }
}

/// Whether `name` is a WASI interface at 0.2 (`wasi:io/streams@0.2.6`).
fn is_wasi_p2(name: &str) -> bool {
    let Some((interface, version)) = name.split_once('@') else {
        return false;
    };
    interface.starts_with("wasi:") && (version == "0.2" || version.starts_with("0.2."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_needs_the_part_its_name_is_from() {
        for (name, bits) in [
            ("wasi:io/streams@0.2.6", Parts::WASI_0_2),
            ("wasi:cli/environment@0.2.0", Parts::WASI_0_2),
            ("wasi:http/types@0.2.12", Parts::WASI_0_2 | Parts::HTTP),
            (
                "wasi:http/types@0.3.0-rc-2025-09-16",
                Parts::WASI_0_3 | Parts::HTTP,
            ),
            ("wasi:sockets/types@0.3.0", Parts::WASI_0_3),
            ("wasi:io/streams", Parts::WASI_0_3),
            ("moat:net/tcp@0.3.0", Parts::MOAT),
            ("moat:net/tcp@0.2.0", Parts::MOAT),
            ("example:kv/store@1.0.0", 0),
            ("my-func", 0),
        ] {
            assert_eq!(Parts::of(name), Parts(bits), "{name}");
        }
    }

    /// Every set of parts makes a linker on both engines: no part
    /// defines a name another part defines without shadowing it.
    #[test]
    fn every_set_of_parts_links_on_both_engines() {
        let base = Config::new();
        for linked in [
            Linked::concurrent(&base, None).expect("the concurrent engine"),
            Linked::plain(&base, None).expect("the plain engine"),
        ] {
            for bits in 0..Parts::SETS {
                let parts = Parts(u8::try_from(bits).expect("16 sets"));
                if let Err(e) = linked.linker(parts) {
                    panic!("{:?} {parts:?}: {e:#}", linked.support);
                }
            }
        }
    }

    #[test]
    fn only_wasi_0_2_interfaces_count() {
        assert!(is_wasi_p2("wasi:io/streams@0.2.6"));
        assert!(is_wasi_p2("wasi:http/types@0.2"));
        assert!(!is_wasi_p2("wasi:http/types@0.3.0"));
        assert!(!is_wasi_p2("wasi:io/streams@0.20.0"));
        assert!(!is_wasi_p2("wasi:io/streams"));
        assert!(!is_wasi_p2("moat:net/tcp@0.2.0"));
        assert!(!is_wasi_p2("my-func"));
    }

    use proptest::prelude::*;

    /// An interface name from parts, some of which moat serves, some not,
    /// at versions that are 0.2, 0.3, a release candidate or neither.
    fn interface() -> impl Strategy<Value = (String, bool)> {
        let namespace = prop::sample::select(vec!["wasi", "moat", "example"]);
        let package = prop::sample::select(vec!["cli", "http", "io", "sockets", "net", "keyvalue"]);
        let name = prop::sample::select(vec!["run", "incoming-handler", "handler", "tcp", "types"]);
        let version = prop::sample::select(vec![
            "0.2.0",
            "0.2.6",
            "0.3.0",
            "0.3.0-rc-2025-09-16",
            "0.20.0",
            "1.0.0",
        ]);
        (namespace, package, name, version).prop_map(|(ns, pkg, name, version)| {
            let p2 = ns == "wasi" && version.starts_with("0.2.");
            (format!("{ns}:{pkg}/{name}@{version}"), p2)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The reading of a component's outermost names against a model of
        /// what it should decide, and every prefix of the component's bytes
        /// read without a panic.
        #[test]
        fn a_plain_proxy_is_told_by_its_names_and_no_prefix_panics(
            imports in prop::collection::vec(interface(), 0..4),
            exports in prop::collection::vec(interface(), 0..4),
        ) {
            let mut text = String::from("(component\n");
            for (i, (name, _)) in imports.iter().enumerate() {
                text += &format!("  (import \"{name}\" (instance $i{i}))\n");
            }
            for (i, (name, _)) in exports.iter().enumerate() {
                // An instance of its own (an empty one) for each export.
                text += &format!("  (instance $e{i})\n  (export \"{name}\" (instance $e{i}))\n");
            }
            text += ")";
            // Duplicate names make no component; those cases are skipped.
            let Ok(bytes) = wat::parse_str(&text) else {
                return Ok(());
            };
            let handler = exports
                .iter()
                .any(|(name, p2)| *p2 && name.starts_with("wasi:http/incoming-handler@"));
            let expected = handler
                && imports.iter().all(|(_, p2)| *p2)
                && exports.iter().all(|(name, p2)| *p2 || !name.starts_with("wasi:"));
            prop_assert_eq!(is_plain_proxy(&bytes), expected, "{}", text);
            for end in 0..bytes.len() {
                let _ = is_plain_proxy(&bytes[..end]);
            }
        }

        /// Bytes after a component's header, whatever they are.
        #[test]
        fn any_bytes_after_a_component_header_are_read_without_a_panic(
            body in prop::collection::vec(any::<u8>(), 0..256),
        ) {
            let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
            bytes.extend_from_slice(&body);
            let _ = is_plain_proxy(&bytes);
        }
    }

    #[test]
    fn what_does_not_parse_as_a_component_is_not_a_plain_proxy() {
        assert!(!is_plain_proxy(b""));
        assert!(!is_plain_proxy(b"not wasm at all"));
        // A core module's header.
        assert!(!is_plain_proxy(b"\0asm\x01\0\0\0"));
        // A component's header, and nothing in it.
        assert!(!is_plain_proxy(b"\0asm\x0d\0\x01\0"));
    }
}
