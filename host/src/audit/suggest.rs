//! Grants drafted from a trail (`moat grants suggest`): the narrowest
//! grants under which what the trail shows denied, or let through in
//! observe mode, would have been allowed.
//!
//! Each record of a refusal for want of a grant (`reason.kind` is
//! `no-grant`, `decision` is `denied` or `would-deny`) names the setting
//! that would allow it in its `needs` field, in the words of the run that
//! wrote it (`--allow-net=api.example.com:443`, `MOAT_ALLOW_NET=...`,
//! `Policy::allow_connect("...")`). The draft is those entries, each once
//! with how many refusals it answers, nothing wider: a name as written,
//! its port. Records refused by a deny entry, a bound or a secret are not
//! drafted (no grant would let them through), only counted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;

use moat_policy::setting::{Setting, Spelling};

/// What a trail asks to be granted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Suggestion {
    /// Connect entries (`--allow-net`), each with how many refusals it
    /// answers, in the order of the entries.
    pub connect: BTreeMap<String, u64>,
    /// Listen entries (`--allow-listen`), likewise.
    pub listen: BTreeMap<String, u64>,
    /// Refusals no grant would answer (a deny entry, a bound, a secret).
    pub not_grants: u64,
    /// Lines that were not records of this trail's schema.
    pub unreadable: u64,
}

/// Why a trail could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SuggestError {
    /// Reading failed.
    #[error("reading the trail: {0}")]
    Read(#[from] std::io::Error),
}

impl Suggestion {
    /// The draft of the trail `lines` (JSON Lines, as `--audit` writes
    /// it); with `widen`, names that share a parent and a port (two or
    /// more of them) become one `*.parent:port` entry.
    ///
    /// # Errors
    /// [`SuggestError::Read`] when reading fails; a line that is not a
    /// record is counted in [`unreadable`](Self::unreadable), not an error.
    pub fn from_trail(lines: impl BufRead, widen: bool) -> Result<Suggestion, SuggestError> {
        let mut draft = Suggestion::default();
        for line in lines.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(record) = serde_json::from_str::<serde_json::Value>(&line) else {
                draft.unreadable += 1;
                continue;
            };
            draft.add(&record);
        }
        draft.connect = without_covered(std::mem::take(&mut draft.connect));
        if widen {
            draft.connect = widened(std::mem::take(&mut draft.connect));
            draft.listen = widened(std::mem::take(&mut draft.listen));
        }
        Ok(draft)
    }

    fn add(&mut self, record: &serde_json::Value) {
        let decision = record["decision"].as_str().unwrap_or_default();
        if !matches!(decision, "denied" | "would-deny") {
            return;
        }
        // An HTTP request's own connection is recorded too, naming the
        // same grant: the request's record counts it.
        if record["operation"] == "connect" && record["request"].is_object() {
            return;
        }
        let count = record["count"].as_u64().unwrap_or(1);
        let reason = &record["reason"];
        let needs = reason["needs"].as_str().unwrap_or_default();
        if reason["kind"].as_str() != Some("no-grant") || needs.is_empty() {
            self.not_grants += count;
            return;
        }
        match needed(needs) {
            Some((Setting::AllowListen, entry)) => *self.listen.entry(entry).or_default() += count,
            Some((_, entry)) => *self.connect.entry(entry).or_default() += count,
            None => self.unreadable += count,
        }
    }

    /// Whether nothing is to be granted.
    pub fn is_empty(&self) -> bool {
        self.connect.is_empty() && self.listen.is_empty()
    }

    /// The draft as `moat run` flags, one a line, each with its count.
    pub fn as_flags(&self) -> String {
        let mut out = String::new();
        for (setting, entries) in [
            (Setting::AllowNet, &self.connect),
            (Setting::AllowListen, &self.listen),
        ] {
            for (entry, count) in entries {
                let _ = writeln!(out, "{}={entry}  # {count}", setting.flag());
            }
        }
        out
    }

    /// The draft as a policy file (`moat run --policy`).
    pub fn as_policy_file(&self) -> String {
        let mut out = String::new();
        for (setting, entries) in [
            (Setting::AllowNet, &self.connect),
            (Setting::AllowListen, &self.listen),
        ] {
            if entries.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{} = [", setting.key());
            for (entry, count) in entries {
                let _ = writeln!(out, "  {entry:?},  # {count}");
            }
            out.push_str("]\n");
        }
        out
    }
}

/// The grant setting and entry a `needs` text names, in any front's
/// words: `--allow-net=a:1`, `MOAT_ALLOW_NET=a:1`,
/// `Policy::allow_connect("a:1")`.
fn needed(needs: &str) -> Option<(Setting, String)> {
    for setting in [Setting::AllowNet, Setting::AllowListen] {
        for spelling in [Spelling::Flags, Spelling::Environment] {
            if let Some(entry) = needs.strip_prefix(&format!("{}=", setting.named(spelling))) {
                return Some((setting, entry.to_owned()));
            }
        }
        if let Some(entry) = needs
            .strip_prefix(&format!("{}(\"", setting.named(Spelling::Embedding)))
            .and_then(|rest| rest.strip_suffix("\")"))
        {
            return Some((setting, entry.to_owned()));
        }
    }
    None
}

