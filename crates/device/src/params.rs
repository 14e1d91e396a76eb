//! Parameter files of the device models (TOML), and the built-in set embedded in the binary.
//!
//! Adding a drive is one new file in `crates/device/models/` plus one line in [`BUILTIN`].
//! A bad file is an error naming the file and the key path (`seek.a_ms`) with the line and
//! column of the offending value.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::Deserialize;

/// The built-in parameter files: (name, file name, contents).
pub const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "barracuda",
        "barracuda.toml",
        include_str!("../models/barracuda.toml"),
    ),
    (
        "cheetah15k5",
        "cheetah15k5.toml",
        include_str!("../models/cheetah15k5.toml"),
    ),
    (
        "wd2500aaks",
        "wd2500aaks.toml",
        include_str!("../models/wd2500aaks.toml"),
    ),
    (
        "wd360gd",
        "wd360gd.toml",
        include_str!("../models/wd360gd.toml"),
    ),
    (
        "maxtor6l020l1",
        "maxtor6l020l1.toml",
        include_str!("../models/maxtor6l020l1.toml"),
    ),
    (
        "maxtor6l020j1",
        "maxtor6l020j1.toml",
        include_str!("../models/maxtor6l020j1.toml"),
    ),
    (
        "k9xxg08uxm",
        "k9xxg08uxm.toml",
        include_str!("../models/k9xxg08uxm.toml"),
    ),
];

/// Data files the built-in parameter files refer to (measured seek tables).
const BUILTIN_DATA: &[(&str, &str)] = &[(
    "cheetah15k5-seek-curve.csv",
    include_str!("../models/cheetah15k5-seek-curve.csv"),
)];

/// Short names accepted for built-in models.
pub const ALIASES: &[(&str, &str)] = &[("k9", "k9xxg08uxm"), ("cheetah", "cheetah15k5")];

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{file}: key `{key}`: {message}")]
    Key {
        file: String,
        key: String,
        message: String,
    },
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("unknown device model `{name}`; known models: {known}")]
    Unknown { name: String, known: String },
}

impl ModelError {
    fn file(file: &str, message: impl Into<String>) -> Self {
        ModelError::File {
            file: file.to_string(),
            message: message.into(),
        }
    }
}

/// One parameter file: a disk or a flash device (`kind = "hdd"` or `"ssd"`).
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // one per parameter file: size does not matter
pub enum ModelParams {
    Hdd(HddParams),
    Ssd(SsdParams),
}

