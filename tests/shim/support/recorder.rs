//! An HTTPS peer for the shim's secrets tests, and the secret's value.

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

/// The value of the pods' secret: what no guest may hold.
pub const SECRET_VALUE: &str = "sk-live-7Hq2mZ9xR4tW8vB1nK6p";

/// http-probe's last argument that makes its run exit 5 if its memory
/// holds the value (the value XORed with 0x55, in hex, so that the probe's
/// own arguments never hold it).
pub fn scan_for_the_value() -> String {
    format!(
        "scan:{}",
        SECRET_VALUE
            .bytes()
            .map(|b| format!("{:02x}", b ^ 0x55))
            .collect::<String>()
    )
}

/// An HTTPS server on `ip` for `names` under `ca`, that records each
/// request's head and answers 200 with the request's `authorization`
/// echoed back in `x-echo` and in the body.
pub struct Recorder {
    pub port: u16,
    heads: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    pub async fn start(ca: &super::certs::Ca, ip: &str, names: &[&str]) -> Recorder {
        let acceptor = ca.leaf(names).acceptor(&["http/1.1"]);
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let port = listener.local_addr().expect("its port").port();
        let heads: std::sync::Arc<std::sync::Mutex<Vec<String>>> = std::sync::Arc::default();
        let seen = std::sync::Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), std::sync::Arc::clone(&seen));
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65_536 {
                        match tls.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let auth = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("authorization")
                                .then(|| value.trim().to_owned())
                        })
                        .unwrap_or_default();
                    seen.lock().expect("the record").push(head);
                    let body = format!("got {auth}");
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nx-echo: {auth}\r\ncontent-length: {}\r\n\
                         connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        Recorder { port, heads }
    }

    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("the record").clone()
    }
}
