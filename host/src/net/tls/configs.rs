//! The run's TLS configurations, one per distinct content.
//!
//! A configuration is what rustls builds from a guest's options: roots,
//! a certificate chain and key, ALPN. Each is keyed by a SHA-256 digest of
//! its parsed content (DER certificates and key, ALPN list; never the raw
//! PEM, whose comments and spacing change nothing), built once, shared by
//! every socket that asks for the same content, and paid from the run's
//! host memory while it exists. A configuration in use (a listener, a
//! session) stays; one no socket uses is dropped when room is needed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::net::budget::{Budget, Charge};
use crate::net::error::NetError;
use crate::net::limits::MAX_TLS_CONFIGS;

/// The digest of a configuration's content.
pub(crate) type Key = [u8; 32];

/// Feeds the parts of a configuration's content into one digest; each
/// part is length-prefixed, so no two contents share a digest input.
#[derive(Default)]
pub(crate) struct KeyBuilder(Sha256);

impl KeyBuilder {
    /// Adds one part, tagged by what it is.
    pub(crate) fn part(mut self, tag: u8, bytes: &[u8]) -> KeyBuilder {
        self.0.update([tag]);
        self.0.update((bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
        self
    }

    pub(crate) fn finish(self) -> Key {
        self.0.finalize().into()
    }
}

/// One kind's configurations by digest, each with what it costs.
pub(crate) struct Configs<C> {
    kept: Mutex<HashMap<Key, (Arc<C>, Charge)>>,
    what: &'static str,
}

impl<C> Configs<C> {
    pub(crate) fn new(what: &'static str) -> Configs<C> {
        Configs {
            kept: Mutex::default(),
            what,
        }
    }

    /// The configuration for `key`, built by `build` (and paid `bytes`
    /// from `budget`) if the run has none yet.
    ///
    /// # Errors
    /// `build`'s; [`NetError::LimitReached`] if the run's host memory
    /// cannot pay for it or [`MAX_TLS_CONFIGS`] are in use.
    pub(crate) fn get_or_build(
        &self,
        key: Key,
        bytes: usize,
        budget: &Arc<Budget>,
        build: impl FnOnce() -> Result<C, NetError>,
    ) -> Result<Arc<C>, NetError> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((config, _)) = kept.get(&key) {
            return Ok(Arc::clone(config));
        }
        if kept.len() >= MAX_TLS_CONFIGS {
            drop_unused(&mut kept);
        }
        if kept.len() >= MAX_TLS_CONFIGS {
            tracing::debug!(target: "moat::net", max = MAX_TLS_CONFIGS, what = self.what, "TLS configuration limit reached");
            return Err(NetError::fixed_limit(format!(
                "the run has {MAX_TLS_CONFIGS} distinct {}s in use",
                self.what
            )));
        }
        let charge = match budget.charge(bytes, self.what) {
            Ok(charge) => charge,
            Err(_) => {
                drop_unused(&mut kept);
                budget.charge(bytes, self.what)?
            }
        };
        let config = Arc::new(build()?);
        kept.insert(key, (Arc::clone(&config), charge));
        Ok(config)
    }

    /// How many configurations are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Drops the configurations no socket holds (their memory goes back).
fn drop_unused<C>(kept: &mut HashMap<Key, (Arc<C>, Charge)>) {
    kept.retain(|_, (config, _)| Arc::strong_count(config) > 1);
}
