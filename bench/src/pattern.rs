//! The bytes the servers write: byte `i` is `i % 251` (a period prime to
//! every power of two, so a misplaced chunk shows).
//!
//! One definition for the native server and both guests (they include this
//! file by path). It is built by copying a 251-byte period rather than by
//! computing each byte: computing costs about 15 instructions per byte in
//! a guest (500 million for 32 MiB), which `large_write` would count as the
//! server's cost of writing; copying costs a memcpy.

/// `bytes` bytes of the pattern.
pub fn pattern(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    out.extend((0..bytes.min(251)).map(|i| i as u8));
    // The length is a multiple of 251 before every copy but the last, so
    // each copy continues the pattern where it stands.
    while out.len() < bytes {
        let n = out.len().min(bytes - out.len());
        out.extend_from_within(..n);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn byte_i_is_i_mod_251() {
        for bytes in [0, 1, 250, 251, 252, 502, 503, 64 * 1024, 1_000_003] {
            let p = super::pattern(bytes);
            assert_eq!(p.len(), bytes);
            assert!(p.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        }
    }
}
