//! The optional `<trace>.meta.json` beside a trace (as the captured traces carry): the
//! device's size in `device_sectors`, the drive's model in `device_model`, a description,
//! and "DAY N START" markers.

use std::path::{Path, PathBuf};

use reblock_trace::SECTOR_BYTES;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sidecar {
    pub path: PathBuf,
    pub device_bytes: Option<u64>,
    pub workload: Option<String>,
    pub description: Option<String>,
    /// The request count the capture notes give, if any (for progress bars).
    pub requests: Option<u64>,
    /// Timestamps of the "DAY N START" markers, ascending.
    pub day_starts_ns: Vec<u64>,
    /// The drive the capture was made on, as `device_model` names it: a device spec
    /// (`hdd:wd2500aaks`) or the model string the kernel reports (`WDC WD2500AAKS-00B3A0`).
    pub device_model: Option<String>,
}

/// Where a trace's sidecar may be: `<trace>.meta.json`, then the trace's name with its
/// extensions (.zst, .gz, .txt, .trace, .csv, .parquet) removed one by one, plus
/// `.meta.json` (`dev_kernel.trace.txt` -> `dev_kernel.meta.json`; a notebook's
/// `startup.parquet` finds the capture's `startup.meta.json`).
pub fn candidates(trace: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(format!("{}.meta.json", trace.display()))];
    let mut stem = trace.to_path_buf();
    while let Some(ext) = stem.extension().and_then(|e| e.to_str()) {
        if !["zst", "gz", "txt", "trace", "csv", "parquet"].contains(&ext) {
            break;
        }
        stem.set_extension("");
        out.push(PathBuf::from(format!("{}.meta.json", stem.display())));
    }
    out
}

/// Reads every sidecar that exists, nearest name first, and merges them: each field comes
/// from the nearest sidecar that has it. A recorder writes `<trace>.meta.json` with the
/// device's size only, while a capture script's `<name>.meta.json` holds the day spans;
/// taking the first file alone would hide the days. A sidecar that exists but is
/// malformed is an error naming the file and key.
pub fn find(trace: &Path) -> Result<Option<Sidecar>, String> {
    let mut merged: Option<Sidecar> = None;
    for c in candidates(trace) {
        if !c.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&c).map_err(|e| format!("{}: {e}", c.display()))?;
        let next = parse(&text, &c)?;
        merged = Some(match merged {
            None => next,
            Some(m) => m.or(next),
        });
    }
    Ok(merged)
}

impl Sidecar {
    /// `self`, with each field it lacks taken from `farther`.
    fn or(self, farther: Sidecar) -> Sidecar {
        Sidecar {
            path: self.path,
            device_bytes: self.device_bytes.or(farther.device_bytes),
            workload: self.workload.or(farther.workload),
            description: self.description.or(farther.description),
            requests: self.requests.or(farther.requests),
            device_model: self.device_model.or(farther.device_model),
            day_starts_ns: if self.day_starts_ns.is_empty() {
                farther.day_starts_ns
            } else {
                self.day_starts_ns
            },
        }
    }
}

pub fn parse(text: &str, path: &Path) -> Result<Sidecar, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let bad = |key: &str, why: &str| format!("{}: key {key}: {why}", path.display());
    let device_bytes = match v.get("device_sectors") {
        None | Some(serde_json::Value::Null) => None,
        Some(x) => {
            let s = x
                .as_u64()
                .ok_or_else(|| bad("device_sectors", "not a whole number"))?;
            Some(
                s.checked_mul(SECTOR_BYTES)
                    .ok_or_else(|| bad("device_sectors", "too large"))?,
            )
        }
    };
    let text_of = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let mut day_starts_ns = Vec::new();
    if let Some(markers) = v.get("markers").and_then(|m| m.as_array()) {
        for m in markers {
            let is_day_start = m
                .get("text")
                .and_then(|t| t.as_str())
                .is_some_and(|t| t.starts_with("DAY ") && t.ends_with(" START"));
            if is_day_start {
                let t = m.get("t_ns").and_then(|t| t.as_u64());
                day_starts_ns.push(t.ok_or_else(|| bad("markers[].t_ns", "not a whole number"))?);
            }
        }
    }
    // A capture script's day spans: `"days": [{"day": 1, "start_ns": .., "end_ns": ..}]`.
    // Other captures keep per-day statistics under "days" without `start_ns` (their
    // day starts are markers): those entries say nothing about where a day starts.
    if let Some(days) = v.get("days").and_then(|d| d.as_array()) {
        for t in days.iter().filter_map(|d| d.get("start_ns")) {
            let t = t.as_u64();
            day_starts_ns.push(t.ok_or_else(|| bad("days[].start_ns", "not a whole number"))?);
        }
    }
    day_starts_ns.sort_unstable();
    day_starts_ns.dedup();
    Ok(Sidecar {
        path: path.to_path_buf(),
        device_bytes,
        workload: text_of("workload"),
        description: text_of("description"),
        requests: v.get("requests").and_then(|x| x.as_u64()),
        day_starts_ns,
        device_model: text_of("device_model").filter(|m| !m.trim().is_empty()),
    })
}

