//! Sequentiality and partial determinism (seed 000 §2.3, Table 1) over per-process
//! request streams.
//!
//! Definitions, exactly as computed:
//!
//! * A **stream** is the requests of one process in trace order, keyed by
//!   (device, pid, command); requests with no pid all belong to one stream per device.
//!   (The device is part of the key because sector numbers of two devices are unrelated;
//!   in a single-device trace the key is (pid, command).)
//! * A **transition** is a pair (a, b) of consecutive requests of one stream.
//!   It is **sequential** when `b.sector == a.end_sector()`, **non-sequential** otherwise.
//! * `sequential_fraction` = sequential transitions / all transitions.
//! * Every transition has a **pair** (device, a.sector, b.sector). Let occ(p) be the number
//!   of transitions, sequential or not, whose pair is p.
//! * `partial_determinism` = (non-sequential transitions whose pair has occ >= 2)
//!   / (non-sequential transitions): the share of non-sequential accesses that repeat at
//!   least once in the trace (seed 000 §2.3: "the percentage of non-sequential accesses
//!   that repeat at least once"). None when there is no non-sequential transition.
//!
//! Memory: one entry per stream plus one per distinct pair. Pairs are the one structure
//! that can grow with the number of requests (a fully random trace has a new pair per
//! request); exact partial determinism needs them. They are counted by sorted batches
//! ([`reblock_tally::Tally`], keys packed into 128 bits) rather than in a hash map: a
//! lookup per request into a map of a million pairs waits on memory every time, and
//! only the final counts are needed. A pair whose sectors or device number do not fit
//! the packing (sectors past 2^56, more than 65535 devices) is counted in a hash map.

