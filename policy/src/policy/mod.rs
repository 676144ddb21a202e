//! Capabilities: what a guest may reach, and who may reach it.
//!
//! Two grants, kept apart because they are different privileges:
//! [`Capability::Connect`] (reaching out, `--allow-net`) and
//! [`Capability::Listen`] (being reachable, `--allow-listen`). Each is a
//! [`Grant`]: nothing, everything, or an allowlist of [`Rule`]s.
//!
//! Each capability also has a [`DenyList`] (`--deny-net`, `--deny-listen`)
//! that wins over any grant, with the words `private` and `metadata` for the
//! local network and the cloud metadata service.
//!
//! This module is the one place a capability is checked. The socket core
//! (moat-host's `net`) calls [`Policy::check`] before it resolves a name or
//! makes a socket, so a denied call costs no syscall, no DNS query and no
//! port. Hosts are judged as the guest wrote them ([`Host`]): allowing
//! `localhost` does not allow `127.0.0.1` nor the reverse. A name's DNS
//! answer can still point anywhere (DNS rebinding), so the core also calls
//! [`Policy::check_resolved`] on every address a name resolved to, before it
//! connects, binds or sends there: deny rules judge the addresses actually
//! used. `--allow-net=api.example.com --deny-net=private` reaches that name
//! only where it resolves outside the local network.
//!
//! ```
//! use moat_policy::policy::{Capability, Host, Policy};
//! use moat_policy::setting::{Spelling, Worded};
//!
//! let policy = Policy::new()
//!     .allow_connect("example.com:443,*.internal.example,10.0.0.0/8")?
//!     .allow_listen("127.0.0.1:8000-8100")?;
//!
//! let host = Host::parse("api.internal.example")?;
//! assert!(policy.check(Capability::Connect, &host, 5432).is_ok());
//!
//! let denied = policy
//!     .check(Capability::Connect, &Host::parse("example.com")?, 80)
//!     .unwrap_err();
//! // The denial carries what it needs, not words: as text it names the
//! // call that would allow it, and shown in the command line's words the
//! // flag.
//! assert_eq!(
//!     denied.to_string(),
//!     r#"connect to example.com:80 denied: needs Policy::allow_connect("example.com:80")"#
//! );
//! assert_eq!(
//!     denied.worded(Spelling::Flags).to_string(),
//!     "connect to example.com:80 denied: needs --allow-net=example.com:80"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod address;
mod decision;
mod deny;
mod grant;
mod host;
mod rule;
mod source;

use std::net::IpAddr;
use std::sync::Arc;

use crate::setting::Spelling;

pub use decision::{Allowed, Denied, DenyReason, LookupDenied, OwnListenerOnPort, PolicyError};
pub use deny::{DenyEntry, DenyList, METADATA_ADDRESSES, PRIVATE_RANGES};
pub use grant::{Capability, Grant};
pub use host::{Host, HostError};
pub use rule::Rule;
pub use source::{Provenance, Source};

/// The network capabilities of one guest run: a [`Grant`] for each
/// [`Capability`]. The default policy denies everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    connect: Grant,
    listen: Grant,
    deny_connect: DenyList,
    deny_listen: DenyList,
    spelling: Spelling,
    observe: bool,
}

impl Policy {
    /// A policy that denies everything.
    pub fn new() -> Policy {
        Policy::default()
    }

    /// A policy that allows every connect and every listen.
    pub fn allow_all() -> Policy {
        Policy {
            connect: Grant::Everything,
            listen: Grant::Everything,
            ..Policy::default()
        }
    }

    /// The words of the front that wrote this policy (default: the
    /// embedding API's, [`Spelling::Embedding`]; the settings table's
    /// [`Settings`](crate::settings::Settings) are flags). The checks never
    /// read it: their refusals carry settings, not words, and the edges
    /// that show one (the guest's error, a notice, a record) render it in
    /// these words ([`Worded`](crate::setting::Worded)).
    pub fn spelled(mut self, spelling: Spelling) -> Policy {
        self.spelling = spelling;
        self
    }