/// The `kind` key alone, read first so that the typed pass reports exact key paths
/// (serde's internally tagged enums lose them).
#[derive(Deserialize)]
struct Kind {
    kind: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddParams {
    #[serde(default)]
    pub kind: String,
    pub name: String,
    /// Where the numbers come from (datasheet, extraction, approximation).
    #[serde(default)]
    pub source: String,
    pub rpm: f64,
    pub surfaces: u32,
    /// Caps the capacity below what the zones hold (spare sectors).
    #[serde(default)]
    pub capacity_sectors: Option<u64>,
    pub head_switch_ms: f64,
    /// Added to every non-zero seek (0 when the seek curve already includes it).
    #[serde(default)]
    pub settle_ms: f64,
    /// Extra settle before writing (write heads need finer positioning).
    #[serde(default)]
    pub write_settle_ms: f64,
    #[serde(default)]
    pub overhead_read_ms: f64,
    #[serde(default)]
    pub overhead_write_ms: f64,
    /// Track skew in sectors; default: enough sectors to cover a head switch.
    #[serde(default)]
    pub track_skew_sectors: Option<u32>,
    /// Cylinder skew in sectors; default: enough sectors to cover a one-cylinder seek.
    #[serde(default)]
    pub cylinder_skew_sectors: Option<u32>,
    #[serde(default)]
    pub layout: LayoutParams,
    pub zones: Vec<ZoneParams>,
    pub seek: SeekParams,
    #[serde(default)]
    pub cache: Option<CacheParams>,
    /// The drive's own command queue; absent: one command at a time (no queue).
    #[serde(default)]
    pub queue: Option<QueueParams>,
    /// Per-command overheads by kind; absent: `overhead_read_ms` / `overhead_write_ms`
    /// for media accesses and the cache's `read_hit_overhead_ms` for read hits.
    #[serde(default)]
    pub overheads: Option<OverheadParams>,
    #[serde(default)]
    pub power: Option<PowerParams>,
}

impl OverheadParams {
    /// (key, value) of every overhead, for validation.
    fn named(&self) -> [(&'static str, f64); 8] {
        [
            ("read_hit_after_read_ms", self.read_hit_after_read_ms),
            ("read_hit_after_write_ms", self.read_hit_after_write_ms),
            ("read_miss_after_read_ms", self.read_miss_after_read_ms),
            ("read_miss_after_write_ms", self.read_miss_after_write_ms),
            ("write_hit_after_read_ms", self.write_hit_after_read_ms),
            ("write_hit_after_write_ms", self.write_hit_after_write_ms),
            ("write_miss_after_read_ms", self.write_miss_after_read_ms),
            ("write_miss_after_write_ms", self.write_miss_after_write_ms),
        ]
    }
}

/// The drive's command queue: it holds up to `depth` commands from the host and serves
/// the one it can reach first (shortest positioning time: seek plus rotational wait).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueParams {
    pub depth: u32,
}

/// Controller time per command (ms) before any media work, by what the command is and
/// what the previous command was (DiskSim's "Read hit over. after read" and the like). A
/// write "hit" is one taken into the write cache, a "miss" one written through.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverheadParams {
    pub read_hit_after_read_ms: f64,
    pub read_hit_after_write_ms: f64,
    pub read_miss_after_read_ms: f64,
    pub read_miss_after_write_ms: f64,
    pub write_hit_after_read_ms: f64,
    pub write_hit_after_write_ms: f64,
    pub write_miss_after_read_ms: f64,
    pub write_miss_after_write_ms: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutKind {
    /// Cylinder by cylinder, all surfaces of a cylinder before the next one.
    #[default]
    Conventional,
    /// Each surface covers a band of `band_cylinders`, direction alternating surface by
    /// surface, then the next band (the Cheetah 15K.5 of the models README).
    Serpentine,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutParams {
    #[serde(default)]
    pub kind: LayoutKind,
    /// Serpentine only.
    #[serde(default)]
    pub band_cylinders: Option<u32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneParams {
    pub first_cylinder: u32,
    /// Inclusive.
    pub last_cylinder: u32,
    pub sectors_per_track: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SeekKind {
    /// Seed 001 eq. 2.2: `a + b*sqrt(d)` for d < boundary, `c + e*d` otherwise (ms).
    Curve,
    /// Measured points, interpolated linearly: a CSV file (`distance,mean_ms[,...]`, one
    /// header line) next to the parameter file, or inline `points = [[d, ms], ...]`.
    Table,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeekParams {
    pub kind: SeekKind,
    #[serde(default)]
    pub a_ms: Option<f64>,
    #[serde(default)]
    pub b_ms: Option<f64>,
    #[serde(default)]
    pub c_ms: Option<f64>,
    #[serde(default)]
    pub e_ms: Option<f64>,
    /// Default: a third of the cylinders (C/3, as in eq. 2.2).
    #[serde(default)]
    pub boundary_cylinders: Option<f64>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheParams {
    #[serde(default = "yes")]
    pub enabled: bool,
    pub segments: u32,
    pub segment_sectors: u32,
    pub read_hit_overhead_ms: f64,
    #[serde(default)]
    pub write_caching: bool,
    /// Before serving any command that does not append to the cached writes, write them
    /// all to the media first (DiskSim's "Fast write level 2"). Off by default: cached
    /// writes wait until the drive is idle or the cache is full.
    #[serde(default)]
    pub flush_before_non_append: bool,
    /// Most writes waiting in the cache at once (DiskSim's "Maximum number of write
    /// segments"; a write appending to the newest joins it). Default: no limit but the
    /// cache's size in sectors.
    #[serde(default)]
    pub write_segments: Option<u32>,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PowerParams {
    pub idle_w: f64,
    pub seek_w: f64,
    pub transfer_w: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdParams {
    #[serde(default)]
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub source: String,
    /// Independent flash elements (channels x packages x dies): each serves one page
    /// operation at a time, all elements in parallel.
    pub channels: u32,
    pub packages_per_channel: u32,
    pub dies_per_package: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    pub read_us: f64,
    pub program_us: f64,
    pub erase_us: f64,
    /// Bus transfer per byte between controller and flash element.
    pub bus_ns_per_byte: f64,
    /// Out-of-band bytes that cross the flash bus with every 512 data bytes (the MSR
    /// model moves 16 spare bytes per sector: 528 bytes each). Default 0.
    #[serde(default)]
    pub spare_bytes_per_sector: u32,
    /// Fixed cost per request on the host interface, which all elements share.
    #[serde(default)]
    pub overhead_us: f64,
    /// Host-interface transfer per 512-byte sector of a request (DiskSim's "block
    /// transfer time" of the bus to the host). The interface moves one request at a
    /// time. Default 0.
    #[serde(default)]
    pub host_ns_per_sector: f64,
    /// Fraction of the flash hidden from the host (0.15 = 15%).
    pub over_provisioning: f64,
    /// GC starts when an element has fewer free blocks than this.
    #[serde(default = "two")]
    pub gc_free_blocks: u32,
    /// Commands the device accepts at once (its queue); all of them are in service
    /// together, each waiting only for the flash elements it needs. Default 1.
    #[serde(default = "one")]
    pub queue_depth: u32,
    #[serde(default)]
    pub power: Option<SsdPowerParams>,
}

fn two() -> u32 {
    2
}

fn one() -> u32 {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdPowerParams {
    pub idle_w: f64,
    pub active_w: f64,
}

/// A parameter file after loading: the parsed parameters and, for a measured seek table,
/// its points.
#[derive(Clone, Debug)]
pub struct LoadedModel {
    pub params: ModelParams,
    pub seek_points: Vec<(f64, f64)>,
}

/// Looks a built-in model up by name or alias. Each is parsed once per process: `evaluate`
/// builds a fresh device for every shadow replay (hundreds in a run), and parsing the
/// same TOML each time took 2.7 % of its CPU time (3·10^6 requests, vanilla and borg).
pub fn builtin(name: &str) -> Result<LoadedModel, ModelError> {
    static PARSED: OnceLock<Mutex<Vec<(&'static str, LoadedModel)>>> = OnceLock::new();
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, full)| full);
    let Some(&(name, file, text)) = BUILTIN.iter().find(|(n, _, _)| *n == name) else {
        return Err(ModelError::Unknown {
            name: name.to_string(),
            known: known_models(),
        });
    };
    let parsed = PARSED.get_or_init(Default::default);
    let cached = |p: &Vec<(&str, LoadedModel)>| {
        let found = p.iter().find(|(n, _)| *n == name);
        found.map(|(_, m)| m.clone())
    };
    if let Some(m) = cached(&parsed.lock().unwrap_or_else(PoisonError::into_inner)) {
        return Ok(m);
    }
    let file = format!("models/{file}");
    let model = load_text(&file, text, |data| {
        BUILTIN_DATA
            .iter()
            .find(|(n, _)| *n == data)
            .map(|(_, t)| t.to_string())
            .ok_or_else(|| format!("no built-in data file `{data}`"))
    })?;
    let mut p = parsed.lock().unwrap_or_else(PoisonError::into_inner);
    if cached(&p).is_none() {
        p.push((name, model.clone()));
    }
    Ok(model)
}

/// "barracuda, cheetah15k5, ... (aliases: k9 = k9xxg08uxm, ...)".
pub fn known_models() -> String {
    let names: Vec<String> = BUILTIN
        .iter()
        .map(|(n, _, t)| {
            let kind = if t.contains("kind = \"ssd\"") {
                "ssd"
            } else {
                "hdd"
            };
            format!("{kind}:{n}")
        })
        .collect();
    let aliases: Vec<String> = ALIASES.iter().map(|(a, f)| format!("{a} = {f}")).collect();
    format!("{} (aliases: {})", names.join(", "), aliases.join(", "))
}

/// Loads a parameter file from disk; a seek table file is looked up next to it.
pub fn load_path(path: &Path) -> Result<LoadedModel, ModelError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::file(&file, e.to_string()))?;
    let dir: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_text(&file, &text, |data| {
        std::fs::read_to_string(dir.join(data)).map_err(|e| format!("{data}: {e}"))
    })
}

/// Parses `text` (named `file` in errors); `data` fetches a referenced data file.
pub fn load_text(
    file: &str,
    text: &str,
    data: impl Fn(&str) -> Result<String, String>,
) -> Result<LoadedModel, ModelError> {
    let params = parse_toml(file, text)?;
    validate(file, &params)?;
    let mut seek_points = Vec::new();
    if let ModelParams::Hdd(h) = &params {
        if h.seek.kind == SeekKind::Table {
            seek_points = h.seek.points.clone();
            if let Some(f) = &h.seek.file {
                let csv = data(f).map_err(|m| key_err(file, "seek.file", m))?;
                seek_points = parse_seek_csv(f, &csv)?;
            }
            check_seek_points(file, &seek_points)?;
        }
    }
    Ok(LoadedModel {
        params,
        seek_points,
    })
}

fn parse_toml(file: &str, text: &str) -> Result<ModelParams, ModelError> {
    let kind: Kind = typed(file, text)?;
    match kind.kind.as_deref() {
        Some("hdd") => Ok(ModelParams::Hdd(typed(file, text)?)),
        Some("ssd") => Ok(ModelParams::Ssd(typed(file, text)?)),
        Some(k) => Err(key_err(
            file,
            "kind",
            format!("`{k}` is not a device kind; expected \"hdd\" or \"ssd\""),
        )),
        None => Err(key_err(
            file,
            "kind",
            "missing: expected kind = \"hdd\" or \"ssd\"",
        )),
    }
}

/// Deserializes `text`, naming the key path and the line of the offending value.
fn typed<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, ModelError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        // A missing key: name it in full; the span is that of the enclosing table (line 1,
        // column 1 for the top level), which would point at the wrong place.
        if let Some(field) = missing_field(inner.message()) {
            let key = if key.is_empty() || key == "." {
                field.to_string()
            } else {
                format!("{key}.{field}")
            };
            return key_err(file, &key, "missing (required)");
        }
        let at = inner
            .span()
            .map(|s| {
                let (line, col) = line_col(text, s.start);
                format!("line {line}, column {col}: ")
            })
            .unwrap_or_default();
        let message = format!("{at}{}", inner.message());
        if key.is_empty() || key == "." {
            ModelError::file(file, message)
        } else {
            key_err(file, &key, message)
        }
    })
}

/// The field of serde's "missing field `x`" message.
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")?
        .split('`')
        .next()
        .filter(|f| !f.is_empty())
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

fn key_err(file: &str, key: &str, message: impl Into<String>) -> ModelError {
    ModelError::Key {
        file: file.to_string(),
        key: key.to_string(),
        message: message.into(),
    }
}

/// Checks the values serde cannot: positive times, zones that tile the cylinders.
fn validate(file: &str, params: &ModelParams) -> Result<(), ModelError> {
    let positive = |key: &str, v: f64| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(key_err(file, key, format!("must be positive, got {v}")))
        }
    };
    let non_negative = |key: &str, v: f64| {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(key_err(file, key, format!("must be >= 0, got {v}")))
        }
    };
    match params {
        ModelParams::Hdd(h) => {
            positive("rpm", h.rpm)?;
            positive("surfaces", h.surfaces as f64)?;
            non_negative("head_switch_ms", h.head_switch_ms)?;
            non_negative("settle_ms", h.settle_ms)?;
            non_negative("write_settle_ms", h.write_settle_ms)?;
            non_negative("overhead_read_ms", h.overhead_read_ms)?;
            non_negative("overhead_write_ms", h.overhead_write_ms)?;
            validate_zones(file, &h.zones)?;
            if let Some(c) = &h.cache {
                positive("cache.segments", c.segments as f64)?;
                positive("cache.segment_sectors", c.segment_sectors as f64)?;
                non_negative("cache.read_hit_overhead_ms", c.read_hit_overhead_ms)?;
            }
            if let Some(q) = &h.queue {
                positive("queue.depth", q.depth as f64)?;
            }
            if let Some(o) = &h.overheads {
                for (k, v) in o.named() {
                    non_negative(&format!("overheads.{k}"), v)?;
                }
            }
            if h.layout.kind == LayoutKind::Serpentine {
                let band = h.layout.band_cylinders.ok_or_else(|| {
                    key_err(
                        file,
                        "layout.band_cylinders",
                        "a serpentine layout needs it",
                    )
                })?;
                positive("layout.band_cylinders", band as f64)?;
            }
            if h.seek.kind == SeekKind::Curve {
                for (k, v) in [
                    ("a_ms", h.seek.a_ms),
                    ("b_ms", h.seek.b_ms),
                    ("c_ms", h.seek.c_ms),
                    ("e_ms", h.seek.e_ms),
                ] {
                    let key = format!("seek.{k}");
                    let v = v.ok_or_else(|| {
                        key_err(file, &key, "a seek curve needs a_ms, b_ms, c_ms and e_ms")
                    })?;
                    non_negative(&key, v)?;
                }
            }
        }
        ModelParams::Ssd(s) => {
            for (k, v) in [
                ("channels", s.channels),
                ("packages_per_channel", s.packages_per_channel),
                ("dies_per_package", s.dies_per_package),
                ("planes_per_die", s.planes_per_die),
                ("blocks_per_plane", s.blocks_per_plane),
                ("pages_per_block", s.pages_per_block),
                ("page_bytes", s.page_bytes),
                ("queue_depth", s.queue_depth),
            ] {
                positive(k, v as f64)?;
            }
            non_negative("read_us", s.read_us)?;
            non_negative("program_us", s.program_us)?;
            non_negative("erase_us", s.erase_us)?;
            non_negative("bus_ns_per_byte", s.bus_ns_per_byte)?;
            non_negative("overhead_us", s.overhead_us)?;
            non_negative("host_ns_per_sector", s.host_ns_per_sector)?;
            if !(0.0..0.9).contains(&s.over_provisioning) {
                return Err(key_err(file, "over_provisioning", "must be in [0, 0.9)"));
            }
            if s.page_bytes % 512 != 0 {
                return Err(key_err(file, "page_bytes", "must be a multiple of 512"));
            }
        }
    }
    Ok(())
}

