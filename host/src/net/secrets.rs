//! Secrets a guest never holds: each one's value, the placeholder the
//! guest is given instead, and where the value may go
//! ([`SecretBinding`]).
//!
//! moat is the HTTP client of every wasi:http guest and sees each request
//! in plain text before it encrypts it, so it can put a value in where
//! the binding says and refuse every other place a placeholder turns up:
//!
//! - **A request's head** (`Secrets::place`): a placeholder in the named
//!   header, written as the binding's form, of an `https` request to the
//!   binding's host (as judged) and port under its path prefix, is
//!   replaced by the value; a placeholder anywhere else in the head (its
//!   authority, path, query, another header's name or value, the method)
//!   refuses the request before anything is sent.
//! - **A request's body** (`Guarded`): a placeholder in it fails the
//!   body before the bytes that hold it are sent; the server has the head
//!   and what came before them, and the request is cut off.
//! - **A response** (`Secrets::redact_head`, `Redactor`): a value in
//!   a header or the body (the server echoing it) reaches the guest as
//!   its placeholder. A placeholder is as long as its value, so a body's
//!   length is kept.
//!
//! A value is held in memory zeroed when the run drops it. Copies made
//! to send it (the request's header, hyper's and rustls's buffers) are
//! not zeroed; none is reachable from the guest.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use zeroize::Zeroizing;

use moat_policy::policy::Host;
pub use moat_policy::settings::SecretBinding;

/// The shortest value a secret may have: its placeholder is as long, and
/// a shorter one would be likelier to turn up in other text by chance
/// (and to be a weak secret in the first place).
pub(crate) const MIN_SECRET_LEN: usize = 16;

/// The longest value a secret may have: 16 KiB, past any API key or
/// token in use (a JWT with many claims is a few KiB), and what each
/// request body and response body with secrets in the run holds back at
/// most (less one byte) while it is scanned.
pub(crate) const MAX_SECRET_LEN: usize = 16 << 10;

/// The placeholder's leading text, before its random characters.
const PLACEHOLDER_PREFIX: &str = "moat";

/// One secret: its binding, its value and its placeholder. A clone's
/// value is zeroed when it is dropped too.
#[derive(Clone)]
pub struct Secret {
    binding: SecretBinding,
    value: Zeroizing<String>,
    placeholder: String,
    /// The placeholder's searcher, made once: every chunk of every body
    /// of a run with secrets is searched with it. (None is kept for the
    /// value: a searcher keeps its own copy of what it finds, which would
    /// not be zeroed.)
    finder: memchr::memmem::Finder<'static>,
}

/// Why a value cannot be a secret's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretValueError {
    /// Shorter than 16 bytes (the crate's cap table, [`crate::limits`]).
    #[error(
        "the value of secret {name} is {len} bytes long; a secret takes at least {MIN_SECRET_LEN}"
    )]
    TooShort {
        /// The secret's name.
        name: String,
        /// The value's length.
        len: usize,
    },
    /// Longer than 16 KiB (the crate's cap table, [`crate::limits`]).
    #[error(
        "the value of secret {name} is {len} bytes long; a secret takes at most {MAX_SECRET_LEN}"
    )]
    TooLong {
        /// The secret's name.
        name: String,
        /// The value's length.
        len: usize,
    },
    /// Holds a byte a header may not (a control character, a byte past
    /// ASCII), or begins or ends with a space.
    #[error(
        "the value of secret {name} holds a byte a header may not carry (only visible ASCII \
         and inner spaces)"
    )]
    NotHeaderText {
        /// The secret's name.
        name: String,
    },
    /// The random placeholder could not be made.
    #[error("no randomness for the placeholder of secret {name}: {reason}")]
    Random {
        /// The secret's name.
        name: String,
        /// The system's error.
        reason: String,
    },
}

