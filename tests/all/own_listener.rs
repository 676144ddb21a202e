//! A program connecting to its own listener, as CPython's `socketpair()`
//! (and so every asyncio program) does: admitted by the listen grant
//! alone, through loopback, while the listener listens; nothing else is
//! opened by it.

use crate::support::{self, Finished, connections, guests, within};
use moat_host::policy::Policy;
use tokio::io::AsyncWriteExt;

/// Asserts that `done` made a socket pair through its own listener and
/// moved the bytes both ways.
#[track_caller]
fn assert_paired(done: &Finished) {
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    for line in [
        "accepted peer is the client: true",
        "server read: ping from the client",
        "client read: pong from the server",
    ] {
        assert!(done.stdout.contains(line), "{line:?}:\n{}", done.stdout);
    }
    assert!(!done.stderr.contains("denied"), "{}", done.stderr);
}

fn listen_only(entry: &str) -> Policy {
    Policy::new().allow_listen(entry).unwrap()
}

#[tokio::test]
async fn every_kind_of_guest_reaches_its_own_loopback_listener_with_the_listen_grant_alone() {
    let std_net = support::run(
        guests::STD_NET,
        listen_only("127.0.0.1:0"),
        &["self-connect", "127.0.0.1:0"],
    );
    let p3 = support::run(
        guests::SOCKETS_P3,
        listen_only("127.0.0.1:0"),
        &["self-connect"],
    );
    let sdk = support::run(
        guests::PROBE,
        listen_only("127.0.0.1:0"),
        &["self-connect", "127.0.0.1"],
    );
    let v6 = support::run(
        guests::STD_NET,
        listen_only("[::1]:0"),
        &["self-connect", "[::1]:0"],
    );
    let (std_net, p3, sdk, v6) = tokio::join!(std_net, p3, sdk, v6);
    for done in [&std_net, &p3, &sdk, &v6] {
        assert_paired(done);
    }
}

#[tokio::test]
async fn a_listener_on_every_interface_is_the_programs_own_through_loopback() {
    let std_net = support::run(
        guests::STD_NET,
        listen_only("0.0.0.0:0"),
        &["self-connect", "0.0.0.0:0", "127.0.0.1"],
    );
    let sdk = support::run(
        guests::PROBE,
        listen_only("0.0.0.0:0"),
        &["self-connect", "0.0.0.0", "127.0.0.1"],
    );
    let (std_net, sdk) = tokio::join!(std_net, sdk);
    assert_paired(&std_net);
    assert_paired(&sdk);
}

#[tokio::test]
async fn a_deny_entry_for_loopback_does_not_split_a_programs_own_pair() {
    // `private` names loopback; the program's own pair is not the network
    // it keeps the program off.
    let policy = listen_only("127.0.0.1:0")
        .allow_connect("*")
        .unwrap()
        .deny_connect("private")
        .unwrap();
    let done = support::run(guests::STD_NET, policy, &["self-connect", "127.0.0.1:0"]).await;
    assert_paired(&done);
}

#[tokio::test]
async fn a_closed_own_listener_is_judged_as_any_address_and_its_port_is_not_offered_as_a_grant() {
    // The guest listens, closes, and waits; this test takes the port the
    // guest's listener had, then lets the guest connect to it.
    let signal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let signal_port = signal.local_addr().unwrap().port();
    let policy = listen_only("127.0.0.1:0")
        .allow_connect(&format!("127.0.0.1:{signal_port}"))
        .unwrap();
    let sp = signal_port.to_string();
    let running = support::start(
        guests::STD_NET,
        policy,
        &["self-connect-after-close", "127.0.0.1:0", &sp],
    );
    let had = running.listening_addr().await;
    let (mut line, _) = within("the guest's signal", signal.accept()).await.unwrap();
    // The listener closed before the guest connected to the signal port.
    let taken = std::net::TcpListener::bind(had).expect("the guest's closed port");
    taken.set_nonblocking(true).unwrap();
    line.write_all(b"g").await.unwrap();
    let done = running.finish().await;
    assert_eq!(done.code(), 1, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("error: PermissionDenied"),
        "{}",
        done.stdout
    );
    let port = had.port();
    let expected = format!(
        "moat: std-net: connect to 127.0.0.1:{port} denied: port {port} was the program's own \
         listener (on 127.0.0.1:{port}), closed before this connect; a connect to its own \
         listener needs no grant only while it listens"
    );
    assert!(done.stderr.contains(&expected), "{}", done.stderr);
    assert!(
        !done
            .stderr
            .contains(&format!("--allow-net=127.0.0.1:{port}")),
        "{}",
        done.stderr
    );
    assert_eq!(connections(&taken), 0, "the connect reached another socket");
}

/// A std-net guest listening on 127.0.0.1:0 and connecting to its port on
/// `host`, refused: its stderr, and the listener's port.
async fn refused_through(host: &str) -> (String, String) {
    let done = support::run(
        guests::STD_NET,
        listen_only("127.0.0.1:0"),
        &["self-connect", "127.0.0.1:0", host],
    )
    .await;
    assert_eq!(done.code(), 1, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("error: PermissionDenied"),
        "{}",
        done.stdout
    );
    let port = done
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("listening on 127.0.0.1:"))
        .expect("the listener's address")
        .to_owned();
    (done.stderr, port)
}

#[tokio::test]
async fn a_listener_reached_through_another_address_is_not_the_programs_own() {
    // 127.0.0.2 is another loopback address: no listener of the guest's
    // is there, but its port is the guest's own listener's.
    let (stderr, port) = refused_through("127.0.0.2").await;
    assert!(
        stderr.contains(&format!(
            "connect to 127.0.0.2:{port} denied: port {port} is the program's own listener \
             (on 127.0.0.1:{port})"
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn another_host_on_the_listeners_port_gets_the_usual_hint() {
    // 192.0.2.7 (TEST-NET-1) is not this machine: the denial names the
    // grant as for any host, not the program's own listener. Nothing is
    // sent: the connect is refused before its syscall.
    let (stderr, port) = refused_through("192.0.2.7").await;
    assert!(
        stderr.contains(&format!(
            "connect to 192.0.2.7:{port} denied: needs --allow-net=192.0.2.7:{port}"
        )),
        "{stderr}"
    );
}
