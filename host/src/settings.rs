//! The settings of moat-policy ([`moat_policy::settings`], all re-exported
//! here) and what they mean for a run of this host: the limits, run
//! options, audit record and defaults they give.

use crate::audit::SettingRecord;
use crate::net::Limits;
use crate::options::RunOptions;
pub use moat_policy::settings::*;

/// A run under `settings`: their policy, limits, memory bound and time
/// bound, its denial lines on the guest's stderr (as `moat run` and the
/// shim show them); nothing else set yet.
pub fn run_options(settings: &Settings) -> RunOptions {
    RunOptions::new(settings.policy.clone())
        .limits(settings.limits.clone())
        .notices_on_guest_stderr()
}

/// The run of a process that runs this one guest (`moat run`, the
/// containerd shim), from the settings as the front `words` writes them
/// (the command line's flags, the pod spec's variables): [`run_options`],
/// its refusals shown in those words, and the process's descriptor limit
/// set to what the bounds need ([`crate::descriptors::limit_to`]; a
/// failure to set it is logged, the run goes on under the limit it has).
/// An embedder that runs many guests in one process calls [`run_options`]
/// and sets its own limit.
pub fn one_guest_process(settings: &Settings, words: Spelling) -> RunOptions {
    if let Err(e) = crate::descriptors::limit_to(&settings.limits) {
        tracing::warn!("cannot set the descriptor limit the bounds need: {e}");
    }
    RunOptions::new(settings.policy.clone().spelled(words))
        .limits(settings.limits.clone())
        .notices_on_guest_stderr()
}

/// Whose defaults the bounds have: most are the same for both commands,
/// but `--timeout` bounds a whole run of `moat run` (none by default) and
/// each request of `moat serve` (60 s by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defaults {
    /// `moat run`: a command to its end.
    Run,
    /// `moat serve`: an instance per request.
    Serve,
}

impl Defaults {
    /// The bounds when nothing sets them.
    pub fn limits(self) -> Limits {
        match self {
            Defaults::Run => Limits::default(),
            Defaults::Serve => Limits {
                timeout: Some(crate::serve::DEFAULT_REQUEST_TIMEOUT),
                ..Limits::default()
            },
        }
    }
}

/// Every setting of a run under `settings`, for the audit trail's first
/// record: each statement that set something with its source, then each
/// bound no statement set, at its default in `defaults`.
pub fn audited(settings: &Settings, defaults: Defaults) -> Vec<SettingRecord> {
    let mut records: Vec<_> = settings
        .applied
        .iter()
        .map(|a| SettingRecord {
            setting: a.setting.key(),
            value: a.value.clone(),
            source: Some(a.source.clone()),
        })
        .collect();
    for setting in Setting::ALL {
        if settings.applied.iter().any(|a| a.setting == setting) {
            continue;
        }
        if let Some(default) = default_of(setting, defaults) {
            records.push(SettingRecord {
                setting: setting.key(),
                value: default,
                source: None,
            });
        }
    }
    records
}

/// The default of `setting` in `defaults`, as its command's `--help` prints it: the
/// value it has when nothing sets it, `None` for grants, deny lists and
/// the audit trail's destination, which are empty.
pub fn default_of(setting: Setting, defaults: Defaults) -> Option<String> {
    defaults
        .limits()
        .get(setting)
        .map(|bound| bound.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_runs_own() {
        let run = Defaults::Run;
        assert_eq!(
            default_of(Setting::MaxSockets, run).as_deref(),
            Some("1024")
        );
        assert_eq!(
            default_of(Setting::MaxMemory, run).as_deref(),
            Some("512MiB")
        );
        assert_eq!(
            default_of(Setting::MaxHostMemory, run).as_deref(),
            Some("64MiB")
        );
        assert_eq!(
            default_of(Setting::LookupTimeout, run).as_deref(),
            Some("15s")
        );
        assert_eq!(default_of(Setting::Timeout, run).as_deref(), Some("none"));
        assert_eq!(default_of(Setting::AllowNet, run), None);
        // A request's timeout is moat serve's own.
        let serve = Defaults::Serve;
        assert_eq!(default_of(Setting::Timeout, serve).as_deref(), Some("1m"));
        assert_eq!(
            default_of(Setting::MaxSockets, serve).as_deref(),
            Some("1024")
        );
    }

    #[test]
    fn bounds_give_limits_with_defaults_where_unset() {
        let mut s = Settings::new();
        s.set(&Origin::Flag, Setting::MaxSockets, "9").unwrap();
        s.set(&Origin::Flag, Setting::MaxHttpHeaderSize, "32KiB")
            .unwrap();
        let limits = s.limits;
        assert_eq!(limits.max_sockets, Some(9));
        assert_eq!(limits.max_http_header_size, 32 << 10);
        assert_eq!(limits.max_lookups, Limits::default().max_lookups);
    }
}
