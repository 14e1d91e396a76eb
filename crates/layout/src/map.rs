//! The indirection map: FS page -> BOPT slot (forward), BOPT slot -> FS page (reverse) and
//! a dirty bit per slot (seed 000 §4.6, seed 001 §3.4.6).
//!
//! The seed's bound is 4 bytes forward + 4 bytes reverse + 1 dirty bit per mapped page
//! (its radix tree holds only mapped pages). Memory here follows the mapped pages too,
//! not the BOPT's size, whatever share of the BOPT is in use:
//!
//! * reverse and dirty: one chunk per [`CHUNK_SLOTS`] slots, allocated when a slot of it
//!   is first mapped and freed when its last one goes (the BOPT fills slots segment by
//!   segment, so chunks are full or nearly); a reverse entry is bit-packed to the bits
//!   the data area's page numbers need, plus one value for "free" (16 bits for a
//!   data area of 256 MiB of 4 KiB pages, 29 for 1 TiB);
//! * forward: an open-addressing table (linear probing, backward-shift deletion) whose
//!   buckets hold only a *slot index*, bit-packed to `b` = the bits of the BOPT's slot
//!   count. The key is not stored: it is the reverse entry of the slot. A 4-bit
//!   fingerprint of the key shares the bucket (while `b` <= 22), so probes that miss
//!   rarely read the reverse index. The bucket count keeps the table within 32 bits per
//!   BOPT slot: `floor(32 * n / (b + 4))` buckets, a load factor at or below `(b + 4) / 32`
//!   when the BOPT is full (0.78 for a 4 GiB BOPT of 4 KiB pages). Only for BOPTs of 2^28
//!   pages and more is the bucket count raised to keep the load below 8/9, which then
//!   costs a little more than 4 bytes per slot. The table is sized for the full BOPT once:
//!   resizing it with the mapped count saves memory on a partly filled BOPT but stalls
//!   the write that crosses a threshold for a rebuild of every entry (tens of
//!   milliseconds for a million), which an online engine cannot afford;
//! * a `u64` per chunk pointer and a few fixed words.
//!
//! So a full BOPT costs `r/8 + 4 + 1/8` bytes per mapped page with `r` the reverse
//! width: 6.2 for a 16,000-slot BOPT over a 192 MiB data area, 7.8 for a million slots
//! (4 GiB) over 1 TiB; a BOPT whose read cache alone is full (80% of its slots) 7.3 and
//! 8.8 (the unit tests measure these). Where this map kept a reverse entry of 32 bits for
//! every slot, those figures were 8.2, 8.1, 10.2 and 10.1.
//!
//! The map stores no valid counts or allocation state: that is the BOPT's
//! (`crate::bopt`), kept consistent by the indirector that owns both.

use thiserror::Error;

/// Slots per reverse chunk.
pub const CHUNK_SLOTS: usize = 1 << CHUNK_BITS;
const CHUNK_BITS: u32 = 10;

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
    bopt_pages: u32,
    /// Bits of a reverse entry; the all-ones value marks a free slot.
    page_bits: u32,
    chunks: Vec<Option<Chunk>>,
    forward: SlotTable,
    len: u32,
}

/// Reverse entries and dirty bits of [`CHUNK_SLOTS`] consecutive slots, in one allocation
/// (a reverse read is then two dependent loads: the chunk's pointer and the word):
/// `words[0]` counts the mapped slots, `words[1..=DIRTY_WORDS]` are the dirty bits, and
/// the reverse entries follow, `page_bits` wide, packed end to end (with one spare word,
/// so a field straddling two words reads in bounds).
#[derive(Clone, Debug)]
struct Chunk {
    words: Box<[u64]>,
}

const DIRTY_WORDS: usize = CHUNK_SLOTS / 64;
const PAGES_AT: usize = 1 + DIRTY_WORDS;