    /// The words the run's refusals are shown in.
    pub fn spelling(&self) -> Spelling {
        self.spelling
    }

    /// Observe mode (`--observe`) on or off: with it on, what no grant
    /// allows still goes through, and the host records it as would-deny
    /// with the grant that would allow it. Deny entries hold either way:
    /// [`check`](Self::check) and [`decide`](Self::decide) judge as
    /// before, and their callers let through only
    /// [`DenyReason::NotGranted`] refusals ([`lets_through`](Self::lets_through)).
    pub fn observing(mut self, on: bool) -> Policy {
        self.observe = on;
        self
    }

    /// Whether observe mode is on.
    pub fn observes(&self) -> bool {
        self.observe
    }

    /// Whether `denied` goes through anyway: observe mode is on and no
    /// deny entry refused it, only the want of a grant.
    pub fn lets_through(&self, denied: &Denied) -> bool {
        self.observe && denied.reason == DenyReason::NotGranted
    }

    /// Replaces the grant for `capability`.
    pub fn with_grant(mut self, capability: Capability, grant: Grant) -> Policy {
        *self.grant_mut(capability) = grant;
        self
    }

    /// Adds the entries of `list` (as for `--allow-net=LIST`) to the
    /// connect grant.
    ///
    /// # Errors
    /// [`PolicyError`] if an entry is invalid.
    pub fn allow_connect(self, list: &str) -> Result<Policy, PolicyError> {
        self.allow(Capability::Connect, list)
    }

    /// Adds the entries of `list` (as for `--allow-listen=LIST`) to the
    /// listen grant.
    ///
    /// # Errors
    /// [`PolicyError`] if an entry is invalid.
    pub fn allow_listen(self, list: &str) -> Result<Policy, PolicyError> {
        self.allow(Capability::Listen, list)
    }

    /// Adds the entries of `list` (as for `--deny-net=LIST`: allow-list
    /// entries and the words `private` and `metadata`) to what connect
    /// refuses, whatever the grant.
    ///
    /// # Errors
    /// [`PolicyError`] if an entry is invalid.
    pub fn deny_connect(self, list: &str) -> Result<Policy, PolicyError> {
        self.deny(Capability::Connect, list)
    }

    /// Adds the entries of `list` (as for `--deny-listen=LIST`) to what
    /// listen refuses, whatever the grant.
    ///
    /// # Errors
    /// [`PolicyError`] if an entry is invalid.
    pub fn deny_listen(self, list: &str) -> Result<Policy, PolicyError> {
        self.deny(Capability::Listen, list)
    }

    /// Adds `list` to what `capability` refuses.
    pub fn with_denied(mut self, capability: Capability, list: DenyList) -> Policy {
        match capability {
            Capability::Connect => self.deny_connect.extend(list),
            Capability::Listen => self.deny_listen.extend(list),
        }
        self
    }

    fn deny(self, capability: Capability, list: &str) -> Result<Policy, PolicyError> {
        Ok(self.with_denied(capability, list.parse()?))
    }

    /// What `capability` refuses whatever its grant.
    pub fn denied(&self, capability: Capability) -> &DenyList {
        match capability {
            Capability::Connect => &self.deny_connect,
            Capability::Listen => &self.deny_listen,
        }
    }

    fn allow(mut self, capability: Capability, list: &str) -> Result<Policy, PolicyError> {
        let added: Grant = list.parse()?;
        let grant = self.grant_mut(capability);
        *grant = std::mem::take(grant).union(added);
        Ok(self)
    }

    /// The grant for `capability`.
    pub fn grant(&self, capability: Capability) -> &Grant {
        match capability {
            Capability::Connect => &self.connect,
            Capability::Listen => &self.listen,
        }
    }

    fn grant_mut(&mut self, capability: Capability) -> &mut Grant {
        match capability {
            Capability::Connect => &mut self.connect,
            Capability::Listen => &mut self.listen,
        }
    }

