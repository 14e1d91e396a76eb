//! The integer keys the counters sort.

/// A key: an unsigned integer whose order is the order the counts come out in.
pub trait Key: Copy + Ord + Default + std::fmt::Debug {
    /// Bytes of the key (radix digits).
    const BYTES: usize;
    /// Digit `i` (0 = least significant byte).
    fn digit(self, i: usize) -> u8;
    /// Bitwise xor, to find the digits all keys share.
    fn xor(self, other: Self) -> Self;
    /// Bitwise or.
    fn or(self, other: Self) -> Self;
    /// Bits up to and including the highest set bit (0 for zero).
    fn bit_len(self) -> u32;
    /// `(self >> shift) & mask` as an index.
    fn bucket(self, shift: u32, mask: usize) -> usize;
}

macro_rules! key {
    ($t:ty) => {
        impl Key for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn digit(self, i: usize) -> u8 {
                (self >> (8 * i)) as u8
            }
            #[inline(always)]
            fn xor(self, other: Self) -> Self {
                self ^ other
            }
            #[inline(always)]
            fn or(self, other: Self) -> Self {
                self | other
            }
            #[inline(always)]
            fn bit_len(self) -> u32 {
                <$t>::BITS - self.leading_zeros()
            }
            #[inline(always)]
            fn bucket(self, shift: u32, mask: usize) -> usize {
                (self >> shift) as usize & mask
            }
        }
    };
}
key!(u32);
key!(u64);
key!(u128);
