//! HTTP/1.0 clients: a response on a kept-alive connection needs a length.
//!
//! An HTTP/1.0 client asks to keep its connection with `Connection:
//! keep-alive`, and can only tell where a response ends from its
//! `Content-Length` (1.0 has no chunked encoding). hyper answers such a
//! client with `Connection: keep-alive` whenever the response's own version
//! is 1.1 (every handler's is), and then, for a body of unknown length,
//! sends no length and closes the connection after it: the client was
//! promised a connection it cannot use, and waits or fails (`ab -k` failed
//! 1,905 requests in 2,000). So an HTTP/1.0 request's response keeps the
//! connection only when it has a length and the client asked; otherwise it
//! is sent as HTTP/1.0, which hyper ends by closing, announcing nothing.

use http_body::Body;
use hyper::header::{CONNECTION, CONTENT_LENGTH, HeaderValue};
use hyper::{Request, Response, Version};

/// What an HTTP/1.0 request asked of its connection, read before the
/// request is handed to its handler.
pub(super) struct Http10 {
    keep_alive: bool,
}

impl Http10 {
    /// `Some` for an HTTP/1.0 request.
    pub(super) fn of<B>(request: &Request<B>) -> Option<Http10> {
        (request.version() == Version::HTTP_10).then(|| Http10 {
            keep_alive: has_token(request.headers(), "keep-alive"),
        })
    }

    /// `response` made right for the request: `Connection: keep-alive`
    /// when the client asked for it and the response has a length (a
    /// `Content-Length`, or a body whose size is known, which hyper writes
    /// as one) and does not close; an HTTP/1.0 response otherwise.
    pub(super) fn answer<B: Body>(self, response: &mut Response<B>) {
        let length = response.headers().contains_key(CONTENT_LENGTH)
            || response.body().size_hint().exact().is_some();
        if self.keep_alive && length && !has_token(response.headers(), "close") {
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("keep-alive"));
        } else {
            *response.version_mut() = Version::HTTP_10;
        }
    }
}

/// Whether a `Connection` header of `headers` lists `token`.
fn has_token(headers: &hyper::HeaderMap, token: &str) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|listed| listed.trim().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Empty, Full, StreamBody};
    use hyper::body::Bytes;

    fn request(connection: Option<&str>) -> Request<()> {
        let mut request = Request::builder().version(Version::HTTP_10);
        if let Some(value) = connection {
            request = request.header(CONNECTION, value);
        }
        request.body(()).expect("a request")
    }

    #[test]
    fn only_an_http_1_0_request_is_answered_as_one() {
        let mut request = request(Some("keep-alive"));
        assert!(Http10::of(&request).is_some());
        *request.version_mut() = Version::HTTP_11;
        assert!(Http10::of(&request).is_none());
    }

    #[test]
    fn a_length_keeps_the_connection_the_client_asked_to_keep() {
        for asked in ["keep-alive", "Keep-Alive", "foo, keep-alive"] {
            let mut response = Response::new(Full::new(Bytes::from_static(b"hello")));
            Http10::of(&request(Some(asked)))
                .expect("HTTP/1.0")
                .answer(&mut response);
            assert_eq!(response.headers()[CONNECTION], "keep-alive", "{asked}");
            assert_eq!(response.version(), Version::HTTP_11, "{asked}");
        }
        let mut response = Response::builder()
            .header(CONTENT_LENGTH, "0")
            .body(Empty::<Bytes>::new())
            .expect("a response");
        Http10::of(&request(Some("keep-alive")))
            .expect("HTTP/1.0")
            .answer(&mut response);
        assert_eq!(response.headers()[CONNECTION], "keep-alive");
    }

    #[test]
    fn without_a_length_or_the_clients_asking_it_is_an_http_1_0_response() {
        let frames = futures::stream::empty::<Result<hyper::body::Frame<Bytes>, std::io::Error>>();
        let mut unknown = Response::new(StreamBody::new(frames));
        Http10::of(&request(Some("keep-alive")))
            .expect("HTTP/1.0")
            .answer(&mut unknown);
        assert_eq!(unknown.version(), Version::HTTP_10);
        assert!(unknown.headers().get(CONNECTION).is_none());

        let mut not_asked = Response::new(Full::new(Bytes::from_static(b"hello")));
        Http10::of(&request(None))
            .expect("HTTP/1.0")
            .answer(&mut not_asked);
        assert_eq!(not_asked.version(), Version::HTTP_10);

        let mut closing = Response::builder()
            .header(CONNECTION, "close")
            .body(Full::new(Bytes::from_static(b"hello")))
            .expect("a response");
        Http10::of(&request(Some("keep-alive")))
            .expect("HTTP/1.0")
            .answer(&mut closing);
        assert_eq!(closing.version(), Version::HTTP_10);
        assert_eq!(closing.headers()[CONNECTION], "close");
    }
}
