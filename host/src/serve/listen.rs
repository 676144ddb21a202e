//! Where `moat serve` listens, as `--addr` writes it: an IP address and
//! port, a Unix socket (`unix:PATH`), or the sockets systemd handed over
//! (`systemd`, socket activation).
//!
//! `systemd` needs [`take_handed_over`] called first thing in the
//! process's `main` (the `moat` command does), so that the descriptors
//! the launcher names are known to be its.
//!
//! Each is the operator's grant, recorded as a `serve-bind`; the handler
//! needs no listen grant for any. A client of a Unix socket has no IP
//! address: every client of one is one client for
//! `--max-instances-per-client` (as every client behind a reverse proxy
//! is the proxy's address), counted as the unspecified address `0.0.0.0`.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_util::either::Either;

use crate::error::MoatError;

/// `--addr` for the sockets systemd handed over.
pub(crate) const SYSTEMD: &str = "systemd";

/// `--addr` prefix for a Unix socket.
pub(crate) const UNIX_PREFIX: &str = "unix:";

/// What a client's connection comes in on.
pub(super) type Stream = Either<TcpStream, UnixStream>;

/// The address a listener has: where clients reach it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Listening {
    /// An IP address and port.
    Tcp(SocketAddr),
    /// A Unix socket's path.
    Unix(PathBuf),
}

impl fmt::Display for Listening {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listening::Tcp(addr) => write!(f, "{addr}"),
            Listening::Unix(path) => write!(f, "{UNIX_PREFIX}{}", path.display()),
        }
    }
}

/// The IP address every client of a Unix socket counts as.
pub(super) const UNIX_CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// One listening socket.
pub(super) enum Listener {
    Tcp(TcpListener),
    Unix {
        listener: UnixListener,
        /// The socket file moat made, removed when the listener goes;
        /// `None` for one systemd made.
        made: Option<PathBuf>,
    },
}

impl Listener {
    /// The next connection, and the client's address for the per-client
    /// share.
    pub(super) fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Stream, IpAddr)>> {
        match self {
            Listener::Tcp(listener) => listener.poll_accept(cx).map_ok(|(stream, peer)| {
                let _ = stream.set_nodelay(true);
                (Either::Left(stream), peer.ip())
            }),
            Listener::Unix { listener, .. } => listener
                .poll_accept(cx)
                .map_ok(|(stream, _)| (Either::Right(stream), UNIX_CLIENT)),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix {
            made: Some(path), ..
        } = self
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The listeners `written` names, each with its address.
///
/// # Errors
/// [`MoatError::Bind`] naming `written`: not an address this knows, a
/// socket that cannot be listened on, no sockets from systemd.
pub(super) async fn open(written: &str) -> Result<Vec<(Listener, Listening)>, MoatError> {
    let bind_error = |source| MoatError::Bind {
        addr: written.to_owned(),
        source,
    };
    if written == SYSTEMD {
        return handed_over().map_err(bind_error);
    }
    if let Some(path) = written.strip_prefix(UNIX_PREFIX) {
        let path = PathBuf::from(path);
        let listener = unix(&path).map_err(bind_error)?;
        return Ok(vec![(
            Listener::Unix {
                listener,
                made: Some(path.clone()),
            },
            Listening::Unix(path),
        )]);
    }
    let addr: SocketAddr = written.parse().map_err(|_| {
        bind_error(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "expected an IP address and port (127.0.0.1:8080, [::1]:8080), \
                 unix:PATH, or systemd{}",
                addr_hint(written)
            ),
        ))
    })?;
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    Ok(vec![(Listener::Tcp(listener), Listening::Tcp(addr))])
}

/// The first of `addrs` that `other` would collide with (the same Unix
/// socket, or the same port on the same or a wildcard address), as
/// written; port 0 collides with nothing.
pub(super) fn clash<'a>(
    other: &str,
    addrs: impl IntoIterator<Item = &'a String>,
) -> Option<&'a str> {
    let overlap = |a: &str, b: &str| match (a.parse::<SocketAddr>(), b.parse::<SocketAddr>()) {
        (Ok(a), Ok(b)) => {
            a.port() != 0
                && a.port() == b.port()
                && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
        }
        _ => a == b && a.starts_with(UNIX_PREFIX),
    };
    addrs
        .into_iter()
        .find(|a| overlap(a, other))
        .map(String::as_str)
}

