//! The resolver: the [`Resolver`] trait through which moat looks names up
//! itself (an embedder can give its own), and the default, [`SystemResolver`].
//!
//! [`SystemResolver`] reads the system's configuration (`/etc/resolv.conf`
//! and `/etc/hosts`) and asks the name servers over the network,
//! asynchronously: a lookup is a future, not a thread, so abandoning it (a
//! connect timed out or dropped) ends it.
//!
//! A name is looked up as the absolute name the policy judged: the
//! resolver's search list and `domain` are never applied, so an allowed
//! `api` can never become `api.corp.example`.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError as HickoryError};
use hickory_resolver::proto::rr::Name;
use tokio::sync::OnceCell;

/// The future a [`Resolver`] returns.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// The future [`Resolver::lookup_answer`] returns.
pub type AnswerLookup<'a> = Pin<Box<dyn Future<Output = io::Result<Answer>> + Send + 'a>>;

/// A name's addresses and how long the answer is good for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The addresses, in preference order.
    pub addresses: Vec<IpAddr>,
    /// The answer's lifetime (its DNS TTL), if the resolver knows it.
    pub lifetime: Option<Duration>,
}

/// Answers name lookups for the socket core.
///
/// `name` is a checked DNS name (lower case, no trailing dot), to be looked
/// up as an absolute name. The core bounds how many lookups run at once
/// and how long each may take, and judges every address returned against
/// the run's deny rules before using it.
pub trait Resolver: Send + Sync + 'static {
    /// The addresses of `name`, in preference order.
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a>;

    /// The addresses of `name` with the answer's lifetime. The default
    /// calls [`lookup`](Self::lookup) and gives no lifetime.
    fn lookup_answer<'a>(&'a self, name: &'a str) -> AnswerLookup<'a> {
        Box::pin(async move {
            Ok(Answer {
                addresses: self.lookup(name).await?,
                lifetime: None,
            })
        })
    }
}

/// The system's DNS configuration, without its search list: hickory-dns
/// over `/etc/resolv.conf`'s name servers, and `/etc/hosts`; or over name
/// servers given ([`with_name_servers`](Self::with_name_servers)).
///
/// It is set up on first use, on the runtime of the run that uses it (its
/// connections are tasks of that runtime).
#[derive(Default)]
pub struct SystemResolver {
    /// The name servers to ask; `None`: the system's.
    servers: Option<Vec<SocketAddr>>,
    inner: OnceCell<Result<TokioResolver, String>>,
}

impl SystemResolver {
    /// A resolver that reads the system's configuration on first use.
    pub fn new() -> SystemResolver {
        SystemResolver::default()
    }

    /// A resolver that asks `servers` (over UDP, and TCP for a truncated
    /// answer), in order, with hickory's default timeouts and attempts,
    /// and no search list; `/etc/hosts` is not read. For an embedder whose
    /// guests must use a DNS server of its own (a filtering resolver, a
    /// sidecar), and for tests.
    pub fn with_name_servers(servers: &[SocketAddr]) -> SystemResolver {
        SystemResolver {
            servers: Some(servers.to_vec()),
            inner: OnceCell::new(),
        }
    }

    async fn resolver(&self) -> io::Result<&TokioResolver> {
        let built = self
            .inner
            .get_or_init(|| async {
                let (config, options) = match &self.servers {
                    Some(servers) => (name_servers(servers), ResolverOpts::default()),
                    None => hickory_resolver::system_conf::read_system_conf()
                        .map_err(|e| format!("cannot read the system's DNS configuration: {e}"))?,
                };
                absolute_only(config, options)
            })
            .await;
        built.as_ref().map_err(|e| io::Error::other(e.clone()))
    }
}

/// A configuration that asks `servers`, over UDP then TCP.
fn name_servers(servers: &[SocketAddr]) -> ResolverConfig {
    let servers = servers
        .iter()
        .map(|server| {
            let mut udp = ConnectionConfig::udp();
            udp.port = server.port();
            let mut tcp = ConnectionConfig::tcp();
            tcp.port = server.port();
            NameServerConfig::new(server.ip(), true, vec![udp, tcp])
        })
        .collect();
    ResolverConfig::from_parts(None, Vec::new(), servers)
}

/// A resolver for `config`'s name servers that looks every name up as
/// absolute: no domain, no search list, whatever `config` says; and that
/// keeps no answers of its own. The run keeps answers itself
/// ([`Answers`](super::answers::Answers)), paid from its host memory; hickory's cache would
/// hold up to 8,192 whole responses per run outside that budget (a name
/// with thousands of records is a response of hundreds of KiB).
fn absolute_only(config: ResolverConfig, options: ResolverOpts) -> Result<TokioResolver, String> {
    let (_, _, servers) = config.into_parts();
    let config = ResolverConfig::from_parts(None, Vec::new(), servers);
    let mut builder = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
    *builder.options_mut() = options;
    builder.options_mut().ndots = 0;
    builder.options_mut().cache_size = 0;
    builder.build().map_err(|e| e.to_string())
}

async fn lookup_absolute(resolver: &TokioResolver, name: &str) -> io::Result<Answer> {
    let absolute = Name::from_ascii(format!("{name}."))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let answer = resolver.lookup_ip(absolute).await.map_err(lookup_failed)?;
    Ok(Answer {
        addresses: answer.iter().collect(),
        lifetime: Some(
            answer
                .valid_until()
                .saturating_duration_since(std::time::Instant::now()),
        ),
    })
}

/// A lookup that failed, as the guest reads it (`name-not-resolved`):
/// what the DNS server said, in words, rather than hickory's structures.
#[derive(Debug, thiserror::Error)]
#[error("{reason}")]
struct LookupFailed {
    reason: String,
    #[source]
    source: HickoryError,
}

