//! Certificates made at test time with rcgen: a private CA and leaves.
#![allow(dead_code)]

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension, DnType, IsCa, KeyPair,
    date_time_ymd,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The peers' crypto provider, named explicitly (as the host does).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn alpn_list(alpn: &[&str]) -> Vec<Vec<u8>> {
    alpn.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// A private certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    /// The CA's certificate, PEM (what a client trusts).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A rustls client (a real peer for the tests) trusting only this CA.
    pub fn connector(&self, alpn: &[&str]) -> TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn_list(alpn);
        TlsConnector::from(Arc::new(config))
    }

    /// A leaf for `names` (DNS names or IP addresses), valid now.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        self.make(names, false)
    }

    /// A leaf for `names` that expired in 2001.
    pub fn expired_leaf(&self, names: &[&str]) -> Leaf {
        self.make(names, true)
    }

    fn make(&self, names: &[&str], expired: bool) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        if expired {
            params.not_before = date_time_ymd(2000, 1, 1);
            params.not_after = date_time_ymd(2001, 1, 1);
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

impl Leaf {
    /// A rustls server (a real peer for the tests) presenting this leaf.
    pub fn acceptor(&self, alpn: &[&str]) -> TlsAcceptor {
        let chain = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = alpn_list(alpn);
        TlsAcceptor::from(Arc::new(config))
    }

    pub fn identity(&self) -> moat_host::net::TlsIdentity {
        moat_host::net::TlsIdentity {
            certificate_chain_pem: self.cert_pem.clone().into_bytes(),
            private_key_pem: self.key_pem.clone().into_bytes(),
        }
    }
}

/// A self-signed certificate of about `bytes` bytes of DER, PEM: a
/// non-critical private extension of `bytes` bytes makes it that big. A
/// chain may carry it as padding (a peer never needs it: the leaf's issuer
/// is a root), and each one made is distinct.
pub fn padding_certificate(bytes: usize) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "moat padding");
    // 1.3.6.1.4.1.55555: a private enterprise arc no verifier knows.
    params
        .custom_extensions
        .push(CustomExtension::from_oid_content(
            &[1, 3, 6, 1, 4, 1, 55555, 1],
            vec![0x5a; bytes],
        ));
    params.self_signed(&key).unwrap().pem()
}
