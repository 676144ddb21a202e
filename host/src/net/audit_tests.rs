//! The audit trail as the socket core feeds it: each decision once, with
//! the rule as written and where, the addresses a name resolved to and the
//! address used; a UDP flood as counts.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener as PeerListener;
use tokio::net::UdpSocket as Peer;

use crate::audit::{Audit, AuditRecord, AuditSink, Body, Context, Operation, Outcome, Reason};
use crate::net::{
    BindOptions, ConnectOptions, Lookup, Net, NetConfig, NetError, PendingWrites, Resolver,
};
use moat_policy::policy::Source;
use moat_policy::settings::{Origin, Setting, Settings, Spelling, Worded as _};

/// A sink that keeps what it is given.
#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<AuditRecord>>>);

impl AuditSink for Kept {
    fn write(&mut self, record: &AuditRecord) -> std::io::Result<()> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

/// Answers every name with the same addresses.
struct Fixed(Vec<IpAddr>);

impl Resolver for Fixed {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        let addresses = self.0.clone();
        Box::pin(async move { Ok(addresses) })
    }
}

/// A network under `flags` (as `moat run` reads them), recording on a
/// trail whose records are returned by the closure, after the trail is
/// finished.
fn audited(flags: &[(Setting, &str)]) -> (Net, Audit, Kept) {
    audited_with(flags, None)
}

/// As [`audited`], names resolved by `resolver`.
fn audited_with(
    flags: &[(Setting, &str)],
    resolver: Option<Arc<dyn crate::net::Resolver>>,
) -> (Net, Audit, Kept) {
    let mut settings = Settings::new();
    for (setting, value) in flags {
        settings.set(&Origin::Flag, *setting, *value).unwrap();
    }
    let kept = Kept::default();
    let audit = Audit::start(
        Box::new(kept.clone()),
        Context::new(None),
        crate::settings::audited(&settings, crate::settings::Defaults::Run),
    )
    .unwrap();
    let config = NetConfig {
        audit: audit.clone(),
        resolver,
        ..NetConfig::new(settings.policy)
    };
    let net = Net::build(config, PendingWrites::new());
    (net, audit, kept)
}

