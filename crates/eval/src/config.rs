//! What one evaluation runs: the policies, the device, the BOPT, when to reconfigure and
//! from which training data (seed 000 §6), and the parsers for the command line's values.
//! Every parse error names the value and says what was expected.

use serde::Serialize;
use thiserror::Error;

/// A bad parameter value, naming the parameter.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{param}: {why}")]
pub struct ParamError {
    pub param: String,
    pub why: String,
}

pub(crate) fn bad(param: &str, why: impl Into<String>) -> ParamError {
    ParamError {
        param: param.to_string(),
        why: why.into(),
    }
}

/// When the normal phases end (seed 000 §6: "4 reconfigurations equally spaced in time").
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interval {
    /// A fixed span of trace time.
    Every { ns: u64 },
    /// This many reconfigurations, equally spaced over the trace's duration.
    Count { reconfigurations: u32 },
}

impl Interval {
    /// `1d`, `6h`, `30m`, `90s`, `500ms`, or a bare count of reconfigurations (`4`).
    pub fn parse(s: &str) -> Result<Interval, ParamError> {
        let s = s.trim();
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            let n: u32 = s.parse().map_err(|_| bad("interval", "count too large"))?;
            return Ok(Interval::Count {
                reconfigurations: n,
            });
        }
        parse_duration_ns(s)
            .map(|ns| Interval::Every { ns })
            .map_err(|why| bad("interval", why))
    }

    /// The span of trace time between reconfigurations for a trace spanning `span_ns`.
    pub fn span_ns(&self, trace_span_ns: u64) -> u64 {
        match *self {
            Interval::Every { ns } => ns,
            Interval::Count { reconfigurations } => {
                (trace_span_ns / (u64::from(reconfigurations) + 1)).max(1)
            }
        }
    }
}

/// `1.5h`, `90s`, `500ms`, `2d`, `10us`: a positive duration in nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let expected = "expected a duration like 1d, 6h, 30m, 90s, 500ms or a count like 4";
    let value: f64 = num.parse().map_err(|_| format!("`{s}`: {expected}"))?;
    let ns_per = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        _ => return Err(format!("`{s}`: unknown unit `{unit}`; {expected}")),
    };
    let ns = value * ns_per;
    if !(1.0..1.8e19).contains(&ns) {
        return Err(format!("`{s}`: must be positive and below 500 years"));
    }
    Ok(ns as u64)
}

/// Which requests train each plan (seed 000 §6.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Training {
    /// Everything since the start of the trace.
    Cumulative,
    /// Only the normal phase that just ended.
    Partial,
}

impl Training {
    pub fn parse(s: &str) -> Result<Training, ParamError> {
        match s.trim() {
            "cumulative" => Ok(Training::Cumulative),
            "partial" => Ok(Training::Partial),
            other => Err(bad(
                "training",
                format!("`{other}`: expected cumulative or partial"),
            )),
        }
    }
}

/// What ends a normal phase, beyond the seeds' fixed interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// With a count `--interval`, after the first session that repeats what came before
    /// it, then at the longest idle gaps, when the trace has such a session (see
    /// [`crate::boundaries`]); else as [`Trigger::Interval`].
    Auto,
    /// Every interval (seed 000 §6).
    Interval,
    /// At the first gap of at least `gap_ns` between arrivals once half an interval has
    /// passed: reconfigure while the disk is idle (seed 000 §6 names idle periods as the
    /// better choice it did not make).
    Idle { gap_ns: u64 },
    /// When the BOPT hit rate of a window of requests falls `drop` (absolute, 0..1)
    /// below that of the phase's first window: the working set moved. The first phase
    /// (empty BOPT) ends at the interval.
    HitRate { drop: f64 },
}

impl Trigger {
    /// `auto`, `interval`, `idle:SECS`, `hit-rate:DROP`.
    pub fn parse(s: &str) -> Result<Trigger, ParamError> {
        let s = s.trim();
        let expected = "expected auto, interval, idle:SECS or hit-rate:DROP";
        match s.split_once(':') {
            None if s == "auto" => Ok(Trigger::Auto),
            None if s == "interval" => Ok(Trigger::Interval),
            Some(("idle", secs)) => {
                let v: f64 = secs
                    .parse()
                    .map_err(|_| bad("trigger", format!("idle:`{secs}` is not a number")))?;
                if !(v > 0.0 && v.is_finite()) {
                    return Err(bad("trigger", format!("idle:{secs}: must be positive")));
                }
                Ok(Trigger::Idle {
                    gap_ns: (v * 1e9) as u64,
                })
            }
            Some(("hit-rate", d)) => {
                let v: f64 = d
                    .parse()
                    .map_err(|_| bad("trigger", format!("hit-rate:`{d}` is not a number")))?;
                if !(v > 0.0 && v < 1.0) {
                    return Err(bad("trigger", format!("hit-rate:{d}: must be in (0, 1)")));
                }
                Ok(Trigger::HitRate { drop: v })
            }
            _ => Err(bad("trigger", format!("`{s}`: {expected}"))),
        }
    }
}