use reblock_tally::{Count, Tally};
use reblock_trace::Request;
use rustc_hash::FxHashMap;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StreamKey {
    device: u32,
    pid: u32,
    command: u32,
    has_pid: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PairKey {
    device: u32,
    from: u64,
    to: u64,
}

/// Occurrences of one pair: all transitions, and the non-sequential ones among them.
#[derive(Clone, Copy, Debug, Default)]
struct PairCount {
    all: u32,
    non_sequential: u32,
}

impl Count for PairCount {
    fn absorb(&mut self, other: PairCount) {
        self.all = self.all.saturating_add(other.all);
        self.non_sequential = self.non_sequential.saturating_add(other.non_sequential);
    }
}

/// Bits of each sector in a packed pair key.
const SECTOR_BITS: u32 = 56;
const MAX_DEVICES: usize = 1 << (128 - 2 * SECTOR_BITS);

#[derive(Default)]
pub struct Determinism {
    /// Each stream's number: its index in `last`.
    streams: FxHashMap<StreamKey, u32>,
    /// Per stream, the (start, end) sector of its latest request.
    last: Vec<(u64, u64)>,
    /// Per stream, its device's index in `devices` (None past [`MAX_DEVICES`]).
    stream_device: Vec<Option<usize>>,
    /// The stream of the previous request. Consecutive requests nearly always come from
    /// one process (99% on the bundled kernel-build trace), so this saves the stream
    /// lookup for most requests.
    recent: Option<(StreamKey, u32)>,
    /// Devices in order of appearance: a pair key holds the device's index.
    devices: Vec<u32>,
    /// Pairs packed as (device index, from, to), see [`SECTOR_BITS`].
    pairs: Tally<u128, PairCount>,
    /// Pairs that do not fit the packing.
    wide_pairs: FxHashMap<PairKey, PairCount>,
    transitions: u64,
    sequential: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeterminismSummary {
    pub streams: u64,
    pub transitions: u64,
    pub sequential_transitions: u64,
    pub non_sequential_transitions: u64,
    /// Non-sequential transitions whose (a.sector, b.sector) pair occurs at least twice.
    pub repeated_non_sequential_transitions: u64,
    pub distinct_pairs: u64,
    pub sequential_fraction: Option<f64>,
    pub partial_determinism: Option<f64>,
}

impl Determinism {
    pub fn observe(&mut self, req: &Request) {
        let key = StreamKey {
            device: req.device,
            pid: req.pid.unwrap_or(0),
            command: if req.pid.is_some() { req.command } else { 0 },
            has_pid: req.pid.is_some(),
        };
        let pos = (req.sector, req.end_sector());
        let id = match self.recent {
            Some((k, id)) if k == key => id,
            _ => {
                let next = self.last.len() as u32;
                let id = *self.streams.entry(key).or_insert(next);
                self.recent = Some((key, id));
                if id == next {
                    // A new stream: no transition yet.
                    self.last.push(pos);
                    let device = self.device_index(req.device);
                    self.stream_device.push(device);
                    return;
                }
                id
            }
        };
        let (from, end) = std::mem::replace(&mut self.last[id as usize], pos);
        self.transitions += 1;
        let sequential = req.sector == end;
        self.sequential += u64::from(sequential);
        let count = PairCount {
            all: 1,
            non_sequential: u32::from(!sequential),
        };
        let device = self.stream_device[id as usize];
        let fits = |s: u64| s < 1 << SECTOR_BITS;
        match device {
            Some(d) if fits(from) && fits(req.sector) => {
                let key = (d as u128) << (2 * SECTOR_BITS)
                    | u128::from(from) << SECTOR_BITS
                    | u128::from(req.sector);
                self.pairs.add(key, count);
            }
            _ => self
                .wide_pairs
                .entry(PairKey {
                    device: req.device,
                    from,
                    to: req.sector,
                })
                .or_default()
                .absorb(count),
        }
    }

    /// The device's index for pair keys; None past [`MAX_DEVICES`]. Called once per
    /// stream, and traces have one device or a few, so a scan of the list will do.
    fn device_index(&mut self, device: u32) -> Option<usize> {
        if let Some(i) = self.devices.iter().position(|&d| d == device) {
            return Some(i);
        }
        if self.devices.len() == MAX_DEVICES {
            return None;
        }
        self.devices.push(device);
        Some(self.devices.len() - 1)
    }

    pub fn summary(&self) -> DeterminismSummary {
        let non_sequential = self.transitions - self.sequential;
        let packed = self.pairs.counts();
        let all = packed.iter().map(|e| &e.1).chain(self.wide_pairs.values());
        let repeated: u64 = all
            .filter(|c| c.all >= 2)
            .map(|c| u64::from(c.non_sequential))
            .sum();
        let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
        DeterminismSummary {
            streams: self.last.len() as u64,
            transitions: self.transitions,
            sequential_transitions: self.sequential,
            non_sequential_transitions: non_sequential,
            repeated_non_sequential_transitions: repeated,
            distinct_pairs: (packed.len() + self.wide_pairs.len()) as u64,
            sequential_fraction: ratio(self.sequential, self.transitions),
            partial_determinism: ratio(repeated, non_sequential),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_trace::Op;

    fn r(pid: Option<u32>, command: u32, sector: u64, sectors: u32) -> Request {
        Request {
            ts_ns: 0,
            pid,
            command,
            device: 0,
            sector,
            sectors,
            op: Op::Read,
        }
    }

    #[test]
    fn one_stream_by_hand() {
        // No pids: one stream. Requests (sector,len): (0,8) (100,8) (0,8) (100,8) (108,8) (50,8)
        // Transitions and pairs:
        //   (0,8)->(100): 100 != 8, non-seq, pair (0,100)
        //   (100,8)->(0): 0 != 108, non-seq, pair (100,0)
        //   (0,8)->(100): non-seq, pair (0,100)      <- second occurrence
        //   (100,8)->(108): 108 == 108, sequential, pair (100,108)
        //   (108,8)->(50): non-seq, pair (108,50)
        // 5 transitions, 1 sequential -> sequential_fraction 1/5.
        // Non-seq: 4; with pair occurring >= 2: the two (0,100) ones -> PD = 2/4 = 0.5.
        let mut d = Determinism::default();
        for (s, n) in [(0, 8), (100, 8), (0, 8), (100, 8), (108, 8), (50, 8)] {
            d.observe(&r(None, 0, s, n));
        }
        let s = d.summary();
        assert_eq!(s.streams, 1);
        assert_eq!(s.transitions, 5);
        assert_eq!(s.sequential_transitions, 1);
        assert_eq!(s.non_sequential_transitions, 4);
        assert_eq!(s.repeated_non_sequential_transitions, 2);
        assert_eq!(s.distinct_pairs, 4);
        assert_eq!(s.sequential_fraction, Some(0.2));
        assert_eq!(s.partial_determinism, Some(0.5));
    }

    #[test]
    fn streams_are_per_pid_and_command_and_sequential_pairs_count_as_occurrences() {
        // pid 1 "a": (0,8) (8,8)      -> transition (0->8) sequential, pair (0,8)
        // pid 2 "b": (20,8) (0,4) (8,8) interleaved:
        //   (20,8)->(0,4): non-seq, pair (20,0)
        //   (0,4)->(8): 8 != 4, non-seq, pair (0,8)  <- same pair as pid 1's sequential one
        // pid 1 "c" (same pid, other command) is its own stream: (20,8) (0,8) -> non-seq pair (20,0)
        // Transitions 4: 1 sequential -> 0.25. Non-seq 3: (20,0) occurs twice (pid 2 and
        // pid 1 "c") and (0,8) occurs twice (once sequential) -> all 3 repeat -> PD = 1.
        let reqs = [
            r(Some(1), 1, 0, 8),
            r(Some(2), 2, 20, 8),
            r(Some(1), 3, 20, 8),
            r(Some(2), 2, 0, 4),
            r(Some(1), 1, 8, 8),
            r(Some(2), 2, 8, 8),
            r(Some(1), 3, 0, 8),
        ];
        let mut d = Determinism::default();
        for q in &reqs {
            d.observe(q);
        }
        let s = d.summary();
        assert_eq!(s.streams, 3);
        assert_eq!(s.transitions, 4);
        assert_eq!(s.sequential_transitions, 1);
        assert_eq!(s.repeated_non_sequential_transitions, 3);
        assert_eq!(s.sequential_fraction, Some(0.25));
        assert_eq!(s.partial_determinism, Some(1.0));
    }

    #[test]
    fn huge_sectors_and_several_devices_count_like_small_ones() {
        // The same loop A -> B -> A -> B on two devices, once at small sectors (packed
        // keys) and once past 2^56 (the hash-map fallback): per device 3 non-sequential
        // transitions, pairs (A,B) twice and (B,A) once -> 2 of 3 repeat.
        for base in [0u64, 1 << 60] {
            let mut d = Determinism::default();
            for device in [3u32, 9] {
                for s in [base, base + 100, base, base + 100] {
                    let mut q = r(None, 0, s, 8);
                    q.device = device;
                    d.observe(&q);
                }
            }
            let s = d.summary();
            assert_eq!(s.streams, 2, "base {base}");
            assert_eq!(s.non_sequential_transitions, 6);
            assert_eq!(s.distinct_pairs, 4);
            assert_eq!(s.repeated_non_sequential_transitions, 4);
        }
    }

    #[test]
    fn all_sequential_has_no_partial_determinism() {
        let mut d = Determinism::default();
        for s in [0, 8, 16] {
            d.observe(&r(Some(1), 1, s, 8));
        }
        let s = d.summary();
        assert_eq!(s.sequential_fraction, Some(1.0));
        assert_eq!(s.partial_determinism, None);
    }
}
