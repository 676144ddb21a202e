//! What a check answers: [`Allowed`] with the entry that allowed, or
//! [`Denied`] with what the call needed and why (and [`LookupDenied`] for a
//! name); and [`PolicyError`], a list that cannot be read.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use super::{Capability, DenyEntry, Host, Policy, Provenance, Source};
use crate::setting::{Spelling, Worded};

/// An invalid allow or deny list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// An allowlist has no entries.
    #[error("the allowlist is empty (give the flag without a value to allow everything)")]
    EmptyList,
    /// A deny list has no entries.
    #[error("the deny list is empty (leave the flag out to deny nothing more)")]
    EmptyDenyList,
    /// A deny entry that reads as `private` or `metadata` misspelt: as
    /// written it would be a host name, and protect nothing it was meant
    /// to.
    #[error(
        "deny entry `{entry}` is not a keyword: did you mean `{keyword}`? (as written it \
         is a host name of one label, and denies nothing else)"
    )]
    MisspeltKeyword {
        /// The entry as written.
        entry: String,
        /// The keyword it is near.
        keyword: &'static str,
    },
    /// One entry cannot be parsed.
    #[error("invalid entry `{entry}`: {reason}")]
    InvalidEntry {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// An allowed call: the grant entry that allowed it, as written and where
/// (`*` from the embedding API when the grant is [`Grant::Everything`](crate::policy::grant::Grant::Everything)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The entry.
    pub rule: Arc<Provenance>,
}

/// A refused call: which capability it needed, for what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The capability the call needed.
    pub capability: Capability,
    /// The host, normalised (IPv6 in brackets).
    pub host: Host,
    /// The port asked for.
    pub port: u16,
    /// Why.
    pub reason: DenyReason,
    /// The other addresses the name resolved to, each refused too (by a
    /// deny entry): a denial of a name names every address it refused.
    pub also_resolved_to: Box<[IpAddr]>,
    /// For a connect no grant allows: the program's own listener on the
    /// port it names, open but reached through an address that does not
    /// make it the program's own (only loopback does), or closed since.
    /// The message then says so rather than naming a port to grant: the
    /// system may have picked the listener's port, anew each run.
    pub own_listener: Option<Box<OwnListenerOnPort>>,
}

/// The program's own listener on the port a denied connect named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnListenerOnPort {
    /// Its local address.
    pub local: SocketAddr,
    /// Whether it still listens; `false`: closed before the connect.
    pub open: bool,
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DenyReason {
    /// No entry of the grant allows the host as written.
    NotGranted,
    /// A deny entry matched the host as written, or (with `address`) an
    /// address the name resolved to, or (with `carried`) the IPv4 address
    /// that one of those carries.
    DeniedBy {
        /// The deny entry, as written (`private`, `10.0.0.0/8`, ...).
        entry: String,
        /// Where the deny entry was written (shared with the entry).
        source: Arc<Source>,
        /// The resolved address it matched, when it was not the host itself.
        address: Option<IpAddr>,
        /// The IPv4 address the entry matched, when the address is an IPv6
        /// form that carries it (`64:ff9b::a00:5` carries 10.0.0.5) and the
        /// entry did not match the IPv6 address itself.
        carried: Option<Ipv4Addr>,
    },
}

