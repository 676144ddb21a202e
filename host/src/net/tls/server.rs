//! The server side: a configuration parsed once, handshakes.

use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::{
    DEFAULT_HANDSHAKE_TIMEOUT, TlsServerOptions, add_pem_roots, error, parse_identity, provider,
    versions_error,
};
use crate::net::error::NetError;
use crate::net::tcp::io::{Prefixed, TlsStream};

/// A server configuration, parsed and checked once (at listen, or at an
/// upgrade): a certificate or key that cannot be used fails there, not at
/// every handshake.
#[derive(Clone)]
pub(crate) struct ServerTls {
    acceptor: TlsAcceptor,
    limit: Duration,
}

impl ServerTls {
    pub(crate) fn new(options: &TlsServerOptions, cap: Duration) -> Result<ServerTls, NetError> {
        let (chain, key) = parse_identity(&options.identity)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(versions_error)?;
        let builder = match &options.client_roots_pem {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = RootCertStore::empty();
                add_pem_roots(&mut roots, pem)?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()
                        .map_err(|e| NetError::InvalidArgument(format!("client roots: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| NetError::InvalidArgument(format!("certificate and key: {e}")))?;
        config.alpn_protocols = options.alpn.clone();
        Ok(ServerTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            limit: options
                .handshake_timeout
                .unwrap_or(DEFAULT_HANDSHAKE_TIMEOUT)
                .min(cap),
        })
    }
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
        Err(_) => Err(NetError::TimedOut),
        Ok(Err(e)) => Err(error(e)),
        Ok(Ok(session)) => Ok(TlsStream::Server(session)),
    }
}
