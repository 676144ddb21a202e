//! Test guest: one subcommand per behaviour the integration tests check.
//! Each prints what it saw on stdout; errors end `main` with exit code 1.

use std::time::Duration;

use moat_sdk::time::{now, timeout};
use moat_sdk::{
    ConnectOptions, Error, Identity, MulticastInterface, TcpListener, TcpStream, TlsConnectOptions,
    TlsListenOptions, UdpSocket,
};

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<&str, Error> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| Error::InvalidArgument(format!("probe: argument {i} missing")))
    };
    let num = |i: usize| -> Result<u64, Error> {
        arg(i)?
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("probe: argument {i} is not a number")))
    };
    match arg(0)? {
        "connect" => {
            let stream = TcpStream::connect((arg(1)?, num(2)? as u16)).await?;
            println!("connected to {}", stream.peer_addr()?);
        }
        "listen" => {
            let listener = TcpListener::bind((arg(1)?, num(2)? as u16)).await?;
            println!("listening on {}", listener.local_addr()?);
        }
        "half-close" => half_close(arg(1)?, num(2)? as u16).await?,
        "fin-first" => fin_first(arg(1)?, num(2)? as u16).await?,
        "abandon-reads" => abandon_reads(arg(1)?, num(2)? as u16).await?,
        "drop-filled-reads" => drop_filled_reads(arg(1)?, num(2)? as u16, num(3)?).await?,
        "busy" => {
            let tls = args.get(6).is_some_and(|a| a == "tls");
            busy(
                arg(1)?,
                num(2)? as u16,
                num(3)? as u16,
                num(4)?,
                num(5)?,
                tls,
            )
            .await?
        }
        "reset" => reset(arg(1)?, num(2)? as u16).await?,
        "trap" | "exit" => {
            let listener = TcpListener::bind((arg(1)?, num(3)? as u16)).await?;
            let mut stream = TcpStream::connect((arg(1)?, num(2)? as u16)).await?;
            stream.write_all(b"holding").await?;
            println!(
                "holding {} and {}",
                listener.local_addr()?,
                stream.local_addr()?
            );
            if arg(0)? == "exit" {
                moat_sdk::exit(num(4)? as u8);
            }
            panic!("probe: trapping with sockets open");
        }
        "accept-close" => accept_close(arg(1)?).await?,
        "self-connect" => self_connect(arg(1)?, args.get(2).map(String::as_str)).await?,
        "cat" => {
            let text = std::fs::read_to_string(arg(1)?)
                .map_err(|e| Error::Other(format!("{}: {e}", arg(1).unwrap_or_default())))?;
            print!("{text}");
        }
        "env" => {
            println!("args: {:?}", &args[1..]);
            println!(
                "MOAT_TEST={}",
                std::env::var("MOAT_TEST").unwrap_or_default()
            );
        }
        "options" => options(arg(1)?, num(2)? as u16).await?,
        "udp-recv" => udp_recv(arg(1)?).await?,
        "tls-connect" => tls_connect(arg(1)?, num(2)? as u16, args.get(3), args.get(4)).await?,
        "tls-echo-server" => tls_echo_server(arg(1)?, arg(2)?).await?,
        "tls-listen-many" => {
            let hold = args.get(5).is_some_and(|a| a == "hold");
            tls_listen_many(num(1)? as usize, arg(2)?, arg(3)?, num(4)? as u16, hold).await?
        }
        "tls-connect-many" => {
            let hold = args.get(6).is_some_and(|a| a == "hold");
            let (host, port) = (arg(1)?, num(2)? as u16);
            tls_connect_many(host, port, num(3)?, arg(4)?, num(5)? as usize, hold).await?
        }
        "udp-bind-reuse" => udp_bind_reuse(arg(1)?, num(2)? as u16, arg(3)?).await?,
        "udp-many" => udp_many(arg(1)?).await?,
        "udp-close" => udp_close(arg(1)?).await?,
        "udp-send" => {
            let socket = UdpSocket::bind(("127.0.0.1", 0)).await?;
            socket
                .send_to(arg(3)?.as_bytes(), (arg(1)?, num(2)? as u16))
                .await?;
            println!("sent");
        }
        "udp-ask" => udp_ask(arg(1)?, arg(2)?, num(3)? as u16, arg(4)?).await?,
        "udp-broadcast" => {
            let options = moat_sdk::UdpBindOptions {
                broadcast: true,
                ..Default::default()
            };
            match UdpSocket::bind_with((arg(1)?, 0), &options).await {
                Ok(s) => println!("bound {} with broadcast", s.local_addr()?),
                Err(e) => println!("bind with broadcast: {e:?}"),
            }
        }
        "udp-multicast" => udp_multicast(arg(1)?, arg(2)?).await?,
        "fairness" => fairness(arg(1)?, num(2)? as u16, num(3)? as u16, num(4)? as usize).await?,
        "abort" => abort(arg(1)?, num(2)? as u16).await?,
        "io-traits" => io_traits(arg(1)?, num(2)? as u16).await?,
        "deadlock" => {
            // Every task waits on another task, none on the host: nothing
            // can ever wake this program again.
            println!("waiting on a task that never ends");
            let _ = moat_sdk::spawn(std::future::pending::<()>()).await;
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "probe: unknown command {other}"
            )));
        }
    }
    Ok(())
}

