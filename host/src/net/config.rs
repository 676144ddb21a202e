//! What one run's network is made from, given at once: [`NetConfig`].

use std::sync::Arc;

use moat_policy::policy::Policy;

use super::dns::Resolver;
use super::limits::Limits;
use super::secrets::Secrets;
use super::tls::TlsTrust;
use super::traffic::Traffic;
use crate::audit::Audit;

/// What one run's network is made from: its policy, its bounds, and where
/// its names are resolved, its TLS roots found and its decisions recorded.
/// `RunOptions` and the kit's `MoatCtxBuilder` each hold one, and
/// [`Net::build`](super::Net::build) makes the network from it, once.
#[derive(Clone, Default)]
pub struct NetConfig {
    /// What the guest may reach and where it may listen.
    pub policy: Policy,
    /// Every bound of the run.
    pub limits: Limits,
    /// Where names are resolved (`None`: the system's DNS configuration,
    /// [`SystemResolver`](super::SystemResolver)). The lookup bounds and
    /// the deny lists apply to a resolver's answers as to the system's.
    pub resolver: Option<Arc<dyn Resolver>>,
    /// The roots TLS clients trust (`None`: webpki-roots' Mozilla set).
    pub tls_trust: Option<TlsTrust>,
    /// Where every decision is recorded (off by default; see
    /// [`crate::audit`]).
    pub audit: Audit,
    /// The secrets the guest's HTTP requests may carry, each by its
    /// placeholder, and where each may go (none by default).
    pub secrets: Secrets,
    /// Who is asked about a call no grant allows before it is refused
    /// (`moat run --prompt`; none by default: refused at once).
    pub prompt: Option<Arc<dyn super::prompt::Prompter>>,
    /// Where the run counts what its guest sends and receives (`None`: a
    /// count of its own, read with [`Net::traffic`](super::Net::traffic)).
    pub traffic: Option<Arc<Traffic>>,
}

impl NetConfig {
    /// A network under `policy`, everything else at its default.
    pub fn new(policy: Policy) -> NetConfig {
        NetConfig {
            policy,
            ..NetConfig::default()
        }
    }
}

impl std::fmt::Debug for NetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetConfig")
            .field("policy", &self.policy)
            .field("limits", &self.limits)
            .field("resolver", &self.resolver.as_ref().map(|_| "custom"))
            .field("tls_trust", &self.tls_trust.as_ref().map(|_| "custom"))
            .field("audit", &self.audit)
            .field("secrets", &self.secrets)
            .field("prompt", &self.prompt.as_ref().map(|_| "custom"))
            .field("traffic", &self.traffic)
            .finish()
    }
}
