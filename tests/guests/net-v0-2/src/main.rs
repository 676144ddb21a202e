//! A guest built against `moat:net@0.2.0` (`host/wit/moat-net-0.2.0`),
//! the released version before the current one, straight on the WIT with
//! no SDK: what a guest built with an older moat-sdk imports. Run as
//! `net-v0-2 ECHO_PORT CLOSED_PORT [CA_PEM CERT_PEM KEY_PEM]`, it connects
//! to an echo server on 127.0.0.1:ECHO_PORT and checks its bytes come
//! back, connects to a port nothing listens on, to a host no grant allows,
//! sends a datagram to itself and accepts its own connection, and, given
//! a CA and a leaf for 127.0.0.1 signed by it, listens with TLS and
//! connects to itself with TLS; one line per step, which the test
//! compares.

wit_bindgen::generate!({
    path: "../../../host/wit/moat-net-0.2.0",
    world: "moat:net/guest",
    generate_all,
});

use moat::net::types::{ErrorCode, IpAddress, SocketAddress};
use moat::net::{listen, tcp, tls, udp};

struct Guest;

impl exports::wasi::cli::run::Guest for Guest {
    async fn run() -> Result<(), ()> {
        let args = wasi::cli::environment::get_arguments();
        let port = |i: usize| -> u16 {
            args.get(i)
                .and_then(|p| p.parse().ok())
                .expect("usage: net-v0-2 ECHO_PORT CLOSED_PORT")
        };
        let (echo_port, closed_port) = (port(1), port(2));
        let outcome = async {
            echo(echo_port).await?;
            println!(
                "refused: {}",
                case(connect("127.0.0.1", closed_port).await.err())
            );
            match connect("127.0.0.3", 1).await.err() {
                Some(ErrorCode::Denied(denial)) => println!("denied: {}", denial.message),
                other => println!("denied: {}", case(other)),
            }
            datagram().await?;
            own_listener().await?;
            match (args.get(3), args.get(4), args.get(5)) {
                (Some(ca), Some(cert), Some(key)) => own_tls(ca, cert, key).await,
                _ => Ok(()),
            }
        };
        outcome
            .await
            .map_err(|e| println!("error: {}", case(Some(e))))
    }
}

export!(Guest);

fn main() {}

async fn connect(host: &str, port: u16) -> Result<tcp::TcpSocket, ErrorCode> {
    let options = tcp::ConnectOptions {
        timeout: None,
        nodelay: true,
        keepalive: None,
        send_buffer_size: None,
        receive_buffer_size: None,
    };
    tcp::connect(host.to_owned(), port, options).await
}

/// Sends a line through the echo server and reads it back whole.
async fn echo(port: u16) -> Result<(), ErrorCode> {
    let socket = connect("127.0.0.1", port).await?;
    let message = b"hello from moat:net 0.2.0".to_vec();
    let (mut tx, rx) = wit_stream::new::<u8>();
    socket.send(rx)?;
    let mut incoming = socket.receive()?;
    let left = tx.write_all(message.clone()).await;
    assert!(left.is_empty(), "the host took {} bytes fewer", left.len());
    // The end of the stream is the FIN: the echo server answers after it.
    drop(tx);
    socket.shutdown().await?;
    let mut echoed = Vec::new();
    while echoed.len() < message.len() {
        let (_, chunk) = incoming.read(Vec::with_capacity(64)).await;
        if chunk.is_empty() {
            break;
        }
        echoed.extend_from_slice(&chunk);
    }
    println!("echo: {}", String::from_utf8_lossy(&echoed));
    let local = socket.local_address()?;
    let loopback = matches!(local.address, IpAddress::Ipv4((127, 0, 0, 1)));
    println!("echo local address is loopback: {loopback}");
    Ok(())
}

/// A datagram to itself through a socket bound on loopback.
async fn datagram() -> Result<(), ErrorCode> {
    let options = udp::BindOptions {
        reuse_address: false,
        reuse_port: false,
        ttl: None,
        multicast_ttl: None,
        multicast_loopback: None,
        broadcast: false,
    };
    let socket = udp::bind("127.0.0.1".to_owned(), 0, options).await?;
    let SocketAddress { port, .. } = socket.local_address()?;
    socket
        .send_to(
            b"ping".to_vec(),
            SocketAddress {
                address: IpAddress::Ipv4((127, 0, 0, 1)),
                port,
            },
        )
        .await?;
    let d = socket.receive().await?;
    println!(
        "datagram: {} from its own port: {}",
        String::from_utf8_lossy(&d.data),
        d.remote_address.port == port
    );
    Ok(())
}

