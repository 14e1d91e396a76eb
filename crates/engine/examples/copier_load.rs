//! Copier throughput and foreground read latency while a reconfiguration is copied.
//!
//! Formats a sparse image (data area of `--data-gib`, region of `--bopt-gib`), admits a plan that
//! scatters `--pages` pages over the data area into the read cache, and runs the background
//! copier to the end while `--readers` threads read random 4 KiB pages (some of them pages
//! the plan brings in, which piggybacking carries). The image is a sparse file in the page
//! cache, so the figures are the engine's own CPU cost under the gate: what the copier does
//! per batch (validation, staging, the map updates) and what a foreground read waits for.
//!
//!     cargo run --release -p reblock-engine --example copier_load -- [--data-gib 16] \
//!         [--bopt-gib 1] [--pages 65536] [--readers 2] [--stride 37]
//!
//! Prints one JSON line: pages and MiB copied, copier wall seconds and MiB/s, the copier
//! thread's CPU seconds and MiB per CPU second (steadier on a loaded machine), foreground
//! reads done meanwhile and their latency (p50, p99, max, in microseconds).

use reblock_engine::format::LayoutRequest;
use reblock_engine::{Engine, EngineOptions, FileStore, Layout};
use reblock_layout::Plan;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

const PAGE: u64 = 4096;

struct Args {
    data_gib: u64,
    pages: u64,
    readers: usize,
    stride: u64,
    bopt_gib: u64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        data_gib: 16,
        pages: 65536,
        readers: 2,
        stride: 37,
        bopt_gib: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let n: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: {value:?} is not a number"))?;
        match flag.as_str() {
            "--data-gib" => a.data_gib = n,
            "--pages" => a.pages = n,
            "--readers" => a.readers = n as usize,
            "--stride" => a.stride = n,
            "--bopt-gib" => a.bopt_gib = n,
            _ => {
                return Err(format!(
                    "unknown flag {flag} (--data-gib, --bopt-gib, --pages, --readers, --stride)"
                ))
            }
        }
    }
    Ok(a)
}

/// A fresh sparse image with an empty region, opened.
fn engine(dir: &std::path::Path, a: &Args) -> Engine {
    let l = Layout::plan(&LayoutRequest {
        data_bytes: a.data_gib << 30,
        bopt_bytes: a.bopt_gib << 30,
        page_bytes: PAGE as u32,
        segment_pages: 256,
        write_buffer_fraction: 0.2,
        separate: false,
    })
    .expect("layout");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join("img"))
        .expect("image file");
    f.set_len(l.device_bytes).expect("sparse image");
    let store = FileStore::new(f, None);
    Engine::format(&store, &l, 7).expect("format");
    Engine::open(Arc::new(store), EngineOptions::default())
        .expect("open")
        .0
}

/// `n` pages spread over the data area `stride` pages apart, into slots 0..n.
fn scattered_plan(n: u64, stride: u64, fs_pages: u64) -> Plan {
    let mut plan = Plan::new((PAGE / 512) as u32, "copier_load");
    for i in 0..n {
        plan.push((i * stride) % fs_pages, 1, i);
    }
    plan
}

/// CPU seconds this thread has used: the copier's own cost, which the machine's load does
/// not inflate as it does wall time.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
        .copied()
        .unwrap_or(0)
}

fn main() {
    let a = parse().unwrap_or_else(|e| {
        eprintln!("copier_load: {e}");
        std::process::exit(2)
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let e = Arc::new(engine(dir.path(), &a));
    let fs_pages = (a.data_gib << 30) / PAGE;
    let stats = e
        .reconfigure(scattered_plan(a.pages, a.stride, fs_pages))
        .expect("plan admitted");
    let copying = Arc::new(AtomicBool::new(true));
    let readers: Vec<_> = (0..a.readers as u64)
        .map(|r| {
            let (e, copying) = (e.clone(), copying.clone());
            std::thread::spawn(move || {
                let (mut lat, mut buf) = (Vec::new(), vec![0u8; PAGE as usize]);
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ r;
                while copying.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let t = Instant::now();
                    e.read_bytes(&mut buf, (x % fs_pages) * PAGE).expect("read");
                    lat.push(t.elapsed().as_micros() as u64);
                }
                lat
            })
        })
        .collect();
    let (t, cpu) = (Instant::now(), thread_cpu_s());
    while e.reconfig_pending() {
        e.background_tick(true).expect("copier round");
    }
    let (copy_s, copy_cpu_s) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu);
    copying.store(false, Ordering::Relaxed);
    let mut lat: Vec<u64> = readers
        .into_iter()
        .flat_map(|h| h.join().expect("reader"))
        .collect();
    lat.sort_unstable();
    let s = e.status();
    let mib = (stats.incoming_pages * PAGE) as f64 / f64::from(1 << 20);
    println!(
        "{{\"data_gib\":{},\"pages\":{},\"mib\":{:.1},\"copy_s\":{:.3},\"copy_mib_s\":{:.1},\"copy_cpu_s\":{:.3},\"cpu_mib_s\":{:.1},\"piggybacked_pages\":{},\"fg_reads\":{},\"fg_p50_us\":{},\"fg_p99_us\":{},\"fg_max_us\":{}}}",
        a.data_gib,
        stats.incoming_pages,
        mib,
        copy_s,
        mib / copy_s,
        copy_cpu_s,
        mib / copy_cpu_s,
        s.piggybacked_pages,
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0),
    );
}