impl Chunk {
    fn new(page_bits: u32) -> Chunk {
        let pages = (CHUNK_SLOTS * page_bits as usize).div_ceil(64) + 1;
        let mut words = vec![0u64; PAGES_AT + pages].into_boxed_slice();
        // Every entry all ones: free.
        words[PAGES_AT..].fill(u64::MAX);
        Chunk { words }
    }

    #[inline]
    fn page(&self, i: usize, bits: u32) -> u64 {
        get_bits(&self.words, PAGES_AT, i, bits)
    }

    #[inline]
    fn set_page(&mut self, i: usize, bits: u32, value: u64) {
        set_bits(&mut self.words, PAGES_AT, i, bits, value)
    }

    #[inline]
    fn dirty(&self, i: usize) -> bool {
        self.words[1 + i / 64] >> (i % 64) & 1 == 1
    }

    fn set_dirty(&mut self, i: usize, dirty: bool) {
        let bit = 1u64 << (i % 64);
        if dirty {
            self.words[1 + i / 64] |= bit;
        } else {
            self.words[1 + i / 64] &= !bit;
        }
    }

    fn used(&self) -> u64 {
        self.words[0]
    }

    fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

impl Map {
    /// An empty map for a data area of `fs_pages` pages and a BOPT of `bopt_pages` slots.
    pub fn new(fs_pages: u64, bopt_pages: u32) -> Result<Map, MapError> {
        if fs_pages >= u64::from(u32::MAX) {
            return Err(MapError::TooManyFsPages(fs_pages));
        }
        if bopt_pages > 1 << 31 {
            return Err(MapError::TooManySlots(u64::from(bopt_pages)));
        }
        Ok(Map {
            fs_pages,
            bopt_pages,
            // fs_pages itself fits, so every page number is below the all-ones value.
            page_bits: bits_of(fs_pages),
            chunks: vec![None; (bopt_pages as usize).div_ceil(CHUNK_SLOTS)],
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
        self.bopt_pages
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
            .find(fs_page as u32, |s| self.page_in(s))
            .map(|(_, slot)| slot)
    }

    /// The FS page held in `slot`, if any.
    #[inline]
    pub fn fs_page_of(&self, slot: u32) -> Option<u64> {
        let chunk = self.chunks.get((slot >> CHUNK_BITS) as usize)?.as_ref()?;
        let p = chunk.page(slot as usize % CHUNK_SLOTS, self.page_bits);
        (p != self.free()).then_some(p)
    }

    /// The reverse entry of a slot known to be mapped.
    #[inline]
    fn page_in(&self, slot: u32) -> u32 {
        page_in(&self.chunks, slot, self.page_bits)
    }

    /// The reverse value of a free slot.
    fn free(&self) -> u64 {
        mask(self.page_bits)
    }

    #[inline]
    pub fn is_dirty(&self, slot: u32) -> bool {
        match self.chunks.get((slot >> CHUNK_BITS) as usize) {
            Some(Some(c)) => c.dirty(slot as usize % CHUNK_SLOTS),
            _ => false,
        }
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
        self.set_page(slot, fs_page);
        self.write_dirty(slot, dirty);
        self.forward.insert(fs_page as u32, slot);
        self.len += 1;
        Ok(())
    }

    /// Frees `slot`, returning the FS page it held and whether it was dirty.
    pub fn remove_slot(&mut self, slot: u32) -> Result<(u64, bool), MapError> {
        self.check_slot(slot)?;
        let fs_page = self.fs_page_of(slot).ok_or(MapError::SlotFree { slot })?;
        // The forward table reads keys through the reverse entries, so it goes first.
        let (chunks, bits) = (&self.chunks, self.page_bits);
        self.forward
            .remove(fs_page as u32, |s| page_in(chunks, s, bits));
        let dirty = self.is_dirty(slot);
        self.write_dirty(slot, false);
        self.clear_page(slot);
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
            .find(fs_page as u32, |s| self.page_in(s))
            .expect("reverse and forward agree");
        self.forward.repoint(bucket, fs_page as u32, to);
        let dirty = self.is_dirty(from);
        self.set_page(to, fs_page);
        self.write_dirty(to, dirty);
        self.write_dirty(from, false);
        self.clear_page(from);
        Ok(())
    }

    /// Every mapped entry as (FS page, slot, dirty), in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32, bool)> + '_ {
        let (free, bits) = (self.free(), self.page_bits);
        self.chunks
            .iter()
            .enumerate()
            .filter_map(|(ci, c)| c.as_ref().map(|c| (ci, c)))
            .flat_map(move |(ci, c)| {
                (0..CHUNK_SLOTS).filter_map(move |i| {
                    let p = c.page(i, bits);
                    let slot = (ci * CHUNK_SLOTS + i) as u32;
                    (p != free).then(|| (p, slot, c.dirty(i)))
                })
            })
    }

    /// Heap bytes the map holds (reverse + forward + dirty + chunk pointers).
    pub fn heap_bytes(&self) -> usize {
        let chunks: usize = self.chunks.iter().flatten().map(Chunk::heap_bytes).sum();
        self.chunks.capacity() * std::mem::size_of::<Option<Chunk>>()
            + chunks
            + self.forward.heap_bytes()
    }

    /// Heap bytes of the forward and reverse indexes alone (the dirty bits excluded).
    pub fn index_bytes(&self) -> usize {
        self.heap_bytes() - self.chunks.iter().flatten().count() * DIRTY_WORDS * 8
    }

    /// Checks every invariant: each mapped slot is found by a forward lookup of its page
    /// (so no page is mapped twice and both directions agree), the forward table holds
    /// exactly the mapped slots, dirty bits are set only on mapped
    /// slots, chunks count their slots and none is kept empty, and `len` counts the
    /// entries. Panics with the first violation.
    pub fn check(&self) {
        let mut count = 0u32;
        for (ci, chunk) in self.chunks.iter().enumerate() {
            let Some(chunk) = chunk else { continue };
            let mut used = 0;
            for i in 0..CHUNK_SLOTS {
                let slot = (ci * CHUNK_SLOTS + i) as u32;
                let p = chunk.page(i, self.page_bits);
                if p == self.free() {
                    assert!(!self.is_dirty(slot), "free slot {slot} is dirty");
                    continue;
                }
                assert!(
                    slot < self.bopt_pages,
                    "slot {slot} past the BOPT is mapped"
                );
                used += 1;
                assert!(p < self.fs_pages, "slot {slot}: FS page {p} out of range");
                assert_eq!(
                    self.lookup(p),
                    Some(slot),
                    "FS page {p} in slot {slot} is not found there by the forward index"
                );
            }
            assert_eq!(
                u64::from(used),
                chunk.used(),
                "chunk {ci} miscounts its slots"
            );
            assert!(used > 0, "chunk {ci} is empty but allocated");
            count += used;
        }
        assert_eq!(count, self.len, "len disagrees with the reverse index");
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
            "forward table size disagrees with the reverse index"
        );
    }

