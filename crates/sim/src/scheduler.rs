//! Device queues: the mechanism (a queue that merges adjacent requests) is shared, the
//! policy (which queued request goes next) is one small [`Order`] per scheduler.
//!
//! Merging follows the block layer's elevator: a new request joins a queued one of the
//! same direction when it starts where the queued one ends (back merge) or ends where it
//! starts (front merge), as long as the result stays within `max_merge_sectors`. The
//! seed evaluations measure busy time on a kernel that merges (seed 000 §6: "the I/O
//! scheduler merge ratio" changes busy time), so replay must merge too.

use std::collections::{BTreeSet, VecDeque};
use std::hash::BuildHasher;

use hashbrown::hash_table::{Entry, HashTable};
use reblock_device::{DevRequest, Device};
use slab::Slab;

/// End of an op chain.
pub const NO_OP: u32 = u32::MAX;

/// Set in an op id whose other bits are an id of the caller's own (the replay's
/// logical request served by this one op): such ops link through a table of their own,
/// so the two kinds of id may overlap. [`NO_OP`] is never an op id.
pub const OWN_OP: u32 = 1 << 31;

/// Which scheduler orders a device's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// First come, first served.
    Fcfs,
    /// Shortest seek first: the queued request whose position key is nearest the head.
    Sstf,
    /// Circular LOOK: ascending position keys from the head, then wrap to the lowest.
    Clook,
}

impl SchedulerKind {
    pub const NAMES: &'static str = "fcfs, sstf, clook";

    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Fcfs => "fcfs",
            SchedulerKind::Sstf => "sstf",
            SchedulerKind::Clook => "clook",
        }
    }

    fn order(self) -> Box<dyn Order> {
        match self {
            SchedulerKind::Fcfs => Box::new(Fcfs::default()),
            SchedulerKind::Sstf => Box::new(Sstf::default()),
            SchedulerKind::Clook => Box::new(Clook::default()),
        }
    }
}

impl std::str::FromStr for SchedulerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fcfs" => Ok(SchedulerKind::Fcfs),
            "sstf" => Ok(SchedulerKind::Sstf),
            "clook" | "c-look" => Ok(SchedulerKind::Clook),
            _ => Err(format!(
                "unknown scheduler '{s}' (known: {})",
                SchedulerKind::NAMES
            )),
        }
    }
}

/// Where a queued request sits for the policy: its position key, first sector and
/// arrival sequence (which makes every key unique and ties first-come).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub key: u64,
    pub sector: u64,
    pub seq: u64,
    pub id: usize,
}

/// A scheduling policy: it orders slots and never touches the requests themselves.
pub trait Order: Send {
    fn insert(&mut self, slot: Slot);
    /// A front merge moved a request's start: `old` becomes `new` (same id).
    fn rekey(&mut self, old: Slot, new: Slot);
    /// Removes and returns the id of the request to serve next, with the head at `head_key`.
    fn pick(&mut self, head_key: u64) -> Option<usize>;
}

/// Entry ids in arrival order (32-bit: a queue holding a whole phase of an open-loop
/// replay holds millions of them).
#[derive(Default)]
struct Fcfs(VecDeque<u32>);

impl Order for Fcfs {
    fn insert(&mut self, slot: Slot) {
        self.0.push_back(slot.id as u32);
    }
    // A merged request keeps the place of the request it joined.
    fn rekey(&mut self, _old: Slot, _new: Slot) {}
    fn pick(&mut self, _head_key: u64) -> Option<usize> {
        self.0.pop_front().map(|id| id as usize)
    }
}

#[derive(Default)]
struct Sstf(BTreeSet<Slot>);

impl Order for Sstf {
    fn insert(&mut self, slot: Slot) {
        self.0.insert(slot);
    }
    fn rekey(&mut self, old: Slot, new: Slot) {
        self.0.remove(&old);
        self.0.insert(new);
    }
    /// The nearest key on either side of the head; a tie goes to the one ahead (upwards).
    fn pick(&mut self, head_key: u64) -> Option<usize> {
        let probe = probe(head_key);
        let up = self.0.range(probe..).next().copied();
        let down = self.0.range(..probe).next_back().copied();
        let best = match (up, down) {
            (Some(u), Some(d)) if head_key - d.key < u.key - head_key => d,
            (Some(u), _) => u,
            (None, Some(d)) => d,
            (None, None) => return None,
        };
        self.0.remove(&best);
        Some(best.id)
    }
}

#[derive(Default)]
struct Clook(BTreeSet<Slot>);

