//! Test helpers: a deterministic random stream and request loops.
#![allow(dead_code)]

use reblock_device::{DevRequest, Device};

/// splitmix64: deterministic, dependency-free.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Mean service (ms) of `reqs` issued `gap_ns` apart (each on an idle device), and the
/// fraction of cache hits.
pub fn mean_ms(dev: &mut dyn Device, reqs: &[DevRequest], gap_ns: u64) -> (f64, f64) {
    let mut total = 0u64;
    let mut hits = 0usize;
    for (i, r) in reqs.iter().enumerate() {
        let s = dev.service(i as u64 * gap_ns, r);
        assert!(s.total_ns < gap_ns, "request {i} took {} ns", s.total_ns);
        total += s.total_ns;
        hits += s.cache_hit as usize;
    }
    (
        total as f64 / reqs.len() as f64 / 1e6,
        hits as f64 / reqs.len() as f64,
    )
}

pub fn read(sector: u64, sectors: u32) -> DevRequest {
    DevRequest {
        sector,
        sectors,
        write: false,
    }
}

pub fn write(sector: u64, sectors: u32) -> DevRequest {
    DevRequest {
        sector,
        sectors,
        write: true,
    }
}
