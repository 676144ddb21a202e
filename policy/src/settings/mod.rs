//! A run's grants, deny lists and bounds as people state them: on `moat
//! run`'s command line, in a policy file, in a container's environment
//! (the containerd shim), and how statements from two places add up.
//!
//! Every source goes through [`Settings::set`]: one setting of the table
//! ([`Setting`]), a value as the source wrote it, and where it was written
//! ([`Origin`]), so that a bad value is one [`SettingError`] that names
//! the setting as that source spells it (`--max-sockets=0`,
//! `MOAT_MAX_SOCKETS=0`, `moat.toml:3: max-sockets`).
//!
//! **An empty value sets nothing**, from every source: `--allow-net=`,
//! `allow-net = []` and `MOAT_ALLOW_NET=` grant nothing (so a pod spec's
//! empty grant stands for "nothing" over what an image would grant), an
//! empty deny list denies nothing, and a bound needs a value.
//!
//! Adding [`Settings`] together widens grants to what either allows, keeps
//! every deny entry of both, and lets the later one's bounds win.

mod destination;
mod policy_file;
mod values;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::policy::{Capability, DenyList, Grant, Policy, PolicyError, Rule, Source};
pub use crate::setting::{Kind, Setting, Spelling};
pub use destination::Destination;
pub use policy_file::{KEYS, PolicyFile, PolicyFileError, Statement};
pub use values::{Value, parse_duration, parse_size};

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
    /// `max-http-requests`.
    pub max_http_requests: Option<u32>,
    /// `http-connect-timeout`.
    pub http_connect_timeout: Option<Duration>,
    /// `http-first-byte-timeout`.
    pub http_first_byte_timeout: Option<Duration>,
    /// `http-between-bytes-timeout`.
    pub http_between_bytes_timeout: Option<Duration>,
    /// `max-http-header-size`, in bytes.
    pub max_http_header_size: Option<u64>,
    /// `max-http-connections` (`moat serve`).
    pub max_http_connections: Option<u32>,
    /// `http-header-read-timeout` (`moat serve`).
    pub http_header_read_timeout: Option<Duration>,
    /// `max-http-body-size` (`moat serve`), in bytes.
    pub max_http_body_size: Option<u64>,
    /// `max-instances` (`moat serve`).
    pub max_instances: Option<u32>,
    /// `http-request-body-timeout` (`moat serve`).
    pub http_request_body_timeout: Option<Duration>,
    /// `http-response-send-timeout` (`moat serve`).
    pub http_response_send_timeout: Option<Duration>,
    /// `max-instances-per-client` (`moat serve`).
    pub max_instances_per_client: Option<u32>,
    /// `max-audit-size`, in bytes.
    pub max_audit_size: Option<u64>,
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
            max_http_requests: later.max_http_requests.or(self.max_http_requests),
            http_connect_timeout: later.http_connect_timeout.or(self.http_connect_timeout),
            http_first_byte_timeout: later
                .http_first_byte_timeout
                .or(self.http_first_byte_timeout),
            http_between_bytes_timeout: later
                .http_between_bytes_timeout
                .or(self.http_between_bytes_timeout),
            max_http_header_size: later.max_http_header_size.or(self.max_http_header_size),
            max_http_connections: later.max_http_connections.or(self.max_http_connections),
            http_header_read_timeout: later
                .http_header_read_timeout
                .or(self.http_header_read_timeout),
            max_http_body_size: later.max_http_body_size.or(self.max_http_body_size),
            max_instances: later.max_instances.or(self.max_instances),
            http_request_body_timeout: later
                .http_request_body_timeout
                .or(self.http_request_body_timeout),
            http_response_send_timeout: later
                .http_response_send_timeout
                .or(self.http_response_send_timeout),
            max_instances_per_client: later
                .max_instances_per_client
                .or(self.max_instances_per_client),
            max_audit_size: later.max_audit_size.or(self.max_audit_size),
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
    /// Where the audit trail goes (`audit`), if it was set.
    pub audit: Option<Destination>,
    /// Every statement that set something, in the order applied, with
    /// where it was written: the audit trail's first record.
    pub applied: Vec<Applied>,
}

/// One statement that set something: the setting, its value as written
/// and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Which setting.
    pub setting: Setting,
    /// The value as written (a policy file's integer as its digits).
    pub value: String,
    /// Where it was written.
    pub source: Source,
}

/// Where a setting was written: what a message about it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A flag of `moat run` (`--max-sockets=0`).
    Flag,
    /// A policy file, at a 1-based line (`moat.toml:3: max-sockets`).
    PolicyFile {
        /// The file as its reader named it.
        path: PathBuf,
        /// The line of the key, or of the list entry.
        line: usize,
    },
    /// A container's environment under the containerd shim
    /// (`MOAT_MAX_SOCKETS=0`).
    Environment,
}

