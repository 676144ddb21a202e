//! Capabilities: what a guest may reach, and who may reach it.
//!
//! Two grants, kept apart because they are different privileges:
//! [`Capability::Connect`] (reaching out, `--allow-net`) and
//! [`Capability::Listen`] (being reachable, `--allow-listen`). Each is a
//! [`Grant`]: nothing, everything, or an allowlist of [`Rule`]s.
//!
//! This module is the one place a capability is checked. The socket core
//! ([`crate::net`]) calls [`Policy::check`] before it resolves a name or
//! makes a socket, so a denied call costs no syscall, no DNS query and no
//! port. Hosts are judged as the guest wrote them ([`Host`]): allowing
//! `localhost` does not allow `127.0.0.1` nor the reverse, and an attacker's
//! DNS answer cannot turn an allowed name into an address that was not.
//!
//! ```
//! use moat_host::policy::{Capability, Host, Policy};
//!
//! let policy = Policy::new()
//!     .allow_connect("example.com:443,*.internal.example,10.0.0.0/8")?
//!     .allow_listen("127.0.0.1:8000-8100")?;
//!
//! let host = Host::parse("api.internal.example")?;
//! assert!(policy.check(Capability::Connect, &host, 5432).is_ok());
//!
//! let denied = policy
//!     .check(Capability::Connect, &Host::parse("example.com")?, 80)
//!     .unwrap_err();
//! assert_eq!(
//!     denied.to_string(),
//!     "connect to example.com:80 denied: needs --allow-net=example.com:80"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod host;
mod rule;

use std::fmt;
use std::str::FromStr;

pub use host::{Host, HostError};
pub use rule::Rule;

/// One of the two network grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Reaching out: opening connections (`--allow-net`).
    Connect,
    /// Being reachable: listening for connections (`--allow-listen`).
    Listen,
}

impl Capability {
    /// The command-line flag that grants this capability.
    pub fn flag(self) -> &'static str {
        match self {
            Capability::Connect => "--allow-net",
            Capability::Listen => "--allow-listen",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Capability::Connect => "connect to",
            Capability::Listen => "listen on",
        }
    }
}

/// What one capability allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Grant {
    /// Nothing (no flag given).
    #[default]
    Nothing,
    /// Every host and port (the flag given without a list).
    Everything,
    /// The hosts and ports some entry of the list matches.
    Only(Vec<Rule>),
}

impl Grant {
    /// Whether this grant allows `host`:`port`.
    pub fn allows(&self, host: &Host, port: u16) -> bool {
        match self {
            Grant::Nothing => false,
            Grant::Everything => true,
            Grant::Only(rules) => rules.iter().any(|r| r.matches(host, port)),
        }
    }

    /// This grant widened by `other` (what either allows).
    pub fn union(self, other: Grant) -> Grant {
        match (self, other) {
            (Grant::Everything, _) | (_, Grant::Everything) => Grant::Everything,
            (Grant::Nothing, g) | (g, Grant::Nothing) => g,
            (Grant::Only(mut a), Grant::Only(b)) => {
                a.extend(b);
                Grant::Only(a)
            }
        }
    }
}

impl FromStr for Grant {
    type Err = PolicyError;

    /// Parses a comma-separated list of `HOST[:PORT]` entries (see [`Rule`]).
    /// Spaces around entries are ignored; an empty list is an error (grant
    /// everything with [`Grant::Everything`], or the bare flag).
    fn from_str(list: &str) -> Result<Grant, PolicyError> {
        if list.trim().is_empty() {
            return Err(PolicyError::EmptyList);
        }
        list.split(',')
            .map(|entry| entry.trim().parse())
            .collect::<Result<Vec<Rule>, _>>()
            .map(Grant::Only)
    }
}

/// An invalid allowlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The list has no entries.
    #[error("the allowlist is empty (give the flag without a value to allow everything)")]
    EmptyList,
    /// One entry cannot be parsed.
    #[error("invalid allowlist entry `{entry}`: {reason}")]
    InvalidEntry {
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A refused call: which capability it needed and for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The capability the call needed.
    pub capability: Capability,
    /// The host, normalised (IPv6 in brackets).
    pub host: Host,
    /// The port asked for.
    pub port: u16,
}

impl fmt::Display for Denied {
    /// `connect to example.com:443 denied: needs --allow-net=example.com:443`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Denied {
            capability,
            host,
            port,
        } = self;
        write!(
            f,
            "{} {host}:{port} denied: needs {}={host}:{port}",
            capability.verb(),
            capability.flag()
        )
    }
}

impl std::error::Error for Denied {}

