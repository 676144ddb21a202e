//! A netcat: relays stdin to a TCP connection and the connection to stdout.
//!
//! ```text
//! ncat HOST PORT         connect, then relay
//! ncat -l HOST PORT      accept one connection, then relay
//! ncat -u HOST PORT      UDP: each stdin line is a datagram; print replies
//! ncat -u -l HOST PORT   UDP: print each datagram and echo it back
//! ```
//!
//! TLS: `--ssl` connects with TLS (`--ssl-alpn h2,http/1.1` offers ALPN,
//! `--ssl-trustfile PEM` trusts a private CA); `-l --ssl-cert PEM --ssl-key
//! PEM` serves TLS; `--starttls smtp` connects in plaintext, speaks EHLO
//! and STARTTLS, upgrades, then relays. Files are paths inside the guest
//! (give their directory with `moat run --dir`).
//!
//! TCP: when stdin ends, ncat half-closes the connection (sends a FIN) and
//! keeps printing what the peer sends until the peer closes too. It exits 0
//! when both directions are done, 1 with a message on error.
//!
//! UDP: the client binds an ephemeral port on the wildcard address of the
//! destination's family (grant it with `--allow-listen=0.0.0.0:0`, or
//! `[::]:0`), sends each line of stdin (without its newline) as one
//! datagram, prints every datagram that comes back on a line of its own, and
//! exits once stdin has ended and no datagram came for one second.

use std::time::Duration;

use moat_sdk::io::{stdin, stdout};
use moat_sdk::{
    Error, Identity, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream, TlsConnectOptions,
    TlsListenOptions, UdpSocket,
};

const USAGE: &str = "usage: ncat [-u] [-l] [--ssl] [--ssl-alpn LIST] [--ssl-trustfile PEM] \
[--ssl-cert PEM --ssl-key PEM] [--starttls smtp] HOST PORT";

/// How long a UDP client waits for more replies once stdin has ended.
const UDP_LINGER: Duration = Duration::from_secs(1);

/// The command line.
#[derive(Default)]
struct Args {
    udp: bool,
    listen: bool,
    ssl: bool,
    alpn: Vec<String>,
    trustfile: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    starttls: Option<String>,
    host: String,
    port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut rest = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value; {USAGE}"));
        match arg.as_str() {
            "-u" => args.udp = true,
            "-l" => args.listen = true,
            "--ssl" => args.ssl = true,
            "--ssl-alpn" => {
                args.alpn = value("--ssl-alpn")?.split(',').map(str::to_owned).collect()
            }
            "--ssl-trustfile" => args.trustfile = Some(value("--ssl-trustfile")?),
            "--ssl-cert" => args.cert = Some(value("--ssl-cert")?),
            "--ssl-key" => args.key = Some(value("--ssl-key")?),
            "--starttls" => args.starttls = Some(value("--starttls")?),
            _ => rest.push(arg),
        }
    }
    let [host, port] = &rest[..] else {
        return Err(USAGE.to_owned());
    };
    args.host = host.clone();
    args.port = port
        .parse()
        .map_err(|_| format!("`{port}` is not a port number; {USAGE}"))?;
    if args.cert.is_some() != args.key.is_some() {
        return Err(format!("--ssl-cert and --ssl-key go together; {USAGE}"));
    }
    if let Some(proto) = &args.starttls
        && proto != "smtp"
    {
        return Err(format!("--starttls {proto}: only smtp is supported"));
    }
    Ok(args)
}

#[moat_sdk::main]
async fn main() -> Result<(), String> {
    let args = parse_args()?;
    if args.udp {
        let done = if args.listen {
            udp_serve(&args.host, args.port).await
        } else {
            udp_client(&args.host, args.port).await
        };
        return done.map_err(|e| format!("ncat: {e}"));
    }
    let stream = if args.listen {
        accept_one(&args).await
    } else {
        connect(&args).await
    }
    .map_err(|e| format!("ncat: {e}"))?;
    relay(stream).await.map_err(|e| format!("ncat: {e}"))
}

fn client_tls(args: &Args) -> Result<TlsConnectOptions, Error> {
    let extra_roots = match &args.trustfile {
        Some(path) => Some(std::fs::read(path).map_err(|e| Error::Other(format!("{path}: {e}")))?),
        None => None,
    };
    Ok(TlsConnectOptions {
        alpn: args.alpn.clone(),
        extra_roots,
        ..TlsConnectOptions::default()
    })
}

async fn connect(args: &Args) -> Result<TcpStream, Error> {
    if args.ssl {
        let stream = TcpStream::connect_tls((&args.host, args.port), &client_tls(args)?).await?;
        if let Some(alpn) = stream.alpn_protocol() {
            eprintln!("ncat: TLS, ALPN {alpn}");
        }
        return Ok(stream);
    }
    let mut stream = TcpStream::connect((&args.host, args.port)).await?;
    if args.starttls.is_some() {
        smtp_starttls(&mut stream, args).await?;
    }
    Ok(stream)
}

/// Reads one SMTP reply (the lines of a multi-line one, "250-..." up to
/// "250 ..."), shows it on stderr, and checks its code.
async fn expect_reply(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    code: &str,
) -> Result<String, Error> {
    let mut all = String::new();
    loop {
        buf.clear();
        if stream.read_until(b"\r\n", buf, 4096).await? == 0 {
            return Err(Error::Closed("the server closed the connection".into()));
        }
        let line = String::from_utf8_lossy(buf).into_owned();
        eprint!("ncat: {line}");
        all.push_str(&line);
        if !line.starts_with(code) {
            return Err(Error::Other(format!(
                "expected {code}, got {}",
                line.trim_end()
            )));
        }
        if line.as_bytes().get(3) == Some(&b' ') {
            return Ok(all);
        }
    }
}

