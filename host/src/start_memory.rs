//! The linear memory a component's instance has at its start, read from
//! its bytes before compiling: a server whose `--max-memory` is below it
//! could never run one instance, and compiling first (tens of seconds for
//! a large component) only to have the instance pool refuse it, in words
//! that blame the component, helps nobody.

use wasmtime::wasmparser::{Parser, Payload};

/// The largest memory any core module of `bytes` defines at its start, in
/// bytes (its initial pages times its page size); 0 for one that defines
/// none. `None` for bytes that do not parse this far (the compile then
/// says why).
pub(crate) fn largest_initial_memory(bytes: &[u8]) -> Option<u64> {
    let mut largest = 0u64;
    // Nested modules and components are walked too: each module's
    // memories come as its own memory section.
    for payload in Parser::new(0).parse_all(bytes) {
        if let Payload::MemorySection(memories) = payload.ok()? {
            for memory in memories {
                let memory = memory.ok()?;
                let page = 1u64 << memory.page_size_log2.unwrap_or(16).min(16);
                largest = largest.max(memory.initial.saturating_mul(page));
            }
        }
    }
    Some(largest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_memory_of_every_nested_module_is_found() {
        let component = wat::parse_str(
            r#"(component
                (core module (memory 2))
                (component (core module (memory 40) (memory 3)))
            )"#,
        )
        .unwrap();
        assert_eq!(largest_initial_memory(&component), Some(40 << 16));
        let none = wat::parse_str("(component (core module))").unwrap();
        assert_eq!(largest_initial_memory(&none), Some(0));
        assert_eq!(largest_initial_memory(b"\0asm garbage"), None);
    }
}
