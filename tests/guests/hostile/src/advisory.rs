//! The classes of wasmtime's November 2026 advisories that reach moat,
//! through raw wasi 0.2 calls (so that no library between skips or merges
//! a call): zero-length writes by the million on every output stream a
//! guest gets, a UDP send elsewhere on a connected socket, and an outgoing
//! body that is shorter or longer than its `Content-Length`.

use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, FutureIncomingResponse, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::OutputStream;
use wasip2::sockets::instance_network::instance_network;
use wasip2::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
use wasip2::sockets::tcp_create_socket::create_tcp_socket;
use wasip2::sockets::udp::OutgoingDatagram;
use wasip2::sockets::udp_create_socket::create_udp_socket;

fn loopback(port: u16) -> IpSocketAddress {
    IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (127, 0, 0, 1),
    })
}

/// `n` zero-length writes to `stream`, each after `check-write` allowed
/// one (as the interface asks), then `end` written and flushed. Prints
/// `wrote N empty` or where it stopped.
fn empty_writes(stream: &OutputStream, n: u64, end: &[u8]) {
    let mut i = 0;
    while i < n {
        let allowed = match stream.check_write() {
            Ok(0) => {
                stream.subscribe().block();
                continue;
            }
            Ok(_) => stream.write(&[]),
            Err(e) => Err(e),
        };
        if let Err(e) = allowed {
            println!("empty write {i} failed: {e:?}");
            return;
        }
        i += 1;
    }
    match stream.blocking_write_and_flush(end) {
        Ok(()) => println!("wrote {n} empty"),
        Err(e) => println!("the last write failed: {e:?}"),
    }
}

/// `empty-writes N stdout|tcp PORT|http PORT|https AUTHORITY` (the last
/// a POST to `https://AUTHORITY/upload`, the one before to
/// `http://127.0.0.1:PORT/upload`).
pub fn empty_writes_to(n: u64, target: &str, to: &str) {
    let port = to.parse::<u16>().unwrap_or(0);
    match target {
        "stdout" => empty_writes(&wasip2::cli::stdout::get_stdout(), n, b"end\n"),
        "tcp" => {
            let socket = create_tcp_socket(IpAddressFamily::Ipv4).expect("a socket");
            let network = instance_network();
            if let Err(e) = socket.start_connect(&network, loopback(port)) {
                println!("connect: {e:?}");
                return;
            }
            let (_input, output) = loop {
                match socket.finish_connect() {
                    Err(wasip2::sockets::network::ErrorCode::WouldBlock) => {
                        socket.subscribe().block()
                    }
                    Err(e) => {
                        println!("connect: {e:?}");
                        return;
                    }
                    Ok(streams) => break streams,
                }
            };
            empty_writes(&output, n, b"end");
        }
        "http" | "https" => {
            let (scheme, authority) = match target {
                "http" => (Scheme::Http, format!("127.0.0.1:{port}")),
                _ => (Scheme::Https, to.to_owned()),
            };
            let Some((body, stream, future)) = upload(Fields::new(), &scheme, &authority) else {
                return;
            };
            empty_writes(&stream, n, b"end");
            drop(stream);
            if let Err(e) = OutgoingBody::finish(body, None) {
                println!("finish: {e:?}");
                return;
            }
            println!("response: {}", response_of(&future));
        }
        other => println!("no such target {other}"),
    }
}

/// A POST to `scheme://authority/upload` with `headers`, sent: its body,
/// the body's stream and the response to come; `None` (said on stdout)
/// when the host refused to send it.
fn upload(
    headers: Fields,
    scheme: &Scheme,
    authority: &str,
) -> Option<(OutgoingBody, OutputStream, FutureIncomingResponse)> {
    let request = OutgoingRequest::new(headers);
    let set = request
        .set_method(&wasip2::http::types::Method::Post)
        .is_ok()
        && request.set_scheme(Some(scheme)).is_ok()
        && request.set_authority(Some(authority)).is_ok()
        && request.set_path_with_query(Some("/upload")).is_ok();
    assert!(set, "the request refused a part");
    let body = request.body().expect("the body, once");
    let stream = body.write().expect("the stream, once");
    match outgoing_handler::handle(request, None) {
        Ok(future) => Some((body, stream, future)),
        Err(e) => {
            println!("send: {e:?}");
            None
        }
    }
}

/// What became of a request: its status, or its error.
fn response_of(future: &FutureIncomingResponse) -> String {
    loop {
        match future.get() {
            Some(Ok(Ok(response))) => return format!("status {}", response.status()),
            Some(Ok(Err(code))) => return format!("{code:?}"),
            Some(Err(())) => return "taken twice".to_owned(),
            None => future.subscribe().block(),
        }
    }
}

/// `udp-elsewhere GRANTED OTHER`: a UDP socket streamed to
/// 127.0.0.1:GRANTED sends one datagram naming 127.0.0.1:OTHER, then one
/// to its own remote. Prints what each send did.
pub fn udp_elsewhere(granted: u16, other: u16) {
    let socket = create_udp_socket(IpAddressFamily::Ipv4).expect("a socket");
    let network = instance_network();
    let bound = socket.start_bind(&network, loopback(0)).is_ok() && {
        socket.subscribe().block();
        socket.finish_bind().is_ok()
    };
    assert!(bound, "bound");
    let (_incoming, outgoing) = match socket.stream(Some(loopback(granted))) {
        Ok(streams) => streams,
        Err(e) => {
            println!("stream: {e:?}");
            return;
        }
    };
    for (what, remote) in [("elsewhere", Some(loopback(other))), ("own", None)] {
        outgoing.subscribe().block();
        let result = outgoing.check_send().and_then(|_| {
            outgoing.send(&[OutgoingDatagram {
                data: what.as_bytes().to_vec(),
                remote_address: remote,
            }])
        });
        match result {
            Ok(n) => println!("{what}: sent {n}"),
            Err(e) => println!("{what}: {e:?}"),
        }
    }
}

/// `content-length PORT DECLARED WRITTEN`: a POST whose header declares
/// DECLARED bytes and whose body writes WRITTEN. Prints what the write,
/// the finish and the response did.
pub fn content_length(port: u16, declared: u64, written: u64) {
    let headers = Fields::new();
    headers
        .append("content-length", declared.to_string().as_bytes())
        .expect("a header");
    let authority = format!("127.0.0.1:{port}");
    let Some((body, stream, future)) = upload(headers, &Scheme::Http, &authority) else {
        return;
    };
    let bytes = vec![b'x'; written as usize];
    let mut wrote = "ok".to_owned();
    for chunk in bytes.chunks(4096) {
        if let Err(e) = stream.blocking_write_and_flush(chunk) {
            wrote = format!("{e:?}");
            break;
        }
    }
    println!("write: {wrote}");
    drop(stream);
    match OutgoingBody::finish(body, None) {
        Ok(()) => println!("finish: ok"),
        Err(e) => println!("finish: {e:?}"),
    }
    println!("response: {}", response_of(&future));
}
