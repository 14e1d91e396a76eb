//! The indirection map: FS page -> BOPT slot (forward), BOPT slot -> FS page (reverse) and
//! a dirty bit per slot (seed 000 §4.6, seed 001 §3.4.6).
//!
//! Memory layout (the seed's bound is 4 bytes forward + 4 bytes reverse + 1 dirty bit per
//! BOPT page, i.e. per mapped page when the BOPT is full):
//!
//! * `reverse`: one `u32` FS page number per BOPT slot (`u32::MAX` = free). The BOPT is
//!   dense, so an array indexed by slot is the smallest reverse index there is.
//! * `forward`: an open-addressing (linear probing, backward-shift deletion) table whose
//!   buckets hold only a *slot index*, bit-packed to `b` = bits needed for `bopt_pages`.
//!   The key is not stored: it is `reverse[slot]`; a 4-bit fingerprint of it shares the
//!   bucket (while slot indices fit 22 bits) so probes that miss rarely read `reverse`.
//!   The bucket count keeps the table within 32 bits per BOPT slot: `floor(32 * n /
//!   (b + 4))` buckets, a load factor at or below `(b + 4) / 32` (0.78 for a 4 GiB BOPT
//!   of 4 KiB pages). Only for BOPTs of 2^28 pages and more is the bucket count raised to
//!   keep the load below 8/9, which then costs a little more than 4 bytes per slot.
//! * `dirty`: one bit per slot.
//!
//! The map stores no valid counts or allocation state: that is the BOPT's
//! (`crate::bopt`), kept consistent by the indirector that owns both.

use thiserror::Error;

/// Reverse-array marker for a free slot.
const EMPTY_PAGE: u32 = u32::MAX;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MapError {
    #[error("fs_pages: {0} pages do not fit the map's 32-bit FS page numbers (max {max})", max = u32::MAX - 1)]
    TooManyFsPages(u64),
    #[error("bopt_pages: {0} slots exceed the map's limit of 2^31")]
    TooManySlots(u64),
    #[error("FS page {fs_page} is outside the data area ({fs_pages} pages)")]
    FsPageOutOfRange { fs_page: u64, fs_pages: u64 },
    #[error("BOPT slot {slot} is outside the BOPT ({bopt_pages} slots)")]
    SlotOutOfRange { slot: u32, bopt_pages: u32 },
    #[error("FS page {fs_page} is already mapped to slot {slot}")]
    FsPageMapped { fs_page: u64, slot: u32 },
    #[error("BOPT slot {slot} already holds FS page {fs_page}")]
    SlotTaken { slot: u32, fs_page: u64 },
    #[error("BOPT slot {slot} is free")]
    SlotFree { slot: u32 },
    #[error("segment entry {index}: {source}")]
    Segment {
        index: usize,
        #[source]
        source: Box<MapError>,
    },
}

/// One map entry as stored in a segment summary on disk: (FS page, BOPT slot, valid)
/// (seed 000 Figure 3: "a 3-tuple of the form (FS LBA, BOPT LBA, valid bit)").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentEntry {
    pub fs_page: u64,
    pub slot: u32,
    pub valid: bool,
}

/// The in-memory indirection map. See the module documentation for its layout.
#[derive(Clone, Debug)]
pub struct Map {
    fs_pages: u64,
    reverse: Vec<u32>,
    dirty: Vec<u64>,
    forward: SlotTable,
    len: u32,
}

impl Map {
    /// An empty map for a data area of `fs_pages` pages and a BOPT of `bopt_pages` slots.
    pub fn new(fs_pages: u64, bopt_pages: u32) -> Result<Map, MapError> {
        if fs_pages >= u64::from(EMPTY_PAGE) {
            return Err(MapError::TooManyFsPages(fs_pages));
        }
        if bopt_pages > 1 << 31 {
            return Err(MapError::TooManySlots(u64::from(bopt_pages)));
        }
        Ok(Map {
            fs_pages,
            reverse: vec![EMPTY_PAGE; bopt_pages as usize],
            dirty: vec![0; (bopt_pages as usize).div_ceil(64)],
            forward: SlotTable::new(bopt_pages),
            len: 0,
        })
    }

