//! Which data-area pages an evaluation takes as free for FS2's replicas
//! (`evaluate --free-space SPEC`). A trace says which pages hold data only where it
//! touches them, so every source but a free-extent file is an assumption, and the
//! evaluation reports which one it made.

use std::borrow::Borrow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use reblock_freespace::FreeExtents;
use reblock_trace::{Discard, Request};
use serde::{Deserialize, Serialize, Serializer};

use crate::config::{bad, ParamError};

/// Where free space comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FreeSpace {
    /// Every data-area page the trace never reads or writes.
    Untouched,
    /// This fraction of the data area, spread evenly over the pages the trace never
    /// touches (all of them when fewer are untouched).
    Fraction(f64),
    /// The extents of a `reblock freemap --json` report of the traced file system.
    File(PathBuf),
    /// What the trace's discards (TRIM) freed: pages a discard covers whole and no later
    /// request touches, i.e. the free space at the trace's end as the file system told
    /// the device.
    Discards(Discards),
}

/// The discards of one trace device, shared (not copied) by every parameter point's
/// config; the JSON config shows how many there are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Discards(pub Arc<Vec<Discard>>);

impl Serialize for Discards {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0.len() as u64)
    }
}

/// A free-space source that cannot be used, naming it.
#[derive(Debug, thiserror::Error)]
pub enum FreeSpaceError {
    #[error("free space file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("free space file {path}: not a `reblock freemap --json` report: {source}")]
    Format {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("free space file {path}: extent {index} ({start} + {len} {unit}) overflows")]
    Overflow {
        path: PathBuf,
        index: usize,
        start: u64,
        len: u64,
        unit: String,
    },
}

impl FreeSpace {
    /// `untouched`, a fraction in [0, 1] (`0.3`), or the path of a free-extent file.
    pub fn parse(s: &str) -> Result<FreeSpace, ParamError> {
        let s = s.trim();
        if s == "untouched" {
            return Ok(FreeSpace::Untouched);
        }
        if s == "discards" {
            return Ok(FreeSpace::Discards(Discards::default()));
        }
        if s.starts_with(|c: char| c.is_ascii_digit() || c == '.') && !Path::new(s).exists() {
            let v: f64 = s.parse().map_err(|_| {
                bad(
                    "free-space",
                    format!("`{s}`: expected untouched, discards, a fraction like 0.3 or a file"),
                )
            })?;
            if !(0.0..=1.0).contains(&v) {
                return Err(bad("free-space", format!("`{s}`: a fraction is 0 to 1")));
            }
            return Ok(FreeSpace::Fraction(v));
        }
        if s.is_empty() {
            return Err(bad(
                "free-space",
                "expected untouched, discards, a fraction or a file",
            ));
        }
        Ok(FreeSpace::File(PathBuf::from(s)))
    }

    /// The assumption behind it, in words for the report.
    pub fn assumption(&self) -> String {
        match self {
            FreeSpace::Untouched => {
                "assumed: every data-area page the trace never touches is free".into()
            }
            FreeSpace::Fraction(f) => format!(
                "assumed: {:.0}% of the data area is free, spread evenly over the pages \
                 the trace never touches",
                f * 100.0
            ),
            FreeSpace::File(p) => format!("the free extents of {}", p.display()),
            FreeSpace::Discards(d) => format!(
                "what the trace's {} discards freed (pages a discard covers whole and no \
                 later request touches: the free space at the trace's end)",
                d.0.len()
            ),
        }
    }

    /// The free pages of a data area of `data_pages` pages of `page_sectors` sectors
    /// for `requests` (already folded into the data area).
    pub fn resolve<R: Borrow<Request>>(
        &self,
        requests: impl IntoIterator<Item = R> + Copy,
        data_pages: u64,
        page_sectors: u64,
    ) -> Result<FreeExtents, FreeSpaceError> {
        let untouched = untouched_pages(requests, data_pages, page_sectors);
        Ok(match self {
            FreeSpace::Untouched => untouched,
            FreeSpace::Fraction(f) => spread(&untouched, (f * data_pages as f64) as u64),
            FreeSpace::File(path) => {
                let sectors = read_freemap(path)?;
                let mut pages = sectors.coarsened(page_sectors);
                pages.remove(data_pages, u64::MAX);
                pages
            }
            FreeSpace::Discards(d) => discarded_pages(requests, &d.0, data_pages, page_sectors),
        })
    }
}

