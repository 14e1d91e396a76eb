//! Defaults sized from the data: with no `--device`, the data area is the traced device's
//! size (from the trace's .meta.json) or else the trace's address span, and the drive is
//! the one the capture's .meta.json names (`device_model`), else the default desktop drive;
//! data larger than the drive (plus the BOPT) is folded into it. The choice and its reason
//! are printed, and scripts find both in the JSON output.

use std::path::Path;

use reblock_analyze::sidecar;
use reblock_analyze::units::format_bytes;
use reblock_device::params::BUILTIN;
use serde::Serialize;

use crate::EvalError;

/// The drive when the capture names none: the Western Digital WD2500AAKS, a 7200 rpm
/// desktop SATA drive of BORG's evaluation (the workloads the layout papers measure are
/// desktop and server traces on such drives; a 15k rpm enterprise drive halves the
/// rotational delay a layout can save), the largest built-in drive. The dissertation's
/// 2 GB Barracuda is too small for a modern capture, and the 15k rpm Cheetah is chosen
/// only when named.
pub const DEFAULT_DISK: &str = "hdd:wd2500aaks";

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
    /// True when the chosen disk is too small for the data, so addresses are folded.
    pub wrapped: bool,
    /// Which rule chose the drive: `metadata` (the capture's `device_model`) or
    /// `default` (the default drive, or a larger one when it is too small).
    pub chosen_by: &'static str,
    /// Why this drive, in words.
    pub why: String,
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
        format!(
            "reblock: no --device given: data area {} ({from}) on {disk}, {}; \
             --device and --data-area override",
            format_bytes(self.data_sectors * 512),
            self.why
        )
    }
}

fn capacity_sectors(spec: &str) -> Result<u64, EvalError> {
    let built = reblock_device::parse_spec(spec).map_err(EvalError::Device)?;
    Ok(built.array.capacity_sectors())
}

/// The device spec a capture's `device_model` names: a spec `--device` takes, or a
/// kernel model string holding a built-in model's name (`WDC WD2500AAKS-00B3A0`).
pub fn spec_of_model(named: &str) -> Option<String> {
    let named = named.trim();
    if reblock_device::parse_spec(named).is_ok() {
        return Some(named.to_string());
    }
    let letters: String = named
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    let (name, _, _) = BUILTIN.iter().find(|(name, _, _)| letters.contains(name))?;
    ["hdd:", "ssd:"]
        .iter()
        .map(|kind| format!("{kind}{name}"))
        .find(|spec| reblock_device::parse_spec(spec).is_ok())
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
    let found = sidecar::find(trace).map_err(EvalError::Sidecar)?;
    let model = found.as_ref().and_then(|m| m.device_model.clone());
    let sidecar =
        found.and_then(|m| Some((m.device_bytes.filter(|&b| b > 0)?.div_ceil(512), m.path)));
    let meta = sidecar
        .map(|(s, p)| (s, p.display().to_string()))
        .or_else(|| {
            let s = footer_sectors.filter(|&s| s > 0)?;
            Some((s, format!("{} (Parquet metadata)", trace.display())))
        });
    let meta_sectors = meta.as_ref().map(|m| m.0);
    let data_sectors = meta_sectors.unwrap_or(0).max(trace_end_sector).max(1);
    let mut unknown = String::new();
    if let Some(named) = model {
        match spec_of_model(&named) {
            Some(spec) => {
                let why =
                    format!("the drive the capture's metadata names (device_model \"{named}\")");
                return fit(
                    &spec,
                    (data_sectors, bopt_sectors),
                    meta.as_ref(),
                    ("metadata", why),
                );
            }
            None => {
                unknown = format!(" (the metadata's device_model \"{named}\" is no built-in model)")
            }
        }
    }
    let why = format!("the default drive: BORG's 7200 rpm desktop drive{unknown}");
    fit(
        DEFAULT_DISK,
        (data_sectors, bopt_sectors),
        meta.as_ref(),
        ("default", why),
    )
}

