//! The policy file of `moat run --policy FILE`.
//!
//! The file is TOML with flat keys spelled exactly as the flags of `moat run`
//! without the leading `--` (`allow-net`, `max-memory`, ...). This module only
//! checks shapes, types and ranges, and remembers the line of every setting and
//! of every list entry, so that whoever validates the entries afterwards (the
//! grant syntax has its own parser elsewhere) can point at the same line.
//!
//! The document is read with `toml::de::DeTable`, which keeps byte spans for
//! every key and value; spans are turned into 1-based line numbers here.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeArray, DeInteger, DeTable, DeValue};

/// The keys a policy file may hold, in the order `moat run --help` lists the flags.
/// Each is a [`crate::setting::Setting`]'s key.
pub const KEYS: [&str; 14] = crate::setting::KEYS;

/// One setting's value and the 1-based line it was written on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct At<T> {
    /// The value as parsed.
    pub value: T,
    /// The 1-based line of the key (for a setting) or of the entry (for a list entry).
    pub line: usize,
}

/// A grant as written: `true` (everything), `false` (nothing) or a list of entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantSpec {
    /// `true`: every address is granted.
    Everything,
    /// `false`: no address is granted.
    Nothing,
    /// A non-empty list of entries, each with its own line; the entries are not parsed here.
    Entries(Vec<At<String>>),
}

/// The settings of a policy file; a key that the file leaves out is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyFile {
    /// `allow-net`: what the guest may connect to.
    pub allow_net: Option<At<GrantSpec>>,
    /// `allow-listen`: where the guest may listen.
    pub allow_listen: Option<At<GrantSpec>>,
    /// `deny-net`: exceptions to `allow-net`; may be empty.
    pub deny_net: Option<At<Vec<At<String>>>>,
    /// `deny-listen`: exceptions to `allow-listen`; may be empty.
    pub deny_listen: Option<At<Vec<At<String>>>>,
    /// `max-sockets`: at least 1.
    pub max_sockets: Option<At<u32>>,
    /// `max-waiting-calls`: UDP receives, accepts and lookups waiting at once.
    pub max_waiting_calls: Option<At<u32>>,
    /// `max-memory` in bytes: at least 1.
    pub max_memory: Option<At<u64>>,
    /// `max-host-memory` in bytes: at least 1.
    pub max_host_memory: Option<At<u64>>,
    /// `timeout`: longer than zero.
    pub timeout: Option<At<Duration>>,
    /// `max-lookups`: at least 1.
    pub max_lookups: Option<At<u32>>,
    /// `lookup-timeout`: longer than zero.
    pub lookup_timeout: Option<At<Duration>>,
    /// `tls-handshake-timeout`: longer than zero.
    pub tls_handshake_timeout: Option<At<Duration>>,
    /// `max-connections` (per listener): at least 1.
    pub max_connections: Option<At<u32>>,
    /// `max-connections-per-peer`: at least 1.
    pub max_connections_per_peer: Option<At<u32>>,
}

/// Why a policy file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyFileError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file as named by the caller.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Syntax errors, unknown keys, wrong types, bad values: always with file,
    /// line (1-based) and key when there is one.
    #[error("{}:{line}: {}{reason}", .path.display(), KeyPrefix(.key.as_deref()))]
    Invalid {
        /// The file as named by the caller.
        path: PathBuf,
        /// The 1-based line of the problem.
        line: usize,
        /// The key concerned; `None` for TOML syntax errors.
        key: Option<String>,
        /// What is wrong and, where it helps, what to write instead.
        reason: String,
    },
}

impl PolicyFileError {
    /// A [`PolicyFileError::Invalid`] for `key` on `line`, for callers that
    /// validate entries afterwards and need the same error shape.
    pub fn at(path: &Path, line: usize, key: &str, reason: impl Into<String>) -> PolicyFileError {
        PolicyFileError::Invalid {
            path: path.to_path_buf(),
            line,
            key: Some(key.to_owned()),
            reason: reason.into(),
        }
    }
}

/// Writes `key: ` before the reason when there is a key, nothing otherwise.
struct KeyPrefix<'a>(Option<&'a str>);

impl fmt::Display for KeyPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(key) => write!(f, "{key}: "),
            None => Ok(()),
        }
    }
}

