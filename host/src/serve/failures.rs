//! What the operator of `moat serve` sees of a request: its id, and one
//! line on stderr when its handler fails.
//!
//! Each request gets an id ([`RequestIds`]): the server's random prefix
//! and the request's number. The id ties together what the request
//! caused: the records its handler made on the trail (their `incoming`
//! field), the line below, and the 500 its client got (which names the id
//! and nothing else of the failure: the details are the operator's).
//!
//! A handler that traps, runs past its time or memory, or ends without an
//! answer gets one line at the default level ([`FailureLines`]): the id,
//! the method, the path (without its query), the client's address and
//! what happened. A client can make a handler fail at will, so the lines
//! are bounded: [`FAILURE_LINES_PER_SECOND`], then a count of the rest.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::audit::IncomingRequest;

/// Failure lines written in a second at most; past them the failures are
/// counted and the count said with the next line written. Ten a second
/// keep a burst of failures readable on a terminal and in a journal (a
/// loop of a failing client writes 600 lines a minute, not its request
/// rate) while a single failure is always shown.
pub(crate) const FAILURE_LINES_PER_SECOND: u32 = 10;

/// The longest part of a path a failure line shows; the rest is said to be
/// there. A path may be as long as a request's head (64 KiB by default).
const PATH_SHOWN: usize = 200;

/// The longest part of a method a failure line shows (a client may make
/// one up, as long as the head).
const METHOD_SHOWN: usize = 32;

/// The longest part of what happened a failure line shows: a handler's
/// own error code may carry a message of the guest's, of any length.
const WHY_SHOWN: usize = 300;

/// Gives each request of a server its id.
pub(crate) struct RequestIds {
    prefix: String,
    next: AtomicU64,
}

impl RequestIds {
    /// Ids with a random prefix (so that two runs' ids differ), numbered
    /// from 1.
    pub(crate) fn new() -> RequestIds {
        let mut random = [0u8; 4];
        // Without randomness the ids are still unique within the run.
        let _ = getrandom::fill(&mut random);
        RequestIds {
            prefix: random.iter().fold(String::new(), |mut hex, byte| {
                let _ = write!(hex, "{byte:02x}");
                hex
            }),
            next: AtomicU64::new(1),
        }
    }

    /// The next request's identity: with the id `given` (one its headers
    /// carried, trusted), or one of the server's.
    pub(crate) fn next(
        &self,
        peer: std::net::IpAddr,
        method: &hyper::Method,
        path: &str,
        given: Option<String>,
    ) -> Arc<IncomingRequest> {
        let id = given.unwrap_or_else(|| {
            let number = self.next.fetch_add(1, Ordering::Relaxed);
            format!("{}-{number}", self.prefix)
        });
        Arc::new(IncomingRequest {
            id,
            peer,
            method: method.as_str().to_owned(),
            path: path.to_owned(),
        })
    }
}

/// The longest `x-request-id` taken: 128 characters (a UUID is 36, a
/// trace id 32; what proxies make fits well within).
const GIVEN_ID_LEN: usize = 128;

/// The id a request's headers carry, if well formed: its `x-request-id`
/// (1 to [`GIVEN_ID_LEN`] of `A-Z a-z 0-9 . _ : -`, so that it is the same
/// in a line, a record and a shell), or else its `traceparent`'s trace id
/// (W3C Trace Context: 32 lower-case hex digits, not all zero).
pub(crate) fn given_id(headers: &hyper::HeaderMap) -> Option<String> {
    let plain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-');
    if let Some(id) = headers.get("x-request-id")
        && (1..=GIVEN_ID_LEN).contains(&id.len())
        && id.as_bytes().iter().all(|c| plain(*c))
    {
        return id.to_str().ok().map(str::to_owned);
    }
    let parent = headers.get("traceparent")?.to_str().ok()?;
    let mut parts = parent.split('-');
    let (version, trace) = (parts.next()?, parts.next()?);
    let hex = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    };
    (version.len() == 2
        && hex(version)
        && version != "ff"
        && trace.len() == 32
        && hex(trace)
        && trace.bytes().any(|c| c != b'0'))
    .then(|| trace.to_owned())
}

/// The failure lines of the current second.
pub(crate) struct FailureLines {
    window: Mutex<Window>,
}

struct Window {
    began: Instant,
    shown: u32,
    /// Failures not shown since the last line written.
    unshown: u64,
}

impl FailureLines {
    pub(crate) fn new() -> FailureLines {
        FailureLines {
            window: Mutex::new(Window {
                began: Instant::now(),
                shown: 0,
                unshown: 0,
            }),
        }
    }

    /// Writes the line for `request`'s failure (`why`) on stderr, unless
    /// this second's lines are written; then counts it.
    pub(crate) fn failed(&self, request: &IncomingRequest, why: &str) {
        if let Some(line) = self.line(request, why, Instant::now()) {
            eprintln!("{line}");
        }
    }

