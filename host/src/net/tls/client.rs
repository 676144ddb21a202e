//! The client side: configurations, server names, handshakes.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{TlsTrust, add_roots, handshake_error, provider, versions_error};
use crate::net::error::NetError;
use crate::net::io::{Prefixed, TlsStream};
use moat_policy::policy::Host;
use moat_policy::setting::Setting;

/// A client configuration over `trust` plus the guest's `roots`, with
/// `identity` as its client certificate.
pub(super) fn build_config(
    trust: &TlsTrust,
    alpn: &[Vec<u8>],
    roots: Option<Vec<CertificateDer<'static>>>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<ClientConfig, NetError> {
    let roots = match roots {
        None => Arc::clone(&trust.roots),
        Some(roots) => {
            let mut store = (*trust.roots).clone();
            add_roots(&mut store, roots, "extra roots")?;
            Arc::new(store)
        }
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(versions_error)?
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| NetError::InvalidArgument(format!("client certificate: {e}")))?,
    };
    config.alpn_protocols = alpn.to_vec();
    Ok(config)
}

/// The name a client verifies the server's certificate against, and sends
/// as SNI: the host as written. An IP literal is verified against the
/// certificate's IP addresses and sends no SNI.
pub(crate) fn server_name(host: &Host) -> Result<ServerName<'static>, NetError> {
    match host {
        Host::Name(name) => ServerName::try_from(name.clone()).map_err(|e| {
            NetError::InvalidArgument(format!("{name} is not a TLS server name: {e}"))
        }),
        Host::Ip(ip) => Ok(ServerName::IpAddress(ip.to_canonical().into())),
    }
}

/// A client handshake over `stream`, after replaying `already_read`,
/// bounded by `limit`, which the run's `cap` setting caps.
pub(crate) async fn handshake_client(
    stream: TcpStream,
    already_read: Vec<u8>,
    name: ServerName<'static>,
    config: Arc<ClientConfig>,
    limit: Duration,
    cap: Setting,
) -> Result<TlsStream, NetError> {
    let connector = TlsConnector::from(config);
    match tokio::time::timeout(
        limit,
        connector.connect(name, Prefixed::new(stream, already_read)),
    )
    .await
    {
        Err(_) => Err(NetError::timed_out(
            format!(
                "TLS handshake took longer than {limit:?}, the handshake timeout, which the run caps"
            ),
            Some(cap),
        )),
        Ok(Err(e)) => Err(handshake_error(e)),
        Ok(Ok(tls)) => Ok(TlsStream::Client(tls)),
    }
}