/// What `written`, not an address, was most likely meant as: a host name
/// or no host before the port (`localhost:8080`, `:8080`, `8080`), or a
/// port past 65535. Empty when nothing better can be said.
fn addr_hint(written: &str) -> String {
    let (host, port) = match written.rsplit_once(':') {
        Some((host, port)) => (host, port),
        None => ("", written),
    };
    let Ok(port) = port.parse::<u64>() else {
        return String::new();
    };
    if port > u64::from(u16::MAX) {
        return format!("; port {port} is past 65535");
    }
    let which = if host.is_empty() {
        "no host was given".to_owned()
    } else if host.parse::<std::net::IpAddr>().is_err() && !host.starts_with('[') {
        format!("`{host}` is a name, and moat listens on addresses")
    } else {
        return String::new();
    };
    format!("; {which}: 127.0.0.1:{port} for this machine only, 0.0.0.0:{port} for every interface")
}

/// The mode of a Unix socket `moat serve` makes: its owner and its group
/// may connect (a front proxy is given the group), no other user, whatever
/// the umask says (under umask 0 it was 0777: any local user was a
/// client).
pub(crate) const UNIX_SOCKET_MODE: u32 = 0o660;

/// A Unix socket listening at `path`, of [`UNIX_SOCKET_MODE`].
fn unix(path: &Path) -> io::Result<UnixListener> {
    let listener = unix_bound(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(UNIX_SOCKET_MODE))?;
    Ok(listener)
}

/// A Unix socket listening at `path`. A socket file left there by a
/// server that is gone (nothing accepts on it) is replaced; one that a
/// server still listens on, or a file that is not a socket, is not.
fn unix_bound(path: &Path) -> io::Result<UnixListener> {
    if path.as_os_str().is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "unix: needs a path, such as unix:/run/moat/http.sock",
        ));
    }
    match UnixListener::bind(path) {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            use std::os::unix::fs::FileTypeExt;
            let is_socket = std::fs::symlink_metadata(path)
                .map(|m| m.file_type().is_socket())
                .unwrap_or(false);
            let abandoned = is_socket
                && std::os::unix::net::UnixStream::connect(path)
                    .is_err_and(|e| e.kind() == io::ErrorKind::ConnectionRefused);
            if !abandoned {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    if is_socket {
                        "a server is listening on this socket already"
                    } else {
                        "the path exists and is not a socket"
                    },
                ));
            }
            tracing::debug!(target: "moat::http", path = %path.display(), "replacing an abandoned socket file");
            std::fs::remove_file(path)?;
            UnixListener::bind(path)
        }
        bound => bound,
    }
}

/// The sockets systemd handed over, from [`take_handed_over`] until
/// `--addr=systemd` uses them.
enum HandedOver {
    /// [`take_handed_over`] has not run.
    NotTaken,
    /// Taken at the start of the process: the descriptors, or why there
    /// are none.
    Taken(Result<Vec<(RawFd, OwnedFd)>, String>),
    /// Given to a listener already.
    Used,
}

static HANDED_OVER: Mutex<HandedOver> = Mutex::new(HandedOver::NotTaken);

/// The first descriptor of systemd's socket activation protocol
/// (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// Takes the sockets systemd (or a launcher speaking its protocol:
/// `LISTEN_PID`, `LISTEN_FDS`) handed this process, for `--addr=systemd`.
/// Call it first thing in `main`, before anything opens a descriptor: a
/// descriptor the launcher claims is then either its or closed, never one
/// this process opened since (the `moat` command does). Runs once; later
/// calls do nothing.
pub fn take_handed_over() {
    let mut handed = HANDED_OVER.lock().unwrap_or_else(PoisonError::into_inner);
    if let HandedOver::NotTaken = *handed {
        *handed = HandedOver::Taken(descriptors());
    }
}

/// The descriptors the environment says were handed over, each checked
/// open.
fn descriptors() -> Result<Vec<(RawFd, OwnedFd)>, String> {
    let variable = |name: &str| std::env::var(name).ok();
    let (Some(pid), Some(count)) = (variable("LISTEN_PID"), variable("LISTEN_FDS")) else {
        return Err(
            "no sockets were handed over: LISTEN_PID and LISTEN_FDS are not set \
             (start moat from a systemd socket unit, or systemd-socket-activate)"
                .to_owned(),
        );
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Err(format!(
            "the sockets were handed to process {pid}, not this one ({})",
            std::process::id()
        ));
    }
    let count = count
        .trim()
        .parse::<RawFd>()
        .ok()
        .filter(|n| (1..=1024).contains(n))
        .ok_or_else(|| format!("LISTEN_FDS={count} is not a count from 1 to 1024"))?;
    // Each descriptor must be open before it is owned: closing one that
    // is not (a launcher that miscounted) would break I/O safety.
    for fd in LISTEN_FDS_START..LISTEN_FDS_START + count {
        if std::fs::symlink_metadata(format!("/proc/self/fd/{fd}")).is_err() {
            return Err(format!(
                "LISTEN_FDS={count}, but descriptor {fd} is not open in this process"
            ));
        }
    }
    Ok((LISTEN_FDS_START..LISTEN_FDS_START + count)
        .map(|fd| {
            // SAFETY: `OwnedFd::from_raw_fd` needs `fd` open and owned by
            // no one else. It is open: /proc/self/fd showed it just now.
            // It is no one else's: `take_handed_over` runs first in the
            // process, before anything of moat's opens a descriptor, so a
            // descriptor from 3 up is one the process inherited, which
            // LISTEN_PID (this process) and LISTEN_FDS say the launcher
            // passed for it; the state above lets this run once, so each
            // descriptor gets one owner.
            #[allow(unsafe_code)]
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            (fd, owned)
        })
        .collect())
}

