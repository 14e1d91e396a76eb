//! Device specifications as the command line writes them.
//!
//! ```text
//! hdd:barracuda | hdd:cheetah15k5 | ssd:k9xxg08uxm | ssd:k9      a built-in model
//! hdd:cheetah15k5:cache=off                                     ... with its cache off
//! hdd:cheetah15k5:write-cache=off                               ... write-through (reads cached)
//! path/to/drive.toml                                            a parameter file
//! raid0:4xhdd:cheetah15k5[:stripe=128]                           RAID-0, stripe unit in sectors
//! raid1:2xssd:k9                                                 RAID-1
//! raid5:5xhdd:cheetah15k5[:stripe=128]                           RAID-5 (left-symmetric)
//! place:14xssd:k9[:block=8]                                      explicit block placement
//! ```
//!
//! Every spec builds member devices plus an array mapping; a single device is an array of
//! one member with the identity mapping.

use std::path::Path;

use crate::array::{Placement, Raid0, Raid1, Raid5, Single};
use crate::hdd::Hdd;
use crate::params::{self, LoadedModel, ModelError, ModelParams};
use crate::ssd::Ssd;
use crate::{Array, Device};

/// Default RAID stripe unit: 128 sectors (64 KiB).
pub const DEFAULT_STRIPE_SECTORS: u64 = 128;
/// Default block of the explicit placement array: 8 sectors (4 KiB).
pub const DEFAULT_BLOCK_SECTORS: u64 = 8;

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("device spec `{spec}`: {message}")]
    Syntax { spec: String, message: String },
    /// The model's error is part of the message and not also a `source()`: printing the
    /// error and its chain would say it twice.
    #[error("device spec `{spec}`: {error}")]
    Model { spec: String, error: ModelError },
}

/// The devices of a spec and how logical requests map onto them.
pub struct Built {
    pub members: Vec<Box<dyn Device>>,
    pub array: Box<dyn Array>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.members.iter().map(|m| m.name()).collect();
        f.debug_struct("Built")
            .field("array", &self.array.name())
            .field("members", &names)
            .finish()
    }
}

fn syntax(spec: &str, message: impl Into<String>) -> SpecError {
    SpecError::Syntax {
        spec: spec.to_string(),
        message: message.into(),
    }
}

/// Parses a device spec (see the module documentation).
pub fn parse_spec(spec: &str) -> Result<Built, SpecError> {
    let spec = spec.trim();
    let kinds = ["raid0:", "raid1:", "raid5:", "place:", "placement:"];
    match kinds.iter().find(|k| spec.starts_with(**k)) {
        Some(kind) => parse_array(spec, kind.trim_end_matches(':'), &spec[kind.len()..]),
        None => {
            let dev = parse_device(spec, spec)?;
            let array = Box::new(Single::new(dev.name(), dev.capacity_sectors()));
            Ok(Built {
                members: vec![dev],
                array,
            })
        }
    }
}

fn parse_array(spec: &str, kind: &str, rest: &str) -> Result<Built, SpecError> {
    let (count, rest) = rest.split_once('x').ok_or_else(|| {
        syntax(
            spec,
            format!("expected {kind}:<N>x<device>, e.g. {kind}:4xhdd:cheetah15k5"),
        )
    })?;
    let n: usize = count.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
        syntax(
            spec,
            format!("member count `{count}` is not a positive number"),
        )
    })?;
    // Trailing `stripe=` / `block=` belong to the array; the rest names the device.
    let mut parts: Vec<&str> = rest.split(':').collect();
    let (mut stripe, mut block) = (DEFAULT_STRIPE_SECTORS, DEFAULT_BLOCK_SECTORS);
    while let Some(last) = parts.last().and_then(|p| p.split_once('=')) {
        let value = || -> Result<u64, SpecError> {
            last.1
                .parse::<u64>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| {
                    syntax(
                        spec,
                        format!(
                            "{} `{}` is not a positive number of sectors",
                            last.0, last.1
                        ),
                    )
                })
        };
        match last.0 {
            "stripe" => stripe = value()?,
            "block" => block = value()?,
            _ => break,
        }
        parts.pop();
    }
    let device_spec = parts.join(":");
    let members: Vec<Box<dyn Device>> = (0..n)
        .map(|_| parse_device(spec, &device_spec))
        .collect::<Result<_, _>>()?;
    let member_sectors = members[0].capacity_sectors();
    let array: Box<dyn Array> = match kind {
        "raid0" => Box::new(Raid0::new(n, stripe, member_sectors)),
        "raid1" => Box::new(Raid1::new(n, member_sectors)),
        "raid5" if n < 3 => return Err(syntax(spec, "RAID-5 needs at least 3 members")),
        "raid5" => Box::new(Raid5::new(n, stripe, member_sectors)),
        _ => {
            let blocks = member_sectors / block * n as u64;
            Box::new(Placement::new(n, block, blocks))
        }
    };
    Ok(Built { members, array })
}

/// The cache of one disk: as its model says, off, or with write-back caching off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CacheChoice {
    Model,
    Off,
    WriteThrough,
}

/// One device: `hdd:NAME`, `ssd:NAME`, `NAME`, or a TOML path, then `:cache=off` or
/// `:write-cache=off`.
fn parse_device(spec: &str, device: &str) -> Result<Box<dyn Device>, SpecError> {
    let model_err = |error| SpecError::Model {
        spec: spec.to_string(),
        error,
    };
    let (body, cache) = if let Some(b) = device.strip_suffix(":cache=off") {
        (b, CacheChoice::Off)
    } else if let Some(b) = device.strip_suffix(":write-cache=off") {
        (b, CacheChoice::WriteThrough)
    } else {
        (
            device.strip_suffix(":cache=on").unwrap_or(device),
            CacheChoice::Model,
        )
    };
    let (kind, model): (Option<&str>, LoadedModel) =
        if body.ends_with(".toml") || body.contains('/') {
            (None, params::load_path(Path::new(body)).map_err(model_err)?)
        } else {
            let (kind, name) = match body.split_once(':') {
                Some((k @ ("hdd" | "ssd"), n)) => (Some(k), n),
                Some((k, _)) => {
                    return Err(syntax(
                        spec,
                        format!(
                        "unknown device kind `{k}`; known: hdd, ssd, raid0, raid1, raid5, place"
                    ),
                    ));
                }
                None => (None, body),
            };
            (kind, params::builtin(name).map_err(model_err)?)
        };
    build(spec, kind, &model, cache)
}

fn build(
    spec: &str,
    kind: Option<&str>,
    model: &LoadedModel,
    cache: CacheChoice,
) -> Result<Box<dyn Device>, SpecError> {
    match (&model.params, kind) {
        (ModelParams::Hdd(_), None | Some("hdd")) => {
            let hdd = Hdd::new(model).expect("an hdd model builds an Hdd");
            Ok(Box::new(match cache {
                CacheChoice::Model => hdd,
                CacheChoice::Off => hdd.without_cache(),
                CacheChoice::WriteThrough => hdd.without_write_caching(),
            }))
        }
        (ModelParams::Ssd(_), None | Some("ssd")) => Ok(Box::new(
            Ssd::new(model).expect("an ssd model builds an Ssd"),
        )),
        (ModelParams::Hdd(p), Some(k)) => Err(syntax(
            spec,
            format!("`{}` is a disk model (hdd:{}), not {k}", p.name, p.name),
        )),
        (ModelParams::Ssd(p), Some(k)) => Err(syntax(
            spec,
            format!("`{}` is a flash model (ssd:{}), not {k}", p.name, p.name),
        )),
    }
}
