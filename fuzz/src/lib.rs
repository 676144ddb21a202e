//! What the fuzz targets share.

use moat_policy::policy::{Capability, Grant, Policy};

/// A policy's entries for `capability` as printed, what it grants and what
/// it denies, without where each was written: two sources that state the
/// same thing give equal entries.
pub fn entries(policy: &Policy, capability: Capability) -> (Vec<String>, Vec<String>) {
    let grant = match policy.grant(capability) {
        Grant::Nothing => vec![],
        Grant::Everything => vec!["*".to_owned()],
        Grant::Only(rules) => rules.iter().map(ToString::to_string).collect(),
    };
    let deny = policy
        .denied(capability)
        .entries()
        .iter()
        .map(ToString::to_string)
        .collect();
    (grant, deny)
}