fn lookup_failed(e: HickoryError) -> io::Error {
    let reason = if e.is_nx_domain() {
        "no such name (the DNS server answered NXDOMAIN)".to_owned()
    } else if e.is_no_records_found() {
        // Also a CNAME chain that ends nowhere, or loops.
        "the name has no address".to_owned()
    } else {
        match &e {
            HickoryError::Dns(DnsError::ResponseCode(code)) => {
                format!("the DNS server answered {code}")
            }
            HickoryError::Proto(cause) => format!("the DNS server's answer is malformed: {cause}"),
            other => other.to_string(),
        }
    };
    io::Error::new(io::ErrorKind::NotFound, LookupFailed { reason, source: e })
}

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        Box::pin(async move { Ok(self.lookup_answer(name).await?.addresses) })
    }

    fn lookup_answer<'a>(&'a self, name: &'a str) -> AnswerLookup<'a> {
        Box::pin(async move { lookup_absolute(self.resolver().await?, name).await })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A DNS server on loopback that answers every query "no such name"
    /// and records the names it was asked.
    async fn recording_server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&asked);
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let mut query = buf[..n].to_vec();
                // The question's name: length-prefixed labels from byte 12.
                let mut labels = Vec::new();
                let mut at = 12;
                while let Some(&len) = query.get(at).filter(|&&l| l > 0) {
                    let label = query.get(at + 1..at + 1 + len as usize).unwrap_or_default();
                    labels.push(String::from_utf8_lossy(label).into_owned());
                    at += 1 + len as usize;
                }
                record.lock().unwrap().push(labels.join(".") + ".");
                // A response (QR), recursion available, NXDOMAIN.
                query[2] |= 0x80;
                query[3] = 0x80 | 3;
                let _ = socket.send_to(&query, from).await;
            }
        });
        (addr, asked)
    }

    fn config_with_search_list(server: SocketAddr) -> (ResolverConfig, ResolverOpts) {
        let mut udp = ConnectionConfig::udp();
        udp.port = server.port();
        let servers = vec![NameServerConfig::new(server.ip(), true, vec![udp])];
        let corp = Name::from_ascii("corp.example.").unwrap();
        let config = ResolverConfig::from_parts(Some(corp.clone()), vec![corp], servers);
        let mut options = ResolverOpts::default();
        options.ndots = 5;
        options.attempts = 0;
        (config, options)
    }

    #[tokio::test]
    async fn names_are_looked_up_as_written_never_through_the_search_list() {
        let (server, asked) = recording_server().await;
        let (config, options) = config_with_search_list(server);
        let resolver = absolute_only(config, options).unwrap();
        assert!(lookup_absolute(&resolver, "api").await.is_err());
        assert!(lookup_absolute(&resolver, "db.internal").await.is_err());
        let names = asked.lock().unwrap().clone();
        assert!(!names.is_empty());
        assert!(
            names.iter().all(|n| n == "api." || n == "db.internal."),
            "{names:?}"
        );

        // The same configuration used as is would have asked for
        // api.corp.example: the test can tell.
        let (config, options) = config_with_search_list(server);
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        *builder.options_mut() = options;
        let searching = builder.build().unwrap();
        asked.lock().unwrap().clear();
        assert!(searching.lookup_ip("api").await.is_err());
        let names = asked.lock().unwrap().clone();
        assert!(names.iter().any(|n| n == "api.corp.example."), "{names:?}");
    }

    /// A DNS server that answers every A query with 192.0.2.1 (TTL 300)
    /// and every other query with no records; counts the A queries.
    async fn answering_server() -> (SocketAddr, Arc<Mutex<usize>>) {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(0));
        let count = Arc::clone(&asked);
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let mut reply = buf[..n].to_vec();
                // The question ends after the name's labels: QTYPE, QCLASS.
                let mut at = 12;
                while let Some(&len) = reply.get(at).filter(|&&l| l > 0) {
                    at += 1 + len as usize;
                }
                let question_end = at + 5;
                let is_a = reply.get(at + 1..at + 3) == Some(&[0, 1][..]);
                reply.truncate(question_end);
                reply[2] |= 0x80;
                reply[3] = 0x80;
                reply[6..8].copy_from_slice(&[0, u8::from(is_a)]);
                reply[8..12].fill(0);
                if is_a {
                    *count.lock().unwrap() += 1;
                    reply.extend_from_slice(&[
                        0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1,
                    ]);
                }
                let _ = socket.send_to(&reply, from).await;
            }
        });
        (addr, asked)
    }

    #[tokio::test]
    async fn the_resolver_keeps_no_answers_of_its_own() {
        let (server, asked) = answering_server().await;
        let (config, options) = config_with_search_list(server);
        let resolver = absolute_only(config, options).unwrap();
        for _ in 0..2 {
            let answer = lookup_absolute(&resolver, "kept.test").await.unwrap();
            assert_eq!(answer.addresses, vec![IpAddr::from([192, 0, 2, 1])]);
        }
        // Asked twice, the server heard it twice.
        assert_eq!(*asked.lock().unwrap(), 2);

        // hickory's own cache would have answered the second: the test
        // can tell.
        let (config, options) = config_with_search_list(server);
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        *builder.options_mut() = options;
        builder.options_mut().ndots = 0;
        let caching = builder.build().unwrap();
        *asked.lock().unwrap() = 0;
        for _ in 0..2 {
            lookup_absolute(&caching, "kept.test").await.unwrap();
        }
        assert_eq!(*asked.lock().unwrap(), 1);
    }
}