/// Reads until the peer's FIN, then writes after it and half-closes.
async fn half_close(host: &str, port: u16) -> Result<(), Error> {
    let mut stream = TcpStream::connect((host, port)).await?;
    let got = stream.read_to_end().await?;
    println!("got: {}", String::from_utf8_lossy(&got));
    stream.write_all(b"written after your FIN").await?;
    stream.shutdown().await
}

/// Half-closes first, then reads what the peer still sends.
async fn fin_first(host: &str, port: u16) -> Result<(), Error> {
    let mut stream = TcpStream::connect((host, port)).await?;
    stream.write_all(b"guest is done sending").await?;
    stream.shutdown().await?;
    let got = stream.read_to_end().await?;
    println!("got: {}", String::from_utf8_lossy(&got));
    Ok(())
}

/// Reads with a very short timeout, abandoning most reads while the peer
/// sends, then echoes everything it got and half-closes.
async fn abandon_reads(host: &str, port: u16) -> Result<(), Error> {
    let mut stream = TcpStream::connect((host, port)).await?;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1500];
    let mut abandoned = 0u64;
    loop {
        match timeout(Duration::from_micros(100), stream.read(&mut buf)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => return Err(e),
            Err(_) => abandoned += 1,
        }
    }
    println!("abandoned {abandoned} reads, got {} bytes", got.len());
    stream.write_all(&got).await?;
    stream.shutdown().await
}

/// Starts a read, lets the peer's bytes land in it while nobody polls it,
/// then drops it: the host completed the read, so only the SDK's guard can
/// keep those bytes. Each round asks the peer for one message with "go N"
/// and reads it back whole with a fresh read.
async fn drop_filled_reads(host: &str, port: u16, rounds: u64) -> Result<(), Error> {
    use std::future::{Future, poll_fn};
    use std::pin::pin;
    use std::task::Poll;

    let (mut from_peer, mut to_peer) = TcpStream::connect((host, port)).await?.into_split();
    for round in 0..rounds {
        let expected = format!("message {round} from the peer;");
        {
            let mut buf = vec![0u8; 4096];
            let mut read = pin!(from_peer.read(&mut buf));
            // One poll starts the read; the peer has not been asked yet.
            let started = poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx).is_pending())).await;
            if !started {
                return Err(Error::Other(format!(
                    "round {round}: read finished before the peer sent"
                )));
            }
            to_peer
                .write_all(format!("go {round}\n").as_bytes())
                .await?;
            // The reply lands in the started read meanwhile; then it is dropped.
            moat_sdk::time::sleep(Duration::from_millis(10)).await;
        }
        let mut got = vec![0u8; expected.len()];
        // Bounds a failure only: in a passing run the bytes are there.
        if timeout(Duration::from_secs(5), from_peer.read_exact(&mut got))
            .await
            .is_err()
        {
            println!("round {round}: bytes lost");
            return Err(Error::Other("bytes of a dropped read were lost".into()));
        }
        if got == expected.as_bytes() {
            println!("round {round}: intact");
        } else {
            println!("round {round}: got {:?}", String::from_utf8_lossy(&got));
        }
    }
    to_peer.shutdown().await
}

