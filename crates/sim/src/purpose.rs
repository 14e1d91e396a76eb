//! What each member I/O is for, and whose busy time it is (issue 17: FS2's replica
//! writes are the cost of a reconfiguration, not of the phase whose reads carry their
//! data). The mapper says it beside the extents it gives ([`crate::Mapper::map_for`]);
//! the default is the client's own data. Busy time, its parts and the energy above idle
//! are summed per purpose:
//! - a device I/O's own service goes to the purposes of the requests in it; a merged
//!   I/O of mixed purposes splits it by their sectors;
//! - a disk's write-back of a cached write keeps that write's purpose, whichever later
//!   service (or the final drain) holds its media time, so a replica write the drive
//!   acknowledged at once still pays its seek and transfer as a replica write.

use std::collections::BTreeMap;

use reblock_device::energy::PowerModel;
use reblock_device::WriteBackWork;
use serde::Serialize;

/// What a member I/O is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// The workload's own data (the default).
    #[default]
    Client,
    /// A replica being written (FS2's replicas in free space).
    Replica,
    /// A copy the layout makes between reconfigurations, before the request that needs
    /// it (the guard's write-backs of dirty read-cache pages, a permutation sent home).
    Copy,
}

impl Purpose {
    pub const ALL: [Purpose; 3] = [Purpose::Client, Purpose::Replica, Purpose::Copy];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether the request waits for an extent of this purpose before it responds: its
    /// own data and copies that must be made before it is served do; a replica written
    /// from data it already read goes on behind it.
    pub fn holds_response(self) -> bool {
        self != Purpose::Replica
    }
}

/// Device time by purpose (indexed by [`Purpose::index`]), in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PurposeTime {
    pub busy_ns: [u64; 3],
    pub seek_ns: [u64; 3],
    pub rotate_ns: [u64; 3],
    pub transfer_ns: [u64; 3],
    /// Energy of the seeking and transferring above idle power (when the model has power
    /// figures).
    pub energy_j: [f64; 3],
}

impl PurposeTime {
    /// Adds `busy_ns` of purpose `p`, of which the parts given, to the sums, with the
    /// energy of the seek and transfer activity `(seek, transfer)` above idle power.
    pub fn add(
        &mut self,
        p: Purpose,
        busy_ns: u64,
        parts: (u64, u64, u64),
        activity: (u64, u64),
        power: Option<&PowerModel>,
    ) {
        let i = p.index();
        self.busy_ns[i] += busy_ns;
        self.seek_ns[i] += parts.0;
        self.rotate_ns[i] += parts.1;
        self.transfer_ns[i] += parts.2;
        if let Some(pw) = power {
            self.energy_j[i] += (pw.seek_w - pw.idle_w) * activity.0 as f64 * 1e-9
                + (pw.transfer_w - pw.idle_w) * activity.1 as f64 * 1e-9;
        }
    }
}

/// `whole` split in proportion to `weights` (integer shares, the rest to the last
/// non-zero weight so that the shares add up to `whole` exactly).
pub(crate) fn split_by(whole: u64, weights: &[u64; 3]) -> [u64; 3] {
    let total: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    let mut out = [0; 3];
    let Some(last) = (0..3).rev().find(|&i| weights[i] > 0) else {
        return out;
    };
    let mut left = whole;
    for i in 0..last {
        let share = (u128::from(whole) * u128::from(weights[i]) / total) as u64;
        out[i] = share;
        left -= share;
    }
    out[last] = left;
    out
}

/// The sectors waiting in one member's write-back cache that were written for another
/// purpose than the client's: start -> (end, purpose). Only those are kept (a cache
/// holds a few MiB), so a drive serving client data alone keeps nothing here.
#[derive(Debug, Default)]
pub(crate) struct CachedPurposes {
    ranges: BTreeMap<u64, (u64, Purpose)>,
}

impl CachedPurposes {
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// A write of `[start, end)` for `p` was cached: its sectors are `p`'s now (the last
    /// writer's data is what the drive writes back).
    pub fn cache(&mut self, start: u64, end: u64, p: Purpose) {
        self.clear(start, end);
        if p != Purpose::Client {
            self.ranges.insert(start, (end, p));
        }
    }

