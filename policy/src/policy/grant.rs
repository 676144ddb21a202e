//! The two capabilities and what each grants: [`Capability`], [`Grant`],
//! and how an allowlist is written.

use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use super::{Host, PolicyError, Provenance, Rule, Source};
use crate::setting::{Setting, Spelling};

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
            Capability::Connect => Setting::AllowNet.flag(),
            Capability::Listen => Setting::AllowListen.flag(),
        }
    }

    /// The command-line flag that denies within this capability.
    pub fn deny_flag(self) -> &'static str {
        match self {
            Capability::Connect => Setting::DenyNet.flag(),
            Capability::Listen => Setting::DenyListen.flag(),
        }
    }

    /// The name of the setting that grants this capability, as `spelling`
    /// writes it (`--allow-net`, `MOAT_ALLOW_NET`).
    pub fn grant_setting(self, spelling: Spelling) -> &'static str {
        match self {
            Capability::Connect => Setting::AllowNet.named(spelling),
            Capability::Listen => Setting::AllowListen.named(spelling),
        }
    }

    /// The name of the setting that denies within this capability, as
    /// `spelling` writes it (`--deny-net`, `MOAT_DENY_NET`).
    pub fn deny_setting(self, spelling: Spelling) -> &'static str {
        self.deny().named(spelling)
    }

    /// The setting that grants this capability.
    pub(super) fn grant(self) -> Setting {
        match self {
            Capability::Connect => Setting::AllowNet,
            Capability::Listen => Setting::AllowListen,
        }
    }

    /// The setting that denies within this capability.
    pub(super) fn deny(self) -> Setting {
        match self {
            Capability::Connect => Setting::DenyNet,
            Capability::Listen => Setting::DenyListen,
        }
    }

    pub(super) fn verb(self) -> &'static str {
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
        self.allowing(&super::address::Judged::new(host), port)
            .is_some()
    }

    /// The entry of this grant that allows `host`:`port`, first in the
    /// order written.
    pub(super) fn allowing(
        &self,
        host: &super::address::Judged<'_>,
        port: u16,
    ) -> Option<Arc<Provenance>> {
        match self {
            Grant::Nothing => None,
            Grant::Everything => Some(Arc::clone(&EVERYTHING)),
            Grant::Only(rules) => rules
                .iter()
                .find(|r| r.grants(host, port))
                .map(Rule::provenance_shared),
        }
    }

    /// This grant's entries as written at `source`.
    pub fn sourced(self, source: &Source) -> Grant {
        match self {
            Grant::Only(rules) => {
                Grant::Only(rules.into_iter().map(|r| r.sourced(source)).collect())
            }
            other => other,
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

/// What allowed a call when the grant is [`Grant::Everything`].
static EVERYTHING: LazyLock<Arc<Provenance>> = LazyLock::new(|| {
    Arc::new(Provenance {
        entry: "*".to_owned(),
        source: Source::Embedding,
    })
});

impl FromStr for Grant {
    type Err = PolicyError;

    /// Parses a comma-separated list of `HOST[:PORT]` entries (see [`Rule`]).
    /// Spaces around entries are ignored; an empty list is an error (grant
    /// everything with [`Grant::Everything`], or the bare flag).
    fn from_str(list: &str) -> Result<Grant, PolicyError> {
        entries(list, PolicyError::EmptyList).map(Grant::Only)
    }
}

/// The entries of a comma-separated list, spaces around them ignored;
/// `empty` if there are none.
pub(super) fn entries<T: FromStr<Err = PolicyError>>(
    list: &str,
    empty: PolicyError,
) -> Result<Vec<T>, PolicyError> {
    if list.trim().is_empty() {
        return Err(empty);
    }
    list.split(',').map(|entry| entry.trim().parse()).collect()
}
