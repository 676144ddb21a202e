//! What a wasi:http guest can make the host hold without sending anything
//! (bodies it fills and never sends, fields it fills and keeps) or by
//! leaving responses unread, under a small host-memory budget: each is
//! refused with the guest's own error once the budget is spent (never a
//! trap), and the host's resident memory grows by no more than the budget,
//! the guest's own memory and a fixed allowance.

use std::sync::Arc;

use crate::in_turn;
use crate::support::certs::Ca;
use crate::support::{Names, guests, peak_rss, reset_peak_rss, rss, start_with};
use moat_host::net::{Limits, Resolver, TlsTrust};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};

/// The run's host-memory budget in these tests.
const BUDGET: u64 = 16 << 20;

/// The guest's own linear memory in these tests (its handles and one 64
/// KiB buffer need far less).
const GUEST_MEMORY: u64 = 16 << 20;

/// What the host may hold beyond the budget and the guest's memory: the
/// instance's tables and stacks, the engine's first use of this guest,
/// the resource table's slots (a few hundred bytes a handle), the
/// allocator's slack. These runs peaked at 8.6 to 16.1 MiB in all, budget
/// and guest included; before the budget covered them, the same runs held
/// 0.5 to 4 GiB.
const ALLOWANCE: u64 = 16 << 20;

fn options(policy: Policy) -> RunOptions {
    RunOptions::new(policy)
        .limits(Limits {
            max_host_memory: Some(BUDGET as usize),
            ..Limits::default()
        })
        .max_memory(GUEST_MEMORY)
        .stdin(Input::Empty)
}

/// Runs http-probe with `args` under `options`; its stdout and stderr, and
/// how far the host's resident memory grew at its peak.
async fn held(options: RunOptions, args: &[&str]) -> (String, String, u64) {
    let before = rss();
    reset_peak_rss();
    let done = start_with(
        guests::HTTP_PROBE,
        options.arg(guests::HTTP_PROBE).args(args.iter().copied()),
    )
    .finish()
    .await;
    let grown = peak_rss().saturating_sub(before);
    assert_eq!(done.code(), 0, "{}{}", done.stdout, done.stderr);
    (done.stdout, done.stderr, grown)
}

fn within_budget(what: &str, grown: u64) {
    eprintln!("{what}: the host grew by {} KiB at its peak", grown >> 10);
    assert!(
        grown <= BUDGET + GUEST_MEMORY + ALLOWANCE,
        "{what} grew the host by {} MiB (budget {} MiB, guest {} MiB, allowance {} MiB)",
        grown >> 20,
        BUDGET >> 20,
        GUEST_MEMORY >> 20,
        ALLOWANCE >> 20
    );
}

/// The number after `prefix` on the first line that starts with it.
fn count_after(text: &str, prefix: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(prefix))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix:?} in {text}"))
}

/// 2,000 request bodies filled and never sent (nothing is judged: nothing
/// goes out, so no grant is needed): each holds its buffer, 128 KiB, paid
/// from the budget; past it `body` fails, and the host stays within it.
#[test]
fn unsent_request_bodies_are_paid_from_host_memory_and_refused_past_it() {
    in_turn(async {
        let (out, err, grown) = held(options(Policy::new()), &["hold-bodies", "2000"]).await;
        let bodies = count_after(&out, "held ");
        assert!(
            bodies > 0 && bodies * (128 << 10) <= BUDGET,
            "{bodies} bodies held:\n{out}"
        );
        assert!(out.contains(&format!("refused at {bodies}: body")), "{out}");
        assert!(
            err.contains("a wasi:http outgoing body needs 131072 bytes")
                && err.contains("--max-host-memory"),
            "{err}"
        );
        within_budget("2,000 unsent bodies", grown);
    });
}

/// One fields filled past its bound gets `forbidden` (0.2's nearest
/// error; wasmtime-wasi-http would trap the guest), and 20,000 fields of
/// 64 KiB are paid from the budget and refused past it.
#[test]
fn fields_past_their_bound_or_the_budget_are_refused_without_a_trap() {
    in_turn(async {
        let (out, _, _) = held(options(Policy::new()), &["hold-fields", "1", "262144"]).await;
        assert!(
            out.ends_with("refused at 0: HeaderError::Forbidden\n"),
            "{out}"
        );
        let (out, err, grown) =
            held(options(Policy::new()), &["hold-fields", "20000", "65536"]).await;
        let fields = count_after(&out, "held ");
        assert!(
            fields > 0 && fields * (64 << 10) <= BUDGET,
            "{fields} fields held:\n{out}"
        );
        assert!(
            out.contains(&format!("refused at {fields}: HeaderError::Forbidden")),
            "{out}"
        );
        assert!(err.contains("--max-host-memory"), "{err}");
        within_budget("20,000 filled fields", grown);
    });
}

/// 256 responses of 2 MiB from an HTTP/2 server, none read: each
/// connection's window is paid from the budget, so the connections past
/// it are refused, and what the server could send before the guest reads
/// stays within it.
#[test]
fn unread_http2_responses_hold_no_more_than_their_paid_windows() {
    in_turn(async {
        let ca = Ca::new("moat held h2 CA");
        let port = crate::support::h2_server(&ca, 2 << 20).await;
        let names = Names::new(&[("h2.test", "127.0.0.1")]);
        let trust = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
        let url = format!("https://h2.test:{port}/big");
        let options = options(Policy::new().allow_connect("h2.test").unwrap())
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
            .tls_trust(trust);
        let (out, _, grown) = held(options, &["hold-responses", "256", &url]).await;
        let responses = count_after(&out, "held ");
        assert!(responses > 0, "{out}");
        within_budget("256 unread HTTP/2 responses", grown);
    });
}