/// Speaks SMTP up to STARTTLS, upgrades, and leaves the rest to the user.
async fn smtp_starttls(stream: &mut TcpStream, args: &Args) -> Result<(), Error> {
    let mut buf = Vec::new();
    expect_reply(stream, &mut buf, "220").await?;
    stream.write_all(b"EHLO moat-ncat\r\n").await?;
    let offers = expect_reply(stream, &mut buf, "250").await?;
    if !offers.to_ascii_uppercase().contains("STARTTLS") {
        return Err(Error::Other("the server does not offer STARTTLS".into()));
    }
    stream.write_all(b"STARTTLS\r\n").await?;
    expect_reply(stream, &mut buf, "220").await?;
    stream
        .start_tls(&args.host, &[], &client_tls(args)?)
        .await?;
    eprintln!("ncat: TLS started");
    Ok(())
}

async fn accept_one(args: &Args) -> Result<TcpStream, Error> {
    let (host, port) = (args.host.as_str(), args.port);
    let listener = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => {
            let identity =
                Identity::from_files(cert, key).map_err(|e| Error::Other(e.to_string()))?;
            let options = TlsListenOptions {
                alpn: args.alpn.clone(),
                ..TlsListenOptions::new(identity)
            };
            TcpListener::bind_tls((host, port), &options).await?
        }
        _ => TcpListener::bind((host, port)).await?,
    };
    eprintln!("ncat: listening on {}", listener.local_addr()?);
    let (stream, _) = listener.accept().await?;
    listener.close().await;
    Ok(stream)
}

async fn relay(stream: TcpStream) -> Result<(), Error> {
    let (from_peer, to_peer) = stream.into_split();
    let printing = moat_sdk::spawn(socket_to_stdout(from_peer));
    stdin_to_socket(to_peer).await?;
    printing.await?
}

async fn stdin_to_socket(mut to_peer: OwnedWriteHalf) -> Result<(), Error> {
    let mut input = stdin();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = input
            .read_buf(&mut buf)
            .await
            .map_err(|e| Error::Other(format!("stdin: {e}")))?;
        if n == 0 {
            break;
        }
        buf = to_peer.write_all_owned(buf).await?;
    }
    to_peer.shutdown().await
}

async fn socket_to_stdout(mut from_peer: OwnedReadHalf) -> Result<(), Error> {
    let mut out = stdout();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        if from_peer.read_buf(&mut buf).await? == 0 {
            break;
        }
        out.write_all(&buf)
            .await
            .map_err(|e| Error::Other(format!("stdout: {e}")))?;
    }
    out.close()
        .await
        .map_err(|e| Error::Other(format!("stdout: {e}")))
}

/// `-u -l`: print each datagram and send it back to its sender.
async fn udp_serve(host: &str, port: u16) -> Result<(), Error> {
    let socket = UdpSocket::bind((host, port)).await?;
    eprintln!("ncat: listening on {} (udp)", socket.local_addr()?);
    let mut out = stdout();
    loop {
        let datagram = socket.recv().await?;
        let mut line = datagram.data.clone();
        line.push(b'\n');
        out.write_all(&line)
            .await
            .map_err(|e| Error::Other(format!("stdout: {e}")))?;
        let from = datagram.from;
        socket
            .send_to(&datagram.data, (&from.ip().to_string(), from.port()))
            .await?;
    }
}

/// `-u`: each stdin line goes out as a datagram; replies are printed.
async fn udp_client(host: &str, port: u16) -> Result<(), Error> {
    use std::cell::Cell;
    use std::rc::Rc;

    let wildcard = if host.contains(':') { "::" } else { "0.0.0.0" };
    let socket = Rc::new(UdpSocket::bind((wildcard, 0)).await?);
    // When the last datagram came: the client lingers until it is a while ago.
    let last_heard = Rc::new(Cell::new(moat_sdk::time::now()));
    let printing = {
        let (socket, last_heard) = (Rc::clone(&socket), Rc::clone(&last_heard));
        moat_sdk::spawn(async move {
            let mut out = stdout();
            while let Ok(datagram) = socket.recv().await {
                last_heard.set(moat_sdk::time::now());
                let mut line = datagram.data;
                line.push(b'\n');
                if out.write_all(&line).await.is_err() {
                    break;
                }
            }
            let _ = out.close().await;
        })
    };
    let mut input = stdin();
    let mut pending = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = input
            .read_buf(&mut buf)
            .await
            .map_err(|e| Error::Other(format!("stdin: {e}")))?;
        pending.extend_from_slice(&buf);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            socket
                .send_to(&line[..line.len() - 1], (host, port))
                .await?;
        }
        if n == 0 {
            if !pending.is_empty() {
                socket.send_to(&pending, (host, port)).await?;
            }
            break;
        }
    }
    last_heard.set(last_heard.get().max(moat_sdk::time::now()));
    loop {
        let quiet = moat_sdk::time::now().saturating_sub(last_heard.get());
        if quiet >= UDP_LINGER {
            break;
        }
        moat_sdk::time::sleep(UDP_LINGER - quiet).await;
    }
    socket.close();
    let _ = printing.await;
    Ok(())
}
