//! The device a run uses and the trace folded into its data area.
//!
//! The device holds the data area and the BOPT (same device, as in BORG, seed 000 §3.3).
//! The data area is either the device's capacity minus the BOPT (`DataArea::Device`: the
//! file system fills the disk) or the trace's address range (`DataArea::Trace`). A request
//! past the data area is an error naming it, or with `wrap` is folded back modulo the data
//! area (moved back whole when it straddles the end, as the simulator's --wrap does).

use std::borrow::Cow;

use reblock_layout::{BoptConfig, BoptPosition, Geometry};
use reblock_trace::{Request, RequestLog, RequestSpan};

use crate::config::{BoptAt, BoptSize, DataArea, EvalConfig};
use crate::results::GeometrySummary;
use crate::EvalError;

/// The trace ready to replay and the geometry it replays on. The requests are the
/// caller's own log when none needed folding (the usual case): no copy.
#[derive(Clone, Debug)]
pub struct Workload<'t> {
    pub requests: Cow<'t, RequestLog>,
    pub geo: Geometry,
    pub summary: GeometrySummary,
}

/// Pages per segment: 256 (1 MiB) as the seed's segments, fewer for a small BOPT so the
/// write-buffer fraction keeps a resolution of 1/64.
fn segment_pages(bopt_pages: u64) -> u64 {
    if bopt_pages >= 64 * 256 {
        256
    } else {
        (bopt_pages / 64).max(1)
    }
}

/// BOPT pages and segment pages for a BOPT of `bopt_size_bytes` (whole segments).
pub fn bopt_pages(bopt_size_bytes: u64, page_sectors: u32) -> (u64, u64) {
    let page_bytes = u64::from(page_sectors) * 512;
    let seg = segment_pages(bopt_size_bytes / page_bytes);
    (bopt_size_bytes / page_bytes / seg * seg, seg)
}

/// Sizes the data area and BOPT on a device of `capacity_sectors`, and folds requests.
pub fn prepare<'t>(
    log: &'t RequestLog,
    cfg: &EvalConfig,
    capacity_sectors: u64,
) -> Result<Workload<'t>, EvalError> {
    let requests = log.span();
    let ps = u64::from(cfg.page_sectors);
    let page_bytes = ps * 512;
    let bopt_size_bytes = match cfg.bopt_size {
        BoptSize::Bytes(b) => b,
        BoptSize::Auto => auto_bopt_bytes(requests, cfg, capacity_sectors),
    };
    let (bopt_pages, seg) = bopt_pages(bopt_size_bytes, cfg.page_sectors);
    if bopt_pages == 0 {
        return Err(EvalError::Setup(format!(
            "bopt-size: {bopt_size_bytes} bytes hold no {page_bytes}-byte page"
        )));
    }
    let bopt_sectors = bopt_pages * ps;
    if bopt_sectors >= capacity_sectors {
        return Err(EvalError::Setup(format!(
            "bopt-size: the BOPT ({bopt_sectors} sectors) does not fit on the device \
             ({capacity_sectors} sectors)"
        )));
    }
    let room = (capacity_sectors - bopt_sectors) / ps * ps;
    let trace_end = requests.iter().map(|r| r.end_sector()).max().unwrap_or(0);
    let data_sectors = match cfg.data_area {
        DataArea::Device => room,
        DataArea::Trace => trace_end.div_ceil(ps).max(1) * ps,
        DataArea::Sectors(n) => n.div_ceil(ps).max(1) * ps,
    };
    if data_sectors > room && !cfg.wrap {
        return Err(EvalError::Setup(format!(
            "the trace reaches sector {trace_end} but the device ({capacity_sectors} sectors) \
             minus the BOPT ({bopt_sectors}) leaves {room}; use --wrap or a larger device"
        )));
    }
    let data_sectors = data_sectors.min(room);
    let position = match cfg.bopt_at {
        BoptAt::Auto => {
            BoptPosition::AtFsSector((median_sector(requests) / ps * ps).min(data_sectors))
        }
        BoptAt::Start => BoptPosition::Start,
        BoptAt::Middle => BoptPosition::Middle,
        BoptAt::End => BoptPosition::End,
        BoptAt::Sector(s) => BoptPosition::AtFsSector((s / ps * ps).min(data_sectors)),
    };
    let geo = Geometry::new(&BoptConfig {
        page_sectors: cfg.page_sectors,
        data_sectors,
        bopt_pages: bopt_pages as u32,
        segment_pages: seg as u32,
        write_buffer_fraction: cfg.write_buffer_fraction,
        position,
        meta_sectors: 0,
    })
    .map_err(|e| EvalError::Setup(format!("BOPT geometry: {e}")))?;
    let (requests, wrapped) = fold(log, data_sectors, cfg.wrap)?;
    let summary = GeometrySummary {
        device_capacity_sectors: capacity_sectors,
        data_sectors,
        page_bytes,
        bopt_pages,
        read_cache_pages: u64::from(geo.read_cache_pages),
        write_buffer_pages: u64::from(geo.write_buffer_pages),
        segment_pages: seg,
        bopt_start_sector: geo.bopt_start_sector,
        wrapped_requests: wrapped,
        free_pages: None,
        free_space: None,
        phase_boundaries: None,
    };
    Ok(Workload {
        requests,
        geo,
        summary,
    })
}

