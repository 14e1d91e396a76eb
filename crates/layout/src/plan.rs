//! A plan: the ordered placement of FS pages into read-cache slots, as `plan.json`
//! (written by `reblock plan`, applied by `reblock reconfigure`; schema in
//! docs/layout.md §5).
//!
//! ```json
//! { "version": 1, "page_sectors": 8, "policy": "borg",
//!   "ranges": [ { "fs_page": 100, "pages": 3, "slot": 0 } ] }
//! ```
//!
//! `ranges` come in placement order; FS pages `fs_page .. fs_page + pages` go to read-cache
//! slots `slot .. slot + pages`. No FS page and no slot may appear twice. A range may say
//! `target` instead of `slot`, so a read-cache placement from the planner reads as is.

use crate::bopt::Geometry;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The plan.json schema version this crate reads and writes.
pub const PLAN_VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRange {
    pub fs_page: u64,
    pub pages: u64,
    #[serde(alias = "target")]
    pub slot: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    pub page_sectors: u32,
    /// Which policy made it (free text, for reports).
    #[serde(default)]
    pub policy: String,
    pub ranges: Vec<PlanRange>,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PlanError {
    #[error("{file}:{line}:{column}: {message}")]
    Json {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{file}: space: data-area: this placement reorders the data area's own pages \
         (dlr-frag); a plan places copies into the BOPT read cache and cannot hold it"
    )]
    DataArea { file: String },
    #[error("{file}: version: {found} is not supported (this build reads {PLAN_VERSION})")]
    Version { file: String, found: u32 },
    #[error("page_sectors: plan has {plan}, the device uses {device}")]
    PageSize { plan: u32, device: u64 },
    #[error("ranges[{index}].{field}: {why}")]
    Range {
        index: usize,
        field: &'static str,
        why: String,
    },
}

impl Plan {
    pub fn new(page_sectors: u32, policy: &str) -> Plan {
        Plan {
            version: PLAN_VERSION,
            page_sectors,
            policy: policy.to_string(),
            ranges: Vec::new(),
        }
    }

    /// Appends pages, extending the last range when both sides continue it.
    pub fn push(&mut self, fs_page: u64, pages: u64, slot: u64) {
        if pages == 0 {
            return;
        }
        if let Some(last) = self.ranges.last_mut() {
            if last.fs_page + last.pages == fs_page && last.slot + last.pages == slot {
                last.pages += pages;
                return;
            }
        }
        self.ranges.push(PlanRange {
            fs_page,
            pages,
            slot,
        });
    }

