//! The soak's tables (`soak.md`): per part, its figures and its server's
//! RSS and descriptors at the start, at their peak and at the end; one
//! column per phase.

use std::fmt::Write;

use super::sampler::Resources;
use super::{FD_SETTLE, FD_SLACK, Phase, SoakReport};

/// The whole report as markdown.
pub fn markdown(report: &SoakReport) -> String {
    let mut md = String::new();
    let verdict = if report.passed { "passed" } else { "FAILED" };
    let _ = writeln!(md, "# moat soak: {verdict}\n");
    let _ = writeln!(md, "`{}`\n", report.command);
    let _ = writeln!(
        md,
        "{}. Wall time {:.0} s{}. The servers are `moat run` with this build's \
         guests (the benchmark's `moat` kind), one process per echo (TCP, TLS, UDP), \
         each serving every part that uses it, and `moat serve` with its wasi:http \
         component; each one's RSS (VmRSS), the part of it in \
         the guest's linear memory (/proc/PID/smaps) and its open descriptors \
         (/proc/PID/fd) were read every {:.0} s and at each phase's start and end. \
         The host's own memory is the RSS without the guest's: a wasm memory never \
         shrinks, and the pages a guest touches stay resident up to the size it grew to. \
         A phase ends once the server's descriptors are back within {FD_SLACK} of \
         their start (waiting up to {:.0} s).\n",
        report.machine,
        report.wall_seconds,
        if report.quick { ", `--quick`" } else { "" },
        report.sample_every_seconds,
        FD_SETTLE.as_secs_f64(),
    );
    let mut parts: Vec<&str> = Vec::new();
    for phase in &report.phases {
        if !parts.contains(&phase.part.as_str()) {
            parts.push(&phase.part);
        }
    }
    for part in parts {
        let phases: Vec<&Phase> = report.phases.iter().filter(|p| p.part == part).collect();
        let _ = writeln!(md, "## {part}\n");
        table(&mut md, &phases);
        md.push('\n');
    }
    if !report.failures.is_empty() {
        let _ = writeln!(md, "## Failures\n");
        for failure in &report.failures {
            let _ = writeln!(md, "- {failure}");
        }
        md.push('\n');
    }
    md
}

/// One part's table: a row per figure, a column per phase.
fn table(md: &mut String, phases: &[&Phase]) {
    let _ = write!(md, "| |");
    for phase in phases {
        let _ = write!(md, " {} |", phase.name);
    }
    let _ = write!(md, "\n|---|");
    for _ in phases {
        let _ = write!(md, "---:|");
    }
    md.push('\n');
    let _ = write!(md, "| server |");
    for phase in phases {
        let pid = phase
            .resources
            .as_ref()
            .map_or(String::new(), |r| format!(", pid {}", r.pid));
        let _ = write!(md, " {}{pid} |", phase.server);
    }
    md.push('\n');
    // Every label any phase has, in first-seen order.
    let mut labels: Vec<String> = Vec::new();
    for phase in phases {
        for (label, _) in phase.figures.iter().flat_map(|f| f.rows()) {
            if !labels.contains(&label) {
                labels.push(label);
            }
        }
    }
    for label in &labels {
        let _ = write!(md, "| {label} |");
        for phase in phases {
            let value = phase
                .figures
                .iter()
                .flat_map(|f| f.rows())
                .find(|(l, _)| l == label)
                .map_or_else(|| "-".to_owned(), |(_, v)| v);
            let _ = write!(md, " {value} |");
        }
        md.push('\n');
    }
    type Cell = fn(&Resources) -> String;
    let resource_rows: [(&str, Cell); 5] = [
        ("server RSS start / max / end (MiB)", |r| {
            format!(
                "{:.1} / {:.1} / {:.1}",
                mib(r.rss_start_kib),
                mib(r.rss_max_kib),
                mib(r.rss_end_kib)
            )
        }),
        (
            "of it the host's own, without the guest's memory (MiB)",
            |r| {
                format!(
                    "{:.1} / {:.1} / {:.1}",
                    mib(r.host_start_kib),
                    mib(r.host_max_kib),
                    mib(r.host_end_kib)
                )
            },
        ),
        ("server fds start / max / end", |r| {
            format!("{} / {} / {}", r.fds_start, r.fds_max, r.fds_end)
        }),
        ("fds back down after (s)", |r| {
            format!("{:.2}", r.fd_settle_seconds)
        }),
        ("readings", |r| r.samples.to_string()),
    ];
    for (label, cell) in resource_rows {
        let _ = write!(md, "| {label} |");
        for phase in phases {
            let value = phase.resources.as_ref().map_or("-".to_owned(), cell);
            let _ = write!(md, " {value} |");
        }
        md.push('\n');
    }
    let _ = write!(md, "| verdict |");
    for phase in phases {
        let verdict = if phase.failures.is_empty() {
            "ok".to_owned()
        } else {
            format!("FAILED: {}", phase.failures.join("; ").replace('|', "\\|"))
        };
        let _ = write!(md, " {verdict} |");
    }
    md.push('\n');
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
