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
/// extensions (.zst, .gz, .txt, .trace, .csv) removed one by one, plus `.meta.json`
/// (`dev_kernel.trace.txt` -> `dev_kernel.meta.json`).
pub fn candidates(trace: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(format!("{}.meta.json", trace.display()))];
    let mut stem = trace.to_path_buf();
    while let Some(ext) = stem.extension().and_then(|e| e.to_str()) {
        if !["zst", "gz", "txt", "trace", "csv"].contains(&ext) {
            break;
        }
        stem.set_extension("");
        out.push(PathBuf::from(format!("{}.meta.json", stem.display())));
    }
    out
}

/// Reads the first sidecar that exists; a sidecar that exists but is malformed is an
/// error naming the file and key.
pub fn find(trace: &Path) -> Result<Option<Sidecar>, String> {
    for c in candidates(trace) {
        if c.is_file() {
            let text = std::fs::read_to_string(&c).map_err(|e| format!("{}: {e}", c.display()))?;
            return parse(&text, &c).map(Some);
        }
    }
    Ok(None)
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
    day_starts_ns.sort_unstable();
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
                "--interval days: the trace has no .meta.json with \"DAY N START\" markers".into(),
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
