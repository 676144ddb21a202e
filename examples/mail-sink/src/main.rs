//! A minimal SMTP receiver: EHLO, STARTTLS, MAIL, RCPT, DATA, QUIT. Every
//! message it receives is printed on stdout; nothing is delivered anywhere.
//!
//! ```text
//! moat run --allow-listen=127.0.0.1:2525 --dir=certs mail-sink.wasm --tls certs/cert.pem certs/key.pem 127.0.0.1:2525
//! curl smtp://127.0.0.1:2525 --ssl-reqd --cacert certs/ca.pem --mail-from a@example.com --mail-rcpt b@example.com -T message.txt
//! ```
//!
//! With `--tls`, EHLO offers STARTTLS and the session upgrades in place
//! (server side): whatever the client sent right behind its STARTTLS is
//! handed to the handshake, not lost. It prints `listening on HOST:PORT`.

use moat_sdk::{Error, Identity, TcpListener, TcpStream, TlsListenOptions};

/// Longest command line accepted (RFC 5321 allows 512 with the CRLF).
const MAX_LINE: usize = 1024;

/// Largest message accepted; a bigger one gets 552.
const MAX_MESSAGE: usize = 10 << 20;

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (tls, addr) = match &args[..] {
        [flag, cert, key, addr] if flag == "--tls" => {
            let identity =
                Identity::from_files(cert, key).map_err(|e| Error::Other(e.to_string()))?;
            (Some(TlsListenOptions::new(identity)), addr)
        }
        [addr] => (None, addr),
        _ => {
            return Err(Error::InvalidArgument(
                "usage: mail-sink [--tls CERT KEY] HOST:PORT".into(),
            ));
        }
    };
    let Some((host, port)) = moat_sdk::split_host_port(addr) else {
        return Err(Error::InvalidArgument(format!("`{addr}` is not HOST:PORT")));
    };
    let listener = TcpListener::bind((host, port)).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (conn, _) = listener.accept().await?;
        let tls = tls.clone();
        moat_sdk::spawn(async move {
            if let Err(e) = session(conn, tls).await {
                eprintln!("mail-sink: {e}");
            }
        });
    }
}

#[derive(Default)]
struct Envelope {
    from: String,
    to: Vec<String>,
}

async fn session(mut conn: TcpStream, tls: Option<TlsListenOptions>) -> Result<(), Error> {
    let mut buf = Vec::new();
    let mut envelope = Envelope::default();
    reply(&mut conn, "220 moat mail-sink ready\r\n").await?;
    loop {
        buf.clear();
        if conn.read_until(b"\r\n", &mut buf, MAX_LINE).await? == 0 || !buf.ends_with(b"\r\n") {
            return Ok(()); // the client is gone, mid-line or not
        }
        let line = String::from_utf8_lossy(&buf[..buf.len() - 2]).into_owned();
        let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
        match verb.as_str() {
            "EHLO" => {
                let starttls = tls.is_some() && !conn.is_tls();
                let offer = if starttls { "250-STARTTLS\r\n" } else { "" };
                reply(
                    &mut conn,
                    &format!("250-moat mail-sink\r\n{offer}250 SIZE {MAX_MESSAGE}\r\n"),
                )
                .await?;
            }
            "HELO" => reply(&mut conn, "250 moat mail-sink\r\n").await?,
            "STARTTLS" => match &tls {
                Some(options) if !conn.is_tls() => {
                    reply(&mut conn, "220 ready to start TLS\r\n").await?;
                    // Bytes after the command line (the client's first
                    // handshake bytes) are still in the stream: the upgrade
                    // replays them.
                    conn.start_tls_server(&[], options).await?;
                    envelope = Envelope::default();
                }
                _ => reply(&mut conn, "454 TLS not available\r\n").await?,
            },
            "MAIL" => {
                envelope = Envelope {
                    from: address(&line),
                    to: Vec::new(),
                };
                reply(&mut conn, "250 OK\r\n").await?;
            }
            "RCPT" => {
                envelope.to.push(address(&line));
                reply(&mut conn, "250 OK\r\n").await?;
            }
            "DATA" if envelope.to.is_empty() => reply(&mut conn, "503 RCPT first\r\n").await?,
            "DATA" => {
                reply(&mut conn, "354 end data with <CR><LF>.<CR><LF>\r\n").await?;
                buf.clear();
                match conn.read_until(b"\r\n.\r\n", &mut buf, MAX_MESSAGE).await {
                    Ok(_) if buf.ends_with(b"\r\n.\r\n") => {}
                    Ok(_) => return Ok(()), // the client left mid-message
                    Err(Error::InvalidArgument(_)) => {
                        reply(&mut conn, "552 message too large\r\n").await?;
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
                let body = String::from_utf8_lossy(&buf[..buf.len() - 5]);
                println!(
                    "--- message from {} to {} (tls: {})\n{}\n--- end",
                    envelope.from,
                    envelope.to.join(", "),
                    conn.is_tls(),
                    body.replace("\r\n..", "\r\n.").replace("\r\n", "\n")
                );
                envelope = Envelope::default();
                reply(&mut conn, "250 OK: received\r\n").await?;
            }
            "RSET" => {
                envelope = Envelope::default();
                reply(&mut conn, "250 OK\r\n").await?;
            }
            "NOOP" => reply(&mut conn, "250 OK\r\n").await?,
            "QUIT" => {
                reply(&mut conn, "221 bye\r\n").await?;
                return conn.shutdown().await;
            }
            _ => reply(&mut conn, "500 unrecognized command\r\n").await?,
        }
    }
}

/// The address inside `<...>` of a MAIL or RCPT line.
fn address(line: &str) -> String {
    line.split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(addr, _)| addr.to_owned())
        .unwrap_or_default()
}

async fn reply(conn: &mut TcpStream, text: &str) -> Result<(), Error> {
    conn.write_all(text.as_bytes()).await
}
