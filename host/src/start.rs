//! Why a component cannot start, said so that its user knows what to do:
//! every import moat does not serve, grouped by package, with what moat
//! serves instead; and a command that has no entry point `moat run` can
//! call, with what it does export.
//!
//! What moat serves, by package: WASI 0.2 (any 0.2 release: wasi:cli,
//! wasi:clocks, wasi:filesystem, wasi:io, wasi:random, wasi:sockets,
//! wasi:http), WASI 0.3.0 (the same but wasi:io, which 0.3 folded into the
//! component model), and `moat:net` 0.3 and 0.2. wasmtime matches an import to a
//! definition by semver compatibility, so any 0.2.x import finds 0.2's
//! definition; a prerelease (`0.3.0-rc-2025-09-16`, what toolchains built
//! before WASI 0.3.0 was released import) matches nothing but itself.

use std::collections::BTreeMap;
use std::fmt;

use wasmtime::Engine;
use wasmtime::component::Component;

/// The WASI packages of 0.2.
const WASI_P2: &[&str] = &[
    "cli",
    "clocks",
    "filesystem",
    "io",
    "random",
    "sockets",
    "http",
];

/// The WASI packages of 0.3 (0.3 has no wasi:io).
const WASI_P3: &[&str] = &["cli", "clocks", "filesystem", "random", "sockets", "http"];

/// The imports of one package (at one version) that moat does not serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unserved {
    /// The package and version as the component names it
    /// (`wasi:cli@0.3.0-rc-2025-09-16`, `fermyon:spin@2.0.0`).
    pub package: String,
    /// The interfaces (or bare names) it imports from the package, each
    /// once, in order.
    pub interfaces: Vec<String>,
    /// What moat serves instead, and what to do.
    pub advice: String,
}

/// Every import of a component that moat does not serve, by package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingImports(pub Vec<Unserved>);

impl fmt::Display for MissingImports {
    /// One line per package: `wasi:keyvalue@0.2.0-draft: store, atomics
    /// (moat does not serve wasi:keyvalue; ...)`, separated by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, unserved) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(
                f,
                "  {}: {} ({})",
                unserved.package,
                unserved.interfaces.join(", "),
                unserved.advice
            )?;
        }
        Ok(())
    }
}

/// The imports of `component` that moat does not serve, grouped by
/// package in the order first imported; empty if it serves them all by
/// name (a failure to link is then a type mismatch, which wasmtime's own
/// message describes).
pub(crate) fn missing_imports(component: &Component, engine: &Engine) -> MissingImports {
    let mut groups: BTreeMap<usize, Unserved> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (name, _) in component.component_type().imports(engine) {
        let Some(advice) = unserved(name) else {
            continue;
        };
        let (package, interface) = split(name);
        let index = match order.iter().position(|p| *p == package) {
            Some(index) => index,
            None => {
                order.push(package.clone());
                order.len() - 1
            }
        };
        let group = groups.entry(index).or_insert_with(|| Unserved {
            package,
            interfaces: Vec::new(),
            advice,
        });
        if !group.interfaces.contains(&interface) {
            group.interfaces.push(interface);
        }
    }
    MissingImports(groups.into_values().collect())
}

/// `wasi:cli/stdout@0.2.0` as (`wasi:cli@0.2.0`, `stdout`); a name with no
/// interface is its own package.
fn split(name: &str) -> (String, String) {
    let (path, version) = match name.split_once('@') {
        Some((path, version)) => (path, Some(version)),
        None => (name, None),
    };
    let (package, interface) = path.split_once('/').unwrap_or((path, path));
    let package = match version {
        Some(version) => format!("{package}@{version}"),
        None => package.to_owned(),
    };
    (package, interface.to_owned())
}