impl Secret {
    /// `binding`'s secret with `value`, and a fresh placeholder as long as
    /// the value.
    ///
    /// # Errors
    /// [`SecretValueError`]: a value too short, or one a header cannot
    /// carry.
    pub fn new(
        binding: SecretBinding,
        value: Zeroizing<String>,
    ) -> Result<Secret, SecretValueError> {
        let name = || binding.name.clone();
        if value.len() < MIN_SECRET_LEN {
            return Err(SecretValueError::TooShort {
                name: name(),
                len: value.len(),
            });
        }
        if value.len() > MAX_SECRET_LEN {
            return Err(SecretValueError::TooLong {
                name: name(),
                len: value.len(),
            });
        }
        let header_text = value.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
            && !value.starts_with(' ')
            && !value.ends_with(' ');
        if !header_text {
            return Err(SecretValueError::NotHeaderText { name: name() });
        }
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut random = vec![0u8; value.len() - PLACEHOLDER_PREFIX.len()];
        getrandom::fill(&mut random).map_err(|e| SecretValueError::Random {
            name: name(),
            reason: e.to_string(),
        })?;
        let mut placeholder = String::from(PLACEHOLDER_PREFIX);
        placeholder.extend(
            random
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
        );
        let finder = memchr::memmem::Finder::new(placeholder.as_bytes()).into_owned();
        Ok(Secret {
            binding,
            value,
            placeholder,
            finder,
        })
    }

    /// The binding: its name, its destination, its header.
    pub fn binding(&self) -> &SecretBinding {
        &self.binding
    }

    /// What the guest is given in the value's place (in the environment
    /// variable the binding names).
    pub fn placeholder(&self) -> &str {
        &self.placeholder
    }
}

impl fmt::Debug for Secret {
    /// The binding and the placeholder; never the value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret")
            .field("binding", &self.binding.to_string())
            .field("placeholder", &self.placeholder)
            .finish_non_exhaustive()
    }
}

/// A run's secrets. Cloning is cheap and shares them.
#[derive(Clone, Default, Debug)]
pub struct Secrets {
    all: Arc<[Secret]>,
}

/// Where in a request a placeholder was found that its secret may not go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misplaced {
    /// In the named header of a request the binding covers, but not
    /// written as the binding's form.
    Form,
    /// In the named header of a request to another destination than the
    /// binding's (another host, port, scheme or path).
    Destination,
    /// In another header (its name or value).
    Header(String),
    /// In the request's authority.
    Authority,
    /// In the request's path or query.
    Path,
    /// In the request's method.
    Method,
    /// In the request's body or trailers.
    Body,
}

impl fmt::Display for Misplaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misplaced::Form => f.write_str("the bound header, not in the bound form"),
            Misplaced::Destination => f.write_str("a request to another destination"),
            Misplaced::Header(name) => write!(f, "the header {name}"),
            Misplaced::Authority => f.write_str("the authority"),
            Misplaced::Path => f.write_str("the path or query"),
            Misplaced::Method => f.write_str("the method"),
            Misplaced::Body => f.write_str("the body"),
        }
    }
}

/// A placeholder where its secret may not go: which secret (by name),
/// where, and where it may go instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret {secret} may not go in {place}; it goes only to {bound}")]
pub struct SecretMisplaced {
    /// The secret's name.
    pub secret: String,
    /// Where its placeholder was.
    pub place: Misplaced,
    /// Where it may go: the binding, as written (with no value).
    pub bound: String,
}

/// The destination of a request, as its head is placed: scheme, host as
/// judged, port.
pub(crate) struct Destination<'a> {
    pub(crate) https: bool,
    pub(crate) host: &'a Host,
    pub(crate) port: u16,
}

impl Secrets {
    /// The run's secrets.
    pub fn new(all: Vec<Secret>) -> Secrets {
        Secrets { all: all.into() }
    }

    /// These and `secret`.
    pub fn with(&self, secret: Secret) -> Secrets {
        let mut all = self.all.to_vec();
        all.push(secret);
        Secrets::new(all)
    }

