//! The settings of moat-policy ([`moat_policy::settings`], all re-exported
//! here) and what they mean for a run of this host: the limits, run
//! options, audit record and defaults they give.

use std::time::Duration;

use crate::audit::SettingRecord;
use crate::net::Limits;
use crate::options::RunOptions;
pub use moat_policy::settings::*;

/// The network limits `bounds` give, defaults where unset.
pub fn limits(bounds: &Bounds) -> Limits {
    let defaults = Limits::default();
    Limits {
        max_sockets: bounds.max_sockets.or(defaults.max_sockets),
        max_waiting_calls: bounds
            .max_waiting_calls
            .unwrap_or(defaults.max_waiting_calls),
        max_lookups: bounds.max_lookups.unwrap_or(defaults.max_lookups),
        lookup_timeout: bounds.lookup_timeout.unwrap_or(defaults.lookup_timeout),
        tls_handshake_timeout: bounds
            .tls_handshake_timeout
            .unwrap_or(defaults.tls_handshake_timeout),
        max_connections: bounds.max_connections,
        max_connections_per_peer: bounds.max_connections_per_peer,
        max_host_memory: bounds
            .max_host_memory
            .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX))
            .or(defaults.max_host_memory),
        max_http_requests: bounds
            .max_http_requests
            .unwrap_or(defaults.max_http_requests),
        http_connect_timeout: bounds
            .http_connect_timeout
            .unwrap_or(defaults.http_connect_timeout),
        http_first_byte_timeout: bounds
            .http_first_byte_timeout
            .unwrap_or(defaults.http_first_byte_timeout),
        http_between_bytes_timeout: bounds
            .http_between_bytes_timeout
            .unwrap_or(defaults.http_between_bytes_timeout),
        max_http_header_size: bounds
            .max_http_header_size
            .map_or(defaults.max_http_header_size, saturating_usize),
        max_http_connections: bounds
            .max_http_connections
            .unwrap_or(defaults.max_http_connections),
        http_header_read_timeout: bounds
            .http_header_read_timeout
            .unwrap_or(defaults.http_header_read_timeout),
        max_http_body_size: bounds
            .max_http_body_size
            .unwrap_or(defaults.max_http_body_size),
        max_instances: bounds.max_instances.unwrap_or(defaults.max_instances),
        http_request_body_timeout: bounds
            .http_request_body_timeout
            .unwrap_or(defaults.http_request_body_timeout),
        http_response_send_timeout: bounds
            .http_response_send_timeout
            .unwrap_or(defaults.http_response_send_timeout),
        max_instances_per_client: bounds
            .max_instances_per_client
            .unwrap_or(defaults.max_instances_per_client),
        ..defaults
    }
}

fn saturating_usize(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// A run under `settings`: their policy, limits, memory bound and time
/// bound; nothing else set yet.
pub fn run_options(settings: &Settings) -> RunOptions {
    let mut options = RunOptions::new(settings.policy.clone()).limits(limits(&settings.bounds));
    if let Some(bytes) = settings.bounds.max_memory {
        options = options.max_memory(bytes);
    }
    if let Some(limit) = settings.bounds.timeout {
        options = options.timeout(limit);
    }
    options
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
/// run has when nothing sets it, `None` for grants and deny lists, which
/// are empty.
pub fn default_of(setting: Setting) -> Option<String> {
    let limits = Limits::default();
    let count = |n: Option<u32>| Some(n.map_or_else(|| "none".to_owned(), |n| n.to_string()));
    let size = |bytes: u64| Some(size_text(bytes));
    let duration = |d: Duration| Some(duration_text(d));
    match setting {
        Setting::AllowNet | Setting::AllowListen | Setting::DenyNet | Setting::DenyListen => None,
        Setting::MaxSockets => count(limits.max_sockets),
        Setting::MaxWaitingCalls => count(Some(limits.max_waiting_calls)),
        Setting::MaxMemory => size(crate::bounds::DEFAULT_MAX_MEMORY),
        Setting::MaxHostMemory => limits
            .max_host_memory
            .map_or(Some("none".to_owned()), |b| size(b as u64)),
        Setting::Timeout => Some("none".to_owned()),
        Setting::MaxLookups => count(Some(limits.max_lookups)),
        Setting::LookupTimeout => duration(limits.lookup_timeout),
        Setting::TlsHandshakeTimeout => duration(limits.tls_handshake_timeout),
        Setting::MaxConnections => count(limits.max_connections),
        Setting::MaxConnectionsPerPeer => count(limits.max_connections_per_peer),
        Setting::MaxHttpRequests => count(Some(limits.max_http_requests)),
        Setting::HttpConnectTimeout => duration(limits.http_connect_timeout),
        Setting::HttpFirstByteTimeout => duration(limits.http_first_byte_timeout),
        Setting::HttpBetweenBytesTimeout => duration(limits.http_between_bytes_timeout),
        Setting::MaxHttpHeaderSize => size(limits.max_http_header_size as u64),
        Setting::MaxHttpConnections => count(Some(limits.max_http_connections)),
        Setting::HttpHeaderReadTimeout => duration(limits.http_header_read_timeout),
        Setting::MaxHttpBodySize => size(limits.max_http_body_size),
        Setting::MaxInstances => count(Some(limits.max_instances)),
        Setting::HttpRequestBodyTimeout => duration(limits.http_request_body_timeout),
        Setting::HttpResponseSendTimeout => duration(limits.http_response_send_timeout),
        Setting::MaxInstancesPerClient => count(Some(limits.max_instances_per_client)),
        Setting::Audit => None,
        Setting::MaxAuditSize => size(crate::audit::DEFAULT_MAX_AUDIT_SIZE),
    }
}

/// `bytes` in the largest unit that divides it (`512MiB`).
fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// `d` in the largest unit that divides it (`15s`).
fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, per) in [("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms >= per && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
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
        assert_eq!(size_text(1536), "1536B");
        assert_eq!(duration_text(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn bounds_give_limits_with_defaults_where_unset() {
        let mut s = Settings::new();
        s.set(&Origin::Flag, Setting::MaxSockets, "9").unwrap();
        s.set(&Origin::Flag, Setting::MaxHttpHeaderSize, "32KiB")
            .unwrap();
        let limits = limits(&s.bounds);
        assert_eq!(limits.max_sockets, Some(9));
        assert_eq!(limits.max_http_header_size, 32 << 10);
        assert_eq!(limits.max_lookups, Limits::default().max_lookups);
    }
}
