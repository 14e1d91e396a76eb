//! The `--report DIR` output: `index.html` with the tables, `io_time.svg` (I/O time per
//! query and layout on a log scale, as the chapter's Figure 2.8) and `access_mix.svg`
//! (the share of each access type a1-a5 per query and layout, as its Table 2.6). Plots
//! use plotters' SVG backend like the trace report does.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::TreeError;
use crate::study::{Study, LAYOUTS};

pub const IO_TIME_SVG: &str = "io_time.svg";
pub const ACCESS_MIX_SVG: &str = "access_mix.svg";
const FONT: &str = "sans-serif";
const LAYOUT_COLOURS: [RGBColor; LAYOUTS.len()] = [
    RGBColor(90, 90, 90),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];
const TYPE_COLOURS: [RGBColor; 5] = [
    RGBColor(27, 158, 119),
    RGBColor(217, 95, 2),
    RGBColor(117, 112, 179),
    RGBColor(231, 41, 138),
    RGBColor(160, 160, 160),
];

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn plot_err(path: &Path) -> impl Fn(String) -> TreeError + '_ {
    move |message| TreeError::Report {
        path: path.to_path_buf(),
        message,
    }
}

fn canvas(path: &Path, width: u32) -> Result<Area<'_>, TreeError> {
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    root.fill(&WHITE)
        .map_err(|e| plot_err(path)(e.to_string()))?;
    Ok(root)
}

/// Query labels: the short name when there is one.
fn labels(study: &Study) -> Vec<String> {
    study
        .layouts
        .default
        .queries
        .iter()
        .map(|q| q.name.clone())
        .collect()
}

/// Writes the report into `dir`; returns the index's path.
pub fn write(dir: &Path, study: &Study) -> Result<PathBuf, TreeError> {
    std::fs::create_dir_all(dir).map_err(|source| TreeError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    io_time(&dir.join(IO_TIME_SVG), study)?;
    access_mix(&dir.join(ACCESS_MIX_SVG), study)?;
    let index = dir.join("index.html");
    std::fs::write(&index, html(study)).map_err(|source| TreeError::Io {
        path: index.clone(),
        source,
    })?;
    Ok(index)
}

/// One labelled series of bars: (label, colour, rectangles as corner pairs).
type Bars = (String, RGBColor, Vec<[(f64, f64); 2]>);

/// A bar chart over the queries: x is the query index, `y` the value axis.
fn bar_chart<Y>(
    path: &Path,
    caption: &str,
    names: &[String],
    y: Y,
    y_desc: &str,
    series: Vec<Bars>,
) -> Result<(), TreeError>
where
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let err = plot_err(path);
    let n = names.len().max(1);
    let root = canvas(path, (160 + 70 * n as u32).max(640))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, (FONT, 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n as f64, y)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| names.get(x.floor() as usize).cloned().unwrap_or_default())
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (label, colour, rects) in series {
        chart
            .draw_series(
                rects
                    .into_iter()
                    .map(|r| Rectangle::new(r, colour.filled())),
            )
            .map_err(|e| err(e.to_string()))?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Width of one layout's bar in a query's group of bars.
const BAR: f64 = 0.8 / LAYOUTS.len() as f64;

fn bar_x(query: usize, layout: usize) -> f64 {
    query as f64 + 0.1 + layout as f64 * BAR
}

fn io_time(path: &Path, study: &Study) -> Result<(), TreeError> {
    let times: Vec<f64> = study
        .layouts
        .iter()
        .iter()
        .flat_map(|(_, l)| l.queries.iter().map(|q| q.io_time_ms))
        .filter(|t| *t > 0.0)
        .collect();
    let lo = times.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) / 2.0;
    let hi = times.iter().copied().fold(1.0, f64::max) * 2.0;
    let series = study
        .layouts
        .iter()
        .into_iter()
        .enumerate()
        .map(|(j, (key, layout))| {
            let rects = layout.queries.iter().enumerate().map(|(i, q)| {
                let x0 = bar_x(i, j);
                [(x0, lo), (x0 + BAR * 0.9, q.io_time_ms.max(lo))]
            });
            (key.to_string(), LAYOUT_COLOURS[j], rects.collect())
        })
        .collect();
    let caption = "I/O time per query and layout (ms, log scale)";
    bar_chart(
        path,
        caption,
        &labels(study),
        (lo..hi).log_scale(),
        "ms",
        series,
    )
}

fn access_mix(path: &Path, study: &Study) -> Result<(), TreeError> {
    let mut series: Vec<Bars> = TYPE_COLOURS
        .iter()
        .enumerate()
        .map(|(t, c)| (format!("a{}", t + 1), *c, Vec::new()))
        .collect();
    for (j, (_, layout)) in study.layouts.iter().into_iter().enumerate() {
        for (i, q) in layout.queries.iter().enumerate() {
            let total = q.accesses.total().max(1) as f64;
            let x0 = bar_x(i, j);
            let mut y = 0.0;
            for (t, c) in q.accesses.as_array().iter().enumerate() {
                let h = *c as f64 / total;
                series[t].2.push([(x0, y), (x0 + BAR * 0.9, y + h)]);
                y += h;
            }
        }
    }
    let keys: Vec<&str> = LAYOUTS.iter().map(|(key, _, _)| *key).collect();
    let caption = format!("Access types per query (bars: {})", keys.join(", "));
    bar_chart(
        path,
        &caption,
        &labels(study),
        0f64..1f64,
        "share of reads",
        series,
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn html(study: &Study) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><meta charset=utf-8><title>Tree layouts: {0}</title><h1>Tree layouts of {0} on {1}</h1>",
        escape(&study.document.name),
        escape(&study.device)
    );
    let _ = write!(
        s,
        "<p>{} nodes, {} bytes, height {}, block {} bytes. Analytic model (equal access mix): T_default {:.3} ms, T_tree {:.3} ms.</p>",
        study.document.nodes, study.document.bytes, study.document.height, study.block_size,
        study.model.t_default, study.model.t_tree
    );
    s.push_str("<h2>Groupings</h2><table border=1><tr><th>grouping<th>supernodes<th>nodes per supernode<th>internal fragmentation");
    for (name, g) in study.groupings.iter() {
        let _ = write!(
            s,
            "<tr><td>{name}<td>{}<td>{:.2}<td>{:.1}%",
            g.supernodes,
            g.nodes_per_supernode,
            g.internal_fragmentation * 100.0
        );
    }
    s.push_str("</table><h2>I/O time per query (ms)</h2><table border=1><tr><th>query");
    for (key, l) in study.layouts.iter() {
        let _ = write!(
            s,
            "<th>{key} ({:.1}% external fragmentation)",
            l.external_fragmentation * 100.0
        );
    }
    for (i, q) in study.layouts.default.queries.iter().enumerate() {
        let _ = write!(
            s,
            "<tr><td>{} <code>{}</code>",
            escape(&q.name),
            escape(&q.query)
        );
        for (_, l) in study.layouts.iter() {
            match l.queries.get(i) {
                Some(r) => {
                    let _ = write!(s, "<td>{:.2}", r.io_time_ms);
                }
                None => s.push_str("<td>-"),
            }
        }
    }
    let _ = write!(
        s,
        "</table><p><img src=\"{IO_TIME_SVG}\"></p><p><img src=\"{ACCESS_MIX_SVG}\"></p>"
    );
    s
}
