//! The trail's writer: a bounded queue of records, drained in order by a
//! thread of its own into an [`AuditSink`].

use std::collections::VecDeque;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use moat_policy::limits::DEFAULT_MAX_AUDIT_SIZE;

use super::Destination;
use super::client_rate::ClientRate;
use super::denials::DenialCounts;
use super::record::{
    AuditRecord, Body, Context, Event, FullKind, GuestIdentity, HttpExchange, IncomingRequest,
    SettingRecord, full_text,
};
use super::tally::DecisionCounts;
use super::udp::UdpCounts;
use crate::trusted::Trusted;
use moat_policy::policy::Host;
use moat_policy::setting::{Spelling, Worded};

/// Most records waiting for the sink; the writer holds at most as many
/// more, the batch it is writing. A record is a few hundred bytes, so 1024
/// lets a burst of decisions go by without waiting on a file write; past
/// it the guest waits for the sink.
pub(crate) const MAX_AUDIT_QUEUE: usize = 1024;

/// Records the writer waits for before it writes, unless
/// [`AUDIT_BATCH_WAIT`] passes first. A record written as it comes costs a
/// wake of the writer thread and a `write` each, often on the guest's own
/// CPU; a batch shares them (BENCHMARKS.md has the figures).
pub(crate) const AUDIT_BATCH: usize = 64;

/// Longest a record waits for a batch to fill before it is written: a
/// trail read as it is written (`tail -f`) lags the guest by this much at
/// most, and a process killed outright (SIGKILL, an OOM kill) loses at
/// most this much of it. 1 ms holds a batch of tens of records at the
/// rate a guest makes requests, which is most of what batching saves.
pub(crate) const AUDIT_BATCH_WAIT: Duration = Duration::from_millis(1);

/// Most bytes of records waiting for the sink (as [`Body::size`] counts
/// them), whatever their number: a denial of a name with hundreds of
/// refused addresses is tens of KiB, and 1024 of them would be tens of
/// MiB. 4 MiB holds 1024 ordinary records many times over; the writer's
/// batch is bounded the same way, so the trail holds 8 MiB at most.
pub(crate) const MAX_AUDIT_QUEUE_BYTES: usize = 4 << 20;

/// Where records go, one at a time, in order, on the trail's own thread.
/// Implement it to send the trail to a log pipeline; [`JsonLines`] writes
/// the documented form.
pub trait AuditSink: Send + 'static {
    /// Takes one record.
    ///
    /// # Errors
    /// Any I/O error: the run's network stops ([`AuditError::Failed`]).
    fn write(&mut self, record: &AuditRecord) -> io::Result<()>;

    /// Called when the queue is empty, and at the end of the run.
    ///
    /// # Errors
    /// As [`write`](Self::write).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// The bytes written so far, if the sink knows; the trail's size cap
    /// is judged on them (else on its own estimate of each record).
    fn bytes_written(&self) -> Option<u64> {
        None
    }
}

/// Writes every character past ASCII in `json` (serde_json's output,
/// valid UTF-8) as a `\uXXXX` escape (two for one past U+FFFF): JSON
/// means the same, and a text a guest chose reaches a terminal or an
/// editor that shows the trail as plain ASCII, never as a right-to-left
/// override (U+202E) or another control that reorders what is shown.
/// Outside strings JSON has no such character, so only strings change.
fn escape_non_ascii(json: &mut Vec<u8>) {
    if json.is_ascii() {
        return;
    }
    let text = String::from_utf8_lossy(json).into_owned();
    json.clear();
    let mut units = [0u16; 2];
    for c in text.chars() {
        if c.is_ascii() {
            json.push(c as u8);
        } else {
            for unit in c.encode_utf16(&mut units) {
                json.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
            }
        }
    }
}

/// The length of `record`'s line as [`JsonLines`] writes it, newline
/// included.
fn line_len(record: &AuditRecord) -> u64 {
    let mut line = Vec::with_capacity(1024);
    if serde_json::to_writer(&mut line, &record.to_json()).is_err() {
        return record.body.size() as u64;
    }
    escape_non_ascii(&mut line);
    line.len() as u64 + 1
}

/// A sink that writes each record as one line of JSON.
pub struct JsonLines<W: Write + Send + 'static> {
    out: io::BufWriter<W>,
    /// Each line in one write of its own, never split across two: for
    /// a stream others write to as well (stderr, a container's log).
    whole_lines: bool,
    line: Vec<u8>,
    written: u64,
}

impl<W: Write + Send + 'static> JsonLines<W> {
    /// Records to `out`, buffered, flushed whenever the queue is empty.
    pub fn new(out: W) -> JsonLines<W> {
        JsonLines {
            out: io::BufWriter::new(out),
            whole_lines: false,
            line: Vec::new(),
            written: 0,
        }
    }

    /// Records to `out`, which others write to too (stderr): each line
    /// goes out in one write, so that no one else's output lands inside it.
    pub fn shared(out: W) -> JsonLines<W> {
        JsonLines {
            out: io::BufWriter::with_capacity(0, out),
            whole_lines: true,
            line: Vec::new(),
            written: 0,
        }
    }
}

