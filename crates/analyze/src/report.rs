//! The HTML report: `index.html` with the tables, and beside it one SVG per plot of seed
//! 000 Figure 1 (rank-frequency, heat map, working sets) plus the request-size histogram.
//! The plots use plotters' SVG backend, which writes text as SVG `<text>` and needs no
//! system fonts.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::units::{format_bytes, format_ns};
use crate::Analysis;

pub const RANK_FREQUENCY_SVG: &str = "rank_frequency.svg";
pub const HEAT_MAP_SVG: &str = "heat_map.svg";
pub const WORKING_SETS_SVG: &str = "working_sets.svg";
pub const REQUEST_SIZES_SVG: &str = "request_sizes.svg";

const FONT: &str = "sans-serif";

fn plot_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plot: {e}"))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn canvas(path: &Path, size: (u32, u32)) -> io::Result<Area<'_>> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    Ok(root)
}

/// Writes `dir/index.html` and its plots; returns the index's path.
pub fn write(dir: &Path, a: &Analysis, title: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    rank_frequency(&dir.join(RANK_FREQUENCY_SVG), a)?;
    heat_map(&dir.join(HEAT_MAP_SVG), a)?;
    working_sets(&dir.join(WORKING_SETS_SVG), a)?;
    request_sizes(&dir.join(REQUEST_SIZES_SVG), a)?;
    let index = dir.join("index.html");
    std::fs::write(&index, html(a, title))?;
    Ok(index)
}

fn rank_frequency(path: &Path, a: &Analysis) -> io::Result<()> {
    let root = canvas(path, (720, 460))?;
    let rf = &a.pages.rank_frequency;
    let max_rank = rf.all.last().map_or(1, |p| p.0).max(2);
    let max_count = rf.all.first().map_or(1, |p| p.1).max(2);
    let mut chart = ChartBuilder::on(&root)
        .caption("Page accesses by rank (log-log)", (FONT, 20))
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
        .label_style((FONT, 13))
        .draw()
        .map_err(plot_err)?;
    let series = [
        ("all accesses", &rf.all, BLACK),
        ("reads", &rf.reads, BLUE),
        ("writes", &rf.writes, RED),
    ];
    for (name, points, color) in series {
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)
}

/// Level 0 (untouched) is light grey; 1..=6 run from pale yellow to dark red.
pub const LEVEL_COLORS: [(u8, u8, u8); 7] = [
    (240, 240, 240),
    (255, 245, 200),
    (254, 217, 118),
    (253, 141, 60),
    (240, 59, 32),
    (189, 0, 38),
    (100, 0, 20),
];

fn heat_map(path: &Path, a: &Analysis) -> io::Result<()> {
    let h = &a.heat_map;
    let root = canvas(path, (560, 600))?;
    let span = format_bytes(h.span_pages * a.page_bytes);
    let caption = format!(
        "Device heat map ({} per cell, row-major)",
        format_bytes(h.pages_per_cell * a.page_bytes)
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FONT, 18))
        .margin(12)
        .x_label_area_size(30)
        .build_cartesian_2d(0u64..h.columns, 0u64..h.rows)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_y_axis()
        .x_labels(2)
        .x_label_formatter(&|_| String::new())
        .x_desc(format!(
            "address 0 at top left .. {span} at bottom right{}",
            if h.span_is_device_size {
                " (device size)"
            } else {
                " (highest page seen)"
            }
        ))
        .label_style((FONT, 13))
        .draw()
        .map_err(plot_err)?;
    let cells = h.levels.iter().enumerate().map(|(i, &lvl)| {
        let (col, row) = (i as u64 % h.columns, i as u64 / h.columns);
        let y = h.rows - 1 - row;
        let (r, g, b) = LEVEL_COLORS[lvl as usize];
        Rectangle::new([(col, y), (col + 1, y + 1)], RGBColor(r, g, b).filled())
    });
    chart.draw_series(cells).map_err(plot_err)?;
    root.present().map_err(plot_err)
}

fn working_sets(path: &Path, a: &Analysis) -> io::Result<()> {
    let root = canvas(path, (720, 420))?;
    let n = a.intervals.len().max(2) as u64;
    let mut chart = ChartBuilder::on(&root)
        .caption("Working-set overlap with the first interval", (FONT, 20))
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
        .label_style((FONT, 13))
        .draw()
        .map_err(plot_err)?;
    let lines = [
        ("all pages", &a.working_set_overlap, BLUE),
        ("top 20% pages", &a.working_set_overlap_top20, RED),
    ];
    for (name, values, color) in lines {
        let pts: Vec<(u64, f64)> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as u64, v))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(plot_err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(plot_err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)
}