    /// Whether there are none (every check below is then skipped).
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// The secrets, each with its placeholder.
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.all.iter()
    }

    fn misplaced(secret: &Secret, place: Misplaced) -> SecretMisplaced {
        SecretMisplaced {
            secret: secret.binding.name.clone(),
            place,
            bound: format!(
                "{} in {}",
                secret.binding.destination(),
                secret.binding.header
            ),
        }
    }

    /// The secret whose placeholder is in `text`, if one is.
    fn found_in(&self, text: &[u8]) -> Option<&Secret> {
        self.all.iter().find(|s| s.finder.find(text).is_some())
    }

    /// Places the secrets in a request's head going to `to`: each
    /// placeholder in its bound header, written in its form, of a request
    /// its binding covers, is replaced by the value. Returns the names of
    /// the secrets put in.
    ///
    /// # Errors
    /// [`SecretMisplaced`] for the first placeholder found anywhere else;
    /// the head is then as it was.
    pub(crate) fn place(
        &self,
        head: &mut http::request::Parts,
        to: &Destination<'_>,
    ) -> Result<Vec<String>, SecretMisplaced> {
        if self.all.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(s) = self.found_in(head.method.as_str().as_bytes()) {
            return Err(Secrets::misplaced(s, Misplaced::Method));
        }
        if let Some(a) = head.uri.authority()
            && let Some(s) = self.found_in(a.as_str().as_bytes())
        {
            return Err(Secrets::misplaced(s, Misplaced::Authority));
        }
        if let Some(pq) = head.uri.path_and_query()
            && let Some(s) = self.found_in(pq.as_str().as_bytes())
        {
            return Err(Secrets::misplaced(s, Misplaced::Path));
        }
        let path = head.uri.path();
        let mut placed: Vec<(http::HeaderName, usize, &Secret)> = Vec::new();
        for name in head.headers.keys() {
            if let Some(s) = self.found_in(name.as_str().as_bytes()) {
                return Err(Secrets::misplaced(s, Misplaced::Header(name.to_string())));
            }
            // Each value of the name, by its place among them: a header
            // written twice is placed (or refused) twice.
            for (index, value) in head.headers.get_all(name).iter().enumerate() {
                let Some(s) = self.found_in(value.as_bytes()) else {
                    continue;
                };
                let b = &s.binding;
                if name.as_str() != b.header {
                    return Err(Secrets::misplaced(s, Misplaced::Header(name.to_string())));
                }
                let covered =
                    to.https && *to.host == b.host && to.port == b.port && b.covers_path(path);
                if !covered {
                    return Err(Secrets::misplaced(s, Misplaced::Destination));
                }
                if value.as_bytes() != b.rendered(&s.placeholder).as_bytes() {
                    return Err(Secrets::misplaced(s, Misplaced::Form));
                }
                placed.push((name.clone(), index, s));
            }
        }
        let mut names = Vec::with_capacity(placed.len());
        for (name, index, s) in placed {
            let rendered = Zeroizing::new(s.binding.rendered(&s.value));
            // Checked at `Secret::new`: visible ASCII and inner spaces, as
            // the form is; a value that still fails stays the placeholder.
            let Ok(mut value) = http::HeaderValue::from_str(&rendered) else {
                continue;
            };
            value.set_sensitive(true);
            if let http::header::Entry::Occupied(mut entry) = head.headers.entry(&name)
                && let Some(slot) = entry.iter_mut().nth(index)
            {
                *slot = value;
            }
            names.push(s.binding.name.clone());
        }
        Ok(names)
    }

    /// Whether a secret's value is in `text`.
    fn holds_value(&self, text: &[u8]) -> bool {
        self.all
            .iter()
            .any(|s| memchr::memmem::find(text, s.value.as_bytes()).is_some())
    }

    /// Replaces every value in a response's head with its placeholder: a
    /// header whose name holds one is dropped.
    pub(crate) fn redact_head(&self, headers: &mut http::HeaderMap) {
        if self.all.is_empty() {
            return;
        }
        let holds = |text: &[u8]| self.holds_value(text);
        if !headers
            .iter()
            .any(|(name, value)| holds(name.as_str().as_bytes()) || holds(value.as_bytes()))
        {
            return;
        }
        let old = std::mem::take(headers);
        let mut name = None;
        for (key, value) in old {
            if key.is_some() {
                name = key;
            }
            let Some(name) = &name else { continue };
            if holds(name.as_str().as_bytes()) {
                continue;
            }
            let mut bytes = value.as_bytes().to_vec();
            self.redact(&mut bytes);
            if let Ok(value) = http::HeaderValue::from_bytes(&bytes) {
                headers.append(name.clone(), value);
            }
        }
    }

    /// Replaces each value in `bytes` by its placeholder, in place (they
    /// are as long).
    fn redact(&self, bytes: &mut [u8]) {
        for s in self.all.iter() {
            let value = s.value.as_bytes();
            let mut from = 0;
            while let Some(at) = memchr::memmem::find(&bytes[from..], value) {
                let start = from + at;
                bytes[start..start + value.len()].copy_from_slice(s.placeholder.as_bytes());
                from = start + value.len();
            }
        }
    }

    /// The longest placeholder (and value): what a stream holds back so
    /// that one split between two chunks is still found.
    fn longest(&self) -> usize {
        self.all.iter().map(|s| s.value.len()).max().unwrap_or(0)
    }
}

