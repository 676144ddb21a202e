//! A secret bound to where it may go (`--secret`): which value, from where
//! on the operator's side, and the one place of one kind of request it is
//! put in. The guest is given a placeholder in its place; moat-host puts
//! the value in a request that carries the placeholder where the binding
//! says, and refuses one that carries it anywhere else.
//!
//! One binding is written the same way by every source (a flag, an entry
//! of a policy file's `secret` list, the embedding API):
//!
//! ```text
//! NAME;from=env:VAR;to=https://HOST[:PORT][/PREFIX];header=HEADER[;form=FORM]
//! ```
//!
//! - `NAME`: the guest's environment variable that holds the placeholder.
//! - `from`: `env:VAR` (a variable of moat's own process) or `file:PATH`.
//! - `to`: `https` only; the host is judged as a grant's is (lower case, no
//!   trailing dot, one spelling of each address); the port is 443 unless
//!   written; the path prefix is `/` unless written, and a prefix without
//!   a trailing `/` matches itself and what lies under it (`/v1` matches
//!   `/v1` and `/v1/chat`, never `/v1admin`).
//! - `header`: the request header the value goes in (`Authorization`).
//! - `form`: the header's whole value, with `{}` where the secret goes
//!   (`Bearer {}`); `{}` unless written.
//!
//! Nothing here reads the value: the host does, when the run starts.

use std::fmt;
use std::path::PathBuf;

use crate::policy::{Host, HostError};

/// Longest secret name: an environment variable's name of any sensible
/// length.
const MAX_NAME_LEN: usize = 64;

/// A secret, where its value comes from, and where it may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretBinding {
    /// The guest's environment variable that holds the placeholder, and
    /// the name every record and message gives the secret.
    pub name: String,
    /// Where the value comes from, on the operator's side.
    pub from: SecretSource,
    /// The destination's host, as judged.
    pub host: Host,
    /// The destination's port.
    pub port: u16,
    /// The path prefix a request's path must be under.
    pub path: String,
    /// The header the value goes in, in lower case.
    pub header: String,
    /// The header's value with `{}` where the secret goes.
    pub form: String,
}

/// Where a secret's value is read from, once, when the run starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// A variable of the host process's own environment.
    Env(String),
    /// A file (its whole content, one trailing line break dropped).
    File(PathBuf),
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(var) => write!(f, "env:{var}"),
            SecretSource::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

/// Why a secret binding cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretSpecError {
    /// The name is missing or not an environment variable's name.
    #[error(
        "the secret's name must come first and be an environment variable's name \
         (letters, digits and _, not starting with a digit, at most 64), found {0:?}"
    )]
    Name(String),
    /// A part is not `key=value`, or its key is not one of the five.
    #[error("{0:?} is not one of from=, to=, header=, form=")]
    UnknownPart(String),
    /// A part is written twice.
    #[error("{0}= is written twice")]
    Twice(&'static str),
    /// A part that has no default is missing.
    #[error("{0}= is missing")]
    Missing(&'static str),
    /// `from=` is neither `env:VAR` nor `file:PATH`.
    #[error("from= takes env:VARIABLE or file:PATH, found {0:?}")]
    Source(String),
    /// `to=` is not an `https` URL.
    #[error("to= must be an https:// URL (a secret is never sent in the clear), found {0:?}")]
    NotHttps(String),
    /// `to=`'s host is not a host.
    #[error("to='s host: {0}")]
    Host(#[source] HostError),
    /// `to=`'s port is not a port.
    #[error("to='s port must be 1 to 65535, found {0:?}")]
    Port(String),
    /// `to=`'s path prefix holds what a path prefix may not.
    #[error(
        "to='s path must be plain segments (letters, digits, - . _ ~ and /, no . or .. \
         segment, no query), found {0:?}"
    )]
    Path(String),
    /// `header=` is not a header a secret may go in.
    #[error("header= must be a header's name other than {NOT_A_SECRET_HEADER}, found {0:?}")]
    Header(String),
    /// `form=` does not hold `{}` exactly once, or holds what a header may
    /// not.
    #[error(
        "form= must hold {{}} exactly once and only visible characters and spaces, found {0:?}"
    )]
    Form(String),
}

/// Headers a secret may not go in: what frames the request or routes it
/// (a value there would not stay where the binding says).
const NOT_A_SECRET_HEADER: &str =
    "host, content-length, transfer-encoding, connection, te, upgrade, keep-alive";