impl<W: Write + Send + 'static> AuditSink for JsonLines<W> {
    fn write(&mut self, record: &AuditRecord) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, &record.to_json())?;
        escape_non_ascii(&mut self.line);
        self.line.push(b'\n');
        if self.whole_lines {
            self.out.get_mut().write_all(&self.line)?;
        } else {
            self.out.write_all(&self.line)?;
        }
        self.written += self.line.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn bytes_written(&self) -> Option<u64> {
        Some(self.written)
    }
}

/// Why the trail cannot take a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// The destination cannot be opened.
    Open {
        /// `--audit`'s value.
        destination: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The sink failed; nothing more is recorded, so nothing more is
    /// allowed.
    Failed(String),
    /// One request's records reached its share of the trail
    /// ([`Setting::MaxAuditPerRequest`](moat_policy::setting::Setting::MaxAuditPerRequest), `moat serve`'s
    /// `--max-audit-per-request`): that request's audited operations are
    /// refused, the server's others go on.
    ShareFull {
        /// The share, in bytes.
        limit: u64,
    },
    /// One client address's requests wrote records faster than their rate
    /// ([`Setting::MaxAuditRatePerClient`](moat_policy::setting::Setting::MaxAuditRatePerClient), `moat serve`'s
    /// `--max-audit-rate-per-client`): that client's audited operations
    /// are refused until its rate allows more, the server's others go on.
    ClientRate {
        /// The rate, in bytes a second.
        rate: u64,
    },
    /// The trail reached its size cap ([`Setting::MaxAuditSize`](moat_policy::setting::Setting::MaxAuditSize)); nothing
    /// more is recorded, so nothing more is allowed.
    Full {
        /// The cap, in bytes.
        limit: u64,
    },
}

impl Worded for AuditError {
    fn write_worded(
        &self,
        spelling: Spelling,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        match self {
            AuditError::Open {
                destination,
                reason,
            } => write!(f, "cannot open the audit trail {destination}: {reason}"),
            AuditError::Failed(why) => write!(
                f,
                "the audit trail cannot be written ({why}): no network operation is allowed \
                 without it"
            ),
            AuditError::ShareFull { limit } => {
                f.write_str(&full_text(FullKind::Share, *limit, spelling))
            }
            AuditError::ClientRate { rate } => {
                f.write_str(&full_text(FullKind::ClientRate, *rate, spelling))
            }
            AuditError::Full { limit } => {
                f.write_str(&full_text(FullKind::Trail, *limit, spelling))
            }
        }
    }
}

moat_policy::display_in_embedding_words!(AuditError);

tokio::task_local! {
    /// The share of the trail of the request whose task makes a record
    /// (`moat serve`), if any.
    static SHARE: Arc<TrailShare>;
}

/// One request's share of the trail (`--max-audit-per-request`): what its
/// records took so far, against its limit, and its client address's rate
/// (`--max-audit-rate-per-client`), which each of its records is paid from
/// too. The handler's task runs within it ([`in_share`]), and so does each
/// outgoing request it makes.
pub(crate) struct TrailShare {
    limit: u64,
    used: std::sync::atomic::AtomicU64,
    /// Whether the trail was told the share is spent (once).
    told: AtomicBool,
    client: Option<Arc<ClientRate>>,
    /// The client's request, named on each record.
    incoming: Option<Arc<IncomingRequest>>,
}

impl TrailShare {
    pub(crate) fn new(
        limit: u64,
        client: Option<Arc<ClientRate>>,
        incoming: Option<Arc<IncomingRequest>>,
    ) -> Arc<TrailShare> {
        Arc::new(TrailShare {
            limit,
            used: std::sync::atomic::AtomicU64::new(0),
            told: AtomicBool::new(false),
            client,
            incoming,
        })
    }

    /// Takes `size` bytes of the share and of the client's rate, or
    /// refuses once either is spent; with the refusal, whether it is the
    /// first of its kind (the one the trail is told of).
    fn charge(&self, size: u64) -> Result<(), (AuditError, bool)> {
        let before = self.used.fetch_add(size, Ordering::AcqRel);
        if before.saturating_add(size) > self.limit {
            self.used.fetch_sub(size, Ordering::AcqRel);
            let full = AuditError::ShareFull { limit: self.limit };
            return Err((full, !self.told.swap(true, Ordering::AcqRel)));
        }
        if let Some(client) = &self.client
            && !client.take(size)
        {
            self.used.fetch_sub(size, Ordering::AcqRel);
            let full = AuditError::ClientRate {
                rate: client.rate(),
            };
            return Err((full, client.first_refusal()));
        }
        Ok(())
    }
}

/// The share of the request whose task this is, if any.
pub(crate) fn current_share() -> Option<Arc<TrailShare>> {
    SHARE.try_with(Arc::clone).ok()
}