    /// Forgets `[start, end)`, trimming the ranges that overlap it.
    fn clear(&mut self, start: u64, end: u64) {
        if self.ranges.is_empty() || start >= end {
            return;
        }
        let overlapping: Vec<(u64, u64, Purpose)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > start)
            .map(|(&s, &(e, p))| (s, e, p))
            .collect();
        for (s, e, p) in overlapping {
            self.ranges.remove(&s);
            if s < start {
                self.ranges.insert(s, (start, p));
            }
            if e > end {
                self.ranges.insert(end, (e, p));
            }
        }
    }

    /// Sectors of `[start, end)` per purpose (the rest are the client's).
    fn sectors(&self, start: u64, end: u64) -> [u64; 3] {
        let mut out = [0u64; 3];
        let mut other = 0;
        for (&s, &(e, p)) in self.ranges.range(..end).rev() {
            if e <= start {
                // Ranges never overlap: an earlier one ends before this one starts.
                break;
            }
            let n = e.min(end) - s.max(start);
            out[p.index()] += n;
            other += n;
        }
        out[Purpose::Client.index()] = (end - start) - other;
        out
    }

    /// Splits the write-backs `work` by the purposes of the sectors they wrote (a write
    /// the drive appended others to splits by sectors), forgetting the writes done, and
    /// adds them to `time`; returns the busy time they took, at most `busy_ns`.
    pub fn account(
        &mut self,
        work: &[WriteBackWork],
        busy_ns: u64,
        time: &mut PurposeTime,
        power: Option<&PowerModel>,
    ) -> u64 {
        let mut left = busy_ns;
        for w in work {
            let (start, end) = (w.req.sector, w.req.sector + u64::from(w.req.sectors));
            let ns = w.busy_ns.min(left);
            left -= ns;
            let weights = if self.is_empty() {
                [u64::from(w.req.sectors), 0, 0]
            } else {
                self.sectors(start, end)
            };
            let busy = split_by(ns, &weights);
            let seek = split_by(w.seek_ns, &weights);
            let transfer = split_by(w.transfer_ns, &weights);
            for p in Purpose::ALL {
                let i = p.index();
                time.add(p, busy[i], (0, 0, 0), (seek[i], transfer[i]), power);
            }
            if w.done {
                self.clear(start, end);
            }
        }
        busy_ns - left
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reblock_device::DevRequest;

    #[test]
    fn shares_add_up_to_the_whole() {
        assert_eq!(split_by(10, &[1, 1, 1]), [3, 3, 4]);
        assert_eq!(split_by(10, &[0, 3, 0]), [0, 10, 0]);
        assert_eq!(split_by(7, &[0, 0, 0]), [0, 0, 0]);
        let big = split_by(u64::MAX, &[u64::MAX, 1, 0]);
        assert_eq!(
            u128::from(big[0]) + u128::from(big[1]),
            u128::from(u64::MAX)
        );
    }

    #[test]
    fn a_write_back_pays_for_the_purposes_of_the_sectors_it_writes() {
        let mut c = CachedPurposes::default();
        c.cache(100, 200, Purpose::Replica);
        // A client write over the tail of the replica write: its data is the client's.
        c.cache(150, 250, Purpose::Client);
        assert_eq!(c.sectors(100, 300), [150, 50, 0]);
        let work = |sector: u64, sectors: u32, done: bool| WriteBackWork {
            req: DevRequest {
                sector,
                sectors,
                write: true,
            },
            busy_ns: 1000,
            seek_ns: 400,
            transfer_ns: 200,
            done,
        };
        let mut t = PurposeTime::default();
        // The drive appended the two into one write of 100..250, written over two
        // services: both parts split 50 replica sectors to 100 client sectors.
        let took = c.account(&[work(100, 150, false)], 5000, &mut t, None);
        assert_eq!(took, 1000);
        assert_eq!(t.busy_ns, [666, 334, 0]);
        c.account(&[work(100, 150, true)], 600, &mut t, None);
        assert_eq!(t.busy_ns, [666 + 400, 334 + 200, 0]);
        assert!(c.is_empty(), "{c:?}");
    }
}
