//! The HTML report: `index.html` with the tables, and beside it one SVG per plot: BORG's
//! workload figures (rank-frequency, heat map, working sets), the request-size histogram,
//! and the plots people reach for first: size, inter-arrival and seek-distance CDFs, an
//! LBA-over-time scatter (seekwatcher style), an IOPS timeline and a seek-distance
//! histogram. Chart pieces (palette, legends, titles) are in [`crate::chart`].

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::chart::{
    cdf_svg, colour, escape, legend_strip, log_range, plot_err, render, spans_decades, Area, FONT,
};
use crate::units::{format_bytes, format_ns};
use crate::Analysis;

pub const RANK_FREQUENCY_SVG: &str = "rank_frequency.svg";
pub const HEAT_MAP_SVG: &str = "heat_map.svg";
pub const WORKING_SETS_SVG: &str = "working_sets.svg";
pub const REQUEST_SIZES_SVG: &str = "request_sizes.svg";
pub const SIZE_CDF_SVG: &str = "size_cdf.svg";
pub const INTERARRIVAL_CDF_SVG: &str = "interarrival_cdf.svg";
pub const SEEK_CDF_SVG: &str = "seek_distance_cdf.svg";
pub const SEEK_HISTOGRAM_SVG: &str = "seek_distances.svg";
pub const LBA_TIME_SVG: &str = "lba_over_time.svg";
pub const IOPS_SVG: &str = "iops.svg";

type Plot = fn(&Analysis) -> io::Result<String>;

/// A series drawn: its name, colour and (x, y) points.
type Shown<'a> = (String, RGBColor, &'a [(u64, u64)]);

/// Every plot: its file, its alt text, and how it is drawn.
const PLOTS: [(&str, &str, Plot); 10] = [
    (
        RANK_FREQUENCY_SVG,
        "page accesses by rank, log-log",
        rank_frequency,
    ),
    (HEAT_MAP_SVG, "device heat map", heat_map),
    (WORKING_SETS_SVG, "working-set overlap chart", working_sets),
    (REQUEST_SIZES_SVG, "request size histogram", request_sizes),
    (SIZE_CDF_SVG, "CDF of request sizes", size_cdf),
    (
        INTERARRIVAL_CDF_SVG,
        "CDF of inter-arrival times",
        interarrival_cdf,
    ),
    (SEEK_CDF_SVG, "CDF of seek distances", seek_cdf),
    (
        SEEK_HISTOGRAM_SVG,
        "seek distance histogram",
        seek_histogram,
    ),
    (LBA_TIME_SVG, "LBA over time scatter", lba_over_time),
    (IOPS_SVG, "IOPS over time", iops),
];

/// Writes `dir/index.html` and its plots; returns the index's path.
pub fn write(dir: &Path, a: &Analysis, title: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for (file, _, plot) in PLOTS {
        std::fs::write(dir.join(file), plot(a)?)?;
    }
    let index = dir.join("index.html");
    std::fs::write(&index, html(a, title))?;
    Ok(index)
}

