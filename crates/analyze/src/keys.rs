//! Packing a few integer fields into one key for the sorted counters of
//! [`reblock_tally`], with field widths that grow as larger values appear.
//!
//! The counters sort keys, and a sort costs by the key's bytes: a transition pair of two
//! 25-bit sectors packs into 51 bits of a `u64` (8 bytes per occurrence) where a fixed
//! layout wide enough for any sector needs a `u128`. Widths start at zero and grow to the
//! largest value seen; when they grow, every stored key is re-packed. Fields keep their
//! order, so re-packing keeps the keys' order (no re-sort), and since widths only grow, a
//! value that fits once fits for good. A value whose fields cannot fit the key type at all
//! is the caller's to place elsewhere.

use rustc_hash::FxHashMap;

/// A key type the fields are packed into.
pub trait Packed: reblock_tally::Key {
    const BITS: u32;
    fn from_u128(v: u128) -> Self;
    fn to_u128(self) -> u128;
}

impl Packed for u64 {
    const BITS: u32 = 64;
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v as u64
    }
    #[inline(always)]
    fn to_u128(self) -> u128 {
        u128::from(self)
    }
}

impl Packed for u128 {
    const BITS: u32 = 128;
    #[inline(always)]
    fn from_u128(v: u128) -> Self {
        v
    }
    #[inline(always)]
    fn to_u128(self) -> u128 {
        self
    }
}

fn bit_len(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Widths in bits of `N` fields, the most significant first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout<const N: usize> {
    widths: [u32; N],
}

impl<const N: usize> Layout<N> {
    /// A layout with the given minimum widths (a flag field is 1 bit from the start).
    pub fn new(widths: [u32; N]) -> Self {
        Layout { widths }
    }

    pub fn bits(&self) -> u32 {
        self.widths.iter().sum()
    }

    #[inline]
    pub fn fits(&self, fields: [u64; N]) -> bool {
        fields
            .iter()
            .zip(&self.widths)
            .all(|(&f, &w)| bit_len(f) <= w)
    }

    /// This layout with every width grown to hold `fields`.
    pub fn grown(&self, fields: [u64; N]) -> Self {
        let mut widths = self.widths;
        for (w, &f) in widths.iter_mut().zip(&fields) {
            *w = (*w).max(bit_len(f));
        }
        Layout { widths }
    }

    /// The fields packed, the first in the highest bits; they must fit.
    #[inline]
    pub fn pack(&self, fields: [u64; N]) -> u128 {
        debug_assert!(self.fits(fields) && self.bits() <= 128);
        fields.iter().zip(&self.widths).fold(0u128, |k, (&f, &w)| {
            k.checked_shl(w).unwrap_or(0) | u128::from(f)
        })
    }

    pub fn unpack(&self, mut key: u128) -> [u64; N] {
        let mut fields = [0u64; N];
        for i in (0..N).rev() {
            let w = self.widths[i];
            let mask = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
            fields[i] = key as u64 & mask;
            key = key.checked_shr(w).unwrap_or(0);
        }
        fields
    }

    /// Re-packs a key of this layout into `to` (wider or equal in every field).
    pub fn repack(&self, to: &Layout<N>, key: u128) -> u128 {
        to.pack(self.unpack(key))
    }
}

/// Devices numbered in order of first appearance, for the device field of keys (a
/// device number can be any `u32`; a trace has one or a few).
#[derive(Clone, Debug, Default)]
pub struct Devices {
    index: FxHashMap<u32, u32>,
}

impl Devices {
    pub fn index(&mut self, device: u32) -> u32 {
        let next = self.index.len() as u32;
        *self.index.entry(device).or_insert(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_unpack_and_grow_keep_order() {
        let l = Layout::new([0, 0, 0, 1]).grown([2, 100, 7, 1]);
        assert_eq!(l.bits(), 2 + 7 + 3 + 1);
        let a = l.pack([2, 100, 7, 1]);
        assert_eq!(a, ((2 << 7 | 100) << 3 | 7) << 1 | 1);
        assert_eq!(l.unpack(a), [2, 100, 7, 1]);
        let b = l.pack([2, 100, 6, 1]);
        let wide = l.grown([0, 1 << 40, 1 << 20, 0]);
        assert!(wide.fits([2, 100, 7, 1]) && !l.fits([0, 0, 8, 0]));
        let (a2, b2) = (l.repack(&wide, a), l.repack(&wide, b));
        assert!(b < a && b2 < a2);
        assert_eq!(wide.unpack(a2), [2, 100, 7, 1]);
        // 64-bit fields at the edge of a u128.
        let full = Layout::new([32, 64, 1]);
        let k = full.pack([u64::from(u32::MAX), u64::MAX, 1]);
        assert_eq!(full.unpack(k), [u64::from(u32::MAX), u64::MAX, 1]);
    }

    #[test]
    fn devices_in_order_of_appearance() {
        let mut d = Devices::default();
        assert_eq!([9, 9, 3, 9, 7, 3].map(|x| d.index(x)), [0, 0, 1, 0, 2, 1]);
    }
}