/// Data-area pages that `discards` freed and no later request touches (`requests` in
/// time order): a page is free when a discard covers it whole, and taken again by any
/// request that touches it afterwards. Discards past the data area are ignored.
pub fn discarded_pages<R: Borrow<Request>>(
    requests: impl IntoIterator<Item = R>,
    discards: &[Discard],
    data_pages: u64,
    page_sectors: u64,
) -> FreeExtents {
    let mut order: Vec<&Discard> = discards.iter().collect();
    order.sort_by_key(|d| d.ts_ns);
    let mut order = order.into_iter().peekable();
    let mut free = FreeExtents::new();
    let discard = |free: &mut FreeExtents, d: &Discard| {
        let first = d.sector.div_ceil(page_sectors);
        let end = ((d.sector + u64::from(d.sectors)) / page_sectors).min(data_pages);
        if first < end {
            free.insert(first, end);
        }
    };
    for r in requests {
        let r = r.borrow();
        while let Some(d) = order.next_if(|d| d.ts_ns < r.ts_ns) {
            discard(&mut free, d);
        }
        if !free.is_empty() {
            free.remove(
                r.sector / page_sectors,
                r.end_sector().div_ceil(page_sectors),
            );
        }
    }
    for d in order {
        discard(&mut free, d);
    }
    free
}

/// Data-area pages no request touches (a partly touched page is touched).
pub fn untouched_pages<R: Borrow<Request>>(
    requests: impl IntoIterator<Item = R>,
    data_pages: u64,
    page_sectors: u64,
) -> FreeExtents {
    let mut touched = touched_pages(requests, page_sectors);
    touched.sort_unstable();
    let mut free = FreeExtents::new();
    let mut at = 0;
    for (s, e) in touched {
        if s > at {
            free.insert(at, s.min(data_pages));
        }
        at = at.max(e);
    }
    if at < data_pages {
        free.insert(at, data_pages);
    }
    free
}

/// The page ranges `requests` touch, overlapping and adjacent ones merged as they come
/// (every million ranges), so that memory follows the pages touched, not the requests.
fn touched_pages<R: Borrow<Request>>(
    requests: impl IntoIterator<Item = R>,
    page_sectors: u64,
) -> Vec<(u64, u64)> {
    const MERGE_EVERY: usize = 1 << 20;
    let mut touched: Vec<(u64, u64)> = Vec::new();
    let mut merged_len = 0;
    for r in requests {
        let r = r.borrow();
        let end = r.sector + u64::from(r.sectors);
        touched.push((r.sector / page_sectors, end.div_ceil(page_sectors)));
        if touched.len() >= merged_len + MERGE_EVERY {
            coalesce(&mut touched);
            merged_len = touched.len();
        }
    }
    touched
}

/// Sorts `ranges` and merges those that overlap or meet.
fn coalesce(ranges: &mut Vec<(u64, u64)>) {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(s, e) in ranges.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    *ranges = out;
}

/// `want` pages of `pool` chosen evenly along it (all of it when it holds fewer).
fn spread(pool: &FreeExtents, want: u64) -> FreeExtents {
    let total = pool.total();
    if want >= total {
        return pool.clone();
    }
    let mut out = FreeExtents::new();
    // Page i of the pool (in address order) is taken when it crosses a multiple of
    // total / want: Bresenham's even spacing.
    let mut i = 0u128;
    for r in pool.iter() {
        for p in r {
            let (a, b) = (i * u128::from(want), (i + 1) * u128::from(want));
            if a / u128::from(total) != b / u128::from(total) {
                out.insert(p, p + 1);
            }
            i += 1;
        }
    }
    out
}

/// `reblock freemap --json`'s report: the fields a free-extent file needs.
#[derive(Deserialize)]
struct FreemapReport {
    block_size: u64,
    /// The file system's size in blocks (absent from hand-written extent files).
    #[serde(default)]
    blocks: Option<u64>,
    unit: String,
    extents: Vec<FreemapExtent>,
}

/// The size in 512-byte sectors of the file system a free-extent file describes, when the
/// file says (`blocks` x `block_size`); none when it does not or cannot be read (reading
/// the extents later reports why).
pub fn file_system_sectors(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let rep: FreemapReport = serde_json::from_str(&text).ok()?;
    let bytes = rep.blocks?.checked_mul(rep.block_size)?;
    (bytes >= 512).then_some(bytes / 512)
}

#[derive(Deserialize)]
struct FreemapExtent {
    start: u64,
    len: u64,
}

