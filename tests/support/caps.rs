//! The fixed caps the tests walk, as the table of `moat_host::limits`
//! states them (the crate keeps its constants to itself): a test that
//! reaches one asserts what a user sees at that number.

#![allow(dead_code)] // each test binary uses some

/// The largest PEM input a guest may pass.
pub const MAX_PEM_BYTES: usize = 512 << 10;
/// Most certificates in a guest's chain.
pub const MAX_CHAIN_CERTIFICATES: usize = 10;
/// Most roots a guest adds to one connection or listener.
pub const MAX_GUEST_ROOTS: usize = 512;
/// Addresses kept from one name's answer.
pub const MAX_ANSWER_ADDRESSES: usize = 256;
/// wasi:sockets 0.3 UDP receives waiting at once.
pub const MAX_WASI_UDP_RECEIVES: u32 = 256;
/// Bytes of trail records waiting for the sink.
pub const MAX_AUDIT_QUEUE_BYTES: u64 = 4 << 20;
