//! The server side: a configuration parsed once, handshakes.

use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{TlsServerOptions, add_roots, handshake_error, provider, versions_error};
use crate::net::error::NetError;
use crate::net::io::{Prefixed, TlsStream};
use crate::net::limits::DEFAULT_TLS_HANDSHAKE_TIMEOUT;
use moat_policy::setting::Setting;

/// A server configuration, parsed and checked once (at listen, or at an
/// upgrade): a certificate or key that cannot be used fails there, not at
/// every handshake.
#[derive(Clone)]
pub(crate) struct ServerTls {
    acceptor: TlsAcceptor,
    limit: Duration,
    /// The run's setting that caps `limit`.
    cap_setting: Setting,
}

impl ServerTls {
    /// Serves with `config`, each handshake bounded by `options`' timeout
    /// (at most `cap`).
    pub(crate) fn new(
        config: Arc<rustls::ServerConfig>,
        options: &TlsServerOptions,
        cap: Duration,
        cap_setting: Setting,
    ) -> ServerTls {
        ServerTls {
            acceptor: TlsAcceptor::from(config),
            limit: options
                .handshake_timeout
                .unwrap_or(DEFAULT_TLS_HANDSHAKE_TIMEOUT)
                .min(cap),
            cap_setting,
        }
    }
}

/// A server configuration presenting `chain` and `key`, requiring client
/// certificates signed by `client_roots` if given.
pub(super) fn build_config(
    alpn: &[Vec<u8>],
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    client_roots: Option<Vec<CertificateDer<'static>>>,
) -> Result<rustls::ServerConfig, NetError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(versions_error)?;
    let builder = match client_roots {
        None => builder.with_no_client_auth(),
        Some(client_roots) => {
            let mut roots = RootCertStore::empty();
            add_roots(&mut roots, client_roots, "client roots")?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| NetError::InvalidArgument(format!("client roots: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| NetError::InvalidArgument(format!("certificate and key: {e}")))?;
    config.alpn_protocols = alpn.to_vec();
    Ok(config)
}

/// A server handshake over `stream`, after replaying `already_read`,
/// bounded by the configuration's handshake timeout.
pub(crate) async fn handshake_server(
    tls: &ServerTls,
    stream: TcpStream,
    already_read: Vec<u8>,
) -> Result<TlsStream, NetError> {
    let accepting = tls.acceptor.accept(Prefixed::new(stream, already_read));
    match tokio::time::timeout(tls.limit, accepting).await {
        Err(_) => Err(NetError::timed_out(
            format!(
                "TLS handshake took longer than {:?}, the handshake timeout (the \
                 `handshake-timeout` option), which the run caps",
                tls.limit
            ),
            Some(tls.cap_setting),
        )),
        Ok(Err(e)) => Err(handshake_error(e)),
        Ok(Ok(session)) => Ok(TlsStream::Server(session)),
    }
}