/// Runs `f` within `share` (or as it is, without one): the records it
/// makes are paid from it, whichever task runs it (a record made for a
/// request on a task the request did not start: its exchange's, written
/// where its response body ends; a socket's, judged in wasmtime-wasi's).
pub(crate) fn with_share<R>(share: Option<&Arc<TrailShare>>, f: impl FnOnce() -> R) -> R {
    match share {
        Some(share) => SHARE.sync_scope(Arc::clone(share), f),
        None => f(),
    }
}

/// `future`, run within `share` (or as it is, without one): the records
/// its task makes are paid from it. Not an `async fn`: that would hold
/// `future` twice in its state (as its argument and inside the scope) and
/// copy it once more, which for a handler's task cost 4 thousand
/// instructions a request.
pub(crate) fn in_share<F: std::future::Future>(
    share: Option<Arc<TrailShare>>,
    future: F,
) -> futures::future::Either<tokio::task::futures::TaskLocalFuture<Arc<TrailShare>, F>, F> {
    match share {
        Some(share) => futures::future::Either::Left(SHARE.scope(share, future)),
        None => futures::future::Either::Right(future),
    }
}

/// The records waiting, and the writer's state.
struct Queue {
    /// What every record queued from now on carries (the guest changes
    /// with a reload).
    context: Arc<Context>,
    records: VecDeque<AuditRecord>,
    /// The records' size, as [`Body::size`] counts it.
    bytes: usize,
    /// The sink's error, once it failed.
    failed: Option<String>,
    /// No more records will come: the writer drains and stops.
    closed: bool,
    /// Records handed to the sink and done (for [`Audit::written`]).
    written: u64,
    /// The bytes the sink wrote, as it last said (or as estimated), and
    /// the estimated bytes of the batch it is writing.
    sink_bytes: u64,
    in_batch: usize,
    /// Set once the size cap was reached.
    full: Option<AuditError>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when records are taken off the queue.
    space: Condvar,
    /// Signalled when records are put on the queue, or it is closed.
    work: Condvar,
    udp: Mutex<UdpCounts>,
    denials: Mutex<DenialCounts>,
    /// Set when a send or a denial was counted rather than queued: the
    /// writer then writes out counts once a second ([`COUNT_SWEEP`]).
    counted: AtomicBool,
    /// The size cap: the default until a run's network is made with this
    /// trail ([`Audit::cap`]), then the run's `max-audit-size`.
    max_bytes: AtomicU64,
    /// The words its records name settings in: the embedding API's until
    /// a run's network is made with this trail ([`Audit::cap`]), then that
    /// run's front's.
    wording: Mutex<Spelling>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wording(&self) -> Spelling {
        *self.wording.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The trail's refusal, once it failed or filled.
    fn refusing(&self) -> Result<(), AuditError> {
        let queue = self.lock();
        if let Some(full) = &queue.full {
            return Err(full.clone());
        }
        match &queue.failed {
            Some(reason) => Err(AuditError::Failed(reason.clone())),
            None => Ok(()),
        }
    }

    /// Every count not yet written out (UDP sends and denials).
    fn pending_counts(&self) -> Vec<Body> {
        let mut counts = self
            .udp
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain_all();
        counts.extend(
            self.denials
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drain_all(),
        );
        counts
    }

    /// The counts of past seconds, and whether any count is still
    /// pending (so the writer looks again a second later).
    fn due_counts(&self, now: SystemTime) -> (Vec<Body>, bool) {
        let mut udp = self.udp.lock().unwrap_or_else(PoisonError::into_inner);
        let mut due = udp.sweep(now);
        let mut pending = udp.pending();
        drop(udp);
        let mut denials = self.denials.lock().unwrap_or_else(PoisonError::into_inner);
        due.extend(denials.sweep(now));
        pending |= denials.pending();
        (due, pending)
    }

    /// Queues `bodies` past the queue's bounds and the cap: records of
    /// decisions already made, which may not be lost (the cap's own, the
    /// counts at the run's end or when the trail fills, the counts the
    /// writer sweeps once a second).
    fn append(&self, bodies: Vec<Body>) {
        if bodies.is_empty() {
            return;
        }
        let mut queue = self.lock();
        let time = SystemTime::now();
        for body in bodies {
            queue.bytes += body.size();
            let context = Arc::clone(&queue.context);
            queue.records.push_back(AuditRecord {
                time,
                context,
                incoming: None,
                body,
                wording: self.wording(),
            });
        }
        drop(queue);
        self.work.notify_one();
    }

    /// Queues `body`, waiting while the queue is full; refused once the
    /// trail reached its size cap (the cap's own record and the counts
    /// pending then are queued past it).
    fn push(&self, body: Body) -> Result<(), AuditError> {
        let size = body.size();
        let context = Arc::clone(&self.lock().context);
        let record = AuditRecord {
            time: SystemTime::now(),
            context,
            incoming: SHARE
                .try_with(|share| share.incoming.clone())
                .ok()
                .flatten(),
            body,
            wording: self.wording(),
        };
        // The request this record is made for pays it from its share, at
        // the length of its line (its context and every escape counted);
        // the first record past it is replaced by one that says so (past
        // the share, as the trail's own `trail-full` is past the cap).
        if let Ok(Err((full, first))) = SHARE.try_with(|share| share.charge(line_len(&record))) {
            if first {
                self.append(vec![match &full {
                    AuditError::ClientRate { rate } => Body::ClientRateFull { rate: *rate },
                    _ => Body::ShareFull {
                        limit: SHARE.with(|share| share.limit),
                    },
                }]);
            }
            return Err(full);
        }
        let mut queue = self.lock();
        if let Some(full) = &queue.full {
            return Err(full.clone());
        }
        let due = queue.sink_bytes + (queue.in_batch + queue.bytes + size) as u64;
        let limit = self.max_bytes.load(Ordering::Relaxed);
        if due > limit {
            let full = AuditError::Full { limit };
            tracing::debug!(target: "moat::audit", limit, "the audit trail is full; the run's network is refused");
            queue.full = Some(full.clone());
            drop(queue);
            let mut closing = vec![Body::Full { limit }];
            closing.extend(self.pending_counts());
            self.append(closing);
            return Err(full);
        }
        while (queue.records.len() >= MAX_AUDIT_QUEUE
            || (queue.bytes + size > MAX_AUDIT_QUEUE_BYTES && !queue.records.is_empty()))
            && queue.failed.is_none()
            && !queue.closed
        {
            queue = self
                .space
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if let Some(reason) = &queue.failed {
            return Err(AuditError::Failed(reason.clone()));
        }
        if queue.closed {
            return Err(AuditError::Failed("the run's trail is finished".to_owned()));
        }
        queue.bytes += size;
        queue.records.push_back(record);
        // The writer is woken for a queue's first record, and again once
        // a batch is there; between the two it waits on a timer.
        let wake = matches!(queue.records.len(), 1 | AUDIT_BATCH);
        drop(queue);
        if wake {
            self.work.notify_one();
        }
        Ok(())
    }
}

/// The writer thread, and the handle that stops it when the last
/// [`Audit`] goes.
struct Trail {
    shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Trail {
    /// Flushes the UDP counts, lets the writer drain the queue and waits
    /// for it.
    fn finish(&self) {
        let counts = self.shared.pending_counts();
        // A failed sink has refused everything since: nothing is written.
        if self.shared.lock().failed.is_none() {
            self.shared.append(counts);
        }
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
        self.shared.space.notify_all();
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            // The writer does not panic (it only calls the sink); a sink
            // that panicked has lost its records either way.
            let _ = writer.join();
        }
    }
}

impl Drop for Trail {
    fn drop(&mut self) {
        self.finish();
    }
}

/// How often the writer writes out counts while any is pending and no
/// record comes: once a second, so that a count waits about as long as a
/// second's worth of decisions would (and a process killed outright loses
/// at most that).
const COUNT_SWEEP: Duration = Duration::from_secs(1);

/// The writer thread: takes batches off the queue, writes them, sweeps
/// the counts, and ends when the trail is closed and empty.
///
/// One piece: one loop holding the queue's lock across its waits; each
/// step decides what the next wait is for.
fn drain(shared: &Shared, mut sink: Box<dyn AuditSink>) {
    let mut sweeping = false;
    loop {
        if sweeping || shared.counted.swap(false, Ordering::AcqRel) {
            // Counts of past seconds, written even when nothing else
            // comes; looked at again a second later while any is pending.
            let (due, pending) = shared.due_counts(SystemTime::now());
            sweeping = pending;
            shared.append(due);
        }
        let batch = {
            let mut queue = shared.lock();
            let mut swept = false;
            while queue.records.is_empty() && !queue.closed && !swept {
                if sweeping || shared.counted.load(Ordering::Acquire) {
                    let (next, waited) = shared
                        .work
                        .wait_timeout(queue, COUNT_SWEEP)
                        .unwrap_or_else(PoisonError::into_inner);
                    queue = next;
                    swept = waited.timed_out();
                    sweeping = true;
                } else {
                    queue = shared
                        .work
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            if queue.records.is_empty() && !queue.closed {
                continue;
            }
            // A batch, or what came within the wait.
            let deadline = Instant::now() + AUDIT_BATCH_WAIT;
            while queue.records.len() < AUDIT_BATCH && !queue.closed {
                let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                    break;
                };
                queue = shared
                    .work
                    .wait_timeout(queue, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            if queue.records.is_empty() {
                break;
            }
            queue.in_batch = queue.bytes;
            queue.bytes = 0;
            std::mem::take(&mut queue.records)
        };
        shared.space.notify_all();
        let count = batch.len() as u64;
        // A sink that panics has failed as one that errs has: the run's
        // network stops rather than waiting on a queue no one drains.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            batch
                .iter()
                .try_for_each(|record| sink.write(record))
                .and_then(|()| sink.flush())
        }))
        .unwrap_or_else(|_| Err(io::Error::other("the audit sink panicked")));
        let mut queue = shared.lock();
        queue.written += count;
        queue.sink_bytes = sink
            .bytes_written()
            .unwrap_or(queue.sink_bytes + queue.in_batch as u64);
        queue.in_batch = 0;
        if let Err(e) = result {
            tracing::error!(target: "moat::audit", error = %e, "the audit trail cannot be written; the run's network is stopped");
            queue.failed = Some(e.to_string());
            queue.records.clear();
            drop(queue);
            shared.space.notify_all();
            return;
        }
    }
    if let Err(e) = sink.flush() {
        tracing::error!(target: "moat::audit", error = %e, "the audit trail's last records could not be written");
    }
}

/// One run's audit trail, or none. Cloning shares it; the trail is
/// finished (its counts written, its queue drained, its file flushed)
/// when the last clone is dropped, or by [`finish`](Self::finish).
#[derive(Clone, Default)]
pub struct Audit {
    trail: Option<Arc<Trail>>,
    /// The file the trail is appended to, if it goes to one: kept from
    /// every directory a guest may write ([`crate::trusted`]).
    file: Option<Arc<Path>>,
    /// Every decision counted, with or without a trail
    /// ([`Audit::counting`]).
    tally: Option<Arc<DecisionCounts>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("on", &self.trail.is_some())
            .field("counting", &self.tally.is_some())
            .finish()
    }
}

impl Audit {
    /// No trail: every call returns at once.
    pub fn off() -> Audit {
        Audit::default()
    }

