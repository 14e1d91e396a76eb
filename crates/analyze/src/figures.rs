//! What the report's standard plots need, gathered in the same one pass and in bounded
//! memory: log-bucketed histograms of request sizes, inter-arrival times and seek
//! distances (for their CDFs), a decimated sample of (time, address) points for the
//! LBA-over-time scatter, an IOPS timeline whose bins widen as the trace goes on, and a
//! per-command table.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use reblock_trace::Request;

/// Sub-buckets per power of two: values within 1/8 of an octave share a bucket (about
/// 9 % resolution), enough for a CDF drawn on a log axis.
const SUB_BUCKETS: u64 = 8;
/// Points the LBA scatter keeps at most.
pub const SCATTER_POINTS: usize = 20_000;
/// Bins the IOPS timeline keeps at most; the bin width doubles when they would overflow.
pub const TIMELINE_BINS: usize = 1_000;
/// The IOPS timeline's narrowest bin.
const FIRST_BIN_NS: u64 = 1_000_000;

/// Counts of non-negative integers in log buckets: 0 has a bucket of its own, then each
/// power of two is cut into [`SUB_BUCKETS`]. Memory is at most 513 counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
}

impl LogHistogram {
    fn index(v: u64) -> usize {
        if v == 0 {
            return 0;
        }
        let e = 63 - u64::from(v.leading_zeros());
        // The SUB_BUCKETS-ths of the octave [2^e, 2^(e+1)) that v falls in.
        let sub = if e >= 3 {
            (v >> (e - 3)) & (SUB_BUCKETS - 1)
        } else {
            (v << (3 - e)) & (SUB_BUCKETS - 1)
        };
        (1 + e * SUB_BUCKETS + sub) as usize
    }

    /// The upper end (exclusive) of bucket `i`.
    fn upper(i: usize) -> f64 {
        if i == 0 {
            return 1.0;
        }
        let (e, sub) = ((i as u64 - 1) / SUB_BUCKETS, (i as u64 - 1) % SUB_BUCKETS);
        2f64.powi(e as i32) * (1.0 + (sub + 1) as f64 / SUB_BUCKETS as f64)
    }

    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    pub fn record_n(&mut self, v: u64, n: u64) {
        let i = Self::index(v);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += n;
        self.total += n;
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &LogHistogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The share of values below each bucket's upper end, one point per non-empty bucket:
    /// (upper end, cumulative fraction), ending at 1.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            seen += c;
            out.push((Self::upper(i), seen as f64 / self.total as f64));
        }
        out
    }

    /// The value below which a share `q` of the values lie (a bucket's upper end).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        self.cdf()
            .into_iter()
            .find(|&(_, f)| f >= q - 1e-12)
            .map(|(x, _)| x)
    }

    /// Counts per power of two: (lower end, count), 0 first when present.
    pub fn octaves(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (i, &c) in self.counts.iter().enumerate() {
            let lower = if i == 0 {
                0
            } else {
                1u64 << ((i as u64 - 1) / SUB_BUCKETS)
            };
            match out.last_mut() {
                Some(last) if last.0 == lower => last.1 += c,
                _ => out.push((lower, c)),
            }
        }
        out.retain(|&(_, c)| c > 0);
        out
    }
}

/// One point of the LBA-over-time scatter.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LbaPoint {
    pub ts_ns: u64,
    pub sector: u64,
    pub write: bool,
}

/// One command's (process name's) share of the work.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CommandRow {
    pub command: String,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// What the standard plots draw (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FigureData {
    pub size_bytes: LogHistogram,
    pub interarrival_ns: LogHistogram,
    /// Sectors between a request's start and where the previous request on its device
    /// ended (0: sequential).
    pub seek_sectors: LogHistogram,
    /// Every `scatter_stride`-th request, at most [`SCATTER_POINTS`]; left out of the
    /// JSON (the trace itself holds them all).
    #[serde(skip)]
    pub scatter: Vec<LbaPoint>,
    pub scatter_stride: u64,
    /// Requests per bin of `timeline_bin_ns` from the first request's time.
    pub timeline_start_ns: u64,
    pub timeline_bin_ns: u64,
    pub timeline_reads: Vec<u64>,
    pub timeline_writes: Vec<u64>,
    /// By requests, descending; command names once [`FigureData::name_commands`] ran.
    pub commands: Vec<CommandRow>,
}

impl FigureData {
    /// Gives the per-command rows their names (the analyzer only sees command numbers).
    pub fn name_commands<'a>(&mut self, name: impl Fn(u32) -> &'a str) {
        for row in &mut self.commands {
            if let Ok(id) = row.command.parse::<u32>() {
                let n = name(id);
                row.command = if n.is_empty() { "-".into() } else { n.into() };
            }
        }
        // Ties by name, not by id: ids follow the order a reader met the names (a
        // dictionary column's order in Parquet), so the same trace would list its
        // equally busy commands differently by format.
        self.commands.sort_by(|a, b| {
            b.requests
                .cmp(&a.requests)
                .then_with(|| a.command.cmp(&b.command))
        });
    }
}

/// Gathers [`FigureData`] request by request.
#[derive(Default)]
pub struct Figures {
    data: FigureData,
    last_ts_ns: Option<u64>,
    ends: FxHashMap<u32, u64>,
    seen: u64,
    commands: FxHashMap<u32, CommandRow>,
}

impl Figures {
    pub fn new() -> Figures {
        Figures {
            data: FigureData {
                scatter_stride: 1,
                timeline_bin_ns: FIRST_BIN_NS,
                ..FigureData::default()
            },
            ..Figures::default()
        }
    }

