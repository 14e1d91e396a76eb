//! What `reblock simulate --json` prints, built here so that the CLI and the Python
//! package print the same object: what was simulated, then the report.

use serde::Serialize;

use crate::{Config, DeviceFactory, Pacing, Report};

/// `simulate --json`: the device, scheduler and pacing the replay used, then the report.
#[derive(Serialize)]
pub struct SimulationOutput<'a> {
    pub trace: String,
    pub device: &'a str,
    pub scheduler: &'static str,
    pub pacing: &'static str,
    pub speed: Option<f64>,
    pub queue_depth: Option<usize>,
    pub max_merge_sectors: u32,
    #[serde(flatten)]
    pub report: &'a Report,
}

impl<'a> SimulationOutput<'a> {
    pub fn new(trace: String, device: &'a str, config: &Config, report: &'a Report) -> Self {
        let (pacing, speed, queue_depth) = match config.pacing {
            Pacing::Closed { depth } => ("closed", None, Some(depth)),
            Pacing::Open { speed } => ("open", Some(speed), None),
        };
        SimulationOutput {
            trace,
            device,
            scheduler: config.scheduler.name(),
            pacing,
            speed,
            queue_depth,
            max_merge_sectors: config.max_merge_sectors,
            report,
        }
    }
}

/// A fresh copy of the device `spec` names for each device of the trace; the spec is
/// checked once here, for a clear error.
pub fn device_factory(spec: &str) -> Result<DeviceFactory, reblock_device::SpecError> {
    reblock_device::parse_spec(spec)?;
    let spec = spec.to_string();
    Ok(Box::new(move || {
        let built = reblock_device::parse_spec(&spec).expect("the spec parsed once already");
        (built.array, built.members)
    }))
}