/// The host and port of an entry (`name:443`, `[::1]:80`, `name`).
fn split(entry: &str) -> (&str, Option<&str>) {
    if let Some(rest) = entry.strip_prefix('[')
        && let Some((host, port)) = rest.split_once(']')
    {
        return (host, port.strip_prefix(':'));
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (entry, None),
    }
}

/// Names that share a parent (the name less its first label, itself of
/// two labels or more) and a port, two or more of them, as one
/// `*.parent[:port]` entry; everything else as it was.
fn widened(entries: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut groups: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for (entry, count) in entries {
        let (host, port) = split(&entry);
        let parent = host
            .split_once('.')
            .map(|(_, parent)| parent)
            .filter(|parent| parent.contains('.') && host.parse::<std::net::IpAddr>().is_err());
        let key = match parent {
            Some(parent) => match port {
                Some(port) => format!("*.{parent}:{port}"),
                None => format!("*.{parent}"),
            },
            None => entry.clone(),
        };
        groups.entry(key).or_default().push((entry, count));
    }
    let mut out = BTreeMap::new();
    for (key, members) in groups {
        if members.len() >= 2 {
            out.insert(key, members.iter().map(|(_, c)| c).sum());
        } else {
            out.extend(members);
        }
    }
    out
}

/// Entries without a port (a name looked up) that an entry of the same
/// host with a port already covers, counted into that one: the lookup
/// needs a grant naming the name on some port, and the connect's entry is
/// one.
fn without_covered(entries: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let (portless, mut out): (BTreeMap<_, _>, BTreeMap<_, _>) = entries
        .into_iter()
        .partition(|(entry, _)| split(entry).1.is_none());
    for (entry, count) in portless {
        let covering = out.keys().find(|k: &&String| split(k).0 == entry).cloned();
        *out.entry(covering.unwrap_or(entry)).or_insert(0) += count;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(decision: &str, needs: &str) -> String {
        format!(
            r#"{{"kind":"decision","decision":"{decision}","reason":{{"kind":"no-grant","needs":"{needs}"}}}}"#
        )
    }

    #[test]
    fn each_needed_grant_once_with_its_count() {
        let trail = [
            record("would-deny", "--allow-net=api.example.com:443"),
            record("would-deny", "--allow-net=api.example.com:443"),
            // The connection an HTTP request let through opened: counted
            // by the request's record, not again.
            r#"{"kind":"decision","operation":"connect","request":{"id":1},"decision":"would-deny","reason":{"kind":"no-grant","needs":"--allow-net=api.example.com:443"}}"#.to_owned(),
            record("denied", "MOAT_ALLOW_NET=10.0.0.5:5432"),
            record("would-deny", "Policy::allow_listen(\\\"127.0.0.1:8080\\\")"),
            r#"{"kind":"decision","decision":"allowed","rule":null}"#.to_owned(),
            r#"{"kind":"denial-counts","decision":"denied","count":7,"reason":{"kind":"no-grant","needs":"--allow-net=10.0.0.5:5432"}}"#.to_owned(),
            r#"{"kind":"decision","decision":"denied","reason":{"kind":"deny-entry","address":null}}"#.to_owned(),
            "not json".to_owned(),
        ]
        .join("\n");
        let draft = Suggestion::from_trail(trail.as_bytes(), false).unwrap();
        assert_eq!(
            draft.as_flags(),
            "--allow-net=10.0.0.5:5432  # 8\n--allow-net=api.example.com:443  # 2\n\
             --allow-listen=127.0.0.1:8080  # 1\n"
        );
        assert_eq!(draft.not_grants, 1);
        assert_eq!(draft.unreadable, 1);
        assert_eq!(
            draft.as_policy_file(),
            "allow-net = [\n  \"10.0.0.5:5432\",  # 8\n  \"api.example.com:443\",  # 2\n]\n\
             allow-listen = [\n  \"127.0.0.1:8080\",  # 1\n]\n"
        );
    }

    #[test]
    fn nothing_wider_than_seen_unless_asked() {
        let trail = [
            record("would-deny", "--allow-net=a.cdn.example.com:443"),
            record("would-deny", "--allow-net=b.cdn.example.com:443"),
            record("would-deny", "--allow-net=c.cdn.example.com:80"),
            record("would-deny", "--allow-net=example.com:443"),
            record("would-deny", "--allow-net=10.0.0.1:443"),
            record("would-deny", "--allow-net=10.0.0.2:443"),
            // A lookup (no port) the connect's entry covers.
            record("would-deny", "--allow-net=example.com"),
        ]
        .join("\n");
        let narrow = Suggestion::from_trail(trail.as_bytes(), false).unwrap();
        assert_eq!(narrow.connect.len(), 6, "{narrow:?}");
        assert_eq!(narrow.connect["example.com:443"], 2);
        let wide = Suggestion::from_trail(trail.as_bytes(), true).unwrap();
        let entries: Vec<_> = wide.connect.keys().map(String::as_str).collect();
        assert_eq!(
            entries,
            [
                "*.cdn.example.com:443",
                "10.0.0.1:443",
                "10.0.0.2:443",
                "c.cdn.example.com:80",
                "example.com:443"
            ]
        );
    }
}
