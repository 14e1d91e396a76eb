//! Replay of synchronous request streams: each stream (one query, one thread) issues its
//! next request only after the previous one completed plus a think time, and the device
//! serves one request at a time. With several streams the device's queue is ordered by
//! an anticipatory scheduler (Iyer and Druschel; the dissertation's §2.6 "Effect of query
//! interleaving"): after serving a stream it stays with that stream while its next
//! request comes within the anticipation window, for at most one batch time slice,
//! instead of switching to a request already waiting from another stream. With a zero
//! window it is first come, first served.
//!
//! Unlike [`crate::Replay`], arrivals here depend on completions, which a trace replay
//! cannot express.

use reblock_device::{DevRequest, Device};

/// How the streams are paced and scheduled.
#[derive(Clone, Debug)]
pub struct StreamsConfig {
    /// Think times between a completion and the stream's next request, used in turn.
    /// Empty means none.
    pub think_ns: Vec<u64>,
    /// How long the device may idle waiting for the stream it last served; 0 disables
    /// anticipation (first come, first served).
    pub anticipation_ns: u64,
    /// Longest time slice one stream keeps the device while others wait.
    pub batch_ns: u64,
}

impl Default for StreamsConfig {
    fn default() -> StreamsConfig {
        // Linux's anticipatory scheduler defaults: antic_expire 6 ms, read batch 500 ms.
        StreamsConfig {
            think_ns: Vec::new(),
            anticipation_ns: 6_000_000,
            batch_ns: 500_000_000,
        }
    }
}

/// What serving the streams cost.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamsReport {
    /// Disk busy time: the sum of service times (and background media work).
    pub busy_ns: u64,
    pub seek_ns: u64,
    pub rotate_ns: u64,
    pub transfer_ns: u64,
    pub ios: u64,
    pub cache_hits: u64,
    /// When the last request of all completed.
    pub makespan_ns: u64,
    /// When each stream's last request completed.
    pub stream_end_ns: Vec<u64>,
}

/// The stream to serve next at `now`: the last served one while anticipation holds,
/// else the one whose request has waited longest.
fn pick(
    streams: &[Vec<DevRequest>],
    next: &[usize],
    ready: &[u64],
    current: Option<(usize, u64)>,
    now: u64,
    cfg: &StreamsConfig,
) -> Option<usize> {
    let live = |i: &usize| next[*i] < streams[*i].len();
    let earliest = (0..streams.len())
        .filter(live)
        .min_by_key(|&i| (ready[i], i))?;
    if let Some((c, slice_start)) = current {
        let others_waiting = (0..streams.len()).any(|i| i != c && live(&i) && ready[i] <= now);
        let in_slice = now.saturating_sub(slice_start) < cfg.batch_ns || !others_waiting;
        if cfg.anticipation_ns > 0 && live(&c) && ready[c] <= now + cfg.anticipation_ns && in_slice
        {
            return Some(c);
        }
    }
    Some(earliest)
}

/// Serves `streams` on `dev` from time 0 and reports the cost.
pub fn replay_streams(
    dev: &mut dyn Device,
    streams: &[Vec<DevRequest>],
    cfg: &StreamsConfig,
) -> StreamsReport {
    let n = streams.len();
    let mut next = vec![0usize; n];
    let mut ready = vec![0u64; n];
    let mut thinks = 0usize;
    let mut report = StreamsReport {
        stream_end_ns: vec![0; n],
        ..StreamsReport::default()
    };
    let mut now = 0u64;
    let mut current: Option<(usize, u64)> = None;
    while let Some(i) = pick(streams, &next, &ready, current, now, cfg) {
        let start = now.max(ready[i]);
        if current.map(|c| c.0) != Some(i) {
            current = Some((i, start));
        }
        let s = dev.service(start, &streams[i][next[i]]);
        now = start + s.total_ns;
        report.busy_ns += s.total_ns + s.background_ns;
        report.seek_ns += s.seek_ns;
        report.rotate_ns += s.rotate_ns;
        report.transfer_ns += s.transfer_ns;
        report.ios += 1;
        report.cache_hits += s.cache_hit as u64;
        let think = cfg
            .think_ns
            .get(thinks % cfg.think_ns.len().max(1))
            .copied();
        thinks += 1;
        ready[i] = now + think.unwrap_or(0);
        next[i] += 1;
        if next[i] == streams[i].len() {
            report.stream_end_ns[i] = now;
        }
    }
    let drain = dev.drain();
    report.busy_ns += drain.busy_ns;
    report.makespan_ns = now.max(drain.end_ns);
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_device::params::builtin;
    use reblock_device::Hdd;

    fn read(sector: u64) -> DevRequest {
        DevRequest {
            sector,
            sectors: 8,
            write: false,
        }
    }

    fn disk() -> Hdd {
        Hdd::new(&builtin("barracuda").unwrap())
            .unwrap()
            .without_cache()
    }

    /// Two sequential runs far apart on the disk.
    fn two_runs() -> Vec<Vec<DevRequest>> {
        vec![
            (0..50).map(|i| read(i * 8)).collect(),
            (0..50).map(|i| read(2_000_000 + i * 8)).collect(),
        ]
    }

    #[test]
    fn one_stream_is_served_back_to_back_with_its_think_time() {
        let s = vec![(0..10).map(|i| read(i * 8)).collect::<Vec<_>>()];
        let cfg = StreamsConfig {
            think_ns: vec![1_000_000],
            ..StreamsConfig::default()
        };
        let r = replay_streams(&mut disk(), &s, &cfg);
        assert_eq!(r.ios, 10);
        // Ten services and nine think times in between (plus one after the last, unused).
        assert!(r.makespan_ns >= r.busy_ns + 9_000_000, "{r:?}");
    }

    #[test]
    fn anticipation_keeps_interleaved_sequential_streams_sequential() {
        let fcfs = StreamsConfig {
            anticipation_ns: 0,
            ..StreamsConfig::default()
        };
        let a = replay_streams(&mut disk(), &two_runs(), &StreamsConfig::default());
        let f = replay_streams(&mut disk(), &two_runs(), &fcfs);
        assert_eq!((a.ios, f.ios), (100, 100));
        // First come, first served alternates between the runs: a long seek per request.
        assert!(
            f.busy_ns > 5 * a.busy_ns,
            "fcfs {} vs anticipatory {}",
            f.busy_ns,
            a.busy_ns
        );
    }

    #[test]
    fn a_batch_slice_bounds_how_long_one_stream_keeps_the_device() {
        let short = StreamsConfig {
            batch_ns: 1,
            ..StreamsConfig::default()
        };
        let r = replay_streams(&mut disk(), &two_runs(), &short);
        let a = replay_streams(&mut disk(), &two_runs(), &StreamsConfig::default());
        // Switching at every request costs the seeks anticipation saves.
        assert!(r.busy_ns > 5 * a.busy_ns);
    }
}
