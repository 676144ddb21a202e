//! What a slow load shows on a terminal: a component that is not in the
//! cache compiles for seconds to tens of seconds on a small machine (a 22
//! MB componentize-py component for 5.7 s on 2 cores, 11 s on one), and a
//! silent terminal looks hung.
//!
//! Nothing is shown when the load ends within [`NOTICE_AFTER`] (a cached
//! load of that component takes 0.12 s). Past it, on a terminal, one line
//! that counts the seconds, and when the load ends, the time it took.
//! When stderr is not a terminal (CI, systemd, a container's log), where a
//! redrawn line would be noise, a load past [`PLAIN_NOTICE_AFTER`] gets
//! one plain line saying what is happening, and one more when it ends.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a load may take before the line appears: longer than a cached
/// load of a large component takes, short enough that nobody wonders.
pub(crate) const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// How long a load may take before a log (stderr not a terminal) is told:
/// longer than a debug build of moat compiles a small component, so that
/// logs of everyday runs stay as they were, and well before the 18 to 23 s
/// a 22 MB component takes, which looks like a hang in a container's log.
pub(crate) const PLAIN_NOTICE_AFTER: Duration = Duration::from_secs(5);

/// How often the line's count of seconds is redrawn.
const TICK: Duration = Duration::from_secs(1);

/// How the notice is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// A terminal: one line, redrawn each second.
    Terminal,
    /// A log: a line when the notice is due, and a line at the end.
    Plain,
}

/// A load under way; dropping it (or [`done`](Self::done)) ends the line.
pub(crate) struct Compiling {
    stop: Option<mpsc::Sender<()>>,
    shown: Option<JoinHandle<()>>,
}

impl Compiling {
    /// Starts watching the load of `component` (cached unless `cached` is
    /// false), writing to stderr if it is a terminal.
    pub(crate) fn start(component: &Path, cached: bool) -> Compiling {
        let (style, after) = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            (Style::Terminal, NOTICE_AFTER)
        } else {
            (Style::Plain, PLAIN_NOTICE_AFTER)
        };
        Compiling::to(std::io::stderr(), style, component, cached, after, TICK)
    }

    /// As [`start`](Self::start), writing to `out` in `style` after
    /// `after`.
    fn to(
        mut out: impl Write + Send + 'static,
        style: Style,
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
                if style == Style::Plain {
                    let _ = writeln!(out, "moat: compiling {name} ({what})...");
                    let _ = out.flush();
                    // Done or dropped: say how long it took.
                    let _ = stopped.recv();
                    let took = started.elapsed().as_secs_f64();
                    let _ = writeln!(out, "moat: compiled {name} in {took:.1} s");
                    let _ = out.flush();
                    return;
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
            Style::Terminal,
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
            Style::Terminal,
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
            Style::Terminal,
            Path::new("app.wasm"),
            false,
            Duration::ZERO,
            TICK,
        );
        screen.wait_for("(--no-cache: compiled every run)");
        drop(loading);
        assert!(screen.text().contains("compiled app.wasm in"));
    }

    #[test]
    fn a_log_gets_one_plain_line_then_the_time_it_took() {
        let screen = Screen::default();
        let loading = Compiling::to(
            screen.clone(),
            Style::Plain,
            Path::new("/images/app.wasm"),
            true,
            Duration::ZERO,
            Duration::from_millis(1),
        );
        screen.wait_for("moat: compiling app.wasm (first run; cached for next time)...\n");
        loading.done();
        let text = screen.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert!(
            lines[1].starts_with("moat: compiled app.wasm in "),
            "{text:?}"
        );
        assert!(!text.contains('\r') && !text.contains('\x1b'), "{text:?}");
    }

    #[test]
    fn a_log_hears_nothing_of_a_load_done_in_time() {
        let screen = Screen::default();
        let loading = Compiling::to(
            screen.clone(),
            Style::Plain,
            Path::new("app.wasm"),
            true,
            PLAIN_NOTICE_AFTER,
            TICK,
        );
        loading.done();
        assert_eq!(screen.text(), "");
    }
}
