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
//! Memory: one entry per stream plus one per distinct pair (two when a pair occurs both
//! sequentially and not). Pairs are the one structure that can grow with the number of
//! requests (a fully random trace has a new pair per request); exact partial determinism
//! needs them. They are counted by sorted batches ([`reblock_tally::Counter`]) rather than
//! in a hash map: a lookup per request into a map of a million pairs waits on memory
//! every time, and only the final counts are needed. Each occurrence is one key, (device,
//! from, to, non-sequential flag) packed as tightly as the values seen so far allow
//! ([`crate::keys`]): 64 bits while the sectors stay below 2^31 or so, 128 bits beyond,
//! and a hash map for the rare pair whose fields do not fit 128 bits.

use reblock_tally::Counter;
use reblock_trace::Request;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::keys::{Devices, Layout, Packed};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct StreamKey {
    device: u32,
    pid: u32,
    command: u32,
    has_pid: bool,
}

impl StreamKey {
    /// The key as one integer (distinct keys give distinct integers), compared in two
    /// instructions.
    fn packed(self) -> u128 {
        u128::from(self.device) << 97
            | u128::from(self.pid) << 65
            | u128::from(self.command) << 33
            | u128::from(self.has_pid) << 32
    }
}

/// Streams remembered for the lookup-free path (see `Determinism::recent_keys`).
const RECENT: usize = 8;
/// A packed key no stream has (bit 0 is never set).
const NO_STREAM: u128 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PairKey {
    device: u32,
    from: u64,
    to: u64,
}

/// Occurrences of one pair: all transitions, and the non-sequential ones among them.
#[derive(Clone, Copy, Debug, Default)]
struct PairCount {
    all: u64,
    non_sequential: u64,
}

/// Pair occurrences as packed keys (device index, from, to, non-sequential flag).
struct PairCounter<K> {
    layout: Layout<4>,
    counter: Counter<K>,
}

impl<K: Packed> PairCounter<K> {
    fn new(min_batch: usize) -> Self {
        PairCounter {
            layout: Layout::new([0, 0, 0, 1]),
            counter: Counter::with_min_batch(min_batch),
        }
    }

    /// Counts the occurrence if its fields fit this key type (widening the layout if need
    /// be); whether it did. A pair refused once is refused for good (widths only grow).
    #[inline]
    fn add(&mut self, fields: [u64; 4]) -> bool {
        if !self.layout.fits(fields) {
            let grown = self.layout.grown(fields);
            if grown.bits() > K::BITS {
                return false;
            }
            let old = self.layout;
            self.counter
                .map_keys(|k| K::from_u128(old.repack(&grown, k.to_u128())));
            self.layout = grown;
        }
        self.counter.add(K::from_u128(self.layout.pack(fields)));
        true
    }

    /// Calls `f` with each distinct pair's counts. A pair's sequential and
    /// non-sequential occurrences are adjacent keys (the flag is the lowest bit).
    fn for_each(&mut self, mut f: impl FnMut(PairCount)) {
        let (keys, counts) = self.counter.sorted();
        let mut i = 0;
        while i < keys.len() {
            let mut c = PairCount::default();
            let pair = keys[i].to_u128() >> 1;
            while i < keys.len() && keys[i].to_u128() >> 1 == pair {
                c.all += u64::from(counts[i]);
                if keys[i].to_u128() & 1 == 1 {
                    c.non_sequential += u64::from(counts[i]);
                }
                i += 1;
            }
            f(c);
        }
    }
}

