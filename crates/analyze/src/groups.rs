//! The page-group table behind [`crate::pages::Pages`]: an open-addressing hash table
//! whose slot is one cache line holding a group of eight consecutive pages, key included.
//!
//! Written by hand rather than taken from a crate for two reasons that decide the
//! analyzer's speed once the table outgrows the cache (a trace of a few million requests
//! touches a million pages). A lookup should cost one cache miss: the general-purpose
//! tables (hashbrown, and std's) keep their control bytes apart from their entries, so a
//! lookup that misses the cache misses twice. And a lookup should be able to start early:
//! [`GroupTable::prefetch`] asks for a slot's line before it is needed, so the analyzer
//! can keep a dozen lookups in flight instead of waiting for each in turn; no table crate
//! exposes the slot a key will land in.
//!
//! (A directory of fixed segments split one at a time, extendible hashing, measured
//! slower: 94 against 84 ns per request on the benchmark's million-request mix, though
//! it faults in half the memory of doubling; the directory adds a dependent load to
//! every lookup.)

/// Pages per group (per slot).
pub const GROUP_PAGES: u64 = 8;

/// One page, in six bytes: 16-bit read and write counts, and in `interval` its count in
/// the current interval (low 14 bits) with two flags in the top bits. Counts past what
/// the fields hold go on in [`crate::pages`]' spill map: 16 bits cover all but the
/// hottest pages of a trace, and halving a page's bytes halves the table a large trace
/// keeps in memory, which is what the analysis waits on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Cell {
    pub reads: u16,
    pub writes: u16,
    pub interval: u16,
}

/// One group of pages; 64 bytes, aligned to a cache line. A slot is empty while its
/// stamp is 0 (the interval stamps start at 1).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Slot {
    pub group: u64,
    pub device: u32,
    /// Stamp of the interval the interval counts belong to; older stamps mean "zero".
    pub stamp: u16,
    /// Pages some request covered whole: bit k for page k read, bit 8 + k written (the
    /// sector-exact unique counts of [`crate::sectors`]).
    pub full: u16,
    pub cells: [Cell; GROUP_PAGES as usize],
}

const _: () = assert!(std::mem::size_of::<Slot>() == 64);

/// `n` empty slots from zeroed memory: a large table then comes straight from the
/// operating system's zero pages, where filling it with `Slot::default()` would write
/// every byte once more (measured: 4% of the analysis, on top of the page faults).
fn zeroed_slots(n: usize) -> Box<[Slot]> {
    let slots = Box::<[Slot]>::new_zeroed_slice(n);
    // SAFETY: a Slot is integers only (no padding, no pointers, no niches), so all-zero
    // bytes are a valid Slot: the empty one, stamp 0.
    unsafe { slots.assume_init() }
}

/// A slot's index in the table.
pub type SlotId = u64;

/// Linear probing over a power-of-two array, at most 3/4 full.
pub struct GroupTable {
    slots: Box<[Slot]>,
    /// log2 of the capacity.
    bits: u32,
    len: usize,
    /// Random per table, so that a trace crafted to collide its groups into long probe
    /// runs would have to guess it; results never depend on it, since nothing the
    /// analysis reports depends on where a group lands.
    seed: u64,
}

impl Default for GroupTable {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        GroupTable::with_bits(10, seed)
    }
}

impl GroupTable {
    fn with_bits(bits: u32, seed: u64) -> Self {
        GroupTable {
            slots: zeroed_slots(1 << bits),
            bits,
            len: 0,
            seed,
        }
    }