/// `None` if moat serves the import `name`; otherwise what it serves
/// instead, and what to do.
fn unserved(name: &str) -> Option<String> {
    let (path, version) = name.split_once('@').unwrap_or((name, ""));
    let package = path.split_once('/').map_or(path, |(package, _)| package);
    let (namespace, short) = package.split_once(':').unwrap_or(("", package));
    let version = semver::Version::parse(version).ok();
    match namespace {
        "wasi" => {
            let in_p2 = WASI_P2.contains(&short);
            let in_p3 = WASI_P3.contains(&short);
            if !in_p2 && !in_p3 {
                return Some(format!(
                    "moat does not serve {package}; it serves wasi:{} (0.2) and \
                     wasi:{} (0.3.0)",
                    WASI_P2.join(", wasi:"),
                    WASI_P3.join(", wasi:")
                ));
            }
            match version {
                Some(v) if v.major == 0 && v.minor == 2 && v.pre.is_empty() && in_p2 => None,
                Some(v) if v.major == 0 && v.minor == 3 && v.pre.is_empty() && in_p3 => None,
                Some(v) if v.major == 0 && v.minor == 3 && !v.pre.is_empty() => Some(format!(
                    "a WASI 0.3 release candidate; moat serves {package} 0.3.0 and 0.2: \
                     build the component with a toolchain for WASI 0.3.0 or 0.2"
                )),
                _ => Some(format!(
                    "moat serves {package} {}",
                    match (in_p2, in_p3) {
                        (true, true) => "0.2 and 0.3.0",
                        (true, false) => "0.2",
                        _ => "0.3.0",
                    }
                )),
            }
        }
        "moat" if short == "net" => match version {
            Some(v) if v.major == 0 && (v.minor == 2 || v.minor == 3) && v.pre.is_empty() => None,
            _ => Some(
                "this moat serves moat:net 0.3 and 0.2: build the guest with this moat's moat-sdk"
                    .to_owned(),
            ),
        },
        _ => Some(format!(
            "moat does not serve {package}: the component was built for another host; \
             moat serves WASI 0.2 and 0.3.0 and moat:net"
        )),
    }
}

/// Why `moat run` does not call a component, with what it exports: it
/// is an HTTP handler (`moat serve` runs those; a toolchain may give one a
/// `wasi:cli/run` too, as Rust's wasm32-wasip2 target does, which only
/// traps or exits), or it exports no `wasi:cli/run` at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoEntryPoint {
    /// Every name the component exports.
    pub exports: Vec<String>,
    /// The wasi:http handler it exports (`incoming-handler` 0.2 or
    /// `handler` 0.3), if any.
    pub http_handler: Option<String>,
}

impl fmt::Display for NoEntryPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(handler) = &self.http_handler {
            return write!(
                f,
                "it is an HTTP handler (it exports {handler}), which `moat run` does not \
                 call: serve it with `moat serve`"
            );
        }
        f.write_str("it exports no wasi:cli/run (0.2 or 0.3.0), the entry point `moat run` calls")?;
        match &self.exports[..] {
            [] => f.write_str(
                "; it exports nothing (a library component runs only composed into a command)",
            ),
            exports => write!(f, "; it exports {}", exports.join(", ")),
        }
    }
}

