//! What a file that is not WebAssembly at all starts with, said in a line:
//! a script, an archive, an HTML error page a download saved, an
//! executable. wasmtime's own message for it dumps the expected and the
//! actual magic bytes as two byte arrays over a dozen lines.

use std::fmt::Write as _;

/// The first bytes of every WebAssembly binary, module or component.
const MAGIC: &[u8; 4] = b"\0asm";

/// How many characters of text a description quotes.
const QUOTED: usize = 24;

/// `None` when `bytes` start as WebAssembly does; otherwise what they
/// start with, for "it starts with ...".
pub(crate) fn describe(bytes: &[u8]) -> Option<String> {
    if bytes.starts_with(MAGIC) {
        return None;
    }
    if bytes.is_empty() {
        return Some("nothing: the file is empty".to_owned());
    }
    let known: [(&[u8], &str); 7] = [
        (b"\x7fELF", "an ELF executable's header"),
        (b"PK\x03\x04", "a zip archive's header"),
        (b"\x1f\x8b", "a gzip header (a compressed file or a tar.gz)"),
        (b"#!", "#! (a script)"),
        (
            b"(component",
            "(component: the text format; compile it with wasm-tools parse",
        ),
        (
            b"(module",
            "(module: the text format; compile it with wasm-tools parse",
        ),
        (b"\xef\xbb\xbf", "a UTF-8 byte-order mark (a text file)"),
    ];
    if let Some((_, what)) = known.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Some((*what).to_owned());
    }
    let head = &bytes[..bytes.len().min(64)];
    let text = std::str::from_utf8(head)
        .ok()
        .filter(|t| t.chars().all(|c| !c.is_control() || c.is_whitespace()));
    Some(match text {
        Some(text) => quoted(text),
        None => {
            let mut hex = String::from("the bytes");
            for byte in &bytes[..bytes.len().min(8)] {
                let _ = write!(hex, " {byte:02x}");
            }
            hex.push_str(" (WebAssembly starts with 00 61 73 6d)");
            hex
        }
    })
}

/// A text's first characters, quoted, and what it looks like.
fn quoted(text: &str) -> String {
    let lower = text.trim_start().to_ascii_lowercase();
    let kind = if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
        " (an HTML page: a download that saved an error page?)"
    } else if lower.starts_with('{') || lower.starts_with('[') {
        " (JSON?)"
    } else {
        " (text)"
    };
    let quoted: String = text
        .chars()
        .take(QUOTED)
        .flat_map(char::escape_default)
        .collect();
    format!("\"{quoted}\"{kind}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_file_starts_with_is_said_in_a_line() {
        assert_eq!(describe(b"\0asm\x0d\0\x01\0"), None);
        for (bytes, said) in [
            (&b""[..], "nothing: the file is empty"),
            (
                b"hello world, not wasm\n",
                r#""hello world, not wasm\n" (text)"#,
            ),
            (
                b"<!DOCTYPE html><html><body>404</body></html>",
                r#""<!DOCTYPE html><html><bo" (an HTML page: a download that saved an error page?)"#,
            ),
            (b"\x7fELF\x02\x01", "an ELF executable's header"),
            (
                b"\xb7\xf1\x42\xb1\x00",
                "the bytes b7 f1 42 b1 00 (WebAssembly starts with 00 61 73 6d)",
            ),
        ] {
            assert_eq!(describe(bytes).as_deref(), Some(said));
        }
    }
}