impl SecretBinding {
    /// Reads one binding as every source writes it (the module's doc).
    ///
    /// # Errors
    /// [`SecretSpecError`]: what is wrong, naming the part.
    pub fn parse(text: &str) -> Result<SecretBinding, SecretSpecError> {
        let mut parts = text.trim().split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        if !is_variable_name(name) {
            return Err(SecretSpecError::Name(name.to_owned()));
        }
        let (mut from, mut to, mut header, mut form) = (None, None, None, None);
        for part in parts.filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                return Err(SecretSpecError::UnknownPart(part.to_owned()));
            };
            let (slot, key) = match key.trim() {
                "from" => (&mut from, "from"),
                "to" => (&mut to, "to"),
                "header" => (&mut header, "header"),
                "form" => (&mut form, "form"),
                _ => return Err(SecretSpecError::UnknownPart(part.to_owned())),
            };
            if slot.replace(value.trim()).is_some() {
                return Err(SecretSpecError::Twice(key));
            }
        }
        let from = source(from.ok_or(SecretSpecError::Missing("from"))?)?;
        let (host, port, path) = destination(to.ok_or(SecretSpecError::Missing("to"))?)?;
        let header = header_name(header.ok_or(SecretSpecError::Missing("header"))?)?;
        let form = form.unwrap_or("{}");
        if form.matches("{}").count() != 1
            || !form.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
        {
            return Err(SecretSpecError::Form(form.to_owned()));
        }
        Ok(SecretBinding {
            name: name.to_owned(),
            from,
            host,
            port,
            path,
            header,
            form: form.to_owned(),
        })
    }

    /// Whether a request's path (without its query) lies under this
    /// binding's prefix. A path with a `.` or `..` segment, spelled
    /// plainly or percent-encoded, or an encoded `/` or `\`, lies under
    /// none: the server may read it as another path than the text.
    pub fn covers_path(&self, path: &str) -> bool {
        if !plain_path(path) {
            return false;
        }
        if self.path.ends_with('/') {
            path.starts_with(&self.path)
        } else {
            path == self.path
                || path
                    .strip_prefix(&self.path)
                    .is_some_and(|rest| rest.starts_with('/'))
        }
    }

    /// The header's value with the secret `value` in its place.
    pub fn rendered(&self, value: &str) -> String {
        self.form.replacen("{}", value, 1)
    }

    /// The destination as a URL: `https://api.example.com/v1/`.
    pub fn destination(&self) -> String {
        let host = match &self.host {
            Host::Ip(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
            host => host.to_string(),
        };
        if self.port == 443 {
            format!("https://{host}{}", self.path)
        } else {
            format!("https://{host}:{}{}", self.port, self.path)
        }
    }
}

impl fmt::Display for SecretBinding {
    /// The binding as it is written, with the source's name and never a
    /// value (there is none here).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{};from={};to={};header={}",
            self.name,
            self.from,
            self.destination(),
            self.header
        )?;
        if self.form != "{}" {
            write!(f, ";form={}", self.form)?;
        }
        Ok(())
    }
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn source(text: &str) -> Result<SecretSource, SecretSpecError> {
    match text.split_once(':') {
        Some(("env", var)) if is_variable_name(var) => Ok(SecretSource::Env(var.to_owned())),
        Some(("file", path)) if !path.is_empty() => Ok(SecretSource::File(PathBuf::from(path))),
        _ => Err(SecretSpecError::Source(text.to_owned())),
    }
}

fn destination(text: &str) -> Result<(Host, u16, String), SecretSpecError> {
    let rest = text
        .strip_prefix("https://")
        .ok_or_else(|| SecretSpecError::NotHttps(text.to_owned()))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal's colons are inside its brackets.
        Some((host, port)) if !port.contains(']') => {
            let port = port
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| SecretSpecError::Port(port.to_owned()))?;
            (host, port)
        }
        _ => (authority, 443),
    };
    if host.contains('@') {
        return Err(SecretSpecError::Host(HostError::InvalidName {
            host: host.to_owned(),
            reason: "user information has no place in a destination",
        }));
    }
    let host = Host::parse(host).map_err(SecretSpecError::Host)?;
    let prefix_chars = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(&b));
    if !prefix_chars || !plain_path(path) {
        return Err(SecretSpecError::Path(path.to_owned()));
    }
    Ok((host, port, path.to_owned()))
}

/// A path whose text is what a server reads: no `.` or `..` segment, no
/// percent-encoded dot, slash or backslash, no backslash.
fn plain_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.starts_with('/')
        && !path.contains('\\')
        && !["%2e", "%2f", "%5c"].iter().any(|e| lower.contains(e))
        && !path
            .split('/')
            .any(|segment| segment == "." || segment == "..")
}

