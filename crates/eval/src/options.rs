//! An evaluation as `reblock evaluate` and the Python package both run it: the settings
//! spelled as the command line's flags ([`EvalOptions`]), the device sized from the data
//! when none is named ([`crate::sizing`]), and a trace of several devices evaluated one
//! device at a time. One path, so that the package returns exactly what `--json` prints.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use reblock_trace::RequestLog;

use crate::config::{bad, parse_fraction};
use crate::free::{Discards, FreeSpace};
use crate::sizing::{self, DeviceChoice, DEFAULT_DISK};
use crate::{
    BoptAt, BoptSize, DataArea, EvalConfig, EvalError, Evaluation, Interval, Sweep, Training,
    Trigger,
};

/// The BORG-style policies compared when none are named.
pub const DEFAULT_POLICIES: &str = "vanilla,hot,borg,dlr-seq,dlr-frag";

/// The evaluation's settings as the command line spells them (`--bopt-size 64MiB`...);
/// `None` where the default depends on the data. [`Default`] is the command line's.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOptions {
    /// Comma separated policy names (default [`DEFAULT_POLICIES`]).
    pub policies: Option<String>,
    /// Device spec; none: sized from the data (see [`crate::sizing`]).
    pub device: Option<String>,
    pub bopt_at: String,
    pub bopt_size: String,
    pub write_buffer: String,
    pub interval: String,
    pub training: String,
    /// Decay of the learning state plans are made from (see
    /// [`EvalConfig::learning_decay`]); none: `training` alone.
    pub learning_decay: Option<f64>,
    /// Normal phases' speed-up (default 168).
    pub speed: Option<f64>,
    pub sweep: Option<String>,
    pub guard: bool,
    pub guard_epoch: usize,
    pub trigger: String,
    /// `device`, `trace` or a size; none: `device`, or sized from the data.
    pub data_area: Option<String>,
    pub wrap: bool,
    pub free_space: String,
    pub page_size: u32,
    pub min_edge_weight: u64,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            policies: None,
            device: None,
            bopt_at: "auto".into(),
            bopt_size: "auto".into(),
            write_buffer: "0.1".into(),
            interval: "4".into(),
            training: "cumulative".into(),
            learning_decay: None,
            speed: None,
            sweep: None,
            guard: true,
            guard_epoch: 500,
            trigger: "auto".into(),
            data_area: None,
            wrap: false,
            free_space: "untouched".into(),
            page_size: 4096,
            min_edge_weight: 2,
        }
    }
}