/// A chart with a legend strip, `series` as lines on log-log axes.
fn rank_frequency(a: &Analysis) -> io::Result<String> {
    let rf = &a.pages.rank_frequency;
    let title = "Page accesses by rank (log-log)";
    let series = [
        ("all accesses", &rf.all),
        ("reads", &rf.reads),
        ("writes", &rf.writes),
    ];
    let shown: Vec<Shown> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.1.is_empty())
        .map(|(k, s)| (s.0.to_string(), colour(k), s.1.as_slice()))
        .collect();
    render(title, (720, 460), |root| {
        let legend: Vec<(String, RGBColor)> = shown.iter().map(|s| (s.0.clone(), s.1)).collect();
        let area = legend_strip(root, &legend)?;
        let max_rank = rf.all.last().map_or(1, |p| p.0).max(2);
        let max_count = rf.all.first().map_or(1, |p| p.1).max(2);
        let mut chart = ChartBuilder::on(&area)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (1u64..max_rank * 2).log_scale(),
                (1u64..max_count * 2).log_scale(),
            )
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("rank of page (1 = most accessed)")
            .y_desc("accesses")
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        for (_, c, points) in &shown {
            chart
                .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

/// Level 0 (untouched) is light grey; 1..=6 run from pale yellow to dark red (a
/// single-hue ramp, readable with colour vision deficiencies and in grey).
pub const LEVEL_COLORS: [(u8, u8, u8); 7] = [
    (240, 240, 240),
    (255, 245, 200),
    (254, 217, 118),
    (253, 141, 60),
    (240, 59, 32),
    (189, 0, 38),
    (100, 0, 20),
];

/// The device as rows of cells, address 0 at the top left: the y axis gives each row's
/// first address, the x axis the offset within a row.
fn heat_map(a: &Analysis) -> io::Result<String> {
    let h = &a.heat_map;
    let cell_bytes = h.pages_per_cell * a.page_bytes;
    let row_bytes = h.columns * cell_bytes;
    let title = format!("Device heat map ({} per cell)", format_bytes(cell_bytes));
    render(&title, (640, 640), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(&title, (FONT, 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0u64..h.columns, 0u64..h.rows)
            .map_err(plot_err)?;
        let rows = h.rows;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(5)
            .y_labels(8)
            .x_label_formatter(&|c| format_bytes(c * cell_bytes))
            .y_label_formatter(&|y| format_bytes(rows.saturating_sub(*y) * row_bytes))
            .x_desc(format!(
                "offset within a row of {}",
                format_bytes(row_bytes)
            ))
            .y_desc(if h.span_is_device_size {
                "row start address (whole device)"
            } else {
                "row start address (up to the highest page seen)"
            })
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        let cells = h.levels.iter().enumerate().map(|(i, &lvl)| {
            let (col, row) = (i as u64 % h.columns, i as u64 / h.columns);
            let y = h.rows - 1 - row;
            let (r, g, b) = LEVEL_COLORS[lvl as usize];
            Rectangle::new([(col, y), (col + 1, y + 1)], RGBColor(r, g, b).filled())
        });
        chart.draw_series(cells).map_err(plot_err)?;
        Ok(())
    })
}

fn working_sets(a: &Analysis) -> io::Result<String> {
    let title = "Working-set overlap with the first interval";
    let lines = [
        ("all pages", &a.working_set_overlap),
        ("top 20% pages", &a.working_set_overlap_top20),
    ];
    render(title, (720, 440), |root| {
        let legend: Vec<(String, RGBColor)> = lines
            .iter()
            .enumerate()
            .map(|(k, l)| (l.0.to_string(), colour(k + 1)))
            .collect();
        let area = legend_strip(root, &legend)?;
        let n = a.intervals.len().max(2) as u64;
        let mut chart = ChartBuilder::on(&area)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0u64..n - 1, 0f64..1.05)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(format!("interval ({})", a.interval))
            .y_desc("overlap with interval 1")
            .x_labels(n.min(12) as usize)
            .x_label_formatter(&|x| format!("{}", x + 1))
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        for (k, (_, values)) in lines.iter().enumerate() {
            let c = colour(k + 1);
            let pts: Vec<(u64, f64)> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as u64, v))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(plot_err)?;
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

/// Bars over labelled categories on a log count axis (counts span decades).
fn log_bars(
    root: &Area,
    title: &str,
    x_desc: &str,
    labels: &[String],
    counts: &[u64],
) -> io::Result<()> {
    let n = labels.len().max(1);
    let (lo, hi) = log_range(counts.iter().map(|&c| c as f64));
    let floor = lo.min(0.8);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (floor..hi).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.min(24))
        .x_label_formatter(&|x| category(labels, *x))
        .x_desc(x_desc)
        .y_desc("requests (log scale)")
        .label_style((FONT, 11))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(
            counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| {
                    let x = i as f64;
                    Rectangle::new(
                        [(x - 0.38, floor), (x + 0.38, c as f64)],
                        colour(1).filled(),
                    )
                }),
        )
        .map_err(plot_err)?;
    Ok(())
}

/// The label of the category at `x` (only at whole positions).
pub fn category(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

fn request_sizes(a: &Analysis) -> io::Result<String> {
    let title = "Request sizes (log count)";
    let buckets = &a.request_size_histogram;
    let labels: Vec<String> = buckets
        .iter()
        .map(|b| format_bytes(b.lower_bytes))
        .collect();
    let counts: Vec<u64> = buckets.iter().map(|b| b.requests).collect();
    render(title, (720, 420), |root| {
        log_bars(
            root,
            title,
            "request size (bucket from this size to twice it)",
            &labels,
            &counts,
        )
    })
}

fn bytes_label(v: f64) -> String {
    format_bytes(v.round() as u64)
}

fn size_cdf(a: &Analysis) -> io::Result<String> {
    let f = &a.figures;
    cdf_svg(
        "Request sizes (CDF)",
        "request size (log scale)",
        &[("all requests".into(), f.size_bytes.cdf())],
        &bytes_label,
    )
}

fn interarrival_cdf(a: &Analysis) -> io::Result<String> {
    // A gap of 0 ns cannot sit on a log axis: it is drawn at 1 ns.
    let pts = a.figures.interarrival_ns.cdf();
    cdf_svg(
        "Inter-arrival times (CDF)",
        "time since the previous request (log scale; 0 drawn at 1 ns)",
        &[("all requests".into(), pts)],
        &|v| format_ns(v.round() as u64),
    )
}

fn seek_cdf(a: &Analysis) -> io::Result<String> {
    cdf_svg(
        "Seek distances (CDF)",
        "sectors from the previous request's end on the device (log scale; 0 = sequential, drawn at 1)",
        &[("all requests".into(), a.figures.seek_sectors.cdf())],
        &|v| format_count(v.round() as u64),
    )
}

/// `950`, `12k`, `3.4M`, `1.2G` sectors.
fn format_count(v: u64) -> String {
    match v {
        0..1_000 => v.to_string(),
        1_000..1_000_000 => format!("{:.0}k", v as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", v as f64 / 1e6),
        _ => format!("{:.1}G", v as f64 / 1e9),
    }
}

fn seek_histogram(a: &Analysis) -> io::Result<String> {
    let title = "Seek distances (log count)";
    let octaves = a.figures.seek_sectors.octaves();
    let labels: Vec<String> = octaves
        .iter()
        .map(|&(lo, _)| {
            if lo == 0 {
                "0 (seq)".into()
            } else {
                format_count(lo)
            }
        })
        .collect();
    let counts: Vec<u64> = octaves.iter().map(|o| o.1).collect();
    render(title, (720, 420), |root| {
        log_bars(
            root,
            title,
            "sectors from the previous request's end (bucket from this to twice it)",
            &labels,
            &counts,
        )
    })
}

/// Seconds since the trace's first request.
fn seconds(ts_ns: u64, start_ns: u64) -> f64 {
    ts_ns.saturating_sub(start_ns) as f64 / 1e9
}

/// Where each sampled request went over time, reads and writes apart (seekwatcher's
/// main view): sweeps, hot bands and random scatter show at a glance.
fn lba_over_time(a: &Analysis) -> io::Result<String> {
    let f = &a.figures;
    let title = "Addresses over time (every request sampled evenly)";
    let start = f.timeline_start_ns;
    render(title, (760, 480), |root| {
        let legend = [
            ("reads".to_string(), colour(1)),
            ("writes".to_string(), colour(2)),
        ];
        let area = legend_strip(root, &legend)?;
        let t_max = f
            .scatter
            .iter()
            .map(|p| seconds(p.ts_ns, start))
            .fold(0.0, f64::max)
            .max(1e-3);
        let gib = |sector: u64| sector as f64 * 512.0 / (1u64 << 30) as f64;
        let y_max = f
            .scatter
            .iter()
            .map(|p| gib(p.sector))
            .fold(0.0, f64::max)
            .max(1e-6);
        let mut chart = ChartBuilder::on(&area)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..t_max * 1.02, 0f64..y_max * 1.05)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "seconds since the first request (1 point per {} requests)",
                f.scatter_stride
            ))
            .y_desc("address (GiB)")
            .y_label_formatter(&|v| format!("{v:.2}"))
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        for (write, k) in [(false, 1), (true, 2)] {
            let c = colour(k).mix(0.6);
            chart
                .draw_series(
                    f.scatter.iter().filter(|p| p.write == write).map(|p| {
                        Circle::new((seconds(p.ts_ns, start), gib(p.sector)), 1, c.filled())
                    }),
                )
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

/// Requests per second over time, reads and writes apart; a log axis when the rate spans
/// decades (an idle bin is then drawn at the axis floor). The log axis is drawn as
/// log10 of the rate on a linear axis, labelled with the rate itself.
fn iops(a: &Analysis) -> io::Result<String> {
    let f = &a.figures;
    let bin_s = f.timeline_bin_ns as f64 / 1e9;
    let rate = |v: &[u64]| -> Vec<f64> { v.iter().map(|&c| c as f64 / bin_s).collect() };
    let series = [rate(&f.timeline_reads), rate(&f.timeline_writes)];
    let all = || series.iter().flatten().copied();
    let log = spans_decades(all());
    let (lo, hi) = log_range(all());
    let to_y = |v: f64| if log { v.max(lo).log10() } else { v };
    let (y0, y1) = if log {
        (lo.log10(), hi.log10())
    } else {
        (0.0, all().fold(0.0, f64::max).max(1.0) * 1.1)
    };
    let title = format!(
        "IOPS over time ({} bins{})",
        format_ns(f.timeline_bin_ns),
        if log { ", log scale" } else { "" }
    );
    let t_max = (f.timeline_reads.len().max(1) as f64) * bin_s;
    render(&title, (760, 420), |root| {
        let legend = [
            ("reads".to_string(), colour(1)),
            ("writes".to_string(), colour(2)),
        ];
        let area = legend_strip(root, &legend)?;
        let mut chart = ChartBuilder::on(&area)
            .caption(&title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..t_max, y0..y1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the first request")
            .y_desc(if log {
                "requests per second (log scale)"
            } else {
                "requests per second"
            })
            .y_label_formatter(&|v| {
                let r = if log { 10f64.powf(*v) } else { *v };
                format_count(r.round() as u64)
            })
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        for (k, ys) in series.iter().enumerate() {
            let pts = ys
                .iter()
                .enumerate()
                .map(|(i, &y)| ((i as f64 + 0.5) * bin_s, to_y(y)));
            chart
                .draw_series(LineSeries::new(pts, colour(k + 1).stroke_width(1)))
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or("unknown".to_string(), |v| format!("{:.2} %", v * 100.0))
}

fn opt_ns(v: Option<u64>) -> String {
    v.map_or("-".to_string(), format_ns)
}

fn row(out: &mut String, k: &str, v: &str) {
    let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
}

/// The rows of BORG's workload table, plus sequentiality and the read share.
pub fn summary_rows(a: &Analysis) -> Vec<(&'static str, String)> {
    vec![
        (
            "requests",
            format!("{} ({} reads, {} writes)", a.requests, a.reads, a.writes),
        ),
        (
            "read bytes (total / unique)",
            format!(
                "{} / {}",
                format_bytes(a.read_bytes),
                format_bytes(a.unique_read_bytes)
            ),
        ),
        (
            "write bytes (total / unique)",
            format!(
                "{} / {}",
                format_bytes(a.write_bytes),
                format_bytes(a.unique_write_bytes)
            ),
        ),
        (
            "unique bytes",
            format!(
                "{} ({} pages of {})",
                format_bytes(a.unique_bytes),
                a.pages.unique_pages,
                format_bytes(a.page_bytes)
            ),
        ),
        (
            "device touched",
            match (a.device_touched_fraction, a.device_bytes) {
                (Some(f), Some(d)) => format!("{:.2} % of {}", f * 100.0, format_bytes(d)),
                _ => "unknown (device size not given)".to_string(),
            },
        ),
        (
            "top 20% pages' share of accesses",
            opt_pct(a.top20_access_share),
        ),
        ("partial determinism", opt_pct(a.partial_determinism)),
        ("sequential transitions", opt_pct(a.sequential_fraction)),
        ("reads share of requests", opt_pct(a.read_fraction)),
    ]
}

/// Inter-arrival, idle and burst rows.
pub fn timing_rows(a: &Analysis) -> Vec<(&'static str, String)> {
    let t = &a.timing;
    let ia = &t.interarrival_ns;
    let b = &t.bursts;
    vec![
        ("duration", format_ns(t.duration_ns)),
        (
            "inter-arrival mean / p50 / p95 / p99",
            format!(
                "{} / {} / {} / {}",
                ia.mean.map_or("-".into(), |m| format_ns(m as u64)),
                opt_ns(ia.p50),
                opt_ns(ia.p95),
                opt_ns(ia.p99)
            ),
        ),
        (
            "inter-arrival CV",
            ia.cv.map_or("-".into(), |c| format!("{c:.2}")),
        ),
        (
            "idle periods",
            format!(
                "{} gaps >= {}: {} in all ({}), longest {}",
                t.idle.count,
                format_ns(t.idle.threshold_ns),
                format_ns(t.idle.total_ns),
                opt_pct(t.idle.fraction_of_duration),
                format_ns(t.idle.longest_ns)
            ),
        ),
        (
            "burstiness",
            format!(
                "index of dispersion {} over {} windows of {}; peak {} requests vs mean {}",
                b.index_of_dispersion
                    .map_or("-".into(), |v| format!("{v:.1}")),
                b.windows,
                format_ns(b.window_ns),
                b.peak_per_window,
                b.mean_per_window.map_or("-".into(), |v| format!("{v:.1}"))
            ),
        ),
        (
            "request size mean / p50 / p95 / p99",
            format!(
                "{} / {} / {} / {}",
                a.request_size_bytes
                    .mean
                    .map_or("-".into(), |m| format_bytes(m as u64)),
                a.request_size_bytes.p50.map_or("-".into(), format_bytes),
                a.request_size_bytes.p95.map_or("-".into(), format_bytes),
                a.request_size_bytes.p99.map_or("-".into(), format_bytes)
            ),
        ),
    ]
}

/// `<img>` of one of [`PLOTS`], with its alt text.
fn img(out: &mut String, file: &str) {
    let alt = PLOTS.iter().find(|p| p.0 == file).map_or("plot", |p| p.1);
    let _ = writeln!(out, "<img src=\"{file}\" alt=\"{alt}\">");
}

fn html(a: &Analysis, title: &str) -> String {
    let mut s = String::new();
    let _ = write!(s, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}}table{{border-collapse:collapse;margin:1em 0}}th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}td.n{{text-align:right}}th{{background:#f4f4f4}}img{{max-width:100%;border:1px solid #ddd;margin:.5em 0}}.swatch{{display:inline-block;width:14px;height:14px;border:1px solid #999}}</style></head><body>\n<h1>{t}</h1>\n", t = escape(title));
    advice_section(&mut s, a);
    s.push_str("<h2>Summary (as BORG's workload table)</h2><table>\n");
    for (k, v) in summary_rows(a) {
        row(&mut s, k, &v);
    }
    s.push_str("</table>\n<h2>Page access frequency</h2>\n");
    img(&mut s, RANK_FREQUENCY_SVG);
    heat_map_section(&mut s, a);
    working_sets_section(&mut s, a);
    s.push_str("<h2>Request sizes and timing</h2>\n");
    img(&mut s, REQUEST_SIZES_SVG);
    img(&mut s, SIZE_CDF_SVG);
    img(&mut s, INTERARRIVAL_CDF_SVG);
    img(&mut s, IOPS_SVG);
    s.push_str("<table>");
    for (k, v) in timing_rows(a) {
        row(&mut s, k, &v);
    }
    s.push_str("</table>\n<h2>Where requests go</h2>\n");
    img(&mut s, LBA_TIME_SVG);
    img(&mut s, SEEK_CDF_SVG);
    img(&mut s, SEEK_HISTOGRAM_SVG);
    commands_section(&mut s, a);
    s.push_str("</body></html>\n");
    s
}

fn advice_section(s: &mut String, a: &Analysis) {
    let _ = writeln!(s, "<h2>Advice: {}</h2><ul>", escape(a.advice.summary));
    for r in &a.advice.reasons {
        let _ = writeln!(s, "<li>{}</li>", escape(r));
    }
    s.push_str("</ul><table><tr><th>attribute (the dissertation's table of workload attributes)</th><th>value</th><th>level</th><th>threshold and why</th></tr>\n");
    for at in &a.advice.attributes {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{:?}</td><td>{} — {}</td></tr>",
            at.name,
            at.value.map_or("unknown".into(), |v| format!("{v:.3}")),
            at.level,
            at.threshold,
            escape(at.rule)
        );
    }
    s.push_str("</table>\n");
}

fn heat_map_section(s: &mut String, a: &Analysis) {
    s.push_str("<h2>Heat map</h2>\n<p>Six normalized exponential levels: a touched cell with c accesses is at the smallest level k with c &le; M<sup>k/6</sup>, M the busiest cell's accesses.</p>\n");
    img(s, HEAT_MAP_SVG);
    s.push_str("<p>");
    for (k, (r, g, b)) in LEVEL_COLORS.iter().enumerate() {
        let bound = if k == 0 {
            "untouched".to_string()
        } else {
            format!("&le; {:.0}", a.heat_map.level_bounds[k - 1])
        };
        let _ = write!(s, "<span class=\"swatch\" style=\"background:rgb({r},{g},{b})\"></span> {k}: {bound} &nbsp; ");
    }
    s.push_str("</p>\n");
}

fn working_sets_section(s: &mut String, a: &Analysis) {
    s.push_str("<h2>Working sets</h2>\n");
    img(s, WORKING_SETS_SVG);
    s.push_str("<table><tr><th>interval</th><th>index</th><th>requests</th><th>working set</th><th>overlap</th><th>top-20% overlap</th></tr>\n");
    for (i, w) in a.intervals.iter().enumerate() {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            i + 1,
            w.index,
            w.requests,
            format_bytes(w.pages * a.page_bytes),
            w.overlap,
            w.overlap_top20
        );
    }
    s.push_str("</table>\n");
}

/// Commands listed in the per-command table at most.
const COMMAND_ROWS: usize = 25;

/// Who issued the requests: one row per command (process name), busiest first.
fn commands_section(s: &mut String, a: &Analysis) {
    let rows = &a.figures.commands;
    s.push_str("<h2>Requests per command</h2>\n");
    if rows.len() <= 1 && rows.first().is_none_or(|r| r.command == "-") {
        s.push_str("<p>The trace names no commands (processes).</p>\n");
        return;
    }
    s.push_str("<table><tr><th>command</th><th>requests</th><th>share</th><th>reads</th><th>writes</th><th>read</th><th>written</th></tr>\n");
    for r in rows.iter().take(COMMAND_ROWS) {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1} %</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&r.command),
            r.requests,
            100.0 * r.requests as f64 / a.requests.max(1) as f64,
            r.reads,
            r.writes,
            format_bytes(r.read_bytes),
            format_bytes(r.write_bytes)
        );
    }
    s.push_str("</table>\n");
    if rows.len() > COMMAND_ROWS {
        let _ = writeln!(
            s,
            "<p>... and {} more commands.</p>",
            rows.len() - COMMAND_ROWS
        );
    }
}
