//! What a slow load shows on a terminal: a component that is not in the
//! cache compiles for seconds to tens of seconds on a small machine (a 22
//! MB componentize-py component for 5.7 s on 2 cores, 11 s on one), and a
//! silent terminal looks hung.
//!
//! Nothing is shown when stderr is not a terminal, nor when the load ends
//! within [`NOTICE_AFTER`] (a cached load of that component takes 0.12 s). Past it, one line that counts the seconds, and when the load
//! ends, the time it took.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a load may take before the line appears: longer than a cached
/// load of a large component takes, short enough that nobody wonders.
pub(crate) const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// How often the line's count of seconds is redrawn.
const TICK: Duration = Duration::from_secs(1);

/// A load under way; dropping it (or [`done`](Self::done)) ends the line.
pub(crate) struct Compiling {
    stop: Option<mpsc::Sender<()>>,
    shown: Option<JoinHandle<()>>,
}

impl Compiling {
    /// Starts watching the load of `component` (cached unless `cached` is
    /// false), writing to stderr if it is a terminal.
    pub(crate) fn start(component: &Path, cached: bool) -> Compiling {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Compiling {
                stop: None,
                shown: None,
            };
        }
        Compiling::to(std::io::stderr(), component, cached, NOTICE_AFTER, TICK)
    }

    /// As [`start`](Self::start), writing to `out` after `after`.
    fn to(
        mut out: impl Write + Send + 'static,
        component: &Path,
        cached: bool,
        after: Duration,
        tick: Duration,
    ) -> Compiling {
        let name = component
            .file_name()
            .unwrap_or(component.as_os_str())
            .to_string_lossy()
            .into_owned();
        let what = if cached {
            "first run; cached for next time"
        } else {
            "--no-cache: compiled every run"
        };
        let (stop, stopped) = mpsc::channel::<()>();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("moat-progress".into())
            .spawn(move || {
                match stopped.recv_timeout(after) {
                    Err(RecvTimeoutError::Timeout) => {}
                    // Done (or dropped) in time: nothing to say.
                    _ => return,
                }
                loop {
                    let seconds = started.elapsed().as_secs();
                    let _ = write!(out, "\rmoat: compiling {name} ({what})... {seconds} s");
                    let _ = out.flush();
                    match stopped.recv_timeout(tick) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
                let took = started.elapsed().as_secs_f64();
                // Clear the line, then say how long it took.
                let _ = writeln!(out, "\r\x1b[Kmoat: compiled {name} in {took:.1} s");
                let _ = out.flush();
            });
        match thread {
            Ok(thread) => Compiling {
                stop: Some(stop),
                shown: Some(thread),
            },
            // No thread, no line: the load goes on regardless.
            Err(_) => Compiling {
                stop: None,
                shown: None,
            },
        }
    }

    /// The load ended: the line (if shown) says how long it took.
    pub(crate) fn done(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.shown.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
        /// Waits until the screen holds `needle`.
        fn wait_for(&self, needle: &str) {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !self.text().contains(needle) {
                assert!(Instant::now() < deadline, "no {needle:?}: {}", self.text());
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    #[test]
    fn a_load_past_the_notice_says_what_it_does_and_how_long_it_took() {
        let screen = Screen::default();
        let loading = Compiling::to(
            screen.clone(),
            Path::new("/images/app.wasm"),
            true,
            Duration::ZERO,
            Duration::from_millis(1),
        );
        screen.wait_for("moat: compiling app.wasm (first run; cached for next time)... ");
        loading.done();
        let text = screen.text();
        assert!(
            text.ends_with(" s\n") && text.contains("\r\x1b[Kmoat: compiled app.wasm in "),
            "{text:?}"
        );
    }

    #[test]
    fn a_load_done_before_the_notice_shows_nothing() {
        let screen = Screen::default();
        let loading = Compiling::to(
            screen.clone(),
            Path::new("app.wasm"),
            true,
            Duration::from_secs(3600),
            TICK,
        );
        loading.done();
        assert_eq!(screen.text(), "");
    }

    #[test]
    fn without_the_cache_the_line_says_so() {
        let screen = Screen::default();
        let loading = Compiling::to(
            screen.clone(),
            Path::new("app.wasm"),
            false,
            Duration::ZERO,
            TICK,
        );
        screen.wait_for("(--no-cache: compiled every run)");
        drop(loading);
        assert!(screen.text().contains("compiled app.wasm in"));
    }
}
