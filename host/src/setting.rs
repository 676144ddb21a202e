//! The settings of a run, and the name each source of settings gives them:
//! `--max-sockets` on `moat run`'s command line, `max-sockets` in a policy
//! file, `MOAT_MAX_SOCKETS` in a container's environment.
//!
//! Every message that tells the user which setting to change takes the
//! name from here, as [`Spelling`] says the user writes it, so that a bound
//! reached under the containerd shim names the `MOAT_*` variable, not a
//! flag the shim has no use for. This file imports nothing of moat's: the
//! socket core, the bounds and the settings all name settings through it.

/// How the person who grants writes a setting, so that a message names
/// the setting as that person writes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Spelling {
    /// `moat run`'s flags: `--allow-net=HOST:PORT`, `--max-sockets=N`.
    #[default]
    Flags,
    /// A container's environment (the containerd shim):
    /// `MOAT_ALLOW_NET=HOST:PORT`, `MOAT_MAX_SOCKETS=N`.
    Environment,
}

/// One setting of a run: a grant, a deny list or a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// Where the guest may connect.
    AllowNet,
    /// Where the guest may listen.
    AllowListen,
    /// Where the guest may not connect, whatever is granted.
    DenyNet,
    /// Where the guest may not listen, whatever is granted.
    DenyListen,
    /// Sockets and listeners open at once.
    MaxSockets,
    /// Receives, accepts and lookups waiting at once.
    MaxWaitingCalls,
    /// The guest's linear memory.
    MaxMemory,
    /// The host memory the run's network state may hold.
    MaxHostMemory,
    /// The run's wall-clock time.
    Timeout,
    /// Name lookups in flight at once.
    MaxLookups,
    /// One name lookup's time.
    LookupTimeout,
    /// One TLS handshake's time.
    TlsHandshakeTimeout,
    /// Open connections per listener.
    MaxConnections,
    /// Open connections per listener from one peer.
    MaxConnectionsPerPeer,
}

/// A setting's names, one per source.
struct Names {
    /// The policy file's key, and the flag without its `--`.
    key: &'static str,
    flag: &'static str,
    variable: &'static str,
}

/// Every setting's names, in [`Setting::ALL`]'s order. The unit tests
/// check that each row's flag and variable are its key's.
const NAMES: [Names; Setting::ALL.len()] = [
    names("allow-net", "--allow-net", "MOAT_ALLOW_NET"),
    names("allow-listen", "--allow-listen", "MOAT_ALLOW_LISTEN"),
    names("deny-net", "--deny-net", "MOAT_DENY_NET"),
    names("deny-listen", "--deny-listen", "MOAT_DENY_LISTEN"),
    names("max-sockets", "--max-sockets", "MOAT_MAX_SOCKETS"),
    names(
        "max-waiting-calls",
        "--max-waiting-calls",
        "MOAT_MAX_WAITING_CALLS",
    ),
    names("max-memory", "--max-memory", "MOAT_MAX_MEMORY"),
    names(
        "max-host-memory",
        "--max-host-memory",
        "MOAT_MAX_HOST_MEMORY",
    ),
    names("timeout", "--timeout", "MOAT_TIMEOUT"),
    names("max-lookups", "--max-lookups", "MOAT_MAX_LOOKUPS"),
    names("lookup-timeout", "--lookup-timeout", "MOAT_LOOKUP_TIMEOUT"),
    names(
        "tls-handshake-timeout",
        "--tls-handshake-timeout",
        "MOAT_TLS_HANDSHAKE_TIMEOUT",
    ),
    names(
        "max-connections",
        "--max-connections",
        "MOAT_MAX_CONNECTIONS",
    ),
    names(
        "max-connections-per-peer",
        "--max-connections-per-peer",
        "MOAT_MAX_CONNECTIONS_PER_PEER",
    ),
];

const fn names(key: &'static str, flag: &'static str, variable: &'static str) -> Names {
    Names {
        key,
        flag,
        variable,
    }
}

impl Setting {
    /// Every setting, in the order `moat run --help` lists their flags.
    pub const ALL: [Setting; 14] = [
        Setting::AllowNet,
        Setting::AllowListen,
        Setting::DenyNet,
        Setting::DenyListen,
        Setting::MaxSockets,
        Setting::MaxWaitingCalls,
        Setting::MaxMemory,
        Setting::MaxHostMemory,
        Setting::Timeout,
        Setting::MaxLookups,
        Setting::LookupTimeout,
        Setting::TlsHandshakeTimeout,
        Setting::MaxConnections,
        Setting::MaxConnectionsPerPeer,
    ];

    const fn names(self) -> &'static Names {
        &NAMES[self as usize]
    }

    /// The key in a policy file: `max-sockets`.
    pub const fn key(self) -> &'static str {
        self.names().key
    }

    /// `moat run`'s flag: `--max-sockets`.
    pub const fn flag(self) -> &'static str {
        self.names().flag
    }

    /// The variable of a container's environment under the containerd
    /// shim: `MOAT_MAX_SOCKETS`.
    pub const fn variable(self) -> &'static str {
        self.names().variable
    }

    /// The setting's name as `spelling` writes it.
    pub const fn named(self, spelling: Spelling) -> &'static str {
        match spelling {
            Spelling::Flags => self.flag(),
            Spelling::Environment => self.variable(),
        }
    }

    /// The setting a policy file's `key` is.
    pub fn from_key(key: &str) -> Option<Setting> {
        Setting::ALL.into_iter().find(|s| s.key() == key)
    }
}

/// Every setting's key, in [`Setting::ALL`]'s order.
pub(crate) const KEYS: [&str; Setting::ALL.len()] = {
    let mut keys = [""; Setting::ALL.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = Setting::ALL[i].key();
        i += 1;
    }
    keys
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_its_key_as_each_source_writes_it() {
        for (i, setting) in Setting::ALL.into_iter().enumerate() {
            assert_eq!(setting as usize, i, "{setting:?} is out of ALL's order");
            let key = setting.key();
            assert_eq!(setting.flag(), format!("--{key}"));
            assert_eq!(
                setting.variable(),
                format!("MOAT_{}", key.to_uppercase().replace('-', "_"))
            );
            assert_eq!(Setting::from_key(key), Some(setting));
        }
        assert_eq!(Setting::from_key("max_sockets"), None);
    }

    #[test]
    fn a_setting_is_named_as_its_source_writes_it() {
        assert_eq!(Setting::MaxSockets.named(Spelling::Flags), "--max-sockets");
        assert_eq!(
            Setting::MaxMemory.named(Spelling::Environment),
            "MOAT_MAX_MEMORY"
        );
    }
}