/// Where the BOPT sits on the device (seed 002 §4 favours the middle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoptAt {
    /// Where the expected seek to it is least: at the median of the requests' addresses
    /// (the point that minimizes the mean distance to them), not the middle of the disk.
    Auto,
    Start,
    Middle,
    End,
    /// Before this FS sector (rounded down to a page).
    Sector(u64),
}

impl BoptAt {
    pub fn parse(s: &str) -> Result<BoptAt, ParamError> {
        match s.trim() {
            "auto" => Ok(BoptAt::Auto),
            "start" => Ok(BoptAt::Start),
            "middle" => Ok(BoptAt::Middle),
            "end" => Ok(BoptAt::End),
            other => other.parse().map(BoptAt::Sector).map_err(|_| {
                bad(
                    "bopt-at",
                    format!("`{other}`: expected auto, start, middle, end or an LBA (sector)"),
                )
            }),
        }
    }
}

/// How large the BOPT is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoptSize {
    /// Sized from the working set worth placing: the pages the trace reads more than
    /// once, plus the write buffer's share (see `workload::auto_bopt_bytes`).
    Auto,
    Bytes(u64),
}

impl BoptSize {
    /// `auto` or a size (`64MiB`, `1G`, ...).
    pub fn parse(s: &str) -> Result<BoptSize, ParamError> {
        match s.trim() {
            "auto" => Ok(BoptSize::Auto),
            other => parse_size_bytes("bopt-size", other).map(BoptSize::Bytes),
        }
    }
}

/// How large the data area is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataArea {
    /// The device's capacity minus the BOPT: the file system fills the disk.
    Device,
    /// The trace's address range (its highest end, page aligned): a disk just large
    /// enough for the data, so the BOPT sits close to it.
    Trace,
    /// A given number of sectors (page aligned up): the traced device's size from the
    /// trace's metadata, or `--data-area SIZE`.
    Sectors(u64),
}

impl DataArea {
    pub fn parse(s: &str) -> Result<DataArea, ParamError> {
        match s.trim() {
            "device" => Ok(DataArea::Device),
            "trace" => Ok(DataArea::Trace),
            other => parse_size_bytes("data-area", other)
                .map(|bytes| DataArea::Sectors(bytes.div_ceil(512)))
                .map_err(|_| {
                    bad(
                        "data-area",
                        format!("`{other}`: expected device, trace or a size (8G, 500MiB)"),
                    )
                }),
        }
    }
}

/// `64MiB`, `1G`, `512k`, `4096` (bytes): a size in bytes. Suffixes are binary.
pub fn parse_size_bytes(param: &str, s: &str) -> Result<u64, ParamError> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        bad(
            param,
            format!("`{s}`: expected a size like 64MiB, 1G, 512k or a byte count"),
        )
    })?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad(param, format!("`{s}`: unknown unit `{unit}`"))),
    };
    let bytes = value * mult as f64;
    if !(1.0..1.8e19).contains(&bytes) {
        return Err(bad(param, format!("`{s}`: must be positive")));
    }
    Ok(bytes as u64)
}

/// A fraction in [0, 1].
pub fn parse_fraction(param: &str, s: &str) -> Result<f64, ParamError> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| bad(param, format!("`{s}`: expected a fraction between 0 and 1")))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(bad(param, format!("`{s}`: must be between 0 and 1")));
    }
    Ok(v)
}

