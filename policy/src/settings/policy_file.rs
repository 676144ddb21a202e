//! The policy file of `moat run --policy FILE`.
//!
//! The file is TOML with flat keys spelled exactly as the flags of `moat run`
//! without the leading `--` (`allow-net`, `max-memory`, ...). This module only
//! checks the TOML shapes (a list where a list belongs, an integer or a string
//! where a bound does) and remembers the line of every setting and of every
//! list entry; the values are read by [`super::Settings::set`], as every
//! source's are, and its errors point at the same line.
//!
//! The document is read with `toml::de::DeTable`, which keeps byte spans for
//! every key and value; spans are turned into 1-based line numbers here.

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeArray, DeInteger, DeTable, DeValue};

use super::{Origin, SettingError, Value};
use crate::setting::{Kind, Setting};

/// The keys a policy file may hold, in the order `moat run --help` lists
/// the flags. Each is a [`Setting`]'s key.
pub const KEYS: [&str; Setting::ALL.len()] = crate::setting::KEYS;

/// One setting as a policy file wrote it: the value in the form the
/// setting's kind takes, and its line. A list is one statement per entry,
/// each at its own line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Which setting.
    pub setting: Setting,
    /// The 1-based line of the key, or of the list entry.
    pub line: usize,
    written: Written,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Written {
    Text(String),
    Integer(i128),
}

impl Statement {
    /// The value, as [`crate::settings::Settings::set`] takes it.
    pub fn value(&self) -> Value<'_> {
        match &self.written {
            Written::Text(text) => Value::Text(text),
            Written::Integer(n) => Value::Integer(*n),
        }
    }
}

/// A policy file, read: its statements in file order. Only the TOML
/// shapes are checked here (a list where a list belongs, an integer where
/// a count does); the values are read by [`crate::settings::Settings::set`],
/// as every source's are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFile {
    path: PathBuf,
    statements: Vec<Statement>,
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
    /// Syntax errors, unknown keys, wrong types, bad values: always with
    /// file, line (1-based) and key when there is one
    /// ([`Origin::PolicyFile`]).
    #[error(transparent)]
    Invalid(#[from] SettingError),
}

impl PolicyFile {
    /// Parses the text of a policy file; `path` is what its errors name.
    ///
    /// The first problem in file order is reported.
    pub fn parse(text: &str, path: &Path) -> Result<PolicyFile, PolicyFileError> {
        let doc = Doc { text, path };
        let table = DeTable::parse(text).map_err(|e| doc.syntax(&e))?;

        // The table is ordered by key name; sort by position so that the error
        // reported is the first one a reader meets in the file.
        let mut settings: Vec<_> = table.get_ref().iter().collect();
        settings.sort_by_key(|(key, _)| key.span().start);

        let mut statements = Vec::new();
        for (key, value) in settings {
            let name: &str = key.get_ref();
            let line = doc.line(key.span().start);
            let Some(setting) = Setting::from_key(name) else {
                return Err(doc.error(key.span(), name, unknown_key(name, value.get_ref())));
            };
            let one = |written: Written| Statement {
                setting,
                line,
                written,
            };
            match setting.kind() {
                Kind::Grant => statements.extend(grant(&doc, setting, value)?),
                Kind::Deny | Kind::Secret => statements.extend(deny(&doc, setting, value)?),
                Kind::Count => statements.push(one(count(&doc, name, value)?)),
                Kind::Size => statements.push(one(integer_or_text(
                    &doc,
                    name,
                    value,
                    "a size such as \"512MiB\" or an integer number of bytes",
                )?)),
                Kind::Duration => statements.push(one(integer_or_text(
                    &doc,
                    name,
                    value,
                    "a duration such as \"30s\" or an integer number of seconds",
                )?)),
                Kind::File => statements.push(one(path_text(&doc, name, value)?)),
                Kind::Switch => statements.push(one(switch(&doc, name, value)?)),
            }
        }
        Ok(PolicyFile {
            path: path.to_owned(),
            statements,
        })
    }