impl PolicyFile {
    /// Parses the text of a policy file; `path` is only used in errors.
    ///
    /// The first problem in file order is reported.
    pub fn parse(text: &str, path: &Path) -> Result<PolicyFile, PolicyFileError> {
        let doc = Doc { text, path };
        let table = DeTable::parse(text).map_err(|e| doc.syntax(&e))?;

        // The table is ordered by key name; sort by position so that the error
        // reported is the first one a reader meets in the file.
        let mut settings: Vec<_> = table.get_ref().iter().collect();
        settings.sort_by_key(|(key, _)| key.span().start);

        let mut file = PolicyFile::default();
        for (key, value) in settings {
            let name: &str = key.get_ref();
            let line = doc.line(key.span().start);
            match name {
                "allow-net" => file.allow_net = Some(at_line(grant(&doc, name, value)?, line)),
                "allow-listen" => {
                    file.allow_listen = Some(at_line(grant(&doc, name, value)?, line))
                }
                "deny-net" => file.deny_net = Some(at_line(deny(&doc, name, value)?, line)),
                "deny-listen" => file.deny_listen = Some(at_line(deny(&doc, name, value)?, line)),
                "max-sockets" => file.max_sockets = Some(at_line(count(&doc, name, value)?, line)),
                "max-waiting-calls" => {
                    file.max_waiting_calls = Some(at_line(count(&doc, name, value)?, line));
                }
                "max-memory" => file.max_memory = Some(at_line(size(&doc, name, value)?, line)),
                "max-host-memory" => {
                    file.max_host_memory = Some(at_line(size(&doc, name, value)?, line));
                }
                "timeout" => file.timeout = Some(at_line(duration(&doc, name, value)?, line)),
                "max-lookups" => file.max_lookups = Some(at_line(count(&doc, name, value)?, line)),
                "lookup-timeout" => {
                    file.lookup_timeout = Some(at_line(duration(&doc, name, value)?, line));
                }
                "tls-handshake-timeout" => {
                    file.tls_handshake_timeout = Some(at_line(duration(&doc, name, value)?, line));
                }
                "max-connections" => {
                    file.max_connections = Some(at_line(count(&doc, name, value)?, line));
                }
                "max-connections-per-peer" => {
                    file.max_connections_per_peer = Some(at_line(count(&doc, name, value)?, line));
                }
                _ => return Err(doc.error(key.span(), name, unknown_key(name, value.get_ref()))),
            }
        }
        Ok(file)
    }

    /// Reads and parses.
    pub fn read(path: &Path) -> Result<PolicyFile, PolicyFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PolicyFile::parse(&text, path)
    }
}

/// Pairs a value with its line (a closure cannot be generic over the value's type).
fn at_line<T>(value: T, line: usize) -> At<T> {
    At { value, line }
}

/// The text being parsed and its name, to turn spans into errors.
struct Doc<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Doc<'_> {
    /// The 1-based line holding byte `offset`.
    fn line(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        let newlines = self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        newlines + 1
    }

    fn error(&self, span: Range<usize>, key: &str, reason: impl Into<String>) -> PolicyFileError {
        PolicyFileError::at(self.path, self.line(span.start), key, reason)
    }

    fn syntax(&self, e: &toml::de::Error) -> PolicyFileError {
        // toml's errors carry a span in practice; line 1 is the fallback when one does not.
        let line = e.span().map_or(1, |span| self.line(span.start));
        PolicyFileError::Invalid {
            path: self.path.to_path_buf(),
            line,
            key: None,
            reason: format!("invalid TOML: {}", e.message().trim_end()),
        }
    }
}

/// The reason for a key that is not one of [`KEYS`].
fn unknown_key(name: &str, value: &DeValue<'_>) -> String {
    let expected = KEYS.join(", ");
    let is_tables = match value {
        DeValue::Table(_) => true,
        DeValue::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|i| matches!(i.get_ref(), DeValue::Table(_)))
        }
        _ => false,
    };
    if is_tables {
        // `[net]`, `[[net]]` and `net.x = ...` all land here: the file has no tables.
        return format!(
            "unknown key; a policy file has no tables: write the flat keys at the top of the \
             file, before any `[table]` (expected one of: {expected})"
        );
    }
    match closest_key(name) {
        Some(near) => format!("unknown key (did you mean `{near}`?); expected one of: {expected}"),
        None => format!("unknown key; expected one of: {expected}"),
    }
}

