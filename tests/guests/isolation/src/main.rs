//! A wasi:http 0.2 proxy for the isolation tests: one request plants a
//! secret in every part of linear memory a Rust guest writes (a static, the
//! heap, the shadow stack), and a later request looks for it in all of
//! linear memory.
//!
//! - `GET /plant/SEED[/PORT]`: writes the 64-byte secret of SEED (a
//!   decimal u64) into a static, 512 KiB of heap (the secret repeated,
//!   over many pages) and 32 KiB of stack; with PORT, then GETs
//!   `http://127.0.0.1:PORT/` and waits for its answer (so that a test can
//!   act on the host while this instance holds the secret); answers
//!   `planted`.
//! - `GET /probe/SEED`: grows linear memory to at least 16 MiB (so that
//!   memory an earlier instance grew into is looked at too), then scans it,
//!   8 bytes at a time, for the secret of SEED and for a 4 KiB page filled
//!   with its fill byte; answers `clean`, or `found N` with how many.
//!
//! Each way a page can come to hold the secret has a planting of its own:
//!
//! - `POST /plant-body/SEED`: reads the request body (which the test fills
//!   with the secret) into memory: pages written by the host.
//! - `GET /fetch/SEED/PORT`: GETs `http://127.0.0.1:PORT/SEED` and reads
//!   its body (which the test's upstream fills with the secret of SEED)
//!   into memory: a response body the host writes.
//! - `GET /plant-grow/SEED`: 4 MiB of the secret in memory grown past the
//!   initial size.
//! - `GET /plant-bulk/SEED`: the secret copied with `memory.copy` and the
//!   fill byte written with `memory.fill`, 256 KiB each.
//! - `GET /plant-sparse/SEED`: grows linear memory by 32 MiB it never
//!   touches, then plants as `/plant`: a memory most of which no page table
//!   covers, which the host's reset scans differently.
//! - `GET /plant-trap/SEED`: plants as `/plant`, then traps, deep in a
//!   stack frame: the page is written only by a request that failed, and
//!   the stack pointer (a wasm global) is left moved.
//! - `GET /stack`: the address of a local on the shadow stack, which a
//!   fresh instance always has at the same place: after a trap it shows
//!   that the global was put back.
//!
//! The secret is never in a request: both sides derive it from the seed
//! (splitmix64), and the probe derives each word as it compares, in wasm
//! locals, which are not linear memory, so that the scan cannot find a
//! copy of its own making.

use wstd::http::{Body, Client, Error, Request, Response, StatusCode};

/// Words of the secret.
const WORDS: usize = 8;

/// Word `i` of the secret of `seed`.
fn word(seed: u64, i: usize) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where the static copy goes.
static mut PLANTED: [u64; WORDS] = [0; WORDS];

#[wstd::http_server]
async fn main(request: Request<Body>) -> Result<Response<Body>, Error> {
    let path = request.uri().path().to_owned();
    let mut parts = path.trim_start_matches('/').split('/');
    let action = parts.next().unwrap_or_default();
    let seed = parts.next().and_then(|seed| seed.parse::<u64>().ok());
    let port = parts.next().and_then(|port| port.parse::<u16>().ok());
    let answer = match (action, seed) {
        ("plant-body", Some(_)) => {
            let mut request = request;
            let body = request.body_mut().contents().await?;
            std::mem::forget(body.to_vec());
            "planted\n".to_owned()
        }
        ("fetch", Some(seed)) => {
            let port = port.unwrap_or_default();
            let call =
                Request::get(format!("http://127.0.0.1:{port}/{seed}")).body(Body::empty())?;
            let mut answer = Client::new().send(call).await?;
            let body = answer.body_mut().contents().await?;
            std::mem::forget(body.to_vec());
            "fetched\n".to_owned()
        }
        ("plant-grow", Some(seed)) => {
            let before = std::arch::wasm32::memory_size(0);
            let secret: [u64; WORDS] = std::array::from_fn(|i| word(seed, i));
            let grown: Vec<u64> = secret.iter().copied().cycle().take(512 << 10).collect();
            std::mem::forget(std::hint::black_box(grown));
            format!(
                "planted, memory grew from {before} to {} pages\n",
                std::arch::wasm32::memory_size(0)
            )
        }
        ("plant-bulk", Some(seed)) => {
            plant_bulk(seed);
            "planted\n".to_owned()
        }
        ("plant-sparse", Some(seed)) => {
            // 512 wasm pages: 32 MiB.
            std::arch::wasm32::memory_grow(0, 512);
            plant(seed);
            "planted\n".to_owned()
        }
        ("plant-trap", Some(seed)) => {
            plant(seed);
            trap_deep(seed)
        }
        ("stack", _) => {
            let local = std::hint::black_box(0u64);
            format!("{:p}\n", &local)
        }
        ("plant", Some(seed)) => {
            plant(seed);
            if let Some(port) = port {
                let call = Request::get(format!("http://127.0.0.1:{port}/")).body(Body::empty())?;
                let mut answer = Client::new().send(call).await?;
                answer.body_mut().contents().await?;
            }
            "planted\n".to_owned()
        }
        ("probe", Some(seed)) => match probe(seed) {
            0 => "clean\n".to_owned(),
            n => format!("found {n}\n"),
        },
        _ => {
            let mut response = Response::new(Body::from("not found\n"));
            *response.status_mut() = StatusCode::NOT_FOUND;
            return Ok(response);
        }
    };
    Ok(Response::new(Body::from(answer)))
}