/// What a streamed body holds back between chunks so that a needle (a
/// value, a placeholder) split between two is found whole: the last bytes
/// of the chunk before, fewer than the longest needle, and the seam where
/// they meet the next chunk, its buffer kept from chunk to chunk.
#[derive(Default)]
struct Window {
    held: Vec<u8>,
    seam: Vec<u8>,
}

impl Window {
    /// The held bytes followed by the first `keep` bytes of `data`: where
    /// a needle begun in the held bytes (fewer than `keep` + 1) ends.
    fn seam(&mut self, data: &[u8], keep: usize) -> &[u8] {
        self.seam.clear();
        self.seam.extend_from_slice(&self.held);
        self.seam.extend_from_slice(&data[..keep.min(data.len())]);
        &self.seam
    }

    /// Passes on `data`, searched and clear: what may go now, in order
    /// (either may be empty). The held bytes go first, then the chunk as
    /// the same buffer less its last `keep` bytes, which are held; a chunk
    /// shorter than that is joined to the held bytes (a few dozen bytes).
    fn pass(&mut self, data: Bytes, keep: usize) -> (Bytes, Bytes) {
        if data.len() >= keep {
            let before = Bytes::copy_from_slice(&self.held);
            self.held.clear();
            self.held.extend_from_slice(&data[data.len() - keep..]);
            return (before, data.slice(..data.len() - keep));
        }
        let mut all = std::mem::take(&mut self.held);
        all.extend_from_slice(&data);
        self.hold_back(all, keep)
    }

    /// `all` less its last `keep` bytes, which are held.
    fn hold_back(&mut self, mut all: Vec<u8>, keep: usize) -> (Bytes, Bytes) {
        self.held = all.split_off(all.len() - keep.min(all.len()));
        (Bytes::from(all), Bytes::new())
    }

    /// What was held back, at the body's end.
    fn finish(&mut self) -> Option<Bytes> {
        (!self.held.is_empty()).then(|| Bytes::from(std::mem::take(&mut self.held)))
    }
}

/// A response body's redaction, chunk by chunk: it holds back the last
/// bytes of each chunk that could begin a value (one byte fewer than the
/// longest value), so a value split between chunks is found whole.
///
/// A chunk with no value in it (nearly every one) is passed on as the
/// same buffer, after what was held back from the chunk before; only the
/// seam between the two is copied to be searched. A chunk with a value is
/// copied and redacted.
pub(crate) struct Redactor {
    secrets: Secrets,
    window: Window,
}

