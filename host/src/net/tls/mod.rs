//! TLS with rustls: client and server configurations, trust, errors.
//!
//! - The crypto provider is named at every configuration built (ring):
//!   moat never relies on rustls's process-wide default, which panics when
//!   two providers are linked into one binary.
//! - Trust is webpki-roots by default, built once per process and shared;
//!   a run can add roots (`--ca-file`) or replace the store (embedding), and
//!   a guest can add its own for one connection.
//! - Configurations are built after the policy check, from inputs of
//!   bounded size ([`MAX_PEM_BYTES`], [`MAX_CHAIN_CERTIFICATES`],
//!   [`MAX_GUEST_ROOTS`]), once per distinct content, and paid from the
//!   run's host memory ([`configs`]): a connect does not rebuild the root
//!   store, and a hundred listeners with one certificate hold it once.
//! - A handshake is bounded in time, on both sides.

mod client;
pub mod configs;
mod server;

use std::io;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::budget::Budget;
use super::error::NetError;
use configs::{Configs, KeyBuilder};

pub(crate) use super::limits::{MAX_CHAIN_CERTIFICATES, MAX_GUEST_ROOTS, MAX_PEM_BYTES};
pub(crate) use client::{handshake_client, server_name};
pub(crate) use server::{ServerTls, handshake_server};

/// What a client configuration costs in host memory beyond its
/// certificates and keys (rustls's configuration, its session cache and
/// verifier): 15.7 KB measured with a counting allocator, rounded up.
const CLIENT_CONFIG_OVERHEAD: usize = 16 << 10;

/// As [`CLIENT_CONFIG_OVERHEAD`] for a server configuration: 31.5 KB
/// measured (its session cache and ticketer, the signing key's schedule).
const SERVER_CONFIG_OVERHEAD: usize = 32 << 10;

/// What each trust anchor of the run's store costs when a configuration
/// copies the store to add a guest's roots: 72 bytes measured for
/// Mozilla's roots (borrowed, static); an owned root (`--ca-file`) holds
/// its subject and key too, so 256.
const ANCHOR_BYTES: usize = 256;

/// The one crypto provider moat uses, named explicitly.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: LazyLock<Arc<CryptoProvider>> =
        LazyLock::new(|| Arc::new(rustls::crypto::ring::default_provider()));
    Arc::clone(&PROVIDER)
}

/// The root certificates a run trusts for TLS clients.
#[derive(Debug, Clone)]
pub struct TlsTrust {
    roots: Arc<RootCertStore>,
}

impl TlsTrust {
    /// The Mozilla root set (webpki-roots), built once per process.
    pub fn webpki() -> TlsTrust {
        static WEBPKI: LazyLock<Arc<RootCertStore>> = LazyLock::new(|| {
            Arc::new(RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })
        });
        TlsTrust {
            roots: Arc::clone(&WEBPKI),
        }
    }

    /// Exactly the roots of `store` (the embedding API's replacement).
    pub fn from_store(store: RootCertStore) -> TlsTrust {
        TlsTrust {
            roots: Arc::new(store),
        }
    }

    /// These roots plus every certificate in `pem` (as `--ca-file` adds).
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] if `pem` holds no usable certificate.
    pub fn with_pem(mut self, pem: &[u8]) -> Result<TlsTrust, NetError> {
        add_pem_roots(Arc::make_mut(&mut self.roots), pem)?;
        Ok(self)
    }

    /// How many roots are trusted.
    pub fn len(&self) -> usize {
        self.roots.len()
    }

    /// Whether no root is trusted.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }
}

impl Default for TlsTrust {
    fn default() -> TlsTrust {
        TlsTrust::webpki()
    }
}

/// A certificate chain and its private key, PEM-encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsIdentity {
    /// The chain, leaf first.
    pub certificate_chain_pem: Vec<u8>,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub private_key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsIdentity")
            .field(
                "certificate_chain_pem",
                &format_args!("{} bytes", self.certificate_chain_pem.len()),
            )
            .field("private_key_pem", &"(hidden)")
            .finish()
    }
}

/// A TLS client's choices for one connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsClientOptions {
    /// Protocols offered with ALPN, in order of preference.
    pub alpn: Vec<Vec<u8>>,
    /// PEM roots trusted for this connection, besides the run's.
    pub extra_roots_pem: Option<Vec<u8>>,
    /// A client certificate to present (mutual TLS).
    pub identity: Option<TlsIdentity>,
}

/// A TLS server's configuration (for a listener or a server upgrade).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsServerOptions {
    /// The certificate chain and key to present.
    pub identity: TlsIdentity,
    /// Protocols accepted with ALPN, in order of preference.
    pub alpn: Vec<Vec<u8>>,
    /// Require client certificates signed by these PEM roots.
    pub client_roots_pem: Option<Vec<u8>>,
    /// Bound on each handshake
    /// (10 s if `None`);
    /// never more than the run's cap
    /// ([`Limits::tls_handshake_timeout`](crate::net::Limits)).
    pub handshake_timeout: Option<Duration>,
}

