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
mod secret;
mod values;

use std::fmt;
use std::path::PathBuf;

use crate::limits::{Bound, Limits};
use crate::policy::{Capability, DenyList, Grant, Policy, PolicyError, Rule, Source};
pub use crate::setting::{InWords, Kind, Setting, Spelling, Worded};
pub use destination::Destination;
pub use policy_file::{KEYS, PolicyFile, PolicyFileError, Statement};
pub use secret::{SecretBinding, SecretSource, SecretSpecError};
pub use values::{Value, parse_duration, parse_size};

/// One place's grants, deny lists and bounds, as the settings table
/// writes them: its policy names settings as `moat run`'s flags do until
/// a caller spells it otherwise (the shim: the environment's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// What the guest may reach and where it may listen.
    pub policy: Policy,
    /// The bounds: each at its default unless a statement set it (which
    /// ones did is in [`applied`](Self::applied)).
    pub limits: Limits,
    /// Where the audit trail goes (`audit`), if it was set.
    pub audit: Option<Destination>,
    /// The secrets bound to destinations (`secret`), one a name.
    pub secrets: Vec<SecretBinding>,
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

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            policy: Policy::new().spelled(Spelling::Flags),
            limits: Limits::default(),
            audit: None,
            secrets: Vec::new(),
            applied: Vec::new(),
        }
    }
}

