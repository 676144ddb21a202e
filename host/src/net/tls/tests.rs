//! Unit tests of the TLS helpers; the handshakes are tested end to end in
//! tests/all/tls_core.rs and tests/all/tls.rs.

use super::*;
use crate::net::budget::Budget;
use moat_policy::setting::{Setting, Spelling, Worded as _};

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

/// A self-signed certificate for `name` and its key, PEM.
fn self_signed(name: &str) -> TlsIdentity {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    TlsIdentity {
        certificate_chain_pem: cert.pem().into_bytes(),
        private_key_pem: key.serialize_pem().into_bytes(),
    }
}

fn server_options(identity: TlsIdentity) -> TlsServerOptions {
    TlsServerOptions {
        identity,
        alpn: Vec::new(),
        client_roots_pem: None,
        handshake_timeout: None,
    }
}

#[test]
fn one_content_is_one_configuration_whatever_its_pem_comments() {
    let tls = TlsContext::default();
    let budget = Budget::new(None);
    let identity = self_signed("a.test");
    let mut commented = identity.clone();
    commented.certificate_chain_pem = [
        b"# a comment rustls skips\n".as_slice(),
        &identity.certificate_chain_pem,
        b"\ntrailing text\n",
    ]
    .concat();
    let first = tls
        .server_config(&server_options(identity.clone()), &budget)
        .unwrap();
    let second = tls
        .server_config(&server_options(commented), &budget)
        .unwrap();
    assert!(Arc::ptr_eq(&first, &second), "one configuration, shared");
    let paid = budget.used();
    assert!(paid > 0);
    // Another certificate is another configuration, paid for too.
    let other = tls
        .server_config(&server_options(self_signed("b.test")), &budget)
        .unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
    assert!(budget.used() > paid);
    assert_eq!(tls.servers.len(), 2);

    // Clients: the same roots in other PEM spelling are one configuration.
    let roots = self_signed("root.test").certificate_chain_pem;
    let client = |pem: Vec<u8>| TlsClientOptions {
        extra_roots_pem: Some(pem),
        ..TlsClientOptions::default()
    };
    let a = tls.client_config(&client(roots.clone()), &budget).unwrap();
    let b = tls
        .client_config(&client([b"\n\n".as_slice(), &roots].concat()), &budget)
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
}

#[test]
fn configurations_past_the_budget_are_refused_and_unused_ones_make_room() {
    let tls = TlsContext::default();
    let identity = self_signed("a.test");
    let one = {
        let probe = Budget::new(None);
        let _ = tls
            .server_config(&server_options(identity.clone()), &probe)
            .unwrap();
        probe.used()
    };
    let tls = TlsContext::default();
    // Room for one configuration and a half.
    let budget = Budget::new(Some(one + one / 2));
    let held = tls
        .server_config(&server_options(identity), &budget)
        .unwrap();
    let refused = tls
        .server_config(&server_options(self_signed("b.test")), &budget)
        .unwrap_err();
    assert!(
        refused.limit_setting() == Some(Setting::MaxHostMemory)
            && refused
                .worded(Spelling::Flags)
                .to_string()
                .contains("--max-host-memory"),
        "{refused}"
    );
    // Once no socket holds the first, the second takes its place.
    drop(held);
    tls.server_config(&server_options(self_signed("b.test")), &budget)
        .unwrap();
    assert_eq!(tls.servers.len(), 1);
}

#[test]
fn oversized_and_overlong_tls_inputs_are_refused_before_anything_is_built() {
    let tls = TlsContext::default();
    let budget = Budget::new(None);
    let identity = self_signed("a.test");
    let mut padded = identity.clone();
    padded
        .certificate_chain_pem
        .extend(std::iter::repeat_n(b'#', MAX_PEM_BYTES));
    let err = tls
        .server_config(&server_options(padded), &budget)
        .unwrap_err();
    assert!(
        matches!(&err, NetError::InvalidArgument(why) if why.contains("bytes of PEM")),
        "{err}"
    );
    let mut long = identity.clone();
    let one = long.certificate_chain_pem.clone();
    for _ in 0..MAX_CHAIN_CERTIFICATES {
        long.certificate_chain_pem.extend_from_slice(&one);
    }
    let err = tls
        .server_config(&server_options(long), &budget)
        .unwrap_err();
    assert!(
        matches!(&err, NetError::InvalidArgument(why) if why.contains("a chain of more than")),
        "{err}"
    );
    let many_roots = one.repeat(MAX_GUEST_ROOTS + 1);
    let err = tls
        .client_config(
            &TlsClientOptions {
                extra_roots_pem: Some(many_roots),
                ..TlsClientOptions::default()
            },
            &budget,
        )
        .unwrap_err();
    assert!(matches!(err, NetError::InvalidArgument(_)), "{err}");
    let err = tls
        .client_config(
            &TlsClientOptions {
                alpn: vec![Vec::new()],
                ..TlsClientOptions::default()
            },
            &budget,
        )
        .unwrap_err();
    assert!(matches!(err, NetError::InvalidArgument(_)), "{err}");
    assert_eq!(budget.used(), 0, "nothing was built");
}