/// Whether an export named `name` is a `wasi:cli/run` moat calls.
pub(crate) fn is_run(name: &str) -> bool {
    let Some(version) = name.strip_prefix("wasi:cli/run@") else {
        return false;
    };
    semver::Version::parse(version)
        .is_ok_and(|v| v.major == 0 && (v.minor == 2 || v.minor == 3) && v.pre.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_packages_at_served_versions_pass() {
        for name in [
            "wasi:cli/stdout@0.2.0",
            "wasi:io/streams@0.2.6",
            "wasi:http/outgoing-handler@0.2.3",
            "wasi:sockets/types@0.3.0",
            "wasi:cli/run@0.3.0",
            "moat:net/tcp@0.2.0",
            "moat:net/tcp@0.3.0",
        ] {
            assert_eq!(unserved(name), None, "{name}");
        }
    }

    #[test]
    fn each_unserved_import_says_what_is_served_instead() {
        let rc = unserved("wasi:cli/stdout@0.3.0-rc-2025-09-16").unwrap();
        assert!(rc.contains("release candidate"), "{rc}");
        assert!(unserved("wasi:io/streams@0.3.0").unwrap().contains("0.2"));
        assert!(unserved("wasi:cli/stdout@0.1.0").is_some());
        let kv = unserved("wasi:keyvalue/store@0.2.0-draft").unwrap();
        assert!(kv.starts_with("moat does not serve wasi:keyvalue;"), "{kv}");
        let spin = unserved("fermyon:spin/key-value@2.0.0").unwrap();
        assert!(spin.contains("another host"), "{spin}");
        assert!(unserved("moat:net/tcp@0.1.0").unwrap().contains("moat-sdk"));
        assert!(unserved("wasi:cli/stdout").is_some(), "no version");
    }

    use proptest::prelude::*;

    /// A name's parts, from packages moat serves and others, at versions
    /// that are 0.2, 0.3, a release candidate or neither.
    fn parts() -> impl Strategy<Value = (&'static str, &'static str, &'static str, &'static str)> {
        (
            prop::sample::select(vec!["wasi", "moat", "example", "fermyon"]),
            prop::sample::select(vec![
                "cli",
                "clocks",
                "filesystem",
                "io",
                "random",
                "sockets",
                "http",
                "net",
                "keyvalue",
            ]),
            prop::sample::select(vec!["run", "stdout", "tcp", "types", "store"]),
            prop::sample::select(vec![
                "0.2.0",
                "0.2.12",
                "0.3.0",
                "0.3.0-rc-2025-09-16",
                "0.20.0",
                "1.0.0",
                "two",
            ]),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Whether an import is served, against a model written from the
        /// list in this module's documentation; what is not served names
        /// its package.
        #[test]
        fn an_import_is_served_exactly_when_the_model_says_so(
            (namespace, package, interface, version) in parts(),
        ) {
            let name = format!("{namespace}:{package}/{interface}@{version}");
            let (p2, p3) = match version {
                "0.2.0" | "0.2.12" => (true, false),
                "0.3.0" => (false, true),
                _ => (false, false),
            };
            let served = match namespace {
                "wasi" => (p2 && package != "net" && package != "keyvalue")
                    || (p3 && !["io", "net", "keyvalue"].contains(&package)),
                "moat" => package == "net" && (p2 || p3),
                _ => false,
            };
            let said = unserved(&name);
            prop_assert_eq!(said.is_none(), served, "{}: {:?}", name, said);
            if let Some(said) = said {
                prop_assert!(!said.is_empty());
            }
            prop_assert_eq!(
                split(&name),
                (format!("{namespace}:{package}@{version}"), interface.to_owned())
            );
            prop_assert_eq!(
                is_run(&name),
                namespace == "wasi" && package == "cli" && interface == "run" && (p2 || p3)
            );
        }

        /// Any name a component can carry, read without a panic.
        #[test]
        fn any_name_is_read_without_a_panic(name in ".{0,64}") {
            let _ = unserved(&name);
            let _ = split(&name);
            let _ = is_run(&name);
        }
    }

    #[test]
    fn names_split_into_package_and_interface() {
        assert_eq!(
            split("wasi:cli/stdout@0.3.0-rc-2025-09-16"),
            ("wasi:cli@0.3.0-rc-2025-09-16".into(), "stdout".into())
        );
        assert_eq!(split("env"), ("env".into(), "env".into()));
    }

    #[test]
    fn the_entry_points_are_the_released_runs() {
        assert!(is_run("wasi:cli/run@0.2.0"));
        assert!(is_run("wasi:cli/run@0.2.12"));
        assert!(is_run("wasi:cli/run@0.3.0"));
        assert!(!is_run("wasi:cli/run@0.3.0-rc-2025-09-16"));
        assert!(!is_run("wasi:http/incoming-handler@0.2.0"));
    }

    #[test]
    fn no_entry_point_names_what_to_do() {
        let handler = NoEntryPoint {
            exports: vec!["wasi:http/incoming-handler@0.2.0".into()],
            http_handler: Some("wasi:http/incoming-handler@0.2.0".into()),
        };
        assert!(handler.to_string().ends_with("serve it with `moat serve`"));
        let library = NoEntryPoint {
            exports: vec!["example:lib/math@1.0.0".into()],
            http_handler: None,
        };
        assert!(
            library
                .to_string()
                .ends_with("; it exports example:lib/math@1.0.0")
        );
    }
}
