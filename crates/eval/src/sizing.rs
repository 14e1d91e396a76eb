//! Defaults sized from the data: with no `--device`, the data area is the traced device's
//! size (from the trace's .meta.json) or else the trace's address span, and the device is
//! the smallest built-in disk that holds it plus the BOPT. The choice is printed, and
//! scripts find it in the JSON output.

use std::path::Path;

use reblock_analyze::sidecar;
use reblock_analyze::units::format_bytes;
use serde::Serialize;

use crate::EvalError;

/// Built-in disks tried in order: the seeds' 2 GB Barracuda first (the reference model),
/// then larger drives.
pub const DEFAULT_DISKS: [&str; 3] = ["hdd:barracuda", "hdd:cheetah15k5", "hdd:wd2500aaks"];

/// What was chosen without `--device`, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceChoice {
    pub device: String,
    pub device_capacity_sectors: u64,
    /// The data area the evaluation uses.
    pub data_sectors: u64,
    /// Where the data area's size comes from: `metadata` (the file named in
    /// `metadata_path`) or `trace span` (the highest sector a request reaches).
    pub data_area_from: &'static str,
    pub metadata_path: Option<String>,
    /// True when even the largest built-in disk is too small, so addresses are folded.
    pub wrapped: bool,
}

impl DeviceChoice {
    /// One line for stderr.
    pub fn describe(&self) -> String {
        let from = match &self.metadata_path {
            Some(p) => format!("the traced device's size, from {p}"),
            None => "the trace's address span".to_string(),
        };
        let disk = format!(
            "{} ({})",
            self.device,
            format_bytes(self.device_capacity_sectors * 512)
        );
        let why = if self.wrapped {
            "the largest built-in disk; the trace is larger, so its addresses are folded (--wrap)"
        } else {
            "the smallest built-in disk that holds it and the BOPT"
        };
        format!(
            "reblock: no --device given: data area {} ({from}) on {disk}, {why}; \
             --device and --data-area override",
            format_bytes(self.data_sectors * 512)
        )
    }
}

fn capacity_sectors(spec: &str) -> Result<u64, EvalError> {
    let built = reblock_device::parse_spec(spec).map_err(EvalError::Device)?;
    Ok(built.array.capacity_sectors())
}

/// Chooses the data area and the disk for a trace whose requests end at most at
/// `trace_end_sector`, with a BOPT of `bopt_sectors`.
/// `footer_sectors` is the device size a Parquet trace's metadata records
/// (`reblock.device_sectors`); a .meta.json beside the trace wins over it.
pub fn choose(
    trace: &Path,
    trace_end_sector: u64,
    bopt_sectors: u64,
    footer_sectors: Option<u64>,
) -> Result<DeviceChoice, EvalError> {
    let sidecar = sidecar::find(trace)
        .map_err(EvalError::Sidecar)?
        .and_then(|m| Some((m.device_bytes.filter(|&b| b > 0)?.div_ceil(512), m.path)));
    let meta = sidecar
        .map(|(s, p)| (s, p.display().to_string()))
        .or_else(|| {
            let s = footer_sectors.filter(|&s| s > 0)?;
            Some((s, format!("{} (Parquet metadata)", trace.display())))
        });
    let meta_sectors = meta.as_ref().map(|m| m.0);
    let data_sectors = meta_sectors.unwrap_or(0).max(trace_end_sector).max(1);
    let mut last = None;
    for spec in DEFAULT_DISKS {
        let capacity = capacity_sectors(spec)?;
        last = Some((spec, capacity));
        if capacity >= data_sectors + bopt_sectors {
            return Ok(choice(spec, capacity, data_sectors, meta.as_ref(), false));
        }
    }
    let (spec, capacity) = last.expect("DEFAULT_DISKS is not empty");
    let room = capacity.saturating_sub(bopt_sectors);
    Ok(choice(spec, capacity, room, meta.as_ref(), true))
}

fn choice(
    spec: &str,
    capacity: u64,
    data_sectors: u64,
    meta: Option<&(u64, String)>,
    wrapped: bool,
) -> DeviceChoice {
    DeviceChoice {
        device: spec.to_string(),
        device_capacity_sectors: capacity,
        data_sectors,
        data_area_from: if meta.is_some() {
            "metadata"
        } else {
            "trace span"
        },
        metadata_path: meta.map(|m| m.1.clone()),
        wrapped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOPT: u64 = 64 << 11;

    #[test]
    fn parquet_metadata_sizes_the_data_area() {
        let c = choose(
            Path::new("/nonexistent/t.parquet"),
            1_000,
            BOPT,
            Some(40_000_000),
        )
        .unwrap();
        assert_eq!(c.data_sectors, 40_000_000);
        assert_eq!(c.data_area_from, "metadata");
        assert_eq!(c.device, "hdd:cheetah15k5");
        assert!(c.metadata_path.unwrap().contains("Parquet metadata"));
    }

    #[test]
    fn a_small_trace_stays_on_the_barracuda() {
        let c = choose(Path::new("/nonexistent/t.txt"), 1_000_000, BOPT, None).unwrap();
        assert_eq!(c.device, "hdd:barracuda");
        assert_eq!(c.data_sectors, 1_000_000);
        assert_eq!(c.data_area_from, "trace span");
        assert!(!c.wrapped);
    }

    #[test]
    fn a_trace_past_2_gb_moves_to_a_larger_disk() {
        let c = choose(Path::new("/nonexistent/t.txt"), 40_000_000, BOPT, None).unwrap();
        assert_eq!(c.device, "hdd:cheetah15k5");
        assert!(c.device_capacity_sectors >= c.data_sectors + BOPT);
    }

    #[test]
    fn a_trace_larger_than_every_disk_is_folded() {
        let c = choose(Path::new("/nonexistent/t.txt"), 1 << 40, BOPT, None).unwrap();
        assert_eq!(c.device, "hdd:wd2500aaks");
        assert!(c.wrapped);
        assert_eq!(c.data_sectors + BOPT, c.device_capacity_sectors);
    }

    #[test]
    fn metadata_sizes_the_data_area() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("cap.trace.txt");
        std::fs::write(
            dir.path().join("cap.meta.json"),
            r#"{"device_sectors": 16777216}"#,
        )
        .unwrap();
        let c = choose(&trace, 1000, BOPT, None).unwrap();
        assert_eq!(c.data_sectors, 16_777_216);
        assert_eq!(c.data_area_from, "metadata");
        assert_eq!(c.device, "hdd:cheetah15k5");
        assert!(c.describe().contains("cap.meta.json"));
    }
}
