//! Chart pieces shared by the analysis report and the evaluation report: a colour-blind
//! safe palette (Okabe and Ito's eight colours), a legend drawn in a strip of its own
//! above the plot (so it never covers data), CDF and line charts on log axes, and the
//! `<title>` every SVG carries. Charts render to strings with plotters' SVG backend, which
//! writes text as SVG `<text>` and needs no system fonts.

use std::io;

use plotters::coord::Shift;
use plotters::prelude::*;

pub const FONT: &str = "sans-serif";

/// Okabe and Ito's palette, black first: distinguishable with every common colour
/// vision deficiency.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 0, 0),
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(204, 121, 167),
    RGBColor(240, 228, 66),
];

/// The `k`-th series colour (the palette repeats after eight).
pub fn colour(k: usize) -> RGBColor {
    PALETTE[k % PALETTE.len()]
}

/// Height of the legend strip above a chart.
pub const LEGEND_PX: u32 = 26;

pub fn plot_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("plot: {e}"))
}

pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Puts `<title>` (what screen readers and browsers' tooltips show) first in the SVG.
pub fn with_title(svg: String, title: &str) -> String {
    let Some(start) = svg.find("<svg") else {
        return svg;
    };
    let Some(end) = svg[start..].find('>') else {
        return svg;
    };
    let at = start + end + 1;
    format!(
        "{}\n<title>{}</title>{}",
        &svg[..at],
        escape(title),
        &svg[at..]
    )
}

/// Renders `draw` onto a white canvas of `size` and returns the SVG with its title.
pub fn render(
    title: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area) -> io::Result<()>,
) -> io::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        draw(&root)?;
        root.present().map_err(plot_err)?;
    }
    Ok(with_title(svg, title))
}

/// Splits off a strip at the top and draws the legend there: a swatch and a name per
/// series, left to right. Returns the area left for the chart.
pub fn legend_strip<'a>(root: &Area<'a>, entries: &[(String, RGBColor)]) -> io::Result<Area<'a>> {
    if entries.is_empty() {
        return Ok(root.clone());
    }
    let (strip, rest) = root.split_vertically(LEGEND_PX);
    let mut x = 60i32;
    for (name, c) in entries {
        strip
            .draw(&Rectangle::new([(x, 8), (x + 18, 20)], c.filled()))
            .map_err(plot_err)?;
        strip
            .draw(&Text::new(name.clone(), (x + 24, 7), (FONT, 13)))
            .map_err(plot_err)?;
        // About 7 px per character at 13 px, plus the swatch and a gap.
        x += 24 + 7 * name.chars().count() as i32 + 22;
    }
    Ok(rest)
}

/// Lower and upper ends of a log axis holding every positive `values`.
pub fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 {
        return (0.1, 10.0);
    }
    (lo / 1.5, hi * 1.5)
}

/// True when positive values span at least two decades: then a log axis shows them.
pub fn spans_decades(values: impl Iterator<Item = f64>) -> bool {
    let (lo, hi) = log_range(values);
    hi / lo >= 100.0 * 2.25
}

/// One CDF series: its name and (value, cumulative fraction) points.
pub type CdfSeries = (String, Vec<(f64, f64)>);

/// CDFs on a log x axis (values formatted by `x_label`), fraction 0..1 on y, drawn as
/// steps so each point reads "this share of values is below this".
pub fn cdf_svg(
    title: &str,
    x_desc: &str,
    series: &[CdfSeries],
    x_label: &dyn Fn(f64) -> String,
) -> io::Result<String> {
    render(title, (720, 440), |root| {
        let names: Vec<(String, RGBColor)> = series
            .iter()
            .enumerate()
            .map(|(k, s)| (s.0.clone(), colour(k)))
            .collect();
        let area = legend_strip(root, &names)?;
        let (lo, hi) = log_range(series.iter().flat_map(|s| s.1.iter().map(|p| p.0)));
        let mut chart = ChartBuilder::on(&area)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(56)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.0)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc("share of requests at or below")
            .x_label_formatter(&|v| x_label(*v))
            .y_label_formatter(&|v| format!("{:.0} %", v * 100.0))
            .label_style((FONT, 12))
            .draw()
            .map_err(plot_err)?;
        for (k, (_, pts)) in series.iter().enumerate() {
            let c = colour(k);
            let mut steps = Vec::with_capacity(pts.len() * 2 + 1);
            let mut prev = 0.0;
            for &(x, y) in pts {
                steps.push((x, prev));
                steps.push((x, y));
                prev = y;
            }
            chart
                .draw_series(LineSeries::new(steps, c.stroke_width(2)))
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_svg_gets_a_title() {
        let svg = cdf_svg(
            "Request sizes <CDF>",
            "bytes",
            &[("all".into(), vec![(512.0, 0.5), (4096.0, 1.0)])],
            &|v| format!("{v}"),
        )
        .unwrap();
        let open = svg.find("<svg").unwrap();
        let title = svg
            .find("<title>Request sizes &lt;CDF&gt;</title>")
            .unwrap();
        assert!(title > open && title < svg.find("<text").unwrap());
    }

    #[test]
    fn decades_decide_log_axes() {
        assert!(spans_decades([1.0, 50_000.0].into_iter()));
        assert!(!spans_decades([10.0, 90.0].into_iter()));
    }
}
