//! `moat serve`: Which engine a component is compiled for, and components whose exports lie about it.

use super::*;

/// A wasi:http 0.2 proxy that imports only WASI 0.2 is compiled for the
/// engine without the component model's concurrency support; every other
/// component for the engine with it, including one that looks like such
/// a proxy from its outermost imports and exports but uses the concurrency
/// features inside, or imports what the plain engine does not link. (The
/// serve tests above then serve wstd-serve and http-hostile, traps, spins,
/// memory growth and cut-off uploads included, on the plain engine.)
#[test]
fn wasi_0_2_proxies_of_wasi_0_2_imports_alone_get_the_engine_without_concurrency() {
    for (name, path, concurrent) in [
        ("wstd-serve", guests::WSTD_SERVE, false),
        ("http-hostile", guests::HTTP_HOSTILE, false),
        ("http-service-p3 (0.3)", guests::HTTP_SERVICE_P3, true),
        ("http-middleware-p3 (0.3)", guests::HTTP_MIDDLEWARE_P3, true),
        ("std-echo (a 0.2 command)", guests::STD_ECHO, true),
        ("echo-server (moat:net)", guests::ECHO_SERVER, true),
    ] {
        assert_eq!(
            support::guest(path).uses_concurrency(),
            concurrent,
            "{name}"
        );
    }

    const HANDLER: &str =
        r#"(instance $h) (export "wasi:http/incoming-handler@0.2.6" (instance $h))"#;
    let cases = [
        (
            "a proxy of WASI 0.2 imports",
            r#"(import "wasi:io/streams@0.2.6" (instance))"#,
            false,
        ),
        (
            "a proxy with a nested component of its own imports",
            r#"(import "wasi:io/streams@0.2.6" (instance))
               (component (import "moat:net/tcp@0.1.0" (instance)))"#,
            false,
        ),
        (
            "a proxy importing moat:net",
            r#"(import "moat:net/tcp@0.1.0" (instance))"#,
            true,
        ),
        (
            "a proxy importing a WASI 0.3 interface",
            r#"(import "wasi:clocks/monotonic-clock@0.3.0" (instance))"#,
            true,
        ),
        (
            "a proxy exporting a WASI 0.3 interface too",
            r#"(import "wasi:io/streams@0.2.6" (instance))
               (instance $s) (export "wasi:http/handler@0.3.0" (instance $s))"#,
            true,
        ),
        (
            "a proxy with an async function type inside",
            r#"(import "wasi:io/streams@0.2.6" (instance)) (type (func async))"#,
            true,
        ),
        (
            "a proxy importing a WASI 0.2 function that does not exist",
            r#"(import "wasi:io/streams@0.2.6" (instance (export "no-such-function" (func))))"#,
            true,
        ),
    ];
    for (what, imports, concurrent) in cases {
        let bytes = wat::parse_str(format!("(component {imports} {HANDLER})"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let guest = support::moat()
            .load_bytes(&bytes, what)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(guest.uses_concurrency(), concurrent, "{what}");
        assert!(guest.is_http_handler(), "{what}");
    }
}

/// A hostile proxy of WASI 0.2 imports that also exports, under the names
/// of WASI 0.3's asynchronous entry points, functions that are not
/// asynchronous (their types pass wasmtime's checks of those exports): it
/// gets the engine with concurrency support, since moat drives such an
/// export concurrently whatever its type says, and runs there. On the
/// other engine, `moat run` failed with wasmtime's own "cannot use
/// `run_concurrent`".
#[tokio::test]
async fn a_proxy_exporting_sync_0_3_entry_points_gets_the_engine_that_can_drive_them() {
    let wat = r#"(component
        (import "wasi:io/streams@0.2.6" (instance))
        (core module $m (func (export "run") (result i32) i32.const 0))
        (core instance $i (instantiate $m))
        (func $run (result (result)) (canon lift (core func $i "run")))
        (instance $cli (export "run" (func $run)))
        (export "wasi:cli/run@0.3.0" (instance $cli))
        (instance $h)
        (export "wasi:http/incoming-handler@0.2.6" (instance $h)))"#;
    let bytes = wat::parse_str(wat).expect("the component parses");
    let moat = support::moat();
    let guest = moat.load_bytes(&bytes, "sync-0.3").expect("it compiles");
    assert!(guest.uses_concurrency());
    assert!(guest.has_async_run());
    let options = moat_host::RunOptions::new(moat_host::policy::Policy::new());
    let exit = moat.run(&guest, options).await.expect("it runs");
    assert_eq!(exit.code(), 0);
}