fn request_sizes(path: &Path, a: &Analysis) -> io::Result<()> {
    let root = canvas(path, (720, 420))?;
    let buckets = &a.request_size_histogram;
    let n = buckets.len().max(1) as u64;
    let max = buckets.iter().map(|b| b.requests).max().unwrap_or(1).max(1);
    let labels: Vec<String> = buckets
        .iter()
        .map(|b| format_bytes(b.lower_bytes))
        .collect();
    let mut chart = ChartBuilder::on(&root)
        .caption("Request sizes", (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0u64..n).into_segmented(), 0u64..max + max / 10 + 1)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("request size (bucket from this size to twice it)")
        .y_desc("requests")
        .x_labels(n as usize)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style((FONT, 12))
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(BLUE.mix(0.7).filled())
                .margin(4)
                .data(
                    buckets
                        .iter()
                        .enumerate()
                        .map(|(i, b)| (i as u64, b.requests)),
                ),
        )
        .map_err(plot_err)?;
    root.present().map_err(plot_err)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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

/// The seed 000 Table 1 rows, plus sequentiality and the read share.
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
            "unique bytes, sector-exact",
            format!(
                "{} of {} requested",
                format_bytes(a.unique_bytes),
                format_bytes(a.total_bytes)
            ),
        ),
        (
            "unique bytes, page-rounded",
            format!(
                "{} ({} pages of {}) of {} in pages touched",
                format_bytes(a.page_rounded.unique_bytes),
                a.pages.unique_pages,
                format_bytes(a.page_bytes),
                format_bytes(a.page_rounded.total_bytes)
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
    let order = match (t.sorted, t.reorder_window_ns) {
        (true, _) => "sorted whole".to_string(),
        (false, Some(w)) => format!("reorder window {}", format_ns(w)),
        (false, None) => "as given".to_string(),
    };
    vec![
        ("duration", format_ns(t.duration_ns)),
        (
            "time order",
            format!(
                "{order}: {} request(s) out of order ({} moved, by up to {})",
                t.out_of_order,
                t.reordered,
                format_ns(t.max_lateness_ns)
            ),
        ),
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

fn html(a: &Analysis, title: &str) -> String {
    let mut s = String::new();
    let _ = write!(s, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}}table{{border-collapse:collapse;margin:1em 0}}th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}th{{background:#f4f4f4}}img{{max-width:100%;border:1px solid #ddd}}.swatch{{display:inline-block;width:14px;height:14px;border:1px solid #999}}</style></head><body>\n<h1>{t}</h1>\n", t = escape(title));
    let _ = writeln!(s, "<h2>Advice: {}</h2><ul>", escape(a.advice.summary));
    for r in &a.advice.reasons {
        let _ = writeln!(s, "<li>{}</li>", escape(r));
    }
    s.push_str("</ul><table><tr><th>attribute (seed 001 Table 4.1)</th><th>value</th><th>level</th><th>threshold and why</th></tr>\n");
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
    s.push_str("</table>\n<h2>Summary (seed 000 Table 1)</h2><table>\n");
    for (k, v) in summary_rows(a) {
        row(&mut s, k, &v);
    }
    s.push_str("</table>\n<h2>Page access frequency</h2>\n");
    let _ = writeln!(
        s,
        "<img src=\"{RANK_FREQUENCY_SVG}\" alt=\"rank-frequency plot\">"
    );
    s.push_str("<h2>Heat map</h2>\n<p>Six normalized exponential levels: a touched cell with c accesses is at the smallest level k with c &le; M<sup>k/6</sup>, M the busiest cell's accesses.</p>\n");
    let _ = writeln!(s, "<img src=\"{HEAT_MAP_SVG}\" alt=\"heat map\"><p>");
    for (k, (r, g, b)) in LEVEL_COLORS.iter().enumerate() {
        let bound = if k == 0 {
            "untouched".to_string()
        } else {
            format!("&le; {:.0}", a.heat_map.level_bounds[k - 1])
        };
        let _ = write!(s, "<span class=\"swatch\" style=\"background:rgb({r},{g},{b})\"></span> {k}: {bound} &nbsp; ");
    }
    s.push_str("</p>\n<h2>Working sets</h2>\n");
    let _ = writeln!(
        s,
        "<img src=\"{WORKING_SETS_SVG}\" alt=\"working-set overlap chart\">"
    );
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
    s.push_str("</table>\n<h2>Request sizes and timing</h2>\n");
    let _ = writeln!(
        s,
        "<img src=\"{REQUEST_SIZES_SVG}\" alt=\"request size histogram\"><table>"
    );
    for (k, v) in timing_rows(a) {
        row(&mut s, k, &v);
    }
    s.push_str("</table>\n</body></html>\n");
    s
}