impl Settings {
    /// Nothing granted, nothing denied, no bounds set; denials name
    /// settings as flags.
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
            Setting::Secret => {
                // An image's policy chooses nothing of the node's: a
                // binding reads a value on the operator's side and names
                // where it goes, which an image must not choose.
                if let Source::ImagePolicy { .. } = source {
                    return Err(bad(
                        "an image's policy may not bind secrets: the binding says which of \
                         the node's values goes where"
                            .to_owned(),
                    ));
                }
                let text = list(value)?;
                if !text.is_empty() {
                    let binding = SecretBinding::parse(&text).map_err(|e| bad(e.to_string()))?;
                    if self.secrets.iter().any(|b| b.name == binding.name) {
                        return Err(bad(format!("the secret {} is bound twice", binding.name)));
                    }
                    self.secrets.push(binding);
                }
            }
            Setting::Observe => {
                let on = match value {
                    Value::Text(text) => match text.trim() {
                        "" => return Ok(()),
                        "true" | "1" | "yes" => true,
                        "false" | "0" | "no" => false,
                        other => {
                            return Err(bad(format!("expected true or false, found {other:?}")));
                        }
                    },
                    Value::Integer(_) => {
                        return Err(bad("expected true or false, found a number".to_owned()));
                    }
                };
                // An image's policy may not turn the grants off.
                if on && let Source::ImagePolicy { .. } = source {
                    return Err(bad(
                        "an image's policy may not turn on observe mode: it would let \
                         through what the grants refuse"
                            .to_owned(),
                    ));
                }
                self.policy = std::mem::take(&mut self.policy).observing(on);
            }
            Setting::Audit => match value {
                Value::Text(text) if text.trim().is_empty() => {}
                Value::Text(text) => self.audit = Some(Destination::parse(text.trim())),
                Value::Integer(_) => {
                    return Err(bad("expected a file's path, found a number".to_owned()));
                }
            },
            // The bounds a server may turn off, with `none`: the minimum
            // body rate (for clients known to send slower than any rate)
            // and a client's rate of records (behind a reverse proxy,
            // every client is one address).
            rate @ (Setting::MinHttpBodyRate | Setting::MaxAuditRatePerClient) if matches!(value, Value::Text(text) if text.trim() == "none") =>
            {
                self.limits
                    .set(rate, Bound::Unbounded)
                    .map_err(|e| bad(e.to_string()))?;
            }
            bound => {
                let read = match bound.kind() {
                    Kind::Count => values::count(value).map(Bound::Count),
                    Kind::Size => values::size(value).map(Bound::Size),
                    Kind::Duration => values::duration(value).map(Bound::Duration),
                    Kind::Grant | Kind::Deny | Kind::File | Kind::Secret | Kind::Switch => {
                        unreachable!("{bound:?} is a bound: the arms above take the rest")
                    }
                };
                // A value of the setting's own kind, read above: `set`
                // takes it.
                self.limits
                    .set(bound, read.map_err(bad)?)
                    .map_err(|e| bad(e.to_string()))?;
            }
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
        let observe = self.policy.observes() || later.policy.observes();
        let mut policy = self.policy.observing(observe);
        for capability in [Capability::Connect, Capability::Listen] {
            let granted = policy
                .grant(capability)
                .clone()
                .union(later.policy.grant(capability).clone());
            policy = policy
                .with_grant(capability, granted)
                .with_denied(capability, later.policy.denied(capability).clone());
        }
        // The bounds `later` set replace these; the rest stay.
        let mut limits = self.limits;
        for a in &later.applied {
            if let Some(bound) = later.limits.get(a.setting) {
                // Read from a Limits, so of the setting's kind.
                let _ = limits.set(a.setting, bound);
            }
        }
        let mut applied = self.applied;
        applied.extend(later.applied);
        // A name `later` binds is bound as `later` says.
        let mut secrets = self.secrets;
        secrets.retain(|b| later.secrets.iter().all(|l| l.name != b.name));
        secrets.extend(later.secrets);
        Settings {
            policy,
            limits,
            audit: later.audit.or(self.audit),
            secrets,
            applied,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Host;
    use std::time::Duration;

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
        assert_eq!(s.limits.max_memory, 64 << 20);
        assert_eq!(s.limits.timeout, Some(Duration::from_secs(30)));
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
                    Kind::Grant | Kind::Deny | Kind::Secret | Kind::Switch => {
                        s.set(&origin, setting, "").unwrap()
                    }
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
            assert_eq!(s.limits.max_memory, 64 << 20);
            assert_eq!(s.limits.lookup_timeout, Duration::from_secs(2));
        }
    }

    /// A secret's binding reads the same from a flag and a policy file;
    /// a name is bound once; an image's policy binds none; a later
    /// binding of a name replaces the earlier one.
    #[test]
    fn a_secret_is_bound_once_and_never_by_an_image() {
        let spec = "API_KEY;from=env:K;to=https://api.example.com/v1/;header=authorization;\
                    form=Bearer {}";
        let mut flags = Settings::new();
        flags.set(&Origin::Flag, Setting::Secret, spec).unwrap();
        assert_eq!(flags.secrets.len(), 1);
        assert_eq!(flags.secrets[0].host, host("api.example.com"));
        let e = flags.set(&Origin::Flag, Setting::Secret, spec).unwrap_err();
        assert_eq!(e.reason, "the secret API_KEY is bound twice");
        let e = flags
            .set(&Origin::Flag, Setting::Secret, "API_KEY;from=env:K")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--secret=API_KEY;from=env:K: to= is missing"),
            "{e}"
        );

        let text = format!("secret = [\"{spec}\"]\n");
        let file = PolicyFile::parse(&text, std::path::Path::new("moat.toml")).unwrap();
        let from_file = Settings::from_file(&file).unwrap();
        assert_eq!(from_file.secrets, flags.secrets);
        let e = Settings::from_image_policy(&file, "sha256:00").unwrap_err();
        assert!(
            e.reason.contains("an image's policy may not bind secrets"),
            "{e}"
        );

        let mut later = Settings::new();
        let other = "API_KEY;from=env:OTHER;to=https://b.example/;header=x-key";
        later.set(&Origin::Flag, Setting::Secret, other).unwrap();
        let both = from_file.and(later);
        assert_eq!(both.secrets.len(), 1);
        assert_eq!(both.secrets[0].header, "x-key");
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
        assert_eq!(both.limits.max_sockets, Some(9));
        assert_eq!(both.limits.max_lookups, 3);
    }
}
