//! Operation-sequence property test (after redb's fuzz_redb.rs): random sequences of
//! aligned and unaligned writes, flushes, trims, reconfigurations, destages, detaches,
//! clean and unclean restarts, a write that fails with ENOSPC or EIO at the N-th backing
//! I/O, and a crash at the N-th backing I/O (a power cut that keeps any subset of the
//! writes not yet synced) drive the engine over a fault-injecting store, and every read
//! is compared with a model of what a plain disk may hold:
//!
//! * after a write that succeeded, its bytes; after one that failed, its bytes or the
//!   old ones (never anything else, and no byte outside it changes);
//! * after a crash or restart, what the last successful FLUSH covered, or any write
//!   issued after it.
//!
//! Every byte written is a function of (write id, offset), so a byte read back names the
//! writes it can come from. `PROPTEST_CASES=N` runs more sequences.

use proptest::prelude::*;
use reblock_engine::format::LayoutRequest;
use reblock_engine::{Engine, EngineOptions, Fault, FaultStore, Layout};
use reblock_layout::Plan;
use std::sync::Arc;

const PAGE: u64 = 4096;
const DATA_PAGES: u64 = 32;
const DATA_BYTES: u64 = DATA_PAGES * PAGE;

/// The write id of a trim or write-zeroes: its bytes read as zeros.
const ZEROS: u16 = u16::MAX;

fn byte_of(id: u16, off: usize) -> u8 {
    if id == ZEROS {
        return 0;
    }
    (u32::from(id)
        .wrapping_mul(131)
        .wrapping_add(off as u32 * 7)
        .wrapping_add(off as u32 / 509)) as u8
}

fn layout() -> Layout {
    Layout::plan(&LayoutRequest {
        data_bytes: DATA_BYTES,
        bopt_bytes: 6 * (2 * 4096 + 4 * PAGE)
            + 3 * 4096
            + 34 * reblock_engine::format::FREEMAP_CHUNK_BYTES, // free-space area: 1 map chunk + 16 replica blocks, 2 copies
        page_bytes: PAGE as u32,
        segment_pages: 4,
        write_buffer_fraction: 0.34,
        separate: false,
    })
    .unwrap()
}

#[derive(Clone, Debug)]
enum Action {
    Write {
        page: u64,
        pages: u64,
    },
    Unaligned {
        offset: u64,
        len: u64,
    },
    Flush,
    Trim {
        page: u64,
        pages: u64,
    },
    /// WRITE_ZEROES of any bytes; `may_trim` false is the client's NO_HOLE.
    Zeroes {
        offset: u64,
        len: u64,
        may_trim: bool,
    },
    Reconfigure {
        seed: u64,
    },
    /// Reads one page again and again, then lets the background make FS2 replicas.
    Hot {
        page: u64,
    },
    Background,
    Detach,
    Restart {
        clean: bool,
    },
    Fail {
        at_op: u64,
        enospc: bool,
        page: u64,
        unaligned: bool,
    },
    Crash {
        at_op: u64,
        keep_seed: u64,
    },
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => (0..DATA_PAGES, 1..4u64).prop_map(|(page, pages)| Action::Write { page, pages }),
        4 => (0..DATA_BYTES - 1, 1..9000u64).prop_map(|(offset, len)| Action::Unaligned { offset, len }),
        4 => Just(Action::Flush),
        3 => (0..DATA_PAGES, 1..5u64).prop_map(|(page, pages)| Action::Trim { page, pages }),
        2 => (0..DATA_BYTES - 1, 1..20000u64, any::<bool>())
            .prop_map(|(offset, len, may_trim)| Action::Zeroes { offset, len, may_trim }),
        2 => any::<u64>().prop_map(|seed| Action::Reconfigure { seed }),
        2 => Just(Action::Background),
        3 => (0..DATA_PAGES).prop_map(|page| Action::Hot { page }),
        1 => Just(Action::Detach),
        1 => any::<bool>().prop_map(|clean| Action::Restart { clean }),
        3 => (0..6u64, any::<bool>(), 0..DATA_PAGES, any::<bool>())
            .prop_map(|(at_op, enospc, page, unaligned)| Action::Fail { at_op, enospc, page, unaligned }),
        3 => (0..12u64, any::<u64>()).prop_map(|(at_op, keep_seed)| Action::Crash { at_op, keep_seed }),
    ]
}

/// Per byte, the write ids a read may show now (`now`) and after a crash (`durable`).
struct Model {
    now: Vec<Vec<u16>>,
    durable: Vec<Vec<u16>>,
    next_id: u16,
}

