//! The replica table (FS2's: original, replica, last access, reference count): copies of
//! hot data pages kept in free data pages near where the head works. On disk it is the
//! [`crate::format::REPLICA_TABLE_BLOCKS`] blocks after the free-map chunks
//! ([`crate::format::replica_at`]), two copies each, rewritten whole by the metadata
//! commit that follows any change, so it is exactly as crash-safe as the map: a replica
//! counts after a crash only if the commit naming it completed, and that commit synced
//! the replica's data first.

use crate::format::{
    replica_at, Superblock, FREEMAP_CHUNK_BYTES, REPLICAS_PER_BLOCK, REPLICA_ENTRY_BYTES,
    REPLICA_TABLE_BLOCKS,
};
use crate::freemap::{load_blocks, Area, FreeMapReport};
use crate::meta::MetaError;
use crate::store::Store;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One replica: a copy of data page `original` in the free data page `replica`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaEntry {
    pub original: u64,
    pub replica: u64,
    /// Unix seconds of the last read served from the copy (or of its creation).
    pub last_access: u32,
    /// Reads served from the copy.
    pub refcount: u32,
}

/// The table in memory: any number of replicas per original (FS2 keeps one near each
/// hot area its block is read from), each replica page holding one original's copy.
#[derive(Clone, Debug, Default)]
pub struct ReplicaTable {
    /// Keyed (original, replica): an original's replicas are one range.
    by_original: BTreeMap<(u64, u64), ReplicaEntry>,
    by_replica: HashMap<u64, u64>,
    dirty: bool,
    durable_copy: Vec<u32>,
    /// Pages (originals and replicas) the table on disk names as of the last completed
    /// commit: a page dropped from memory but still named there is neither reused for
    /// another replica nor written by a client before a commit drops it on disk too.
    durable_pages: BTreeSet<u64>,
    /// The pages of the snapshot being committed (they become `durable_pages`).
    snap_pages: Option<BTreeSet<u64>>,
    /// Pages that held a replica since the engine opened: detach zeroes those still free.
    used_pages: BTreeSet<u64>,
}

/// The most replicas the table holds.
pub const MAX_REPLICAS: usize = REPLICA_TABLE_BLOCKS as usize * REPLICAS_PER_BLOCK;

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

impl ReplicaTable {
    pub fn len(&self) -> usize {
        self.by_original.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_original.is_empty()
    }
    pub fn full(&self) -> bool {
        self.len() >= MAX_REPLICAS
    }
    /// The replicas of original `page`, in replica page order.
    pub fn of_original(&self, page: u64) -> impl Iterator<Item = &ReplicaEntry> {
        self.by_original
            .range((page, 0)..=(page, u64::MAX))
            .map(|(_, e)| e)
    }
    /// True when `page` holds some original's replica, now or on disk.
    pub fn is_replica(&self, page: u64) -> bool {
        self.by_replica.contains_key(&page) || self.durable_pages.contains(&page)
    }

    /// True when a page of `first..end` has a replica or holds one now.
    pub fn of_original_in(&self, first: u64, end: u64) -> bool {
        self.by_original
            .range((first, 0)..(end, 0))
            .next()
            .is_some()
            || if self.by_replica.len() < (end - first) as usize {
                self.by_replica.keys().any(|r| (first..end).contains(r))
            } else {
                (first..end).any(|r| self.by_replica.contains_key(&r))
            }
    }

    /// True when the table on disk names a page of `first..end` (as original or replica).
    pub fn named_durably(&self, first: u64, end: u64) -> bool {
        self.durable_pages.range(first..end).next().is_some()
    }

    fn pages_now(&self) -> BTreeSet<u64> {
        self.entries()
            .flat_map(|e| [e.original, e.replica])
            .collect()
    }
    pub fn entries(&self) -> impl Iterator<Item = &ReplicaEntry> {
        self.by_original.values()
    }

    pub fn insert(&mut self, e: ReplicaEntry) {
        self.used_pages.insert(e.replica);
        self.by_replica.insert(e.replica, e.original);
        self.by_original.insert((e.original, e.replica), e);
        self.dirty = true;
    }

    /// Drops every replica of an original in `first..end` and every replica stored in
    /// `first..end`; returns how many.
    pub fn drop_touching(&mut self, first: u64, end: u64) -> usize {
        let mut gone: Vec<(u64, u64)> = self
            .by_original
            .range((first, 0)..(end, 0))
            .map(|(&k, _)| k)
            .collect();
        if self.by_replica.len() < (end - first) as usize {
            gone.extend(
                self.by_replica
                    .iter()
                    .filter(|(&r, _)| (first..end).contains(&r))
                    .map(|(&r, &o)| (o, r)),
            );
        } else {
            gone.extend((first..end).filter_map(|r| Some((*self.by_replica.get(&r)?, r))));
        }
        let mut n = 0;
        for k in gone {
            if self.by_original.remove(&k).is_some() {
                self.by_replica.remove(&k.1);
                n += 1;
            }
        }
        self.dirty |= n > 0;
        n
    }