/// The working-set interval rule `spec` (see [`crate::units::parse_interval`]); `days`
/// takes the sidecar's "DAY N START" markers (the first day's start is dropped so that
/// requests before it join day 1).
pub fn interval(spec: &str, meta: Option<&Sidecar>) -> Result<crate::Interval, String> {
    if spec == "days" {
        let Some(m) = meta.filter(|m| !m.day_starts_ns.is_empty()) else {
            return Err(
                "--interval days: the trace has no .meta.json with \"DAY N START\" markers \
                 or \"days\" spans"
                    .into(),
            );
        };
        return Ok(crate::Interval::Starts {
            starts_ns: m.day_starts_ns[1..].to_vec(),
        });
    }
    crate::units::parse_interval(spec).map_err(|e| format!("--interval {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names_strip_trace_extensions() {
        let c = candidates(Path::new("/t/dev_kernel.trace.txt.zst"));
        assert_eq!(c[0], PathBuf::from("/t/dev_kernel.trace.txt.zst.meta.json"));
        assert!(c.contains(&PathBuf::from("/t/dev_kernel.meta.json")));
    }

    #[test]
    fn a_recorders_sidecar_and_a_capture_scripts_are_merged() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("startup.trace.txt");
        std::fs::write(
            dir.path().join("startup.trace.txt.meta.json"),
            r#"{"device_sectors": 64}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("startup.meta.json"),
            r#"{"device_sectors": 8, "workload": "start-up", "days": [
                {"day": 2, "start_ns": 900, "end_ns": 950},
                {"day": 1, "start_ns": 100, "end_ns": 150}]}"#,
        )
        .unwrap();
        let s = find(&trace).unwrap().unwrap();
        assert_eq!(s.device_bytes, Some(64 * 512), "the nearer file wins");
        assert_eq!(s.workload.as_deref(), Some("start-up"));
        assert_eq!(s.day_starts_ns, vec![100, 900]);
        let parquet = dir.path().join("startup.parquet");
        assert_eq!(
            find(&parquet).unwrap().unwrap().day_starts_ns,
            vec![100, 900]
        );
        let bad = parse(r#"{"days": [{"start_ns": -1}]}"#, Path::new("y.meta.json"));
        assert!(bad.unwrap_err().contains("days[].start_ns"));
        // Per-day statistics without start_ns (the development capture's) are not days.
        let stats = parse(
            r#"{"days": [{"day": "1", "start_s": 0.256}], "markers": [
                {"t_ns": 7, "text": "DAY 1 START"}]}"#,
            Path::new("z.meta.json"),
        )
        .unwrap();
        assert_eq!(stats.day_starts_ns, vec![7]);
    }

    #[test]
    fn parses_size_and_day_markers() {
        let s = parse(
            r#"{"device_sectors": 16, "workload": "developer", "markers": [
                {"t_ns": 0, "text": "CAPTURE_START"}, {"t_ns": 50, "text": "DAY 2 START"},
                {"t_ns": 5, "text": "DAY 1 START"}, {"t_ns": 9, "text": "DAY 1 END"}]}"#,
            Path::new("x.meta.json"),
        )
        .unwrap();
        assert_eq!(s.device_bytes, Some(16 * 512));
        assert_eq!(s.day_starts_ns, vec![5, 50]);
        assert_eq!(s.workload.as_deref(), Some("developer"));
        let e = parse(r#"{"device_sectors": "big"}"#, Path::new("x.meta.json")).unwrap_err();
        assert!(
            e.contains("x.meta.json") && e.contains("device_sectors"),
            "{e}"
        );
    }
}