    /// The lines to write for a failure at `now`, if any (the count of
    /// those not shown first).
    fn line(&self, request: &IncomingRequest, why: &str, now: Instant) -> Option<String> {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if now.duration_since(window.began) >= Duration::from_secs(1) {
            window.began = now;
            window.shown = 0;
        }
        if window.shown >= FAILURE_LINES_PER_SECOND {
            window.unshown += 1;
            return None;
        }
        window.shown += 1;
        let mut text = String::new();
        if window.unshown > 0 {
            let _ = writeln!(
                text,
                "moat: {} more failed request{} not shown (at most {FAILURE_LINES_PER_SECOND} lines a second)",
                window.unshown,
                if window.unshown == 1 { "" } else { "s" }
            );
            window.unshown = 0;
        }
        drop(window);
        let _ = write!(
            text,
            "moat: request {} ({} {} from {}) failed: {}",
            request.id,
            shown(&request.method, METHOD_SHOWN),
            shown(&request.path, PATH_SHOWN),
            request.peer.to_canonical(),
            shown(why, WHY_SHOWN),
        );
        Some(text)
    }
}

/// `text` (a client's or a guest's) as a line shows it: control
/// characters escaped (their bytes never move a terminal's cursor or start
/// a line of their own), at most `max` characters and a note of how many
/// more.
fn shown(text: &str, max: usize) -> String {
    let mut shown = String::new();
    let mut chars = text.chars();
    for c in chars.by_ref().take(max) {
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    let rest = chars.count();
    if rest > 0 {
        let _ = write!(shown, "... ({rest} more characters)");
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> IncomingRequest {
        IncomingRequest {
            id: "0a0b0c0d-7".into(),
            peer: "::ffff:192.0.2.1".parse().unwrap(),
            method: "GET".into(),
            path: "/x\u{1b}[2J".into(),
        }
    }

    #[test]
    fn a_line_names_the_request_and_escapes_the_path() {
        let lines = FailureLines::new();
        let line = lines.line(&request(), "the handler trapped", Instant::now());
        assert_eq!(
            line.as_deref(),
            Some(
                r"moat: request 0a0b0c0d-7 (GET /x\u{1b}[2J from 192.0.2.1) failed: the handler trapped"
            )
        );
        assert_eq!(
            shown(&"a".repeat(PATH_SHOWN + 5), PATH_SHOWN),
            format!("{}... (5 more characters)", "a".repeat(PATH_SHOWN))
        );
        // What happened may be a guest's own text: escaped and cut too.
        let why = format!(
            "the handler failed:\nmoat: forged {}",
            "x".repeat(WHY_SHOWN)
        );
        let line = lines.line(&request(), &why, Instant::now()).unwrap();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.contains(r"failed:\nmoat: forged xx"), "{line}");
        assert!(line.ends_with("... (33 more characters)"), "{line}");
    }

    #[test]
    fn a_given_id_is_taken_only_when_well_formed() {
        let with = |pairs: &[(&'static str, &str)]| {
            let mut headers = hyper::HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, value.parse().unwrap());
            }
            given_id(&headers)
        };
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let parent = format!("00-{trace}-00f067aa0ba902b7-01");
        assert_eq!(
            with(&[("x-request-id", "req-42:a.b_c")]).as_deref(),
            Some("req-42:a.b_c")
        );
        assert_eq!(with(&[("traceparent", &parent)]).as_deref(), Some(trace));
        assert_eq!(
            with(&[("x-request-id", "two words"), ("traceparent", &parent)]).as_deref(),
            Some(trace),
            "a malformed x-request-id falls back to the trace id"
        );
        for bad in [
            &[("x-request-id", "a/b;c")][..],
            &[("x-request-id", &"a".repeat(129))],
            &[(
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            )],
            &[(
                "traceparent",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )],
            &[(
                "traceparent",
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            )],
            &[],
        ] {
            assert_eq!(with(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn past_the_seconds_lines_failures_are_counted_and_the_count_said_next() {
        let lines = FailureLines::new();
        let start = Instant::now();
        for _ in 0..FAILURE_LINES_PER_SECOND {
            assert!(lines.line(&request(), "why", start).is_some());
        }
        for _ in 0..25 {
            assert!(lines.line(&request(), "why", start).is_none());
        }
        let next = lines
            .line(&request(), "why", start + Duration::from_secs(1))
            .unwrap();
        assert!(
            next.starts_with(
                "moat: 25 more failed requests not shown (at most 10 lines a second)\nmoat: request "
            ),
            "{next}"
        );
        let after = lines
            .line(&request(), "why", start + Duration::from_secs(1))
            .unwrap();
        assert!(after.starts_with("moat: request "), "said once: {after}");
    }
}