/// A run's TLS state: its trust and the configurations its guest's
/// options made (`configs.rs`).
pub struct TlsContext {
    trust: TlsTrust,
    clients: Configs<rustls::ClientConfig>,
    servers: Configs<rustls::ServerConfig>,
}

impl TlsContext {
    /// A context trusting `trust`.
    pub fn new(trust: TlsTrust) -> TlsContext {
        TlsContext {
            trust,
            clients: Configs::new("TLS client configuration"),
            servers: Configs::new("TLS server configuration"),
        }
    }

    /// The trusted roots.
    pub fn trust(&self) -> &TlsTrust {
        &self.trust
    }

    /// The client configuration for `options`: the run's one for the
    /// same content, or a new one paid from `budget`.
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] for unusable or oversized roots or
    /// identity; [`NetError::LimitReached`] past the run's host memory.
    pub(crate) fn client_config(
        &self,
        options: &TlsClientOptions,
        budget: &Arc<Budget>,
    ) -> Result<Arc<rustls::ClientConfig>, NetError> {
        let alpn = check_alpn(&options.alpn)?;
        let roots = options
            .extra_roots_pem
            .as_deref()
            .map(|pem| parse_roots(pem, "extra roots"))
            .transpose()?;
        let identity = options.identity.as_ref().map(parse_identity).transpose()?;
        let mut key = KeyBuilder::default();
        let mut bytes = CLIENT_CONFIG_OVERHEAD + alpn;
        for protocol in &options.alpn {
            key = key.part(b'a', protocol);
        }
        if let Some(roots) = &roots {
            bytes += self.trust.len() * ANCHOR_BYTES;
            for root in roots {
                key = key.part(b'r', root);
                bytes += root.len();
            }
        }
        if let Some((chain, private)) = &identity {
            for cert in chain {
                key = key.part(b'c', cert);
                bytes += cert.len();
            }
            key = key.part(b'k', private.secret_der());
            bytes += private.secret_der().len();
        }
        self.clients
            .get_or_build(key.finish(), bytes, budget, move || {
                client::build_config(&self.trust, &options.alpn, roots, identity)
            })
    }

    /// The server configuration for `options`: the run's one for the same
    /// content, or a new one paid from `budget`.
    ///
    /// # Errors
    /// As [`client_config`](Self::client_config).
    pub(crate) fn server_config(
        &self,
        options: &TlsServerOptions,
        budget: &Arc<Budget>,
    ) -> Result<Arc<rustls::ServerConfig>, NetError> {
        let alpn = check_alpn(&options.alpn)?;
        let (chain, private) = parse_identity(&options.identity)?;
        let client_roots = options
            .client_roots_pem
            .as_deref()
            .map(|pem| parse_roots(pem, "client roots"))
            .transpose()?;
        let mut key = KeyBuilder::default();
        let mut bytes = SERVER_CONFIG_OVERHEAD + alpn;
        for protocol in &options.alpn {
            key = key.part(b'a', protocol);
        }
        for cert in &chain {
            key = key.part(b'c', cert);
            bytes += cert.len();
        }
        key = key.part(b'k', private.secret_der());
        bytes += private.secret_der().len();
        if let Some(roots) = &client_roots {
            // Tagged apart from "no client roots": an empty set is refused.
            key = key.part(b'v', b"");
            for root in roots {
                key = key.part(b'r', root);
                bytes += root.len() + ANCHOR_BYTES;
            }
        }
        self.servers
            .get_or_build(key.finish(), bytes, budget, move || {
                server::build_config(&options.alpn, chain, private, client_roots)
            })
    }
}

impl Default for TlsContext {
    fn default() -> TlsContext {
        TlsContext::new(TlsTrust::webpki())
    }
}

/// Adds every certificate of `pem` to `store`.
fn add_pem_roots(store: &mut RootCertStore, pem: &[u8]) -> Result<usize, NetError> {
    let mut added = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert =
            cert.map_err(|e| NetError::InvalidArgument(format!("root certificates: {e}")))?;
        store
            .add(cert)
            .map_err(|e| NetError::InvalidArgument(format!("root certificate: {e}")))?;
        added += 1;
    }
    if added == 0 {
        return Err(NetError::InvalidArgument(
            "root certificates: no PEM certificate found".into(),
        ));
    }
    Ok(added)
}

/// `pem`, if it is within [`MAX_PEM_BYTES`].
fn bounded_pem<'a>(pem: &'a [u8], what: &str) -> Result<&'a [u8], NetError> {
    if pem.len() > MAX_PEM_BYTES {
        return Err(NetError::InvalidArgument(format!(
            "{what}: {} bytes of PEM, more than the {MAX_PEM_BYTES} a TLS input may have",
            pem.len()
        )));
    }
    Ok(pem)
}

