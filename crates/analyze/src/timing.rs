//! When requests arrive: inter-arrival times, idle periods and burstiness (the temporal
//! attributes of seed 001 §4.1: "burstiness of requests, that indicates if I/O requests
//! arrive in batches and if the workload contains any idle time").

use serde::Serialize;

use crate::stats::{Distribution, Summary};

/// Idle periods: gaps between consecutive arrivals of at least `threshold_ns`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Idle {
    pub threshold_ns: u64,
    pub count: u64,
    pub total_ns: u64,
    pub longest_ns: u64,
    /// total_ns over the trace's duration (None when the duration is 0).
    pub fraction_of_duration: Option<f64>,
}

/// Burstiness over fixed windows (1 s by default) from the first request's window to the
/// last's, empty windows included.
///
/// `index_of_dispersion` = variance / mean of the per-window request counts (population
/// variance). Poisson arrivals give 1; arrivals in batches separated by idle time give
/// much more. It is the figure the advice uses. `peak_to_mean` = the busiest window's
/// count over the mean count.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Bursts {
    pub window_ns: u64,
    pub windows: u64,
    pub mean_per_window: Option<f64>,
    pub peak_per_window: u64,
    pub index_of_dispersion: Option<f64>,
    pub peak_to_mean: Option<f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TimingSummary {
    /// The earliest arrival.
    pub first_ts_ns: Option<u64>,
    /// The latest arrival.
    pub last_ts_ns: Option<u64>,
    /// Latest minus earliest arrival.
    pub duration_ns: u64,
    /// Gaps between consecutive requests in time order (all processes together): from
    /// the latest arrival before a request to it, 0 for a request that came late.
    pub interarrival_ns: Summary,
    /// Requests that came after a later one in the trace: the ones the reader moved into
    /// time order (`reordered`) and any met here out of order (gap counted as 0).
    pub out_of_order: u64,
    /// Requests the reader moved into time order (within its reorder window, or by
    /// sorting the whole trace).
    pub reordered: u64,
    /// How far behind the latest request the latest-coming one was, when any came late.
    pub max_lateness_ns: u64,
    /// The reorder window the trace was read with; `None` when it was sorted whole (or
    /// not read through a trace reader).
    pub reorder_window_ns: Option<u64>,
    /// Whether the whole trace was sorted by timestamp before the analysis.
    pub sorted: bool,
    pub idle: Idle,
    pub bursts: Bursts,
}

pub struct Timing {
    idle_threshold_ns: u64,
    window_ns: u64,
    first: Option<u64>,
    /// The earliest arrival so far (below `first` only when requests come late).
    earliest: u64,
    last_max: u64,
    gaps: Distribution,
    out_of_order: u64,
    max_lateness_ns: u64,
    idle_count: u64,
    idle_total_ns: u64,
    idle_longest_ns: u64,
    window_index: u64,
    /// Where the current window ends (saturating): requests before it need no division
    /// to find their window.
    window_end: u64,
    window_count: u64,
    windows_closed: u64,
    count_sum: f64,
    count_sum_sq: f64,
    peak: u64,
}

impl Timing {
    pub fn new(idle_threshold_ns: u64, window_ns: u64) -> Self {
        Timing {
            idle_threshold_ns,
            window_ns: window_ns.max(1),
            first: None,
            earliest: 0,
            last_max: 0,
            gaps: Distribution::default(),
            out_of_order: 0,
            max_lateness_ns: 0,
            idle_count: 0,
            idle_total_ns: 0,
            idle_longest_ns: 0,
            window_index: 0,
            window_end: 0,
            window_count: 0,
            windows_closed: 0,
            count_sum: 0.0,
            count_sum_sq: 0.0,
            peak: 0,
        }
    }