    /// Rebuilds the map after an unclean stop from the segments' entries, marking every
    /// valid entry dirty: the on-disk map keeps no dirty bits, so any entry may hold data
    /// newer than its home (seed 001 §3.5.1). Invalid entries are skipped.
    pub fn rebuild_from_segments<I>(
        fs_pages: u64,
        bopt_pages: u32,
        entries: I,
    ) -> Result<Map, MapError>
    where
        I: IntoIterator<Item = SegmentEntry>,
    {
        let mut map = Map::new(fs_pages, bopt_pages)?;
        for (index, e) in entries.into_iter().enumerate() {
            if !e.valid {
                continue;
            }
            map.insert(e.fs_page, e.slot, true)
                .map_err(|source| MapError::Segment {
                    index,
                    source: Box::new(source),
                })?;
        }
        Ok(map)
    }

    pub fn fs_pages(&self) -> u64 {
        self.fs_pages
    }
    pub fn bopt_pages(&self) -> u32 {
        self.reverse.len() as u32
    }
    /// Mapped pages.
    pub fn len(&self) -> u32 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slot holding `fs_page`, if mapped.
    #[inline]
    pub fn lookup(&self, fs_page: u64) -> Option<u32> {
        if fs_page >= self.fs_pages {
            return None;
        }
        self.forward
            .find(fs_page as u32, &self.reverse)
            .map(|(_, slot)| slot)
    }

    /// The FS page held in `slot`, if any.
    #[inline]
    pub fn fs_page_of(&self, slot: u32) -> Option<u64> {
        match self.reverse.get(slot as usize) {
            Some(&p) if p != EMPTY_PAGE => Some(u64::from(p)),
            _ => None,
        }
    }

    #[inline]
    pub fn is_dirty(&self, slot: u32) -> bool {
        self.dirty[slot as usize / 64] >> (slot % 64) & 1 == 1
    }

    /// Sets or clears the dirty bit of a mapped slot.
    pub fn set_dirty(&mut self, slot: u32, dirty: bool) -> Result<(), MapError> {
        self.check_slot(slot)?;
        if self.fs_page_of(slot).is_none() {
            return Err(MapError::SlotFree { slot });
        }
        self.write_dirty(slot, dirty);
        Ok(())
    }

    /// Maps `fs_page` to the free `slot`.
    pub fn insert(&mut self, fs_page: u64, slot: u32, dirty: bool) -> Result<(), MapError> {
        self.check_slot(slot)?;
        if fs_page >= self.fs_pages {
            return Err(MapError::FsPageOutOfRange {
                fs_page,
                fs_pages: self.fs_pages,
            });
        }
        if let Some(taken) = self.fs_page_of(slot) {
            return Err(MapError::SlotTaken {
                slot,
                fs_page: taken,
            });
        }
        if let Some(old) = self.lookup(fs_page) {
            return Err(MapError::FsPageMapped { fs_page, slot: old });
        }
        self.reverse[slot as usize] = fs_page as u32;
        self.forward.insert(fs_page as u32, slot);
        self.write_dirty(slot, dirty);
        self.len += 1;
        Ok(())
    }

    /// Frees `slot`, returning the FS page it held and whether it was dirty.
    pub fn remove_slot(&mut self, slot: u32) -> Result<(u64, bool), MapError> {
        self.check_slot(slot)?;
        let fs_page = self.fs_page_of(slot).ok_or(MapError::SlotFree { slot })?;
        // The forward table reads keys through `reverse`, so it goes first.
        self.forward.remove(fs_page as u32, &self.reverse);
        self.reverse[slot as usize] = EMPTY_PAGE;
        let dirty = self.is_dirty(slot);
        self.write_dirty(slot, false);
        self.len -= 1;
        Ok((fs_page, dirty))
    }

    /// Moves the page held in `from` to the free slot `to`, keeping its dirty bit
    /// (a relocation, seed 000 §5.2).
    pub fn move_slot(&mut self, from: u32, to: u32) -> Result<(), MapError> {
        self.check_slot(from)?;
        self.check_slot(to)?;
        let fs_page = self
            .fs_page_of(from)
            .ok_or(MapError::SlotFree { slot: from })?;
        if let Some(taken) = self.fs_page_of(to) {
            return Err(MapError::SlotTaken {
                slot: to,
                fs_page: taken,
            });
        }
        let (bucket, _) = self
            .forward
            .find(fs_page as u32, &self.reverse)
            .expect("reverse and forward agree");
        self.forward.repoint(bucket, fs_page as u32, to);
        self.reverse[to as usize] = fs_page as u32;
        self.reverse[from as usize] = EMPTY_PAGE;
        let dirty = self.is_dirty(from);
        self.write_dirty(from, false);
        self.write_dirty(to, dirty);
        Ok(())
    }