/// The certificates of a guest's `pem`: at least one, at most `max` (past
/// it, `too_many` says what).
fn certificates(
    pem: &[u8],
    what: &str,
    max: usize,
    too_many: impl FnOnce() -> String,
) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(bounded_pem(pem, what)?) {
        let cert = cert.map_err(|e| NetError::InvalidArgument(format!("{what}: {e}")))?;
        if certs.len() == max {
            return Err(NetError::InvalidArgument(format!("{what}: {}", too_many())));
        }
        certs.push(cert);
    }
    if certs.is_empty() {
        return Err(NetError::InvalidArgument(format!(
            "{what}: no PEM certificate found"
        )));
    }
    Ok(certs)
}

/// The certificates of a guest's `pem` roots: at least one, at most
/// [`MAX_GUEST_ROOTS`].
fn parse_roots(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, NetError> {
    certificates(pem, what, MAX_GUEST_ROOTS, || {
        format!("more than {MAX_GUEST_ROOTS} certificates")
    })
}

/// Adds `roots` to `store`.
fn add_roots(
    store: &mut RootCertStore,
    roots: Vec<CertificateDer<'static>>,
    what: &str,
) -> Result<(), NetError> {
    for cert in roots {
        store
            .add(cert)
            .map_err(|e| NetError::InvalidArgument(format!("{what}: {e}")))?;
    }
    Ok(())
}

/// The total size of an ALPN list, if the TLS extension can carry it (at
/// most 65,535 bytes; each protocol 1 to 255 bytes).
fn check_alpn(alpn: &[Vec<u8>]) -> Result<usize, NetError> {
    let mut total = 0usize;
    for protocol in alpn {
        if protocol.is_empty() || protocol.len() > 255 {
            return Err(NetError::InvalidArgument(format!(
                "ALPN protocol of {} bytes (each is 1 to 255)",
                protocol.len()
            )));
        }
        total += protocol.len() + 1;
    }
    if total > usize::from(u16::MAX) {
        return Err(NetError::InvalidArgument(format!(
            "ALPN list of {total} bytes (at most {})",
            u16::MAX
        )));
    }
    Ok(total)
}

/// The certificate chain and key of `identity`, each within
/// [`MAX_PEM_BYTES`], the chain at most [`MAX_CHAIN_CERTIFICATES`] long.
fn parse_identity(
    identity: &TlsIdentity,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), NetError> {
    let chain = certificates(
        &identity.certificate_chain_pem,
        "certificate",
        MAX_CHAIN_CERTIFICATES,
        || format!("a chain of more than {MAX_CHAIN_CERTIFICATES} certificates"),
    )?;
    let key = PrivateKeyDer::from_pem_slice(bounded_pem(&identity.private_key_pem, "private key")?)
        .map_err(|e| NetError::InvalidArgument(format!("private key: {e}")))?;
    Ok((chain, key))
}

/// The protocol versions moat speaks (TLS 1.2 and 1.3), with its provider.
fn versions_error(e: rustls::Error) -> NetError {
    NetError::TlsHandshake(format!("cannot configure TLS: {e}"))
}

/// A TLS failure, as the error a guest can act on: whose certificate
/// failed and why, or the handshake's own failure.
pub(crate) fn error(err: io::Error) -> NetError {
    match err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => from_rustls(tls),
        None => NetError::from(err),
    }
}

/// A handshake's failure: [`error`]'s, but for a peer that closed the
/// connection before the handshake was done, which is the handshake's
/// failure too (an HTTP server answering a ClientHello, half a record),
/// not an unexplained end.
pub(crate) fn handshake_error(err: io::Error) -> NetError {
    if err.kind() == io::ErrorKind::UnexpectedEof {
        return NetError::TlsHandshake(
            "the peer closed the connection before the handshake was done".into(),
        );
    }
    error(err)
}

pub(crate) fn from_rustls(err: &rustls::Error) -> NetError {
    use rustls::CertificateError as C;
    let text = err.to_string();
    match err {
        rustls::Error::InvalidCertificate(cert) => match cert {
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                NetError::CertificateNameMismatch(text)
            }
            C::Expired
            | C::ExpiredContext { .. }
            | C::NotValidYet
            | C::NotValidYetContext { .. } => NetError::CertificateExpired(text),
            C::UnknownIssuer | C::BadSignature | C::BadEncoding | C::UnhandledCriticalExtension => {
                NetError::CertificateUntrusted(text)
            }
            _ => NetError::CertificateUntrusted(text),
        },
        _ => NetError::TlsHandshake(text),
    }
}

#[cfg(test)]
mod tests;
