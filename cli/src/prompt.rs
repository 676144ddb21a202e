//! `moat run --prompt`: the person at the terminal answers for a call no
//! grant allows, on `/dev/tty` (the guest keeps stdin and stdout).

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;

use moat_host::net::prompt::{Answer, Prompter, Question};
use moat_host::policy::Capability;
use moat_host::settings::Setting;

/// The terminal, and the destinations allowed always so far.
pub(crate) struct Terminal {
    tty: Mutex<(BufReader<File>, File)>,
    always: Mutex<Vec<(Capability, String)>>,
}

impl Terminal {
    /// The controlling terminal, when stdin is one.
    ///
    /// # Errors
    /// Text for the user: stdin is not a terminal, or `/dev/tty` cannot
    /// be opened.
    pub(crate) fn open() -> Result<Terminal, String> {
        if !std::io::stdin().is_terminal() {
            return Err(
                "stdin is not a terminal: moat asks only a person at one (without it, every call no grant allows is refused)"
                    .to_owned(),
            );
        }
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/tty")
        };
        let (read, write) = match (open(), open()) {
            (Ok(read), Ok(write)) => (read, write),
            (Err(e), _) | (_, Err(e)) => return Err(format!("cannot open /dev/tty: {e}")),
        };
        Ok(Terminal {
            tty: Mutex::new((BufReader::new(read), write)),
            always: Mutex::new(Vec::new()),
        })
    }

    /// Writes the destinations allowed always as a policy file: a new
    /// file (never one a link leads to), each grant once.
    ///
    /// # Errors
    /// The file's.
    pub(crate) fn save(&self, file: &Path) -> std::io::Result<()> {
        let always = self
            .always
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut text = String::from("# Allowed always at moat run --prompt\n");
        for (setting, capability) in [
            (Setting::AllowNet, Capability::Connect),
            (Setting::AllowListen, Capability::Listen),
        ] {
            let entries: Vec<&String> = always
                .iter()
                .filter(|(c, _)| *c == capability)
                .map(|(_, entry)| entry)
                .collect();
            if !entries.is_empty() {
                text.push_str(&format!("{} = [\n", setting.key()));
                for entry in entries {
                    text.push_str(&format!("  {entry:?},\n"));
                }
                text.push_str("]\n");
            }
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(file)?;
        out.write_all(text.as_bytes())
    }
}

/// A grant entry for `question`'s destination: `example.com:443`,
/// `[::1]:80`; `None` for a lookup, which names no port (the connect
/// after it is asked about with its own).
fn entry(question: &Question) -> Option<String> {
    let port = question.port?;
    Some(match question.host.as_ip() {
        Some(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{}:{port}", question.host),
    })
}

impl Prompter for Terminal {
    fn ask(&self, question: &Question) -> Answer {
        let entry = entry(question);
        let what = match (question.capability, &entry) {
            (_, None) => format!("look up {}", question.host),
            (Capability::Connect, Some(entry)) => format!("connect to {entry}"),
            (Capability::Listen, Some(entry)) => format!("listen on {entry}"),
        };
        let mut tty = self
            .tty
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (input, output) = &mut *tty;
        loop {
            let _ = write!(
                output,
                "moat: the guest wants to {what} (no grant allows it: {}). Allow [o]nce, [a]lways, or [d]eny? ",
                question.needs
            );
            let _ = output.flush();
            let mut line = String::new();
            // End of input or an error is a refusal: nobody answered.
            if input.read_line(&mut line).unwrap_or(0) == 0 {
                return Answer::Deny;
            }
            match line.trim().to_ascii_lowercase().as_str() {
                "o" | "once" => return Answer::Once,
                "a" | "always" => {
                    if let Some(entry) = entry {
                        self.always
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((question.capability, entry));
                    }
                    return Answer::Always;
                }
                "d" | "deny" | "n" | "no" => return Answer::Deny,
                _ => {}
            }
        }
    }
}
