//! The benchmark workload, shared by the `plan` bench and the `phases` example.
//!
//! 64 processes, each replaying its own program of 1024 extents (4-512 KiB, page
//! aligned, a quarter of them shared or shifted by a page between processes so that the
//! master graph must split ranges), in bursts of 1-16 requests, jumping elsewhere in its
//! program 1 time in 10.

use reblock_trace::{Op, Request};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

const PROCESSES: u64 = 64;
const PROGRAM: u64 = 1024;

pub fn workload(len: usize) -> Vec<Request> {
    let mut rng = Lcg(42);
    let shared: Vec<(u64, u32)> = (0..PROGRAM).map(|_| extent(&mut rng)).collect();
    let programs: Vec<Vec<(u64, u32)>> = (0..PROCESSES)
        .map(|_| {
            (0..PROGRAM)
                .map(|i| match rng.next(8) {
                    0 => shared[i as usize],
                    1 => (shared[i as usize].0 + 8, shared[i as usize].1),
                    _ => extent(&mut rng),
                })
                .collect()
        })
        .collect();
    let mut position = vec![0u64; PROCESSES as usize];
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let p = rng.next(PROCESSES) as usize;
        for _ in 0..1 + rng.next(16) {
            position[p] = if rng.next(10) == 0 {
                rng.next(PROGRAM)
            } else {
                (position[p] + 1) % PROGRAM
            };
            let (sector, sectors) = programs[p][position[p] as usize];
            out.push(Request {
                ts_ns: out.len() as u64,
                pid: Some(1000 + p as u32),
                command: p as u32 % 7,
                device: 0,
                sector,
                sectors,
                op: Op::Read,
            });
        }
    }
    out.truncate(len);
    out
}

/// A page-aligned extent of 1-128 pages somewhere in a 32 GiB volume.
fn extent(rng: &mut Lcg) -> (u64, u32) {
    (rng.next(8 << 20) * 8, 8 * (1 + rng.next(128) as u32))
}
