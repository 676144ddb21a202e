//! A command built for another host: it imports an interface of a package
//! moat does not know (`example:host`), one of a WASI package moat does not
//! serve (`wasi:keyvalue`) and one of a WASI 0.3 release candidate. moat
//! refuses to start it, naming each. With no arguments it would call them
//! all; it never gets that far under moat.

wit_bindgen::generate!({
    path: "wit",
    world: "moat:unserved/guest",
    generate_all,
});

fn main() {
    // Each import is called, so that the linker keeps it.
    example::host::log::write("hello");
    let _ = example::host::config::get("key");
    let _ = wasi::keyvalue::store::get("key");
    let _ = wasi::random::random::get_random_u64();
}
