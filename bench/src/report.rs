//! Results: medians and ratios, the table, the JSON and the chart.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::servers::Kind;

/// Whether a bigger number is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Better {
    Higher,
    Lower,
}

/// Samples of one number.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: Vec<f64>,
}

impl Stats {
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Stats {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            samples: samples.to_vec(),
        })
    }
}

/// One measured number across the servers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metric {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub servers: BTreeMap<Kind, Stats>,
    /// Each server's median over native's.
    pub ratio_to_native: BTreeMap<Kind, f64>,
}

impl Metric {
    /// `name (unit, which way is better)`, the table's metric column.
    fn label(&self) -> String {
        let better = match self.better {
            Better::Higher => "higher is better",
            Better::Lower => "lower is better",
        };
        format!("{} ({}, {better})", self.name, self.unit)
    }

    /// `median (min..max)` of one server, or `-`.
    fn cell(&self, kind: Kind) -> String {
        self.servers
            .get(&kind)
            .map(|s| format!("{} ({}..{})", fmt(s.median), fmt(s.min), fmt(s.max)))
            .unwrap_or_else(|| "-".into())
    }
}

/// Collects samples for one metric.
pub struct MetricBuilder {
    name: String,
    unit: String,
    better: Better,
    samples: BTreeMap<Kind, Vec<f64>>,
}

impl MetricBuilder {
    pub fn new(name: &str, unit: &str, better: Better) -> MetricBuilder {
        MetricBuilder {
            name: name.into(),
            unit: unit.into(),
            better,
            samples: BTreeMap::new(),
        }
    }

    pub fn add(&mut self, kind: Kind, value: f64) {
        self.samples.entry(kind).or_default().push(value);
    }

    pub fn build(self) -> Metric {
        let servers: BTreeMap<Kind, Stats> = self
            .samples
            .iter()
            .filter_map(|(k, v)| Some((*k, Stats::of(v)?)))
            .collect();
        let ratio_to_native = match servers.get(&Kind::Native) {
            Some(native) if native.median != 0.0 => servers
                .iter()
                .map(|(k, s)| (*k, s.median / native.median))
                .collect(),
            _ => BTreeMap::new(),
        };
        Metric {
            name: self.name,
            unit: self.unit,
            better: self.better,
            servers,
            ratio_to_native,
        }
    }
}

/// One workload's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub what: String,
    pub goal: String,
    pub met: Option<bool>,
    pub verdict: String,
    pub metrics: Vec<Metric>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub quick: bool,
    pub rounds: usize,
    pub machine: String,
    /// The target directory of the baseline build, if one ran beside this.
    pub baseline: Option<String>,
    pub workloads: Vec<Workload>,
}

fn fmt(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The table, as markdown (BENCHMARKS.md takes it as is).
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    out.push_str("| workload | metric | native | moat | wasmtime-wasi | moat / native | wasmtime-wasi / native | moat, second guest | second / native | goal | met |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for w in &report.workloads {
        for (i, m) in w.metrics.iter().enumerate() {
            let ratio = |k: Kind| {
                m.ratio_to_native
                    .get(&k)
                    .map(|r| format!("{r:.2}"))
                    .unwrap_or("-".into())
            };
            let (goal, met) = if i == 0 {
                (
                    w.goal.clone(),
                    match w.met {
                        Some(true) => "yes".into(),
                        Some(false) => "**no**".into(),
                        None => "-".into(),
                    },
                )
            } else {
                (String::new(), String::new())
            };
            let second = second_guest(m);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                if i == 0 { w.name.as_str() } else { "" },
                m.label(),
                m.cell(Kind::Native),
                m.cell(Kind::Moat),
                m.cell(Kind::WasmtimeWasi),
                ratio(Kind::Moat),
                ratio(Kind::WasmtimeWasi),
                second.map_or("-".into(), |k| m.cell(k)),
                second.map_or("-".into(), ratio),
                goal,
                met,
            ));
        }
    }
    out
}

/// The second guest a metric ran on moat, if any: the std::net guest
/// (`bench-std`, its wasi:sockets under the policy) or hyper-serve (beside
/// http-server on `http_rr`).
fn second_guest(m: &crate::report::Metric) -> Option<Kind> {
    [Kind::MoatStd, Kind::MoatHyper]
        .into_iter()
        .find(|k| m.servers.contains_key(k))
}

