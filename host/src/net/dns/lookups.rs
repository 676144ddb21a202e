//! A run's name lookups: how many run at once, how long each may take, and
//! the answers kept for their lifetime ([`Answers`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::answers::{Addresses, Answers, Shared};
use super::resolver::Resolver;
use crate::net::budget::Budget;
use crate::net::error::NetError;
use crate::net::limits::MAX_ANSWER_ADDRESSES;
use moat_policy::policy::Host;
use moat_policy::setting::Setting;

/// A run's lookups: its resolver, how many may run at once, how long each
/// may take, and the answers kept for their lifetime.
#[derive(Clone)]
pub(crate) struct Lookups {
    resolver: Arc<dyn Resolver>,
    turns: Arc<Semaphore>,
    /// [`Setting::LookupTimeout`]'s value.
    timeout: Duration,
    answers: Arc<Answers>,
    budget: Arc<Budget>,
}

impl Lookups {
    pub(crate) fn new(
        resolver: Arc<dyn Resolver>,
        max: u32,
        timeout: Duration,
        budget: Arc<Budget>,
    ) -> Lookups {
        Lookups {
            resolver,
            turns: Arc::new(Semaphore::new(max.max(1) as usize)),
            timeout,
            answers: Arc::default(),
            budget,
        }
    }

    /// The addresses for `host`:`port`, in the resolver's order. An IP
    /// literal is used as is (it is canonical already).
    ///
    /// # Errors
    /// [`NetError::NameNotResolved`] if the name has no address or the
    /// resolver failed; [`NetError::TimedOut`] past the lookup timeout.
    pub(crate) async fn resolve(
        &self,
        host: &Host,
        port: u16,
    ) -> Result<Vec<SocketAddr>, NetError> {
        let name = match host {
            Host::Ip(ip) => return Ok(vec![SocketAddr::new(*ip, port)]),
            Host::Name(name) => name,
        };
        let addrs: Vec<SocketAddr> = self
            .answer(name)
            .await?
            .addresses
            .iter()
            .map(|&ip| SocketAddr::new(ip, port))
            .collect();
        tracing::debug!(target: "moat::net", %name, ?addrs, "resolved");
        Ok(addrs)
    }

    /// The answer for the DNS name `name` (checked already), its addresses
    /// canonical (an IPv4-mapped address is the IPv4 address it carries):
    /// the run's kept answer while it lasts, else a lookup. Its addresses
    /// are held once, paid from the run's host memory, and shared by every
    /// reader.
    ///
    /// # Errors
    /// [`NetError::NameNotResolved`] if the name has no address or the
    /// resolver failed; [`NetError::TimedOut`] past the lookup timeout;
    /// [`NetError::LimitReached`] if the run's host memory cannot hold the
    /// answer.
    pub(crate) async fn answer(&self, name: &str) -> Result<Shared, NetError> {
        if let Some(answer) = self.answers.get(name) {
            return Ok(answer);
        }
        let lookup = async {
            let _turn = self.turns.acquire().await;
            self.resolver.lookup_answer(name).await
        };
        let mut answer = match tokio::time::timeout(self.timeout, lookup).await {
            Ok(answer) => answer.map_err(|e| NetError::NameNotResolved(format!("{name}: {e}")))?,
            Err(_) => {
                tracing::debug!(target: "moat::net", %name, timeout = ?self.timeout, "lookup timed out");
                return Err(NetError::timed_out(
                    format!(
                        "lookup of {name} took longer than {:?}, the run's lookup timeout",
                        self.timeout
                    ),
                    Some(Setting::LookupTimeout),
                ));
            }
        };
        if answer.addresses.is_empty() {
            return Err(NetError::NameNotResolved(format!("{name}: no addresses")));
        }
        for ip in &mut answer.addresses {
            *ip = ip.to_canonical();
        }
        if answer.addresses.len() > MAX_ANSWER_ADDRESSES {
            tracing::debug!(target: "moat::net", %name, addresses = answer.addresses.len(), kept = MAX_ANSWER_ADDRESSES, "answer cut to its first addresses");
            answer.addresses.truncate(MAX_ANSWER_ADDRESSES);
        }
        let addresses = match Addresses::charged(answer.addresses.clone(), &self.budget) {
            Ok(addresses) => addresses,
            Err(_) => {
                // The kept answers are a saving, not a need: give their
                // memory back and try once more.
                self.answers.clear();
                Addresses::charged(answer.addresses, &self.budget)?
            }
        };
        let shared = Shared {
            addresses: Arc::new(addresses),
            lifetime: answer.lifetime,
        };
        self.answers.keep(name, &shared);
        Ok(shared)
    }
}