impl Order for Clook {
    fn insert(&mut self, slot: Slot) {
        self.0.insert(slot);
    }
    fn rekey(&mut self, old: Slot, new: Slot) {
        self.0.remove(&old);
        self.0.insert(new);
    }
    /// The lowest key at or past the head; past the highest, wrap to the lowest.
    fn pick(&mut self, head_key: u64) -> Option<usize> {
        let next = self
            .0
            .range(probe(head_key)..)
            .next()
            .or_else(|| self.0.first())
            .copied()?;
        self.0.remove(&next);
        Some(next.id)
    }
}

/// The smallest slot with this key.
fn probe(key: u64) -> Slot {
    Slot {
        key,
        sector: 0,
        seq: 0,
        id: 0,
    }
}

/// A request waiting in (or taken from) a device queue: one member I/O, or several merged.
/// 24 bytes: an open-loop replay of a fast trace queues a whole phase at once, so what a
/// queued request costs is what a replay's memory grows with (docs/scale.md).
#[derive(Clone, Copy, Debug)]
pub struct Queued {
    pub req: DevRequest,
    /// The member I/Os it carries, a chain read with [`Queue::next_op`].
    pub first_op: u32,
    last_op: u32,
}

/// One device's queue: merging and op chains here, ordering in the scheduler's [`Order`].
pub struct Queue {
    entries: Slab<Queued>,
    /// Each entry's place for a policy that orders by position (SSTF, C-LOOK: its old
    /// slot is what a front merge rekeys), by entry id; empty for FCFS, which orders by
    /// arrival alone.
    slots: Vec<Slot>,
    /// Queued requests by [`merge_key`] of their end sector, for back merges.
    by_end: MergeIndex,
    /// Queued requests by [`merge_key`] of their start sector, for front merges.
    by_start: MergeIndex,
    /// Next op in the same merged request, indexed by op id.
    op_next: Vec<u32>,
    /// The same for [`OWN_OP`] ids, by their other bits.
    own_next: Vec<u32>,
    order: Box<dyn Order>,
    /// Whether `order` reads the slots' position keys (every policy but FCFS).
    by_position: bool,
    max_merge_sectors: u32,
    seq: u64,
    merges: u64,
}