impl Redactor {
    pub(crate) fn new(secrets: Secrets) -> Redactor {
        Redactor {
            secrets,
            window: Window::default(),
        }
    }

    /// The redacted bytes that may go to the guest now, in order (either
    /// or both may be empty).
    pub(crate) fn feed(&mut self, data: Bytes) -> (Bytes, Bytes) {
        let keep = self.secrets.longest().saturating_sub(1);
        let seam = self.window.seam(&data, keep);
        if !self.secrets.holds_value(seam) && !self.secrets.holds_value(&data) {
            return self.window.pass(data, keep);
        }
        // What was searched held part of a value: not kept.
        self.window.seam.fill(0);
        let mut all = std::mem::take(&mut self.window.held);
        all.extend_from_slice(&data);
        self.secrets.redact(&mut all);
        self.window.hold_back(all, keep)
    }

    /// What was held back, at the body's end.
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        self.window.finish()
    }

    /// Whether bytes are held back.
    pub(crate) fn holds(&self) -> bool {
        !self.window.held.is_empty()
    }

    /// The secrets, for trailers.
    pub(crate) fn secrets(&self) -> &Secrets {
        &self.secrets
    }
}

/// A request body that must not carry a placeholder: it holds back the
/// last bytes of each chunk that could begin one, and fails before
/// sending the bytes that hold one.
///
/// A chunk's bytes are searched where they are and sent as the same
/// buffer, not copied: what was held back from the chunk before goes out
/// as a frame of its own ahead of it (`pending` keeps the chunk meanwhile),
/// and only the seam between the two (at most twice the longest
/// placeholder) is copied to be searched.
pub(crate) struct Guarded<B> {
    inner: B,
    secrets: Secrets,
    window: Window,
    /// A chunk searched and cleared, to go out after the held bytes sent
    /// ahead of it.
    pending: Option<Bytes>,
    /// Set once the placeholder was found: the body fails from then on.
    refused: Option<SecretMisplaced>,
    ended: bool,
    /// Told of the refusal once (the audit trail's record).
    report: Option<Report>,
}

/// What a guarded body tells of its refusal, once.
type Report = Box<dyn FnOnce(&SecretMisplaced) + Send>;

impl<B> Guarded<B> {
    /// `inner`, guarded against `secrets`' placeholders; `report` is
    /// told of a refusal once.
    pub(crate) fn new(
        inner: B,
        secrets: Secrets,
        report: impl FnOnce(&SecretMisplaced) + Send + 'static,
    ) -> Guarded<B> {
        Guarded {
            inner,
            secrets,
            window: Window::default(),
            pending: None,
            refused: None,
            ended: false,
            report: Some(Box::new(report)),
        }
    }

    /// Fails the body from now on, reporting why once.
    fn refuse(&mut self, refused: SecretMisplaced) -> SecretMisplaced {
        if let Some(report) = self.report.take() {
            report(&refused);
        }
        self.window.held.clear();
        self.pending = None;
        self.refused = Some(refused.clone());
        refused
    }

    /// `data` after what was held: the bytes that may be sent now, in
    /// order (either may be empty), or the misplaced secret.
    fn feed(&mut self, data: Bytes) -> Result<(Bytes, Bytes), SecretMisplaced> {
        let keep = self.secrets.longest().saturating_sub(1);
        let seam = self.window.seam(&data, keep);
        if let Some(s) = self
            .secrets
            .found_in(seam)
            .or_else(|| self.secrets.found_in(&data))
        {
            return Err(Secrets::misplaced(s, Misplaced::Body));
        }
        Ok(self.window.pass(data, keep))
    }
}

