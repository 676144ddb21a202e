//! A small HTTP/1.1 server: keep-alive, a few routes, optional TLS.
//!
//! ```text
//! moat run --allow-listen=127.0.0.1:8080 http-server.wasm 127.0.0.1:8080
//! moat run --allow-listen=127.0.0.1:8443 --dir=certs http-server.wasm --tls certs/cert.pem certs/key.pem 127.0.0.1:8443
//! ```
//!
//! Routes: `GET /` (a greeting), `GET /health` (`ok`), `POST /echo` (the
//! body back), `GET /whoami` (the client's address and, over TLS, the
//! negotiated protocol). With `--tls` it speaks TLS and offers ALPN
//! `http/1.1`. It prints `listening on HOST:PORT` once ready.

use moat_sdk::{Error, Identity, TcpListener, TcpStream, TlsListenOptions};

/// Longest request head accepted (request line and headers): bigger ones
/// get 431, so one client cannot make the server buffer without bound.
const MAX_HEAD: usize = 16 * 1024;

/// Longest request body accepted by `POST /echo`: bigger ones get 413.
const MAX_BODY: usize = 1 << 20;

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (tls, addr) = match &args[..] {
        [flag, cert, key, addr] if flag == "--tls" => (Some((cert, key)), addr),
        [addr] => (None, addr),
        _ => {
            return Err(Error::InvalidArgument(
                "usage: http-server [--tls CERT KEY] HOST:PORT".into(),
            ));
        }
    };
    let Some((host, port)) = moat_sdk::split_host_port(addr) else {
        return Err(Error::InvalidArgument(format!("`{addr}` is not HOST:PORT")));
    };
    let listener = match tls {
        Some((cert, key)) => {
            let identity =
                Identity::from_files(cert, key).map_err(|e| Error::Other(e.to_string()))?;
            let options = TlsListenOptions {
                alpn: vec!["http/1.1".into()],
                ..TlsListenOptions::new(identity)
            };
            TcpListener::bind_tls((host, port), &options).await?
        }
        None => TcpListener::bind((host, port)).await?,
    };
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (conn, _) = listener.accept().await?;
        moat_sdk::spawn(async move {
            if let Err(e) = serve(conn).await {
                eprintln!("http-server: {e}");
            }
        });
    }
}

struct Request {
    method: String,
    path: String,
    keep_alive: bool,
    content_length: usize,
}

/// Serves requests on one connection until the client closes or asks to.
async fn serve(mut conn: TcpStream) -> Result<(), Error> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match conn.read_until(b"\r\n\r\n", &mut buf, MAX_HEAD).await {
            Ok(_) if buf.ends_with(b"\r\n\r\n") => {}
            Ok(_) => break, // the client closed between requests
            Err(Error::InvalidArgument(_)) => {
                respond(
                    &mut conn,
                    431,
                    "text/plain",
                    b"request head too large\n",
                    false,
                )
                .await?;
                break;
            }
            Err(e) => return Err(e),
        }
        let Some(request) = parse(&buf) else {
            respond(&mut conn, 400, "text/plain", b"bad request\n", false).await?;
            break;
        };
        if request.content_length > MAX_BODY {
            respond(&mut conn, 413, "text/plain", b"body too large\n", false).await?;
            break;
        }
        // Exactly the body: what follows is the next request's.
        let mut body = vec![0; request.content_length];
        match conn.read_exact(&mut body).await {
            Ok(()) => {}
            Err(Error::Closed(_)) => return Ok(()),
            Err(e) => return Err(e),
        }
        let keep_alive = request.keep_alive;
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/") => {
                respond(
                    &mut conn,
                    200,
                    "text/plain",
                    b"hello from a moat guest\n",
                    keep_alive,
                )
                .await?
            }
            ("GET", "/health") => {
                respond(&mut conn, 200, "text/plain", b"ok\n", keep_alive).await?
            }
            ("POST", "/echo") => {
                respond(
                    &mut conn,
                    200,
                    "application/octet-stream",
                    &body,
                    keep_alive,
                )
                .await?
            }
            ("GET", "/whoami") => {
                let text = format!(
                    "peer {}\ntls {}\nalpn {}\n",
                    conn.peer_addr()?,
                    conn.is_tls(),
                    conn.alpn_protocol().unwrap_or_else(|| "-".into())
                );
                respond(&mut conn, 200, "text/plain", text.as_bytes(), keep_alive).await?;
            }
            (_, "/" | "/health" | "/echo" | "/whoami") => {
                respond(
                    &mut conn,
                    405,
                    "text/plain",
                    b"method not allowed\n",
                    keep_alive,
                )
                .await?
            }
            _ => respond(&mut conn, 404, "text/plain", b"not found\n", keep_alive).await?,
        }
        if !keep_alive {
            break;
        }
    }
    conn.shutdown().await
}

fn parse(head: &[u8]) -> Option<Request> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path, version) = (first.next()?, first.next()?, first.next()?);
    let mut keep_alive = version == "HTTP/1.1";
    let mut content_length = 0;
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => content_length = value.parse().ok()?,
            "connection" if value.eq_ignore_ascii_case("close") => keep_alive = false,
            "connection" if value.eq_ignore_ascii_case("keep-alive") => keep_alive = true,
            // Only Content-Length bodies: a chunked request is refused, not misread.
            "transfer-encoding" => return None,
            _ => {}
        }
    }
    Some(Request {
        method: method.to_owned(),
        path: path.split('?').next()?.to_owned(),
        keep_alive,
        content_length,
    })
}

async fn respond(
    conn: &mut TcpStream,
    status: u16,
    kind: &str,
    body: &[u8],
    keep_alive: bool,
) -> Result<(), Error> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    let mut response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: {}\r\n\r\n",
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes();
    response.extend_from_slice(body);
    conn.write_all_owned(response).await.map(drop)
}
