//! The parallel-array evaluation's settings as `reblock evaluate --array` and the
//! Python package both spell them ([`ArrayOptions`]), checked into the optimizer's
//! configuration; among them the colouring capacity W (`--capacity`).

use reblock_parallel::session::{OpFilter, SessionMode};
use reblock_parallel::{ArrayEvalConfig, ArraySpec, Policy};

use crate::config::{bad, parse_duration_ns, parse_size_bytes, ParamError};
use crate::EvalError;

/// The array policies when none are named.
pub const DEFAULT_ARRAY_POLICIES: &str = "static,parallel";

/// The array evaluation's settings as the command line spells them; [`Default`] is the
/// command line's (with no array named).
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayOptions {
    /// `ssd:14`, `hdd:100` or `NxDEVICE`.
    pub array: String,
    /// Comma separated (default [`DEFAULT_ARRAY_POLICIES`]).
    pub policies: Option<String>,
    /// The testing part's speed-up (default 1).
    pub speed: Option<f64>,
    pub initial: String,
    pub train_fraction: f64,
    pub support: String,
    pub session: String,
    pub mine: String,
    pub block_size: String,
    pub max_group: String,
    /// Colouring capacity W of a disk (`64MiB`); none: a member's size.
    pub capacity: Option<String>,
    pub seed: u64,
}

impl Default for ArrayOptions {
    fn default() -> Self {
        ArrayOptions {
            array: String::new(),
            policies: None,
            speed: None,
            initial: "zipf:0,0.2,0.4,0.6,0.8,1".into(),
            train_fraction: 0.5,
            support: "1,5,10".into(),
            session: "100us".into(),
            mine: "both".into(),
            block_size: "512".into(),
            max_group: "64KiB".into(),
            capacity: None,
            seed: 3,
        }
    }
}

impl ArrayOptions {
    /// The evaluation's configuration, every value checked and named when bad.
    pub fn config(&self) -> Result<ArrayEvalConfig, EvalError> {
        let policies = (self.policies.as_deref())
            .unwrap_or(DEFAULT_ARRAY_POLICIES)
            .split(',')
            .map(Policy::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad("--policies", e.to_string()))?;
        let speed = self.speed.unwrap_or(1.0);
        if !(speed.is_finite() && speed > 0.0) {
            return Err(bad("--speed", format!("{speed}: must be a positive number")).into());
        }
        let capacity = self.capacity.as_deref();
        Ok(ArrayEvalConfig {
            array: ArraySpec::parse(&self.array).map_err(|e| bad("--array", e.to_string()))?,
            block_sectors: sectors_of("block-size", &self.block_size)?,
            alphas: parse_alphas(&self.initial)?,
            train_fraction: self.train_fraction,
            supports: parse_supports(&self.support)?,
            policies,
            session: parse_session(&self.session)?,
            ops: parse_ops(&self.mine)?,
            max_group_sectors: sectors_of("max-group", &self.max_group)?,
            seed: self.seed,
            speed,
            capacity_bytes: capacity
                .map(|c| capacity_bytes(c, &self.block_size))
                .transpose()?,
            ..ArrayEvalConfig::default()
        })
    }
}

fn parse_alphas(s: &str) -> Result<Vec<f64>, ParamError> {
    let Some(list) = s.strip_prefix("zipf:") else {
        let why = format!("`{s}`: expected zipf:ALPHA[,ALPHA...], e.g. zipf:0,0.5,1");
        return Err(bad("--initial", why));
    };
    list.split(',')
        .map(|a| {
            a.trim()
                .parse::<f64>()
                .ok()
                .filter(|a| a.is_finite() && *a >= 0.0)
                .ok_or_else(|| {
                    bad(
                        "--initial",
                        format!("`{s}`: alpha `{a}` is not a number >= 0"),
                    )
                })
        })
        .collect()
}

fn parse_supports(s: &str) -> Result<Vec<u32>, ParamError> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| {
                    bad(
                        "--support",
                        format!("`{s}`: `{v}` is not a whole number >= 1"),
                    )
                })
        })
        .collect()
}

/// A session: `request` or a window of arrival time (`100us`).
pub fn parse_session(s: &str) -> Result<SessionMode, ParamError> {
    if s == "request" {
        return Ok(SessionMode::Request);
    }
    parse_duration_ns(s)
        .map(SessionMode::WindowNs)
        .map_err(|e| bad("--session", format!("{e}; or `request`")))
}

/// Which requests the miner watches: reads, writes or both.
pub fn parse_ops(s: &str) -> Result<OpFilter, ParamError> {
    OpFilter::parse(s)
        .ok_or_else(|| bad("--mine", format!("`{s}`: expected reads, writes or both")))
}

/// Bytes to whole 512-byte sectors, refusing sizes that are not a multiple.
pub fn sectors_of(flag: &str, s: &str) -> Result<u64, ParamError> {
    let bytes = parse_size_bytes(flag, s)?;
    if !bytes.is_multiple_of(512) {
        return Err(bad(
            &format!("--{flag}"),
            format!("`{s}`: must be a multiple of 512 bytes"),
        ));
    }
    Ok(bytes / 512)
}

/// `--capacity`: a size of at least one block.
fn capacity_bytes(s: &str, block_size: &str) -> Result<u64, ParamError> {
    let bytes = parse_size_bytes("capacity", s)?;
    let block = sectors_of("block-size", block_size)? * 512;
    if bytes < block {
        let why = format!("`{s}`: must hold at least one block ({block} bytes)");
        return Err(bad("--capacity", why));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_bad_values_name_their_flag() {
        assert_eq!(parse_alphas("zipf:0,0.5, 1").unwrap(), vec![0.0, 0.5, 1.0]);
        let e = parse_alphas("uniform").unwrap_err().to_string();
        assert!(e.contains("--initial"), "{e}");
        let e = parse_alphas("zipf:0,-1").unwrap_err().to_string();
        assert!(e.contains("`-1`"), "{e}");
        assert_eq!(parse_supports("1,5,10").unwrap(), vec![1, 5, 10]);
        let e = parse_supports("1,0").unwrap_err().to_string();
        assert!(e.contains("--support") && e.contains("`0`"), "{e}");
        assert_eq!(parse_session("request").unwrap(), SessionMode::Request);
        assert_eq!(
            parse_session("1ms").unwrap(),
            SessionMode::WindowNs(1_000_000)
        );
        assert!(parse_session("soon").is_err());
        assert_eq!(parse_ops("reads").unwrap(), OpFilter::Reads);
        assert!(parse_ops("all").is_err());
        assert_eq!(sectors_of("block-size", "4KiB").unwrap(), 8);
        assert!(sectors_of("block-size", "1000").is_err());
    }

    #[test]
    fn capacity_is_settable_and_must_hold_a_block() {
        let o = ArrayOptions {
            array: "ssd:4".into(),
            capacity: Some("64MiB".into()),
            ..ArrayOptions::default()
        };
        assert_eq!(o.config().unwrap().capacity_bytes, Some(64 << 20));
        let o = ArrayOptions {
            capacity: Some("256".into()),
            ..o
        };
        assert!(o.config().unwrap_err().to_string().contains("--capacity"));
    }
}