    /// Every mapped entry as (FS page, slot, dirty), in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32, bool)> + '_ {
        self.reverse
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != EMPTY_PAGE)
            .map(|(s, &p)| (u64::from(p), s as u32, self.is_dirty(s as u32)))
    }

    /// Heap bytes the map holds (reverse + forward + dirty).
    pub fn heap_bytes(&self) -> usize {
        self.reverse.capacity() * 4 + self.dirty.capacity() * 8 + self.forward.heap_bytes()
    }
    /// Heap bytes of the forward and reverse indexes alone (the dirty bits excluded).
    pub fn index_bytes(&self) -> usize {
        self.reverse.capacity() * 4 + self.forward.heap_bytes()
    }

    /// Checks every invariant: each mapped slot is found by a forward lookup of its page
    /// (so no page is mapped twice and both directions agree), the forward table holds
    /// exactly the mapped slots, dirty bits are set only on mapped slots, and `len` counts
    /// the entries. Panics with the first violation.
    pub fn check(&self) {
        let mut count = 0u32;
        for (slot, &p) in self.reverse.iter().enumerate() {
            let slot = slot as u32;
            if p == EMPTY_PAGE {
                assert!(!self.is_dirty(slot), "free slot {slot} is dirty");
                continue;
            }
            count += 1;
            assert!(
                u64::from(p) < self.fs_pages,
                "slot {slot}: FS page {p} out of range"
            );
            assert_eq!(
                self.lookup(u64::from(p)),
                Some(slot),
                "FS page {p} in slot {slot} is not found there by the forward index"
            );
        }
        assert_eq!(count, self.len, "len disagrees with the reverse array");
        let mut buckets = 0u32;
        for i in 0..self.forward.capacity {
            let e = self.forward.get(i);
            if e != self.forward.empty {
                buckets += 1;
                let s = self.forward.slot_of(e);
                assert!(
                    self.fs_page_of(s).is_some(),
                    "bucket {i} names free slot {s}"
                );
            }
        }
        assert_eq!(
            buckets, self.len,
            "forward table size disagrees with the reverse array"
        );
    }

    fn check_slot(&self, slot: u32) -> Result<(), MapError> {
        if slot as usize >= self.reverse.len() {
            return Err(MapError::SlotOutOfRange {
                slot,
                bopt_pages: self.bopt_pages(),
            });
        }
        Ok(())
    }

    fn write_dirty(&mut self, slot: u32, dirty: bool) {
        let word = &mut self.dirty[slot as usize / 64];
        let bit = 1u64 << (slot % 64);
        if dirty {
            *word |= bit;
        } else {
            *word &= !bit;
        }
    }
}

/// Open-addressing table of bit-packed slot indices keyed by `reverse[slot]`.
#[derive(Clone, Debug)]
struct SlotTable {
    words: Vec<u64>,
    /// Bits per bucket: slot index bits + fingerprint bits.
    bits: u32,
    /// Low bits of a bucket holding a fingerprint of its key, so most probes that miss
    /// are rejected inside the table instead of by a random read of `reverse`.
    fp_bits: u32,
    capacity: u64,
    /// All-ones value of `bits` bits: an empty bucket (never a valid entry, since slot
    /// indices stay below the all-ones slot field).
    empty: u64,
}

impl SlotTable {
    fn new(slots: u32) -> SlotTable {
        let n = u64::from(slots);
        // Bits to hold every slot index and one more value for "empty".
        let slot_bits = (64 - n.leading_zeros()).max(1);
        // A 4-bit fingerprint while the 32-bit budget still leaves the load factor at or
        // below 0.8 (slot indices up to 22 bits: 4 Mi slots, 16 GiB of 4 KiB pages).
        let fp_bits = if slot_bits <= 22 { 4 } else { 0 };
        let bits = slot_bits + fp_bits;
        let within_budget = 32 * n / u64::from(bits);
        let capacity = within_budget.max(n + n / 8 + 1);
        let total_bits = capacity * u64::from(bits);
        // One spare word so a field that straddles the last word boundary reads in bounds.
        let words = vec![u64::MAX; total_bits.div_ceil(64) as usize + 1];
        SlotTable {
            words,
            bits,
            fp_bits,
            capacity,
            empty: (1u64 << bits) - 1,
        }
    }

    fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    #[inline]
    fn hash(key: u32) -> u64 {
        u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    #[inline]
    fn home(&self, key: u32) -> u64 {
        // Fibonacci hashing, then a multiply-shift range reduction (no power-of-two size):
        // the bucket comes from the hash's top bits.
        ((u128::from(Self::hash(key)) * u128::from(self.capacity)) >> 64) as u64
    }

    /// Fingerprint from the hash's middle bits (the top ones chose the bucket).
    #[inline]
    fn fingerprint(&self, key: u32) -> u64 {
        (Self::hash(key) >> 24) & ((1 << self.fp_bits) - 1)
    }

    #[inline]
    fn entry(&self, key: u32, slot: u32) -> u64 {
        (u64::from(slot) << self.fp_bits) | self.fingerprint(key)
    }

    #[inline]
    fn slot_of(&self, entry: u64) -> u32 {
        (entry >> self.fp_bits) as u32
    }

    /// Points the bucket of `key` at `slot` (a relocation).
    fn repoint(&mut self, bucket: u64, key: u32, slot: u32) {
        let e = self.entry(key, slot);
        self.set(bucket, e);
    }

    #[inline]
    fn get(&self, i: u64) -> u64 {
        let bit = i * u64::from(self.bits);
        let (w, o) = ((bit / 64) as usize, (bit % 64) as u32);
        let mut v = self.words[w] >> o;
        if o + self.bits > 64 {
            v |= self.words[w + 1] << (64 - o);
        }
        v & self.empty
    }

    #[inline]
    fn set(&mut self, i: u64, value: u64) {
        let bit = i * u64::from(self.bits);
        let (w, o) = ((bit / 64) as usize, (bit % 64) as u32);
        let mask = self.empty;
        self.words[w] = (self.words[w] & !(mask << o)) | (value << o);
        if o + self.bits > 64 {
            let hi = 64 - o;
            self.words[w + 1] = (self.words[w + 1] & !(mask >> hi)) | (value >> hi);
        }
    }

    #[inline]
    fn next(&self, i: u64) -> u64 {
        if i + 1 == self.capacity {
            0
        } else {
            i + 1
        }
    }

    /// (bucket, slot) holding `key`.
    #[inline]
    fn find(&self, key: u32, reverse: &[u32]) -> Option<(u64, u32)> {
        let fp = self.fingerprint(key);
        let fp_mask = (1 << self.fp_bits) - 1;
        let mut i = self.home(key);
        loop {
            let e = self.get(i);
            if e == self.empty {
                return None;
            }
            if e & fp_mask == fp {
                let s = self.slot_of(e);
                if reverse[s as usize] == key {
                    return Some((i, s));
                }
            }
            i = self.next(i);
        }
    }

    fn insert(&mut self, key: u32, slot: u32) {
        let mut i = self.home(key);
        while self.get(i) != self.empty {
            i = self.next(i);
        }
        let e = self.entry(key, slot);
        self.set(i, e);
    }

    /// Removes `key` by backward-shift deletion, so no tombstones accumulate.
    fn remove(&mut self, key: u32, reverse: &[u32]) {
        let Some((mut hole, _)) = self.find(key, reverse) else {
            return;
        };
        let mut j = hole;
        loop {
            j = self.next(j);
            let s = self.get(j);
            if s == self.empty {
                break;
            }
            let home = self.home(reverse[self.slot_of(s) as usize]);
            // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.set(hole, s);
                hole = j;
            }
        }
        self.set(hole, self.empty);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_lookup_remove_roundtrip() {
        let mut m = Map::new(1000, 16).unwrap();
        m.insert(7, 3, false).unwrap();
        m.insert(900, 4, true).unwrap();
        assert_eq!(m.lookup(7), Some(3));
        assert_eq!(m.fs_page_of(4), Some(900));
        assert!(m.is_dirty(4) && !m.is_dirty(3));
        m.check();
        assert_eq!(m.remove_slot(4), Ok((900, true)));
        assert_eq!(m.lookup(900), None);
        assert!(!m.is_dirty(4));
        m.check();
    }

    #[test]
    fn double_mapping_is_refused() {
        let mut m = Map::new(100, 8).unwrap();
        m.insert(5, 0, false).unwrap();
        assert_eq!(
            m.insert(5, 1, false),
            Err(MapError::FsPageMapped {
                fs_page: 5,
                slot: 0
            })
        );
        assert_eq!(
            m.insert(6, 0, false),
            Err(MapError::SlotTaken {
                slot: 0,
                fs_page: 5
            })
        );
        assert!(matches!(
            m.insert(100, 2, false),
            Err(MapError::FsPageOutOfRange { .. })
        ));
        assert!(matches!(
            m.insert(1, 8, false),
            Err(MapError::SlotOutOfRange { .. })
        ));
        m.check();
    }

    #[test]
    fn move_keeps_dirty_bit_and_frees_source() {
        let mut m = Map::new(100, 8).unwrap();
        m.insert(42, 1, true).unwrap();
        m.move_slot(1, 6).unwrap();
        assert_eq!(m.lookup(42), Some(6));
        assert!(m.is_dirty(6) && !m.is_dirty(1));
        assert_eq!(m.fs_page_of(1), None);
        m.check();
    }

    #[test]
    fn full_map_survives_churn() {
        // Fill every slot (load factor at its maximum), then remove and reinsert in a
        // scrambled order so backward-shift deletion is exercised across wrap-around.
        let n = 1000u32;
        let mut m = Map::new(1 << 20, n).unwrap();
        for s in 0..n {
            m.insert(u64::from(s) * 7919 % (1 << 20), s, false).unwrap();
        }
        m.check();
        for s in (0..n).step_by(3) {
            m.remove_slot(s).unwrap();
        }
        m.check();
        for s in (0..n).step_by(3) {
            m.insert(u64::from(s) + 500_000, s, s % 2 == 0).unwrap();
        }
        m.check();
        assert_eq!(m.len(), n);
    }

    #[test]
    fn memory_is_within_eight_bytes_per_page_plus_dirty_bit() {
        // Seed 001 §3.4.6: 4 bytes forward + 4 bytes reverse + 1 dirty bit per 4 KiB page
        // of a full BOPT (1 Mi slots = a 4 GiB BOPT here).
        let n = 1u32 << 20;
        let mut m = Map::new(1 << 30, n).unwrap();
        for s in 0..n {
            m.insert(u64::from(s) * 977 % (1 << 30), s, false).unwrap();
        }
        let per_page = m.index_bytes() as f64 / f64::from(m.len());
        assert!(
            per_page <= 8.0 + 1e-4,
            "index bytes per mapped page = {per_page}"
        );
        let dirty_bytes = m.heap_bytes() - m.index_bytes();
        assert!(dirty_bytes as u64 <= u64::from(n) / 8 + 8);
        m.check();
    }

    #[test]
    fn rebuild_marks_every_valid_entry_dirty() {
        // Two segments of 4 slots: segment 0 holds pages 10, 11 (valid) and a stale
        // entry for page 12 (invalid); segment 1 holds page 3 in slot 6.
        let entries = [
            SegmentEntry {
                fs_page: 10,
                slot: 0,
                valid: true,
            },
            SegmentEntry {
                fs_page: 11,
                slot: 1,
                valid: true,
            },
            SegmentEntry {
                fs_page: 12,
                slot: 2,
                valid: false,
            },
            SegmentEntry {
                fs_page: 3,
                slot: 6,
                valid: true,
            },
        ];
        let m = Map::rebuild_from_segments(100, 8, entries).unwrap();
        m.check();
        let got: Vec<_> = m.iter().collect();
        assert_eq!(got, vec![(10, 0, true), (11, 1, true), (3, 6, true)]);
        assert_eq!(m.lookup(12), None);
    }

    #[test]
    fn rebuild_names_the_corrupt_entry() {
        let entries = [
            SegmentEntry {
                fs_page: 10,
                slot: 0,
                valid: true,
            },
            SegmentEntry {
                fs_page: 10,
                slot: 5,
                valid: true,
            },
        ];
        let err = Map::rebuild_from_segments(100, 8, entries).unwrap_err();
        assert_eq!(
            err.to_string(),
            "segment entry 1: FS page 10 is already mapped to slot 0"
        );
    }
}