    /// Reads and parses.
    pub fn read(path: &Path) -> Result<PolicyFile, PolicyFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PolicyFile::parse(&text, path)
    }

    /// The file as its errors name it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its statements, in file order.
    pub fn statements(&self) -> &[Statement] {
        &self.statements
    }
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

    fn origin(&self, offset: usize) -> Origin {
        Origin::PolicyFile {
            path: self.path.to_path_buf(),
            line: self.line(offset),
        }
    }

    fn error(&self, span: Range<usize>, key: &str, reason: impl Into<String>) -> PolicyFileError {
        PolicyFileError::Invalid(SettingError {
            origin: self.origin(span.start),
            key: Some(key.to_owned()),
            value: None,
            reason: reason.into(),
            cause: None,
        })
    }

    fn syntax(&self, e: &toml::de::Error) -> PolicyFileError {
        // toml's errors carry a span in practice; line 1 is the fallback when one does not.
        PolicyFileError::Invalid(SettingError {
            origin: self.origin(e.span().map_or(0, |span| span.start)),
            key: None,
            value: None,
            reason: format!("invalid TOML: {}", e.message().trim_end()),
            cause: None,
        })
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

/// `allow-net` / `allow-listen`: `true` (everything), `false` or an empty
/// list (nothing), or a list of strings, one statement per entry.
fn grant(
    doc: &Doc<'_>,
    setting: Setting,
    value: &Spanned<DeValue<'_>>,
) -> Result<Vec<Statement>, PolicyFileError> {
    let key = setting.key();
    let whole = |text: &str| {
        vec![Statement {
            setting,
            line: doc.line(value.span().start),
            written: Written::Text(text.to_owned()),
        }]
    };
    match value.get_ref() {
        DeValue::Boolean(true) => Ok(whole("*")),
        DeValue::Boolean(false) => Ok(whole("")),
        DeValue::Array(items) if items.is_empty() => Ok(whole("")),
        DeValue::Array(items) => entries(doc, setting, items),
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

/// `deny-net`, `deny-listen` and `secret`: a list of strings, possibly empty.
fn deny(
    doc: &Doc<'_>,
    setting: Setting,
    value: &Spanned<DeValue<'_>>,
) -> Result<Vec<Statement>, PolicyFileError> {
    let key = setting.key();
    match value.get_ref() {
        DeValue::Array(items) => entries(doc, setting, items),
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

/// The entries of a grant or deny list: one non-blank string each, a
/// statement each at its own line.
fn entries(
    doc: &Doc<'_>,
    setting: Setting,
    items: &DeArray<'_>,
) -> Result<Vec<Statement>, PolicyFileError> {
    let key = setting.key();
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
            // string so that each entry has a line of its own to point at. (A
            // secret's binding is one entry on both, and may hold a comma.)
            if s.contains(',') && setting.kind() != Kind::Secret {
                return Err(doc.error(
                    item.span(),
                    key,
                    "one entry per string; split `a,b` into two strings",
                ));
            }
            Ok(Statement {
                setting,
                line: doc.line(item.span().start),
                written: Written::Text(s.to_string()),
            })
        })
        .collect()
}

/// A TOML integer at full precision, saturated to `i128`'s range (the
/// bound's check then says "too large" or "at least 1").
fn integer(int: &DeInteger<'_>) -> i128 {
    i128::from_str_radix(int.as_str(), int.radix()).unwrap_or(if int.as_str().starts_with('-') {
        i128::MIN
    } else {
        i128::MAX
    })
}

/// `observe`: `true` or `false`.
fn switch(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Written, PolicyFileError> {
    match value.get_ref() {
        DeValue::Boolean(on) => Ok(Written::Text(on.to_string())),
        other => Err(doc.error(
            value.span(),
            key,
            format!("expected true or false, found {}", found(other)),
        )),
    }
}

/// `max-*` counts: an integer.
fn count(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Written, PolicyFileError> {
    let reason = match value.get_ref() {
        DeValue::Integer(int) => return Ok(Written::Integer(integer(int))),
        DeValue::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            format!("expected a whole number, found a string: write {s} without quotes")
        }
        other => format!("expected a whole number such as 64, found {}", found(other)),
    };
    Err(doc.error(value.span(), key, reason))
}

/// A size (integer bytes, or a string such as "512MiB") or a duration
/// (integer seconds, or a string such as "30s"): `expected` says which,
/// for the message. A string of digits alone is refused here, where the
/// quotes can be named (a flag's or a variable's `64` has no unit: the
/// settings say so, and add no word about quotes).
fn integer_or_text(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
    expected: &str,
) -> Result<Written, PolicyFileError> {
    match value.get_ref() {
        DeValue::Integer(int) => Ok(Written::Integer(integer(int))),
        DeValue::String(s) if !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit()) => {
            Err(doc.error(
                value.span(),
                key,
                format!(
                    "expected {expected}, found the string \"{s}\" with no unit: add a unit, or write {} without quotes",
                    s.trim()
                ),
            ))
        }
        DeValue::String(s) => Ok(Written::Text(s.to_string())),
        other => Err(doc.error(
            value.span(),
            key,
            format!("expected {expected}, found {}", found(other)),
        )),
    }
}

/// A file's path: a string.
fn path_text(
    doc: &Doc<'_>,
    key: &str,
    value: &Spanned<DeValue<'_>>,
) -> Result<Written, PolicyFileError> {
    match value.get_ref() {
        DeValue::String(s) => Ok(Written::Text(s.to_string())),
        other => Err(doc.error(
            value.span(),
            key,
            format!("expected a file's path as a string, found {}", found(other)),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::limits::Limits;
    use crate::policy::{Capability, Grant, Host};
    use crate::settings::Settings;
    use std::time::Duration;

    fn parse(text: &str) -> Result<PolicyFile, PolicyFileError> {
        PolicyFile::parse(text, Path::new("moat.toml"))
    }

    /// The settings of `text`, read as `moat run --policy` reads them.
    fn settings(text: &str) -> Result<Settings, PolicyFileError> {
        Ok(Settings::from_file(&parse(text)?)?)
    }

    /// The (line, key, reason) of an `Invalid` error; fails the test on anything else.
    fn invalid(text: &str) -> (usize, Option<String>, String) {
        match settings(text) {
            Err(PolicyFileError::Invalid(SettingError {
                origin: Origin::PolicyFile { path, line },
                key,
                reason,
                ..
            })) => {
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

    /// (setting, line) of every statement of `text`.
    fn lines(text: &str) -> Vec<(Setting, usize)> {
        parse(text)
            .unwrap()
            .statements()
            .iter()
            .map(|s| (s.setting, s.line))
            .collect()
    }

    fn max_memory(value: &str) -> Result<u64, (usize, Option<String>, String)> {
        let text = format!("max-memory = {value}\n");
        match settings(&text) {
            Ok(s) => Ok(s.limits.max_memory),
            Err(_) => Err(invalid(&text)),
        }
    }

    fn timeout(value: &str) -> Result<Duration, (usize, Option<String>, String)> {
        let text = format!("timeout = {value}\n");
        match settings(&text) {
            Ok(s) => Ok(s.limits.timeout.unwrap_or_default()),
            Err(_) => Err(invalid(&text)),
        }
    }

    fn host(s: &str) -> Host {
        Host::parse(s).expect("a valid host")
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
max-http-requests = 32
http-connect-timeout = "5s"
http-first-byte-timeout = "20s"
http-between-bytes-timeout = "7s"
max-http-header-size = "32KiB"
max-http-connections = 100
http-header-read-timeout = "3s"
max-http-body-size = "1MiB"
max-instances = 4
http-request-body-timeout = "2s"
http-response-send-timeout = "15s"
max-instances-per-client = 2
max-audit-size = "100MiB"
"#;

    #[test]
    fn full_file() {
        let s = settings(FULL).unwrap();
        assert_eq!(
            s.limits,
            Limits {
                max_sockets: Some(256),
                max_waiting_calls: 100,
                max_memory: 512 << 20,
                max_host_memory: Some(128 << 20),
                timeout: Some(Duration::from_secs(30)),
                max_lookups: 16,
                lookup_timeout: Duration::from_secs(10),
                tls_handshake_timeout: Duration::from_secs(5),
                max_connections: Some(512),
                max_connections_per_peer: Some(64),
                max_http_requests: 32,
                http_connect_timeout: Duration::from_secs(5),
                http_first_byte_timeout: Duration::from_secs(20),
                http_between_bytes_timeout: Duration::from_secs(7),
                max_http_header_size: 32 << 10,
                max_http_connections: 100,
                http_header_read_timeout: Duration::from_secs(3),
                max_http_body_size: 1 << 20,
                max_instances: 4,
                http_request_body_timeout: Duration::from_secs(2),
                http_response_send_timeout: Duration::from_secs(15),
                max_instances_per_client: 2,
                max_audit_size: 100 << 20,
                ..Limits::default()
            }
        );
        let p = &s.policy;
        assert!(
            p.check(Capability::Connect, &host("example.com"), 443)
                .is_ok()
        );
        // Granted by 10.0.0.0/8, denied by `private`.
        assert!(p.check(Capability::Connect, &host("10.1.2.3"), 80).is_err());
        assert!(
            p.check(Capability::Connect, &host("example.org"), 443)
                .is_err()
        );
        assert!(
            p.check(Capability::Listen, &host("127.0.0.1"), 8050)
                .is_ok()
        );
        assert!(p.check(Capability::Listen, &host("::1"), 22).is_err());
        assert_eq!(
            lines(FULL),
            [
                (Setting::AllowNet, 3),
                (Setting::AllowNet, 4),
                (Setting::AllowListen, 6),
                (Setting::DenyNet, 7),
                (Setting::DenyNet, 7),
                (Setting::DenyListen, 8),
                (Setting::MaxSockets, 10),
                (Setting::MaxMemory, 11),
                (Setting::Timeout, 12),
                (Setting::MaxLookups, 13),
                (Setting::LookupTimeout, 14),
                (Setting::TlsHandshakeTimeout, 15),
                (Setting::MaxConnections, 16),
                (Setting::MaxConnectionsPerPeer, 17),
                (Setting::MaxWaitingCalls, 18),
                (Setting::MaxHostMemory, 19),
                (Setting::MaxHttpRequests, 20),
                (Setting::HttpConnectTimeout, 21),
                (Setting::HttpFirstByteTimeout, 22),
                (Setting::HttpBetweenBytesTimeout, 23),
                (Setting::MaxHttpHeaderSize, 24),
                (Setting::MaxHttpConnections, 25),
                (Setting::HttpHeaderReadTimeout, 26),
                (Setting::MaxHttpBodySize, 27),
                (Setting::MaxInstances, 28),
                (Setting::HttpRequestBodyTimeout, 29),
                (Setting::HttpResponseSendTimeout, 30),
                (Setting::MaxInstancesPerClient, 31),
                (Setting::MaxAuditSize, 32),
            ]
        );
    }

    #[test]
    fn comment_only_and_empty_files_set_nothing() {
        assert!(
            parse("# nothing here\n\n  # at all\n")
                .unwrap()
                .statements()
                .is_empty()
        );
        assert!(parse("").unwrap().statements().is_empty());
        assert_eq!(settings("").unwrap(), Settings::new());
    }

    #[test]
    fn grants_true_and_false() {
        let s = settings("allow-net = true\nallow-listen = false\n").unwrap();
        let allowed = s
            .policy
            .decide(Capability::Connect, &Host::parse("any.example").unwrap(), 1)
            .unwrap();
        assert_eq!(allowed.rule.entry, "*");
        assert_eq!(
            allowed.rule.source,
            crate::policy::Source::PolicyFile {
                path: "moat.toml".into(),
                line: 1
            }
        );
        assert_eq!(s.policy.grant(Capability::Listen), &Grant::Nothing);
        assert_eq!(
            lines("allow-net = true\nallow-listen = false\n"),
            [(Setting::AllowNet, 1), (Setting::AllowListen, 2)]
        );
    }

    #[test]
    fn empty_deny_list_is_fine() {
        assert!(parse("deny-net = []\n").unwrap().statements().is_empty());
        assert_eq!(settings("deny-net = []\n").unwrap(), Settings::new());
    }

    #[test]
    fn crlf_line_endings_count_lines() {
        let text = "# c\r\n\r\nmax-sockets = 3\r\n";
        assert_eq!(lines(text), [(Setting::MaxSockets, 3)]);
        assert_eq!(settings(text).unwrap().limits.max_sockets, Some(3));
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
    fn an_empty_allow_list_grants_nothing_as_false_does() {
        let s = settings("\nallow-net = []\nallow-listen = [ ]\n").unwrap();
        assert_eq!(s, Settings::new());
        assert_eq!(s.policy.grant(Capability::Connect), &Grant::Nothing);
        assert_eq!(
            lines("\nallow-net = []\n"),
            [(Setting::AllowNet, 2)],
            "the statement is kept, at its line"
        );
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
        let s = settings("max-sockets = 4294967295\nmax-lookups = 0x10\nmax-connections = 1_000\n")
            .unwrap();
        assert_eq!(s.limits.max_sockets, Some(u32::MAX));
        assert_eq!(s.limits.max_lookups, 16);
        assert_eq!(s.limits.max_connections, Some(1000));
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
        assert!(reason("\"1024\"").contains(
            "found the string \"1024\" with no unit: add a unit, or write 1024 without quotes"
        ));
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
        assert!(reason("\"30\"").contains("with no unit: add a unit, or write 30 without quotes"));
        assert!(reason("\"5 parsecs\"").contains("unknown unit `parsecs`: expected ms, s, m or h"));
        assert!(reason("\"10sec\"").contains("write `s`"));
        assert!(reason("\"2min\"").contains("write `m`"));
        assert!(reason("\"1S\"").contains("write `s`"));
        assert!(reason("\"1d\"").contains("write hours, e.g. \"24h\" for a day"));
        assert!(reason("\"5us\"").contains("the smallest unit is `ms`"));
        assert!(reason("\"1.5s\"").contains("whole numbers only"));
        assert!(reason("\"18446744073709551615h\"").contains("too long"));
        assert!(reason("\"\"").contains("needs a value"));
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
        let error = SettingError {
            origin: Origin::PolicyFile {
                path: PathBuf::from("p.toml"),
                line: 4,
            },
            key: Some("allow-net".to_owned()),
            value: Some("x".to_owned()),
            reason: "bad entry".to_owned(),
            cause: None,
        };
        assert_eq!(error.to_string(), "p.toml:4: allow-net: bad entry");
        let entry = settings("\n\nallow-net = [\n  \"a:1\",\n  \"300.1.1.1:80\",\n]\n")
            .unwrap_err()
            .to_string();
        assert!(entry.starts_with("moat.toml:5: allow-net: "), "{entry}");
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
        let lines_of = |file: &PolicyFile| -> Vec<(Setting, usize)> {
            file.statements()
                .iter()
                .map(|s| (s.setting, s.line))
                .collect()
        };
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
        assert_eq!(lines_of(&file.unwrap()), [(Setting::MaxSockets, 1)]);
    }
}
