//! Names: looking them up, keeping the answers, and remembering which
//! names the addresses of stock programs came from.
//!
//! - `resolver`: the [`Resolver`] an embedder can replace, and the
//!   [`SystemResolver`] (the system's name servers, without its search
//!   list).
//! - `lookups`: a run's lookups through its resolver, bounded in number
//!   and time.
//! - `answers`: the answers a run keeps for their lifetime
//!   ([`Addresses`], held once however many readers share them).
//! - `names`: the record of which names each address was resolved from,
//!   for programs that name their peers by address
//!   ([`AddressGate`](super::AddressGate)).
//!
//! They depend one way: `lookups` uses `resolver` and `answers`; the
//! others use none of the rest.

mod answers;
mod lookups;
mod names;
mod resolver;

pub use answers::Addresses;
pub(crate) use lookups::Lookups;
pub(crate) use names::{RecordFull, ResolvedNames};
pub use resolver::{Answer, AnswerLookup, Lookup, Resolver, SystemResolver};