    /// A trail into `sink` for the run `context`, whose first record is
    /// `settings`. It takes at most the run's `max-audit-size`
    /// ([`Limits::max_audit_size`](crate::limits::Limits::max_audit_size),
    /// as the sink counts its bytes, or as estimated), which the run sets
    /// when its network is made with this trail.
    ///
    /// # Errors
    /// [`AuditError::Failed`] if the writer thread cannot be started.
    pub fn start(
        sink: Box<dyn AuditSink>,
        context: Context,
        settings: Vec<SettingRecord>,
    ) -> Result<Audit, AuditError> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                context: Arc::new(context),
                records: VecDeque::new(),
                bytes: 0,
                failed: None,
                closed: false,
                written: 0,
                sink_bytes: 0,
                in_batch: 0,
                full: None,
            }),
            space: Condvar::new(),
            work: Condvar::new(),
            udp: Mutex::new(UdpCounts::default()),
            denials: Mutex::new(DenialCounts::default()),
            counted: AtomicBool::new(false),
            max_bytes: AtomicU64::new(DEFAULT_MAX_AUDIT_SIZE),
            wording: Mutex::new(Spelling::Embedding),
        });
        let for_writer = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("moat-audit".to_owned())
            .spawn(move || drain(&for_writer, sink))
            .map_err(|e| AuditError::Failed(format!("cannot start its writer: {e}")))?;
        shared.push(Body::Settings(settings))?;
        Ok(Audit {
            trail: Some(Arc::new(Trail {
                shared,
                writer: Mutex::new(Some(writer)),
            })),
            file: None,
            tally: None,
        })
    }

    /// A trail to `destination` as JSON Lines (a file is appended to), as
    /// [`start`](Self::start).
    ///
    /// # Errors
    /// [`AuditError::Open`] if the file cannot be opened for appending.
    pub fn to_destination(
        destination: &Destination,
        context: Context,
        settings: Vec<SettingRecord>,
    ) -> Result<Audit, AuditError> {
        let sink: Box<dyn AuditSink> = match destination {
            Destination::Stderr => Box::new(JsonLines::shared(io::stderr())),
            Destination::File(path) => {
                let file =
                    crate::trusted::append(path, Trusted::Trail).map_err(|e| AuditError::Open {
                        destination: destination.to_string(),
                        reason: e.reason(),
                    })?;
                Box::new(JsonLines::new(file))
            }
        };
        let mut audit = Audit::start(sink, context, settings)?;
        if let Destination::File(path) = destination {
            audit.file = Some(path.as_path().into());
        }
        Ok(audit)
    }

    /// Caps the trail at `max_bytes`, its records naming settings in
    /// `spelling`'s words: what the run whose network records here sets
    /// (`Net::build` calls it, so that `Limits::max_audit_size` has the
    /// same effect as `--max-audit-size`).
    pub(crate) fn cap(&self, max_bytes: u64, spelling: Spelling) {
        if let Some(trail) = &self.trail {
            trail.shared.max_bytes.store(max_bytes, Ordering::Relaxed);
            *trail
                .shared
                .wording
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = spelling;
        }
    }

    /// The same trail (or none), every decision also counted in
    /// `counts` by operation and outcome.
    #[must_use]
    pub fn counting(mut self, counts: Arc<DecisionCounts>) -> Audit {
        self.tally = Some(counts);
        self
    }

    /// Records that the run's guest was replaced by `guest` (`moat
    /// serve`'s reload): a `reload` record naming the one before, and every
    /// record after it names `guest`.
    ///
    /// # Errors
    /// As [`record`](Self::record).
    pub fn reloaded(&self, guest: GuestIdentity) -> Result<(), AuditError> {
        let Some(trail) = &self.trail else {
            return Ok(());
        };
        let previous = {
            let mut queue = trail.shared.lock();
            let mut next = (*queue.context).clone();
            let previous = next.guest.replace(guest);
            queue.context = Arc::new(next);
            previous
        };
        trail.shared.push(Body::Reload { previous })
    }

    /// Records that `moat serve` could not replace its handler with
    /// `file` (its name, without the directory), for `error`: the handler
    /// served, and the records' guest, stay.
    ///
    /// # Errors
    /// [`AuditError`] when the trail is full or failed.
    pub fn reload_failed(&self, file: &str, error: &str) -> Result<(), AuditError> {
        let Some(trail) = &self.trail else {
            return Ok(());
        };
        trail.shared.push(Body::ReloadFailed {
            file: file.to_owned(),
            error: error.to_owned(),
        })
    }

    /// The file the trail is appended to, if it goes to one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Whether there is a trail.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.trail.is_some()
    }

    /// Whether decisions are described at all: recorded on a trail or
    /// counted.
    #[inline]
    pub(crate) fn takes_decisions(&self) -> bool {
        self.trail.is_some() || self.tally.is_some()
    }

    /// Records `event` (built only if there is a trail), waiting while
    /// the queue is full. A denial exactly like an earlier one of the run
    /// (the same operation, destination, port and message) is counted
    /// instead, and its counts written once a second
    /// ([`Body::DenialCounts`]).
    ///
    /// # Errors
    /// [`AuditError::Failed`] once the sink failed, [`AuditError::Full`]
    /// once the trail reached its size cap: the caller refuses the
    /// operation.
    #[inline]
    pub fn record(&self, event: impl FnOnce() -> Event) -> Result<(), AuditError> {
        let Some(trail) = &self.trail else {
            if let Some(tally) = &self.tally {
                let event = event();
                tally.count(event.operation, event.decided());
            }
            return Ok(());
        };
        let event = event().cut();
        if let Some(tally) = &self.tally {
            tally.count(event.operation, event.decided());
        }
        let shared = &trail.shared;
        if event.allowed() {
            return shared.push(Body::Decision(event));
        }
        shared.refusing()?;
        let counted = shared
            .denials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .count(&event, SystemTime::now());
        match counted {
            None => shared.push(Body::Decision(event)),
            Some(bodies) => {
                if !shared.counted.swap(true, Ordering::AcqRel) {
                    shared.work.notify_one();
                }
                bodies.into_iter().try_for_each(|body| shared.push(body))
            }
        }
    }

    /// Records an outgoing HTTP request that ended (built only if there is
    /// a trail), waiting while the queue is full.
    ///
    /// # Errors
    /// As [`record`](Self::record); the request is over either way.
    pub fn http_exchange(&self, exchange: impl FnOnce() -> HttpExchange) -> Result<(), AuditError> {
        let Some(trail) = &self.trail else {
            return Ok(());
        };
        trail
            .shared
            .push(Body::HttpExchange(Box::new(exchange().cut())))
    }

    /// Records a UDP send to `host`:`port`: the first to a destination
    /// as a whole record (built by `event`), later ones as counts per
    /// second.
    ///
    /// # Errors
    /// As [`record`](Self::record).
    pub fn udp_send(
        &self,
        host: &Host,
        port: u16,
        allowed: bool,
        event: impl FnOnce() -> Event,
    ) -> Result<(), AuditError> {
        if let Some(tally) = &self.tally {
            let decided = if allowed {
                super::Decided::Allowed
            } else {
                super::Decided::Denied
            };
            tally.count(super::Operation::UdpSend, decided);
        }
        let Some(trail) = &self.trail else {
            return Ok(());
        };
        let (first, counts) = trail
            .shared
            .udp
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .count(host, port, allowed, SystemTime::now());
        for body in counts {
            trail.shared.push(body)?;
        }
        if first {
            trail.shared.push(Body::Decision(event().cut()))?;
        } else if !trail.shared.counted.swap(true, Ordering::AcqRel) {
            trail.shared.work.notify_one();
        }
        // A failed or full trail refuses every send, counted or not.
        trail.shared.refusing()
    }

    /// Records handed to the sink so far (the first, the settings,
    /// included).
    pub fn written(&self) -> u64 {
        self.trail
            .as_ref()
            .map_or(0, |trail| trail.shared.lock().written)
    }

    /// Writes what is pending (the UDP counts included) and stops the
    /// writer; later records are refused. Call it when the run ends, so
    /// that the trail is complete when the call returns.
    pub fn finish(&self) {
        if let Some(trail) = &self.trail {
            trail.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::audit::{Decided, Event, Operation, Outcome, Reason};

    /// A sink that keeps what it is given.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<AuditRecord>>>);

    impl AuditSink for Kept {
        fn write(&mut self, record: &AuditRecord) -> io::Result<()> {
            self.0.lock().unwrap().push(record.clone());
            Ok(())
        }
    }

    fn denial(i: usize) -> Event {
        Event::new(
            Operation::Connect,
            &Host::parse("10.0.0.1").unwrap(),
            Some(u16::try_from(i % 65_535).unwrap() + 1),
            Outcome::Denied {
                reason: Reason::NoGrant {
                    needs: "--allow-net=10.0.0.1".to_owned(),
                },
                message: "denied".to_owned(),
            },
        )
    }

    /// Without a trail, a counting audit still counts every decision:
    /// recorded ones by their event, UDP sends by their outcome; with a
    /// trail, a denial counted instead of recorded is counted all the
    /// same.
    #[test]
    fn decisions_are_counted_with_and_without_a_trail() {
        let counts = Arc::new(DecisionCounts::default());
        let audit = Audit::off().counting(Arc::clone(&counts));
        assert!(!audit.is_on() && audit.takes_decisions());
        audit.record(|| denial(1)).unwrap();
        let host = Host::parse("10.0.0.1").unwrap();
        audit.udp_send(&host, 9, true, || denial(2)).unwrap();
        audit.udp_send(&host, 9, false, || denial(2)).unwrap();
        assert_eq!(counts.get(Operation::Connect, Decided::Denied), 1);
        assert_eq!(counts.get(Operation::UdpSend, Decided::Allowed), 1);
        assert_eq!(counts.get(Operation::UdpSend, Decided::Denied), 1);

        let counts = Arc::new(DecisionCounts::default());
        let kept = Kept::default();
        let audit = Audit::start(Box::new(kept.clone()), Context::new(None), Vec::new())
            .unwrap()
            .counting(Arc::clone(&counts));
        for _ in 0..3 {
            audit.record(|| denial(1)).unwrap();
        }
        audit.finish();
        assert_eq!(counts.get(Operation::Connect, Decided::Denied), 3);
        assert!(!Audit::off().takes_decisions());
    }

    /// Waits (within a minute) for `done`.
    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_settings_come_first_and_every_record_follows_in_order() {
        let kept = Kept::default();
        let audit = Audit::start(Box::new(kept.clone()), Context::new(None), Vec::new()).unwrap();
        for i in 0..3000 {
            audit.record(|| denial(i)).unwrap();
        }
        audit.finish();
        let records = kept.0.lock().unwrap();
        assert_eq!(records.len(), 3001);
        assert!(matches!(records[0].body, Body::Settings(_)));
        for (i, record) in records[1..].iter().enumerate() {
            let Body::Decision(event) = &record.body else {
                panic!("{record:?}")
            };
            assert_eq!(event.port, denial(i).port, "record {i} out of order");
        }
        assert!(
            audit.record(|| denial(0)).is_err(),
            "a finished trail takes nothing"
        );
    }

    /// A sink that says when its first write starts, then waits for a go.
    struct Gated {
        started: mpsc::Sender<()>,
        go: mpsc::Receiver<()>,
        waited: bool,
        written: Arc<AtomicUsize>,
    }

    impl AuditSink for Gated {
        fn write(&mut self, _: &AuditRecord) -> io::Result<()> {
            if !self.waited {
                self.waited = true;
                let _ = self.started.send(());
                let _ = self.go.recv();
            }
            self.written.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn a_writer_that_falls_behind_holds_the_next_operation_never_more_records() {
        let (go, gate) = mpsc::channel();
        let (started, writing) = mpsc::channel();
        let written = Arc::new(AtomicUsize::new(0));
        let sink = Gated {
            started,
            go: gate,
            waited: false,
            written: Arc::clone(&written),
        };
        let audit = Audit::start(Box::new(sink), Context::new(None), Vec::new()).unwrap();
        // The writer has taken the settings record and waits at the gate.
        writing.recv().unwrap();
        let attempted = Arc::new(AtomicUsize::new(0));
        let pushed = Arc::new(AtomicUsize::new(0));
        let total = MAX_AUDIT_QUEUE * 3;
        let guest = {
            let (audit, attempted, pushed) =
                (audit.clone(), Arc::clone(&attempted), Arc::clone(&pushed));
            std::thread::spawn(move || {
                for i in 0..total {
                    attempted.fetch_add(1, Ordering::SeqCst);
                    audit.record(|| denial(i)).unwrap();
                    pushed.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        wait_for("the queue to fill", || {
            attempted.load(Ordering::SeqCst) > MAX_AUDIT_QUEUE
        });
        // The operation after a full queue's worth is held, not queued.
        assert_eq!(pushed.load(Ordering::SeqCst), MAX_AUDIT_QUEUE);
        assert!(!guest.is_finished());
        go.send(()).unwrap();
        guest.join().unwrap();
        audit.finish();
        assert_eq!(written.load(Ordering::SeqCst), total + 1, "nothing lost");
    }

    #[test]
    fn large_records_are_held_to_the_queues_bytes_not_only_its_count() {
        let (go, gate) = mpsc::channel();
        let (started, writing) = mpsc::channel();
        let sink = Gated {
            started,
            go: gate,
            waited: false,
            written: Arc::new(AtomicUsize::new(0)),
        };
        let audit = Audit::start(Box::new(sink), Context::new(None), Vec::new()).unwrap();
        writing.recv().unwrap();
        // A denial of a name with every address of a full answer refused
        // (each on a port of its own, so that none is counted as another's
        // repeat).
        let large = |i: usize| {
            let mut event = denial(i);
            event.resolved =
                vec!["10.0.0.1".parse().unwrap(); crate::net::limits::MAX_ANSWER_ADDRESSES];
            event.refused = event
                .resolved
                .iter()
                .map(|&address| crate::audit::Refusal {
                    address,
                    rule: moat_policy::policy::Provenance {
                        entry: "private".to_owned(),
                        source: moat_policy::policy::Source::Embedding,
                    },
                })
                .collect();
            event
        };
        let size = Body::Decision(large(0)).size();
        let attempted = Arc::new(AtomicUsize::new(0));
        let pushed = Arc::new(AtomicUsize::new(0));
        let guest = {
            let (audit, attempted, pushed) =
                (audit.clone(), Arc::clone(&attempted), Arc::clone(&pushed));
            std::thread::spawn(move || {
                for i in 0..MAX_AUDIT_QUEUE {
                    attempted.fetch_add(1, Ordering::SeqCst);
                    audit.record(|| large(i)).unwrap();
                    pushed.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let fits = MAX_AUDIT_QUEUE_BYTES / size;
        assert!(fits < MAX_AUDIT_QUEUE, "{size} bytes a record");
        wait_for("the bytes to fill", || {
            attempted.load(Ordering::SeqCst) > fits
        });
        assert_eq!(pushed.load(Ordering::SeqCst), fits);
        go.send(()).unwrap();
        guest.join().unwrap();
        audit.finish();
    }

    struct Broken;

    impl AuditSink for Broken {
        fn write(&mut self, _: &AuditRecord) -> io::Result<()> {
            Err(io::Error::other("disk full"))
        }
    }

    #[test]
    fn a_sink_that_fails_refuses_every_later_record() {
        let audit = Audit::start(Box::new(Broken), Context::new(None), Vec::new()).unwrap();
        wait_for("the sink to fail", || audit.record(|| denial(1)).is_err());
        let e = audit.record(|| denial(2)).unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        let host = Host::parse("127.0.0.1").unwrap();
        assert!(audit.udp_send(&host, 9, true, || denial(3)).is_err());
    }

    #[test]
    fn a_repeated_denial_is_counted_and_its_counts_written_within_a_second() {
        let kept = Kept::default();
        let audit = Audit::start(Box::new(kept.clone()), Context::new(None), Vec::new()).unwrap();
        for _ in 0..1000 {
            audit.record(|| denial(7)).unwrap();
        }
        // Nothing more is recorded, yet the counts are written out.
        let counted = || {
            kept.0
                .lock()
                .unwrap()
                .iter()
                .map(|record| match &record.body {
                    Body::DenialCounts { count, first, .. } => {
                        assert_eq!(first.port, denial(7).port);
                        *count
                    }
                    _ => 0,
                })
                .sum::<u64>()
        };
        wait_for("the counts to be written", || counted() == 999);
        let whole = kept
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| matches!(r.body, Body::Decision(_)))
            .count();
        assert_eq!(whole, 1, "the first denial, whole");
        audit.finish();
        assert_eq!(counted(), 999);
    }

    /// A writer into a buffer the test keeps a handle on.
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_trail_at_its_cap_refuses_everything_after_its_last_record() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = JsonLines::new(Captured(Arc::clone(&out)));
        let audit = Audit::start(Box::new(sink), Context::new(None), Vec::new()).unwrap();
        audit.cap(16 << 10, Spelling::Flags);
        let mut recorded = 0;
        let refused = loop {
            match audit.record(|| denial(recorded)) {
                Ok(()) => recorded += 1,
                Err(e) => break e,
            }
            assert!(recorded < 10_000, "never full");
        };
        assert!(
            matches!(refused, AuditError::Full { limit: 16384 })
                && refused
                    .worded(Spelling::Flags)
                    .to_string()
                    .contains("raise it with --max-audit-size"),
            "{refused}"
        );
        assert!(audit.record(|| denial(1)).is_err(), "refused from then on");
        let host = Host::parse("127.0.0.1").unwrap();
        assert!(audit.udp_send(&host, 9, true, || denial(3)).is_err());
        audit.finish();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["kind"], "trail-full");
        assert_eq!(
            text.lines().count(),
            recorded + 2,
            "the settings, each, the last"
        );
        assert!(text.len() < (16 << 10) + 1024, "{} bytes", text.len());
    }

    #[test]
    fn json_lines_are_one_object_per_line_with_the_schema_version() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = JsonLines::new(Captured(Arc::clone(&out)));
        let audit = Audit::start(Box::new(sink), Context::new(None), Vec::new()).unwrap();
        audit.record(|| denial(7)).unwrap();
        audit.finish();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["kind"], "settings");
        assert_eq!(lines[1]["schema"], super::super::SCHEMA_VERSION);
        assert_eq!(lines[1]["decision"], "denied");
        assert_eq!(lines[1]["reason"]["needs"], "--allow-net=10.0.0.1");
        assert_eq!(lines[0]["run"], lines[1]["run"]);
        assert_eq!(lines[1]["run"].as_str().unwrap().len(), 32);
    }
}
