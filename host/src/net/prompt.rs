//! Asking the person at the terminal (`moat run --prompt`): a call no
//! grant allows is put to a [`Prompter`] before it is refused, and the
//! answer stands for the call (once), for the rest of the run (always),
//! or refuses it (deny, remembered: a destination is asked about once).
//!
//! A stock wasi:sockets program is asked about twice on its way to a
//! name no grant names: first the lookup (a DNS query already tells the
//! name to the resolver, so it is not made unasked), with no port yet,
//! then the connect to the name and port, as a moat:net guest is.
//!
//! Deny entries are never put to the prompter: what they refuse stays
//! refused. The asking is the embedder's (the CLI's asks on `/dev/tty`);
//! the run waits for the answer, and on `moat run`'s one thread so do the
//! guest's other sockets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use moat_policy::policy::{Capability, Host};

/// A call no grant allows, put to the prompter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Connect or listen.
    pub capability: Capability,
    /// The host as judged.
    pub host: Host,
    /// The port; `None` for a stock program's name lookup, which comes
    /// before the program says which port it wants.
    pub port: Option<u16>,
    /// The grant that would allow it, in the run's words
    /// (`--allow-net=example.com:443`).
    pub needs: String,
}

/// What the person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Allow this call, and ask again next time.
    Once,
    /// Allow it and every later call to the same destination in the run.
    Always,
    /// Refuse it and every later call to the same destination in the run.
    Deny,
}

/// Who answers: the embedder's (a terminal, a dialog, a test's script).
pub trait Prompter: Send + Sync {
    /// The answer to `question`; called on the run's thread, which waits.
    fn ask(&self, question: &Question) -> Answer;
}

/// What an answer stands for: the capability, the host as judged, the
/// port (`None` for a lookup).
type Destination = (Capability, Host, Option<u16>);

/// A run's prompter and the answers that stand for the rest of it.
pub(crate) struct Prompting {
    prompter: Arc<dyn Prompter>,
    standing: Mutex<HashMap<Destination, bool>>,
}

impl Prompting {
    pub(crate) fn new(prompter: Arc<dyn Prompter>) -> Prompting {
        Prompting {
            prompter,
            standing: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `question`'s call goes ahead: a standing answer, or the
    /// prompter's.
    pub(crate) fn allows(&self, question: Question) -> bool {
        let key = (question.capability, question.host.clone(), question.port);
        if let Some(allowed) = self
            .standing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return *allowed;
        }
        let answer = self.prompter.ask(&question);
        let mut standing = self.standing.lock().unwrap_or_else(PoisonError::into_inner);
        match answer {
            Answer::Once => true,
            Answer::Always => {
                standing.insert(key, true);
                true
            }
            Answer::Deny => {
                standing.insert(key, false);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Scripted {
        answers: Mutex<Vec<Answer>>,
        asked: AtomicUsize,
    }

    impl Prompter for Scripted {
        fn ask(&self, _: &Question) -> Answer {
            self.asked.fetch_add(1, Ordering::Relaxed);
            self.answers.lock().unwrap().remove(0)
        }
    }

    fn question(port: u16) -> Question {
        Question {
            capability: Capability::Connect,
            host: Host::parse("example.com").unwrap(),
            port: Some(port),
            needs: format!("--allow-net=example.com:{port}"),
        }
    }

    #[test]
    fn once_asks_again_always_and_deny_stand() {
        let scripted = Arc::new(Scripted {
            answers: Mutex::new(vec![Answer::Once, Answer::Always, Answer::Deny]),
            asked: AtomicUsize::new(0),
        });
        let prompting = Prompting::new(scripted.clone());
        assert!(prompting.allows(question(1)));
        assert!(prompting.allows(question(1)), "asked again: always");
        assert!(prompting.allows(question(1)), "standing");
        assert!(!prompting.allows(question(2)));
        assert!(!prompting.allows(question(2)), "standing");
        assert_eq!(scripted.asked.load(Ordering::Relaxed), 3);
    }
}