/// The listening sockets systemd handed over, in the order given: TCP and
/// Unix stream sockets, listening.
fn handed_over() -> io::Result<Vec<(Listener, Listening)>> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    let taken = {
        let mut handed = HANDED_OVER.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *handed, HandedOver::Used)
    };
    match taken {
        HandedOver::NotTaken => Err(invalid(
            "the sockets systemd handed over were not taken when the process started \
             (an embedder calls moat_host::serve::listen::take_handed_over first in main)"
                .to_owned(),
        )),
        HandedOver::Used => Err(invalid(
            "the sockets systemd handed over are taken already (systemd given twice)".to_owned(),
        )),
        HandedOver::Taken(Err(why)) => Err(invalid(why)),
        HandedOver::Taken(Ok(descriptors)) => descriptors
            .into_iter()
            .map(|(fd, owned)| listener_of(owned, fd))
            .collect(),
    }
}

/// A handed-over descriptor as a listener, if it is a listening stream
/// socket of IPv4, IPv6 or Unix.
fn listener_of(owned: OwnedFd, fd: RawFd) -> io::Result<(Listener, Listening)> {
    let not_one = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} handed over is {what}, not a listening stream socket"),
        )
    };
    let socket = socket2::Socket::from(owned);
    let kind = socket.r#type().map_err(|_| not_one("not a socket"))?;
    if kind != socket2::Type::STREAM {
        return Err(not_one("a datagram or other socket"));
    }
    if !socket.is_listener()? {
        return Err(not_one("a socket that does not listen"));
    }
    // Not inherited by anything this process starts.
    socket.set_cloexec(true)?;
    socket.set_nonblocking(true)?;
    let domain = socket.domain()?;
    if domain == socket2::Domain::IPV4 || domain == socket2::Domain::IPV6 {
        let listener = TcpListener::from_std(std::net::TcpListener::from(socket))?;
        let addr = listener.local_addr()?;
        Ok((Listener::Tcp(listener), Listening::Tcp(addr)))
    } else if domain == socket2::Domain::UNIX {
        let listener = UnixListener::from_std(std::os::unix::net::UnixListener::from(socket))?;
        let path = listener
            .local_addr()?
            .as_pathname()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok((
            Listener::Unix {
                listener,
                made: None,
            },
            Listening::Unix(path),
        ))
    } else {
        Err(not_one("of another family"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_that_is_not_one_gets_the_likely_meaning() {
        let both = |why: &str, port: u32| {
            format!(
                "; {why}: 127.0.0.1:{port} for this machine only, 0.0.0.0:{port} for every interface"
            )
        };
        for (written, hint) in [
            (
                "localhost:8099",
                both("`localhost` is a name, and moat listens on addresses", 8099),
            ),
            (":8099", both("no host was given", 8099)),
            ("8099", both("no host was given", 8099)),
            ("127.0.0.1:99999", "; port 99999 is past 65535".to_owned()),
            ("127.0.0.1:http", String::new()),
        ] {
            assert_eq!(addr_hint(written), hint, "{written}");
        }
    }

    #[test]
    fn listeners_that_would_collide_are_found_before_either_is_opened() {
        let addrs = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        let given = addrs(&["127.0.0.1:8099", "unix:/run/a.sock", "[::]:9000"]);
        assert_eq!(clash("127.0.0.1:8099", &given), Some("127.0.0.1:8099"));
        assert_eq!(clash("0.0.0.0:8099", &given), Some("127.0.0.1:8099"));
        assert_eq!(clash("[::1]:9000", &given), Some("[::]:9000"));
        assert_eq!(clash("unix:/run/a.sock", &given), Some("unix:/run/a.sock"));
        assert_eq!(clash("127.0.0.1:8100", &given), None);
        assert_eq!(clash("127.0.0.1:0", &addrs(&["127.0.0.1:0"])), None);
        assert_eq!(clash("systemd", &addrs(&["systemd"])), None);
    }
}