fn plant(seed: u64) {
    let secret: [u64; WORDS] = std::array::from_fn(|i| word(seed, i));
    // SAFETY: the guest is single-threaded and nothing else refers to
    // `PLANTED`; a volatile write keeps the store from being optimized away.
    unsafe { std::ptr::addr_of_mut!(PLANTED).write_volatile(secret) };
    let heap: Vec<u64> = secret.iter().copied().cycle().take(64 << 10).collect();
    std::mem::forget(std::hint::black_box(heap));
    on_stack(&secret);
}

/// 32 KiB of the secret on the shadow stack (black_box makes it live in
/// linear memory rather than in wasm locals).
#[inline(never)]
fn on_stack(secret: &[u64; WORDS]) {
    let mut frame = [0u64; 4096];
    for (slot, word) in frame.iter_mut().zip(secret.iter().cycle()) {
        *slot = *word;
    }
    std::hint::black_box(&frame);
}

/// Bytes of the bulk plantings.
const BULK: usize = 256 << 10;

/// The byte `/plant-bulk` fills pages with: never zero.
fn fill_byte(seed: u64) -> u8 {
    (word(seed, 0) as u8) | 0x80
}

/// The secret copied over `BULK` bytes with `memory.copy` (doubling the
/// copied part each time, so that every copy is large), and `BULK` bytes
/// filled with `memory.fill`.
fn plant_bulk(seed: u64) {
    let secret: [u64; WORDS] = std::array::from_fn(|i| word(seed, i));
    let mut copied = vec![0u64; BULK / 8];
    copied[..WORDS].copy_from_slice(&secret);
    let mut done = WORDS;
    while done < copied.len() {
        let n = done.min(copied.len() - done);
        copied.copy_within(..n, done);
        done += n;
    }
    std::mem::forget(std::hint::black_box(copied));
    let mut filled = vec![0u8; BULK];
    // SAFETY: `filled` is `BULK` bytes long.
    unsafe { std::ptr::write_bytes(filled.as_mut_ptr(), fill_byte(seed), BULK) };
    std::mem::forget(std::hint::black_box(filled));
}

/// Writes the secret into a 32 KiB frame several calls deep, then traps.
#[inline(never)]
fn trap_deep(seed: u64) -> ! {
    let secret: [u64; WORDS] = std::array::from_fn(|i| word(seed, i));
    on_stack(&secret);
    let mut frame = [0u64; 4096];
    for (slot, word) in frame.iter_mut().zip(secret.iter().cycle()) {
        *slot = *word;
    }
    std::hint::black_box(&frame);
    std::arch::wasm32::unreachable()
}

/// Pages of memory (in 64 KiB wasm pages) the probe looks at, at least:
/// 16 MiB, past what any planting grows to.
const PROBED_PAGES: usize = 256;

/// Copies of the secret of `seed`, and 4 KiB pages filled with its fill
/// byte, in linear memory.
fn probe(seed: u64) -> usize {
    let pages = std::arch::wasm32::memory_size(0);
    if pages < PROBED_PAGES {
        std::arch::wasm32::memory_grow(0, PROBED_PAGES - pages);
    }
    let size = std::arch::wasm32::memory_size(0) * 65536;
    let fill = u64::from_ne_bytes([fill_byte(seed); 8]);
    let mut found = 0;
    let mut page = 0;
    while page + 4096 <= size {
        let mut at = page;
        // SAFETY: as below: 8-aligned addresses below memory.size.
        while at < page + 4096 && unsafe { (at.max(8) as *const u64).read_volatile() } == fill {
            at += 8;
        }
        if at == page + 4096 {
            found += 1;
        }
        page += 4096;
    }
    // Address 0 is skipped: Rust does not allow reading through a null
    // pointer, and the data a compiler puts at 0 is never ours.
    let mut at = 8;
    while at + WORDS * 8 <= size {
        let mut i = 0;
        // SAFETY: `at + 8 * i` is 8-aligned and below memory.size, so it
        // is a readable address of linear memory; reading bytes that some
        // other part of the program owns is what this probe is for, and
        // reading them volatile, as plain integers, makes no reference.
        while i < WORDS && unsafe { ((at + 8 * i) as *const u64).read_volatile() } == word(seed, i)
        {
            i += 1;
        }
        if i == WORDS {
            found += 1;
        }
        at += 8;
    }
    found
}
