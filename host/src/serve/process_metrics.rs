//! The `process_*` series Prometheus's own clients export, for `moat
//! serve --metrics`: CPU, resident and virtual memory, start time, open
//! and most descriptors. Read at each scrape (CPU from the process's CPU
//! clock, the rest from `/proc/self`); a figure that cannot be read is
//! left out of that scrape rather than reported as 0.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;
use rustix::time::{ClockId, clock_gettime};

/// The process's figures, read when scraped.
#[derive(Debug)]
pub(crate) struct Process;

/// The process's figures at one scrape, in seconds and bytes.
struct Stat {
    cpu_seconds: f64,
    start_time_seconds: Option<f64>,
    virtual_bytes: u64,
    resident_bytes: u64,
}

impl Stat {
    fn read() -> Option<Stat> {
        let text = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (in parentheses) may hold spaces: the fields
        // are counted from after its last parenthesis, the third field
        // (state) first.
        let (_, rest) = text.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let page = rustix::param::page_size() as u64;
        let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|stat| {
            stat.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|b| b.trim().parse::<u64>().ok())
        });
        // CPU time from the process's CPU clock (nanoseconds), not from
        // utime and stime in the file: those are whole clock ticks (10 ms),
        // and a server that started from the compile cache has often used
        // less than one, so it read 0 seconds.
        let cpu = clock_gettime(ClockId::ProcessCPUTime);
        Some(Stat {
            cpu_seconds: cpu.tv_sec as f64 + cpu.tv_nsec as f64 / 1e9,
            start_time_seconds: boot
                .zip(field(22))
                .map(|(boot, start)| boot as f64 + start as f64 / ticks),
            virtual_bytes: field(23)?,
            resident_bytes: field(24)?.saturating_mul(page),
        })
    }
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(stat) = Stat::read() {
            let cpu = ConstCounter::new(stat.cpu_seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu",
                "User and system CPU time the process spent",
                Some(&Unit::Seconds),
                cpu.metric_type(),
            )?;
            cpu.encode(metric)?;
            gauge(
                &mut encoder,
                "process_resident_memory",
                "Resident memory",
                Some(&Unit::Bytes),
                stat.resident_bytes,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory",
                "Virtual memory (the instance pool reserves much of it, unbacked)",
                Some(&Unit::Bytes),
                stat.virtual_bytes,
            )?;
            if let Some(start) = stat.start_time_seconds {
                // Seconds with their fraction, as Prometheus's clients
                // give it: not a whole-number gauge.
                let start = ConstGauge::new(start);
                let metric = encoder.encode_descriptor(
                    "process_start_time",
                    "Start time of the process since the Unix epoch",
                    Some(&Unit::Seconds),
                    start.metric_type(),
                )?;
                start.encode(metric)?;
            }
        }
        if let Ok(open) = std::fs::read_dir("/proc/self/fd") {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Open file descriptors",
                None,
                open.count() as u64,
            )?;
        }
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        if let Some(max) = limit.current {
            gauge(
                &mut encoder,
                "process_max_fds",
                "The most file descriptors the process may open",
                None,
                max,
            )?;
        }
        Ok(())
    }
}

/// Encodes one gauge without labels.
pub(super) fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let value = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    let metric = encoder.encode_descriptor(name, help, unit, value.metric_type())?;
    value.encode(metric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_figures() {
        let stat = Stat::read().expect("/proc/self/stat reads");
        assert!(stat.resident_bytes > 0 && stat.virtual_bytes >= stat.resident_bytes);
        let start = stat.start_time_seconds.expect("a start time");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0 * 365.0,
            "{start} {now}"
        );
    }
}
