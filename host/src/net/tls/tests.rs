//! Unit tests of the TLS helpers; the handshakes are tested end to end in
//! tests/tls_core.rs and tests/tls.rs.

use super::*;

#[test]
fn certificate_errors_map_to_what_a_guest_can_act_on() {
    use rustls::CertificateError as C;
    let map = |c: C| from_rustls(&rustls::Error::InvalidCertificate(c));
    assert!(matches!(
        map(C::UnknownIssuer),
        NetError::CertificateUntrusted(_)
    ));
    assert!(matches!(
        map(C::NotValidForName),
        NetError::CertificateNameMismatch(_)
    ));
    assert!(matches!(map(C::Expired), NetError::CertificateExpired(_)));
    assert!(matches!(
        map(C::NotValidYet),
        NetError::CertificateExpired(_)
    ));
    assert!(matches!(
        from_rustls(&rustls::Error::NoApplicationProtocol),
        NetError::TlsHandshake(_)
    ));
    // Wrapped in an io::Error, as tokio-rustls reports them.
    let io = io::Error::new(
        io::ErrorKind::InvalidData,
        rustls::Error::InvalidCertificate(C::Expired),
    );
    assert!(matches!(error(io), NetError::CertificateExpired(_)));
}

#[test]
fn trust_starts_from_the_mozilla_roots_and_takes_more_from_pem() {
    let webpki = TlsTrust::webpki();
    assert!(webpki.len() > 100);
    assert!(matches!(
        webpki.clone().with_pem(b"no certificates here"),
        Err(NetError::InvalidArgument(_))
    ));
    assert!(TlsTrust::from_store(RootCertStore::empty()).is_empty());
}

#[test]
fn identities_are_checked_when_parsed() {
    let garbage = TlsIdentity {
        certificate_chain_pem: b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"
            .to_vec(),
        private_key_pem: Vec::new(),
    };
    assert!(matches!(
        parse_identity(&garbage),
        Err(NetError::InvalidArgument(_))
    ));
    // The key never shows in debug output.
    let shown = format!("{garbage:?}");
    assert!(shown.contains("(hidden)"), "{shown}");
}