/// The known key nearest to `name` when it looks like a typo of it.
fn closest_key(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase().replace('_', "-");
    KEYS.iter()
        .map(|&key| (edit_distance(&name, key), key))
        .filter(|&(distance, _)| distance <= 2)
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, key)| key)
}

/// Levenshtein distance over chars; the inputs are short keys.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// How a value's type is named in errors.
fn found(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    }
}

/// `allow-net` / `allow-listen`: `true`, `false` or a non-empty list of strings.
fn grant(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<GrantSpec, PolicyFileError> {
    match value.get_ref() {
        DeValue::Boolean(true) => Ok(GrantSpec::Everything),
        DeValue::Boolean(false) => Ok(GrantSpec::Nothing),
        DeValue::Array(items) if items.is_empty() => Err(doc.error(
            value.span(),
            key,
            "an empty list allows nothing: write `false`, or leave the key out",
        )),
        DeValue::Array(items) => Ok(GrantSpec::Entries(entries(doc, key, items)?)),
        DeValue::String(s) => Err(doc.error(
            value.span(),
            key,
            format!("expected `true`, `false` or a list of strings: write [{s:?}] for one entry"),
        )),
        other => Err(doc.error(
            value.span(),
            key,
            format!(
                "expected `true`, `false` or a list of strings such as [\"example.com:443\"], found {}",
                found(other)
            ),
        )),
    }
}

/// `deny-net` / `deny-listen`: a list of strings, possibly empty.
fn deny(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Vec<At<String>>, PolicyFileError> {
    match value.get_ref() {
        DeValue::Array(items) => entries(doc, key, items),
        DeValue::String(s) => Err(doc.error(
            value.span(),
            key,
            format!("expected a list of strings: write [{s:?}] for one entry"),
        )),
        other => Err(doc.error(
            value.span(),
            key,
            format!(
                "expected a list of strings such as [\"private\"], found {}",
                found(other)
            ),
        )),
    }
}

/// The entries of a grant or deny list: one non-blank string each, with its own line.
fn entries(
    doc: &Doc<'_>,
    key: &str,
    items: &DeArray<'_>,
) -> Result<Vec<At<String>>, PolicyFileError> {
    items
        .iter()
        .map(|item| {
            let DeValue::String(s) = item.get_ref() else {
                return Err(doc.error(
                    item.span(),
                    key,
                    format!(
                        "each entry must be a string, found {}",
                        found(item.get_ref())
                    ),
                ));
            };
            if s.trim().is_empty() {
                return Err(doc.error(item.span(), key, "an entry is empty"));
            }
            // The flags take comma-separated lists; the file takes one entry per
            // string so that each entry has a line of its own to point at.
            if s.contains(',') {
                return Err(doc.error(
                    item.span(),
                    key,
                    "one entry per string; split `a,b` into two strings",
                ));
            }
            Ok(At {
                value: s.to_string(),
                line: doc.line(item.span().start),
            })
        })
        .collect()
}

/// A TOML integer at full precision; `None` when it does not fit an `i128`.
fn integer(int: &DeInteger<'_>) -> Option<i128> {
    i128::from_str_radix(int.as_str(), int.radix()).ok()
}

/// Checks a TOML integer against `1..=max`; `what` names the unit in messages.
fn positive(int: &DeInteger<'_>, max: u64, what: &str) -> Result<u64, String> {
    let too_large = || format!("too large: at most {max}");
    match integer(int) {
        Some(n) if n < 1 => Err(format!("must be at least 1{what}, found {n}")),
        Some(n) => u64::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(too_large),
        None if int.as_str().starts_with('-') => Err(format!("must be at least 1{what}")),
        None => Err(too_large()),
    }
}

/// `max-*` counts: an integer in `1..=u32::MAX`.
fn count(doc: &Doc<'_>, key: &str, value: &Spanned<DeValue<'_>>) -> Result<u32, PolicyFileError> {
    let reason = match value.get_ref() {
        DeValue::Integer(int) => match positive(int, u64::from(u32::MAX), "") {
            // `positive` bounded it by u32::MAX, so the conversion holds.
            Ok(n) => {
                return u32::try_from(n).map_err(|_| doc.error(value.span(), key, "too large"));
            }
            Err(reason) => reason,
        },
        DeValue::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            format!("expected a whole number, found a string: write {s} without quotes")
        }
        other => format!("expected a whole number such as 64, found {}", found(other)),
    };
    Err(doc.error(value.span(), key, reason))
}

/// `max-memory` and `max-host-memory`: integer bytes, or a string such as "512MiB".
fn size(doc: &Doc<'_>, key: &str, value: &Spanned<DeValue<'_>>) -> Result<u64, PolicyFileError> {
    let parsed = match value.get_ref() {
        DeValue::Integer(int) => positive(int, u64::MAX, " byte"),
        DeValue::String(s) => parse_size(s),
        other => Err(format!(
            "expected a size such as \"512MiB\" or an integer number of bytes, found {}",
            found(other)
        )),
    };
    parsed.map_err(|reason| doc.error(value.span(), key, reason))
}

/// `timeout` and friends: integer seconds, or a string such as "500ms" or "30s".
fn duration(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Duration, PolicyFileError> {
    let parsed = match value.get_ref() {
        DeValue::Integer(int) => positive(int, u64::MAX, " second").map(Duration::from_secs),
        DeValue::String(s) => parse_duration(s),
        other => Err(format!(
            "expected a duration such as \"30s\" or an integer number of seconds, found {}",
            found(other)
        )),
    };
    parsed.map_err(|reason| doc.error(value.span(), key, reason))
}

/// Splits "<digits><unit>" (one space allowed between) into the number and the unit.
fn number_and_unit<'s>(s: &'s str, example: &str) -> Result<(u64, &'s str), String> {
    let s = s.trim();
    if s.starts_with('-') {
        return Err(format!("must not be negative, found {s:?}"));
    }
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!(
            "expected a number followed by a unit, such as {example:?}, found {s:?}"
        ));
    }
    if rest.starts_with('.') {
        return Err(format!(
            "{s:?}: whole numbers only; for a fraction use a smaller unit"
        ));
    }
    let number = digits
        .parse::<u64>()
        .map_err(|_| format!("{s:?}: the number is too large"))?;
    Ok((number, rest.trim_start()))
}

