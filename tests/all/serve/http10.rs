//! `moat serve`: HTTP/1.0 clients. A kept-alive connection is offered only
//! with a response whose length the client can read; otherwise the
//! response is HTTP/1.0 and the connection closes after it, unannounced
//! as kept-alive.

use super::*;

/// The head of an HTTP response read from `reader`, and its body of
/// `Content-Length` bytes, or to the connection's end without one.
async fn read_answer(reader: &mut BufReader<TcpStream>) -> (String, Vec<u8>) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = within("a response head line", reader.read_line(&mut line))
            .await
            .expect("the response head reads");
        assert!(n > 0, "the connection ended inside the head: {head}");
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())
            .flatten()
    });
    let mut body = Vec::new();
    match length {
        Some(n) => {
            body.resize(n, 0);
            within("the body", reader.read_exact(&mut body))
                .await
                .expect("the body reads");
        }
        None => {
            within(
                "the body, to the connection's end",
                reader.read_to_end(&mut body),
            )
            .await
            .expect("the body reads");
        }
    }
    (head.to_ascii_lowercase(), body)
}

const KEEP_ALIVE_GET: &str = "GET {} HTTP/1.0\r\nHost: moat\r\nConnection: keep-alive\r\n\r\n";

async fn send(stream: &mut BufReader<TcpStream>, path: &str) {
    let request = KEEP_ALIVE_GET.replace("{}", path);
    stream
        .get_mut()
        .write_all(request.as_bytes())
        .await
        .expect("the request is sent");
}

/// A handler's answer of unknown length (wstd-serve's hello) to an HTTP/1.0
/// client asking for keep-alive: an HTTP/1.0 response that does not offer
/// keep-alive, its body to the connection's end, which then closes.
#[tokio::test]
async fn without_a_length_the_answer_is_http_1_0_and_the_connection_closes() {
    let server = Serve::start(guests::WSTD_SERVE, &[]).await;
    let mut stream = BufReader::new(TcpStream::connect(server.addr).await.unwrap());
    send(&mut stream, "/").await;
    let (head, body) = read_answer(&mut stream).await;
    assert!(head.starts_with("http/1.0 200"), "{head}");
    assert!(!head.contains("keep-alive"), "{head}");
    assert_eq!(body, b"hello from a wasi:http handler\n");
}

/// An answer with a `Content-Length` keeps the connection the client asked
/// to keep: two requests, one connection.
#[tokio::test]
async fn with_a_length_the_connection_is_kept_for_the_next_request() {
    let server = Serve::start(guests::HTTP_HOSTILE, &[]).await;
    let mut stream = BufReader::new(TcpStream::connect(server.addr).await.unwrap());
    for round in 0..2 {
        send(&mut stream, "/big?bytes=5").await;
        let (head, body) = read_answer(&mut stream).await;
        assert!(
            head.contains("connection: keep-alive"),
            "round {round}: {head}"
        );
        assert_eq!(body.len(), 5, "round {round}");
    }
}

/// ApacheBench's `-k` is an HTTP/1.0 client asking for keep-alive: no
/// request fails, with or without a length, and it keeps its connections
/// where the answers have one.
#[tokio::test]
async fn ab_keep_alive_fails_no_request() {
    if !have("ab") {
        return;
    }
    for (component, path, kept) in [
        (guests::WSTD_SERVE, "/", false),
        (guests::HTTP_HOSTILE, "/big?bytes=100", true),
    ] {
        let server = Serve::start(component, &[]).await;
        let url = format!("http://{}{path}", server.addr);
        let out = Command::new("ab")
            .args(["-k", "-n", "200", "-c", "4", &url])
            .output()
            .await
            .expect("ab runs");
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{report}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let field = |name: &str| {
            report
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_else(|| panic!("no {name} in:\n{report}"))
                .to_owned()
        };
        assert_eq!(field("Complete requests:"), "200", "{url}:\n{report}");
        assert_eq!(field("Failed requests:"), "0", "{url}:\n{report}");
        let expected = if kept { "200" } else { "0" };
        assert_eq!(field("Keep-Alive requests:"), expected, "{url}:\n{report}");
    }
}