/// The network capabilities of one guest run: a [`Grant`] for each
/// [`Capability`]. The default policy denies everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    connect: Grant,
    listen: Grant,
}

impl Policy {
    /// A policy that denies everything.
    pub fn new() -> Policy {
        Policy::default()
    }

    /// A policy that allows every connect and every listen.
    pub fn allow_all() -> Policy {
        Policy {
            connect: Grant::Everything,
            listen: Grant::Everything,
        }
    }

    /// Replaces the grant for `capability`.
    pub fn with_grant(mut self, capability: Capability, grant: Grant) -> Policy {
        *self.grant_mut(capability) = grant;
        self
    }

    /// Adds the entries of `list` (as for `--allow-net=LIST`) to the
    /// connect grant.
    ///
    /// # Errors
    /// [`PolicyError`] if an entry is invalid.
    pub fn allow_connect(self, list: &str) -> Result<Policy, PolicyError> {
        self.allow(Capability::Connect, list)
    }

    /// Adds the entries of `list` (as for `--allow-listen=LIST`) to the
    /// listen grant.
    ///
    /// # Errors
    /// [`PolicyError`] if an entry is invalid.
    pub fn allow_listen(self, list: &str) -> Result<Policy, PolicyError> {
        self.allow(Capability::Listen, list)
    }

    fn allow(mut self, capability: Capability, list: &str) -> Result<Policy, PolicyError> {
        let added: Grant = list.parse()?;
        let grant = self.grant_mut(capability);
        *grant = std::mem::take(grant).union(added);
        Ok(self)
    }

    /// The grant for `capability`.
    pub fn grant(&self, capability: Capability) -> &Grant {
        match capability {
            Capability::Connect => &self.connect,
            Capability::Listen => &self.listen,
        }
    }

    fn grant_mut(&mut self, capability: Capability) -> &mut Grant {
        match capability {
            Capability::Connect => &mut self.connect,
            Capability::Listen => &mut self.listen,
        }
    }

    /// Checks that `capability` is granted for `host`:`port`.
    ///
    /// # Errors
    /// [`Denied`] naming the capability and the flag entry that would allow
    /// the call.
    pub fn check(&self, capability: Capability, host: &Host, port: u16) -> Result<(), Denied> {
        if self.grant(capability).allows(host, port) {
            Ok(())
        } else {
            Err(Denied {
                capability,
                host: host.clone(),
                port,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    #[test]
    fn default_denies_everything_and_allow_all_allows_everything() {
        let none = Policy::new();
        let all = Policy::allow_all();
        for cap in [Capability::Connect, Capability::Listen] {
            assert!(none.check(cap, &host("127.0.0.1"), 80).is_err());
            assert!(all.check(cap, &host("example.com"), 80).is_ok());
        }
    }

    #[test]
    fn grants_are_separate() {
        let p = Policy::new().allow_connect("127.0.0.1").unwrap();
        assert!(p.check(Capability::Connect, &host("127.0.0.1"), 1).is_ok());
        assert!(p.check(Capability::Listen, &host("127.0.0.1"), 1).is_err());
    }

    #[test]
    fn lists_accumulate_and_everything_wins() {
        let p = Policy::new()
            .allow_connect("a.example")
            .unwrap()
            .allow_connect("b.example:1")
            .unwrap();
        assert!(p.check(Capability::Connect, &host("a.example"), 9).is_ok());
        assert!(p.check(Capability::Connect, &host("b.example"), 1).is_ok());
        assert!(p.check(Capability::Connect, &host("b.example"), 2).is_err());
        let p = p.with_grant(
            Capability::Connect,
            Grant::Everything.union(Grant::Only(vec![])),
        );
        assert!(p.check(Capability::Connect, &host("c.example"), 2).is_ok());
    }

    #[test]
    fn denial_names_the_flag_that_would_allow_it() {
        let p = Policy::new();
        let d = p.check(Capability::Listen, &host("::1"), 8080).unwrap_err();
        assert_eq!(
            d.to_string(),
            "listen on [::1]:8080 denied: needs --allow-listen=[::1]:8080"
        );
        // The hint itself is a valid entry that allows the call.
        let fixed = Policy::new().allow_listen("[::1]:8080").unwrap();
        assert!(fixed.check(Capability::Listen, &host("::1"), 8080).is_ok());
    }

    #[test]
    fn empty_and_invalid_lists_are_errors() {
        assert_eq!("".parse::<Grant>(), Err(PolicyError::EmptyList));
        assert!(" , ".parse::<Grant>().is_err());
        assert!("a.example, b.example:80".parse::<Grant>().is_ok());
    }
}
