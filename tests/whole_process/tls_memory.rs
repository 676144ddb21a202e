//! What TLS inputs from a guest cost the host: a certificate chain given
//! to many listeners is held once, and a TLS connect the policy denies
//! builds nothing from its roots.
//!
//! Two measures of the host: the heap bytes it holds (counted by this
//! binary's allocator, [`held`]), which is exact, and its resident memory
//! ([`rss`]), which is what a machine runs out of but which hides growth
//! wherever the allocator reuses memory an earlier run freed. A guest's
//! own memory is mapped by wasmtime, not allocated from the heap: the heap
//! count is the host's alone.
//!
//! One test at a time, alone in the process ([`crate::in_turn`]): the memory measured is the
//! whole process's, so nothing else may run beside a measurement. Each
//! measurement is taken while the guest is alive and holds what it made
//! (it waits for the test at both ends), so the guest's instance and its
//! first configuration are in the baseline and only what the calls in
//! between kept is in the growth.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::certs::{Ca, padding_certificate};
use crate::support::{Running, connections, guests, rss, start_with, watched_port, within};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The system allocator, counting the bytes allocated and not yet freed.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is the system allocator's, with the caller's
// arguments; the count is only arithmetic beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract with GlobalAlloc::alloc.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            HELD.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract with GlobalAlloc::alloc_zeroed.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            HELD.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: `p` was allocated by this allocator with `layout`.
        unsafe { System.dealloc(p, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `p` was allocated by this allocator with `layout`.
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            HELD.fetch_sub(layout.size(), Ordering::Relaxed);
            HELD.fetch_add(new_size, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The heap bytes this process holds now.
fn held() -> u64 {
    HELD.load(Ordering::Relaxed) as u64
}

/// What a run made the host keep: heap bytes and resident bytes.
#[derive(Clone, Copy, Debug)]
struct Growth {
    held: u64,
    rss: u64,
}

/// A point to measure growth from.
struct Mark {
    held: u64,
    rss: u64,
}

impl Mark {
    fn now() -> Mark {
        Mark {
            held: held(),
            rss: rss(),
        }
    }

    fn growth(&self) -> Growth {
        Growth {
            held: held().saturating_sub(self.held),
            rss: rss().saturating_sub(self.rss),
        }
    }
}

const MIB: u64 = 1 << 20;

/// A directory of PEM files for one test, given to the guest as /certs.
fn certs_dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-memory-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_with_certs(policy: Policy, dir: &PathBuf, args: &[&str]) -> Running {
    start_with(
        guests::PROBE,
        RunOptions::new(policy)
            .arg("probe")
            .args(args.iter().copied())
            .dir(dir, "/certs")
            .stdin(Input::Empty),
    )
}

/// The address after `prefix` on a line of `out`.
fn address_after(out: &str, prefix: &str) -> std::net::SocketAddr {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} address in {out}"))
}

/// Lets a guest waiting on its signal listener go on.
async fn go_on(out: &str) {
    let signal = address_after(out, "signal on ");
    drop(TcpStream::connect(signal).await.unwrap());
}

/// Nine padding certificates of `PADDING_DER` bytes each after the leaf:
/// a chain of ten (the most a guest may give), 50 KiB of DER, under the
/// 64 KiB a rustls client takes in one handshake message.
const PADDING_CERTIFICATES: usize = 9;
const PADDING_DER: usize = 5_500;
const LISTENERS: usize = 60;

/// Runs `tls-listen-many` over `cert` (a file, or a pattern with `{i}`)
/// and returns the growth between the first listener and the last, with
/// the guest still holding them all, and its stdout.
async fn listeners_growth(dir: &PathBuf, cert: &str) -> (Growth, String, Running) {
    let policy = Policy::new().allow_listen("127.0.0.1").unwrap();
    let n = LISTENERS.to_string();
    let guest = run_with_certs(
        policy,
        dir,
        &["tls-listen-many", &n, cert, "/certs/key.pem", "0", "hold"],
    );
    let out = guest.wait_for("first on ").await;
    let mark = Mark::now();
    go_on(&out).await;
    let out = guest
        .wait_for(&format!("opened {LISTENERS}; last on "))
        .await;
    (mark.growth(), out, guest)
}

#[test]
fn sixty_listeners_given_one_chain_hold_it_once_and_serve_with_it() {
    crate::in_turn(async {
        let ca = Ca::new("moat test CA");
        let leaf = ca.leaf(&["localhost"]);
        let dir = certs_dir("listeners");
        std::fs::write(dir.join("key.pem"), &leaf.key_pem).unwrap();
        let padding: Vec<String> = (0..PADDING_CERTIFICATES)
            .map(|_| padding_certificate(PADDING_DER))
            .collect();
        let chain = format!("{}{}", leaf.cert_pem, padding.concat());
        std::fs::write(dir.join("chain.pem"), &chain).unwrap();
        // The control: the same chain but for its last certificate, another
        // for each listener. Each is a configuration of its own, which the
        // host must keep, so the growth it shows is what the shared chain
        // would cost if each listener held its own.
        let first_padding = padding[..PADDING_CERTIFICATES - 1].concat();
        for i in 0..LISTENERS {
            let own = padding_certificate(PADDING_DER);
            std::fs::write(
                dir.join(format!("chain-{i}.pem")),
                format!("{}{first_padding}{own}", leaf.cert_pem),
            )
            .unwrap();
        }
        let der = (PADDING_CERTIFICATES * PADDING_DER) as u64;
        let chains = (LISTENERS as u64 - 1) * der;

        // The shared chain first: nothing an earlier run freed is there for
        // the allocator to reuse, so its resident growth is not hidden.
        let (shared, out, guest) = listeners_growth(&dir, "/certs/chain.pem").await;
        // A listener serves with the configuration it shares.
        let last = address_after(&out, &format!("opened {LISTENERS}; last on "));
        let tcp = TcpStream::connect(last).await.unwrap();
        let mut tls = within(
            "the handshake",
            ca.connector(&[])
                .connect(ServerName::try_from("localhost").unwrap(), tcp),
        )
        .await
        .unwrap();
        assert_eq!(
            tls.get_ref().1.peer_certificates().map(<[_]>::len),
            Some(PADDING_CERTIFICATES + 1),
            "the whole chain was sent"
        );
        tls.write_all(b"through a shared configuration\n")
            .await
            .unwrap();
        let mut back = Vec::new();
        within("the echo", tls.read_to_end(&mut back))
            .await
            .unwrap();
        assert_eq!(back, b"through a shared configuration\n");
        let out = guest.wait_for("served").await;
        go_on(&out).await;
        let done = guest.finish().await;
        assert_eq!(done.code(), 0, "{}", done.stderr);

        let (distinct, out, control) = listeners_growth(&dir, "/certs/chain-{i}.pem").await;
        go_on(&out).await;
        assert_eq!(control.finish().await.code(), 0);
        eprintln!(
            "{LISTENERS} listeners, {der} bytes of DER each, grown after the first: \
             {shared:?} with one chain, {distinct:?} with distinct chains"
        );
        // The control shows the count sees a configuration per listener.
        assert!(
            distinct.held >= chains,
            "the control held {} bytes more for {} distinct chains of {der} bytes of DER: \
             the count cannot see what this test looks for",
            distinct.held,
            LISTENERS - 1
        );
        // The same chain (its PEM text different for each: a comment naming
        // the listener) is one configuration: what the other listeners add is
        // their sockets (about 10 KiB each), far less than a chain each.
        assert!(
            shared.held < chains / 2,
            "{LISTENERS} listeners with one chain held {} bytes more after the first; \
             {} with a chain each",
            shared.held,
            distinct.held
        );
        assert!(
            shared.rss < chains,
            "{LISTENERS} listeners with one chain grew the host by {} resident bytes",
            shared.rss
        );
    });
}

/// Connects the policy denies, and how many.
const DENIED_CONNECTS: u64 = 32;

#[test]
fn denied_tls_connects_with_roots_near_the_cap_build_nothing() {
    crate::in_turn(async {
        let ca = Ca::new("moat test CA");
        let dir = certs_dir("denied");
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        let (listener, port) = watched_port();
        // Listening is granted (the guest's signal listener), connecting to
        // the watched port is not.
        let policy = Policy::new()
            .allow_listen("127.0.0.1")
            .unwrap()
            .allow_connect("127.0.0.1:1")
            .unwrap();
        // Just under the cap: one valid root, then comment lines; each
        // connect's PEM text is its own (its first line names it).
        let pad = (crate::support::caps::MAX_PEM_BYTES - 1024).to_string();
        let (p, n) = (port.to_string(), DENIED_CONNECTS.to_string());
        let guest = run_with_certs(
            policy,
            &dir,
            &[
                "tls-connect-many",
                "127.0.0.1",
                &p,
                &n,
                "/certs/ca.pem",
                &pad,
                "hold",
            ],
        );
        let out = guest.wait_for("ready: ").await;
        assert!(
            out.contains(&format!("ready: {pad} bytes of roots")),
            "{out}"
        );
        let mark = Mark::now();
        go_on(&out).await;
        let out = guest.wait_for("done").await;
        let grown = mark.growth();
        go_on(&out).await;
        let done = guest.finish().await;
        assert_eq!(done.code(), 0, "{}", done.stderr);
        for i in 0..DENIED_CONNECTS {
            let line = format!("connect {i}: Denied(");
            assert!(
                done.stdout.contains(&line),
                "no {line:?} in {}",
                done.stdout
            );
        }
        assert!(
            done.stdout
                .contains(&format!("needs --allow-net=127.0.0.1:{port}")),
            "{}",
            done.stdout
        );
        assert_eq!(connections(&listener), 0, "a denied connect got out");
        // Each connect's roots were about 512 KiB of PEM; had the host kept
        // them or what it built from them, the 32 would hold 16 MiB or more.
        eprintln!("{DENIED_CONNECTS} denied connects grew the host by {grown:?}");
        assert!(
            grown.held < MIB,
            "{DENIED_CONNECTS} denied connects with {pad} bytes of roots each left the host \
             holding {} bytes more",
            grown.held
        );
        assert!(
            grown.rss < 8 * MIB,
            "{DENIED_CONNECTS} denied connects with {pad} bytes of roots each grew the host by \
             {} resident bytes",
            grown.rss
        );
    });
}
