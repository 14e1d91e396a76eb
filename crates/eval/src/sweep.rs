//! Sensitivity sweeps (seed 000 §6.5): one parameter varied at a time around the base
//! configuration. Spec: `bopt-size=32MiB,64MiB;write-buffer=0,0.2,0.5;interval=1d,6h`.

use crate::config::{bad, parse_fraction, BoptSize, EvalConfig, Interval, ParamError};

/// The parameters a sweep may vary.
pub const SWEEP_PARAMS: [&str; 3] = ["bopt-size", "write-buffer", "interval"];

/// Parameters and their values, in the order given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sweep {
    pub points: Vec<(String, Vec<String>)>,
}

impl Sweep {
    /// Parses and checks a spec; errors name the bad part.
    pub fn parse(spec: &str) -> Result<Sweep, ParamError> {
        let mut points: Vec<(String, Vec<String>)> = Vec::new();
        for part in spec.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, values)) = part.split_once('=') else {
                return Err(bad("sweep", format!("`{part}`: expected PARAM=v1,v2,...")));
            };
            let key = key.trim();
            if !SWEEP_PARAMS.contains(&key) {
                return Err(bad(
                    "sweep",
                    format!(
                        "`{part}`: unknown parameter `{key}` (known: {})",
                        SWEEP_PARAMS.join(", ")
                    ),
                ));
            }
            if points.iter().any(|(k, _)| k == key) {
                return Err(bad("sweep", format!("`{part}`: `{key}` given twice")));
            }
            let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
            for v in &values {
                apply(&EvalConfig::default(), key, v)
                    .map_err(|e| bad("sweep", format!("`{part}`: value `{v}`: {e}")))?;
            }
            points.push((key.to_string(), values));
        }
        if points.is_empty() {
            return Err(bad("sweep", format!("`{spec}`: names no parameter")));
        }
        Ok(Sweep { points })
    }
}

/// `base` with `param` set to `value`.
pub fn apply(base: &EvalConfig, param: &str, value: &str) -> Result<EvalConfig, ParamError> {
    let mut cfg = base.clone();
    match param {
        "bopt-size" => cfg.bopt_size = BoptSize::parse(value)?,
        "write-buffer" => cfg.write_buffer_fraction = parse_fraction("write-buffer", value)?,
        "interval" => cfg.interval = Interval::parse(value)?,
        other => return Err(bad("sweep", format!("unknown parameter `{other}`"))),
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parses_in_order() {
        let s = Sweep::parse("bopt-size=32MiB,64MiB; write-buffer=0,0.5").unwrap();
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[0].0, "bopt-size");
        assert_eq!(s.points[1].1, vec!["0", "0.5"]);
    }

    #[test]
    fn bad_spec_names_the_bad_part() {
        let e = Sweep::parse("bopt-size=32MiB;write-buffer=0,1.7")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`write-buffer=0,1.7`") && e.contains("value `1.7`"),
            "{e}"
        );
        let e = Sweep::parse("bopt-size=1G;cache=3")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown parameter `cache`"), "{e}");
        let e = Sweep::parse("interval").unwrap_err().to_string();
        assert!(e.contains("`interval`: expected PARAM="), "{e}");
    }
}