/// Parses a size string: a whole number and exactly one of B, KiB, MiB, GiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    const UNITS: &str = "B, KiB, MiB or GiB";
    let (number, unit) = number_and_unit(s, "512MiB")?;
    let multiplier: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "" => {
            return Err(format!(
                "{s:?} has no unit: add one of {UNITS}, or write the bytes as an integer without quotes"
            ));
        }
        _ => return Err(size_unit_hint(s, unit, UNITS)),
    };
    let bytes = number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{s:?} is too large: at most {} bytes", u64::MAX))?;
    if bytes == 0 {
        return Err(format!("must be at least 1 byte, found {s:?}"));
    }
    Ok(bytes)
}

/// Explains a size unit that is not accepted, pointing at the binary unit meant.
fn size_unit_hint(s: &str, unit: &str, units: &str) -> String {
    let binary = match unit.to_ascii_lowercase().as_str() {
        "b" | "byte" | "bytes" => Some("B"),
        "k" | "kb" | "kib" => Some("KiB"),
        "m" | "mb" | "mib" => Some("MiB"),
        "g" | "gb" | "gib" => Some("GiB"),
        _ => None,
    };
    match binary {
        // Decimal (KB = 1000) and binary (KiB = 1024) readings of `KB` differ;
        // only the unambiguous binary spelling is accepted.
        Some(binary) => format!("{s:?}: unit `{unit}` is not accepted: write `{binary}`"),
        None => format!("{s:?}: unknown unit `{unit}`: expected {units}"),
    }
}