/// Everything one evaluation needs besides the trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalConfig {
    pub policies: Vec<String>,
    /// Device spec as `reblock_device::parse_spec` reads it.
    pub device: String,
    pub bopt_at: BoptAt,
    pub bopt_size: BoptSize,
    pub write_buffer_fraction: f64,
    pub interval: Interval,
    pub training: Training,
    /// Plans learn from a decayed learning state instead of `training`: each boundary's
    /// phase counts 1, the one before this factor, the one before that its square...
    /// (1: everything, as cumulative training; 0: the last phase only, as partial).
    pub learning_decay: Option<f64>,
    pub trigger: Trigger,
    /// Normal phases replay at trace time divided by this (seed 000 §6.1: 168);
    /// reconfiguration copies always at 1x.
    pub speed: f64,
    /// The degradation guard (seed 001 §5.2.2).
    pub guard: bool,
    /// Requests per guard epoch: the guard decides the mode once per epoch.
    pub guard_epoch_requests: usize,
    pub page_sectors: u32,
    pub min_edge_weight: u64,
    pub data_area: DataArea,
    /// Fold addresses past the data area back into it.
    pub wrap: bool,
    /// Which data-area pages FS2's replicas may use.
    pub free_space: crate::free::FreeSpace,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            policies: ["vanilla", "hot", "borg", "dlr-seq", "dlr-frag"]
                .map(String::from)
                .to_vec(),
            device: "hdd:barracuda".into(),
            bopt_at: BoptAt::Auto,
            bopt_size: BoptSize::Auto,
            // Seed 000 §6.1.1 gives the write buffer 0.2 of a fixed 64 MiB BOPT. The region
            // is now sized from the read working set, and a fifth of it absorbed more
            // writes than paid on hdd:wd2500aaks: total busy over vanilla's with 0.2 / 0.1:
            // dev_kernel 1.004 / 0.995, hm_0 0.838 / 0.918 (borg), rsrch_1 0.903 / 0.911.
            write_buffer_fraction: 0.1,
            interval: Interval::Count {
                reconfigurations: 4,
            },
            training: Training::Cumulative,
            learning_decay: None,
            trigger: Trigger::Auto,
            speed: 168.0,
            guard: true,
            guard_epoch_requests: 500,
            page_sectors: 8,
            // As `reblock evaluate`: transitions seen once are mostly noise on real traces.
            min_edge_weight: 2,
            data_area: DataArea::Device,
            wrap: false,
            free_space: crate::free::FreeSpace::Untouched,
        }
    }
}

impl EvalConfig {
    /// Checks the values that have no parser of their own.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.policies.is_empty() {
            return Err(bad("policies", "name at least one policy"));
        }
        for p in &self.policies {
            reblock_plan::by_name(p).map_err(|e| bad("policies", e.to_string()))?;
        }
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return Err(bad("speed", format!("{}: must be positive", self.speed)));
        }
        if self.page_sectors == 0 {
            return Err(bad("page-size", "must be at least 512 bytes"));
        }
        if self.guard_epoch_requests == 0 {
            return Err(bad("guard-epoch", "must be at least 1 request"));
        }
        if let Some(d) = self.learning_decay {
            if !(0.0..=1.0).contains(&d) {
                let why = format!("{d}: must be within 0 (forget each phase) and 1 (keep all)");
                return Err(bad("learning-decay", why));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_and_errors_name_the_parameter() {
        assert_eq!(
            Interval::parse("6h").unwrap(),
            Interval::Every {
                ns: 6 * 3600 * 1_000_000_000
            }
        );
        assert_eq!(
            Interval::parse("4").unwrap(),
            Interval::Count {
                reconfigurations: 4
            }
        );
        assert!(Interval::parse("6x")
            .unwrap_err()
            .to_string()
            .starts_with("interval: "));
        assert_eq!(parse_size_bytes("bopt-size", "64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size_bytes("bopt-size", "1g").unwrap(), 1 << 30);
        assert!(parse_size_bytes("bopt-size", "12 parsecs").is_err());
        assert_eq!(
            Trigger::parse("idle:2.5").unwrap(),
            Trigger::Idle {
                gap_ns: 2_500_000_000
            }
        );
        assert_eq!(
            Trigger::parse("hit-rate:0.2").unwrap(),
            Trigger::HitRate { drop: 0.2 }
        );
        assert!(Trigger::parse("hit-rate:2").is_err());
        assert_eq!(BoptAt::parse("4096").unwrap(), BoptAt::Sector(4096));
        assert_eq!(BoptAt::parse("auto").unwrap(), BoptAt::Auto);
        assert_eq!(BoptSize::parse("auto").unwrap(), BoptSize::Auto);
        assert_eq!(BoptSize::parse("2M").unwrap(), BoptSize::Bytes(2 << 20));
        assert!(BoptSize::parse("big")
            .unwrap_err()
            .to_string()
            .starts_with("bopt-size: "));
        assert!(parse_fraction("write-buffer", "1.5").is_err());
        // 4 reconfigurations over 10 s: 5 phases of 2 s.
        assert_eq!(
            Interval::Count {
                reconfigurations: 4
            }
            .span_ns(10_000_000_000),
            2_000_000_000
        );
    }
}