/// The free extents of a `reblock freemap --json` report, in 512-byte sectors.
fn read_freemap(path: &Path) -> Result<FreeExtents, FreeSpaceError> {
    let text = std::fs::read_to_string(path).map_err(|source| FreeSpaceError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let rep: FreemapReport =
        serde_json::from_str(&text).map_err(|source| FreeSpaceError::Format {
            path: path.to_path_buf(),
            source,
        })?;
    let (num, den) = match rep.unit.as_str() {
        "blocks" => (rep.block_size, 512),
        "bytes" => (1, 512),
        _ => (1, 1),
    };
    let mut out = FreeExtents::new();
    for (index, e) in rep.extents.iter().enumerate() {
        let overflow = || FreeSpaceError::Overflow {
            path: path.to_path_buf(),
            index,
            start: e.start,
            len: e.len,
            unit: rep.unit.clone(),
        };
        let end = e.start.checked_add(e.len).ok_or_else(overflow)?;
        let s = e.start.checked_mul(num).ok_or_else(overflow)?.div_ceil(den);
        let t = end.checked_mul(num).ok_or_else(overflow)? / den;
        out.insert(s, t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::{Op, Request};

    fn req(sector: u64, sectors: u32) -> Request {
        Request::try_new(
            0,
            None,
            reblock_trace::NO_COMMAND,
            0,
            sector,
            sectors,
            Op::Read,
        )
        .unwrap()
    }

    #[test]
    fn a_freemap_report_gives_its_file_systems_size() {
        let dir = tempfile::tempdir().unwrap();
        let with = dir.path().join("fs.json");
        std::fs::write(
            &with,
            r#"{"block_size": 4096, "blocks": 1048576, "unit": "sectors", "extents": []}"#,
        )
        .unwrap();
        assert_eq!(file_system_sectors(&with), Some(8_388_608));
        let without = dir.path().join("hand.json");
        std::fs::write(
            &without,
            r#"{"block_size": 4096, "unit": "blocks", "extents": []}"#,
        )
        .unwrap();
        assert_eq!(file_system_sectors(&without), None);
        assert_eq!(file_system_sectors(&dir.path().join("missing.json")), None);
    }

    #[test]
    fn sources_parse_and_resolve() {
        assert_eq!(FreeSpace::parse("untouched").unwrap(), FreeSpace::Untouched);
        assert_eq!(FreeSpace::parse("0.3").unwrap(), FreeSpace::Fraction(0.3));
        assert!(FreeSpace::parse("1.5")
            .unwrap_err()
            .to_string()
            .starts_with("free-space"));
        let reqs = [req(8, 8), req(20, 8), req(80, 1)];
        // Pages 1, 2, 3 and 10 are touched (the second request straddles pages 2 and 3).
        let free = FreeSpace::Untouched.resolve(reqs, 20, 8).unwrap();
        assert_eq!(free.iter().collect::<Vec<_>>(), vec![0..1, 4..10, 11..20]);
        let some = FreeSpace::Fraction(0.25).resolve(reqs, 20, 8).unwrap();
        assert_eq!(some.total(), 5);
        assert!(some.iter().all(|r| free.covers(r.start, r.end)));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("free.json");
        std::fs::write(
            &path,
            r#"{"block_size": 4096, "unit": "blocks", "extents": [{"start": 2, "len": 3}]}"#,
        )
        .unwrap();
        let file = FreeSpace::parse(path.to_str().unwrap()).unwrap();
        assert_eq!(
            file.resolve(reqs, 4, 8).unwrap().iter().collect::<Vec<_>>(),
            vec![2..4]
        );
        // Discards free the pages they cover whole; a later request takes them back, an
        // earlier one does not.
        let at = |ts_ns: u64, sector: u64, sectors: u32| Discard {
            ts_ns,
            device: 0,
            sector,
            sectors,
        };
        let mut timed = reqs;
        for (i, r) in timed.iter_mut().enumerate() {
            r.ts_ns = 10 * (i as u64 + 1); // pages 1 at 10, 2-3 at 20, 10 at 30
        }
        let d = FreeSpace::parse("discards").unwrap();
        assert_eq!(d, FreeSpace::Discards(Discards::default()));
        let d = FreeSpace::Discards(Discards(Arc::new(vec![
            at(15, 4, 60),   // pages 1-7 whole (page 0 only partly): page 2-3 read later
            at(25, 80, 800), // pages 10-19 (and past the data area): page 10 read later
        ])));
        let free = d.resolve(timed, 20, 8).unwrap();
        assert_eq!(free.iter().collect::<Vec<_>>(), vec![1..2, 4..8, 11..20]);
        assert!(d.assumption().contains("2 discards"));
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            serde_json::json!({"discards": 2})
        );

        std::fs::write(&path, "{}").unwrap();
        let err = file.resolve(reqs, 4, 8).unwrap_err().to_string();
        assert!(
            err.contains("free.json") && err.contains("freemap"),
            "{err}"
        );
    }
}
