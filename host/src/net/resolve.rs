//! Turning a checked [`Host`] into socket addresses.

use std::net::SocketAddr;

use super::error::NetError;
use crate::policy::Host;

/// The addresses to try for `host`:`port`, in the resolver's order.
///
/// Call only after the policy allowed `host`: for a name this is the DNS
/// query. An IP literal is used as is, an IPv4-mapped IPv6 literal as the
/// IPv4 address it carries (the address the policy judged).
///
/// # Errors
/// [`NetError::NameNotResolved`] if the name has no address.
pub(crate) async fn resolve(host: &Host, port: u16) -> Result<Vec<SocketAddr>, NetError> {
    match host {
        Host::Ip(ip) => Ok(vec![SocketAddr::new(ip.to_canonical(), port)]),
        Host::Name(name) => {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(|e| NetError::NameNotResolved(format!("{name}: {e}")))?
                .collect();
            if addrs.is_empty() {
                return Err(NetError::NameNotResolved(format!("{name}: no addresses")));
            }
            tracing::debug!(target: "moat::net", %name, ?addrs, "resolved");
            Ok(addrs)
        }
    }
}

/// A kernel buffer size as `setsockopt` takes it.
///
/// # Errors
/// [`NetError::InvalidArgument`] for 0 or more than `i32::MAX`.
pub(crate) fn buffer_size(bytes: u64) -> Result<u32, NetError> {
    u32::try_from(bytes)
        .ok()
        .filter(|&n| n > 0 && n <= i32::MAX as u32)
        .ok_or_else(|| {
            NetError::InvalidArgument(format!(
                "buffer size {bytes} is out of range (1 to {})",
                i32::MAX
            ))
        })
}
