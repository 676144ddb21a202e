//! Settings as a container's environment states them (`MOAT_ALLOW_NET`,
//! `MOAT_MAX_SOCKETS`, ..., read by the containerd shim): any value for
//! any setting. Nothing panics; a refused value is named by its variable
//! (the person who wrote it reads the pod spec, not moat's flags) and
//! changes nothing; and the same statements as `moat run` flags are
//! accepted and refused alike and give the same grants and bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use moat_fuzz::entries;
use moat_policy::policy::Capability;
use moat_policy::setting::Setting;
use moat_policy::settings::{Origin, Settings};

fuzz_target!(|statements: Vec<(u8, &str)>| {
    let mut from_env = Settings::new();
    let mut from_flags = Settings::new();
    for (which, value) in statements {
        let setting = Setting::ALL[usize::from(which) % Setting::ALL.len()];
        let before = from_env.clone();
        let env = from_env.set(&Origin::Environment, setting, value);
        let flag = from_flags.set(&Origin::Flag, setting, value);
        match (&env, &flag) {
            (Ok(()), Ok(())) => {}
            (Err(e), Err(f)) => {
                let (e, f) = (e.to_string(), f.to_string());
                assert!(e.starts_with(setting.variable()), "{e}");
                assert!(f.starts_with(setting.flag()), "{f}");
                assert_eq!(
                    from_env, before,
                    "a refused {setting:?} changed the settings"
                );
            }
            _ => panic!("{setting:?}={value:?}: environment {env:?}, flag {flag:?}"),
        }
    }
    assert_eq!(from_env.limits, from_flags.limits);
    assert_eq!(from_env.audit, from_flags.audit);
    for capability in [Capability::Connect, Capability::Listen] {
        assert_eq!(
            entries(&from_env.policy, capability),
            entries(&from_flags.policy, capability)
        );
    }
});
