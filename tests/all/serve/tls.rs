//! `moat serve`: HTTPS: `--tls-cert` and `--tls-key`.

use super::*;

/// `--tls-cert`/`--tls-key`: HTTPS, verified by curl against the test's
/// CA for the name in the certificate; a plain-HTTP client gets nothing
/// served, and a client that stalls its handshake is let go.
#[tokio::test]
async fn serve_speaks_https_with_the_certificate_given() {
    if !have("curl") {
        return;
    }
    let (dir, cert, key) = tls_files("serve-tls");
    let server = Serve::start(
        guests::WSTD_SERVE,
        &[&cert, &key, "--tls-handshake-timeout=1s"],
    )
    .await;
    let url = format!("https://localhost:{}/", server.addr.port());
    let out = within(
        "curl over TLS",
        Command::new("curl")
            .args(["-sS", "--http1.1", "--cacert"])
            .arg(dir.join("ca.pem"))
            .args([&url, &url, "-v"])
            .output(),
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{HELLO}{HELLO}")
    );
    assert!(
        stderr.contains("Re-using existing") || stderr.contains("Reusing existing"),
        "one TLS connection for both: {stderr}"
    );
    // Plain HTTP to the TLS port: no answer, the connection is closed.
    let mut plain = TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = within("the plain client cut off", plain.read_to_end(&mut got)).await;
    assert!(!String::from_utf8_lossy(&got).contains(HELLO));
    // A client that connects and never sends its ClientHello is let go.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let mut nothing = Vec::new();
    let _ = within("the silent client let go", silent.read_to_end(&mut nothing)).await;
    assert!(nothing.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