    fn check_slot(&self, slot: u32) -> Result<(), MapError> {
        if slot >= self.bopt_pages {
            return Err(MapError::SlotOutOfRange {
                slot,
                bopt_pages: self.bopt_pages,
            });
        }
        Ok(())
    }

    /// Writes `fs_page` into the free `slot`'s reverse entry, allocating its chunk.
    fn set_page(&mut self, slot: u32, fs_page: u64) {
        let bits = self.page_bits;
        let chunk =
            self.chunks[(slot >> CHUNK_BITS) as usize].get_or_insert_with(|| Chunk::new(bits));
        chunk.set_page(slot as usize % CHUNK_SLOTS, bits, fs_page);
        chunk.words[0] += 1;
    }

    /// Frees `slot`'s reverse entry, and its chunk when that was the chunk's last.
    fn clear_page(&mut self, slot: u32) {
        let (free, bits) = (self.free(), self.page_bits);
        let entry = &mut self.chunks[(slot >> CHUNK_BITS) as usize];
        let chunk = entry.as_mut().expect("a mapped slot's chunk");
        chunk.set_page(slot as usize % CHUNK_SLOTS, bits, free);
        chunk.words[0] -= 1;
        if chunk.used() == 0 {
            *entry = None;
        }
    }

    fn write_dirty(&mut self, slot: u32, dirty: bool) {
        let Some(Some(chunk)) = self.chunks.get_mut((slot >> CHUNK_BITS) as usize) else {
            debug_assert!(!dirty, "dirty bit on an unallocated chunk");
            return;
        };
        chunk.set_dirty(slot as usize % CHUNK_SLOTS, dirty);
    }
}

/// The reverse entry of a slot known to be mapped (a free function, so the forward table
/// can be changed while it reads the chunks).
#[inline]
fn page_in(chunks: &[Option<Chunk>], slot: u32, bits: u32) -> u32 {
    match &chunks[(slot >> CHUNK_BITS) as usize] {
        Some(c) => c.page(slot as usize % CHUNK_SLOTS, bits) as u32,
        None => u32::MAX,
    }
}

/// Bits needed to write `v`.
fn bits_of(v: u64) -> u32 {
    (64 - v.leading_zeros()).max(1)
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

/// Fixed-width unsigned fields packed end to end in 64-bit words (a field may straddle
/// two words; one spare word keeps the straddling read in bounds).
#[derive(Clone, Debug)]
struct Bits {
    words: Vec<u64>,
    width: u32,
}

/// Field `i` of `width` bits in `words`, fields packed end to end from word `base`. The
/// two words a field may span are read whatever its offset (a spare word at the end keeps
/// the second in bounds), so there is no branch; the double shift keeps the shift count
/// under 64 when the field starts a word.
#[inline]
fn get_bits(words: &[u64], base: usize, i: usize, width: u32) -> u64 {
    let bit = i * width as usize;
    let (w, o) = (base + bit / 64, (bit % 64) as u32);
    let v = (words[w] >> o) | ((words[w + 1] << 1) << (63 - o));
    v & mask(width)
}

/// Sets field `i` of `width` bits in `words` (packed from word `base`) to `value`.
#[inline]
fn set_bits(words: &mut [u64], base: usize, i: usize, width: u32, value: u64) {
    let bit = i * width as usize;
    let (w, o) = (base + bit / 64, (bit % 64) as u32);
    let m = mask(width);
    words[w] = (words[w] & !(m << o)) | (value << o);
    if o + width > 64 {
        let hi = 64 - o;
        words[w + 1] = (words[w + 1] & !(m >> hi)) | (value >> hi);
    }
}

impl Bits {
    fn new(width: u32, n: usize) -> Bits {
        debug_assert!((1..=64).contains(&width));
        Bits {
            words: vec![0; (n * width as usize).div_ceil(64) + 1],
            width,
        }
    }

    #[inline]
    fn get(&self, i: usize) -> u64 {
        get_bits(&self.words, 0, i, self.width)
    }

    #[inline]
    fn set(&mut self, i: usize, value: u64) {
        set_bits(&mut self.words, 0, i, self.width, value)
    }

    fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

/// Open-addressing table of bit-packed slot indices keyed by the slots' reverse entries.
#[derive(Clone, Debug)]
struct SlotTable {
    buckets: Bits,
    /// Low bits of a bucket holding a fingerprint of its key, so most probes that miss
    /// are rejected inside the table instead of by a random read of the reverse index.
    fp_bits: u32,
    capacity: u64,
    /// All-ones value of a bucket's width: an empty bucket (never a valid entry, since
    /// slot indices stay below the all-ones slot field).
    empty: u64,
}

impl SlotTable {
    /// A table for a BOPT of `slots` slots (see the module doc for its size).
    fn new(slots: u32) -> SlotTable {
        let n = u64::from(slots);
        // Bits to hold every slot index and one more value for "empty".
        let slot_bits = bits_of(n);
        // A 4-bit fingerprint while the 32-bit budget still leaves the load factor at or
        // below 0.8 (slot indices up to 22 bits: 4 Mi slots, 16 GiB of 4 KiB pages).
        let fp_bits = if slot_bits <= 22 { 4 } else { 0 };
        let bits = slot_bits + fp_bits;
        let capacity = (32 * n / u64::from(bits)).max(n + n / 8 + 1);
        let mut buckets = Bits::new(bits, capacity as usize);
        buckets.words.fill(u64::MAX);
        SlotTable {
            buckets,
            fp_bits,
            capacity,
            empty: mask(bits),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.buckets.heap_bytes()
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
        (Self::hash(key) >> 24) & mask(self.fp_bits)
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
        self.buckets.get(i as usize)
    }

    #[inline]
    fn set(&mut self, i: u64, value: u64) {
        self.buckets.set(i as usize, value)
    }

    #[inline]
    fn next(&self, i: u64) -> u64 {
        if i + 1 == self.capacity {
            0
        } else {
            i + 1
        }
    }

    /// (bucket, slot) holding `key`; `key_of` reads a mapped slot's reverse entry.
    #[inline]
    fn find(&self, key: u32, key_of: impl Fn(u32) -> u32) -> Option<(u64, u32)> {
        let fp = self.fingerprint(key);
        let fp_mask = mask(self.fp_bits);
        let mut i = self.home(key);
        loop {
            let e = self.get(i);
            if e == self.empty {
                return None;
            }
            if e & fp_mask == fp {
                let s = self.slot_of(e);
                if key_of(s) == key {
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
    fn remove(&mut self, key: u32, key_of: impl Fn(u32) -> u32) {
        let Some((mut hole, _)) = self.find(key, &key_of) else {
            return;
        };
        let mut j = hole;
        loop {
            j = self.next(j);
            let s = self.get(j);
            if s == self.empty {
                break;
            }
            let home = self.home(key_of(self.slot_of(s)));
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

    /// Bytes per mapped page, whole map and index alone, with the first `mapped` slots of
    /// a `slots`-slot BOPT over `fs_pages` mapped to scattered pages.
    fn bytes_per_mapped(fs_pages: u64, slots: u32, mapped: u32) -> (f64, f64) {
        let mut m = Map::new(fs_pages, slots).unwrap();
        for s in 0..mapped {
            m.insert(u64::from(s) * 7_919 % fs_pages, s, s % 3 == 0)
                .unwrap();
        }
        m.check();
        let n = f64::from(mapped);
        (m.heap_bytes() as f64 / n, m.index_bytes() as f64 / n)
    }

    #[test]
    #[ignore = "prints the memory table for the module doc"]
    fn memory_table() {
        for (fs_pages, slots) in [
            (49_152u64, 16_000u32),
            (1 << 28, 1 << 20),
            (1 << 30, 1 << 20),
            (1 << 28, 1 << 24),
        ] {
            for share in [0.5, 0.8, 1.0] {
                let mapped = (f64::from(slots) * share) as u32;
                let (all, index) = bytes_per_mapped(fs_pages, slots, mapped);
                println!("fs {fs_pages} slots {slots} share {share}: {all:.2} ({index:.2} index)");
            }
        }
    }

    #[test]
    fn memory_per_mapped_page_as_the_module_doc_says() {
        // The module doc's figures, everything counted (dirty bits and chunk pointers
        // included): the bench's BOPT, 16,000 slots over a 192 MiB data area (49,152
        // pages), with its read cache full (80%) and full; a 4 GiB BOPT over 1 TiB, full.
        for (fs_pages, slots, share, bound) in [
            (49_152u64, 16_000u32, 0.8, 7.3),
            (49_152, 16_000, 1.0, 6.3),
            (1 << 28, 1 << 20, 1.0, 7.9),
        ] {
            let mapped = (f64::from(slots) * share) as u32;
            let (all, index) = bytes_per_mapped(fs_pages, slots, mapped);
            assert!(
                all <= bound,
                "{all:.2} B per mapped page ({index:.2} index) at {share} of {slots}"
            );
        }
        // Reverse entries are allocated with the slots they describe: a map with one
        // chunk in use holds the forward table and one chunk.
        let mut m = Map::new(1 << 28, 1 << 20).unwrap();
        let empty = m.heap_bytes();
        m.insert(5, 7, true).unwrap();
        let one = m.heap_bytes() - empty;
        assert!(one <= (1024 * 29 / 8) + 256, "one chunk: {one} B");
        m.remove_slot(7).unwrap();
        assert_eq!(m.heap_bytes(), empty, "the emptied chunk is freed");
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64, u32, bool),
        Remove(u32),
        Move(u32, u32),
        Dirty(u32, bool),
    }

    fn op(fs_pages: u64, slots: u32) -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..fs_pages, 0..slots, any::<bool>()).prop_map(|(p, s, d)| Op::Insert(p, s, d)),
            2 => (0..slots).prop_map(Op::Remove),
            1 => (0..slots, 0..slots).prop_map(|(a, b)| Op::Move(a, b)),
            1 => (0..slots, any::<bool>()).prop_map(|(s, d)| Op::Dirty(s, d)),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any sequence of operations leaves the map agreeing with a plain model (slot ->
        /// (page, dirty)), errors included, through forward resizes both ways and chunks
        /// allocated and freed (3,000 slots: three chunks and a partial one).
        #[test]
        fn agrees_with_a_model(ops in proptest::collection::vec(op(5_000, 3_000), 1..3_000)) {
            use std::collections::BTreeMap;
            let mut m = Map::new(5_000, 3_000).unwrap();
            let mut model: BTreeMap<u32, (u64, bool)> = BTreeMap::new();
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    Op::Insert(p, s, d) => {
                        let ok = !model.contains_key(&s) && !model.values().any(|v| v.0 == p);
                        proptest::prop_assert_eq!(m.insert(p, s, d).is_ok(), ok);
                        if ok {
                            model.insert(s, (p, d));
                        }
                    }
                    Op::Remove(s) => {
                        let want = model.remove(&s);
                        proptest::prop_assert_eq!(m.remove_slot(s).ok(), want);
                    }
                    Op::Move(a, b) => {
                        let ok = model.contains_key(&a) && !model.contains_key(&b);
                        proptest::prop_assert_eq!(m.move_slot(a, b).is_ok(), ok);
                        if ok {
                            let v = model.remove(&a).unwrap();
                            model.insert(b, v);
                        }
                    }
                    Op::Dirty(s, d) => {
                        let ok = model.contains_key(&s);
                        proptest::prop_assert_eq!(m.set_dirty(s, d).is_ok(), ok);
                        if let Some(v) = model.get_mut(&s) {
                            v.1 = d;
                        }
                    }
                }
                if i % 97 == 0 {
                    m.check();
                }
            }
            m.check();
            let got: Vec<(u64, u32, bool)> = m.iter().collect();
            let want: Vec<(u64, u32, bool)> =
                model.iter().map(|(&s, &(p, d))| (p, s, d)).collect();
            proptest::prop_assert_eq!(got, want);
            for (&s, &(p, d)) in &model {
                proptest::prop_assert_eq!(m.lookup(p), Some(s));
                proptest::prop_assert_eq!(m.is_dirty(s), d);
            }
            proptest::prop_assert_eq!(m.len() as usize, model.len());
        }
    }
}
