//! TLS with rustls: client and server configurations, trust, errors.
//!
//! - The crypto provider is named at every configuration built (ring):
//!   moat never relies on rustls's process-wide default, which panics when
//!   two providers are linked into one binary.
//! - Trust is webpki-roots by default, built once per process and shared;
//!   a run can add roots (`--ca-file`) or replace the store (embedding), and
//!   a guest can add its own for one connection.
//! - Client configurations are memoized by what varies between connects
//!   (ALPN list, extra roots), so a connect does not rebuild the root store.
//! - A handshake is bounded in time, on both sides.

mod client;
mod server;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::error::NetError;

pub(crate) use client::{handshake_client, server_name};
pub(crate) use server::{ServerTls, handshake_server};

/// How long a TLS handshake may take before the connection is dropped: a
/// client that opens a connection and never finishes its handshake must
/// not hold a slot (or, on connect, the guest) for longer than this.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most client configurations kept per run. Distinct ALPN lists and
/// per-connection root sets are few in practice; past this many the cache
/// starts over rather than grow.
const CLIENT_CONFIGS_KEPT: usize = 32;

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
    /// Bound on each handshake ([`DEFAULT_HANDSHAKE_TIMEOUT`] if `None`);
    /// never more than the run's cap
    /// ([`Limits::tls_handshake_timeout`](crate::net::Limits)).
    pub handshake_timeout: Option<Duration>,
}

/// A run's TLS state: its trust and its memoized client configurations.
pub struct TlsContext {
    trust: TlsTrust,
    client_configs: Mutex<HashMap<ClientKey, Arc<rustls::ClientConfig>>>,
}

/// What makes two client configurations differ.
#[derive(Hash, PartialEq, Eq)]
struct ClientKey {
    alpn: Vec<Vec<u8>>,
    extra_roots_pem: Option<Vec<u8>>,
}

impl TlsContext {
    /// A context trusting `trust`.
    pub fn new(trust: TlsTrust) -> TlsContext {
        TlsContext {
            trust,
            client_configs: Mutex::default(),
        }
    }

    /// The trusted roots.
    pub fn trust(&self) -> &TlsTrust {
        &self.trust
    }

    /// The client configuration for `options`, built once per distinct
    /// ALPN list and root set (a client certificate is per connection and
    /// never cached).
    pub(crate) fn client_config(
        &self,
        options: &TlsClientOptions,
    ) -> Result<Arc<rustls::ClientConfig>, NetError> {
        if options.identity.is_some() {
            return client::build_config(&self.trust, options).map(Arc::new);
        }
        let key = ClientKey {
            alpn: options.alpn.clone(),
            extra_roots_pem: options.extra_roots_pem.clone(),
        };
        let mut cache = self
            .client_configs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(config) = cache.get(&key) {
            return Ok(Arc::clone(config));
        }
        let config = Arc::new(client::build_config(&self.trust, options)?);
        if cache.len() >= CLIENT_CONFIGS_KEPT {
            cache.clear();
        }
        cache.insert(key, Arc::clone(&config));
        Ok(config)
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

/// The certificate chain and key of `identity`.
fn parse_identity(
    identity: &TlsIdentity,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), NetError> {
    let chain = CertificateDer::pem_slice_iter(&identity.certificate_chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| NetError::InvalidArgument(format!("certificate: {e}")))?;
    if chain.is_empty() {
        return Err(NetError::InvalidArgument(
            "certificate: no PEM certificate found".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&identity.private_key_pem)
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
