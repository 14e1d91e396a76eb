//! The HTML report of an evaluation: SVG plots (plotters) of busy time per phase per
//! policy (as BORG's evaluation figures show it), response-time CDFs and percentiles per
//! policy, non-sequential fraction and seek distance, hit rate, data moved, planning time,
//! and with a sweep the sensitivity charts. Palette, legends and titles are the analysis
//! report's (`reblock_analyze::chart`), so both reports read alike.

use std::fmt::Write as _;
use std::io;

use plotters::prelude::*;
use reblock_analyze::chart::{
    cdf_svg, colour, escape as esc, legend_strip, log_range, plot_err, render as svg,
    spans_decades, CdfSeries, FONT,
};
use reblock_analyze::report::category;

use crate::results::{Evaluation, PolicyResult};

const W: u32 = 720;
const H: u32 = 360;

/// A bar chart: title, unit, and the figure it plots per policy.
type Bar = (&'static str, &'static str, fn(&PolicyResult) -> f64);

/// One series of a grouped bar chart: its name and one value per category.
type Series = (String, Vec<f64>);

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
    body.push_str(&response_cdf(&ordered));
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
         <style>body{{font-family:sans-serif;max-width:800px;margin:auto}}\
         table{{border-collapse:collapse}}td,th{{padding:2px 8px;text-align:right;\
         border-bottom:1px solid #ccc}}svg{{display:block;margin:1em 0}}</style></head>\
         <body>{body}</body></html>\n"
    )
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

fn table(e: &Evaluation) -> String {
    let mut t = String::from(
        "<table><tr><th>policy</th><th>total vs vanilla</th><th>busy s</th><th>normal s</th>\
         <th>reconfig s</th><th>normal vs vanilla</th><th>hit rate</th><th>moved MiB</th><th>non-seq</th><th>seek cyl</th>\
         <th>resp p50 ms</th><th>p95 ms</th><th>p99 ms</th></tr>",
    );
    for p in &e.policy_order {
        let Some(r) = e.policies.get(p) else { continue };
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td>\
             <td>{:.1}%</td>\
             <td>{:.1}</td><td>{:.1}%</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(p),
            ratio(r.busy_vs_vanilla),
            r.busy_time_s,
            r.normal_busy_time_s,
            r.reconfig_busy_time_s,
            ratio(r.normal_busy_vs_vanilla),
            100.0 * r.hit_rate,
            r.bytes_moved as f64 / 1048576.0,
            100.0 * r.non_sequential_fraction,
            r.mean_seek_cylinders,
            ms(r.response.p50_ms),
            ms(r.response.p95_ms),
            ms(r.response.p99_ms)
        );
    }
    t.push_str("</table>");
    t.push_str(&response_note(e));
    t
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// Response times are measured at the replay's speed-up; sped up, a burst's requests
/// wait for each other, so the response is mostly queueing (a start-up capture at 168x:
/// seconds, against milliseconds at 1x) and busy time is the figure to compare.
fn response_note(e: &Evaluation) -> String {
    let speed = e
        .config
        .get("speed")
        .and_then(|v| v.as_f64())
        .unwrap_or(1.0);
    if speed <= 1.0 {
        return String::new();
    }
    format!(
        "<p>Total = busy time of the normal phases plus the reconfiguration copies. \
         Response times are measured with the trace replayed {speed}x faster than \
         recorded: requests that arrived apart now queue behind each other, so at this \
         speed-up the response is mostly queueing; run with --speed 1 for the response \
         times the workload would see.</p>"
    )
}

/// Busy time per phase as grouped bars (N and R phases are categories, not a series to
/// join with a line: reconfiguration phases hold only the copies).
fn phase_chart(ordered: &[(&String, &PolicyResult)]) -> String {
    let Some(longest) = ordered
        .iter()
        .map(|(_, r)| &r.phases)
        .max_by_key(|p| p.len())
    else {
        return String::new();
    };
    let labels: Vec<String> = longest.iter().map(|p| p.name.clone()).collect();
    let series: Vec<Series> = ordered
        .iter()
        .map(|(n, r)| {
            (
                n.to_string(),
                r.phases.iter().map(|p| p.busy_time_s).collect(),
            )
        })
        .collect();
    grouped_bars(
        "Disk busy time per phase (N: normal, R: reconfiguration)",
        "busy s",
        &labels,
        &series,
    )
}

/// Response-time CDFs of the normal phases, one line per policy.
fn response_cdf(ordered: &[(&String, &PolicyResult)]) -> String {
    let series: Vec<CdfSeries> = ordered
        .iter()
        .filter(|(_, r)| !r.response.cdf_ms.is_empty())
        .map(|(n, r)| (n.to_string(), r.response.cdf_ms.clone()))
        .collect();
    if series.is_empty() {
        return String::new();
    }
    cdf_svg(
        "Response times of the workload's requests (CDF, normal phases)",
        "response time (log scale)",
        &series,
        &|v| {
            if v < 1.0 {
                format!("{:.0} us", v * 1000.0)
            } else {
                format!("{v:.0} ms")
            }
        },
    )
    .unwrap_or_default()
}

fn sweep_charts(e: &Evaluation) -> String {
    let mut out = String::new();
    let mut params: Vec<&str> = e.runs.iter().map(|r| r.parameter.as_str()).collect();
    params.dedup();
    for param in params {
        let runs: Vec<_> = e.runs.iter().filter(|r| r.parameter == param).collect();
        let labels: Vec<String> = runs.iter().map(|r| r.value.clone()).collect();
        let series: Vec<Series> = e
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
        out.push_str(&grouped_bars(&title, "busy s", &labels, &series));
    }
    out
}

/// A value axis: linear from 0, or log10 of the value when the values span decades
/// (bars then start at the axis floor). `to_y` maps a value onto it.
struct ValueAxis {
    log: bool,
    y0: f64,
    y1: f64,
    floor: f64,
}

impl ValueAxis {
    fn new(values: impl Iterator<Item = f64> + Clone) -> ValueAxis {
        let finite = values.filter(|v| v.is_finite());
        if spans_decades(finite.clone()) {
            let (lo, hi) = log_range(finite);
            return ValueAxis {
                log: true,
                y0: lo.log10(),
                y1: hi.log10(),
                floor: lo,
            };
        }
        let m = finite.fold(0.0, f64::max);
        ValueAxis {
            log: false,
            y0: 0.0,
            y1: if m > 0.0 { m * 1.1 } else { 1.0 },
            floor: 0.0,
        }
    }

    fn to_y(&self, v: f64) -> f64 {
        if self.log {
            v.max(self.floor).log10()
        } else {
            v
        }
    }

    fn label(&self, y: f64) -> String {
        let v = if self.log { 10f64.powf(y) } else { y };
        if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 1.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.3}")
        }
    }
}

