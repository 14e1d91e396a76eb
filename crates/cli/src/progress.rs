//! Progress on stderr for long work. On a terminal: a live bar (indicatif). Anywhere else
//! (a log file, a pipe, `TERM=dumb`): one plain line every few seconds with the count, the
//! percent done, the rate and the time left, and never an escape code, so that logs stay
//! readable. `REBLOCK_PROGRESS_SECS` sets the seconds between plain lines (default 5; 0
//! turns them off).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Seconds between plain progress lines when `REBLOCK_PROGRESS_SECS` is not set.
const DEFAULT_PLAIN_SECS: f64 = 5.0;

/// The share of the work done, when something other than the count knows it (the bytes
/// of the input file consumed).
pub type Fraction = Box<dyn Fn() -> Option<f64>>;

enum View {
    Bar(ProgressBar),
    Plain {
        start: Instant,
        last: Instant,
        every: Duration,
    },
    Hidden,
}

pub struct Progress {
    what: String,
    unit: &'static str,
    total: Option<u64>,
    pos: u64,
    message: String,
    fraction: Option<Fraction>,
    view: View,
}

/// True when stderr is a terminal that understands cursor movement.
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// True when colour may be written to stderr: a terminal, and `NO_COLOR` unset or empty.
pub fn stderr_wants_colour() -> bool {
    stderr_is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn plain_every() -> Option<Duration> {
    let secs = match std::env::var("REBLOCK_PROGRESS_SECS") {
        Ok(v) => v.trim().parse::<f64>().unwrap_or(DEFAULT_PLAIN_SECS),
        Err(_) => DEFAULT_PLAIN_SECS,
    };
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

impl Progress {
    /// Progress of `what` ("analyzing") counted in `unit` ("requests"), out of `total`
    /// when it is known.
    pub fn new(what: &str, unit: &'static str, total: Option<u64>) -> Progress {
        let view = if stderr_is_terminal() {
            View::Bar(bar(what, unit, total))
        } else {
            match plain_every() {
                Some(every) => {
                    let now = Instant::now();
                    View::Plain {
                        start: now,
                        last: now,
                        every,
                    }
                }
                None => View::Hidden,
            }
        };
        Progress {
            what: what.to_string(),
            unit,
            total,
            pos: 0,
            message: String::new(),
            fraction: None,
            view,
        }
    }

    /// Takes the share done from `f` instead of the count over the total.
    pub fn with_fraction(mut self, f: Fraction) -> Progress {
        self.fraction = Some(f);
        self
    }

    pub fn set_position(&mut self, pos: u64) {
        self.pos = pos;
        self.tick();
    }

    pub fn inc(&mut self, n: u64) {
        self.set_position(self.pos + n);
    }

    /// The total grew (work found along the way).
    pub fn inc_length(&mut self, n: u64) {
        self.total = Some(self.total.unwrap_or(0) + n);
        if let View::Bar(b) = &self.view {
            b.inc_length(n);
        }
    }

    pub fn position(&self) -> u64 {
        self.pos
    }

    pub fn length(&self) -> Option<u64> {
        self.total
    }

    pub fn set_message(&mut self, message: String) {
        self.message = message;
        if let View::Bar(b) = &self.view {
            b.set_message(self.message.clone());
        }
    }

    /// Clears the bar; plain lines need no cleaning up.
    pub fn finish(self) {
        if let View::Bar(b) = &self.view {
            b.finish_and_clear();
        }
    }

    fn done_fraction(&self) -> Option<f64> {
        match &self.fraction {
            Some(f) => f(),
            None => self
                .total
                .filter(|&t| t > 0)
                .map(|t| self.pos as f64 / t as f64),
        }
        .map(|f| f.clamp(0.0, 1.0))
    }

    fn tick(&mut self) {
        match &mut self.view {
            View::Bar(b) => {
                b.set_position(self.pos);
                if let Some(f) = self.fraction.as_ref().and_then(|f| f()) {
                    b.set_message(format!("{:.0} % {}", 100.0 * f, self.message));
                }
            }
            View::Plain { start, last, every } => {
                let now = Instant::now();
                if now.duration_since(*last) < *every {
                    return;
                }
                *last = now;
                let elapsed = now.duration_since(*start).as_secs_f64();
                let line = plain_line(self, elapsed);
                eprintln!("{line}");
            }
            View::Hidden => {}
        }
    }
}

/// `reblock: analyzing: 1200000 requests, 45.0 %, 240000 requests/s, ETA 12 s`.
fn plain_line(p: &Progress, elapsed_s: f64) -> String {
    let mut line = format!("reblock: {}: {} {}", p.what, p.pos, p.unit);
    if let Some(t) = p.total.filter(|_| p.fraction.is_none()) {
        line.push_str(&format!(" of {t}"));
    }
    let fraction = p.done_fraction();
    if let Some(f) = fraction {
        line.push_str(&format!(", {:.1} %", 100.0 * f));
    }
    if elapsed_s > 0.0 {
        line.push_str(&format!(", {:.0} {}/s", p.pos as f64 / elapsed_s, p.unit));
    }
    if let Some(f) = fraction.filter(|&f| f > 0.0) {
        line.push_str(&format!(", ETA {}", eta(elapsed_s * (1.0 - f) / f)));
    }
    if !p.message.is_empty() {
        line.push_str(&format!(" ({})", p.message));
    }
    line
}

/// `42 s`, `3 min 5 s`, `2 h 10 min`.
fn eta(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

fn bar(what: &str, unit: &str, total: Option<u64>) -> ProgressBar {
    let (bar, template) = match total {
        Some(t) => (
            ProgressBar::new(t),
            format!("{what} {{bar:30}} {{pos}}/{{len}} {unit} (ETA {{eta}})  {{msg}}"),
        ),
        None => (
            ProgressBar::new_spinner(),
            format!("{{spinner}} {what}: {{human_pos}} {unit} ({{per_sec}})  {{msg}}"),
        ),
    };
    bar.set_style(ProgressStyle::with_template(&template).expect("valid template"));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(total: Option<u64>, pos: u64) -> Progress {
        Progress {
            what: "analyzing".into(),
            unit: "requests",
            total,
            pos,
            message: String::new(),
            fraction: None,
            view: View::Hidden,
        }
    }

    #[test]
    fn plain_line_has_percent_rate_and_eta() {
        let line = plain_line(&plain(Some(1000), 250), 10.0);
        assert_eq!(
            line,
            "reblock: analyzing: 250 requests of 1000, 25.0 %, 25 requests/s, ETA 30 s"
        );
        assert!(!line.contains('\x1b'));
    }

    #[test]
    fn plain_line_without_total_has_the_rate_only() {
        let line = plain_line(&plain(None, 500), 2.0);
        assert_eq!(line, "reblock: analyzing: 500 requests, 250 requests/s");
    }

    #[test]
    fn eta_reads_in_minutes_and_hours() {
        assert_eq!(eta(42.2), "42 s");
        assert_eq!(eta(185.0), "3 min 5 s");
        assert_eq!(eta(7800.0), "2 h 10 min");
    }
}
