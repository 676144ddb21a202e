//! A run's grants, deny lists and bounds as people state them: on `moat
//! run`'s command line, in a policy file, or in a container's environment
//! (the containerd shim), and how statements from two places add up.
//!
//! Every place spells a setting the same way: the keys of
//! [`crate::policy_file::KEYS`] (`allow-net`, `max-memory`, ...), values as
//! the flags take them. Adding [`Settings`] together widens grants to what
//! either allows, keeps every deny entry of both, and lets the later one's
//! bounds win.

use std::path::Path;
use std::time::Duration;

use crate::net::Limits;
use crate::options::RunOptions;
use crate::policy::{Capability, DenyList, Grant, Policy, PolicyError, Rule};
use crate::policy_file::{
    At, GrantSpec, KEYS, PolicyFile, PolicyFileError, parse_duration, parse_size,
};

/// The bounds a person set; `None` leaves the default (or an earlier
/// statement's value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// `max-sockets`.
    pub max_sockets: Option<u32>,
    /// `max-waiting-calls`.
    pub max_waiting_calls: Option<u32>,
    /// `max-memory`, in bytes.
    pub max_memory: Option<u64>,
    /// `max-host-memory`, in bytes.
    pub max_host_memory: Option<u64>,
    /// `timeout`.
    pub timeout: Option<Duration>,
    /// `max-lookups`.
    pub max_lookups: Option<u32>,
    /// `lookup-timeout`.
    pub lookup_timeout: Option<Duration>,
    /// `tls-handshake-timeout`.
    pub tls_handshake_timeout: Option<Duration>,
    /// `max-connections` (per listener).
    pub max_connections: Option<u32>,
    /// `max-connections-per-peer` (per listener).
    pub max_connections_per_peer: Option<u32>,
}

impl Bounds {
    /// These bounds, with `later`'s values where it sets one.
    pub fn overridden_by(self, later: Bounds) -> Bounds {
        Bounds {
            max_sockets: later.max_sockets.or(self.max_sockets),
            max_waiting_calls: later.max_waiting_calls.or(self.max_waiting_calls),
            max_memory: later.max_memory.or(self.max_memory),
            max_host_memory: later.max_host_memory.or(self.max_host_memory),
            timeout: later.timeout.or(self.timeout),
            max_lookups: later.max_lookups.or(self.max_lookups),
            lookup_timeout: later.lookup_timeout.or(self.lookup_timeout),
            tls_handshake_timeout: later.tls_handshake_timeout.or(self.tls_handshake_timeout),
            max_connections: later.max_connections.or(self.max_connections),
            max_connections_per_peer: later
                .max_connections_per_peer
                .or(self.max_connections_per_peer),
        }
    }

    /// The network limits these bounds give, defaults where unset.
    pub fn limits(&self) -> Limits {
        let defaults = Limits::default();
        Limits {
            max_sockets: self.max_sockets.or(defaults.max_sockets),
            max_waiting_calls: self.max_waiting_calls.unwrap_or(defaults.max_waiting_calls),
            max_lookups: self.max_lookups.unwrap_or(defaults.max_lookups),
            lookup_timeout: self.lookup_timeout.unwrap_or(defaults.lookup_timeout),
            tls_handshake_timeout: self
                .tls_handshake_timeout
                .unwrap_or(defaults.tls_handshake_timeout),
            max_connections: self.max_connections,
            max_connections_per_peer: self.max_connections_per_peer,
            max_host_memory: self
                .max_host_memory
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX))
                .or(defaults.max_host_memory),
            ..defaults
        }
    }
}

/// One place's grants, deny lists and bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// What the guest may reach and where it may listen.
    pub policy: Policy,
    /// The bounds set.
    pub bounds: Bounds,
}

/// A setting that cannot be used, with the key and value as written.
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    /// The key is none of [`KEYS`].
    #[error("{key} is not a moat setting (the settings: {})", KEYS.join(", "))]
    UnknownKey {
        /// The key as given.
        key: String,
    },
    /// A grant or deny entry is not valid.
    #[error("{key}={value}: {source}")]
    Entry {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// What the policy parser said.
        #[source]
        source: PolicyError,
    },
    /// A number, size or duration is not valid.
    #[error("{key}={value}: {reason}")]
    Value {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong, and what to write instead.
        reason: String,
    },
}

impl Settings {
    /// Nothing granted, nothing denied, no bounds set.
    pub fn new() -> Settings {
        Settings::default()
    }