    /// The hash of a group: Fibonacci hashing of the group number mixed with the device
    /// and the seed; the top bits pick the slot. (A full multiply-xorshift finalizer
    /// measured 15-30% slower on the benchmark's mix, for no better spread of page
    /// numbers, which differ mostly in their low bits.)
    #[inline]
    pub fn hash(&self, device: u32, group: u64) -> u64 {
        (group ^ u64::from(device).rotate_right(20) ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.bits)) as usize
    }

    /// Starts loading the line of the slot `hash` lands in (a hint: the lookup is right
    /// whether or not the line has arrived).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let slot = &self.slots[self.home(hash)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is only a hint to the cache; it reads nothing the program
        // sees and cannot fault, and the pointer is to a live slot besides.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast::<i8>());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// The slot of (`device`, `group`), inserting an empty one (stamp 0, which the caller
    /// must stamp before the next insertion) if absent; and whether the table grew, which
    /// moves every slot.
    #[inline]
    pub fn find_or_insert(&mut self, device: u32, group: u64, hash: u64) -> (SlotId, bool) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(hash);
        loop {
            let s = &self.slots[i];
            if s.stamp == 0 {
                break;
            }
            if s.group == group && s.device == device {
                return (i as SlotId, false);
            }
            i = (i + 1) & mask;
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
            let (i, _) = self.find_or_insert(device, group, hash);
            return (i, true);
        }
        self.len += 1;
        let s = &mut self.slots[i];
        s.group = group;
        s.device = device;
        (i as SlotId, false)
    }

    /// Doubles the capacity. The new home of a slot is its old home times two (plus
    /// one), so the old table read in order writes the new one nearly in order.
    fn grow(&mut self) {
        let mut bigger = GroupTable::with_bits(self.bits + 1, self.seed);
        let mask = bigger.slots.len() - 1;
        for s in self.slots.iter().filter(|s| s.stamp != 0) {
            let mut i = bigger.home(bigger.hash(s.device, s.group));
            while bigger.slots[i].stamp != 0 {
                i = (i + 1) & mask;
            }
            bigger.slots[i] = *s;
        }
        bigger.len = self.len;
        *self = bigger;
    }

    /// The slot of (`device`, `group`), if the table holds it.
    pub fn find(&self, device: u32, group: u64) -> Option<&Slot> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(self.hash(device, group));
        loop {
            let s = &self.slots[i];
            if s.stamp == 0 {
                return None;
            }
            if s.group == group && s.device == device {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    #[cfg(test)]
    pub fn slot(&self, id: SlotId) -> &Slot {
        &self.slots[id as usize]
    }

    pub fn slot_mut(&mut self, id: SlotId) -> &mut Slot {
        &mut self.slots[id as usize]
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Slots in the table (used or not).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// Gives every occupied slot the stamp `stamp` (which must not be 0).
    pub fn restamp(&mut self, stamp: u16) {
        debug_assert_ne!(stamp, 0);
        for s in self.slots.iter_mut().filter(|s| s.stamp != 0) {
            s.stamp = stamp;
        }
    }

    /// Every occupied slot with its id.
    pub fn occupied(&self) -> impl Iterator<Item = (SlotId, &Slot)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.stamp != 0)
            .map(|(i, s)| (i as SlotId, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_inserted_across_growth() {
        let mut t = GroupTable::with_bits(2, 12345);
        let mut grew = 0;
        for g in 0..1000u64 {
            let (d, g) = ((g % 3) as u32, g * 7919);
            let (i, grown) = t.find_or_insert(d, g, t.hash(d, g));
            grew += usize::from(grown);
            t.slot_mut(i).stamp = 1;
            t.slot_mut(i).cells[0].interval = g as u16;
        }
        assert_eq!(t.len(), 1000);
        assert_eq!(t.occupied().count(), 1000);
        assert!(grew >= 8 && t.capacity() * 3 >= 1000 * 4);
        for g in 0..1000u64 {
            let (d, g) = ((g % 3) as u32, g * 7919);
            let (i, grown) = t.find_or_insert(d, g, t.hash(d, g));
            assert!(!grown);
            assert_eq!((t.slot(i).group, t.slot(i).device), (g, d));
            assert_eq!(t.slot(i).cells[0].interval, g as u16);
        }
        assert_eq!(t.len(), 1000);
    }
}