impl Origin {
    /// Where `setting`, written here, came from: what the audit trail
    /// names.
    pub fn source(&self, setting: Setting) -> Source {
        match self {
            Origin::Flag => Source::Flag {
                flag: setting.flag().to_owned(),
            },
            Origin::PolicyFile { path, line } => Source::PolicyFile {
                path: path.clone(),
                line: *line,
            },
            Origin::Environment => Source::Environment {
                variable: setting.variable().to_owned(),
            },
        }
    }

    /// How settings from here are spelled in messages.
    pub fn spelling(&self) -> Spelling {
        match self {
            Origin::Environment => Spelling::Environment,
            Origin::Flag | Origin::PolicyFile { .. } => Spelling::Flags,
        }
    }
}

/// A setting that cannot be used: where it was written, which one, the
/// value as written and why.
#[derive(Debug)]
pub struct SettingError {
    /// Where it was written.
    pub origin: Origin,
    /// The key as written (a policy file's unknown key is not a
    /// [`Setting`]); `None` for a policy file's TOML syntax error.
    pub key: Option<String>,
    /// The value as written, when there is one to show.
    pub value: Option<String>,
    /// What is wrong and, where it helps, what to write instead.
    pub reason: String,
    /// The policy parser's error, for a bad grant or deny entry.
    pub cause: Option<Box<PolicyError>>,
}

impl std::error::Error for SettingError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let SettingError {
            origin,
            key,
            value,
            reason,
            ..
        } = self;
        let named = key.as_deref().map(|key| match Setting::from_key(key) {
            Some(setting) => setting.named(origin.spelling()).to_owned(),
            None => key.to_owned(),
        });
        match (origin, named, value) {
            (Origin::PolicyFile { path, line }, Some(_), _) => {
                write!(
                    f,
                    "{}:{line}: {}: {reason}",
                    path.display(),
                    key.as_deref().unwrap_or_default()
                )
            }
            (Origin::PolicyFile { path, line }, None, _) => {
                write!(f, "{}:{line}: {reason}", path.display())
            }
            (_, Some(named), Some(value)) => write!(f, "{named}={value}: {reason}"),
            (_, Some(named), None) => write!(f, "{named}: {reason}"),
            (_, None, _) => write!(f, "{reason}"),
        }
    }
}

impl Settings {
    /// Nothing granted, nothing denied, no bounds set.
    pub fn new() -> Settings {
        Settings::default()
    }