fn decisions(kept: &Kept) -> Vec<crate::audit::Event> {
    kept.0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| match &r.body {
            Body::Decision(event) => Some(event.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_connect_is_recorded_with_its_rule_and_the_address_used() {
    let peer = PeerListener::bind("127.0.0.1:0").await.unwrap();
    let at = peer.local_addr().unwrap();
    let (net, audit, kept) =
        audited(&[(Setting::AllowNet, "127.0.0.1"), (Setting::MaxSockets, "8")]);
    let conn = net
        .connect("127.0.0.1", at.port(), &ConnectOptions::default())
        .await
        .unwrap();
    let refused = net
        .connect("127.0.0.2", at.port(), &ConnectOptions::default())
        .await
        .err()
        .expect("refused");
    drop(conn);
    audit.finish();
    let records = kept.0.lock().unwrap().clone();
    let Body::Settings(settings) = &records[0].body else {
        panic!("the first record is the settings: {:?}", records[0])
    };
    let allow = settings.iter().find(|s| s.setting == "allow-net").unwrap();
    assert_eq!(allow.value, "127.0.0.1");
    assert_eq!(
        allow.source,
        Some(Source::Flag {
            flag: "--allow-net".to_owned()
        })
    );
    assert!(
        settings
            .iter()
            .any(|s| s.setting == "lookup-timeout" && s.source.is_none()),
        "a bound no one set is there at its default"
    );
    let events = decisions(&kept);
    assert_eq!(events.len(), 2, "{events:#?}");
    let allowed = &events[0];
    assert_eq!(allowed.operation, Operation::Connect);
    assert_eq!(
        (allowed.host.as_str(), allowed.port),
        ("127.0.0.1", Some(at.port()))
    );
    assert_eq!(allowed.address, Some(at));
    let Outcome::Allowed { rule: Some(rule) } = &allowed.outcome else {
        panic!("{allowed:?}")
    };
    assert_eq!(rule.entry, "127.0.0.1");
    assert_eq!(
        rule.source,
        Source::Flag {
            flag: "--allow-net".to_owned()
        }
    );
    let denied = &events[1];
    assert_eq!(denied.host, "127.0.0.2");
    assert_eq!(denied.address, None);
    let needs = format!("--allow-net=127.0.0.2:{}", at.port());
    assert_eq!(
        denied.outcome,
        Outcome::Denied {
            reason: Reason::NoGrant { needs },
            message: refused.worded(Spelling::Flags).to_string(),
        }
    );
}

#[tokio::test]
async fn a_name_whose_every_address_is_denied_names_them_all() {
    let addresses: Vec<IpAddr> = ["10.0.0.5", "169.254.169.254", "192.168.1.9"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let (net, audit, kept) = audited_with(
        &[
            (Setting::AllowNet, "rebind.test"),
            (Setting::DenyNet, "private"),
            (Setting::DenyNet, "metadata"),
        ],
        Some(Arc::new(Fixed(addresses.clone()))),
    );
    let refused = net
        .connect("rebind.test", 80, &ConnectOptions::default())
        .await
        .err()
        .expect("refused");
    assert_eq!(
        refused.worded(Spelling::Flags).to_string(),
        "connect to rebind.test:80 denied by --deny-net=private (it resolved to 10.0.0.5; \
         its other addresses 169.254.169.254, 192.168.1.9 are denied too)"
    );
    audit.finish();
    let events = decisions(&kept);
    assert_eq!(events.len(), 1, "{events:#?}");
    let event = &events[0];
    assert_eq!(event.resolved, addresses);
    let refusals: Vec<_> = event
        .refused
        .iter()
        .map(|r| (r.address.to_string(), r.rule.entry.as_str()))
        .collect();
    assert_eq!(
        refusals,
        [
            ("10.0.0.5".to_owned(), "private"),
            ("169.254.169.254".to_owned(), "private"),
            ("192.168.1.9".to_owned(), "private"),
        ]
    );
    let Outcome::Denied {
        reason: Reason::DenyEntry { rule, address },
        ..
    } = &event.outcome
    else {
        panic!("{event:?}")
    };
    assert_eq!(
        (rule.entry.as_str(), *address),
        ("private", Some(addresses[0]))
    );
}

#[tokio::test]
async fn a_udp_flood_is_its_first_send_and_counts_per_second() {
    let peer = Peer::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let to = format!("127.0.0.1:{port}");
    let (net, audit, kept) = audited(&[
        (Setting::AllowListen, "127.0.0.1:0"),
        (Setting::AllowNet, &to),
    ]);
    let socket = net
        .bind_udp("127.0.0.1", 0, &BindOptions::default())
        .await
        .unwrap();
    const SENDS: u64 = 100_000;
    for _ in 0..SENDS {
        socket.send(b"x", "127.0.0.1", port).await.unwrap();
    }
    // Denied sends are counted the same way.
    for _ in 0..1000 {
        assert!(matches!(
            socket.send(b"x", "127.0.0.1", port + 1).await,
            Err(NetError::Denied(_))
        ));
    }
    drop(socket);
    audit.finish();
    let records = kept.0.lock().unwrap().clone();
    let mut counted = [0u64; 2];
    let mut whole = Vec::new();
    for record in &records {
        match &record.body {
            Body::UdpSendCounts { allowed, count, .. } => counted[usize::from(*allowed)] += count,
            Body::Decision(event) => whole.push(event.operation),
            Body::Settings(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        whole,
        [Operation::UdpBind, Operation::UdpSend, Operation::UdpSend],
        "the bind, and each destination's first send"
    );
    assert_eq!(counted, [999, SENDS - 1]);
    assert!(
        records.len() < 200,
        "{} records for two destinations",
        records.len()
    );
}

#[tokio::test]
async fn a_listen_and_a_multicast_join_are_recorded_with_the_address_bound() {
    let (net, audit, kept) = audited(&[
        (Setting::AllowListen, "127.0.0.1:0"),
        (Setting::AllowListen, "239.1.2.3"),
    ]);
    let listener = net
        .listen("127.0.0.1", 0, &Default::default())
        .await
        .unwrap();
    let bound = listener.local_addr().unwrap();
    let socket = net
        .bind_udp("127.0.0.1", 0, &BindOptions::default())
        .await
        .unwrap();
    // Joining needs an interface with multicast; loopback may lack it.
    // The decision is recorded before the join, whatever the join does.
    let _ = socket.join_multicast(
        "239.1.2.3".parse().unwrap(),
        crate::net::MulticastInterface::Any,
    );
    let denied = socket.join_multicast(
        "239.9.9.9".parse().unwrap(),
        crate::net::MulticastInterface::Any,
    );
    assert!(matches!(denied, Err(NetError::Denied(_))));
    drop((listener, socket));
    audit.finish();
    let events = decisions(&kept);
    let listen = &events[0];
    assert_eq!(listen.operation, Operation::Listen);
    assert_eq!(listen.address, Some(bound));
    assert_eq!(events[1].operation, Operation::UdpBind);
    let last = events.last().unwrap();
    assert_eq!(last.operation, Operation::MulticastJoin);
    assert!(!last.allowed());
    assert_eq!(last.host, "239.9.9.9");
    let _: SocketAddr = bound;
}

#[tokio::test]
async fn with_no_trail_nothing_is_recorded_and_decisions_are_the_same() {
    let net = Net::new(moat_policy::policy::Policy::new());
    assert!(!net.audit().is_on());
    let refused = net
        .connect("127.0.0.1", 9, &ConnectOptions::default())
        .await
        .err()
        .expect("refused");
    assert!(matches!(refused, NetError::Denied(_)));
}

/// A sink that cannot write.
struct Full;

impl AuditSink for Full {
    fn write(&mut self, _: &AuditRecord) -> std::io::Result<()> {
        Err(std::io::Error::other("no space left on device"))
    }
}

#[tokio::test]
async fn a_trail_that_cannot_be_written_stops_the_runs_network() {
    let peer = PeerListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let audit = Audit::start(Box::new(Full), Context::new(None), Vec::new()).unwrap();
    let config = NetConfig {
        audit: audit.clone(),
        ..NetConfig::new(moat_policy::policy::Policy::allow_all())
    };
    let net = Net::build(config, PendingWrites::new());
    // The settings record fails the sink; wait until the trail knows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while audit.record(unreachable_event).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sink never failed"
        );
        tokio::task::yield_now().await;
    }
    let refused = net
        .connect("127.0.0.1", port, &ConnectOptions::default())
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(&refused, NetError::AuditFailed(why) if why.to_string().contains("no space left on device")),
        "{refused}"
    );
    let socket = net.bind_udp("127.0.0.1", 0, &BindOptions::default()).await;
    assert!(socket.is_err(), "a bind with no record");
}

fn unreachable_event() -> crate::audit::Event {
    crate::audit::Event::new(
        Operation::Connect,
        &moat_policy::policy::Host::parse("192.0.2.1").unwrap(),
        Some(9),
        Outcome::Allowed { rule: None },
    )
}

/// An outgoing request's facts, noted for its records while it is under
/// way, are paid from the run's host memory until it ends; a request the
/// guest drops before its answer ends abandoned, on the connection it went
/// on.
#[tokio::test]
async fn an_http_requests_noted_facts_are_paid_for_and_a_dropped_one_ends_abandoned() {
    use tokio::io::AsyncReadExt as _;
    let server = PeerListener::bind("127.0.0.1:0").await.unwrap();
    let at = server.local_addr().unwrap();
    let (net, audit, kept) = audited(&[
        (Setting::AllowNet, &at.to_string()),
        (Setting::MaxHttpHeaderSize, "16KiB"),
    ]);
    let client = net.http_client();
    let idle = client.budget().used();
    // What the connection itself is paid.
    let connection = crate::net::http::CONNECTION_BYTES + (16 << 10);
    let path = format!("/{}", "a".repeat(60_000));
    let uri = format!("http://{at}{path}?secret=1");
    let request = http::Request::get(uri)
        .body(crate::net::RequestBody::default())
        .unwrap();
    let sending = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .send(request, crate::net::HttpRequestOptions::default())
                .await
        }
    });
    // The server reads the whole head, and never answers.
    let (mut conn, _) = server.accept().await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 8192];
    while !head.ends_with(b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.unwrap();
        assert_ne!(n, 0, "the request's head arrives");
        head.extend_from_slice(&buf[..n]);
    }
    // The facts are kept cut (the path to 256 bytes and a hash), and paid.
    let noted = crate::audit::HttpRequest {
        id: 1,
        method: "GET".to_owned(),
        scheme: "http".to_owned(),
        authority: at.to_string(),
        path: path.clone(),
        query: true,
    }
    .cut();
    let held = client.budget().used() - idle - connection;
    assert!(
        held >= noted.size(),
        "{held} bytes paid beside the connection while the request is under way"
    );
    sending.abort();
    let _ = sending.await;
    drop(client);
    drop(net);
    audit.finish();
    let records = kept.0.lock().unwrap().clone();
    let exchanges: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.body {
            Body::HttpExchange(exchange) => Some(exchange.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(exchanges.len(), 1, "{records:#?}");
    let exchange = &exchanges[0];
    assert_eq!(exchange.end, crate::audit::HttpEnd::Abandoned);
    assert_eq!(exchange.status, None);
    assert_eq!(exchange.request.path, noted.path);
    assert!(noted.path.len() < 320 && noted.path.starts_with("/aaaa"));
    assert!(exchange.request.query);
    let connection = exchange.connection.as_ref().expect("it had a connection");
    assert_eq!((connection.id, connection.reused), (1, false));
    assert_eq!(connection.address, at);
}