    /// The settings of a parsed policy file; a bad entry is an error naming
    /// `path`, its line and its key.
    pub fn from_file(file: &PolicyFile, path: &Path) -> Result<Settings, PolicyFileError> {
        let mut policy = Policy::new();
        for (capability, key, spec) in [
            (Capability::Connect, "allow-net", &file.allow_net),
            (Capability::Listen, "allow-listen", &file.allow_listen),
        ] {
            let granted = match spec.as_ref().map(|at| &at.value) {
                None | Some(GrantSpec::Nothing) => Grant::Nothing,
                Some(GrantSpec::Everything) => Grant::Everything,
                Some(GrantSpec::Entries(entries)) => Grant::Only(
                    entries
                        .iter()
                        .map(|At { value, line }| {
                            value
                                .parse::<Rule>()
                                .map_err(|e| PolicyFileError::at(path, *line, key, e.to_string()))
                        })
                        .collect::<Result<_, _>>()?,
                ),
            };
            policy = policy.with_grant(capability, granted);
        }
        for (capability, key, list) in [
            (Capability::Connect, "deny-net", &file.deny_net),
            (Capability::Listen, "deny-listen", &file.deny_listen),
        ] {
            for At { value, line } in list.iter().flat_map(|at| &at.value) {
                let denied: DenyList = value.parse().map_err(|e: PolicyError| {
                    PolicyFileError::at(path, *line, key, e.to_string())
                })?;
                policy = policy.with_denied(capability, denied);
            }
        }
        let value = |at: &Option<At<u32>>| at.as_ref().map(|a| a.value);
        let bounds = Bounds {
            max_sockets: value(&file.max_sockets),
            max_waiting_calls: value(&file.max_waiting_calls),
            max_memory: file.max_memory.as_ref().map(|a| a.value),
            max_host_memory: file.max_host_memory.as_ref().map(|a| a.value),
            timeout: file.timeout.as_ref().map(|a| a.value),
            max_lookups: value(&file.max_lookups),
            lookup_timeout: file.lookup_timeout.as_ref().map(|a| a.value),
            tls_handshake_timeout: file.tls_handshake_timeout.as_ref().map(|a| a.value),
            max_connections: value(&file.max_connections),
            max_connections_per_peer: value(&file.max_connections_per_peer),
        };
        Ok(Settings { policy, bounds })
    }

