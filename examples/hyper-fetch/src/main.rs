//! An HTTP/1.1 client on hyper 1, running on moat-sdk's sockets: fetches a
//! URL and writes the body to stdout, like `curl -f`.
//!
//! ```text
//! moat run --allow-net=example.com:443 hyper-fetch.wasm https://example.com/
//! moat run --allow-net=127.0.0.1:8080 hyper-fetch.wasm http://127.0.0.1:8080/health
//! ```
//!
//! `http` and `https` URLs (TLS is the host's: `moat run --ca-file` trusts
//! a private CA). The status line goes to stderr; a status of 400 or more
//! exits with 22, as `curl -f` does, so scripts can tell.

use std::process::ExitCode;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use moat_sdk::{Error, TcpStream, TlsConnectOptions};

#[moat_sdk::main]
async fn main() -> Result<ExitCode, Error> {
    let url = std::env::args()
        .nth(1)
        .ok_or_else(|| Error::InvalidArgument("usage: hyper-fetch URL".into()))?;
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e| Error::InvalidArgument(format!("{url}: {e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(Error::InvalidArgument(format!("{url}: not an http(s) URL"))),
    };
    let host = uri
        .host()
        .ok_or_else(|| Error::InvalidArgument(format!("{url}: no host")))?;
    // Brackets belong to the URL, not to the address.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });

    let stream = if https {
        let tls = TlsConnectOptions {
            alpn: vec!["http/1.1".into()],
            ..TlsConnectOptions::default()
        };
        TcpStream::connect_tls((host, port), &tls).await?
    } else {
        TcpStream::connect((host, port)).await?
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(stream)
        .await
        .map_err(http_error)?;
    // The connection runs beside the request, as hyper expects.
    let driving = moat_sdk::spawn(connection);

    let authority = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_else(|| host.to_owned());
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = Request::get(path)
        .header(hyper::header::HOST, authority)
        .header(hyper::header::USER_AGENT, "moat-hyper-fetch")
        .body(Empty::<Bytes>::new())
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let mut response = sender.send_request(request).await.map_err(http_error)?;
    eprintln!("{:?} {}", response.version(), response.status());

    let mut stdout = moat_sdk::io::stdout();
    while let Some(frame) = response.body_mut().frame().await {
        let frame = frame.map_err(http_error)?;
        if let Some(data) = frame.data_ref() {
            stdout
                .write_all(data)
                .await
                .map_err(|e| Error::Other(e.to_string()))?;
        }
    }
    stdout
        .close()
        .await
        .map_err(|e| Error::Other(e.to_string()))?;
    drop(sender);
    driving.await?.map_err(http_error)?;
    Ok(if response.status().as_u16() >= 400 {
        ExitCode::from(22)
    } else {
        ExitCode::SUCCESS
    })
}

fn http_error(e: hyper::Error) -> Error {
    Error::Other(format!("http: {e}"))
}