impl EvalOptions {
    /// The configuration these options give on `device`, checked.
    pub fn config(&self, device: &str) -> Result<EvalConfig, EvalError> {
        if self.page_size == 0 || !self.page_size.is_multiple_of(512) {
            let why = format!("{} is not a positive multiple of 512", self.page_size);
            return Err(bad("page-size", why).into());
        }
        let mut cfg = EvalConfig {
            policies: (self.policies.as_deref())
                .unwrap_or(DEFAULT_POLICIES)
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
            device: device.to_string(),
            bopt_at: BoptAt::parse(&self.bopt_at)?,
            bopt_size: BoptSize::parse(&self.bopt_size)?,
            write_buffer_fraction: parse_fraction("write-buffer", &self.write_buffer)?,
            interval: Interval::parse(&self.interval)?,
            training: Training::parse(&self.training)?,
            learning_decay: self.learning_decay,
            trigger: Trigger::parse(&self.trigger)?,
            speed: self.speed.unwrap_or(168.0),
            guard: self.guard,
            guard_epoch_requests: self.guard_epoch,
            page_sectors: self.page_size / 512,
            min_edge_weight: self.min_edge_weight,
            data_area: DataArea::Device,
            wrap: self.wrap,
            free_space: crate::free::FreeSpace::parse(&self.free_space)?,
        };
        cfg.data_area = match self.data_area.as_deref() {
            Some(spec) => DataArea::parse(spec)?,
            // A free-extent file describes the traced file system: its extents are only
            // meaningful against that file system's size, not a whole named disk (4 GiB of
            // ext4 on a 232 GiB drive would leave its free space under FS2's critical
            // watermark, and no replica would ever be made).
            None => match &cfg.free_space {
                crate::free::FreeSpace::File(path) => crate::free::file_system_sectors(path)
                    .map_or(DataArea::Device, DataArea::Sectors),
                _ => DataArea::Device,
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Where the requests came from: the trace's name in the output, and what sizes its
/// device (a .meta.json beside `path`, else the Parquet footer's device size).
pub struct TraceOrigin<'a> {
    pub path: &'a Path,
    pub footer_sectors: Option<u64>,
    /// The trace's discards (TRIM), for `--free-space discards`.
    pub discards: &'a [reblock_trace::Discard],
}

/// One trace device's evaluation.
pub struct DeviceEvaluation {
    /// The device number in a trace of several devices; none for a one-device trace.
    pub trace_device: Option<u32>,
    pub evaluation: Evaluation,
    /// What was chosen without a device named.
    pub choice: Option<DeviceChoice>,
}

/// What the evaluation reports while it runs.
pub enum EvalProgress<'a> {
    /// The trace addresses this many devices (more than one): each is evaluated alone.
    Split { devices: usize },
    /// A device's evaluation starts, with about this many phases to run.
    Device { phases: u64 },
    /// The device was sized from the data: one line saying how.
    Sized(&'a DeviceChoice),
    /// A phase starts: (parameter point, policy, phase).
    Phase(&'a str, &'a str, &'a str),
}

/// Every policy of `opts` over `requests`, each trace device alone on a device of its
/// own (an MSR or UMass trace of a whole server: each has its own layout, never merged).
/// A [`RequestLog`] is taken as it is (a `Vec<Request>` is encoded into one first).
pub fn evaluate_trace(
    requests: impl Into<RequestLog>,
    origin: &TraceOrigin,
    opts: &EvalOptions,
    progress: &mut dyn FnMut(EvalProgress),
) -> Result<Vec<DeviceEvaluation>, EvalError> {
    let cfg = opts.config(opts.device.as_deref().unwrap_or(DEFAULT_DISK))?;
    let sweep = opts.sweep.as_deref().map(Sweep::parse).transpose()?;
    let name = origin.path.display().to_string();
    let by_device = split_by_device(requests.into());
    if by_device.is_empty() {
        return Err(EvalError::Setup(format!(
            "{name}: the trace holds no requests"
        )));
    }
    let several = by_device.len() > 1;
    if several {
        progress(EvalProgress::Split {
            devices: by_device.len(),
        });
    }
    let mut out = Vec::new();
    for (dev, requests) in by_device {
        let (label, footer) = match several {
            true => (format!("{name} (trace device {dev})"), None),
            false => (name.clone(), origin.footer_sectors),
        };
        let mut cfg = cfg.clone();
        if let FreeSpace::Discards(d) = &mut cfg.free_space {
            *d = device_discards(origin, dev)?;
        }
        let choice = match &opts.device {
            Some(_) => None,
            None => Some(size_from_data(
                opts,
                &mut cfg,
                &requests,
                origin.path,
                footer,
            )?),
        };
        if let Some(c) = &choice {
            progress(EvalProgress::Sized(c));
        }
        let phases = phases_of(&cfg, sweep.as_ref());
        progress(EvalProgress::Device { phases });
        let mut tick = |point: &str, policy: &str, phase: &str| {
            progress(EvalProgress::Phase(point, policy, phase))
        };
        let evaluation = crate::evaluate(&requests, &label, &cfg, sweep.as_ref(), &mut tick)?;
        out.push(DeviceEvaluation {
            trace_device: several.then_some(dev),
            evaluation,
            choice,
        });
    }
    Ok(out)
}

/// The discards of trace device `dev`; an error when the trace holds none at all.
fn device_discards(origin: &TraceOrigin, dev: u32) -> Result<Discards, EvalError> {
    if origin.discards.is_empty() {
        return Err(EvalError::Setup(format!(
            "--free-space discards: {} holds no discards (blkparse and tracefs text \
             carry them, RWBS 'D'); name another free-space source",
            origin.path.display()
        )));
    }
    let of_dev = origin.discards.iter().filter(|d| d.device == dev);
    Ok(Discards(Arc::new(of_dev.copied().collect())))
}

/// About how many phases an evaluation runs (for progress).
fn phases_of(cfg: &EvalConfig, sweep: Option<&Sweep>) -> u64 {
    let points = 1 + sweep.map_or(0, |s| s.points.iter().map(|p| p.1.len()).sum());
    let phases = match cfg.interval {
        Interval::Count { reconfigurations } => 2 * reconfigurations as u64 + 1,
        Interval::Every { .. } => 9,
    };
    points as u64 * cfg.policies.len() as u64 * phases
}

/// The evaluations as one JSON object: a one-device trace's evaluation with the sized
/// device's choice beside it, or `{"trace", "devices": [...]}` with `trace_device` in each.
pub fn evaluation_json(trace: &str, evals: &[DeviceEvaluation]) -> serde_json::Value {
    let one = |e: &DeviceEvaluation| {
        let mut v = serde_json::to_value(&e.evaluation).expect("the evaluation serializes");
        if let Some(obj) = v.as_object_mut() {
            let why = e
                .choice
                .as_ref()
                .map_or("named with --device".into(), |c| c.why.clone());
            if let Some(config) = obj.get_mut("config").and_then(|c| c.as_object_mut()) {
                config.insert("device_why".into(), why.into());
            }
            if let Some(c) = &e.choice {
                let c = serde_json::to_value(c).expect("the choice serializes");
                obj.insert("device_choice".into(), c);
            }
            if let Some(dev) = e.trace_device {
                obj.insert("trace_device".into(), dev.into());
            }
        }
        v
    };
    match evals {
        [e] if e.trace_device.is_none() => one(e),
        _ => {
            serde_json::json!({ "trace": trace, "devices": evals.iter().map(one).collect::<Vec<_>>() })
        }
    }
}

/// The trace's requests by the device they address, in device order.
fn split_by_device(mut requests: RequestLog) -> BTreeMap<u32, RequestLog> {
    // The log grew by doubling: give back the unused part (up to half of it).
    requests.shrink_to_fit();
    // One device (the usual trace): the requests move over as they are, without a copy.
    if let Some(device) = requests.single_device() {
        return BTreeMap::from([(device, requests)]);
    }
    let mut by: BTreeMap<u32, RequestLog> = BTreeMap::new();
    for r in &requests {
        by.entry(r.device).or_default().push(r);
    }
    by.values_mut().for_each(RequestLog::shrink_to_fit);
    by
}

/// No device named: the data area and the disk from the data (see [`crate::sizing`]),
/// unless the options name the data area itself.
fn size_from_data(
    opts: &EvalOptions,
    cfg: &mut EvalConfig,
    requests: &RequestLog,
    trace: &Path,
    footer_sectors: Option<u64>,
) -> Result<DeviceChoice, EvalError> {
    // An auto-sized region is bounded by a tenth of the disk, not known yet: size it
    // from the working set alone to pick a disk that holds both.
    let bopt_bytes = match cfg.bopt_size {
        BoptSize::Bytes(b) => b,
        BoptSize::Auto => crate::workload::auto_bopt_bytes(requests.span(), cfg, u64::MAX / 1024),
    };
    let (bopt_pages, _) = crate::workload::bopt_pages(bopt_bytes, cfg.page_sectors);
    let bopt_sectors = bopt_pages * u64::from(cfg.page_sectors);
    let trace_end = requests.iter().map(|r| r.end_sector()).max().unwrap_or(0);
    let choice = sizing::choose(trace, trace_end, bopt_sectors, footer_sectors)?;
    cfg.device = choice.device.clone();
    if opts.data_area.is_none() {
        cfg.data_area = DataArea::Sectors(choice.data_sectors);
        cfg.wrap |= choice.wrapped;
    }
    Ok(choice)
}