fn header_name(text: &str) -> Result<String, SecretSpecError> {
    let name = text.to_ascii_lowercase();
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    let framing = NOT_A_SECRET_HEADER.split(", ").any(|h| h == name);
    if !token || framing {
        return Err(SecretSpecError::Header(text.to_owned()));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(text: &str) -> SecretBinding {
        SecretBinding::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn a_binding_reads_every_part() {
        let b = binding(
            "API_KEY; from=env:UPSTREAM_KEY; to=https://API.Example.com.:8443/v1/; \
             header=Authorization; form=Bearer {}",
        );
        assert_eq!(b.name, "API_KEY");
        assert_eq!(b.from, SecretSource::Env("UPSTREAM_KEY".into()));
        assert_eq!(b.host, Host::Name("api.example.com".into()));
        assert_eq!(b.port, 8443);
        assert_eq!(b.path, "/v1/");
        assert_eq!(b.header, "authorization");
        assert_eq!(b.rendered("k-123"), "Bearer k-123");
        assert_eq!(
            b.to_string(),
            "API_KEY;from=env:UPSTREAM_KEY;to=https://api.example.com:8443/v1/;\
             header=authorization;form=Bearer {}"
        );
        assert_eq!(SecretBinding::parse(&b.to_string()), Ok(b));
        let b = binding("K;from=file:/run/key;to=https://[::1];header=x-api-key");
        assert_eq!((b.port, b.path.as_str(), b.form.as_str()), (443, "/", "{}"));
        assert_eq!(b.destination(), "https://[::1]/");
    }

    #[test]
    fn a_bad_binding_says_which_part() {
        for (text, error) in [
            ("", SecretSpecError::Name(String::new())),
            ("1K;from=env:A", SecretSpecError::Name("1K".into())),
            (
                "K;from=env:A;to=http://a.example;header=x",
                SecretSpecError::NotHttps("http://a.example".into()),
            ),
            ("K;from=env:A;header=x", SecretSpecError::Missing("to")),
            (
                "K;to=https://a.example;header=x",
                SecretSpecError::Missing("from"),
            ),
            (
                "K;from=env:A;to=https://a.example",
                SecretSpecError::Missing("header"),
            ),
            ("K;from=env:A;from=env:B", SecretSpecError::Twice("from")),
            ("K;from=vault:A", SecretSpecError::Source("vault:A".into())),
            (
                "K;from=env:A;to=https://a.example:0;header=x",
                SecretSpecError::Port("0".into()),
            ),
            (
                "K;from=env:A;to=https://a.example/v1/../x;header=x",
                SecretSpecError::Path("/v1/../x".into()),
            ),
            (
                "K;from=env:A;to=https://a.example/v1?x;header=x",
                SecretSpecError::Path("/v1?x".into()),
            ),
            (
                "K;from=env:A;to=https://a.example;header=Host",
                SecretSpecError::Header("Host".into()),
            ),
            (
                "K;from=env:A;to=https://a.example;header=a b",
                SecretSpecError::Header("a b".into()),
            ),
            (
                "K;from=env:A;to=https://a.example;header=x;form=Bearer",
                SecretSpecError::Form("Bearer".into()),
            ),
            (
                "K;from=env:A;to=https://a.example;header=x;form={}{}",
                SecretSpecError::Form("{}{}".into()),
            ),
            (
                "K;value=abc",
                SecretSpecError::UnknownPart("value=abc".into()),
            ),
        ] {
            assert_eq!(SecretBinding::parse(text), Err(error), "{text}");
        }
        assert!(matches!(
            SecretBinding::parse("K;from=env:A;to=https://127.1;header=x"),
            Err(SecretSpecError::Host(HostError::AmbiguousNumeric(_)))
        ));
        assert!(matches!(
            SecretBinding::parse("K;from=env:A;to=https://u@a.example;header=x"),
            Err(SecretSpecError::Host(_))
        ));
    }

    #[test]
    fn a_prefix_covers_only_what_lies_under_it() {
        let open = binding("K;from=env:A;to=https://a.example/v1;header=x");
        let closed = binding("K;from=env:A;to=https://a.example/v1/;header=x");
        for (path, under_open, under_closed) in [
            ("/v1", true, false),
            ("/v1/", true, true),
            ("/v1/chat", true, true),
            ("/v1admin", false, false),
            ("/v2", false, false),
            ("/v1/../admin", false, false),
            ("/v1/%2e%2e/admin", false, false),
            ("/v1/%2E./admin", false, false),
            ("/v1%2fadmin", false, false),
            ("/v1/./chat", false, false),
            ("/v1\\..\\admin", false, false),
            ("v1/chat", false, false),
            ("/V1/chat", false, false),
        ] {
            assert_eq!(open.covers_path(path), under_open, "/v1 over {path}");
            assert_eq!(closed.covers_path(path), under_closed, "/v1/ over {path}");
        }
        assert!(binding("K;from=env:A;to=https://a.example;header=x").covers_path("/anything"));
    }
}
