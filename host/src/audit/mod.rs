//! The audit trail: one record of every network decision a run makes,
//! allowed and denied, with the rule that decided it and the addresses a
//! name resolved to.
//!
//! The socket core ([`crate::net`]) describes each decision as an
//! [`Event`] and hands it to the run's [`Audit`]; this module turns events
//! into [`AuditRecord`]s (time, run id, guest, container) and gives them,
//! in order, to an [`AuditSink`] on a thread of its own: a file or
//! standard error as JSON Lines ([`JsonLines`], the schema in
//! `docs/audit.schema.json`), or an embedder's own sink.
//!
//! **Nothing is lost and nothing grows.** At most 1,024
//! records (4 MiB) wait for the sink; the guest's next audited operation waits
//! while the queue is full, so a guest cannot outrun the trail and the
//! host's memory for it stays bounded. A sink that fails stops the run's
//! network: every later audited operation is refused with the sink's
//! error, since a decision that cannot be recorded is not made.
//!
//! **A flood is counted, not copied.** UDP sends are the one operation a
//! guest can repeat a million times a second to one place: the first send
//! to a destination (allowed or denied) is a whole record, and the sends
//! after it are counts per destination per second ([`Body::UdpSendCounts`]).
//! A denial repeated exactly (the same operation, destination, port and
//! message: a guest retrying a refused call in a loop) is counted the same
//! way after its first record ([`Body::DenialCounts`]). Counts are written
//! out once a second while any is pending, when more are kept than the
//! caps allow, and at the end of the run: none is lost.
//!
//! **The disk is bounded too.** A trail takes at most `--max-audit-size`
//! (`Limits::max_audit_size`, 1 GiB by default); past it, as for a sink that fails, every
//! audited operation is refused ([`AuditError::Full`]), after a last
//! `trail-full` record and the counts still pending.
//!
//! With no trail ([`Audit::off`], the default) every call here returns at
//! once and nothing is built.

mod client_rate;
mod denials;
mod record;
mod suggest;
mod tally;
mod trail;
mod udp;

pub(crate) use client_rate::ClientRates;
pub use record::{
    AuditRecord, Body, Context, Decided, Event, GuestIdentity, HttpConnection, HttpEnd,
    HttpExchange, HttpLink, HttpRequest, IncomingRequest, Operation, Outcome, Reason, Refusal,
    SCHEMA_VERSION, SettingRecord,
};
pub use suggest::{SuggestError, Suggestion};
pub use tally::DecisionCounts;
pub use trail::{Audit, AuditError, AuditSink, JsonLines};
pub(crate) use trail::{TrailShare, current_share, in_share, with_share};

pub use moat_policy::settings::Destination;
