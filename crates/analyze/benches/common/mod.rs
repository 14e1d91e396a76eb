//! The synthetic trace shared by the benchmark and the profiling example.

use reblock_trace::{Op, Request};

/// A developer-like mix: runs of sequential 4-32 KiB requests from a few processes over a
/// 2^22-page (16 GiB) space with skewed hot regions, 5% writes, ~10 us apart.
pub fn synthetic(n: usize) -> Vec<Request> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = Vec::with_capacity(n);
    let mut sector = 0u64;
    let mut ts = 0u64;
    for i in 0..n {
        let r = next();
        if i % 8 == 0 {
            // New run: hot region (1/16 of the space) three times in four.
            let span = if r % 4 == 0 { 1u64 << 25 } else { 1u64 << 21 };
            sector = (next() % span) & !7;
        }
        let sectors = 8 << (r % 3);
        out.push(Request {
            ts_ns: ts,
            pid: Some(1000 + (r >> 8) as u32 % 4),
            command: 1 + (r >> 8) as u32 % 4,
            device: 0,
            sector,
            sectors,
            op: if r % 20 == 0 { Op::Write } else { Op::Read },
        });
        sector += u64::from(sectors);
        ts += 5_000 + (r >> 16) % 10_000;
    }
    out
}