    /// Applies one setting, `key` as in a policy file and `value` as the
    /// flag of that name takes it: a comma-separated list for grants and
    /// deny lists (`*` grants everything; an empty value adds nothing), a
    /// number, a size (`64MiB`) or a duration (`30s`). A grant or deny list
    /// adds to what is there; a bound replaces it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SettingError> {
        let Some(&key) = KEYS.iter().find(|k| **k == key) else {
            return Err(SettingError::UnknownKey {
                key: key.to_owned(),
            });
        };
        let entry = |source| SettingError::Entry {
            key,
            value: value.to_owned(),
            source,
        };
        let bad = |reason: String| SettingError::Value {
            key,
            value: value.to_owned(),
            reason,
        };
        let count = || -> Result<u32, SettingError> {
            match value.trim().parse::<u32>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad("expected a whole number, at least 1".to_owned())),
            }
        };
        let duration = || parse_duration(value.trim()).map_err(bad);
        let b = &mut self.bounds;
        match key {
            "allow-net" | "allow-listen" => {
                let capability = if key == "allow-net" {
                    Capability::Connect
                } else {
                    Capability::Listen
                };
                let added = match value.trim() {
                    "*" => Grant::Everything,
                    "" => Grant::Nothing,
                    _ => value.parse().map_err(entry)?,
                };
                let granted = self.policy.grant(capability).clone().union(added);
                self.policy = std::mem::take(&mut self.policy).with_grant(capability, granted);
            }
            "deny-net" | "deny-listen" => {
                let capability = if key == "deny-net" {
                    Capability::Connect
                } else {
                    Capability::Listen
                };
                if !value.trim().is_empty() {
                    let denied: DenyList = value.parse().map_err(entry)?;
                    self.policy = std::mem::take(&mut self.policy).with_denied(capability, denied);
                }
            }
            "max-sockets" => b.max_sockets = Some(count()?),
            "max-waiting-calls" => b.max_waiting_calls = Some(count()?),
            "max-memory" => b.max_memory = Some(parse_size(value.trim()).map_err(bad)?),
            "max-host-memory" => {
                b.max_host_memory = Some(parse_size(value.trim()).map_err(bad)?);
            }
            "timeout" => b.timeout = Some(duration()?),
            "max-lookups" => b.max_lookups = Some(count()?),
            "lookup-timeout" => b.lookup_timeout = Some(duration()?),
            "tls-handshake-timeout" => b.tls_handshake_timeout = Some(duration()?),
            "max-connections" => b.max_connections = Some(count()?),
            "max-connections-per-peer" => b.max_connections_per_peer = Some(count()?),
            _ => unreachable!("every key of KEYS has an arm"),
        }
        Ok(())
    }

    /// These settings and `later`'s together: grants widened to what either
    /// allows, every deny entry of both kept, `later`'s bounds winning.
    pub fn and(self, later: Settings) -> Settings {
        let mut policy = self.policy;
        for capability in [Capability::Connect, Capability::Listen] {
            let granted = policy
                .grant(capability)
                .clone()
                .union(later.policy.grant(capability).clone());
            policy = policy
                .with_grant(capability, granted)
                .with_denied(capability, later.policy.denied(capability).clone());
        }
        Settings {
            policy,
            bounds: self.bounds.overridden_by(later.bounds),
        }
    }

    /// A run under these settings: their policy, limits, memory bound and
    /// time bound; nothing else set yet.
    pub fn run_options(&self) -> RunOptions {
        let mut options = RunOptions::new(self.policy.clone()).limits(self.bounds.limits());
        if let Some(bytes) = self.bounds.max_memory {
            options = options.max_memory(bytes);
        }
        if let Some(limit) = self.bounds.timeout {
            options = options.timeout(limit);
        }
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Host;

    fn host(s: &str) -> Host {
        Host::parse(s).expect("a valid host")
    }

    #[test]
    fn a_setting_reads_as_its_flag_does() {
        let mut s = Settings::new();
        s.set("allow-net", "example.com:443").unwrap();
        s.set("allow-net", "10.0.0.0/8").unwrap();
        s.set("deny-net", "10.1.0.0/16").unwrap();
        s.set("max-memory", "64MiB").unwrap();
        s.set("timeout", "30s").unwrap();
        let p = &s.policy;
        assert!(
            p.check(Capability::Connect, &host("example.com"), 443)
                .is_ok()
        );
        assert!(p.check(Capability::Connect, &host("10.2.0.1"), 5).is_ok());
        assert!(p.check(Capability::Connect, &host("10.1.0.1"), 5).is_err());
        assert!(p.check(Capability::Listen, &host("10.2.0.1"), 5).is_err());
        assert_eq!(s.bounds.max_memory, Some(64 << 20));
        assert_eq!(s.bounds.timeout, Some(Duration::from_secs(30)));
    }

    #[test]
    fn a_bad_setting_names_its_key_and_value() {
        let mut s = Settings::new();
        let e = s.set("allow-nett", "x").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("allow-nett is not a moat setting"),
            "{e}"
        );
        let e = s.set("allow-listen", "300.1.1.1:80").unwrap_err();
        assert!(
            e.to_string().starts_with("allow-listen=300.1.1.1:80: "),
            "{e}"
        );
        let e = s.set("max-sockets", "0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "max-sockets=0: expected a whole number, at least 1"
        );
        assert_eq!(s, Settings::new(), "a refused setting changes nothing");
        s.set("allow-net", "").unwrap();
        s.set("deny-net", " ").unwrap();
        assert_eq!(s, Settings::new(), "an empty list adds nothing");
    }

    #[test]
    fn later_settings_widen_grants_keep_denials_and_win_bounds() {
        let mut first = Settings::new();
        first.set("allow-net", "a.example:1").unwrap();
        first.set("deny-net", "b.example").unwrap();
        first.set("max-sockets", "5").unwrap();
        first.set("max-lookups", "3").unwrap();
        let mut later = Settings::new();
        later.set("allow-net", "b.example:2,c.example:3").unwrap();
        later.set("max-sockets", "9").unwrap();
        let both = first.and(later);
        let p = &both.policy;
        assert!(p.check(Capability::Connect, &host("a.example"), 1).is_ok());
        assert!(p.check(Capability::Connect, &host("c.example"), 3).is_ok());
        assert!(p.check(Capability::Connect, &host("b.example"), 2).is_err());
        assert_eq!(both.bounds.max_sockets, Some(9));
        assert_eq!(both.bounds.max_lookups, Some(3));
        assert_eq!(both.bounds.limits().max_sockets, Some(9));
    }
}