    pub fn observe(&mut self, ts_ns: u64) {
        let Some(first) = self.first else {
            self.first = Some(ts_ns);
            self.earliest = ts_ns;
            self.last_max = ts_ns;
            self.window_count = 1;
            self.window_end = ts_ns.saturating_add(self.window_ns);
            return;
        };
        // Gaps run from the latest arrival so far, so that they add up to at most the
        // duration whatever the order (idle time can never exceed the trace's span).
        if ts_ns < self.last_max {
            self.out_of_order += 1;
            self.earliest = self.earliest.min(ts_ns);
            self.max_lateness_ns = self.max_lateness_ns.max(self.last_max - ts_ns);
        }
        let gap = ts_ns.saturating_sub(self.last_max);
        self.gaps.observe(gap);
        if gap >= self.idle_threshold_ns {
            self.idle_count += 1;
            self.idle_total_ns += gap;
            self.idle_longest_ns = self.idle_longest_ns.max(gap);
        }
        self.last_max = self.last_max.max(ts_ns);
        // A late (out-of-order) request counts in the current window: windows never reopen.
        if ts_ns >= self.window_end {
            let index = (ts_ns - first) / self.window_ns;
            // (Equal only when the window's end saturated at u64::MAX.)
            if index > self.window_index {
                self.close_window();
                // Windows skipped over were empty: they add 0 to the sums but count as
                // windows.
                self.windows_closed += index - self.window_index - 1;
                self.window_index = index;
                self.window_end = (index + 1)
                    .checked_mul(self.window_ns)
                    .and_then(|e| e.checked_add(first))
                    .unwrap_or(u64::MAX);
            }
        }
        self.window_count += 1;
    }

    fn close_window(&mut self) {
        let c = self.window_count as f64;
        self.count_sum += c;
        self.count_sum_sq += c * c;
        self.peak = self.peak.max(self.window_count);
        self.windows_closed += 1;
        self.window_count = 0;
    }

    pub fn finish(mut self) -> TimingSummary {
        let duration_ns = self.first.map_or(0, |_| self.last_max - self.earliest);
        if self.first.is_some() {
            self.close_window();
        }
        let n = self.windows_closed as f64;
        let mean = (self.windows_closed > 0).then(|| self.count_sum / n);
        let var = mean.map(|m| (self.count_sum_sq / n - m * m).max(0.0));
        TimingSummary {
            first_ts_ns: self.first.map(|_| self.earliest),
            last_ts_ns: self.first.map(|_| self.last_max),
            duration_ns,
            interarrival_ns: self.gaps.summary(),
            out_of_order: self.out_of_order,
            reordered: 0,
            max_lateness_ns: self.max_lateness_ns,
            reorder_window_ns: None,
            sorted: false,
            idle: Idle {
                threshold_ns: self.idle_threshold_ns,
                count: self.idle_count,
                total_ns: self.idle_total_ns,
                longest_ns: self.idle_longest_ns,
                fraction_of_duration: (duration_ns > 0)
                    .then(|| self.idle_total_ns as f64 / duration_ns as f64),
            },
            bursts: Bursts {
                window_ns: self.window_ns,
                windows: self.windows_closed,
                mean_per_window: mean,
                peak_per_window: self.peak,
                index_of_dispersion: mean.zip(var).map(|(m, v)| v / m),
                peak_to_mean: mean.map(|m| self.peak as f64 / m),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The windows straight from the definition: request i is in window
    /// max(window of i-1, (ts_i - ts_0) / w); every window from the first to the last
    /// counts, empty or not.
    fn naive_bursts(ts: &[u64], w: u64) -> (u64, u64, f64, f64) {
        let mut counts: Vec<u64> = Vec::new();
        let mut current = 0;
        for &t in ts {
            current = current.max((t - ts[0].min(t)) / w);
            if counts.len() as u64 <= current {
                counts.resize(current as usize + 1, 0);
            }
            counts[current as usize] += 1;
        }
        let n = counts.len() as f64;
        let sum: f64 = counts.iter().map(|&c| c as f64).sum();
        let sq: f64 = counts.iter().map(|&c| (c * c) as f64).sum();
        let peak = counts.iter().copied().max().unwrap_or(0);
        (counts.len() as u64, peak, sum / n, sq / n)
    }

    proptest! {
        #[test]
        fn windows_match_the_definition(
            start in prop_oneof![0u64..1000, Just(u64::MAX - 5_000)],
            steps in proptest::collection::vec(-3i64..400, 1..200),
            w in 1u64..120,
        ) {
            let mut ts = vec![start];
            for s in steps {
                let next = ts.last().unwrap().saturating_add_signed(s);
                ts.push(next);
            }
            // The definition measures from the first request; earlier ones count in
            // window 0 (the late-request rule).
            let mut t = Timing::new(u64::MAX, w);
            for &x in &ts {
                t.observe(x);
            }
            let b = t.finish().bursts;
            let (windows, peak, mean, mean_sq) = naive_bursts(&ts, w);
            prop_assert_eq!((b.windows, b.peak_per_window), (windows, peak));
            prop_assert!((b.mean_per_window.unwrap() - mean).abs() < 1e-9);
            let var = (mean_sq - mean * mean).max(0.0);
            let idc = b.index_of_dispersion.unwrap();
            prop_assert!((idc - var / mean).abs() < 1e-6 * (1.0 + idc));
        }
    }
}