/// Drive `spec` for the data and the BOPT, the data folded into it when they do not fit;
/// `why` says why this drive, and how the data fits is added to it.
fn fit(
    spec: &str,
    (data_sectors, bopt_sectors): (u64, u64),
    meta: Option<&(u64, String)>,
    (chosen_by, why): (&'static str, String),
) -> Result<DeviceChoice, EvalError> {
    let capacity = capacity_sectors(spec)?;
    let wrapped = capacity < data_sectors + bopt_sectors;
    let (data, how) = match wrapped {
        true => (
            capacity.saturating_sub(bopt_sectors),
            "the data is larger, so its addresses are folded (--wrap)",
        ),
        false => (data_sectors, "it holds the data and the BOPT"),
    };
    let why = format!("{why}; {how}");
    Ok(choice(
        spec,
        capacity,
        data,
        meta,
        wrapped,
        (chosen_by, why),
    ))
}

fn choice(
    spec: &str,
    capacity: u64,
    data_sectors: u64,
    meta: Option<&(u64, String)>,
    wrapped: bool,
    (chosen_by, why): (&'static str, String),
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
        chosen_by,
        why,
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
        assert_eq!(c.device, "hdd:wd2500aaks");
        assert!(c.metadata_path.unwrap().contains("Parquet metadata"));
    }

    #[test]
    fn a_small_trace_goes_on_the_desktop_drive() {
        let c = choose(Path::new("/nonexistent/t.txt"), 1_000_000, BOPT, None).unwrap();
        assert_eq!(c.device, "hdd:wd2500aaks");
        assert_eq!(c.data_sectors, 1_000_000);
        assert_eq!(c.data_area_from, "trace span");
        assert_eq!(c.chosen_by, "default");
        assert!(c.why.contains("7200 rpm desktop"), "{}", c.why);
        assert!(!c.wrapped);
    }

    #[test]
    fn a_trace_larger_than_every_disk_is_folded() {
        let c = choose(Path::new("/nonexistent/t.txt"), 1 << 40, BOPT, None).unwrap();
        assert_eq!(c.device, "hdd:wd2500aaks");
        assert!(c.wrapped);
        assert!(c.why.contains("folded"), "{}", c.why);
        assert_eq!(c.data_sectors + BOPT, c.device_capacity_sectors);
    }

    fn with_meta(json: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("cap.trace.txt");
        std::fs::write(dir.path().join("cap.meta.json"), json).unwrap();
        (dir, trace)
    }

    #[test]
    fn metadata_sizes_the_data_area() {
        let (_dir, trace) = with_meta(r#"{"device_sectors": 16777216}"#);
        let c = choose(&trace, 1000, BOPT, None).unwrap();
        assert_eq!(c.data_sectors, 16_777_216);
        assert_eq!(c.data_area_from, "metadata");
        assert_eq!(c.device, "hdd:wd2500aaks");
        assert!(c.describe().contains("cap.meta.json"));
    }

    #[test]
    fn the_drive_the_metadata_names_is_preferred() {
        let (_dir, trace) =
            with_meta(r#"{"device_sectors": 8388608, "device_model": "hdd:cheetah15k5"}"#);
        let c = choose(&trace, 1000, BOPT, None).unwrap();
        assert_eq!(c.device, "hdd:cheetah15k5");
        assert_eq!(c.chosen_by, "metadata");
        assert!(c.describe().contains("device_model"), "{}", c.describe());
        // The kernel's model string of a built-in drive names it too.
        let (_dir, trace) = with_meta(r#"{"device_model": "WDC WD2500AAKS-00B3A0"}"#);
        let c = choose(&trace, 1000, BOPT, None).unwrap();
        assert_eq!(
            (c.device.as_str(), c.chosen_by),
            ("hdd:wd2500aaks", "metadata")
        );
    }

    #[test]
    fn a_named_drive_too_small_folds_and_an_unknown_one_is_said() {
        let (_dir, trace) =
            with_meta(r#"{"device_sectors": 8388608, "device_model": "barracuda"}"#);
        let c = choose(&trace, 1000, BOPT, None).unwrap();
        assert_eq!(c.device, "barracuda");
        assert!(c.wrapped);
        assert_eq!(c.data_sectors + BOPT, c.device_capacity_sectors);
        let (_dir, trace) = with_meta(r#"{"device_model": "Samsung SSD 870 EVO"}"#);
        let c = choose(&trace, 1000, BOPT, None).unwrap();
        assert_eq!(
            (c.device.as_str(), c.chosen_by),
            ("hdd:wd2500aaks", "default")
        );
        assert!(c.why.contains("Samsung SSD 870 EVO"), "{}", c.why);
    }
}