    /// Checks that `capability` is granted for `host`:`port` as written and
    /// that no deny entry matches it.
    ///
    /// # Errors
    /// [`Denied`] naming the capability and the deny entry that matched, or
    /// the flag entry that would allow the call.
    pub fn check(&self, capability: Capability, host: &Host, port: u16) -> Result<(), Denied> {
        self.decide(capability, host, port).map(drop)
    }

    /// [`check`](Self::check), saying which grant entry allowed the call
    /// (the first that matches, in the order written).
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub fn decide(
        &self,
        capability: Capability,
        host: &Host,
        port: u16,
    ) -> Result<Allowed, Denied> {
        let denied = |reason| Denied {
            capability,
            host: host.clone(),
            port,
            reason,
            also_resolved_to: Box::default(),
            own_listener: None,
        };
        let judged = address::Judged::new(host);
        if let Some(entry) = self.denied(capability).matching_judged(&judged, port) {
            return Err(denied(DenyReason::DeniedBy {
                entry: entry.as_written().to_owned(),
                source: Arc::clone(entry.source_shared()),
                address: None,
                carried: entry.carried_match(host, port),
            }));
        }
        match self.grant(capability).allowing(&judged, port) {
            Some(rule) => Ok(Allowed { rule }),
            None => Err(denied(DenyReason::NotGranted)),
        }
    }

    /// Checks that a program that looks names up itself (as wasi:sockets
    /// programs do) may look up `name`: some entry of the connect or listen
    /// grant matches the name as written on some port, and no deny entry of
    /// that capability matches it on every port. An address is always
    /// allowed (it needs no lookup; it is judged when used).
    ///
    /// # Errors
    /// [`LookupDenied`] naming the deny entry, or that no grant names it.
    pub fn check_lookup(&self, name: &Host) -> Result<(), LookupDenied> {
        if name.as_ip().is_some() {
            return Ok(());
        }
        let mut refusal = DenyReason::NotGranted;
        let mut by = Capability::Connect;
        for capability in [Capability::Connect, Capability::Listen] {
            let named = match self.grant(capability) {
                Grant::Nothing => false,
                Grant::Everything => true,
                Grant::Only(rules) => rules.iter().any(|r| r.matches_host(name)),
            };
            if !named {
                continue;
            }
            match self
                .denied(capability)
                .entries()
                .iter()
                .find(|e| e.matches_every_port(name))
            {
                None => return Ok(()),
                Some(entry) => {
                    by = capability;
                    refusal = DenyReason::DeniedBy {
                        entry: entry.as_written().to_owned(),
                        source: Arc::clone(entry.source_shared()),
                        address: None,
                        carried: None,
                    }
                }
            }
        }
        Err(LookupDenied {
            name: name.clone(),
            reason: refusal,
            capability: by,
        })
    }

    /// Checks an address the run recorded as resolved from `name` (a
    /// program's own lookup) against the deny entries of `capability`
    /// that match `name`: such an entry refuses the address on the ports
    /// it refuses the name, whichever name or address the program uses.
    ///
    /// # Errors
    /// [`Denied`] naming `name`, the deny entry and the address.
    pub fn check_recorded(
        &self,
        capability: Capability,
        name: &Host,
        port: u16,
        address: IpAddr,
    ) -> Result<(), Denied> {
        match self.denied(capability).matching(name, port) {
            None => Ok(()),
            Some(entry) => Err(Denied {
                capability,
                host: name.clone(),
                port,
                reason: DenyReason::DeniedBy {
                    entry: entry.as_written().to_owned(),
                    source: Arc::clone(entry.source_shared()),
                    address: Some(address),
                    carried: None,
                },
                also_resolved_to: Box::default(),
                own_listener: None,
            }),
        }
    }

    /// Whether a deny entry of either capability names `name` by name:
    /// the addresses it resolves to must then stay recorded for as long
    /// as its answer lasts ([`check_recorded`](Self::check_recorded)).
    pub fn denies_by_name(&self, name: &Host) -> bool {
        [Capability::Connect, Capability::Listen]
            .into_iter()
            .any(|c| self.denied(c).entries().iter().any(|e| e.names(name)))
    }