    /// Applies one setting, written at `origin`: for grants and deny
    /// lists, comma-separated entries that add to what is there (`*`
    /// grants everything; an empty value adds nothing); for a bound, a
    /// number, a size (`64MiB`) or a duration (`30s`), or a policy file's
    /// integer, that replaces it. The one reading of every source.
    ///
    /// # Errors
    /// [`SettingError`] naming `setting` as `origin` spells it; a refused
    /// setting changes nothing.
    pub fn set<'v>(
        &mut self,
        origin: &Origin,
        setting: Setting,
        value: impl Into<Value<'v>>,
    ) -> Result<(), SettingError> {
        self.set_from(origin, &origin.source(setting), setting, value.into())
    }

    /// [`set`](Self::set), with the entries' [`Source`] given: an image's
    /// policy is read as a policy file, and its entries come from the
    /// image.
    fn set_from(
        &mut self,
        origin: &Origin,
        source: &Source,
        setting: Setting,
        value: Value<'_>,
    ) -> Result<(), SettingError> {
        let written = match value {
            Value::Text(text) => text.trim().to_owned(),
            Value::Integer(n) => n.to_string(),
        };
        self.apply(origin, source, setting, value)?;
        if !written.is_empty() {
            self.applied.push(Applied {
                setting,
                value: written,
                source: source.clone(),
            });
        }
        Ok(())
    }

    fn apply(
        &mut self,
        origin: &Origin,
        source: &Source,
        setting: Setting,
        value: Value<'_>,
    ) -> Result<(), SettingError> {
        let error = |reason: String, cause: Option<Box<PolicyError>>| SettingError {
            origin: origin.clone(),
            key: Some(setting.key().to_owned()),
            value: Some(match value {
                Value::Text(text) => text.to_owned(),
                Value::Integer(n) => n.to_string(),
            }),
            reason,
            cause,
        };
        let bad = |reason: String| error(reason, None);
        let list = |value: Value<'_>| match value {
            Value::Text(text) => Ok(text.trim().to_owned()),
            Value::Integer(_) => Err(bad("expected a list of entries, found a number".to_owned())),
        };
        let b = &mut self.bounds;
        match setting {
            Setting::AllowNet | Setting::AllowListen => {
                let capability = if setting == Setting::AllowNet {
                    Capability::Connect
                } else {
                    Capability::Listen
                };
                let text = list(value)?;
                let added = match text.as_str() {
                    "*" => Grant::Only(vec![Rule::everything(source.clone())]),
                    "" => Grant::Nothing,
                    entries => entries
                        .parse::<Grant>()
                        .map_err(|e: PolicyError| error(e.to_string(), Some(Box::new(e))))?
                        .sourced(source),
                };
                let granted = self.policy.grant(capability).clone().union(added);
                self.policy = std::mem::take(&mut self.policy).with_grant(capability, granted);
            }
            Setting::DenyNet | Setting::DenyListen => {
                let capability = if setting == Setting::DenyNet {
                    Capability::Connect
                } else {
                    Capability::Listen
                };
                let text = list(value)?;
                if !text.is_empty() {
                    let denied = text
                        .parse::<DenyList>()
                        .map_err(|e: PolicyError| error(e.to_string(), Some(Box::new(e))))?
                        .sourced(source);
                    self.policy = std::mem::take(&mut self.policy).with_denied(capability, denied);
                }
            }
            Setting::MaxSockets => b.max_sockets = Some(values::count(value).map_err(bad)?),
            Setting::MaxWaitingCalls => {
                b.max_waiting_calls = Some(values::count(value).map_err(bad)?);
            }
            Setting::MaxMemory => b.max_memory = Some(values::size(value).map_err(bad)?),
            Setting::MaxHostMemory => b.max_host_memory = Some(values::size(value).map_err(bad)?),
            Setting::Timeout => b.timeout = Some(values::duration(value).map_err(bad)?),
            Setting::MaxLookups => b.max_lookups = Some(values::count(value).map_err(bad)?),
            Setting::LookupTimeout => {
                b.lookup_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::TlsHandshakeTimeout => {
                b.tls_handshake_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::MaxConnections => b.max_connections = Some(values::count(value).map_err(bad)?),
            Setting::MaxConnectionsPerPeer => {
                b.max_connections_per_peer = Some(values::count(value).map_err(bad)?);
            }
            Setting::MaxHttpRequests => {
                b.max_http_requests = Some(values::count(value).map_err(bad)?);
            }
            Setting::HttpConnectTimeout => {
                b.http_connect_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::HttpFirstByteTimeout => {
                b.http_first_byte_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::HttpBetweenBytesTimeout => {
                b.http_between_bytes_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::MaxHttpHeaderSize => {
                b.max_http_header_size = Some(values::size(value).map_err(bad)?);
            }
            Setting::MaxHttpConnections => {
                b.max_http_connections = Some(values::count(value).map_err(bad)?);
            }
            Setting::HttpHeaderReadTimeout => {
                b.http_header_read_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::MaxHttpBodySize => {
                b.max_http_body_size = Some(values::size(value).map_err(bad)?);
            }
            Setting::MaxInstances => b.max_instances = Some(values::count(value).map_err(bad)?),
            Setting::HttpRequestBodyTimeout => {
                b.http_request_body_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::HttpResponseSendTimeout => {
                b.http_response_send_timeout = Some(values::duration(value).map_err(bad)?);
            }
            Setting::MaxInstancesPerClient => {
                b.max_instances_per_client = Some(values::count(value).map_err(bad)?);
            }
            Setting::MaxAuditSize => b.max_audit_size = Some(values::size(value).map_err(bad)?),
            Setting::Audit => match value {
                Value::Text(text) if text.trim().is_empty() => {}
                Value::Text(text) => self.audit = Some(Destination::parse(text.trim())),
                Value::Integer(_) => {
                    return Err(bad("expected a file's path, found a number".to_owned()));
                }
            },
        }
        Ok(())
    }

    /// The settings of a parsed policy file, each statement applied at its
    /// line.
    ///
    /// # Errors
    /// The first statement that cannot be used, in file order.
    pub fn from_file(file: &PolicyFile) -> Result<Settings, SettingError> {
        Settings::read_file(file, None)
    }

    /// The settings of the policy an image carries, whose digest is
    /// `digest`: as [`from_file`](Self::from_file), each entry's source
    /// the image's policy and its line.
    ///
    /// # Errors
    /// As [`from_file`](Self::from_file).
    pub fn from_image_policy(file: &PolicyFile, digest: &str) -> Result<Settings, SettingError> {
        Settings::read_file(file, Some(digest))
    }

    fn read_file(file: &PolicyFile, digest: Option<&str>) -> Result<Settings, SettingError> {
        let mut settings = Settings::new();
        for statement in file.statements() {
            let origin = Origin::PolicyFile {
                path: file.path().to_owned(),
                line: statement.line,
            };
            let source = match digest {
                Some(digest) => Source::ImagePolicy {
                    digest: digest.to_owned(),
                    line: statement.line,
                },
                None => origin.source(statement.setting),
            };
            settings.set_from(&origin, &source, statement.setting, statement.value())?;
        }
        Ok(settings)
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
        let mut applied = self.applied;
        applied.extend(later.applied);
        Settings {
            policy,
            bounds: self.bounds.overridden_by(later.bounds),
            audit: later.audit.or(self.audit),
            applied,
        }
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
        s.set(&Origin::Flag, Setting::AllowNet, "example.com:443")
            .unwrap();
        s.set(&Origin::Flag, Setting::AllowNet, "10.0.0.0/8")
            .unwrap();
        s.set(&Origin::Flag, Setting::DenyNet, "10.1.0.0/16")
            .unwrap();
        s.set(&Origin::Flag, Setting::MaxMemory, "64MiB").unwrap();
        s.set(&Origin::Flag, Setting::Timeout, "30s").unwrap();
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
        let e = s
            .set(&Origin::Flag, Setting::AllowListen, "300.1.1.1:80")
            .unwrap_err();
        assert!(
            e.to_string().starts_with("--allow-listen=300.1.1.1:80: "),
            "{e}"
        );
        assert!(
            std::error::Error::source(&e).is_some_and(|cause| cause.is::<PolicyError>()),
            "the policy parser's error is the source"
        );
        let e = s
            .set(&Origin::Environment, Setting::MaxSockets, "0")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "MOAT_MAX_SOCKETS=0: must be at least 1, found 0"
        );
        let file = Origin::PolicyFile {
            path: PathBuf::from("moat.toml"),
            line: 3,
        };
        let e = s
            .set(&file, Setting::MaxSockets, Value::Integer(0))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "moat.toml:3: max-sockets: must be at least 1, found 0"
        );
        assert_eq!(s, Settings::new(), "a refused setting changes nothing");
        s.set(&Origin::Flag, Setting::AllowNet, "").unwrap();
        s.set(&Origin::Flag, Setting::DenyNet, " ").unwrap();
        assert_eq!(s, Settings::new(), "an empty list adds nothing");
    }

    /// One rule for an empty value, from every source: a list sets
    /// nothing, a bound needs a value; and one reading of each bound.
    #[test]
    fn every_source_reads_a_value_one_way() {
        let file = Origin::PolicyFile {
            path: PathBuf::from("moat.toml"),
            line: 1,
        };
        for origin in [Origin::Flag, Origin::Environment, file] {
            let mut s = Settings::new();
            for setting in Setting::ALL {
                match setting.kind() {
                    Kind::Grant | Kind::Deny => s.set(&origin, setting, "").unwrap(),
                    Kind::File => s.set(&origin, setting, " ").unwrap(),
                    Kind::Count | Kind::Size | Kind::Duration => {
                        let e = s.set(&origin, setting, " ").unwrap_err();
                        assert_eq!(e.reason, "needs a value", "{origin:?} {setting:?}");
                    }
                }
            }
            assert_eq!(s, Settings::new(), "{origin:?}: nothing set");
            for (value, reason) in [
                ("-3", "must be at least 1, found -3"),
                ("4294967296", "too large: at most 4294967295"),
                ("ten", "expected a whole number such as 64, found \"ten\""),
            ] {
                let e = s.set(&origin, Setting::MaxLookups, value).unwrap_err();
                assert_eq!(e.reason, reason, "{origin:?}");
            }
            s.set(&origin, Setting::MaxMemory, "64MiB").unwrap();
            s.set(&origin, Setting::LookupTimeout, "2s").unwrap();
            assert_eq!(s.bounds.max_memory, Some(64 << 20));
            assert_eq!(s.bounds.lookup_timeout, Some(Duration::from_secs(2)));
        }
    }

    #[test]
    fn later_settings_widen_grants_keep_denials_and_win_bounds() {
        let mut first = Settings::new();
        first
            .set(&Origin::Flag, Setting::AllowNet, "a.example:1")
            .unwrap();
        first
            .set(&Origin::Flag, Setting::DenyNet, "b.example")
            .unwrap();
        first.set(&Origin::Flag, Setting::MaxSockets, "5").unwrap();
        first.set(&Origin::Flag, Setting::MaxLookups, "3").unwrap();
        let mut later = Settings::new();
        later
            .set(&Origin::Flag, Setting::AllowNet, "b.example:2,c.example:3")
            .unwrap();
        later.set(&Origin::Flag, Setting::MaxSockets, "9").unwrap();
        let both = first.and(later);
        let p = &both.policy;
        assert!(p.check(Capability::Connect, &host("a.example"), 1).is_ok());
        assert!(p.check(Capability::Connect, &host("c.example"), 3).is_ok());
        assert!(p.check(Capability::Connect, &host("b.example"), 2).is_err());
        assert_eq!(both.bounds.max_sockets, Some(9));
        assert_eq!(both.bounds.max_lookups, Some(3));
    }
}
