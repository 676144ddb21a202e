//! The large-memory row of bench/handlers.py: a handler whose memory is
//! large and whose requests write little of it, as a handler with a big
//! in-memory table or cache does.
//!
//! Its initial memory is over 256 MiB: a 1 MiB table initialized from the
//! component's data (in its memory image) and 256 MiB of zeroed space.
//! `GET /` reads 64 bytes of the table, writes 8 KiB at the top of the
//! zeroed space (above the 16 MiB a reset of the lowest bytes restores, so
//! that way also hands the page back and faults it in again), and answers
//! with a checksum of what it read and wrote.

use wstd::http::{Body, Error, Request, Response};

/// Bytes of the initialized table.
const TABLE: usize = 1 << 20;
/// Bytes of zeroed space.
const SPACE: usize = 256 << 20;
/// Bytes a request writes.
const WRITE: usize = 8 << 10;

/// 256 bytes of the table: each its index plus one, so that no page of the
/// table is zero.
const ROW: [u8; 256] = {
    let mut row = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        row[i] = (i as u8).wrapping_add(1);
        i += 1;
    }
    row
};

/// The table, in the component's data.
static TABLE_DATA: [[u8; 256]; TABLE / 256] = [ROW; TABLE / 256];

/// The zeroed space.
static mut SPACE_DATA: [u8; SPACE] = [0; SPACE];

#[wstd::http_server]
async fn main(_request: Request<Body>) -> Result<Response<Body>, Error> {
    let mut sum: u64 = 0;
    let table = std::hint::black_box(&TABLE_DATA).as_flattened();
    for byte in &table[TABLE / 2..TABLE / 2 + 64] {
        sum += u64::from(*byte);
    }
    // SAFETY: the guest is single-threaded and nothing else refers to
    // `SPACE_DATA`; the slice lives only inside this block.
    let written = unsafe {
        let space = &mut *std::ptr::addr_of_mut!(SPACE_DATA);
        let top = &mut space[SPACE - WRITE..];
        for (i, byte) in top.iter_mut().enumerate() {
            *byte = (i as u8) ^ 0x5a;
        }
        std::hint::black_box(top)
            .iter()
            .map(|b| u64::from(*b))
            .sum::<u64>()
    };
    Ok(Response::new(Body::from(format!("{sum} {written}\n"))))
}
