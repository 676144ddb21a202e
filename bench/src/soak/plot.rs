//! The soak's chart (`soak.svg`): the server's RSS (top) and open
//! descriptors (bottom) against the run's time, one coloured line per
//! phase, so a reader sees whether each comes back to where it started.
//! Descriptors are on a log scale: the concurrent part's 10,000 would
//! flatten every baseline of a few dozen into the axis.

use std::path::Path;

use plotters::prelude::*;

use super::SoakReport;
use super::sampler::Sample;

/// A colour per phase, in the order the phases ran (then around again).
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws the chart of `report` into `path`.
pub fn chart(report: &SoakReport, path: &Path) -> anyhow::Result<()> {
    let phases: Vec<&str> = report.phases.iter().map(|p| p.name.as_str()).collect();
    let of = |phase: &str| -> Vec<&Sample> {
        report.samples.iter().filter(|s| s.phase == phase).collect()
    };
    let t_max = report.samples.iter().map(|s| s.t).fold(1.0f64, f64::max) * 1.02;
    let rss_max = report
        .samples
        .iter()
        .map(|s| s.rss_kib as f64 / 1024.0)
        .fold(1.0f64, f64::max)
        * 1.15;
    let fds_max = report
        .samples
        .iter()
        .map(|s| s.fds as f64)
        .fold(10.0f64, f64::max)
        * 2.0;

    // The legend gets a strip of its own below the panels, so it hides
    // no reading.
    let legend_height = 20 + 18 * phases.len() as u32;
    let root = SVGBackend::new(path, (1100, 760 + legend_height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (panels, key) = root.split_vertically(760);
    let (top, bottom) = panels.split_vertically(380);

    let mut rss = ChartBuilder::on(&top)
        .caption(
            format!(
                "moat soak: server RSS over time (thin: the host's own, without the guest's memory){}",
                if report.quick { " (--quick)" } else { "" }
            ),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, 0.0..rss_max)?;
    rss.configure_mesh()
        .x_desc("seconds since the soak began")
        .y_desc("VmRSS (MiB)")
        .draw()?;
    for (i, phase) in phases.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<(f64, f64)> = of(phase)
            .iter()
            .map(|s| (s.t, s.rss_kib as f64 / 1024.0))
            .collect();
        rss.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
        rss.draw_series(points.iter().map(|&p| Circle::new(p, 2, colour.filled())))?;
        // The host's own part of it, without the guest's linear memory.
        let host: Vec<(f64, f64)> = of(phase)
            .iter()
            .map(|s| (s.t, s.host_kib as f64 / 1024.0))
            .collect();
        rss.draw_series(LineSeries::new(host, colour.stroke_width(1)))?;
    }

    let mut fds = ChartBuilder::on(&bottom)
        .caption(
            "server open descriptors over time (log scale)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, (1.0..fds_max).log_scale())?;
    fds.configure_mesh()
        .x_desc("seconds since the soak began")
        .y_desc("open fds")
        .draw()?;
    for (i, phase) in phases.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<(f64, f64)> = of(phase)
            .iter()
            .map(|s| (s.t, (s.fds as f64).max(1.0)))
            .collect();
        fds.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
        fds.draw_series(points.iter().map(|&p| Circle::new(p, 2, colour.filled())))?;
    }
    for (i, phase) in phases.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let y = 10 + 18 * i as i32;
        key.draw(&PathElement::new(
            vec![(70, y + 7), (95, y + 7)],
            colour.stroke_width(3),
        ))?;
        key.draw(&Text::new(
            legend(report, phase),
            (105, y),
            ("sans-serif", 14).into_font(),
        ))?;
    }
    root.present()?;
    Ok(())
}

/// `phase (server, pid): RSS and fds at start / max / end` for the key.
fn legend(report: &SoakReport, phase: &str) -> String {
    let Some(p) = report.phases.iter().find(|p| p.name == phase) else {
        return phase.to_owned();
    };
    match &p.resources {
        Some(r) => format!(
            "{phase} ({}, pid {}): RSS {:.1} / {:.1} / {:.1} MiB, host's own {:.1} / {:.1} / {:.1} MiB, fds {} / {} / {} (start / max / end)",
            p.server,
            r.pid,
            r.rss_start_kib as f64 / 1024.0,
            r.rss_max_kib as f64 / 1024.0,
            r.rss_end_kib as f64 / 1024.0,
            r.host_start_kib as f64 / 1024.0,
            r.host_max_kib as f64 / 1024.0,
            r.host_end_kib as f64 / 1024.0,
            r.fds_start,
            r.fds_max,
            r.fds_end
        ),
        None => format!("{phase} ({}): no readings", p.server),
    }
}