pub struct Determinism {
    /// Each stream's number: its index in `last`.
    streams: FxHashMap<StreamKey, u32>,
    /// Per stream, the (start, end) sector of its latest request.
    last: Vec<(u64, u64)>,
    /// Per stream, its device's index in `devices`.
    stream_device: Vec<u32>,
    /// The last [`RECENT`] streams seen (keys packed by [`StreamKey::packed`]) and their
    /// numbers, replaced round-robin. Consecutive requests nearly always come from one
    /// process (99% on the bundled kernel-build trace), or from one of a few busy ones,
    /// so this saves the hash lookup of the stream for most requests.
    recent_keys: [u128; RECENT],
    recent_ids: [u32; RECENT],
    recent_next: usize,
    devices: Devices,
    narrow: PairCounter<u64>,
    wide: PairCounter<u128>,
    /// Pairs whose fields do not fit 128 bits.
    hashed: FxHashMap<PairKey, PairCount>,
    transitions: u64,
    sequential: u64,
}

impl Default for Determinism {
    fn default() -> Self {
        Determinism::with_min_batch(reblock_tally::MIN_BATCH)
    }
}

impl Determinism {
    /// Pair counters that sort after `min_batch` keys (tests use tiny batches to
    /// exercise merging).
    pub fn with_min_batch(min_batch: usize) -> Self {
        Determinism {
            streams: FxHashMap::default(),
            last: Vec::new(),
            stream_device: Vec::new(),
            recent_keys: [NO_STREAM; RECENT],
            recent_ids: [0; RECENT],
            recent_next: 0,
            devices: Devices::default(),
            narrow: PairCounter::new(min_batch),
            wide: PairCounter::new(min_batch),
            hashed: FxHashMap::default(),
            transitions: 0,
            sequential: 0,
        }
    }
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
        let packed = key.packed();
        let id = match self.recent_keys.iter().position(|&k| k == packed) {
            Some(i) => self.recent_ids[i],
            None => {
                let next = self.last.len() as u32;
                let id = *self.streams.entry(key).or_insert(next);
                self.recent_keys[self.recent_next] = packed;
                self.recent_ids[self.recent_next] = id;
                self.recent_next = (self.recent_next + 1) % RECENT;
                if id == next {
                    // A new stream: no transition yet.
                    self.last.push(pos);
                    let device = self.devices.index(req.device);
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
        let device = self.stream_device[id as usize];
        let fields = [u64::from(device), from, req.sector, u64::from(!sequential)];
        if !self.narrow.add(fields) && !self.wide.add(fields) {
            let c = self.hashed.entry(PairKey {
                device: req.device,
                from,
                to: req.sector,
            });
            let c = c.or_default();
            c.all += 1;
            c.non_sequential += u64::from(!sequential);
        }
    }

    /// Heap bytes held: the pair counters (bounded by the distinct pairs), the streams,
    /// and the pairs kept in a hash map.
    pub fn heap_bytes(&self) -> usize {
        self.narrow.counter.heap_bytes()
            + self.wide.counter.heap_bytes()
            + self.streams.capacity() * (std::mem::size_of::<(StreamKey, u32)>() + 1)
            + self.last.capacity() * 16
            + self.stream_device.capacity() * 4
            + self.hashed.capacity() * (std::mem::size_of::<(PairKey, PairCount)>() + 1)
    }

    pub fn summary(&mut self) -> DeterminismSummary {
        let non_sequential = self.transitions - self.sequential;
        let (mut repeated, mut distinct) = (0u64, 0u64);
        let mut tally = |c: PairCount| {
            distinct += 1;
            if c.all >= 2 {
                repeated += c.non_sequential;
            }
        };
        self.narrow.for_each(&mut tally);
        self.wide.for_each(&mut tally);
        self.hashed.values().copied().for_each(&mut tally);
        let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
        DeterminismSummary {
            streams: self.last.len() as u64,
            transitions: self.transitions,
            sequential_transitions: self.sequential,
            non_sequential_transitions: non_sequential,
            repeated_non_sequential_transitions: repeated,
            distinct_pairs: distinct,
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
        // The same loop A -> B -> A -> B on two devices, at small sectors (64-bit keys),
        // past 2^31 (128-bit keys) and past 2^62 (the hash-map fallback): per device 3
        // non-sequential transitions, pairs (A,B) twice and (B,A) once -> 2 of 3 repeat.
        for base in [0u64, 1 << 40, 1 << 62] {
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
