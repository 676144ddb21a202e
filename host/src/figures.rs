//! A run's figures for whoever watches it from outside: its network
//! decisions, what it sent and received, how its component was loaded,
//! written to a file in Prometheus' text format while it runs and once
//! more at its end.
//!
//! The shim writes one file per container into a directory of the node
//! (`figures-dir`), which node_exporter's textfile collector (or any agent
//! that reads the format) collects: docs/kubernetes.md, "Per-pod
//! figures". The counts are the run's own: decisions from its audit
//! ([`DecisionCounts`], trail or no trail), traffic from its sockets
//! ([`Traffic`]). Nothing in a file grows with what the guest does: a
//! fixed set of series, each a number.
//!
//! The file is replaced whole (written beside it, then renamed over it), so
//! a reader sees one version or the next, never half of one; it is
//! rewritten only when a figure changed. Its format is version 0.0.4 of
//! the text format, the one the textfile collector reads: a counter's
//! family is named with its `_total` (prometheus-client writes only
//! OpenMetrics, whose counter families are named without it, which that
//! reader takes for another family).

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crate::audit::{Decided, DecisionCounts, Operation};
use crate::net::{Direction, Opened, Traffic, Transport};

/// Where the component came from when the run loaded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedFrom {
    /// Its compiled code was found in a compiled-code cache.
    Cache,
    /// It was compiled for this run.
    Compiled,
}

impl LoadedFrom {
    /// As the figures write it.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadedFrom::Cache => "cache",
            LoadedFrom::Compiled => "compiled",
        }
    }
}

/// How the run's component was loaded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loaded {
    /// From where.
    pub from: LoadedFrom,
    /// How long it took, from reading the file to a component ready to
    /// instantiate.
    pub took: Duration,
}

/// One run's figures: counted while it runs, read at any time.
#[derive(Debug)]
pub struct Figures {
    decisions: Arc<DecisionCounts>,
    traffic: Arc<Traffic>,
    loaded: Mutex<Option<Loaded>>,
    started: SystemTime,
    /// The labels every series carries (the pod's names, under the shim).
    labels: Vec<(String, String)>,
}

impl Figures {
    /// Figures of a run starting now, each series labelled with `labels`
    /// (names as Prometheus allows them: letters, digits, `_`).
    pub fn new(labels: Vec<(String, String)>) -> Arc<Figures> {
        Arc::new(Figures {
            decisions: Arc::default(),
            traffic: Arc::default(),
            loaded: Mutex::new(None),
            started: SystemTime::now(),
            labels,
        })
    }

    /// The run's decisions, by operation and outcome.
    pub fn decisions(&self) -> &Arc<DecisionCounts> {
        &self.decisions
    }

    /// What the run's guest sent and received.
    pub fn traffic(&self) -> &Arc<Traffic> {
        &self.traffic
    }

    /// How the component was loaded, once it was.
    pub fn loaded(&self) -> Option<Loaded> {
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records how the component was loaded.
    pub(crate) fn set_loaded(&self, loaded: Loaded) {
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) = Some(loaded);
    }

    /// The figures in Prometheus' text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut text = Text {
            out: String::with_capacity(8 * 1024),
            labels: &self.labels,
        };
        text.family(
            "moat_decisions_total",
            "counter",
            "Network decisions of the run, by operation and outcome",
        );
        for operation in Operation::ALL {
            for decided in Decided::ALL {
                text.sample(
                    "moat_decisions_total",
                    &[
                        ("operation", operation.as_str()),
                        ("outcome", decided.as_str()),
                    ],
                    self.decisions.get(operation, decided),
                );
            }
        }
        self.render_traffic(&mut text);
        self.render_run(&mut text);
        text.out
    }

    /// The guest's traffic: bytes, datagrams and connections.
    fn render_traffic(&self, text: &mut Text<'_>) {
        text.family(
            "moat_traffic_bytes_total",
            "counter",
            "Bytes the guest sent and received: TCP and UDP payload (TLS as plaintext), \
             HTTP request and response bodies",
        );
        for transport in Transport::ALL {
            for direction in Direction::ALL {
                text.sample(
                    "moat_traffic_bytes_total",
                    &[
                        ("transport", transport.as_str()),
                        ("direction", direction.as_str()),
                    ],
                    self.traffic.bytes(transport, direction),
                );
            }
        }
        text.family(
            "moat_udp_datagrams_total",
            "counter",
            "UDP datagrams the guest sent and received",
        );
        for direction in Direction::ALL {
            text.sample(
                "moat_udp_datagrams_total",
                &[("direction", direction.as_str())],
                self.traffic.datagrams(direction),
            );
        }
        text.family(
            "moat_tcp_connections_total",
            "counter",
            "TCP connections the guest made (its HTTP client's included) and accepted",
        );
        for how in Opened::ALL {
            text.sample(
                "moat_tcp_connections_total",
                &[("opened", how.as_str())],
                self.traffic.connections(how),
            );
        }
    }

    /// When the run started, and how its component was loaded.
    fn render_run(&self, text: &mut Text<'_>) {
        text.family(
            "moat_run_start_time_seconds",
            "gauge",
            "When the run started, in seconds since the Unix epoch",
        );
        let started = self
            .started
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        text.sample("moat_run_start_time_seconds", &[], started.as_secs_f64());
        if let Some(loaded) = self.loaded() {
            text.family(
                "moat_component_load_seconds",
                "gauge",
                "How long loading the component took, and whether its code came from a \
                 compiled-code cache or was compiled",
            );
            text.sample(
                "moat_component_load_seconds",
                &[("from", loaded.from.as_str())],
                loaded.took.as_secs_f64(),
            );
        }
    }
}

