//! A policy file (`moat run --policy`, an image's policy) as text:
//! nothing panics; a refusal names the file and a line the file has; a
//! file that parses applies as a whole or is refused with one error; and
//! its statements, applied one by one as flags, give the same grants and
//! bounds (the one reading of every source).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use moat_fuzz::entries;
use moat_policy::policy::Capability;
use moat_policy::setting::Kind;
use moat_policy::settings::{Origin, PolicyFile, PolicyFileError, Settings, Value};

fuzz_target!(|text: &str| {
    let path = Path::new("moat.toml");
    let file = match PolicyFile::parse(text, path) {
        Ok(file) => file,
        Err(PolicyFileError::Invalid(e)) => {
            let message = e.to_string();
            let lines = text.split('\n').count();
            match &e.origin {
                Origin::PolicyFile { path: named, line } => {
                    assert_eq!(named, path);
                    assert!(
                        (1..=lines).contains(line),
                        "line {line} of a {lines}-line file: {message}"
                    );
                    assert!(message.starts_with("moat.toml:"), "{message}");
                }
                other => panic!("a policy file's error from {other:?}: {message}"),
            }
            return;
        }
        Err(e) => panic!("parsing text read nothing: {e}"),
    };
    let from_file = match Settings::from_file(&file) {
        Ok(settings) => settings,
        Err(e) => {
            assert!(matches!(e.origin, Origin::PolicyFile { .. }), "{e}");
            assert!(e.to_string().starts_with("moat.toml:"), "{e}");
            return;
        }
    };
    let _ = Settings::from_image_policy(&file, "sha256:0");

    let mut as_flags = Settings::new();
    for statement in file.statements() {
        // A policy file's integer is a count, bytes or seconds; a flag
        // writes the unit.
        let value = match (statement.value(), statement.setting.kind()) {
            (Value::Text(text), _) => text.to_owned(),
            (Value::Integer(n), Kind::Size) => format!("{n}B"),
            (Value::Integer(n), Kind::Duration) => format!("{n}s"),
            (Value::Integer(n), _) => n.to_string(),
        };
        if let Err(e) = as_flags.set(&Origin::Flag, statement.setting, value.as_str()) {
            panic!("{statement:?} applied from the file but not as the flag {value:?}: {e}");
        }
    }
    assert_eq!(from_file.limits, as_flags.limits, "{text:?}");
    assert_eq!(from_file.audit, as_flags.audit, "{text:?}");
    for capability in [Capability::Connect, Capability::Listen] {
        assert_eq!(
            entries(&from_file.policy, capability),
            entries(&as_flags.policy, capability),
            "{text:?}"
        );
    }
});