    pub fn observe(&mut self, r: &Request) {
        let d = &mut self.data;
        d.size_bytes.record(r.bytes());
        if let Some(last) = self.last_ts_ns {
            d.interarrival_ns.record(r.ts_ns.saturating_sub(last));
        } else {
            d.timeline_start_ns = r.ts_ns;
        }
        self.last_ts_ns = Some(r.ts_ns);
        if let Some(prev_end) = self.ends.insert(r.device, r.end_sector()) {
            d.seek_sectors.record(r.sector.abs_diff(prev_end));
        }
        self.sample(r);
        self.count_in_timeline(r);
        let row = self.commands.entry(r.command).or_default();
        row.requests += 1;
        if r.op.is_write() {
            row.writes += 1;
            row.write_bytes += r.bytes();
        } else {
            row.reads += 1;
            row.read_bytes += r.bytes();
        }
    }

    /// Keeps every stride-th request; when full, keeps every other point and doubles the
    /// stride, so the sample stays spread evenly over the whole trace.
    fn sample(&mut self, r: &Request) {
        let d = &mut self.data;
        if self.seen.is_multiple_of(d.scatter_stride) {
            if d.scatter.len() == SCATTER_POINTS {
                let mut i = 0;
                d.scatter.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                d.scatter_stride *= 2;
            }
            if self.seen.is_multiple_of(d.scatter_stride) {
                d.scatter.push(LbaPoint {
                    ts_ns: r.ts_ns,
                    sector: r.sector,
                    write: r.op.is_write(),
                });
            }
        }
        self.seen += 1;
    }

    /// Counts the request in its bin; past the last bin, pairs of bins merge (the width
    /// doubles) until it fits. A request earlier than the first counts in bin 0.
    fn count_in_timeline(&mut self, r: &Request) {
        let d = &mut self.data;
        let offset = r.ts_ns.saturating_sub(d.timeline_start_ns);
        let mut bin = (offset / d.timeline_bin_ns) as usize;
        while bin >= TIMELINE_BINS {
            for v in [&mut d.timeline_reads, &mut d.timeline_writes] {
                let merged: Vec<u64> = v.chunks(2).map(|c| c.iter().sum()).collect();
                *v = merged;
            }
            d.timeline_bin_ns *= 2;
            bin = (offset / d.timeline_bin_ns) as usize;
        }
        for v in [&mut d.timeline_reads, &mut d.timeline_writes] {
            if v.len() <= bin {
                v.resize(bin + 1, 0);
            }
        }
        let v = if r.op.is_write() {
            &mut d.timeline_writes
        } else {
            &mut d.timeline_reads
        };
        v[bin] += 1;
    }

    pub fn finish(mut self) -> FigureData {
        let mut rows: Vec<(u32, CommandRow)> = self.commands.into_iter().collect();
        rows.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(&b.0)));
        self.data.commands = rows
            .into_iter()
            .map(|(id, mut row)| {
                row.command = id.to_string();
                row
            })
            .collect();
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::Op;

    fn req(ts_ns: u64, sector: u64, sectors: u32, write: bool) -> Request {
        Request {
            ts_ns,
            pid: None,
            command: u32::from(write),
            device: 0,
            sector,
            sectors,
            op: if write { Op::Write } else { Op::Read },
        }
    }

    #[test]
    fn buckets_hold_their_values() {
        for v in [1u64, 2, 3, 7, 8, 9, 15, 16, 100, 4096, 1 << 40, u64::MAX] {
            let i = LogHistogram::index(v);
            let upper = LogHistogram::upper(i);
            let lower = if i == 0 {
                0.0
            } else {
                LogHistogram::upper(i - 1)
            };
            assert!(
                (v as f64) < upper * (1.0 + 1e-12) && v as f64 >= lower * (1.0 - 1e-12),
                "{v}: bucket {i} [{lower}, {upper})"
            );
        }
        assert_eq!(LogHistogram::index(0), 0);
    }

    #[test]
    fn cdf_ends_at_one_and_quantiles_follow_it() {
        let mut h = LogHistogram::default();
        for v in 1..=1000u64 {
            h.record(v);
        }
        let cdf = h.cdf();
        assert_eq!(cdf.last().unwrap().1, 1.0);
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let p50 = h.quantile(0.5).unwrap();
        assert!((480.0..=560.0).contains(&p50), "{p50}");
        let octaves = h.octaves();
        assert_eq!(octaves[0], (1, 1));
        assert_eq!(octaves.iter().map(|o| o.1).sum::<u64>(), 1000);
    }

    #[test]
    fn scatter_and_timeline_stay_bounded_and_cover_the_trace() {
        let mut f = Figures::new();
        let n = 100_000u64;
        for i in 0..n {
            f.observe(&req(i * 10_000_000, i * 8, 8, i % 3 == 0));
        }
        let d = f.finish();
        assert!(d.scatter.len() <= SCATTER_POINTS);
        assert!(d.scatter.len() >= SCATTER_POINTS / 2);
        let last = d.scatter.last().unwrap().ts_ns;
        assert!(last >= (n - 2 * d.scatter_stride) * 10_000_000, "{last}");
        assert!(d.timeline_reads.len() <= TIMELINE_BINS);
        let counted: u64 = d.timeline_reads.iter().chain(&d.timeline_writes).sum();
        assert_eq!(counted, n);
        assert_eq!(d.seek_sectors.total(), n - 1);
        assert_eq!(d.seek_sectors.octaves(), vec![(0, n - 1)], "all sequential");
        assert_eq!(d.commands.len(), 2);
        assert_eq!(d.commands[0].requests + d.commands[1].requests, n);
    }
}
