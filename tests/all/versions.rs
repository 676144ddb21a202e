//! Every released moat:net version is served: a guest built against
//! 0.2.0, with no SDK, runs beside guests built against the current one.

use crate::support::certs::Ca;
use crate::support::{self, guests};
use moat_host::policy::Policy;

#[tokio::test]
async fn a_guest_built_against_moat_net_0_2_0_still_runs() {
    let (echo_port, received) = support::echo_server().await;
    let closed_port = support::free_port();
    let policy = Policy::new()
        .allow_connect("127.0.0.1")
        .unwrap()
        .allow_listen("127.0.0.1")
        .unwrap();
    let ca = Ca::new("moat test CA");
    let leaf = ca.leaf(&["127.0.0.1"]);
    let done = support::run(
        guests::NET_V0_2,
        policy,
        &[
            &echo_port.to_string(),
            &closed_port.to_string(),
            &ca.pem(),
            &leaf.cert_pem,
            &leaf.key_pem,
        ],
    )
    .await;
    assert_eq!(done.code(), 0, "{}{}", done.stdout, done.stderr);
    // 0.2.0's cases carry no text where 0.3.0's do; its denial is the same.
    assert_eq!(
        done.stdout,
        "echo: hello from moat:net 0.2.0\n\
         echo local address is loopback: true\n\
         refused: connection-refused\n\
         denied: connect to 127.0.0.3:1 denied: needs --allow-net=127.0.0.3:1\n\
         datagram: ping from its own port: true\n\
         accepted its own connection: true\n\
         tls: hello over TLS from moat:net 0.2.0 (TLS both ends: true, \
         ALPN Some(\"moat-v0-2\") / Some(\"moat-v0-2\"))\n"
    );
    assert_eq!(received.await.unwrap(), b"hello from moat:net 0.2.0");
}
