//! The settings of moat-policy ([`moat_policy::settings`], all re-exported
//! here) and what they mean for a run of this host: the limits, run
//! options, audit record and defaults they give.

use crate::audit::SettingRecord;
use crate::net::Limits;
use crate::options::RunOptions;
pub use moat_policy::settings::*;

/// A run under `settings`: their policy, limits, memory bound and time
/// bound; nothing else set yet.
pub fn run_options(settings: &Settings) -> RunOptions {
    RunOptions::new(settings.policy.clone()).limits(settings.limits.clone())
}

/// Every setting of a run under `settings`, for the audit trail's first
/// record: each statement that set something with its source, then each
/// bound no statement set, at its default.
pub fn audited(settings: &Settings) -> Vec<SettingRecord> {
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
        if let Some(default) = default_of(setting) {
            records.push(SettingRecord {
                setting: setting.key(),
                value: default,
                source: None,
            });
        }
    }
    records
}

/// The default of `setting` as `moat run --help` prints it: the value a
/// run has when nothing sets it, `None` for grants, deny lists and the
/// audit trail's destination, which are empty.
pub fn default_of(setting: Setting) -> Option<String> {
    Limits::default()
        .get(setting)
        .map(|bound| bound.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_runs_own() {
        assert_eq!(default_of(Setting::MaxSockets).as_deref(), Some("1024"));
        assert_eq!(default_of(Setting::MaxMemory).as_deref(), Some("512MiB"));
        assert_eq!(default_of(Setting::MaxHostMemory).as_deref(), Some("64MiB"));
        assert_eq!(default_of(Setting::LookupTimeout).as_deref(), Some("15s"));
        assert_eq!(default_of(Setting::Timeout).as_deref(), Some("none"));
        assert_eq!(default_of(Setting::AllowNet), None);
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