impl Queue {
    pub fn new(kind: SchedulerKind, max_merge_sectors: u32) -> Queue {
        Queue {
            entries: Slab::new(),
            slots: Vec::new(),
            by_end: MergeIndex::new(Edge::End),
            by_start: MergeIndex::new(Edge::Start),
            op_next: Vec::new(),
            own_next: Vec::new(),
            order: kind.order(),
            by_position: kind != SchedulerKind::Fcfs,
            max_merge_sectors,
            seq: 0,
            merges: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Member I/Os that joined a queued request instead of queueing on their own.
    pub fn merges(&self) -> u64 {
        self.merges
    }

    /// The op after `op` in its merged request, or [`NO_OP`].
    pub fn next_op(&self, op: u32) -> u32 {
        if op & OWN_OP != 0 {
            self.own_next[(op & !OWN_OP) as usize]
        } else {
            self.op_next[op as usize]
        }
    }

    /// Where the op after `op` is kept.
    fn next_link(&mut self, op: u32) -> &mut u32 {
        debug_assert_ne!(op, NO_OP);
        let (links, i) = if op & OWN_OP != 0 {
            (&mut self.own_next, (op & !OWN_OP) as usize)
        } else {
            (&mut self.op_next, op as usize)
        };
        if links.len() <= i {
            links.resize(i + 1, NO_OP);
        }
        &mut links[i]
    }

    /// Queues member I/O `op` (an id chosen by the caller, unique while queued or in
    /// service) for `req`, merging it into a queued neighbour when allowed.
    pub fn push(&mut self, op: u32, req: DevRequest, dev: &dyn Device) {
        *self.next_link(op) = NO_OP;
        // An empty queue has nothing to merge with (the maps mirror `entries`): skip the
        // two hash lookups, the common case for FCFS under light load.
        if self.max_merge_sectors > 0
            && !self.entries.is_empty()
            && (self.back_merge(op, &req) || self.front_merge(op, &req, dev))
        {
            self.merges += 1;
            return;
        }
        let id = self.entries.vacant_key();
        let slot = Slot {
            key: self.key_of(req.sector, dev),
            sector: req.sector,
            seq: self.seq,
            id,
        };
        self.seq += 1;
        self.entries.insert(Queued {
            req,
            first_op: op,
            last_op: op,
        });
        if self.by_position {
            if self.slots.len() <= id {
                self.slots.resize(id + 1, slot);
            }
            self.slots[id] = slot;
        }
        if self.max_merge_sectors > 0 {
            let id = id as u32;
            self.by_end.insert(id, &self.entries);
            self.by_start.insert(id, &self.entries);
        }
        self.order.insert(slot);
    }

    /// The position key of `sector` when the policy orders by it; first come, first
    /// served never reads it, and on a disk it costs a [`Device::position_key`] lookup
    /// of the zone and track per queued request.
    fn key_of(&self, sector: u64, dev: &dyn Device) -> u64 {
        if self.by_position {
            dev.position_key(sector)
        } else {
            0
        }
    }

    fn fits(&self, a: u32, b: u32) -> bool {
        u64::from(a) + u64::from(b) <= u64::from(self.max_merge_sectors)
    }

    /// `req` starts where a queued request ends: append it.
    fn back_merge(&mut self, op: u32, req: &DevRequest) -> bool {
        let at = merge_key(req, req.sector);
        let Some(id) = self.by_end.get(at, &self.entries) else {
            return false;
        };
        let e = &self.entries[id as usize];
        if !self.fits(e.req.sectors, req.sectors) {
            return false;
        }
        self.by_end.remove(id, &self.entries);
        let last = std::mem::replace(&mut self.entries[id as usize].last_op, op);
        *self.next_link(last) = op;
        let e = &mut self.entries[id as usize];
        e.req.sectors += req.sectors;
        self.by_end.insert(id, &self.entries);
        true
    }

    /// `req` ends where a queued request starts: prepend it.
    fn front_merge(&mut self, op: u32, req: &DevRequest, dev: &dyn Device) -> bool {
        let at = merge_key(req, req_end(req));
        let Some(id) = self.by_start.get(at, &self.entries) else {
            return false;
        };
        if !self.fits(self.entries[id as usize].req.sectors, req.sectors) {
            return false;
        }
        self.by_start.remove(id, &self.entries);
        let e = &mut self.entries[id as usize];
        e.req.sector = req.sector;
        e.req.sectors += req.sectors;
        let first = std::mem::replace(&mut e.first_op, op);
        *self.next_link(op) = first;
        self.by_start.insert(id, &self.entries);
        if self.by_position {
            let key = self.key_of(req.sector, dev);
            let slot = &mut self.slots[id as usize];
            let old = *slot;
            slot.key = key;
            slot.sector = req.sector;
            let new = *slot;
            self.order.rekey(old, new);
        }
        true
    }

    /// Takes the request the policy serves next with the head at `head_key`.
    pub fn pop(&mut self, head_key: u64) -> Option<Queued> {
        let id = self.order.pick(head_key)?;
        if self.max_merge_sectors > 0 {
            // Another queued request may own the same key: only this one's goes.
            self.by_end.remove(id as u32, &self.entries);
            self.by_start.remove(id as u32, &self.entries);
        }
        Some(self.entries.remove(id))
    }
}

/// Which sector of a queued request a [`MergeIndex`] finds it by.
#[derive(Clone, Copy)]
enum Edge {
    Start,
    End,
}

/// Queued requests by the [`merge_key`] of one of their edges: one queued request per
/// key (the latest queued with it). Only the 32-bit ids are stored, 5 bytes a slot
/// instead of a map's 17; each key is read from the queued request itself, so a
/// request's key may change only while it is out of the index.
struct MergeIndex {
    ids: HashTable<u32>,
    edge: Edge,
}

impl MergeIndex {
    fn new(edge: Edge) -> MergeIndex {
        MergeIndex {
            ids: HashTable::new(),
            edge,
        }
    }

    fn key(edge: Edge, entries: &Slab<Queued>, id: u32) -> u64 {
        let req = &entries[id as usize].req;
        match edge {
            Edge::Start => merge_key(req, req.sector),
            Edge::End => merge_key(req, req_end(req)),
        }
    }

    // Fx hashing: the keys are sectors, not attacker-chosen, and this is on the
    // per-request path.
    fn hash(key: u64) -> u64 {
        rustc_hash::FxBuildHasher.hash_one(key)
    }

    /// The queued request indexed under `key`.
    fn get(&self, key: u64, entries: &Slab<Queued>) -> Option<u32> {
        let edge = self.edge;
        (self.ids)
            .find(Self::hash(key), |&id| Self::key(edge, entries, id) == key)
            .copied()
    }

    /// Indexes `id` under its key, in place of any other queued request that had it.
    fn insert(&mut self, id: u32, entries: &Slab<Queued>) {
        let edge = self.edge;
        let key = Self::key(edge, entries, id);
        let hasher = |&i: &u32| Self::hash(Self::key(edge, entries, i));
        match (self.ids).entry(
            Self::hash(key),
            |&i| Self::key(edge, entries, i) == key,
            hasher,
        ) {
            Entry::Occupied(mut o) => *o.get_mut() = id,
            Entry::Vacant(v) => {
                v.insert(id);
            }
        }
    }

    /// Takes `id` out of the index, if it is the one indexed under its key.
    fn remove(&mut self, id: u32, entries: &Slab<Queued>) {
        let key = Self::key(self.edge, entries, id);
        if let Ok(o) = self.ids.find_entry(Self::hash(key), |&i| i == id) {
            o.remove();
        }
    }
}

/// One past the last sector of `req`.
fn req_end(req: &DevRequest) -> u64 {
    req.sector + u64::from(req.sectors)
}

/// The merge maps' key: a sector and the direction of `req` in one word (a 16-byte map
/// entry instead of 24). Sectors stay below 2^63: a capacity in bytes that fits 64 bits
/// is below 2^55 sectors.
fn merge_key(req: &DevRequest, sector: u64) -> u64 {
    debug_assert!(sector < 1 << 63, "sector {sector} beyond any device");
    sector << 1 | u64::from(req.write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The merging of a queue as two maps from key to id did it (what the index of ids
    /// replaced): the requests merged and served must be the same, whatever collides.
    #[derive(Default)]
    struct Reference {
        entries: Slab<(DevRequest, Vec<u32>)>,
        fifo: VecDeque<usize>,
        by_end: HashMap<u64, usize>,
        by_start: HashMap<u64, usize>,
    }

    impl Reference {
        fn push(&mut self, op: u32, req: DevRequest, max: u32) {
            if let Some(&id) = self.by_end.get(&merge_key(&req, req.sector)) {
                let e = &mut self.entries[id];
                if e.0.sectors + req.sectors <= max {
                    self.by_end.remove(&merge_key(&req, req.sector));
                    e.0.sectors += req.sectors;
                    e.1.push(op);
                    self.by_end.insert(merge_key(&req, req_end(&e.0)), id);
                    return;
                }
            }
            if let Some(&id) = self.by_start.get(&merge_key(&req, req_end(&req))) {
                let e = &mut self.entries[id];
                if e.0.sectors + req.sectors <= max {
                    self.by_start.remove(&merge_key(&req, req_end(&req)));
                    e.0.sector = req.sector;
                    e.0.sectors += req.sectors;
                    e.1.insert(0, op);
                    self.by_start.insert(merge_key(&req, req.sector), id);
                    return;
                }
            }
            let id = self.entries.insert((req, vec![op]));
            self.by_end.insert(merge_key(&req, req_end(&req)), id);
            self.by_start.insert(merge_key(&req, req.sector), id);
            self.fifo.push_back(id);
        }

        fn pop(&mut self) -> Option<(DevRequest, Vec<u32>)> {
            let id = self.fifo.pop_front()?;
            let e = self.entries.remove(id);
            for (map, key) in [
                (&mut self.by_end, merge_key(&e.0, req_end(&e.0))),
                (&mut self.by_start, merge_key(&e.0, e.0.sector)),
            ] {
                if map.get(&key) == Some(&id) {
                    map.remove(&key);
                }
            }
            Some(e)
        }
    }

    fn ops_of(q: &Queue, io: &Queued) -> Vec<u32> {
        let mut out = vec![];
        let mut op = io.first_op;
        while op != NO_OP {
            out.push(op);
            op = q.next_op(op);
        }
        out
    }

    #[test]
    fn merging_by_the_index_of_ids_is_merging_by_keyed_maps() {
        // (and ops of both kinds chain as they were queued)
        let built = reblock_device::parse_spec("hdd:wd2500aaks").unwrap();
        let dev = built.members[0].as_ref();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for max in [8, 24, 256] {
            let mut q = Queue::new(SchedulerKind::Fcfs, max);
            let mut r = Reference::default();
            let mut next_op = 0u32;
            let mut merges = 0;
            for _ in 0..20_000 {
                if rand() % 3 == 0 {
                    let got = q.pop(0).map(|io| (io.req, ops_of(&q, &io)));
                    assert_eq!(got, r.pop());
                    continue;
                }
                // Few sectors, so that keys collide and requests overlap.
                let req = DevRequest {
                    sector: rand() % 64,
                    sectors: 1 + (rand() % 8) as u32,
                    write: rand() % 2 == 0,
                };
                let before = q.merges();
                // Both kinds of op id, their other bits overlapping.
                let op = match next_op % 2 {
                    0 => OWN_OP | (next_op / 2),
                    _ => next_op / 2,
                };
                q.push(op, req, dev);
                r.push(op, req, max);
                merges += q.merges() - before;
                next_op += 1;
            }
            while let Some(want) = r.pop() {
                let io = q.pop(0).expect("as many queued");
                assert_eq!((io.req, ops_of(&q, &io)), want);
            }
            assert!(q.is_empty());
            assert!(merges > 1000, "{merges} merges with at most {max} sectors");
        }
    }
}