/// The BOPT `--bopt-size auto` formats: a read cache holding every page the trace reads
/// more than once (a page read once gains nothing from being placed), grown by the
/// write buffer's share, in whole MiB; at least 4 MiB, at most a tenth of the device.
/// Copies are admitted only where they pay, so a generous region costs nothing unused.
pub fn auto_bopt_bytes(requests: RequestSpan<'_>, cfg: &EvalConfig, capacity_sectors: u64) -> u64 {
    let page = reblock_layout::PageSize::new(cfg.page_sectors).expect("validated page size");
    let mut reads: rustc_hash::FxHashMap<u64, u32> = rustc_hash::FxHashMap::default();
    for r in requests.iter().filter(|r| !r.op.is_write()) {
        let first = page.page_of(r.sector);
        for p in first..first + page.pages_spanned(r.sector, u64::from(r.sectors)) {
            *reads.entry(p).or_default() += 1;
        }
    }
    let repeated = reads.values().filter(|&&n| n > 1).count() as u64;
    let read_cache = repeated * page.bytes();
    let total = read_cache as f64 / (1.0 - cfg.write_buffer_fraction.min(0.9));
    const MIB: u64 = 1 << 20;
    let max = (capacity_sectors * 512 / 10 / MIB * MIB).max(4 * MIB);
    ((total as u64).div_ceil(MIB) * MIB).clamp(4 * MIB, max)
}

/// The median start sector of the requests: where the mean distance to them is least.
/// The value `select_nth_unstable` would pick at the middle of the sorted sectors, found
/// without holding every sector: a histogram of 2^16 buckets narrows the range that holds
/// it, pass after pass, until the sectors inside it are few enough to hold and select.
fn median_sector(requests: RequestSpan<'_>) -> u64 {
    median_holding(requests, 1 << 20)
}

/// [`median_sector`], holding at most about `few` sectors at once.
fn median_holding(requests: RequestSpan<'_>, few: usize) -> u64 {
    if requests.is_empty() {
        return 0;
    }
    // The candidates: sectors in lo..=hi, of which the one at `rank` in order.
    let (mut lo, mut hi, mut rank, mut inside) =
        (0u64, u64::MAX, requests.len() / 2, requests.len());
    let sectors = || requests.iter().map(|r| r.sector);
    while inside > few && lo < hi {
        let shift = (64 - (hi - lo).leading_zeros()).saturating_sub(16);
        let mut counts = vec![0usize; 1 << 16];
        for s in sectors().filter(|s| (lo..=hi).contains(s)) {
            counts[((s - lo) >> shift) as usize] += 1;
        }
        let mut before = 0;
        let bucket = (counts.iter().position(|&c| {
            before += c;
            before > rank
        }))
        .expect("rank is below the count inside");
        before -= counts[bucket];
        rank -= before;
        inside = counts[bucket];
        lo += (bucket as u64) << shift;
        hi = hi.min(lo.saturating_add((1u64 << shift) - 1));
    }
    let mut held: Vec<u64> = sectors().filter(|s| (lo..=hi).contains(s)).collect();
    *held.select_nth_unstable(rank).1
}

/// Requests inside `0 .. data_sectors`, folded when `wrap`; the count folded. Borrowed
/// when every request is inside already.
fn fold(
    requests: &RequestLog,
    data: u64,
    wrap: bool,
) -> Result<(Cow<'_, RequestLog>, u64), EvalError> {
    if requests.iter().all(|r| r.end_sector() <= data) {
        return Ok((Cow::Borrowed(requests), 0));
    }
    let mut wrapped = 0;
    let mut out = RequestLog::new();
    for (i, r) in requests.iter().enumerate() {
        let n = u64::from(r.sectors);
        if r.end_sector() <= data {
            out.push(r);
            continue;
        }
        if !wrap || n > data {
            return Err(EvalError::Setup(format!(
                "request {}: sectors {}..{} pass the data area's {data} sectors{}",
                i + 1,
                r.sector,
                r.end_sector(),
                if wrap {
                    " (larger than the data area)"
                } else {
                    "; use --wrap"
                }
            )));
        }
        wrapped += 1;
        out.push(Request {
            sector: (r.sector % data).min(data - n),
            ..r
        });
    }
    out.shrink_to_fit();
    Ok((Cow::Owned(out), wrapped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::{Op, RequestLog};

    fn at(sector: u64) -> Request {
        Request {
            ts_ns: 0,
            pid: None,
            command: 0,
            device: 0,
            sector,
            sectors: 1,
            op: Op::Read,
        }
    }

    #[test]
    fn the_median_is_what_selecting_from_every_sector_gives() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let shapes: [&dyn Fn(u64) -> u64; 4] = [
            &|r| r,
            &|r| r % 1000,
            &|r| if r % 3 == 0 { 77 } else { r >> 30 },
            &|r| (r % 5) << 60,
        ];
        for shape in shapes {
            for n in [1, 2, 3, 10, 999, 5000] {
                let sectors: Vec<u64> = (0..n).map(|_| shape(rand())).collect();
                let log: RequestLog = sectors.iter().map(|&s| at(s)).collect();
                let mut sorted = sectors.clone();
                sorted.sort_unstable();
                for few in [1, 16, 1 << 20] {
                    assert_eq!(
                        median_holding(log.span(), few),
                        sorted[n / 2],
                        "n {n} few {few}"
                    );
                }
            }
        }
    }
}
