//! TLS through real guests, against real peers: openssl s_server and
//! s_client, curl (HTTPS and SMTP with STARTTLS), and tokio-rustls.

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::caps::{MAX_CHAIN_CERTIFICATES, MAX_GUEST_ROOTS, MAX_PEM_BYTES};
use crate::support::certs::{Ca, Leaf};
use crate::support::{PATIENCE, guests, have, start_with, within};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use rand::{Rng, SeedableRng};
use rustls::pki_types::ServerName;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A directory of PEM files for one test, given to the guest as /certs.
struct Certs {
    dir: PathBuf,
}

impl Certs {
    fn new(test: &str, ca: &Ca, leaf: &Leaf) -> Certs {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-{test}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.join("cert.pem"), &leaf.cert_pem).unwrap();
        std::fs::write(dir.join("key.pem"), &leaf.key_pem).unwrap();
        Certs { dir }
    }

    fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }
}

/// A child process killed when the test ends.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until something accepts connections on `port`.
async fn listening(port: u16) {
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn options(policy: Policy, certs: &Certs, args: &[&str]) -> RunOptions {
    RunOptions::new(policy)
        .args(args.iter().copied())
        .dir(&certs.dir, "/certs")
        .stdin(Input::Empty)
}

fn client_policy() -> Policy {
    Policy::new().allow_connect("localhost,127.0.0.1").unwrap()
}

fn server_policy() -> Policy {
    Policy::new().allow_listen("127.0.0.1").unwrap()
}

/// `openssl s_server` reversing each line, with `leaf`, offering `alpn`.
async fn openssl_server(certs: &Certs, alpn: Option<&str>) -> (Peer, u16) {
    let port = support::free_port();
    let mut cmd = Command::new("openssl");
    cmd.args(["s_server", "-quiet", "-rev", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .args([
            "-cert",
            &certs.path("cert.pem"),
            "-key",
            &certs.path("key.pem"),
        ]);
    if let Some(alpn) = alpn {
        cmd.args(["-alpn", alpn]);
    }
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let peer = Peer(child);
    listening(port).await;
    (peer, port)
}

#[tokio::test]
async fn a_guest_client_talks_to_openssl_s_server_with_alpn() {
    if !have("openssl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("client", &ca, &ca.leaf(&["localhost"]));
    let (_server, port) = openssl_server(&certs, Some("h2,http/1.1")).await;
    let port_arg = port.to_string();
    let run = start_with(
        guests::PROBE,
        options(
            client_policy(),
            &certs,
            &[
                "probe",
                "tls-connect",
                "localhost",
                &port_arg,
                "/certs/ca.pem",
                "http/1.1",
            ],
        ),
    );
    let done = run.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("connected, alpn Some(\"http/1.1\")"),
        "{}",
        done.stdout
    );
    assert!(done.stdout.contains("got: taom olleh"), "{}", done.stdout);
}

#[tokio::test]
async fn untrusted_wrong_name_and_expired_each_give_their_own_error() {
    if !have("openssl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    for (test, leaf, host, ca_file, expected) in [
        (
            "untrusted",
            ca.leaf(&["localhost"]),
            "localhost",
            "",
            "CertificateUntrusted",
        ),
        (
            "name",
            ca.leaf(&["other.example"]),
            "localhost",
            "/certs/ca.pem",
            "CertificateNameMismatch",
        ),
        (
            "expired",
            ca.expired_leaf(&["localhost"]),
            "localhost",
            "/certs/ca.pem",
            "CertificateExpired",
        ),
    ] {
        let certs = Certs::new(test, &ca, &leaf);
        let (_server, port) = openssl_server(&certs, None).await;
        let port = port.to_string();
        let done = start_with(
            guests::PROBE,
            options(
                client_policy(),
                &certs,
                &["probe", "tls-connect", host, &port, ca_file],
            ),
        )
        .finish()
        .await;
        assert!(
            done.stdout.contains(&format!("tls error: {expected}(")),
            "{test}: {}",
            done.stdout
        );
    }
}

#[tokio::test]
async fn ca_file_makes_a_private_root_trusted_for_the_run() {
    if !have("openssl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("ca-file", &ca, &ca.leaf(&["localhost"]));
    let (_server, port) = openssl_server(&certs, None).await;
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "run",
            &support::cache_flag(),
            "--allow-net=localhost",
            &format!("--ca-file={}", certs.path("ca.pem")),
        ])
        .args([guests::PROBE, "tls-connect", "localhost", &port.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("got: taom olleh"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without it, the same connection is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "run",
            &support::cache_flag(),
            "--allow-net=localhost",
            guests::PROBE,
            "tls-connect",
            "localhost",
            &port.to_string(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("CertificateUntrusted"), "{stdout}");
    // The error says how to trust a private CA.
    assert!(
        stdout.contains("`moat run --ca-file=CA.pem`")
            && stdout.contains("`TlsConnectOptions::extra_roots`"),
        "{stdout}"
    );
}

#[tokio::test]
async fn sixteen_mib_through_a_guest_tls_server_and_back() {
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("echo", &ca, &ca.leaf(&["localhost"]));
    let server = start_with(
        guests::PROBE,
        options(
            server_policy(),
            &certs,
            &[
                "probe",
                "tls-echo-server",
                "/certs/cert.pem",
                "/certs/key.pem",
            ],
        ),
    );
    let addr = server.listening_addr().await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = ca
        .connector(&[])
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (mut from_guest, mut to_guest) = tokio::io::split(tls);
    let mut data = vec![0u8; 16 << 20];
    rand::rngs::StdRng::seed_from_u64(16).fill_bytes(&mut data);
    let sent = Sha256::digest(&data);
    let writing = tokio::spawn(async move {
        to_guest.write_all(&data).await.unwrap();
        to_guest.shutdown().await.unwrap();
        to_guest
    });
    let mut back = Vec::new();
    within("the echo", from_guest.read_to_end(&mut back))
        .await
        .unwrap();
    assert_eq!(back.len(), 16 << 20);
    assert_eq!(Sha256::digest(&back), sent);
    drop(writing.await.unwrap());
}

#[tokio::test]
async fn a_bad_certificate_fails_listen_and_claims_no_port() {
    let ca = Ca::new("moat test CA");
    let good = ca.leaf(&["localhost"]);
    let broken = Leaf {
        cert_pem: good.cert_pem.clone(),
        key_pem: ca.leaf(&["localhost"]).key_pem, // another certificate's key
    };
    let certs = Certs::new("bad-cert", &ca, &broken);
    let port = support::free_port();
    let addr = format!("127.0.0.1:{port}");
    let done = start_with(
        guests::HTTP_SERVER,
        options(
            server_policy(),
            &certs,
            &[
                "http-server",
                "--tls",
                "/certs/cert.pem",
                "/certs/key.pem",
                &addr,
            ],
        ),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 1);
    assert!(
        done.stderr
            .contains("invalid argument: certificate and key"),
        "{}",
        done.stderr
    );
    assert!(support::port_is_free(port));
}

/// Starts `guest` (named `name` in its argv) with `--tls` and the test
/// certificate on a free port, and returns (run, port).
async fn tls_server(guest: &str, name: &str, certs: &Certs) -> (support::Running, u16) {
    let run = start_with(
        guest,
        options(
            server_policy(),
            certs,
            &[
                name,
                "--tls",
                "/certs/cert.pem",
                "/certs/key.pem",
                "127.0.0.1:0",
            ],
        ),
    );
    let port = run.listening_addr().await.port();
    (run, port)
}

/// http-server over TLS.
async fn https_server(certs: &Certs) -> (support::Running, u16) {
    tls_server(guests::HTTP_SERVER, "http-server", certs).await
}

#[tokio::test]
async fn curl_gets_pages_over_https_with_alpn_and_keep_alive() {
    if !have("curl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("https", &ca, &ca.leaf(&["localhost"]));
    let (_server, port) = https_server(&certs).await;
    let base = format!("https://localhost:{port}");
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "-v", "--http1.1", "--cacert", &certs.path("ca.pem")])
        .arg(format!("{base}/"))
        .arg(format!("{base}/whoami"))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with("hello from a moat guest\n"), "{stdout}");
    assert!(stdout.contains("tls true\nalpn http/1.1\n"), "{stdout}");
    assert!(
        stderr.contains("ALPN: server accepted http/1.1"),
        "{stderr}"
    );
    // Both requests went over one connection.
    assert!(
        stderr.contains("Re-using existing") || stderr.contains("Reusing existing"),
        "{stderr}"
    );
}

#[tokio::test]
async fn openssl_s_client_talks_to_a_guest_server_with_alpn() {
    if !have("openssl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("s-client", &ca, &ca.leaf(&["localhost"]));
    let (_server, port) = https_server(&certs).await;
    let mut client = tokio::process::Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            "localhost",
        ])
        .args([
            "-alpn",
            "http/1.1",
            "-CAfile",
            &certs.path("ca.pem"),
            "-verify_return_error",
            "-ign_eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    stdin
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    drop(stdin);
    let out = within("openssl s_client", client.wait_with_output())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ALPN protocol: http/1.1"), "{stdout}");
    assert!(stdout.contains("Verify return code: 0 (ok)"), "{stdout}");
    assert!(stdout.contains("HTTP/1.1 200 OK"), "{stdout}");
}

/// mail-sink offering STARTTLS.
async fn mail_sink(certs: &Certs) -> (support::Running, u16) {
    tls_server(guests::MAIL_SINK, "mail-sink", certs).await
}

#[tokio::test]
async fn curl_sends_mail_over_server_side_starttls() {
    if !have("curl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("smtp-curl", &ca, &ca.leaf(&["localhost"]));
    // An embedder's sink gets the server's trail.
    let (audit, kept) = Kept::trail();
    let args = [
        "mail-sink",
        "--tls",
        "/certs/cert.pem",
        "/certs/key.pem",
        "127.0.0.1:0",
    ];
    let sink = start_with(
        guests::MAIL_SINK,
        options(server_policy(), &certs, &args).audit(audit.clone()),
    );
    let port = sink.listening_addr().await.port();
    let message = certs.dir.join("message.txt");
    std::fs::write(
        &message,
        "Subject: over STARTTLS\r\n\r\nHello through moat.\r\n",
    )
    .unwrap();
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--ssl-reqd", "--cacert", &certs.path("ca.pem")])
        .arg(format!("smtp://localhost:{port}"))
        .args([
            "--mail-from",
            "alice@example.com",
            "--mail-rcpt",
            "bob@example.com",
            "-T",
        ])
        .arg(&message)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = sink.wait_for("--- end").await;
    assert!(
        printed.contains("--- message from alice@example.com to bob@example.com (tls: true)"),
        "{printed}"
    );
    assert!(printed.contains("Hello through moat."), "{printed}");
    // On the trail: the listen with the grant that allowed it, and the
    // STARTTLS upgrade of curl's connection, this side's address and port
    // with curl's as the peer.
    audit.finish();
    use moat_host::audit::{Operation, Outcome};
    let decisions = kept.decisions();
    let listen = decisions
        .iter()
        .find(|e| e.operation == Operation::Listen)
        .expect("the listen is recorded");
    let Outcome::Allowed { rule: Some(rule) } = &listen.outcome else {
        panic!("{listen:?}")
    };
    assert_eq!(rule.entry, "127.0.0.1");
    let upgrade = decisions
        .iter()
        .find(|e| e.operation == Operation::TlsUpgrade)
        .unwrap_or_else(|| panic!("no upgrade among {decisions:#?}"));
    assert_eq!(
        (upgrade.host.as_str(), upgrade.port),
        ("127.0.0.1", Some(port))
    );
    assert!(upgrade.allowed());
    assert_eq!(
        upgrade.address.map(|a| a.ip()),
        Some("127.0.0.1".parse().unwrap()),
        "the peer"
    );
}

#[tokio::test]
async fn openssl_s_client_starttls_smtp_against_a_guest() {
    if !have("openssl") {
        return;
    }
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("smtp-openssl", &ca, &ca.leaf(&["localhost"]));
    let (_sink, port) = mail_sink(&certs).await;
    let mut client = tokio::process::Command::new("openssl")
        .args([
            "s_client",
            "-starttls",
            "smtp",
            "-connect",
            &format!("127.0.0.1:{port}"),
        ])
        .args([
            "-servername",
            "localhost",
            "-CAfile",
            &certs.path("ca.pem"),
            "-verify_return_error",
            "-ign_eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = client.stdin.take().unwrap();
    stdin.write_all(b"EHLO me\r\nQUIT\r\n").await.unwrap();
    drop(stdin);
    let out = within("openssl s_client", client.wait_with_output())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Verify return code: 0 (ok)"), "{stdout}");
    // After the upgrade EHLO no longer offers STARTTLS.
    assert!(
        stdout.contains("250 SIZE") && !stdout.contains("250-STARTTLS"),
        "{stdout}"
    );
    assert!(stdout.contains("221 bye"), "{stdout}");
}

#[tokio::test]
async fn ncat_starttls_smtp_against_mail_sink_guest_to_guest() {
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("smtp-ncat", &ca, &ca.leaf(&["localhost"]));
    let (sink, port) = mail_sink(&certs).await;
    let port = port.to_string();
    let script = b"MAIL FROM:<n@example.com>\r\nRCPT TO:<m@example.com>\r\nDATA\r\nwritten before TLS? no: after\r\n.\r\nQUIT\r\n";
    // The client's trail: its connect, then its STARTTLS upgrade.
    let (audit, kept) = Kept::trail();
    let ncat = start_with(
        guests::NCAT,
        RunOptions::new(client_policy())
            .audit(audit.clone())
            .args([
                "ncat",
                "--starttls",
                "smtp",
                "--ssl-trustfile",
                "/certs/ca.pem",
                "localhost",
                &port,
            ])
            .dir(&certs.dir, "/certs")
            .stdin(Input::Bytes(script.to_vec())),
    );
    let done = ncat.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(done.stderr.contains("ncat: TLS started"), "{}", done.stderr);
    assert!(done.stdout.contains("250 OK: received"), "{}", done.stdout);
    let printed = sink.wait_for("--- end").await;
    assert!(printed.contains("(tls: true)"), "{printed}");
    audit.finish();
    let operations: Vec<_> = kept
        .decisions()
        .into_iter()
        .map(|e| (e.operation, e.host, e.port))
        .collect();
    use moat_host::audit::Operation;
    let port: u16 = port.parse().unwrap();
    assert!(
        operations.contains(&(Operation::Connect, "localhost".to_owned(), Some(port))),
        "{operations:?}"
    );
    assert!(
        operations.contains(&(Operation::TlsUpgrade, "localhost".to_owned(), Some(port))),
        "the client's upgrade names the server as it wrote it: {operations:?}"
    );
}

#[tokio::test]
async fn ncat_ssl_client_and_server() {
    let ca = Ca::new("moat test CA");
    let certs = Certs::new("ncat-ssl", &ca, &ca.leaf(&["localhost"]));
    let server = start_with(
        guests::NCAT,
        options(
            server_policy(),
            &certs,
            &[
                "ncat",
                "-l",
                "--ssl-cert",
                "/certs/cert.pem",
                "--ssl-key",
                "/certs/key.pem",
                "--ssl-alpn",
                "moat/1",
                "127.0.0.1",
                "0",
            ],
        )
        .stdin(Input::Bytes(b"from the server\n".to_vec())),
    );
    let addr: SocketAddr = {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let err = String::from_utf8_lossy(&server.stderr.contents()).into_owned();
            if let Some(line) = err
                .lines()
                .find_map(|l| l.strip_prefix("ncat: listening on "))
            {
                break line.parse().unwrap();
            }
            assert!(Instant::now() < deadline, "ncat never listened: {err}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let port = addr.port().to_string();
    let client = start_with(
        guests::NCAT,
        RunOptions::new(client_policy())
            .args([
                "ncat",
                "--ssl",
                "--ssl-alpn",
                "moat/1",
                "--ssl-trustfile",
                "/certs/ca.pem",
                "localhost",
                &port,
            ])
            .dir(&certs.dir, "/certs")
            .stdin(Input::Bytes(b"from the client\n".to_vec())),
    );
    let (client, server) = (client.finish().await, server.finish().await);
    assert_eq!(client.code(), 0, "{}", client.stderr);
    assert_eq!(server.code(), 0, "{}", server.stderr);
    assert_eq!(client.stdout, "from the server\n");
    assert_eq!(server.stdout, "from the client\n");
    assert!(
        client.stderr.contains("ncat: TLS, ALPN moat/1"),
        "{}",
        client.stderr
    );
}

/// `pem` followed by PEM comment lines (which a PEM reader skips) until it
/// is `len` bytes long.
fn padded(pem: &str, len: usize) -> String {
    let mut text = pem.to_owned();
    let line = "# a comment line, skipped by a PEM reader, but bytes of PEM all the same\n";
    while text.len() + line.len() <= len {
        text.push_str(line);
    }
    if text.len() < len {
        text.push_str(&"#".repeat(len - text.len() - 1));
        text.push('\n');
    }
    assert_eq!(text.len(), len);
    text
}

/// What probe's `tls-listen-many` puts before each chain it is given.
const LISTENER_COMMENT: &str = "# listener 0\n";

#[tokio::test]
async fn a_chain_or_key_over_its_cap_fails_listen_and_claims_no_port() {
    let ca = Ca::new("moat test CA");
    let leaf = ca.leaf(&["localhost"]);
    let certs = Certs::new("caps", &ca, &leaf);
    let small = |n: usize| -> String {
        (0..n)
            .map(|_| support::certs::padding_certificate(64))
            .collect()
    };
    // At the caps: ten certificates, exactly MAX_PEM_BYTES of PEM with the
    // comment the guest adds.
    let ten = format!("{}{}", leaf.cert_pem, small(MAX_CHAIN_CERTIFICATES - 1));
    let at_cap = padded(&ten, MAX_PEM_BYTES - LISTENER_COMMENT.len());
    let eleven = format!("{ten}{}", small(1));
    let files = [
        ("at-cap.pem", at_cap),
        ("eleven.pem", eleven),
        // A valid leaf and a mebibyte of comment lines.
        ("big-chain.pem", padded(&leaf.cert_pem, 1 << 20)),
        ("big-key.pem", padded(&leaf.key_pem, MAX_PEM_BYTES + 1)),
    ];
    for (file, text) in &files {
        std::fs::write(certs.dir.join(file), text).unwrap();
    }
    let over = |what: &str, bytes: usize| {
        format!(
            "error: invalid argument: {what}: {bytes} bytes of PEM, more than the \
             {MAX_PEM_BYTES} a TLS input may have"
        )
    };
    let cases = [
        (
            "/certs/eleven.pem",
            "/certs/key.pem",
            format!(
                "error: invalid argument: certificate: a chain of more than \
                 {MAX_CHAIN_CERTIFICATES} certificates"
            ),
        ),
        (
            "/certs/big-chain.pem",
            "/certs/key.pem",
            over("certificate", LISTENER_COMMENT.len() + (1 << 20)),
        ),
        (
            "/certs/cert.pem",
            "/certs/big-key.pem",
            over("private key", MAX_PEM_BYTES + 1),
        ),
    ];
    let port = support::free_port();
    let p = port.to_string();
    for (cert, key, expected) in &cases {
        let done = start_with(
            guests::PROBE,
            options(
                server_policy(),
                &certs,
                &["probe", "tls-listen-many", "1", cert, key, &p],
            ),
        )
        .finish()
        .await;
        assert_eq!(done.code(), 1, "{cert} {key}: {}", done.stdout);
        assert_eq!(done.stderr.trim(), expected, "{cert} {key}");
        assert!(
            support::port_is_free(port),
            "{cert} {key}: the port was claimed"
        );
    }
    // The control: at the caps, the same listen succeeds on that port.
    let done = start_with(
        guests::PROBE,
        options(
            server_policy(),
            &certs,
            &[
                "probe",
                "tls-listen-many",
                "1",
                "/certs/at-cap.pem",
                "/certs/key.pem",
                &p,
            ],
        ),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout
            .contains(&format!("opened 1; last on 127.0.0.1:{port}")),
        "{}",
        done.stdout
    );
}

/// A tokio-rustls server presenting `leaf` on 127.0.0.1, completing every
/// handshake; counts the connections that reach it.
async fn counting_tls_server(leaf: &Leaf) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = leaf.acceptor(&[]);
    let reached = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&reached);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    (port, reached)
}

#[tokio::test]
async fn extra_roots_over_their_caps_fail_the_connect_before_it_is_made() {
    use std::sync::atomic::Ordering;
    let ca = Ca::new("moat test CA");
    let leaf = ca.leaf(&["127.0.0.1"]);
    let certs = Certs::new("root-caps", &ca, &leaf);
    let (port, reached) = counting_tls_server(&leaf).await;
    // The guest puts a line naming the connect before the file it is
    // given, then pads with comment lines to the length it is given.
    let other = Ca::new("another CA").pem();
    let roots = |n: usize| format!("{}{}", ca.pem(), other.repeat(n - 1));
    std::fs::write(certs.dir.join("most.pem"), roots(MAX_GUEST_ROOTS)).unwrap();
    std::fs::write(certs.dir.join("too-many.pem"), roots(MAX_GUEST_ROOTS + 1)).unwrap();
    let p = port.to_string();
    let connected = "connect 0: connected".to_owned();
    let cases = [
        ("ca.pem", MAX_PEM_BYTES, connected.clone()),
        (
            "ca.pem",
            MAX_PEM_BYTES + 1,
            format!(
                "connect 0: InvalidArgument(\"extra roots: {} bytes of PEM, more than the \
                 {MAX_PEM_BYTES} a TLS input may have\")",
                MAX_PEM_BYTES + 1
            ),
        ),
        ("most.pem", 0, connected),
        (
            "too-many.pem",
            0,
            format!(
                "connect 0: InvalidArgument(\"extra roots: more than {MAX_GUEST_ROOTS} \
                 certificates\")"
            ),
        ),
    ];
    for (file, pad, expected) in &cases {
        let before = reached.load(Ordering::SeqCst);
        let path = format!("/certs/{file}");
        let pad = pad.to_string();
        let done = start_with(
            guests::PROBE,
            options(
                Policy::new().allow_connect("127.0.0.1").unwrap(),
                &certs,
                &[
                    "probe",
                    "tls-connect-many",
                    "127.0.0.1",
                    &p,
                    "1",
                    &path,
                    &pad,
                ],
            ),
        )
        .finish()
        .await;
        let what = format!("{file} padded to {pad}");
        assert_eq!(done.code(), 0, "{what}: {}", done.stderr);
        assert_eq!(
            done.stdout.lines().nth(1),
            Some(expected.as_str()),
            "{what}"
        );
        // A connect refused for its roots never reached the server.
        let made = expected.ends_with("connected");
        assert_eq!(
            reached.load(Ordering::SeqCst) - before,
            usize::from(made),
            "{what}: {}",
            done.stdout
        );
    }
}

/// A sink that keeps the records it is given.
#[derive(Clone, Default)]
struct Kept(std::sync::Arc<std::sync::Mutex<Vec<moat_host::audit::AuditRecord>>>);

impl Kept {
    /// A trail into a new sink of this kind, and the sink.
    fn trail() -> (moat_host::audit::Audit, Kept) {
        let kept = Kept::default();
        let audit = moat_host::audit::Audit::start(
            Box::new(kept.clone()),
            moat_host::audit::Context::new(None),
            Vec::new(),
        )
        .expect("the trail starts");
        (audit, kept)
    }

    /// The decisions recorded.
    fn decisions(&self) -> Vec<moat_host::audit::Event> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|r| match &r.body {
                moat_host::audit::Body::Decision(event) => Some(event.clone()),
                _ => None,
            })
            .collect()
    }
}

impl moat_host::audit::AuditSink for Kept {
    fn write(&mut self, record: &moat_host::audit::AuditRecord) -> std::io::Result<()> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}