/// Writes `bytes` to host:port, computes for `ms` without awaiting, then
/// connects to host:done_port to say the computation is over. With `tls`,
/// the data connection is TLS (trusting the roots the host was given).
async fn busy(
    host: &str,
    port: u16,
    done_port: u16,
    bytes: u64,
    ms: u64,
    tls: bool,
) -> Result<(), Error> {
    let options = ConnectOptions {
        send_buffer_size: Some(64 * 1024),
        ..ConnectOptions::default()
    };
    let mut stream = match tls {
        false => TcpStream::connect_with((host, port), &options).await?,
        true => {
            TcpStream::connect_tls_with((host, port), &options, &TlsConnectOptions::default())
                .await?
        }
    };
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    stream.write_all_owned(data).await?;
    let start = now();
    let mut spins = 0u64;
    while now() - start < Duration::from_millis(ms) {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
    TcpStream::connect((host, done_port)).await?;
    println!("computed {ms} ms ({spins} spins)");
    Ok(())
}

/// Says "ready", then expects the peer to reset the connection.
async fn reset(host: &str, port: u16) -> Result<(), Error> {
    let mut stream = TcpStream::connect((host, port)).await?;
    stream.write_all(b"ready").await?;
    let mut buf = [0u8; 64];
    match stream.read(&mut buf).await {
        Err(Error::ConnectionReset(_)) => println!("read: connection reset"),
        other => println!("read: unexpected {other:?}"),
    }
    Ok(())
}

/// Closing a listener wakes an accept that is already waiting.
async fn accept_close(host: &str) -> Result<(), Error> {
    let listener = std::rc::Rc::new(TcpListener::bind((host, 0)).await?);
    let waiting = {
        let listener = std::rc::Rc::clone(&listener);
        moat_sdk::spawn(async move {
            match listener.accept().await {
                Ok(_) => Ok(true),
                Err(Error::Closed(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })
    };
    moat_sdk::time::sleep(Duration::from_millis(20)).await;
    listener.close().await;
    match waiting.await?? {
        false => println!("accept after close: none"),
        true => println!("accept after close: a connection"),
    }
    match listener.local_addr() {
        Err(Error::Closed(_)) => println!("local_addr after close: closed"),
        other => println!("local_addr after close: {other:?}"),
    }
    Ok(())
}

/// A connected pair through the program's own listener on `host`:0,
/// connected to through `connect_host` (the listener's own address if
/// none).
async fn self_connect(host: &str, connect_host: Option<&str>) -> Result<(), Error> {
    let listener = TcpListener::bind((host, 0)).await?;
    let local = listener.local_addr()?;
    println!("listening on {local}");
    let to = connect_host.map_or_else(|| local.ip().to_string(), str::to_owned);
    let mut client = TcpStream::connect((to.as_str(), local.port())).await?;
    let (mut server, peer) = listener.accept().await?;
    println!(
        "accepted peer is the client: {}",
        peer == client.local_addr()?
    );
    client.write_all(b"ping from the client").await?;
    client.shutdown().await?;
    let got = server.read_to_end().await?;
    println!("server read: {}", String::from_utf8_lossy(&got));
    server.write_all(b"pong from the server").await?;
    server.shutdown().await?;
    let got = client.read_to_end().await?;
    println!("client read: {}", String::from_utf8_lossy(&got));
    Ok(())
}

/// Socket options and addresses.
async fn options(host: &str, port: u16) -> Result<(), Error> {
    let options = ConnectOptions {
        nodelay: true,
        timeout: Some(Duration::from_secs(5)),
        ..ConnectOptions::default()
    };
    let stream = TcpStream::connect_with((host, port), &options).await?;
    stream.set_nodelay(false)?;
    stream.set_keepalive(Some(moat_sdk::Keepalive {
        idle: Some(Duration::from_secs(60)),
        ..Default::default()
    }))?;
    let bad = stream.set_keepalive(Some(moat_sdk::Keepalive {
        idle: Some(Duration::ZERO),
        ..Default::default()
    }));
    println!(
        "local {} peer {}",
        stream.local_addr()?,
        stream.peer_addr()?
    );
    println!("zero keepalive: {bad:?}");
    Ok(())
}

/// Prints every datagram's length and truncation until one says "stop".
async fn udp_recv(host: &str) -> Result<(), Error> {
    let socket = UdpSocket::bind((host, 0)).await?;
    println!("listening on {}", socket.local_addr()?);
    loop {
        let d = socket.recv().await?;
        if d.data == b"stop" {
            return Ok(());
        }
        println!(
            "len {} truncated {} from {}",
            d.data.len(),
            d.truncated,
            d.from
        );
    }
}

/// Waits for a TCP connection (the peer's "all sent"), then takes every
/// queued datagram with one receive-many and sends them all back with one
/// send-many.
async fn udp_many(host: &str) -> Result<(), Error> {
    let socket = UdpSocket::bind((host, 0)).await?;
    let signal = TcpListener::bind((host, 0)).await?;
    println!("tcp on {}", signal.local_addr()?);
    println!("listening on {}", socket.local_addr()?);
    let _go = signal.accept().await?;
    let batch = socket.recv_many(64).await?;
    println!("batch {}", batch.len());
    let replies = batch
        .into_iter()
        .map(|d| (d.data, d.from.ip().to_string(), d.from.port()))
        .collect();
    let (sent, failed) = socket.send_many(replies).await?;
    println!("sent {sent} failed {failed:?}");
    Ok(())
}

/// Closing a socket wakes a receive that is waiting on it.
async fn udp_close(host: &str) -> Result<(), Error> {
    let socket = std::rc::Rc::new(UdpSocket::bind((host, 0)).await?);
    let waiting = {
        let socket = std::rc::Rc::clone(&socket);
        moat_sdk::spawn(async move { socket.recv().await.map(|d| d.data) })
    };
    moat_sdk::time::sleep(Duration::from_millis(20)).await;
    socket.close();
    println!("receive after close: {:?}", waiting.await?);
    Ok(())
}

/// Binds `bind`:0 (with SO_BROADCAST on IPv4), sends `message` to
/// host:port and prints the first reply, from whoever sends it (a multicast
/// or broadcast is answered from a unicast address).
async fn udp_ask(bind: &str, host: &str, port: u16, message: &str) -> Result<(), Error> {
    let options = moat_sdk::UdpBindOptions {
        broadcast: !bind.contains(':'),
        ..Default::default()
    };
    let socket = UdpSocket::bind_with((bind, 0), &options).await?;
    socket.send_to(message.as_bytes(), (host, port)).await?;
    println!("sent");
    // Bounds a failure only: in a passing run the reply is there.
    let d = timeout(Duration::from_secs(30), socket.recv())
        .await
        .map_err(|_| Error::TimedOut("no reply within 30s".into()))??;
    println!(
        "reply from {}: {}",
        d.from,
        String::from_utf8_lossy(&d.data)
    );
    Ok(())
}

/// Joins `group` on the interface with address `on`, sends to the group
/// and receives its own datagram back.
async fn udp_multicast(group: &str, on: &str) -> Result<(), Error> {
    let options = moat_sdk::UdpBindOptions {
        multicast_loopback: Some(true),
        ..Default::default()
    };
    let socket = UdpSocket::bind_with(("0.0.0.0", 0), &options).await?;
    let port = socket.local_addr()?.port();
    let bad = |e: std::net::AddrParseError| Error::InvalidArgument(e.to_string());
    let group_ip: std::net::IpAddr = group.parse().map_err(bad)?;
    socket.join_multicast(
        group_ip,
        MulticastInterface::Address(on.parse().map_err(bad)?),
    )?;
    socket.send_to(b"to the group", (group, port)).await?;
    let d = timeout(Duration::from_secs(5), socket.recv())
        .await
        .map_err(|_| Error::TimedOut("no datagram from the group within 5s".into()))??;
    println!("got {:?} from the group", String::from_utf8_lossy(&d.data));
    socket.leave_multicast(
        group_ip,
        MulticastInterface::Address(on.parse().map_err(bad)?),
    )?;
    Ok(())
}

/// Connects with TLS (trusting `ca`, a PEM file, if given; offering the
/// comma-separated `alpn`), says a line and prints the line that comes back.
async fn tls_connect(
    host: &str,
    port: u16,
    ca: Option<&String>,
    alpn: Option<&String>,
) -> Result<(), Error> {
    let extra_roots = match ca.filter(|c| !c.is_empty()) {
        Some(path) => Some(std::fs::read(path).map_err(|e| Error::Other(format!("{path}: {e}")))?),
        None => None,
    };
    let options = TlsConnectOptions {
        alpn: alpn
            .map(|a| a.split(',').map(str::to_owned).collect())
            .unwrap_or_default(),
        extra_roots,
        ..Default::default()
    };
    let mut stream = match TcpStream::connect_tls((host, port), &options).await {
        Ok(stream) => stream,
        Err(e) => {
            println!("tls error: {e:?}");
            println!("tls error says: {e}");
            return Ok(());
        }
    };
    println!("connected, alpn {:?}", stream.alpn_protocol());
    stream.write_all(b"hello moat\n").await?;
    let mut buf = Vec::new();
    if stream.read_until(b"\n", &mut buf, 4096).await? > 0 {
        println!("got: {}", String::from_utf8_lossy(&buf).trim_end());
    }
    Ok(())
}

/// A TLS echo server: each connection gets back what it sends.
async fn tls_echo_server(cert: &str, key: &str) -> Result<(), Error> {
    let identity = Identity::from_files(cert, key).map_err(|e| Error::Other(e.to_string()))?;
    let listener =
        TcpListener::bind_tls(("127.0.0.1", 0), &TlsListenOptions::new(identity)).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (mut conn, _) = listener.accept().await?;
        moat_sdk::spawn(async move {
            let mut buf = Vec::with_capacity(64 * 1024);
            loop {
                buf.clear();
                match conn.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => match conn.write_all_owned(buf).await {
                        Ok(emptied) => buf = emptied,
                        Err(_) => return,
                    },
                }
            }
            let _ = conn.shutdown().await;
        });
    }
}

/// Reads `path`, the guest's file.
fn read_file(path: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::Other(format!("{path}: {e}")))
}

/// A TCP listener the test connects to at each point where the guest
/// waits for it (so the test can look at the host in between).
async fn signal() -> Result<TcpListener, Error> {
    let signal = TcpListener::bind(("127.0.0.1", 0)).await?;
    println!("signal on {}", signal.local_addr()?);
    Ok(signal)
}

/// Opens `n` TLS listeners on 127.0.0.1:`port` (0: each a free port), each
/// presenting the chain in `cert` (`{i}` in the path: listener i's own
/// file) with a PEM comment naming the listener before it, so no two
/// listeners are given the same PEM text. With `hold`, waits for the test
/// after the first listener and after the last, and meanwhile serves one
/// connection on the last: a line, echoed.
async fn tls_listen_many(
    n: usize,
    cert: &str,
    key: &str,
    port: u16,
    hold: bool,
) -> Result<(), Error> {
    let signal = if hold { Some(signal().await?) } else { None };
    let private_key = read_file(key)?;
    let shared = if cert.contains("{i}") {
        None
    } else {
        Some(read_file(cert)?)
    };
    let mut listeners = Vec::with_capacity(n);
    for i in 0..n {
        let chain = match &shared {
            Some(chain) => chain.clone(),
            None => read_file(&cert.replace("{i}", &i.to_string()))?,
        };
        let mut certificate_chain = format!("# listener {i}\n").into_bytes();
        certificate_chain.extend_from_slice(&chain);
        let identity = Identity {
            certificate_chain,
            private_key: private_key.clone(),
        };
        let listener = match TcpListener::bind_tls(
            ("127.0.0.1", port),
            &TlsListenOptions::new(identity),
        )
        .await
        {
            Ok(listener) => listener,
            Err(e) => {
                println!("listen {i}: {e:?}");
                return Err(e);
            }
        };
        if i == 0 {
            println!("first on {}", listener.local_addr()?);
            if let Some(signal) = &signal {
                let _go = signal.accept().await?;
            }
        }
        listeners.push(listener);
    }
    let last = listeners
        .pop()
        .ok_or_else(|| Error::InvalidArgument("probe: no listeners".into()))?;
    println!("opened {n}; last on {}", last.local_addr()?);
    let Some(signal) = signal else {
        return Ok(());
    };
    let serving = moat_sdk::spawn(async move {
        let (mut conn, _) = last.accept().await?;
        let mut line = Vec::new();
        conn.read_until(b"\n", &mut line, 4096).await?;
        conn.write_all(&line).await?;
        conn.shutdown().await?;
        println!("served {:?}", String::from_utf8_lossy(&line).trim_end());
        Ok::<_, Error>(())
    });
    let _done = signal.accept().await?;
    if serving.is_finished() {
        serving.await??;
    }
    Ok(())
}

/// Makes `n` TLS connects to host:port, each trusting the roots in `roots`
/// after a first line naming the connect (so no two connects give the
/// same PEM text), padded with PEM comment lines to `pad` bytes if they
/// are shorter; prints each outcome. With `hold`, waits for the test before the
/// first connect and after the last.
async fn tls_connect_many(
    host: &str,
    port: u16,
    n: u64,
    roots: &str,
    pad: usize,
    hold: bool,
) -> Result<(), Error> {
    let signal = if hold { Some(signal().await?) } else { None };
    // "# connect NNNNNNNNNN\n": the index, written in place below.
    let mut pem = format!("# connect {:010}\n", 0).into_bytes();
    let number = 10..20;
    pem.extend_from_slice(&read_file(roots)?);
    let line = b"# padding, which a PEM reader skips, but which is bytes of PEM all the same\n";
    while pem.len() + line.len() <= pad {
        pem.extend_from_slice(line);
    }
    if pem.len() < pad {
        pem.resize(pad - 1, b'#');
        pem.push(b'\n');
    }
    let mut options = TlsConnectOptions {
        extra_roots: Some(pem),
        ..Default::default()
    };
    println!(
        "ready: {} bytes of roots",
        options.extra_roots.as_ref().map_or(0, Vec::len)
    );
    if let Some(signal) = &signal {
        let _go = signal.accept().await?;
    }
    for i in 0..n {
        if let Some(pem) = &mut options.extra_roots {
            pem[number.clone()].copy_from_slice(format!("{i:010}").as_bytes());
        }
        match TcpStream::connect_tls((host, port), &options).await {
            Ok(_) => println!("connect {i}: connected"),
            Err(e) => println!("connect {i}: {e:?}"),
        }
    }
    println!("done");
    if let Some(signal) = &signal {
        let _done = signal.accept().await?;
    }
    Ok(())
}

/// Binds host:port with SO_REUSEPORT or SO_REUSEADDR (`flag`), and prints
/// the outcome. Bound, it prints how many datagrams reached it as each
/// arrives, until the test connects to the signal listener.
async fn udp_bind_reuse(host: &str, port: u16, flag: &str) -> Result<(), Error> {
    let signal = signal().await?;
    let options = moat_sdk::UdpBindOptions {
        reuse_port: flag == "reuse-port",
        reuse_address: flag == "reuse-address",
        ..Default::default()
    };
    if !(options.reuse_port || options.reuse_address) {
        return Err(Error::InvalidArgument(format!(
            "probe: unknown flag {flag}"
        )));
    }
    let socket = match UdpSocket::bind_with((host, port), &options).await {
        Ok(socket) => socket,
        Err(e) => {
            println!("bind: {e:?}");
            return Ok(());
        }
    };
    println!("bind: ok on {}", socket.local_addr()?);
    let counting = moat_sdk::spawn(async move {
        let mut received = 0u64;
        while socket.recv().await.is_ok() {
            received += 1;
            println!("received {received}");
        }
    });
    let _done = signal.accept().await?;
    counting.abort();
    Ok(())
}

/// A task reading a flood that is all there, beside a task writing one line
/// elsewhere: reports how many reads the reader had done when the writer
/// got its turn.
async fn fairness(
    host: &str,
    flood_port: u16,
    other_port: u16,
    read_size: usize,
) -> Result<(), Error> {
    let mut flood = TcpStream::connect((host, flood_port)).await?;
    let mut other = TcpStream::connect((host, other_port)).await?;
    // The peer sends this after the whole flood, so the flood is waiting.
    let mut go = [0u8; 1];
    other.read_exact(&mut go).await?;
    let reads = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let reader = {
        let reads = std::rc::Rc::clone(&reads);
        moat_sdk::spawn(async move {
            let mut buf = vec![0u8; read_size];
            let mut total = 0;
            loop {
                let n = flood.read(&mut buf).await?;
                if n == 0 {
                    return Ok::<_, Error>(total);
                }
                total += n;
                reads.set(reads.get() + 1);
            }
        })
    };
    let writer = {
        let reads = std::rc::Rc::clone(&reads);
        moat_sdk::spawn(async move {
            let seen = reads.get();
            other
                .write_all(format!("writer ran after {seen} reads\n").as_bytes())
                .await?;
            other.shutdown().await?;
            Ok::<_, Error>(seen)
        })
    };
    let total = reader.await??;
    let seen = writer.await??;
    println!(
        "flood of {total} bytes in {} reads; the writer ran after {seen}",
        reads.get()
    );
    Ok(())
}

/// Aborts a task that holds a connection, reading; its stream is dropped.
async fn abort(host: &str, port: u16) -> Result<(), Error> {
    let mut stream = TcpStream::connect((host, port)).await?;
    let reading = moat_sdk::spawn(async move {
        let mut buf = [0u8; 64];
        while stream.read(&mut buf).await? > 0 {}
        Ok::<_, Error>(())
    });
    moat_sdk::task::yield_now().await;
    let finished_before = reading.is_finished();
    reading.abort();
    let outcome = reading.await;
    println!(
        "finished before abort: {finished_before}; aborted: {}",
        outcome.is_err_and(|e| e.is_cancelled())
    );
    Ok(())
}

/// The I/O traits, against a peer that sends lines then FIN: the first
/// line through tokio's `AsyncBufReadExt`, the second through futures',
/// five bytes through `AsyncReadExt::read_exact` (a poll-driven read), the
/// rest through the SDK's own `read_to_end`; each answered, upper-cased,
/// through tokio's and futures' `write_all`, then the rest, over and over,
/// through futures' `write` until a write is still with the host, then
/// "END" through the SDK's `write_all`, then `close` (a FIN).
async fn io_traits(host: &str, port: u16) -> Result<(), Error> {
    use futures::io::{AsyncBufReadExt as _, AsyncReadExt, AsyncWriteExt};
    use std::task::Poll;
    let io = |e: std::io::Error| Error::Other(e.to_string());
    let mut stream = TcpStream::connect((host, port)).await?;

    let mut line = String::new();
    {
        // tokio's buffered reader keeps what it read ahead: one line, then
        // its buffer goes back to the stream, as the next read would.
        let mut reader = tokio::io::BufReader::with_capacity(1, &mut stream);
        tokio::io::AsyncBufReadExt::read_line(&mut reader, &mut line)
            .await
            .map_err(io)?;
    }
    tokio::io::AsyncWriteExt::write_all(&mut stream, line.to_uppercase().as_bytes())
        .await
        .map_err(io)?;

    let mut second = String::new();
    {
        let mut reader = futures::io::BufReader::with_capacity(1, &mut stream);
        reader.read_line(&mut second).await.map_err(io)?;
    }
    // The traits' methods, not the SDK's inherent ones of the same names.
    AsyncWriteExt::write_all(&mut stream, second.to_uppercase().as_bytes())
        .await
        .map_err(io)?;

    let mut five = [0u8; 5];
    AsyncReadExt::read_exact(&mut stream, &mut five)
        .await
        .map_err(io)?;
    let rest = TcpStream::read_to_end(&mut stream).await?;
    let mut tail = five.to_vec();
    tail.extend_from_slice(&rest);
    // Through the trait until a write is still with the host (the peer
    // reads nothing until this guest says so), then the SDK's own write,
    // which must wait for it and go after it.
    let upper = String::from_utf8_lossy(&tail).to_uppercase().into_bytes();
    let mut sent = 0;
    loop {
        sent += AsyncWriteExt::write(&mut stream, &upper[sent % upper.len()..])
            .await
            .map_err(io)?;
        let held = std::future::poll_fn(|cx| {
            let flush = futures::io::AsyncWrite::poll_flush(std::pin::Pin::new(&mut stream), cx);
            Poll::Ready(flush.is_pending())
        })
        .await;
        if held {
            break;
        }
    }
    println!("io-traits: {sent} bytes written, the last still with the host");
    TcpStream::write_all(&mut stream, b"END\n").await?;
    stream.close().await.map_err(io)?;
    println!("io-traits: {} bytes after the lines", tail.len());
    Ok(())
}