impl Model {
    fn new() -> Model {
        Model {
            now: vec![vec![0]; DATA_BYTES as usize],
            durable: vec![vec![0]; DATA_BYTES as usize],
            next_id: 1,
        }
    }
    fn data(&mut self, offset: u64, len: u64) -> (u16, Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        let bytes = (offset..offset + len)
            .map(|o| byte_of(id, o as usize))
            .collect();
        (id, bytes)
    }
    fn wrote(&mut self, id: u16, offset: u64, len: u64, ok: bool) {
        let end = (offset + len).min(DATA_BYTES);
        for b in offset as usize..end as usize {
            if ok {
                self.now[b] = vec![id];
            } else {
                self.now[b].push(id);
            }
            self.durable[b].push(id);
        }
    }
    fn flushed(&mut self) {
        self.durable.clone_from(&self.now);
    }
    /// Checks `bytes` against `allowed` and narrows it (and `now`) to what was read.
    fn check(&mut self, bytes: &[u8], after_restart: bool) -> Result<(), String> {
        self.check_bytes(bytes, 0..bytes.len(), after_restart)
    }

    /// [`Model::check`] of `len` bytes at `at` (of a buffer the size of the data area).
    fn check_range(&mut self, bytes: &[u8], at: usize, len: usize) -> Result<(), String> {
        self.check_bytes(bytes, at..at + len, false)
    }

    fn check_bytes(
        &mut self,
        bytes: &[u8],
        range: std::ops::Range<usize>,
        after_restart: bool,
    ) -> Result<(), String> {
        for (off, &v) in bytes.iter().enumerate().take(range.end).skip(range.start) {
            let allowed = if after_restart {
                &self.durable[off]
            } else {
                &self.now[off]
            };
            let hits: Vec<u16> = allowed
                .iter()
                .copied()
                .filter(|&id| byte_of(id, off) == v)
                .collect();
            if hits.is_empty() {
                return Err(format!(
                    "byte {off} (page {}) reads {v:#04x}, which none of writes {allowed:?} wrote{}",
                    off as u64 / PAGE,
                    if after_restart {
                        " (after a restart)"
                    } else {
                        ""
                    }
                ));
            }
            self.now[off] = hits;
        }
        Ok(())
    }
}

struct Harness {
    store: Arc<FaultStore>,
    engine: Engine,
    model: Model,
}

fn open(store: &Arc<FaultStore>) -> Result<Engine, String> {
    Engine::open(
        store.clone(),
        EngineOptions {
            max_copy_pages: 3,
            destage_below_free_pages: Some(3),
            ..Default::default()
        },
    )
    .map(|(e, _)| e)
    .map_err(|e| format!("open: {e}"))
}

fn random_plan(seed: u64, l: &Layout) -> Plan {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut plan = Plan::new(8, "model");
    let mut used = std::collections::HashSet::new();
    for slot in 0..u64::from(l.read_cache_pages) {
        let p = next() % DATA_PAGES;
        if next() % 3 > 0 && used.insert(p) {
            plan.push(p, 1, slot);
        }
    }
    plan
}

impl Harness {
    fn new() -> Harness {
        let l = layout();
        let mut dev = vec![0u8; l.device_bytes as usize];
        for (off, b) in dev[..DATA_BYTES as usize].iter_mut().enumerate() {
            *b = byte_of(0, off);
        }
        let store = Arc::new(FaultStore::new(dev, None));
        Engine::format(store.as_ref(), &l, 7).unwrap();
        let engine = open(&store).unwrap();
        Harness {
            store,
            engine,
            model: Model::new(),
        }
    }

    fn write(&mut self, offset: u64, len: u64) {
        let len = len.min(DATA_BYTES - offset);
        let (id, bytes) = self.model.data(offset, len);
        match self.engine.write_bytes(&bytes, offset) {
            Ok(()) => self.model.wrote(id, offset, len, true),
            // Refused before anything was touched.
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => {}
            Err(_) => self.model.wrote(id, offset, len, false),
        }
    }