    /// Drops every replica; returns every page that held one since the engine opened.
    pub fn clear(&mut self) -> BTreeSet<u64> {
        self.dirty |= !self.is_empty();
        self.by_original.clear();
        self.by_replica.clear();
        std::mem::take(&mut self.used_pages)
    }

    /// Counts a read served from the replica of `original` in page `replica` (not
    /// persisted until the next commit that writes the table anyway).
    pub fn touch(&mut self, original: u64, replica: u64, now: u32) {
        if let Some(e) = self.by_original.get_mut(&(original, replica)) {
            e.refcount = e.refcount.saturating_add(1);
            e.last_access = now;
        }
    }

    /// Drops the `n` least recently read replicas (fewest reads first among equals),
    /// each alone (other replicas of its original stay); returns how many went.
    pub fn drop_coldest(&mut self, n: u64) -> usize {
        let mut by_age: Vec<(u32, u32, u64)> = self
            .entries()
            .map(|e| (e.last_access, e.refcount, e.replica))
            .collect();
        by_age.sort_unstable();
        by_age
            .into_iter()
            .take(n as usize)
            .map(|(_, _, r)| self.drop_touching(r, r + 1))
            .sum()
    }

    /// The entry bytes of block `block` (`FREEMAP_CHUNK_BYTES - 64` bytes).
    pub fn block_bytes(&self, block: u32) -> Vec<u8> {
        let mut b = vec![0u8; FREEMAP_CHUNK_BYTES as usize - crate::format::freemap_at::BITS];
        let skip = block as usize * REPLICAS_PER_BLOCK;
        for (i, e) in self
            .entries()
            .skip(skip)
            .take(REPLICAS_PER_BLOCK)
            .enumerate()
        {
            let x = i * REPLICA_ENTRY_BYTES;
            put(&mut b, x + replica_at::ORIGINAL, &e.original.to_le_bytes());
            put(&mut b, x + replica_at::REPLICA, &e.replica.to_le_bytes());
            put(
                &mut b,
                x + replica_at::LAST_ACCESS,
                &e.last_access.to_le_bytes(),
            );
            put(&mut b, x + replica_at::REFCOUNT, &e.refcount.to_le_bytes());
        }
        b
    }

    /// The copy holding block `block`'s durable version.
    pub fn durable_copy(&self, block: u32) -> u32 {
        self.durable_copy.get(block as usize).copied().unwrap_or(0)
    }

    /// Every block encoded under `commit` when the table changed since the last commit.
    pub fn snapshot(&mut self, sb: &Superblock, commit: u64) -> Vec<(u32, Vec<u8>)> {
        if !std::mem::take(&mut self.dirty) {
            return Vec::new();
        }
        self.snap_pages = Some(self.pages_now());
        (0..sb.layout.replica_blocks())
            .map(|k| {
                let bits = self.block_bytes(k);
                (k, Area::Replicas.encode(k, commit, sb.image_id, bits))
            })
            .collect()
    }
    pub fn next_offset(&self, sb: &Superblock, block: u32) -> u64 {
        sb.layout
            .replica_block_offset(block, 1 - self.durable_copy(block))
    }
    pub fn committed(&mut self, snap: &[(u32, Vec<u8>)]) {
        for (k, _) in snap {
            let c = &mut self.durable_copy[*k as usize];
            *c = 1 - *c;
        }
        if let Some(p) = self.snap_pages.take().filter(|_| !snap.is_empty()) {
            self.durable_pages = p;
        }
    }
    pub fn retouch(&mut self, snap: &[(u32, Vec<u8>)]) {
        self.dirty |= !snap.is_empty();
    }
    pub fn touch_all(&mut self) {
        self.dirty = !self.durable_copy.is_empty();
    }
}

/// Entries of one stored block; empty slots (original == replica) end it.
fn decode_entries(bits: &[u8]) -> Vec<ReplicaEntry> {
    let u64_at = |x: usize| u64::from_le_bytes(bits[x..x + 8].try_into().expect("8 bytes"));
    let u32_at = |x: usize| u32::from_le_bytes(bits[x..x + 4].try_into().expect("4 bytes"));
    (0..REPLICAS_PER_BLOCK)
        .map(|i| i * REPLICA_ENTRY_BYTES)
        .map(|x| ReplicaEntry {
            original: u64_at(x + replica_at::ORIGINAL),
            replica: u64_at(x + replica_at::REPLICA),
            last_access: u32_at(x + replica_at::LAST_ACCESS),
            refcount: u32_at(x + replica_at::REFCOUNT),
        })
        .take_while(|e| e.original != e.replica)
        .collect()
}