impl<B> http_body::Body for Guarded<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: From<SecretMisplaced>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        if let Some(refused) = &this.refused {
            return Poll::Ready(Some(Err(refused.clone().into())));
        }
        if let Some(chunk) = this.pending.take() {
            return Poll::Ready(Some(Ok(http_body::Frame::data(chunk))));
        }
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let frame = match frame.into_data() {
                        Ok(data) => match this.feed(data) {
                            Ok((first, then)) => match (first.is_empty(), then.is_empty()) {
                                (true, true) => continue,
                                (true, false) => http_body::Frame::data(then),
                                (false, true) => http_body::Frame::data(first),
                                (false, false) => {
                                    this.pending = Some(then);
                                    http_body::Frame::data(first)
                                }
                            },
                            Err(refused) => {
                                return Poll::Ready(Some(Err(this.refuse(refused).into())));
                            }
                        },
                        Err(frame) => {
                            // Trailers end the body: what was held goes
                            // first, the trailers on the next poll.
                            if let Some(trailers) = frame.trailers_ref() {
                                for (name, value) in trailers {
                                    let found = this
                                        .secrets
                                        .found_in(name.as_str().as_bytes())
                                        .or_else(|| this.secrets.found_in(value.as_bytes()));
                                    if let Some(s) = found {
                                        let refused = Secrets::misplaced(s, Misplaced::Body);
                                        return Poll::Ready(Some(Err(this.refuse(refused).into())));
                                    }
                                }
                            }
                            frame
                        }
                    };
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    if let Some(rest) = this.window.finish() {
                        return Poll::Ready(Some(Ok(http_body::Frame::data(rest))));
                    }
                    return Poll::Ready(None);
                }
                other => return other,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.window.held.is_empty()
            && self.pending.is_none()
            && (self.ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        // The bytes are the inner body's, held, pending or not.
        let mut hint = self.inner.size_hint();
        let held = (self.window.held.len() + self.pending.as_ref().map_or(0, Bytes::len)) as u64;
        hint.set_lower(hint.lower() + held);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + held);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    const VALUE: &str = "sk-live-0123456789abcdef";

    fn secrets() -> (Secrets, String) {
        let binding = SecretBinding::parse(
            "API_KEY;from=env:K;to=https://api.example.com/v1/;header=Authorization;\
             form=Bearer {}",
        )
        .unwrap();
        let secret = Secret::new(binding, Zeroizing::new(VALUE.to_owned())).unwrap();
        let placeholder = secret.placeholder().to_owned();
        (Secrets::new(vec![secret]), placeholder)
    }

    fn head(uri: &str, headers: &[(&str, String)]) -> http::request::Parts {
        let mut request = http::Request::get(uri);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn to(https: bool, host: &Host, port: u16) -> Destination<'_> {
        Destination { https, host, port }
    }

    #[test]
    fn the_placeholder_is_as_long_as_the_value_and_never_it() {
        let (secrets, placeholder) = secrets();
        assert_eq!(placeholder.len(), VALUE.len());
        assert_ne!(placeholder, VALUE);
        assert!(placeholder.starts_with("moat"));
        assert!(
            !format!("{secrets:?}").contains(VALUE),
            "Debug never shows the value"
        );
        let binding = secrets.iter().next().unwrap().binding().clone();
        assert_eq!(
            Secret::new(binding.clone(), Zeroizing::new("short".into())).unwrap_err(),
            SecretValueError::TooShort {
                name: "API_KEY".into(),
                len: 5
            }
        );
        assert!(matches!(
            Secret::new(binding.clone(), Zeroizing::new(format!("{VALUE}\r\nX: y"))),
            Err(SecretValueError::NotHeaderText { .. })
        ));
        // What a body holds back while it is scanned is bounded by the
        // longest value a secret may have.
        assert_eq!(
            Secret::new(binding, Zeroizing::new("k".repeat(MAX_SECRET_LEN + 1))).unwrap_err(),
            SecretValueError::TooLong {
                name: "API_KEY".into(),
                len: MAX_SECRET_LEN + 1
            }
        );
    }

    #[test]
    fn the_value_goes_only_where_bound() {
        let (secrets, p) = secrets();
        let api = Host::parse("api.example.com").unwrap();
        let mut ok = head(
            "https://api.example.com/v1/chat",
            &[
                ("authorization", format!("Bearer {p}")),
                ("x-other", "1".into()),
            ],
        );
        let placed = secrets.place(&mut ok, &to(true, &api, 443)).unwrap();
        assert_eq!(placed, ["API_KEY"]);
        assert_eq!(
            ok.headers["authorization"],
            format!("Bearer {VALUE}").as_str()
        );
        assert!(ok.headers["authorization"].is_sensitive());

        let other = Host::parse("b.example").unwrap();
        let bearer = || vec![("authorization", format!("Bearer {p}"))];
        for (uri, headers, https, host, port, place) in [
            (
                "https://b.example/v1/",
                bearer(),
                true,
                &other,
                443,
                Misplaced::Destination,
            ),
            (
                "http://api.example.com/v1/",
                bearer(),
                false,
                &api,
                443,
                Misplaced::Destination,
            ),
            (
                "https://api.example.com:8443/v1/",
                bearer(),
                true,
                &api,
                8443,
                Misplaced::Destination,
            ),
            (
                "https://api.example.com/v2/",
                bearer(),
                true,
                &api,
                443,
                Misplaced::Destination,
            ),
            (
                "https://api.example.com/v1/../admin",
                bearer(),
                true,
                &api,
                443,
                Misplaced::Destination,
            ),
            (
                "https://api.example.com/v1/",
                vec![("x-api-key", p.clone())],
                true,
                &api,
                443,
                Misplaced::Header("x-api-key".into()),
            ),
            (
                "https://api.example.com/v1/",
                vec![("authorization", format!("Basic {p}"))],
                true,
                &api,
                443,
                Misplaced::Form,
            ),
            (
                &format!("https://api.example.com/v1/?k={p}"),
                vec![],
                true,
                &api,
                443,
                Misplaced::Path,
            ),
            (
                &format!("https://api.example.com/v1/{p}"),
                vec![],
                true,
                &api,
                443,
                Misplaced::Path,
            ),
        ] {
            let mut h = head(uri, &headers);
            let before = h.headers.clone();
            let e = secrets.place(&mut h, &to(https, host, port)).unwrap_err();
            assert_eq!(e.place, place, "{uri} {headers:?}");
            assert_eq!(e.secret, "API_KEY");
            assert!(!e.to_string().contains(VALUE));
            assert_eq!(h.headers, before, "a refused head is unchanged");
        }
    }

    #[test]
    fn a_response_gets_the_placeholder_back() {
        let (secrets, p) = secrets();
        let mut headers = http::HeaderMap::new();
        headers.insert("x-echo", format!("Bearer {VALUE}").parse().unwrap());
        headers.append("x-echo", "plain".parse().unwrap());
        secrets.redact_head(&mut headers);
        let echoed: Vec<_> = headers.get_all("x-echo").iter().collect();
        assert_eq!(echoed, [format!("Bearer {p}").as_str(), "plain"]);

        // A value split across chunks at every point is still found.
        let text = format!("a{VALUE}b{VALUE}");
        for cut in 0..=text.len() {
            let mut r = Redactor::new(secrets.clone());
            let mut out = Vec::new();
            for chunk in [&text.as_bytes()[..cut], &text.as_bytes()[cut..]] {
                let (first, then) = r.feed(Bytes::copy_from_slice(chunk));
                out.extend_from_slice(&first);
                out.extend_from_slice(&then);
            }
            out.extend_from_slice(&r.finish().unwrap_or_default());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("a{p}b{p}"),
                "cut at {cut}"
            );
        }

        // In three chunks, each shorter or longer than what is held back:
        // a text with a value, and one with all of a value but its last
        // byte (passed on as it came).
        for (text, redacted) in [
            (
                format!("{}{VALUE}{}", "x".repeat(30), "y".repeat(30)),
                format!("{}{p}{}", "x".repeat(30), "y".repeat(30)),
            ),
            (
                format!(
                    "{}{}{}",
                    "x".repeat(30),
                    &VALUE[..VALUE.len() - 1],
                    "y".repeat(30)
                ),
                format!(
                    "{}{}{}",
                    "x".repeat(30),
                    &VALUE[..VALUE.len() - 1],
                    "y".repeat(30)
                ),
            ),
        ] {
            for a in 0..=text.len() {
                for b in a..=text.len() {
                    let mut r = Redactor::new(secrets.clone());
                    let mut out = Vec::new();
                    for chunk in [&text[..a], &text[a..b], &text[b..]] {
                        let (first, then) = r.feed(Bytes::copy_from_slice(chunk.as_bytes()));
                        out.extend_from_slice(&first);
                        out.extend_from_slice(&then);
                    }
                    out.extend_from_slice(&r.finish().unwrap_or_default());
                    assert_eq!(
                        String::from_utf8(out).unwrap(),
                        redacted,
                        "cut at {a} and {b}"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn a_body_holding_a_placeholder_fails_before_sending_it() {
        let (secrets, p) = secrets();
        let text = format!("hello {p} world");
        for cut in 0..=text.len() {
            let chunks = vec![
                Ok::<_, SecretMisplaced>(http_body::Frame::data(Bytes::copy_from_slice(
                    &text.as_bytes()[..cut],
                ))),
                Ok(http_body::Frame::data(Bytes::copy_from_slice(
                    &text.as_bytes()[cut..],
                ))),
            ];
            let inner = http_body_util::StreamBody::new(futures::stream::iter(chunks));
            let told = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let count = Arc::clone(&told);
            let mut body = Guarded::new(inner, secrets.clone(), move |_| {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
            let mut sent = Vec::new();
            let e = loop {
                match body.frame().await {
                    Some(Ok(frame)) => sent.extend_from_slice(&frame.into_data().unwrap()),
                    Some(Err(e)) => break e,
                    None => panic!("cut at {cut}: the body ended"),
                }
            };
            assert_eq!(e.place, Misplaced::Body);
            assert!(
                body.frame().await.is_some_and(|f| f.is_err()),
                "it stays failed"
            );
            assert_eq!(
                told.load(std::sync::atomic::Ordering::Relaxed),
                1,
                "told once"
            );
            assert!(
                memchr::memmem::find(&sent, p.as_bytes()).is_none(),
                "cut at {cut}: nothing of the placeholder whole was sent"
            );
        }
        // A clean body goes through byte for byte, cut anywhere into three
        // chunks (each shorter or longer than what is held back).
        let text = format!("{}{}{}", "x".repeat(40), &p[..p.len() - 1], "y".repeat(40));
        for a in 0..=text.len() {
            for b in a..=text.len() {
                let chunks = [&text[..a], &text[a..b], &text[b..]].map(|c| {
                    Ok::<_, SecretMisplaced>(http_body::Frame::data(Bytes::copy_from_slice(
                        c.as_bytes(),
                    )))
                });
                let body = Guarded::new(
                    http_body_util::StreamBody::new(futures::stream::iter(chunks)),
                    secrets.clone(),
                    |_| panic!("nothing to refuse"),
                );
                let all = body.collect().await.unwrap().to_bytes();
                assert_eq!(&all[..], text.as_bytes(), "cut at {a} and {b}");
            }
        }
        let clean = vec![Ok::<_, SecretMisplaced>(http_body::Frame::data(
            Bytes::from_static(b"nothing to see"),
        ))];
        let body = Guarded::new(
            http_body_util::StreamBody::new(futures::stream::iter(clean)),
            secrets,
            |_| panic!("nothing to refuse"),
        );
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"nothing to see");
    }
}