/// The A/B table: each metric of this build beside the baseline build's,
/// as markdown. Empty without a baseline.
pub fn ab_table(report: &Report) -> String {
    if report.baseline.is_none() {
        return String::new();
    }
    let mut out = String::new();
    out.push_str("| workload | metric | moat, baseline | moat | moat / baseline | wasmtime-wasi, baseline | wasmtime-wasi | wasmtime-wasi / baseline |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for w in &report.workloads {
        for (i, m) in w.metrics.iter().enumerate() {
            let ratio = |new: Kind, old: Kind| match (m.servers.get(&new), m.servers.get(&old)) {
                (Some(new), Some(old)) if old.median != 0.0 => {
                    format!("{:.2}", new.median / old.median)
                }
                _ => "-".into(),
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                if i == 0 { w.name.as_str() } else { "" },
                m.label(),
                m.cell(Kind::MoatBaseline),
                m.cell(Kind::Moat),
                ratio(Kind::Moat, Kind::MoatBaseline),
                m.cell(Kind::WasmtimeWasiBaseline),
                m.cell(Kind::WasmtimeWasi),
                ratio(Kind::WasmtimeWasi, Kind::WasmtimeWasiBaseline),
            ));
        }
    }
    let mut stock = String::new();
    for w in &report.workloads {
        let mut first = true;
        for m in &w.metrics {
            let (Some(new), Some(old)) = (
                m.servers.get(&Kind::MoatStd),
                m.servers.get(&Kind::MoatStdBaseline),
            ) else {
                continue;
            };
            let ratio = if old.median == 0.0 {
                "-".to_owned()
            } else {
                format!("{:.2}", new.median / old.median)
            };
            stock.push_str(&format!(
                "| {} | {} | {} | {} | {ratio} |\n",
                if first { w.name.as_str() } else { "" },
                m.label(),
                m.cell(Kind::MoatStdBaseline),
                m.cell(Kind::MoatStd),
            ));
            first = false;
        }
    }
    if !stock.is_empty() {
        out.push_str("\n| workload | metric | moat, std::net guest, baseline | moat, std::net guest | ratio |\n");
        out.push_str("|---|---|---|---|---|\n");
        out.push_str(&stock);
    }
    out
}

/// The same std::net guest on wasmtime-wasi's sockets and on moat's (its
/// wasi:sockets under the policy), for the workloads that ran both: what
/// the policy hook, the lookup record and moat's host cost. The goal is
/// within 5% of wasmtime-wasi. Empty if no workload ran the guest on moat.
pub fn stock_table(report: &Report) -> String {
    let mut out = String::new();
    out.push_str("| workload | metric | wasmtime-wasi | moat, std::net guest | moat / wasmtime-wasi | within 5% |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    let mut rows = 0;
    for w in &report.workloads {
        let mut first = true;
        for m in &w.metrics {
            let (Some(wasi), Some(std)) = (
                m.servers.get(&Kind::WasmtimeWasi),
                m.servers.get(&Kind::MoatStd),
            ) else {
                continue;
            };
            let ratio = std.median / wasi.median;
            let within = match m.better {
                Better::Higher => ratio >= 0.95,
                Better::Lower => ratio <= 1.05,
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.2} | {} |\n",
                if first { w.name.as_str() } else { "" },
                m.label(),
                m.cell(Kind::WasmtimeWasi),
                m.cell(Kind::MoatStd),
                ratio,
                if within { "yes" } else { "**no**" },
            ));
            first = false;
            rows += 1;
        }
    }
    if rows == 0 { String::new() } else { out }
}

/// hyper-serve beside http-server (both on moat) and native hyper, for the
/// workloads that ran it. Empty if none did.
pub fn hyper_table(report: &Report) -> String {
    let mut out = String::new();
    out.push_str("| workload | metric | native (hyper on tokio) | moat, http-server | moat, hyper-serve | http-server / native | hyper-serve / native | hyper-serve / http-server |\n");
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    let mut rows = 0;
    for w in &report.workloads {
        for (i, m) in w.metrics.iter().enumerate() {
            let (Some(hand), Some(hyper)) =
                (m.servers.get(&Kind::Moat), m.servers.get(&Kind::MoatHyper))
            else {
                continue;
            };
            let ratio = |k: Kind| {
                m.ratio_to_native
                    .get(&k)
                    .map(|r| format!("{r:.2}"))
                    .unwrap_or("-".into())
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {:.2} |\n",
                if i == 0 { w.name.as_str() } else { "" },
                m.label(),
                m.cell(Kind::Native),
                m.cell(Kind::Moat),
                m.cell(Kind::MoatHyper),
                ratio(Kind::Moat),
                ratio(Kind::MoatHyper),
                hyper.median / hand.median,
            ));
            rows += 1;
        }
    }
    if rows == 0 { String::new() } else { out }
}

/// moat with the audit trail on (`moat run --audit=FILE`) beside moat
/// without it, for the workloads that ran both. Empty if none did.
pub fn audit_table(report: &Report) -> String {
    beside_moat(report, Kind::MoatAudited, "--audit")
}

