//! `moat grants suggest`: a trail in, the grants it asks for out.

use std::io::BufReader;
use std::process::ExitCode;

use moat_host::audit::Suggestion;

use crate::args::SuggestArgs;

/// Prints the draft of `args.trail` as flags, then as a policy file.
pub(crate) fn suggest(args: &SuggestArgs) -> ExitCode {
    let drafted = if args.trail.as_os_str() == "-" {
        Suggestion::from_trail(std::io::stdin().lock(), args.widen)
    } else {
        match std::fs::File::open(&args.trail) {
            Ok(file) => Suggestion::from_trail(BufReader::new(file), args.widen),
            Err(e) => {
                eprintln!("moat: error: cannot read {}: {e}", args.trail.display());
                return ExitCode::from(2);
            }
        }
    };
    let draft = match drafted {
        Ok(draft) => draft,
        Err(e) => {
            eprintln!("moat: error: {}: {e}", args.trail.display());
            return ExitCode::from(2);
        }
    };
    if draft.is_empty() {
        println!("# nothing denied for want of a grant");
    } else {
        println!("# flags (each with the refusals it answers):");
        print!("{}", draft.as_flags());
        println!();
        println!("# or as a policy file (moat run --policy=FILE):");
        print!("{}", draft.as_policy_file());
    }
    if draft.not_grants > 0 {
        eprintln!(
            "moat: {} refusals by a deny entry, a bound or a secret: no grant answers them",
            draft.not_grants
        );
    }
    if draft.unreadable > 0 {
        eprintln!(
            "moat: {} lines were not records of an audit trail",
            draft.unreadable
        );
    }
    ExitCode::SUCCESS
}