/// The text being written.
struct Text<'a> {
    out: String,
    labels: &'a [(String, String)],
}

impl Text<'_> {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn labels(&mut self, own: &[(&str, &str)]) {
        let all = self
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(own.iter().copied());
        let mut first = true;
        for (key, value) in all {
            self.out.push(if first { '{' } else { ',' });
            first = false;
            self.out.push_str(key);
            self.out.push_str("=\"");
            for c in value.chars() {
                match c {
                    '\\' => self.out.push_str("\\\\"),
                    '"' => self.out.push_str("\\\""),
                    '\n' => self.out.push_str("\\n"),
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }
        if !first {
            self.out.push('}');
        }
    }

    /// One sample: a count (`u64`) or a measure in seconds (`f64`, which
    /// `Display` writes as Prometheus reads it).
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(name);
        self.labels(labels);
        let _ = writeln!(self.out, " {value}");
    }
}

/// Why a figures file cannot be kept.
#[derive(Debug, thiserror::Error)]
#[error("the figures file {}: {source}", .path.display())]
pub struct FiguresError {
    /// The file.
    pub path: PathBuf,
    /// What the system said.
    #[source]
    pub source: std::io::Error,
}

/// A figures file kept up to date while a run goes on, by a thread of its
/// own (the run's runtime is not made yet when it starts, and is gone
/// when it writes the last time).
#[derive(Debug)]
pub struct FiguresFile {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    figures: Arc<Figures>,
    path: PathBuf,
}

impl FiguresFile {
    /// The file's name in its directory.
    pub const NAME: &str = "figures.prom";

    /// Writes `figures` into `dir`/[`FiguresFile::NAME`] now and every
    /// `interval` after, when they changed.
    ///
    /// # Errors
    /// When the first write fails (the directory is missing or not
    /// writable): nothing is started.
    pub fn start(
        figures: Arc<Figures>,
        dir: &Path,
        interval: Duration,
    ) -> Result<FiguresFile, FiguresError> {
        let path = dir.join(FiguresFile::NAME);
        let mut last = figures.render();
        replace(&path, &last)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = {
            let figures = Arc::clone(&figures);
            let written = path.clone();
            std::thread::Builder::new()
                .name("moat-figures".into())
                .spawn(move || {
                    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval)
                    {
                        let now = figures.render();
                        if now != last {
                            if let Err(e) = replace(&written, &now) {
                                tracing::debug!(error = %e, "figures not written");
                            }
                            last = now;
                        }
                    }
                })
                .map_err(|source| FiguresError {
                    path: path.clone(),
                    source,
                })?
        };
        Ok(FiguresFile {
            stop: Some(stop),
            thread: Some(thread),
            figures,
            path,
        })
    }

    /// Stops the updates and writes the figures a last time.
    ///
    /// # Errors
    /// When that write fails.
    pub fn finish(mut self) -> Result<(), FiguresError> {
        self.stop_thread();
        replace(&self.path, &self.figures.render())
    }

    fn stop_thread(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for FiguresFile {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Replaces `path` with `text`: written to a file beside it, then renamed
/// over it.
fn replace(path: &Path, text: &str) -> Result<(), FiguresError> {
    let error = |source| FiguresError {
        path: path.to_owned(),
        source,
    };
    let mut beside = path.as_os_str().to_owned();
    beside.push(".new");
    let beside = PathBuf::from(beside);
    // Never through a link left where the new file goes.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&beside)
        .map_err(error)?;
    file.write_all(text.as_bytes()).map_err(error)?;
    drop(file);
    std::fs::rename(&beside, path).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_carries_the_labels_and_values_are_the_counts() {
        let figures = Figures::new(vec![
            ("namespace".into(), "team-a".into()),
            ("pod".into(), "odd\"name\\\n".into()),
        ]);
        figures
            .decisions()
            .count(Operation::Connect, Decided::Denied);
        figures
            .traffic()
            .bytes_moved(Transport::Tcp, Direction::Sent, 1234);
        figures.set_loaded(Loaded {
            from: LoadedFrom::Cache,
            took: Duration::from_millis(250),
        });
        let text = figures.render();
        let labels = r#"namespace="team-a",pod="odd\"name\\\n""#;
        assert!(
            text.contains(&format!(
                "moat_decisions_total{{{labels},operation=\"connect\",outcome=\"denied\"}} 1\n"
            )),
            "{text}"
        );
        assert!(text.contains(&format!(
            "moat_traffic_bytes_total{{{labels},transport=\"tcp\",direction=\"sent\"}} 1234\n"
        )));
        assert!(text.contains(&format!(
            "moat_component_load_seconds{{{labels},from=\"cache\"}} 0.25\n"
        )));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.contains(labels), "{line}");
        }
        // One HELP and one TYPE for every family, before its samples.
        assert_eq!(
            text.matches("# TYPE ").count(),
            text.matches("# HELP ").count()
        );
    }

    #[test]
    fn a_file_is_replaced_whole_and_written_last_at_the_end() {
        let dir = std::env::temp_dir().join(format!("moat-figures-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let figures = Figures::new(vec![]);
        let file =
            FiguresFile::start(Arc::clone(&figures), &dir, Duration::from_secs(3600)).unwrap();
        let first = std::fs::read_to_string(dir.join(FiguresFile::NAME)).unwrap();
        assert!(first.contains("moat_udp_datagrams_total{direction=\"sent\"} 0\n"));
        figures.traffic().datagram(Direction::Sent, 10);
        file.finish().unwrap();
        let last = std::fs::read_to_string(dir.join(FiguresFile::NAME)).unwrap();
        assert!(
            last.contains("moat_udp_datagrams_total{direction=\"sent\"} 1\n"),
            "{last}"
        );
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FiguresFile::NAME], "nothing left beside it");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