    /// A trim or write-zeroes of whole-page `offset..offset + len` (a trim's partial
    /// pages keep their bytes): zeros now when it succeeded, zeros or the old bytes when
    /// it failed; either after a crash until a FLUSH covers it.
    fn zeroed(&mut self, offset: u64, len: u64, r: std::io::Result<()>) {
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => {}
            r => self.model.wrote(ZEROS, offset, len, r.is_ok()),
        }
    }

    fn flush(&mut self) {
        if self.engine.flush().is_ok() {
            self.model.flushed();
        }
    }

    fn read_all(&mut self, after_restart: bool) -> Result<(), String> {
        let mut buf = vec![0u8; DATA_BYTES as usize];
        self.engine
            .read_bytes(&mut buf, 0)
            .map_err(|e| format!("read: {e}"))?;
        self.model.check(&buf, after_restart)
    }

    fn restart(&mut self, store: Arc<FaultStore>) -> Result<(), String> {
        self.store = store;
        self.engine = open(&self.store)?;
        self.engine.indirector().check();
        self.read_all(true)
    }

    fn run(&mut self, a: &Action) -> Result<(), String> {
        match *a {
            Action::Write { page, pages } => self.write(page * PAGE, pages * PAGE),
            Action::Unaligned { offset, len } => self.write(offset, len),
            Action::Flush => self.flush(),
            Action::Trim { page, pages } => {
                let len = (pages * PAGE).min(DATA_BYTES - page * PAGE);
                let r = reblock_nbd::Export::trim(&self.engine, page * PAGE, len, false);
                self.zeroed(page * PAGE, len, r);
            }
            Action::Zeroes {
                offset,
                len,
                may_trim,
            } => {
                let len = len.min(DATA_BYTES - offset);
                let r =
                    reblock_nbd::Export::write_zeroes(&self.engine, offset, len, false, may_trim);
                self.zeroed(offset, len, r);
            }
            Action::Reconfigure { seed } => {
                if self
                    .engine
                    .reconfigure(random_plan(seed, self.engine.layout()))
                    .is_ok()
                {
                    for _ in 0..200 {
                        if !matches!(self.engine.background_tick(true), Ok(n) if n > 0) {
                            break;
                        }
                    }
                }
            }
            Action::Hot { page } => {
                for _ in 0..4 {
                    let mut buf = vec![0u8; PAGE as usize];
                    self.engine
                        .read_bytes(&mut buf, page * PAGE)
                        .map_err(|e| format!("read: {e}"))?;
                    let at = (page * PAGE) as usize;
                    let mut whole = vec![0u8; DATA_BYTES as usize];
                    whole[at..at + PAGE as usize].copy_from_slice(&buf);
                    self.model.check_range(&whole, at, PAGE as usize)?;
                }
                for _ in 0..4 {
                    let _ = self.engine.background_tick(true);
                }
            }
            Action::Background => {
                for _ in 0..4 {
                    let _ = self.engine.background_tick(false);
                }
            }
            Action::Detach => {
                if self.engine.detach().is_ok() {
                    self.model.flushed();
                }
            }
            Action::Restart { clean } => {
                if clean && self.engine.close(false).is_ok() && !self.engine.is_read_only() {
                    return Err("close left the engine writable".into());
                }
                let store = self.store.clone();
                return self.restart(store);
            }
            Action::Fail {
                at_op,
                enospc,
                page,
                unaligned,
            } => {
                let errno = if enospc { libc::ENOSPC } else { libc::EIO };
                self.store.arm(Some(Fault::Fail { at_op, errno }));
                if unaligned {
                    self.write(page * PAGE + 100, PAGE + 300);
                } else {
                    self.write(page * PAGE, PAGE);
                }
                self.flush();
                self.store.arm(None);
            }
            Action::Crash { at_op, keep_seed } => {
                self.store.arm(Some(Fault::Crash { at_op }));
                let (page, len) = (keep_seed % DATA_PAGES, 1 + keep_seed % 5000);
                self.write(page * PAGE + keep_seed % 700, len);
                self.flush();
                let _ = self.engine.background_tick(true);
                self.write(((keep_seed >> 8) % DATA_PAGES) * PAGE, PAGE);
                self.flush();
                let mut bits = keep_seed;
                let crashed = self.store.crashed_image(|_, _| {
                    bits = bits.rotate_left(7) ^ 0x9e37_79b9;
                    bits & 1 == 1
                });
                return self.restart(Arc::new(crashed));
            }
        }
        self.read_all(false)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn engine_reads_back_what_a_plain_disk_would(actions in prop::collection::vec(action(), 1..40)) {
        let mut h = Harness::new();
        for (i, a) in actions.iter().enumerate() {
            if let Err(e) = h.run(a) {
                return Err(TestCaseError::fail(format!("action {i} {a:?}: {e}")));
            }
        }
    }
}