fn validate_zones(file: &str, zones: &[ZoneParams]) -> Result<(), ModelError> {
    if zones.is_empty() {
        return Err(key_err(file, "zones", "at least one zone is needed"));
    }
    let mut next = 0u32;
    for (i, z) in zones.iter().enumerate() {
        if z.first_cylinder != next || z.last_cylinder < z.first_cylinder {
            return Err(key_err(
                file,
                &format!("zones[{i}].first_cylinder"),
                format!(
                    "zones must tile the cylinders from 0 in order: expected first_cylinder {next} and last_cylinder >= it, got {}..={}",
                    z.first_cylinder, z.last_cylinder
                ),
            ));
        }
        if z.sectors_per_track == 0 {
            return Err(key_err(
                file,
                &format!("zones[{i}].sectors_per_track"),
                "must be positive",
            ));
        }
        next = z.last_cylinder + 1;
    }
    Ok(())
}

/// `distance_cylinders,seek_ms_mean[,...]` with one header line.
pub fn parse_seek_csv(file: &str, text: &str) -> Result<Vec<(f64, f64)>, ModelError> {
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.split(',');
        let mut num = |what: &str| -> Result<f64, ModelError> {
            let f = fields.next().unwrap_or("").trim();
            f.parse::<f64>().map_err(|_| {
                ModelError::file(
                    file,
                    format!("line {}: field {what}: `{f}` is not a number", i + 1),
                )
            })
        };
        let d = num("distance_cylinders")?;
        let ms = num("seek_ms_mean")?;
        points.push((d, ms));
    }
    Ok(points)
}

fn check_seek_points(file: &str, points: &[(f64, f64)]) -> Result<(), ModelError> {
    if points.is_empty() {
        return Err(key_err(
            file,
            "seek",
            "a seek table needs `file` or `points`",
        ));
    }
    for w in points.windows(2) {
        if w[1].0 <= w[0].0 {
            return Err(key_err(
                file,
                "seek.points",
                format!("distances must increase: {} then {}", w[0].0, w[1].0),
            ));
        }
    }
    if points
        .iter()
        .any(|&(d, ms)| d < 0.0 || !ms.is_finite() || ms < 0.0)
    {
        return Err(key_err(
            file,
            "seek.points",
            "distances and times must be >= 0",
        ));
    }
    Ok(())
}
