//! Indirector throughput per request and map memory per mapped page, against a same-run
//! baseline: the same routing decisions made over a plain `HashMap<u64, u64>` forward map
//! plus a `HashMap<u64, u64>` reverse map and a `HashSet` of dirty slots.
//!
//! Workload: a 4 GiB BOPT (1 Mi slots of 4 KiB) whose read cache is full, and a stream of
//! 4 KiB..64 KiB requests, 70% reads, half of them inside the mapped set.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use reblock_layout::*;
use std::collections::{HashMap, HashSet};
use std::hint::black_box;

const BOPT_PAGES: u32 = 1 << 20;
const FS_PAGES: u64 = 1 << 26; // 256 GiB data area

fn geometry() -> Geometry {
    Geometry::new(&BoptConfig {
        page_sectors: 8,
        data_sectors: FS_PAGES * 8,
        bopt_pages: BOPT_PAGES,
        segment_pages: 256,
        write_buffer_fraction: 0.1,
        position: BoptPosition::End,
        meta_sectors: 0,
    })
    .unwrap()
}

/// FS page of read-cache slot `s`: runs of 64 consecutive pages scattered over the disk.
fn fs_page_of_slot(s: u64) -> u64 {
    (s / 64).wrapping_mul(0x9E37_79B9) % (FS_PAGES / 64) * 64 + s % 64
}

fn full_indirector() -> Indirector {
    let g = geometry();
    let mut plan = Plan::new(8, "bench");
    for s in 0..u64::from(g.read_cache_pages) {
        plan.push(fs_page_of_slot(s), 1, s);
    }
    let mut ind = Indirector::new(g).unwrap();
    for step in diff(&plan, &ind, DiffOptions::default()).unwrap().steps {
        ind.apply(&step).unwrap();
    }
    ind
}

fn requests(n: usize, mapped_slots: u64) -> Vec<IoRequest> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pages = 1 + (x >> 60) % 16;
            let page = if x & 1 == 0 {
                fs_page_of_slot((x >> 8) % mapped_slots)
            } else {
                (x >> 8) % (FS_PAGES - 16)
            };
            let op = if (x >> 4) % 10 < 7 {
                Op::Read
            } else {
                Op::Write
            };
            IoRequest {
                op,
                sector: page.min(FS_PAGES - pages) * 8,
                sectors: pages * 8,
            }
        })
        .collect()
}

/// The baseline: Algorithm 5's read/write decision over std hash maps, with the same
/// outputs per page (no coalescing, no write-buffer absorption: strictly less work).
struct HashBaseline {
    forward: HashMap<u64, u64>,
    reverse: HashMap<u64, u64>,
    dirty: HashSet<u64>,
}

impl HashBaseline {
    fn new(ind: &Indirector) -> HashBaseline {
        let mut b = HashBaseline {
            forward: HashMap::new(),
            reverse: HashMap::new(),
            dirty: HashSet::new(),
        };
        for (p, s, _) in ind.map().iter() {
            b.forward.insert(p, u64::from(s));
            b.reverse.insert(u64::from(s), p);
        }
        b
    }
    fn route(&mut self, r: IoRequest, out: &mut Vec<(bool, u64)>) {
        out.clear();
        for page in r.sector / 8..(r.sector + r.sectors).div_ceil(8) {
            match self.forward.get(&page) {
                Some(&s) => {
                    if r.op == Op::Write {
                        self.dirty.insert(s);
                    }
                    out.push((true, s));
                }
                None => out.push((false, page)),
            }
        }
    }
    fn heap_bytes_estimate(&self) -> usize {
        // hashbrown: one control byte per bucket plus the entry.
        self.forward.capacity() * 17 + self.reverse.capacity() * 17 + self.dirty.capacity() * 9
    }
}

fn bench(c: &mut Criterion) {
    let ind = full_indirector();
    let reqs = requests(20_000, u64::from(ind.geometry().read_cache_pages));
    let base = HashBaseline::new(&ind);
    let mapped = f64::from(ind.map().len());
    eprintln!(
        "map memory per BOPT slot: reblock-layout {:.2} B (seed bound 8.125 B)",
        ind.map().heap_bytes() as f64 / f64::from(BOPT_PAGES)
    );
    eprintln!(
        "map memory per mapped page: reblock-layout {:.2} B (index {:.2} B + dirty bits), HashMap baseline {:.2} B (ratio {:.2}x)",
        ind.map().heap_bytes() as f64 / mapped,
        ind.map().index_bytes() as f64 / mapped,
        base.heap_bytes_estimate() as f64 / mapped,
        base.heap_bytes_estimate() as f64 / ind.map().heap_bytes() as f64,
    );
    let mut g = c.benchmark_group("indirect");
    g.sample_size(20);
    g.throughput(Throughput::Elements(reqs.len() as u64));
    g.bench_function(BenchmarkId::new("layout", "20k-requests"), |b| {
        b.iter_batched_ref(
            || ind.clone(),
            |ind| {
                let mut out = Vec::new();
                for &r in &reqs {
                    black_box(ind.indirect(r, &mut out).unwrap());
                }
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.bench_function(BenchmarkId::new("hashmap-baseline", "20k-requests"), |b| {
        let mut base = HashBaseline::new(&ind);
        let mut out = Vec::new();
        b.iter(|| {
            for &r in &reqs {
                base.route(r, &mut out);
                black_box(&out);
            }
        })
    });
    g.finish();
    let mut g = c.benchmark_group("map-lookup");
    let pages: Vec<u64> = reqs.iter().map(|r| r.sector / 8).collect();
    g.throughput(Throughput::Elements(pages.len() as u64));
    g.bench_function("layout", |b| {
        b.iter(|| {
            pages
                .iter()
                .filter(|&&p| ind.map().lookup(p).is_some())
                .count()
        })
    });
    g.bench_function("hashmap-baseline", |b| {
        b.iter(|| {
            pages
                .iter()
                .filter(|&&p| base.forward.contains_key(&p))
                .count()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