/// A listener on loopback accepts the guest's own connection.
async fn own_listener() -> Result<(), ErrorCode> {
    let options = listen::ListenOptions {
        backlog: None,
        send_buffer_size: None,
        receive_buffer_size: None,
        max_connections: None,
        max_connections_per_peer: None,
    };
    let listener = listen::listen("127.0.0.1".to_owned(), 0, options).await?;
    let SocketAddress { port, .. } = listener.local_address()?;
    let client = connect("127.0.0.1", port).await?;
    let accepted = listener.accept().await?;
    let from_client = match accepted {
        Some(accepted) => accepted.remote_address.port == client.local_address()?.port,
        None => false,
    };
    println!("accepted its own connection: {from_client}");
    listener.close().await;
    Ok(())
}

/// A TLS listener on loopback, presenting `cert` and `key`, accepts the
/// guest's own TLS connection, which trusts `ca`: both ends agree on ALPN
/// and the server reads what the client sent, decrypted.
async fn own_tls(ca: &str, cert: &str, key: &str) -> Result<(), ErrorCode> {
    let listen_options = listen::ListenOptions {
        backlog: None,
        send_buffer_size: None,
        receive_buffer_size: None,
        max_connections: None,
        max_connections_per_peer: None,
    };
    let server = tls::ServerOptions {
        identity: tls::Identity {
            certificate_chain: cert.as_bytes().to_vec(),
            private_key: key.as_bytes().to_vec(),
        },
        alpn: vec!["moat-v0-2".into()],
        client_roots: None,
        handshake_timeout: None,
    };
    let listener = tls::listen("127.0.0.1".to_owned(), 0, listen_options, server).await?;
    let SocketAddress { port, .. } = listener.local_address()?;
    let client_options = tls::ClientOptions {
        alpn: vec!["moat-v0-2".into()],
        extra_roots: Some(ca.as_bytes().to_vec()),
        client_identity: None,
    };
    let connect_options = tcp::ConnectOptions {
        timeout: None,
        nodelay: true,
        keepalive: None,
        send_buffer_size: None,
        receive_buffer_size: None,
    };
    // The host runs the server's handshake as the connection arrives,
    // before any accept: the connect completes on its own, and a failed
    // one never reaches the accept.
    let client = tls::connect(
        "127.0.0.1".to_owned(),
        port,
        connect_options,
        client_options,
    )
    .await?;
    let Some(accepted) = listener.accept().await? else {
        println!("tls: the listener closed");
        return Ok(());
    };
    let server = accepted.socket;
    let message = b"hello over TLS from moat:net 0.2.0".to_vec();
    let (mut tx, rx) = wit_stream::new::<u8>();
    client.send(rx)?;
    let left = tx.write_all(message.clone()).await;
    assert!(left.is_empty(), "the host took {} bytes fewer", left.len());
    drop(tx);
    client.shutdown().await?;
    let mut incoming = server.receive()?;
    let mut got = Vec::new();
    loop {
        let (_, chunk) = incoming.read(Vec::with_capacity(64)).await;
        if chunk.is_empty() {
            break;
        }
        got.extend_from_slice(&chunk);
    }
    println!(
        "tls: {} (TLS both ends: {}, ALPN {:?} / {:?})",
        String::from_utf8_lossy(&got),
        tls::is_tls(&client) && tls::is_tls(&server),
        tls::alpn_protocol(&client),
        tls::alpn_protocol(&server)
    );
    listener.close().await;
    Ok(())
}

/// The 0.2.0 case's name (its text-less cases are all a 0.2.0 guest gets).
fn case(e: Option<ErrorCode>) -> String {
    match e {
        None => "no error".into(),
        Some(ErrorCode::ConnectionRefused) => "connection-refused".into(),
        Some(ErrorCode::TimedOut) => "timed-out".into(),
        Some(ErrorCode::Other(why)) => format!("other({why})"),
        Some(other) => format!("{other:?}"),
    }
}