/// What loading the table found wrong with its entries (beyond damaged blocks).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ReplicaReport {
    pub blocks: FreeMapReport,
    /// Entries refused: past the data area, a replica in a page that is not free, an
    /// original that is free, a replica page named twice, or a page that is both an
    /// original and a replica.
    pub bad_entries: Vec<String>,
}

/// Loads the table; an entry is kept only if `valid(original, replica)` (both inside the
/// data area, the replica page free, the original not), its replica page is named by no
/// other entry, and no page is both an original and a replica.
/// Untrusted blocks lose their entries: a replica is only a copy, the original holds
/// the data, and a stale entry could serve a copy older than the last write.
pub fn load(
    store: &dyn Store,
    sb: &Superblock,
    valid: impl Fn(u64, u64) -> bool,
) -> Result<(ReplicaTable, ReplicaReport), MetaError> {
    let mut rep = ReplicaReport::default();
    let mut t = ReplicaTable {
        durable_copy: vec![0; sb.layout.replica_blocks() as usize],
        ..Default::default()
    };
    for (k, choice) in load_blocks(store, sb, Area::Replicas, &mut rep.blocks)?
        .into_iter()
        .enumerate()
    {
        t.durable_copy[k] = choice.copy;
        t.dirty |= choice.rewrite;
        let Some(block) = choice.block else { continue };
        for e in decode_entries(&block.bits) {
            t.durable_pages.extend([e.original, e.replica]);
            // An original may have several replicas; a replica page holds one copy
            // and is no original, and an original is no replica page.
            let twice = t.by_replica.contains_key(&e.replica)
                || t.by_replica.contains_key(&e.original)
                || t.of_original(e.replica).next().is_some();
            if twice || !valid(e.original, e.replica) {
                rep.bad_entries.push(format!(
                    "replica table block {k}: entry (original {}, replica {}) refused",
                    e.original, e.replica
                ));
                t.dirty = true;
                continue;
            }
            t.by_replica.insert(e.replica, e.original);
            t.by_original.insert((e.original, e.replica), e);
        }
    }
    Ok((t, rep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_drop_by_either_page() {
        let mut t = ReplicaTable::default();
        for (o, r) in [(5, 100), (7, 101), (900, 102)] {
            t.insert(ReplicaEntry {
                original: o,
                replica: r,
                last_access: o as u32,
                refcount: 1,
            });
        }
        let back = decode_entries(&t.block_bytes(0));
        assert_eq!(back, t.entries().copied().collect::<Vec<_>>());
        assert_eq!(t.drop_touching(101, 102), 1, "a write into replica 101");
        assert_eq!(t.drop_touching(0, 6), 1, "a write of original 5");
        assert_eq!(t.len(), 1);
        assert!(t.is_replica(102) && !t.is_replica(100));
        t.insert(ReplicaEntry {
            original: 5,
            replica: 100,
            last_access: 1,
            refcount: 0,
        });
        assert_eq!(t.drop_coldest(1), 1, "the least recently read goes first");
        assert!(t.of_original(5).next().is_none() && t.of_original(900).next().is_some());
    }

    fn entry(original: u64, replica: u64, last_access: u32) -> ReplicaEntry {
        ReplicaEntry {
            original,
            replica,
            last_access,
            refcount: 0,
        }
    }

    #[test]
    fn an_original_keeps_several_replicas_until_it_is_written() {
        let mut t = ReplicaTable::default();
        for (r, at) in [(100, 3), (500, 1), (900, 2)] {
            t.insert(entry(7, r, at));
        }
        t.insert(entry(8, 101, 9));
        let of7: Vec<u64> = t.of_original(7).map(|e| e.replica).collect();
        assert_eq!(of7, [100, 500, 900]);
        let back = decode_entries(&t.block_bytes(0));
        assert_eq!(back, t.entries().copied().collect::<Vec<_>>());
        // The coldest replica goes alone; the original's others stay.
        assert_eq!(t.drop_coldest(1), 1);
        assert_eq!(t.of_original(7).count(), 2);
        assert!(!t.is_replica(500) || t.named_durably(500, 501));
        // A write into one replica page drops that replica only.
        assert_eq!(t.drop_touching(900, 901), 1);
        assert_eq!(
            t.of_original(7).map(|e| e.replica).collect::<Vec<_>>(),
            [100]
        );
        // A write of the original drops every replica it has.
        t.insert(entry(7, 600, 4));
        assert_eq!(t.drop_touching(7, 8), 2);
        assert_eq!(t.len(), 1);
    }
}
