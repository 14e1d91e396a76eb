//! The per-alpha figures (seed 003 Figures 7-16) and the cost tables (Tables II and III)
//! of an array evaluation, as one HTML page with inline SVG drawn by plotters (SVG
//! `<text>`, no font files needed).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::output::{mean, run_improvements, ArrayEvalOutput};
use crate::Error;

const FONT: &str = "sans-serif";

/// Policies that appear in the output, static first.
fn policy_names(out: &ArrayEvalOutput) -> Vec<String> {
    let mut names: Vec<String> = out
        .runs
        .iter()
        .flat_map(|r| r.policies.keys().cloned())
        .collect();
    names.sort_by_key(|n| (n != "static", n.clone()));
    names.dedup();
    names
}

/// Supports in the output, ascending.
fn supports(out: &ArrayEvalOutput) -> Vec<u32> {
    let mut s: Vec<u32> = out.runs.iter().map(|r| r.support).collect();
    s.sort_unstable();
    s.dedup();
    s
}

/// One row per alpha at `support`: for every optimizing policy, the overall, read and
/// write improvement over static in percent.
pub fn improvement_rows(
    out: &ArrayEvalOutput,
    support: u32,
    policy: &str,
) -> Vec<(f64, [Option<f64>; 3])> {
    out.runs
        .iter()
        .filter(|r| r.support == support)
        .filter_map(|r| Some((r.alpha, run_improvements(r, policy)?)))
        .collect()
}

/// Tables II/III: per support, the mean over alphas of MB moved and overall improvement.
pub fn cost_rows(out: &ArrayEvalOutput, policy: &str) -> Vec<(u32, Option<f64>, Option<f64>)> {
    supports(out)
        .into_iter()
        .map(|s| {
            let runs: Vec<_> = out.runs.iter().filter(|r| r.support == s).collect();
            let mb = mean(
                runs.iter()
                    .map(|r| r.policies.get(policy).map(|p| p.bytes_moved as f64 / 1e6)),
            );
            let perf = mean(
                runs.iter()
                    .map(|r| run_improvements(r, policy).and_then(|i| i[0])),
            );
            (s, mb, perf)
        })
        .collect()
}

fn fmt_pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:+.1}%"))
}

/// A plain-text summary: improvements per alpha, then cost against performance.
pub fn text_summary(out: &ArrayEvalOutput) -> String {
    let mut s = String::new();
    let min_support = supports(out).first().copied().unwrap_or(1);
    for p in policy_names(out).iter().filter(|p| *p != "static") {
        let _ = writeln!(
            s,
            "{} on {} ({} B blocks), support {min_support}: improvement over static",
            p, out.array, out.block_bytes
        );
        let _ = writeln!(s, "  alpha   overall     read    write");
        let rows = improvement_rows(out, min_support, p);
        for (alpha, [o, r, w]) in &rows {
            let _ = writeln!(
                s,
                "  {alpha:4.1} {:>9} {:>8} {:>8}",
                fmt_pct(*o),
                fmt_pct(*r),
                fmt_pct(*w)
            );
        }
        let avg = |k: usize| mean(rows.iter().map(|r| r.1[k]));
        let _ = writeln!(
            s,
            "  mean {:>9} {:>8} {:>8}",
            fmt_pct(avg(0)),
            fmt_pct(avg(1)),
            fmt_pct(avg(2))
        );
        let _ = writeln!(s, "  support  cost(MB)  perf(%)");
        for (sup, mb, perf) in cost_rows(out, p) {
            let mb = mb.map_or("-".into(), |m| format!("{m:.2}"));
            let _ = writeln!(s, "  {sup:7} {mb:>9} {:>8}", fmt_pct(perf));
        }
    }
    s
}

/// Mean response (ms) per alpha for one policy at one support: `which` 0 overall,
/// 1 read, 2 write.
fn series(out: &ArrayEvalOutput, policy: &str, support: u32, which: usize) -> Vec<(f64, f64)> {
    out.runs
        .iter()
        .filter(|r| r.support == support)
        .filter_map(|r| {
            let p = r.policies.get(policy)?;
            let v = match which {
                0 => Some(p.mean_response_ms),
                1 => p.read_mean_response_ms,
                _ => p.write_mean_response_ms,
            }?;
            Some((r.alpha, v))
        })
        .collect()
}

fn plot_err(e: impl std::fmt::Display) -> Error {
    Error::Io(std::io::Error::other(e.to_string()))
}

/// One figure: mean response time against alpha, one line per policy.
fn figure(out: &ArrayEvalOutput, support: u32, which: usize) -> Result<String, Error> {
    let title = ["Overall (R+W)", "Read", "Write"][which];
    let names = policy_names(out);
    let all: Vec<Vec<(f64, f64)>> = names
        .iter()
        .map(|p| series(out, p, support, which))
        .collect();
    let y_max = all.iter().flatten().map(|p| p.1).fold(0.0f64, f64::max) * 1.1 + 1e-6;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (480, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{title}, support {support}"), (FONT, 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0f64..1.0f64, 0.0f64..y_max)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("alpha (Zipf-like skew)")
            .y_desc("mean response (ms)")
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        for (i, (name, pts)) in names.iter().zip(&all).enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))
                .map_err(plot_err)?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour));
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes `dir/parallel.html`: figures per support and the text tables.
pub fn write_html(dir: &Path, out: &ArrayEvalOutput) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir)?;
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title></head><body>\
         <h1>Parallel layout: {t}</h1><p>Array {a}, {b} B blocks, {tr} training and {te} \
         testing requests, {d} distinct pairs.</p>",
        t = escape(&out.trace),
        a = escape(&out.array),
        b = out.block_bytes,
        tr = out.train_requests,
        te = out.test_requests,
        d = out.distinct_pairs
    );
    for s in supports(out) {
        let _ = write!(html, "<h2>Support {s}</h2><div>");
        for which in 0..3 {
            html.push_str(&figure(out, s, which)?);
        }
        html.push_str("</div>");
    }
    let _ = write!(
        html,
        "<h2>Summary</h2><pre>{}</pre></body></html>",
        escape(&text_summary(out))
    );
    let path = dir.join("parallel.html");
    std::fs::write(&path, html)?;
    Ok(path)
}