/// moat with a secret set (`moat run --secret=...`, bound elsewhere)
/// beside moat without one. Empty if no workload ran both.
pub fn secret_table(report: &Report) -> String {
    beside_moat(report, Kind::MoatSecret, "--secret")
}

/// moat run as `kind` (moat with one `option` more) beside moat, for the
/// workloads that ran both. Empty if none did.
fn beside_moat(report: &Report, kind: Kind, option: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "| workload | metric | moat | moat {option} | {option} / moat |\n"
    ));
    out.push_str("|---|---|---|---|---|\n");
    let mut rows = 0;
    for w in &report.workloads {
        for (i, m) in w.metrics.iter().enumerate() {
            let (Some(plain), Some(with)) = (m.servers.get(&Kind::Moat), m.servers.get(&kind))
            else {
                continue;
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.2} |\n",
                if i == 0 { w.name.as_str() } else { "" },
                m.label(),
                m.cell(Kind::Moat),
                m.cell(kind),
                with.median / plain.median,
            ));
            rows += 1;
        }
    }
    if rows == 0 { String::new() } else { out }
}

/// The chart's colours: moat, moat's second guest, wasmtime-wasi.
const MOAT: RGBColor = RGBColor(31, 119, 180);
const SECOND: RGBColor = RGBColor(44, 160, 44);
const WASI: RGBColor = RGBColor(214, 110, 40);

/// A chart of every metric's ratio to native: moat, moat's second guest
/// where one ran, and wasmtime-wasi.
pub fn chart(report: &Report, path: &Path) -> anyhow::Result<()> {
    // (label, moat, wasmtime-wasi, moat's second guest) ratios per metric.
    type Row = (String, Option<f64>, Option<f64>, Option<f64>);
    let rows: Vec<Row> = report
        .workloads
        .iter()
        .flat_map(|w| {
            w.metrics
                .iter()
                .filter(|m| {
                    m.ratio_to_native.contains_key(&Kind::Moat)
                        || m.ratio_to_native.contains_key(&Kind::WasmtimeWasi)
                })
                .map(move |m| {
                    let arrow = match m.better {
                        Better::Higher => "↑",
                        Better::Lower => "↓",
                    };
                    (
                        format!("{}: {} {arrow}", w.name, m.name),
                        m.ratio_to_native.get(&Kind::Moat).copied(),
                        m.ratio_to_native.get(&Kind::WasmtimeWasi).copied(),
                        second_guest(m).and_then(|k| m.ratio_to_native.get(&k).copied()),
                    )
                })
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let max = rows
        .iter()
        .flat_map(|(_, a, b, c)| [a.unwrap_or(0.0), b.unwrap_or(0.0), c.unwrap_or(0.0)])
        .fold(1.0f64, f64::max)
        .min(8.0)
        * 1.1;
    let height = 90 + rows.len() as u32 * 40;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Ratio to native tokio (1.0 = native; arrows: which way is better)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(340)
        .build_cartesian_2d(0.0..max, 0.0..rows.len() as f64)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("ratio to native")
        .draw()?;
    // One label per row, centred on its pair of bars.
    let label_style = TextStyle::from(("sans-serif", 13).into_font()).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Right,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    for (i, (label, _, _, _)) in rows.iter().enumerate() {
        let y = (rows.len() - 1 - i) as f64 + 0.5;
        let (_, py) = chart.backend_coord(&(0.0, y));
        root.draw(&Text::new(label.clone(), (335, py), label_style.clone()))?;
    }
    let n = rows.len();
    for (i, (_, moat, wasi, second)) in rows.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        // Top to bottom within a row: moat, its second guest, wasmtime-wasi.
        for (value, (from, to), color) in [
            (moat, (0.66, 0.92), MOAT),
            (second, (0.38, 0.64), SECOND),
            (wasi, (0.1, 0.36), WASI),
        ] {
            if let Some(v) = value {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y + from), (v.min(max), y + to)],
                    color.filled(),
                )))?;
            }
        }
    }
    chart.draw_series(LineSeries::new(
        vec![(1.0, 0.0), (1.0, n as f64)],
        BLACK.stroke_width(1),
    ))?;
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, 0.0), (0.0, 0.0)],
            MOAT.filled(),
        )))?
        .label("moat")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], MOAT.filled()));
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, 0.0), (0.0, 0.0)],
            WASI.filled(),
        )))?
        .label("wasmtime-wasi (std::net guest)")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], WASI.filled()));
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, 0.0), (0.0, 0.0)],
            SECOND.filled(),
        )))?
        .label("moat, second guest (std::net guest; hyper-serve on http_rr)")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], SECOND.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
