//! The HTML report of an evaluation: SVG plots (plotters) of busy time per phase per
//! policy (seed 000 Figures 6-8), non-sequential fraction and seek distance, hit rate,
//! data moved, planning time, and with a sweep the sensitivity curves of seed 000 §6.5.

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::results::{Evaluation, PolicyResult};

const W: u32 = 720;

/// A bar chart: title, unit, and the figure it plots per policy.
type Bar = (&'static str, &'static str, fn(&PolicyResult) -> f64);
const H: u32 = 340;

/// The whole page.
pub fn render(e: &Evaluation) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>reblock evaluate: {}</h1><p>{} requests; data area {} sectors, BOPT {} pages \
         ({} read cache, {} write buffer) at device sector {}.</p>",
        esc(&e.trace),
        e.requests,
        e.geometry.data_sectors,
        e.geometry.bopt_pages,
        e.geometry.read_cache_pages,
        e.geometry.write_buffer_pages,
        e.geometry.bopt_start_sector
    );
    body.push_str(&table(e));
    let ordered: Vec<(&String, &PolicyResult)> = e
        .policy_order
        .iter()
        .filter_map(|p| e.policies.get_key_value(p))
        .collect();
    body.push_str(&phase_chart(&ordered));
    let names: Vec<String> = ordered.iter().map(|(n, _)| n.to_string()).collect();
    let bars: [Bar; 6] = [
        ("Non-sequential I/Os (normal phases)", "%", |r| {
            100.0 * r.non_sequential_fraction
        }),
        ("Mean seek distance (normal phases)", "cylinders", |r| {
            r.mean_seek_cylinders
        }),
        ("BOPT hit rate (normal phases)", "%", |r| 100.0 * r.hit_rate),
        ("Data moved by reconfiguration", "MiB", |r| {
            r.bytes_moved as f64 / 1048576.0
        }),
        ("Planning CPU time", "s", |r| r.planning_cpu_s),
        ("Normal-phase busy time", "s", |r| r.normal_busy_time_s),
    ];
    for (title, unit, f) in bars {
        let values: Vec<f64> = ordered.iter().map(|(_, r)| f(r)).collect();
        body.push_str(&bar_chart(title, unit, &names, &values));
    }
    body.push_str(&sweep_charts(e));
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>reblock evaluate</title>\
         <style>body{{font-family:sans-serif;max-width:780px;margin:auto}}\
         table{{border-collapse:collapse}}td,th{{padding:2px 8px;text-align:right;\
         border-bottom:1px solid #ccc}}</style></head><body>{body}</body></html>\n"
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn table(e: &Evaluation) -> String {
    let mut t = String::from(
        "<table><tr><th>policy</th><th>busy s</th><th>normal s</th><th>reconfig s</th>\
         <th>vs vanilla</th><th>hit rate</th><th>moved MiB</th><th>non-seq</th><th>seek cyl</th></tr>",
    );
    for p in &e.policy_order {
        let Some(r) = e.policies.get(p) else { continue };
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{:.1}%</td>\
             <td>{:.1}</td><td>{:.1}%</td><td>{:.0}</td></tr>",
            esc(p),
            r.busy_time_s,
            r.normal_busy_time_s,
            r.reconfig_busy_time_s,
            r.normal_busy_vs_vanilla
                .map_or("-".into(), |v| format!("{v:.3}")),
            100.0 * r.hit_rate,
            r.bytes_moved as f64 / 1048576.0,
            100.0 * r.non_sequential_fraction,
            r.mean_seek_cylinders
        );
    }
    t.push_str("</table>");
    t
}

fn phase_chart(ordered: &[(&String, &PolicyResult)]) -> String {
    let Some(longest) = ordered
        .iter()
        .map(|(_, r)| &r.phases)
        .max_by_key(|p| p.len())
    else {
        return String::new();
    };
    let labels: Vec<String> = longest.iter().map(|p| p.name.clone()).collect();
    let series: Vec<(String, Vec<f64>)> = ordered
        .iter()
        .map(|(n, r)| {
            (
                n.to_string(),
                r.phases.iter().map(|p| p.busy_time_s).collect(),
            )
        })
        .collect();
    line_chart("Disk busy time per phase", "busy s", &labels, &series)
}

fn sweep_charts(e: &Evaluation) -> String {
    let mut out = String::new();
    let mut params: Vec<&str> = e.runs.iter().map(|r| r.parameter.as_str()).collect();
    params.dedup();
    for param in params {
        let runs: Vec<_> = e.runs.iter().filter(|r| r.parameter == param).collect();
        let labels: Vec<String> = runs.iter().map(|r| r.value.clone()).collect();
        let series: Vec<(String, Vec<f64>)> = e
            .policy_order
            .iter()
            .map(|p| {
                let ys = runs
                    .iter()
                    .map(|r| r.policies.get(p).map_or(f64::NAN, |x| x.normal_busy_time_s))
                    .collect();
                (p.clone(), ys)
            })
            .collect();
        let title = format!("Sensitivity to {param}: normal-phase busy time");
        out.push_str(&line_chart(&title, "busy s", &labels, &series));
    }
    out
}

fn upper(values: impl Iterator<Item = f64>) -> f64 {
    let m = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if m > 0.0 {
        m * 1.1
    } else {
        1.0
    }
}

fn line_chart(title: &str, unit: &str, labels: &[String], series: &[(String, Vec<f64>)]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let top = upper(series.iter().flat_map(|s| s.1.iter().copied()));
        let n = labels.len().max(1);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)
        else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_labels(n.min(24))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(unit)
            .draw();
        for (k, (name, ys)) in series.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            let pts: Vec<(f64, f64)> = ys
                .iter()
                .enumerate()
                .filter(|(_, y)| y.is_finite())
                .map(|(i, y)| (i as f64, *y))
                .collect();
            if let Ok(a) = chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2))) {
                a.label(name.as_str()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            }
            let _ = chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())));
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw();
        let _ = root.present();
    }
    svg
}

fn bar_chart(title: &str, unit: &str, labels: &[String], values: &[f64]) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let top = upper(values.iter().copied());
        let n = labels.len().max(1);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(format!("{title} ({unit})"), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)
        else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc(unit)
            .draw();
        let _ = chart.draw_series(values.iter().enumerate().map(|(i, v)| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.35, 0.0), (x + 0.35, *v)],
                Palette99::pick(i).filled(),
            )
        }));
        let _ = root.present();
    }
    svg
}