/// Bars per category, one per series side by side, legend in its own strip.
fn grouped_bars(title: &str, unit: &str, labels: &[String], series: &[Series]) -> String {
    let draw = |root: &reblock_analyze::chart::Area| -> io::Result<()> {
        let legend: Vec<(String, RGBColor)> = series
            .iter()
            .enumerate()
            .map(|(k, s)| (s.0.clone(), colour(k)))
            .collect();
        let area = legend_strip(root, &legend)?;
        let axis = ValueAxis::new(series.iter().flat_map(|s| s.1.iter().copied()));
        let n = labels.len().max(1);
        let y_desc = if axis.log {
            format!("{unit} (log scale)")
        } else {
            unit.to_string()
        };
        let mut chart = ChartBuilder::on(&area)
            .caption(title, (FONT, 17))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), axis.y0..axis.y1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.min(24))
            .x_label_formatter(&|x| category(labels, *x))
            .y_label_formatter(&|y| axis.label(*y))
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        let width = 0.8 / series.len().max(1) as f64;
        for (k, (_, ys)) in series.iter().enumerate() {
            let bars = ys
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(|(i, &v)| {
                    let x = i as f64 - 0.4 + k as f64 * width;
                    Rectangle::new(
                        [(x, axis.y0), (x + width * 0.9, axis.to_y(v))],
                        colour(k).filled(),
                    )
                });
            chart.draw_series(bars).map_err(plot_err)?;
        }
        Ok(())
    };
    svg(title, (W, H), draw).unwrap_or_default()
}

/// One bar per policy, each in its policy's colour.
fn bar_chart(title: &str, unit: &str, labels: &[String], values: &[f64]) -> String {
    let full = format!("{title} ({unit})");
    let draw = |root: &reblock_analyze::chart::Area| -> io::Result<()> {
        let axis = ValueAxis::new(values.iter().copied());
        let n = labels.len().max(1);
        let mut chart = ChartBuilder::on(root)
            .caption(&full, (FONT, 17))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), axis.y0..axis.y1)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| category(labels, *x))
            .y_label_formatter(&|y| axis.label(*y))
            .y_desc(if axis.log {
                format!("{unit} (log scale)")
            } else {
                unit.to_string()
            })
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        let bars = values.iter().enumerate().map(|(i, v)| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.35, axis.y0), (x + 0.35, axis.to_y(*v))],
                colour(i).filled(),
            )
        });
        chart.draw_series(bars).map_err(plot_err)?;
        Ok(())
    };
    svg(&full, (W, H), draw).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{relate_to_vanilla, GeometrySummary, PolicyResult};
    use std::collections::BTreeMap;

    fn with_busy(normal_s: f64, reconfig_s: f64) -> PolicyResult {
        let mut r = PolicyResult::from_phases(Vec::new());
        r.busy_time_s = normal_s + reconfig_s;
        r.normal_busy_time_s = normal_s;
        r.reconfig_busy_time_s = reconfig_s;
        r
    }

    #[test]
    fn the_table_leads_with_the_total_against_vanilla_and_notes_queueing() {
        let mut policies = BTreeMap::new();
        policies.insert("vanilla".to_string(), with_busy(50.0, 0.0));
        policies.insert("borg".to_string(), with_busy(30.0, 8.0));
        relate_to_vanilla(&mut policies);
        let e = Evaluation {
            trace: "t".into(),
            requests: 1,
            config: serde_json::json!({"speed": 168.0}),
            geometry: GeometrySummary::default(),
            policy_order: vec!["vanilla".into(), "borg".into()],
            policies,
            runs: Vec::new(),
        };
        let t = table(&e);
        assert!(
            t.contains("<th>policy</th><th>total vs vanilla</th>"),
            "{t}"
        );
        // borg: (30 + 8) / 50 first, then its normal phases alone 30 / 50.
        assert!(t.contains("<td>borg</td><td>0.760</td>"), "{t}");
        assert!(t.contains("<td>0.600</td>"), "{t}");
        assert!(t.contains("168x faster"), "{t}");
        let at_1x = Evaluation {
            config: serde_json::json!({"speed": 1.0}),
            ..e
        };
        assert!(!table(&at_1x).contains("faster"));
    }
}