    /// Every (FS page, slot) pair in placement order.
    pub fn pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges
            .iter()
            .flat_map(|r| (0..r.pages).map(move |i| (r.fs_page + i, r.slot + i)))
    }
    pub fn pages(&self) -> u64 {
        self.ranges.iter().map(|r| r.pages).sum()
    }

    /// Parses plan.json text; `file` names it in errors.
    pub fn from_json(text: &str, file: &str) -> Result<Plan, PlanError> {
        // `reblock plan --out` writes a data-area placement (dlr-frag) in its own shape;
        // say what it is rather than which field is missing.
        if let Ok(serde_json::Value::Object(v)) = serde_json::from_str(text) {
            if v.get("space").and_then(|s| s.as_str()) == Some("data-area") {
                return Err(PlanError::DataArea {
                    file: file.to_string(),
                });
            }
        }
        let plan: Plan = serde_json::from_str(text).map_err(|e| PlanError::Json {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if plan.version != PLAN_VERSION {
            return Err(PlanError::Version {
                file: file.to_string(),
                found: plan.version,
            });
        }
        Ok(plan)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan always serializes")
    }

    /// Checks the plan fits `g`: page size, FS pages inside the data area, slots inside
    /// the read cache, no FS page and no slot twice. Errors name the range and field.
    pub fn validate(&self, g: &Geometry) -> Result<(), PlanError> {
        if u64::from(self.page_sectors) != g.page.sectors() {
            return Err(PlanError::PageSize {
                plan: self.page_sectors,
                device: g.page.sectors(),
            });
        }
        let range_err = |index, field, why| PlanError::Range { index, field, why };
        for (i, r) in self.ranges.iter().enumerate() {
            if r.pages == 0 {
                return Err(range_err(i, "pages", "must be at least 1".into()));
            }
            if r.fs_page.saturating_add(r.pages) > g.fs_pages {
                let why = format!(
                    "pages {}..{} pass the data area's {} pages",
                    r.fs_page,
                    r.fs_page + r.pages,
                    g.fs_pages
                );
                return Err(range_err(i, "fs_page", why));
            }
            if r.slot.saturating_add(r.pages) > u64::from(g.read_cache_pages) {
                let why = format!(
                    "slots {}..{} pass the read cache's {} slots",
                    r.slot,
                    r.slot + r.pages,
                    g.read_cache_pages
                );
                return Err(range_err(i, "slot", why));
            }
        }
        no_overlap(
            self.ranges.iter().map(|r| r.fs_page),
            &self.ranges,
            "fs_page",
            "FS page",
        )?;
        no_overlap(
            self.ranges.iter().map(|r| r.slot),
            &self.ranges,
            "slot",
            "slot",
        )
    }
}

fn no_overlap(
    starts: impl Iterator<Item = u64>,
    ranges: &[PlanRange],
    field: &'static str,
    what: &str,
) -> Result<(), PlanError> {
    let mut spans: Vec<(u64, u64, usize)> = starts
        .zip(ranges)
        .enumerate()
        .map(|(i, (s, r))| (s, s + r.pages, i))
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        let ((_, a_end, a), (b_start, _, b)) = (w[0], w[1]);
        if b_start < a_end {
            let (first, second) = (a.min(b), a.max(b));
            let why = format!("{what} {b_start} is also placed by ranges[{first}]");
            return Err(PlanError::Range {
                index: second,
                field,
                why,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bopt::{BoptConfig, BoptPosition};

    fn geo() -> Geometry {
        Geometry::new(&BoptConfig {
            page_sectors: 8,
            data_sectors: 8 * 100,
            bopt_pages: 16,
            segment_pages: 4,
            write_buffer_fraction: 0.25,
            position: BoptPosition::End,
            meta_sectors: 0,
        })
        .unwrap()
    }

    #[test]
    fn json_roundtrip_and_target_alias() {
        let mut p = Plan::new(8, "borg");
        p.push(10, 2, 0);
        p.push(12, 1, 2);
        p.push(50, 1, 5);
        assert_eq!(p.ranges.len(), 2);
        let back = Plan::from_json(&p.to_json(), "plan.json").unwrap();
        assert_eq!(back, p);
        let planner =
            r#"{"version":1,"page_sectors":8,"ranges":[{"fs_page":3,"pages":2,"target":7}]}"#;
        let q = Plan::from_json(planner, "p.json").unwrap();
        assert_eq!(q.pairs().collect::<Vec<_>>(), vec![(3, 7), (4, 8)]);
        q.validate(&geo()).unwrap();
    }

    #[test]
    fn bad_json_names_file_line_and_column() {
        let err = Plan::from_json("{\n \"version\": 1,\n \"page_sectors\": \"x\"}", "a.json")
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("a.json:3:"), "{msg}");
        let err =
            Plan::from_json(r#"{"version":9,"page_sectors":8,"ranges":[]}"#, "b.json").unwrap_err();
        assert_eq!(
            err.to_string(),
            "b.json: version: 9 is not supported (this build reads 1)"
        );
    }

    #[test]
    fn validation_names_the_range_and_field() {
        let g = geo(); // read cache = 12 slots, data = 100 pages
        let mut p = Plan::new(8, "t");
        p.ranges.push(PlanRange {
            fs_page: 0,
            pages: 2,
            slot: 11,
        });
        assert_eq!(
            p.validate(&g).unwrap_err().to_string(),
            "ranges[0].slot: slots 11..13 pass the read cache's 12 slots"
        );
        let mut p = Plan::new(8, "t");
        p.ranges.push(PlanRange {
            fs_page: 5,
            pages: 3,
            slot: 0,
        });
        p.ranges.push(PlanRange {
            fs_page: 7,
            pages: 1,
            slot: 5,
        });
        assert_eq!(
            p.validate(&g).unwrap_err().to_string(),
            "ranges[1].fs_page: FS page 7 is also placed by ranges[0]"
        );
        let mut p = Plan::new(8, "t");
        p.ranges.push(PlanRange {
            fs_page: 1,
            pages: 1,
            slot: 4,
        });
        p.ranges.push(PlanRange {
            fs_page: 9,
            pages: 2,
            slot: 3,
        });
        assert!(p
            .validate(&g)
            .unwrap_err()
            .to_string()
            .starts_with("ranges[1].slot: slot 4"));
        assert!(matches!(
            Plan::new(4, "t").validate(&g),
            Err(PlanError::PageSize { .. })
        ));
    }
}