impl Worded for Denied {
    /// `connect to example.com:443 denied: needs --allow-net=example.com:443`,
    /// or `connect to rebind.example:80 denied by --deny-net=private (it
    /// resolved to 127.0.0.1)`.
    fn write_worded(&self, spelling: Spelling, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Denied {
            capability,
            host,
            port,
            reason,
            also_resolved_to,
            own_listener,
        } = self;
        let verb = capability.verb();
        match (reason, own_listener.as_deref()) {
            (DenyReason::NotGranted, Some(OwnListenerOnPort { local, open: true })) => {
                return write!(
                    f,
                    "{verb} {host}:{port} denied: port {port} is the program's own listener \
                     (on {local}), which a connect reaches without a grant only through a \
                     loopback address it listens on"
                );
            }
            (DenyReason::NotGranted, Some(OwnListenerOnPort { local, open: false })) => {
                return write!(
                    f,
                    "{verb} {host}:{port} denied: port {port} was the program's own listener \
                     (on {local}), closed before this connect; a connect to its own listener \
                     needs no grant only while it listens"
                );
            }
            _ => {}
        }
        match reason {
            DenyReason::NotGranted => write!(
                f,
                "{verb} {host}:{port} denied: needs {}",
                capability
                    .grant()
                    .written(spelling, &format!("{host}:{port}"))
            ),
            DenyReason::DeniedBy {
                entry,
                address,
                carried,
                ..
            } => {
                let by = capability.deny().written(spelling, entry);
                write!(f, "{verb} {host}:{port} denied by {by}")?;
                match (address, carried) {
                    (None, None) => return Ok(()),
                    (None, Some(v4)) => write!(f, " (it carries {v4}")?,
                    (Some(ip), None) => write!(f, " (it resolved to {}", Host::ip(*ip))?,
                    (Some(ip), Some(v4)) => {
                        write!(f, " (it resolved to {}, which carries {v4}", Host::ip(*ip))?;
                    }
                }
                match &also_resolved_to[..] {
                    [] => {}
                    [one] => write!(f, "; its other address {} is denied too", Host::ip(*one))?,
                    more => {
                        f.write_str("; its other addresses ")?;
                        for (i, ip) in more.iter().enumerate() {
                            let sep = if i == 0 { "" } else { ", " };
                            write!(f, "{sep}{}", Host::ip(*ip))?;
                        }
                        f.write_str(" are denied too")?;
                    }
                }
                f.write_str(")")
            }
        }
    }
}

crate::display_in_embedding_words!(Denied, LookupDenied);

impl std::error::Error for Denied {}

impl Denied {
    /// Whether a deny entry refused the call (rather than no grant
    /// allowing it).
    pub fn by_deny_entry(&self) -> bool {
        matches!(self.reason, DenyReason::DeniedBy { .. })
    }

    /// The setting that would allow the call, as `spelling` writes it
    /// (`--allow-net=example.com:443`), when no grant allowed it; `None`
    /// when a deny entry refused it.
    pub fn needs(&self, spelling: Spelling) -> Option<String> {
        match self.reason {
            DenyReason::NotGranted => Some(
                self.capability
                    .grant()
                    .written(spelling, &format!("{}:{}", self.host, self.port)),
            ),
            DenyReason::DeniedBy { .. } => None,
        }
    }
}

/// A refused name lookup (for programs that look names up themselves, as
/// wasi:sockets programs do): no grant names the name, or a deny entry
/// refuses it on every port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupDenied {
    /// The name, normalised.
    pub name: Host,
    /// Why.
    pub reason: DenyReason,
    /// The capability whose deny list refused the name (with
    /// [`DenyReason::DeniedBy`]); [`Capability::Connect`] when no grant
    /// names it.
    pub capability: Capability,
}

impl Worded for LookupDenied {
    /// `lookup of db.example denied: no --allow-net or --allow-listen entry
    /// names it (--allow-net=db.example would)`, or `lookup of evil.example
    /// denied by --deny-net=evil.example`.
    fn write_worded(&self, spelling: Spelling, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        let net = Capability::Connect.grant_setting(spelling);
        let listen = Capability::Listen.grant_setting(spelling);
        match &self.reason {
            DenyReason::NotGranted => write!(
                f,
                "lookup of {name} denied: no {net} or {listen} entry names it ({} would)",
                Capability::Connect
                    .grant()
                    .written(spelling, &name.to_string())
            ),
            DenyReason::DeniedBy { entry, .. } => {
                let by = self.capability.deny().written(spelling, entry);
                write!(f, "lookup of {name} denied by {by}")
            }
        }
    }
}

impl std::error::Error for LookupDenied {}

impl LookupDenied {
    /// The setting that would allow the lookup, as `spelling` writes it
    /// (`--allow-net=db.example`), when no grant named the name; `None`
    /// when a deny entry refused it.
    pub fn needs(&self, spelling: Spelling) -> Option<String> {
        match self.reason {
            DenyReason::NotGranted => Some(
                Capability::Connect
                    .grant()
                    .written(spelling, &self.name.to_string()),
            ),
            DenyReason::DeniedBy { .. } => None,
        }
    }

    /// The deny entry that refused the lookup, as written and where; `None`
    /// when no grant named the name.
    pub fn deny_entry<'p>(&self, policy: &'p Policy) -> Option<&'p DenyEntry> {
        match self.reason {
            DenyReason::NotGranted => None,
            DenyReason::DeniedBy { .. } => [Capability::Connect, Capability::Listen]
                .into_iter()
                .flat_map(|c| policy.denied(c).entries())
                .find(|e| e.matches_every_port(&self.name)),
        }
    }
}