    /// Checks an address that `host` (already allowed by
    /// [`check`](Self::check)) resolved to, before it is used: the deny
    /// entries judge the address itself. For an IP literal, the address is
    /// the host and was judged already.
    ///
    /// # Errors
    /// [`Denied`] naming the deny entry and the address.
    pub fn check_resolved(
        &self,
        capability: Capability,
        host: &Host,
        port: u16,
        address: IpAddr,
    ) -> Result<(), Denied> {
        match self.denied(capability).matching_address(address, port) {
            None => Ok(()),
            Some(entry) => Err(Denied {
                capability,
                host: host.clone(),
                port,
                reason: DenyReason::DeniedBy {
                    entry: entry.as_written().to_owned(),
                    source: Arc::clone(entry.source_shared()),
                    address: (Host::ip(address) != *host).then_some(address),
                    carried: entry.carried_match(&Host::ip(address), port),
                },
                also_resolved_to: Box::default(),
                own_listener: None,
            }),
        }
    }
}

#[cfg(test)]
mod differential_tests;
#[cfg(test)]
mod spelling_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::Worded as _;

    fn host(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    /// A policy made in code names the embedding API in its denials; the
    /// settings table's names flags.
    #[test]
    fn a_policy_made_in_code_is_spelled_for_embedders_and_settings_for_flags() {
        assert_eq!(Policy::new().spelling(), Spelling::Embedding);
        assert_eq!(Policy::allow_all().spelling(), Spelling::Embedding);
        assert_eq!(
            crate::settings::Settings::new().policy.spelling(),
            Spelling::Flags
        );
        let denied = Policy::new()
            .check(Capability::Connect, &host("10.0.0.1"), 80)
            .unwrap_err()
            .to_string();
        assert!(denied.contains("allow_connect"), "{denied}");
    }

    #[test]
    fn a_lookup_is_allowed_when_some_entry_names_the_name_on_some_port() {
        let policy = Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("api.test:443,*.corp.test")
            .unwrap()
            .allow_listen("localhost:8080")
            .unwrap()
            .deny_connect("bad.corp.test,db.corp.test:5432")
            .unwrap();
        for ok in [
            "api.test",
            "API.test.",
            "x.corp.test",
            "localhost",
            "db.corp.test",
            "10.0.0.1",
        ] {
            assert!(policy.check_lookup(&host(ok)).is_ok(), "{ok}");
        }
        let refused = policy.check_lookup(&host("other.test")).unwrap_err();
        assert_eq!(refused.reason, DenyReason::NotGranted);
        assert!(
            refused
                .worded(Spelling::Flags)
                .to_string()
                .ends_with("(--allow-net=other.test would)"),
            "{refused}"
        );
        let refused = policy.check_lookup(&host("bad.corp.test")).unwrap_err();
        assert_eq!(
            refused.worded(Spelling::Flags).to_string(),
            "lookup of bad.corp.test denied by --deny-net=bad.corp.test"
        );
        assert!(
            Policy::new()
                .spelled(Spelling::Flags)
                .check_lookup(&host("a.test"))
                .is_err()
        );
        assert!(
            Policy::allow_all()
                .spelled(Spelling::Flags)
                .check_lookup(&host("a.test"))
                .is_ok()
        );
    }

    #[test]
    fn default_denies_everything_and_allow_all_allows_everything() {
        let none = Policy::new().spelled(Spelling::Flags);
        let all = Policy::allow_all().spelled(Spelling::Flags);
        for cap in [Capability::Connect, Capability::Listen] {
            assert!(none.check(cap, &host("127.0.0.1"), 80).is_err());
            assert!(all.check(cap, &host("example.com"), 80).is_ok());
        }
    }

    #[test]
    fn grants_are_separate() {
        let p = Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("127.0.0.1")
            .unwrap();
        assert!(p.check(Capability::Connect, &host("127.0.0.1"), 1).is_ok());
        assert!(p.check(Capability::Listen, &host("127.0.0.1"), 1).is_err());
    }

    #[test]
    fn lists_accumulate_and_everything_wins() {
        let p = Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("a.example")
            .unwrap()
            .allow_connect("b.example:1")
            .unwrap();
        assert!(p.check(Capability::Connect, &host("a.example"), 9).is_ok());
        assert!(p.check(Capability::Connect, &host("b.example"), 1).is_ok());
        assert!(p.check(Capability::Connect, &host("b.example"), 2).is_err());
        let p = p.with_grant(
            Capability::Connect,
            Grant::Everything.union(Grant::Only(vec![])),
        );
        assert!(p.check(Capability::Connect, &host("c.example"), 2).is_ok());
    }

    #[test]
    fn denial_names_the_flag_that_would_allow_it() {
        let p = Policy::new().spelled(Spelling::Flags);
        let d = p.check(Capability::Listen, &host("::1"), 8080).unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "listen on [::1]:8080 denied: needs --allow-listen=[::1]:8080"
        );
        // The hint itself is a valid entry that allows the call.
        let fixed = Policy::new()
            .spelled(Spelling::Flags)
            .allow_listen("[::1]:8080")
            .unwrap();
        assert!(fixed.check(Capability::Listen, &host("::1"), 8080).is_ok());
    }

    #[test]
    fn a_denial_names_the_setting_as_the_granter_writes_it() {
        let p = Policy::new()
            .spelled(Spelling::Flags)
            .deny_connect("private")
            .unwrap()
            .spelled(Spelling::Environment);
        let d = p
            .check(Capability::Listen, &host("0.0.0.0"), 80)
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Environment).to_string(),
            "listen on 0.0.0.0:80 denied: needs MOAT_ALLOW_LISTEN=0.0.0.0:80"
        );
        let d = p
            .check(Capability::Connect, &host("10.0.0.1"), 80)
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Environment).to_string(),
            "connect to 10.0.0.1:80 denied by MOAT_DENY_NET=private"
        );
        let d = p.check_lookup(&host("db.example")).unwrap_err();
        assert_eq!(
            d.worded(Spelling::Environment).to_string(),
            "lookup of db.example denied: no MOAT_ALLOW_NET or MOAT_ALLOW_LISTEN entry names it (MOAT_ALLOW_NET=db.example would)"
        );
    }

    #[test]
    fn an_embedders_denial_names_the_call_that_would_allow_it() {
        let p = Policy::new()
            .spelled(Spelling::Flags)
            .deny_connect("private")
            .unwrap()
            .spelled(Spelling::Embedding);
        let d = p
            .check(Capability::Listen, &host("0.0.0.0"), 80)
            .unwrap_err();
        assert_eq!(
            d.to_string(),
            "listen on 0.0.0.0:80 denied: needs Policy::allow_listen(\"0.0.0.0:80\")"
        );
        let d = p
            .check(Capability::Connect, &host("10.0.0.1"), 80)
            .unwrap_err();
        assert_eq!(
            d.to_string(),
            "connect to 10.0.0.1:80 denied by Policy::deny_connect(\"private\")"
        );
    }

    #[test]
    fn a_deny_entry_wins_over_any_grant_and_names_itself() {
        let p = Policy::allow_all()
            .spelled(Spelling::Flags)
            .deny_connect("private,metadata")
            .unwrap()
            .deny_listen("0.0.0.0")
            .unwrap();
        let d = p
            .check(Capability::Connect, &host("::ffff:169.254.169.254"), 80)
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "connect to 169.254.169.254:80 denied by --deny-net=private"
        );
        assert!(p.check(Capability::Connect, &host("8.8.8.8"), 53).is_ok());
        assert!(
            p.check(Capability::Listen, &host("::ffff:0.0.0.0"), 1)
                .is_err()
        );
        assert!(p.check(Capability::Listen, &host("127.0.0.1"), 1).is_ok());
    }

    #[test]
    fn resolved_addresses_are_judged_by_the_deny_entries() {
        let p = Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("rebind.example")
            .unwrap()
            .deny_connect("metadata,private")
            .unwrap();
        let name = host("rebind.example");
        assert!(p.check(Capability::Connect, &name, 80).is_ok());
        let d = p
            .check_resolved(Capability::Connect, &name, 80, "127.0.0.1".parse().unwrap())
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "connect to rebind.example:80 denied by --deny-net=private (it resolved to 127.0.0.1)"
        );
        let d = p
            .check_resolved(
                Capability::Connect,
                &name,
                80,
                "169.254.169.254".parse().unwrap(),
            )
            .unwrap_err();
        assert!(
            d.worded(Spelling::Flags)
                .to_string()
                .contains("--deny-net=metadata"),
            "{d}"
        );
        assert!(
            p.check_resolved(
                Capability::Connect,
                &name,
                80,
                "93.184.215.14".parse().unwrap()
            )
            .is_ok()
        );
        // Without deny entries, a granted name goes wherever it resolves.
        let open = Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("rebind.example")
            .unwrap();
        assert!(
            open.check_resolved(Capability::Connect, &name, 80, "127.0.0.1".parse().unwrap())
                .is_ok()
        );
    }

    #[test]
    fn a_denial_of_a_carried_address_says_what_it_carries() {
        let p = Policy::allow_all()
            .spelled(Spelling::Flags)
            .deny_connect("private,metadata")
            .unwrap();
        let d = p
            .check(Capability::Connect, &host("64:ff9b::a00:5"), 80)
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "connect to [64:ff9b::a00:5]:80 denied by --deny-net=private (it carries 10.0.0.5)"
        );
        let d = p
            .check_resolved(
                Capability::Connect,
                &host("dns64.example"),
                443,
                "64:ff9b::a9fe:a9fe".parse().unwrap(),
            )
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "connect to dns64.example:443 denied by --deny-net=private (it resolved to \
             [64:ff9b::a9fe:a9fe], which carries 169.254.169.254)"
        );
        // The IPv6 form itself matched: nothing to add.
        let d = p
            .check(Capability::Connect, &host("fd00:ec2::254"), 80)
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "connect to [fd00:ec2::254]:80 denied by --deny-net=private"
        );
    }

    #[test]
    fn a_recorded_address_is_held_to_the_deny_entries_of_its_names() {
        let p = Policy::allow_all()
            .spelled(Spelling::Flags)
            .deny_connect("tracker.example:8080,*.ads.example")
            .unwrap();
        let ip: IpAddr = "203.0.113.7".parse().unwrap();
        let d = p
            .check_recorded(Capability::Connect, &host("tracker.example"), 8080, ip)
            .unwrap_err();
        assert_eq!(
            d.worded(Spelling::Flags).to_string(),
            "connect to tracker.example:8080 denied by --deny-net=tracker.example:8080 \
             (it resolved to 203.0.113.7)"
        );
        assert!(
            p.check_recorded(Capability::Connect, &host("tracker.example"), 8081, ip)
                .is_ok()
        );
        assert!(
            p.check_recorded(Capability::Connect, &host("cdn.example"), 8080, ip)
                .is_ok()
        );
        assert!(p.denies_by_name(&host("tracker.example")));
        assert!(p.denies_by_name(&host("x.ads.example")));
        assert!(!p.denies_by_name(&host("cdn.example")));
        assert!(
            !Policy::allow_all()
                .spelled(Spelling::Flags)
                .deny_connect("private,*:22")
                .unwrap()
                .denies_by_name(&host("cdn.example"))
        );
    }

    #[test]
    fn empty_and_invalid_lists_are_errors() {
        assert_eq!("".parse::<Grant>(), Err(PolicyError::EmptyList));
        assert!(" , ".parse::<Grant>().is_err());
        assert!("a.example, b.example:80".parse::<Grant>().is_ok());
    }
}
