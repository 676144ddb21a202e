//! Cold start: cold_start times `moat run` of a hello guest, compiling and
//! from the cache, beside the same component run as `wasmtime run` runs it.

use std::path::Path;

use crate::measure::command_cost;
use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Guest, Kind};

use super::{Run, median};

/// Rounds of `cold_start`, whatever `--rounds` says: a first start varies
/// by ±15% from run to run here, and a round costs only about 0.2 s, so
/// nine rounds buy a steadier median cheaply.
const COLD_START_ROUNDS: usize = 9;

/// `moat run` of a hello guest: the first run (which compiles) and a
/// cached run, beside the same component as `wasmtime run` runs it.
pub fn cold_start(run: &Run) -> anyhow::Result<Workload> {
    let setup = &run.setup;
    let exe = &setup.exe;
    let mut first = MetricBuilder::new("first run (compiles)", "ms", Better::Lower);
    let mut cached = MetricBuilder::new("cached run", "ms", Better::Lower);
    let mut rss = MetricBuilder::new("peak RSS, cached run", "MiB", Better::Lower);
    // The same component both ways: moat compiles it with its own engine
    // configuration; the wasmtime-wasi column runs it as `wasmtime run`
    // does (wasmtime's default configuration and cache).
    let command = |kind: Kind, cache: Option<&Path>| -> Vec<String> {
        let hello = setup.guest(kind, Guest::Hello).display().to_string();
        if kind.is_moat() {
            let cache = match cache {
                Some(dir) => format!("--cache-dir={}", dir.display()),
                None => "--no-cache".into(),
            };
            let moat = setup.moat_binary(kind).display().to_string();
            vec![moat, "run".into(), cache, hello]
        } else {
            let mut command = vec![
                setup.wasi_binary(kind).display().to_string(),
                "run-wasi".into(),
            ];
            if let Some(dir) = cache {
                command.extend(["--cache-dir".into(), dir.display().to_string()]);
            }
            command.push(hello);
            command
        }
    };
    let cost = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        command_cost(exe, &args)
    };
    for _ in 0..run.rounds.max(COLD_START_ROUNDS) {
        for kind in setup.kinds().into_iter().filter(|&k| k != Kind::Native) {
            let cache = setup.cache.join(format!("cold-start-{}", kind.slug()));
            first.add(kind, cost(command(kind, None))?.wall_ms);
            let _ = std::fs::remove_dir_all(&cache);
            cost(command(kind, Some(&cache)))?;
            let cached_cost = cost(command(kind, Some(&cache)))?;
            cached.add(kind, cached_cost.wall_ms);
            rss.add(kind, cached_cost.max_rss_kib as f64 / 1024.0);
        }
    }
    let (first, cached, rss) = (first.build(), cached.build(), rss.build());
    let (f, c) = (median(&first, Kind::Moat), median(&cached, Kind::Moat));
    let (wf, wc) = (
        median(&first, Kind::WasmtimeWasi),
        median(&cached, Kind::WasmtimeWasi),
    );
    let met = c <= 0.15 * f && f <= wf && c <= wc;
    Ok(Workload {
        name: "cold_start".into(),
        what: "a hello guest, compiled, then from the cache: `moat run`, and the same component run as `wasmtime run` runs it (wasmtime's default configuration, in this harness)".into(),
        goal: "cached ≤ 0.15× first; both no slower than wasmtime on the same component".into(),
        met: Some(met),
        verdict: format!(
            "first {f:.1} ms (wasmtime {wf:.1}), cached {c:.1} ms (wasmtime {wc:.1}); cached {:.2}× first",
            c / f
        ),
        metrics: vec![first, cached, rss],
    })
}