/// Parses a duration string: a whole number and exactly one of ms, s, m, h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    const UNITS: &str = "ms, s, m or h";
    let (number, unit) = number_and_unit(s, "30s")?;
    let too_large = || format!("{s:?} is too long");
    let duration = match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.checked_mul(60).ok_or_else(too_large)?),
        "h" => Duration::from_secs(number.checked_mul(3600).ok_or_else(too_large)?),
        "" => {
            return Err(format!(
                "{s:?} has no unit: add one of {UNITS}, or write seconds as an integer without quotes"
            ));
        }
        _ => return Err(duration_unit_hint(s, unit, UNITS)),
    };
    if duration.is_zero() {
        return Err(format!("must be longer than 0, found {s:?}"));
    }
    Ok(duration)
}

/// Explains a duration unit that is not accepted, pointing at the accepted spelling.
fn duration_unit_hint(s: &str, unit: &str, units: &str) -> String {
    let advice = match unit.to_ascii_lowercase().as_str() {
        "ms" | "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => "write `ms`",
        "s" | "sec" | "secs" | "second" | "seconds" => "write `s`",
        "m" | "min" | "mins" | "minute" | "minutes" => "write `m`",
        "h" | "hr" | "hrs" | "hour" | "hours" => "write `h`",
        "d" | "day" | "days" => "write hours, e.g. \"24h\" for a day",
        "us" | "µs" | "ns" => "the smallest unit is `ms`",
        _ => return format!("{s:?}: unknown unit `{unit}`: expected {units}"),
    };
    format!("{s:?}: unit `{unit}` is not accepted: {advice}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PolicyFile, PolicyFileError> {
        PolicyFile::parse(text, Path::new("moat.toml"))
    }

    /// The (line, key, reason) of an `Invalid` error; fails the test on anything else.
    fn invalid(text: &str) -> (usize, Option<String>, String) {
        match parse(text) {
            Err(PolicyFileError::Invalid {
                line,
                key,
                reason,
                path,
            }) => {
                assert_eq!(path, Path::new("moat.toml"));
                (line, key, reason)
            }
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    /// Asserts the error is on `line`, names `key`, and its reason contains `needle`.
    #[track_caller]
    fn assert_invalid(text: &str, line: usize, key: &str, needle: &str) {
        let (got_line, got_key, reason) = invalid(text);
        assert_eq!(got_line, line, "line; reason: {reason}");
        assert_eq!(got_key.as_deref(), Some(key), "key; reason: {reason}");
        assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
    }

    fn entry(value: &str, line: usize) -> At<String> {
        At {
            value: value.to_owned(),
            line,
        }
    }

    fn max_memory(value: &str) -> Result<u64, (usize, Option<String>, String)> {
        let text = format!("max-memory = {value}\n");
        match parse(&text) {
            Ok(file) => Ok(file.max_memory.map(|at| at.value).unwrap_or_default()),
            Err(_) => Err(invalid(&text)),
        }
    }

    fn timeout(value: &str) -> Result<Duration, (usize, Option<String>, String)> {
        let text = format!("timeout = {value}\n");
        match parse(&text) {
            Ok(file) => Ok(file.timeout.map(|at| at.value).unwrap_or_default()),
            Err(_) => Err(invalid(&text)),
        }
    }

    const FULL: &str = r#"# what the guest may reach and where it may listen
allow-net = [
    "example.com:443",
    "10.0.0.0/8",
]
allow-listen = ["127.0.0.1:8000-8100"]
deny-net = ["private", "metadata"]
deny-listen = ["[::1]:22"]

max-sockets = 256
max-memory = "512MiB"
timeout = "30s"
max-lookups = 16
lookup-timeout = "10s"
tls-handshake-timeout = 5
max-connections = 512
max-connections-per-peer = 64
max-waiting-calls = 100
max-host-memory = "128MiB"
"#;

    #[test]
    fn full_file() {
        let file = parse(FULL).unwrap();
        let expected = PolicyFile {
            allow_net: Some(At {
                value: GrantSpec::Entries(vec![
                    entry("example.com:443", 3),
                    entry("10.0.0.0/8", 4),
                ]),
                line: 2,
            }),
            allow_listen: Some(At {
                value: GrantSpec::Entries(vec![entry("127.0.0.1:8000-8100", 6)]),
                line: 6,
            }),
            deny_net: Some(At {
                value: vec![entry("private", 7), entry("metadata", 7)],
                line: 7,
            }),
            deny_listen: Some(At {
                value: vec![entry("[::1]:22", 8)],
                line: 8,
            }),
            max_sockets: Some(At {
                value: 256,
                line: 10,
            }),
            max_memory: Some(At {
                value: 512 << 20,
                line: 11,
            }),
            max_host_memory: Some(At {
                value: 128 << 20,
                line: 19,
            }),
            timeout: Some(At {
                value: Duration::from_secs(30),
                line: 12,
            }),
            max_lookups: Some(At {
                value: 16,
                line: 13,
            }),
            lookup_timeout: Some(At {
                value: Duration::from_secs(10),
                line: 14,
            }),
            tls_handshake_timeout: Some(At {
                value: Duration::from_secs(5),
                line: 15,
            }),
            max_connections: Some(At {
                value: 512,
                line: 16,
            }),
            max_connections_per_peer: Some(At {
                value: 64,
                line: 17,
            }),
            max_waiting_calls: Some(At {
                value: 100,
                line: 18,
            }),
        };
        assert_eq!(file, expected);
    }

    #[test]
    fn comment_only_and_empty_files_set_nothing() {
        assert_eq!(
            parse("# nothing here\n\n  # at all\n").unwrap(),
            PolicyFile::default()
        );
        assert_eq!(parse("").unwrap(), PolicyFile::default());
    }

    #[test]
    fn grants_true_and_false() {
        let file = parse("allow-net = true\nallow-listen = false\n").unwrap();
        assert_eq!(
            file.allow_net,
            Some(At {
                value: GrantSpec::Everything,
                line: 1
            })
        );
        assert_eq!(
            file.allow_listen,
            Some(At {
                value: GrantSpec::Nothing,
                line: 2
            })
        );
    }

    #[test]
    fn empty_deny_list_is_fine() {
        let file = parse("deny-net = []\n").unwrap();
        assert_eq!(
            file.deny_net,
            Some(At {
                value: vec![],
                line: 1
            })
        );
    }

    #[test]
    fn crlf_line_endings_count_lines() {
        let file = parse("# c\r\n\r\nmax-sockets = 3\r\n").unwrap();
        assert_eq!(file.max_sockets, Some(At { value: 3, line: 3 }));
    }

    #[test]
    fn unknown_key_names_line_key_and_known_keys() {
        let (line, key, reason) = invalid("max-sockets = 1\n\nalow-net = true\n");
        assert_eq!((line, key.as_deref()), (3, Some("alow-net")));
        assert!(reason.contains("did you mean `allow-net`?"), "{reason}");
        assert!(
            reason.contains("expected one of: allow-net, allow-listen, deny-net"),
            "{reason}"
        );
        assert!(reason.contains("max-connections-per-peer"), "{reason}");
        assert_invalid(
            "max_sockets = 1\n",
            1,
            "max_sockets",
            "did you mean `max-sockets`?",
        );
        assert_invalid("colour = 1\n", 1, "colour", "unknown key; expected one of:");
    }

    #[test]
    fn tables_are_unknown_keys() {
        assert_invalid(
            "max-sockets = 1\n[net]\nallow = true\n",
            2,
            "net",
            "no tables",
        );
        assert_invalid("net.allow = true\n", 1, "net", "no tables");
        assert_invalid("\n[[net]]\n", 2, "net", "no tables");
    }

    #[test]
    fn first_problem_in_file_order_is_reported() {
        // "zzz" sorts after "allow-net" but comes first in the file.
        assert_invalid("zzz = 1\nallow-net = 5\n", 1, "zzz", "unknown key");
    }

    #[test]
    fn syntax_errors_have_a_line_and_no_key() {
        let (line, key, reason) = invalid("max-sockets = 1\nallow-net = [\"a\"\n\ntimeout = \n");
        assert_eq!(key, None);
        assert!(reason.starts_with("invalid TOML: "), "{reason}");
        assert!(line >= 2, "line {line}: {reason}");
        let (line, key, _) = invalid("# ok\nmax-sockets = = 3\n");
        assert_eq!((line, key), (2, None));
        let (line, key, reason) = invalid("timeout = \"1s\"\ntimeout = \"2s\"\n");
        assert_eq!((line, key), (2, None), "{reason}");
        assert!(reason.contains("duplicate key"), "{reason}");
    }

    #[test]
    fn wrong_types() {
        assert_invalid(
            "max-sockets = \"ten\"\n",
            1,
            "max-sockets",
            "expected a whole number",
        );
        assert_invalid("max-sockets = \"10\"\n", 1, "max-sockets", "without quotes");
        assert_invalid("\nmax-lookups = 1.5\n", 2, "max-lookups", "found a float");
        assert_invalid(
            "allow-net = 5\n",
            1,
            "allow-net",
            "expected `true`, `false` or a list",
        );
        assert_invalid(
            "allow-listen = \"x:1\"\n",
            1,
            "allow-listen",
            "write [\"x:1\"]",
        );
        assert_invalid("[allow-net]\n", 1, "allow-net", "found a table");
        assert_invalid(
            "deny-net = true\n",
            1,
            "deny-net",
            "expected a list of strings",
        );
        assert_invalid("deny-listen = \"a\"\n", 1, "deny-listen", "write [\"a\"]");
        assert_invalid("max-memory = true\n", 1, "max-memory", "expected a size");
        assert_invalid("timeout = 1.5\n", 1, "timeout", "expected a duration");
        assert_invalid("timeout = 1979-05-27\n", 1, "timeout", "found a date-time");
    }

    #[test]
    fn entry_errors_point_at_the_entry() {
        let text = "deny-net = [\n  \"private\",\n  7,\n]\n";
        assert_invalid(
            text,
            3,
            "deny-net",
            "each entry must be a string, found an integer",
        );
        let text = "allow-net = [\n  \"a:1\",\n  \"b:1,c:1\",\n]\n";
        assert_invalid(
            text,
            3,
            "allow-net",
            "one entry per string; split `a,b` into two strings",
        );
        assert_invalid("allow-net = [\" \"]\n", 1, "allow-net", "empty");
    }

    #[test]
    fn empty_allow_list_is_an_error() {
        assert_invalid(
            "\nallow-net = []\n",
            2,
            "allow-net",
            "an empty list allows nothing: write `false`, or leave the key out",
        );
        assert_invalid("allow-listen = [ ]\n", 1, "allow-listen", "an empty list");
    }

    #[test]
    fn counts_are_bounded() {
        assert_invalid("max-sockets = 0\n", 1, "max-sockets", "must be at least 1");
        assert_invalid(
            "max-connections = -3\n",
            1,
            "max-connections",
            "must be at least 1",
        );
        assert_invalid(
            "max-lookups = 4294967296\n",
            1,
            "max-lookups",
            "too large: at most 4294967295",
        );
        assert_invalid(
            "max-connections-per-peer = 99999999999999999999999999999999999999999\n",
            1,
            "max-connections-per-peer",
            "too large",
        );
        let file = parse("max-sockets = 4294967295\nmax-lookups = 0x10\nmax-connections = 1_000\n")
            .unwrap();
        assert_eq!(file.max_sockets.map(|at| at.value), Some(u32::MAX));
        assert_eq!(file.max_lookups.map(|at| at.value), Some(16));
        assert_eq!(file.max_connections.map(|at| at.value), Some(1000));
    }

    #[test]
    fn sizes() {
        assert_eq!(max_memory("1048576"), Ok(1 << 20));
        assert_eq!(max_memory("\"100B\""), Ok(100));
        assert_eq!(max_memory("\"4KiB\""), Ok(4096));
        assert_eq!(max_memory("\"512MiB\""), Ok(512 << 20));
        assert_eq!(max_memory("\"2 GiB\""), Ok(2 << 30));
        assert_eq!(max_memory("\"16777216GiB\""), Ok(1 << 54));
    }

    #[test]
    fn size_rejects() {
        let reason = |value: &str| match max_memory(value) {
            Err((1, Some(key), reason)) if key == "max-memory" => reason,
            other => panic!("{value}: {other:?}"),
        };
        assert!(reason("\"10 MB\"").contains("unit `MB` is not accepted: write `MiB`"));
        assert!(reason("\"10KB\"").contains("write `KiB`"));
        assert!(reason("\"1G\"").contains("write `GiB`"));
        assert!(reason("\"10mib\"").contains("write `MiB`"));
        assert!(
            reason("\"5 parsecs\"").contains("unknown unit `parsecs`: expected B, KiB, MiB or GiB")
        );
        assert!(reason("\"1024\"").contains("has no unit"));
        assert!(reason("\"1.5GiB\"").contains("whole numbers only"));
        assert!(reason("\"MiB\"").contains("expected a number followed by a unit"));
        assert!(reason("\"-1MiB\"").contains("must not be negative"));
        assert!(reason("\"0MiB\"").contains("must be at least 1 byte"));
        assert!(reason("0").contains("must be at least 1 byte"));
        assert!(reason("-5").contains("must be at least 1 byte"));
        assert!(reason("\"17179869184GiB\"").contains("too large"));
        assert!(reason("\"99999999999999999999999B\"").contains("too large"));
    }

    #[test]
    fn durations() {
        assert_eq!(timeout("\"500ms\""), Ok(Duration::from_millis(500)));
        assert_eq!(timeout("\"30s\""), Ok(Duration::from_secs(30)));
        assert_eq!(timeout("\"5m\""), Ok(Duration::from_secs(300)));
        assert_eq!(timeout("\"1h\""), Ok(Duration::from_secs(3600)));
        assert_eq!(timeout("45"), Ok(Duration::from_secs(45)));
        assert_eq!(timeout("\" 2 s \""), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn duration_rejects() {
        let reason = |value: &str| match timeout(value) {
            Err((1, Some(key), reason)) if key == "timeout" => reason,
            other => panic!("{value}: {other:?}"),
        };
        assert!(reason("0").contains("must be at least 1 second"));
        assert!(reason("-1").contains("must be at least 1 second"));
        assert!(reason("\"0s\"").contains("must be longer than 0"));
        assert!(reason("\"0ms\"").contains("must be longer than 0"));
        assert!(reason("\"30\"").contains("has no unit"));
        assert!(reason("\"5 parsecs\"").contains("unknown unit `parsecs`: expected ms, s, m or h"));
        assert!(reason("\"10sec\"").contains("write `s`"));
        assert!(reason("\"2min\"").contains("write `m`"));
        assert!(reason("\"1S\"").contains("write `s`"));
        assert!(reason("\"1d\"").contains("write hours, e.g. \"24h\" for a day"));
        assert!(reason("\"5us\"").contains("the smallest unit is `ms`"));
        assert!(reason("\"1.5s\"").contains("whole numbers only"));
        assert!(reason("\"18446744073709551615h\"").contains("too long"));
        assert!(reason("\"\"").contains("expected a number followed by a unit"));
    }

    #[test]
    fn other_duration_keys_use_the_same_rules() {
        assert_invalid(
            "\n\nlookup-timeout = \"0s\"\n",
            3,
            "lookup-timeout",
            "longer than 0",
        );
        assert_invalid(
            "tls-handshake-timeout = \"1x\"\n",
            1,
            "tls-handshake-timeout",
            "unknown unit",
        );
    }

    #[test]
    fn display_and_at() {
        let error = PolicyFileError::at(Path::new("p.toml"), 4, "allow-net", "bad entry");
        assert_eq!(error.to_string(), "p.toml:4: allow-net: bad entry");
        let (_, _, _) = invalid("x = [\n");
        let syntax = parse("x = [\n").unwrap_err().to_string();
        assert!(syntax.starts_with("moat.toml:"), "{syntax}");
        assert!(!syntax.contains(": None"), "{syntax}");
        let unknown = parse("\nfoo = 1\n").unwrap_err().to_string();
        assert!(
            unknown.starts_with("moat.toml:2: foo: unknown key"),
            "{unknown}"
        );
    }

    #[test]
    fn read_reports_missing_file_and_parses_existing_one() {
        let missing = Path::new("/nonexistent/moat-policy-test.toml");
        let error = PolicyFile::read(missing).unwrap_err();
        assert!(matches!(error, PolicyFileError::Read { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .starts_with("cannot read /nonexistent/moat-policy-test.toml: ")
        );

        let dir = std::env::temp_dir().join(format!("moat-policyfile-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("moat.toml");
        std::fs::write(&path, "max-sockets = 2\n").unwrap();
        let file = PolicyFile::read(&path);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(file.unwrap().max_sockets, Some(At { value: 2, line: 1 }));
    }
}
