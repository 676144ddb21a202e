//! Grant and deny lists as `--allow-net`, `--deny-net` and their kin take
//! them, and every entry on its own: nothing panics, every error prints,
//! and an entry that parses prints back to an entry that parses to the
//! same thing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moat_policy::policy::{DenyEntry, DenyList, Grant, Policy, Rule};

fuzz_target!(|text: &str| {
    for parsed in [
        Policy::new().allow_connect(text),
        Policy::new().allow_listen(text),
        Policy::new().deny_connect(text),
        Policy::new().deny_listen(text),
    ] {
        if let Err(e) = parsed {
            assert!(!e.to_string().is_empty());
        }
    }
    let _ = text.parse::<Grant>();
    let _ = text.parse::<DenyList>();
    for entry in text.split(',') {
        match entry.parse::<Rule>() {
            Ok(rule) => {
                let printed = rule.to_string();
                let again: Rule = printed
                    .parse()
                    .unwrap_or_else(|e| panic!("{entry:?} printed as {printed:?}: {e}"));
                assert_eq!(rule, again, "{entry:?} printed as {printed:?}");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        if let Ok(deny) = entry.parse::<DenyEntry>() {
            let printed = deny.to_string();
            let again: DenyEntry = printed
                .parse()
                .unwrap_or_else(|e| panic!("deny {entry:?} printed as {printed:?}: {e}"));
            assert_eq!(deny, again, "deny {entry:?} printed as {printed:?}");
        }
    }
});
