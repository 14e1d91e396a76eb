//! The online engine: every request through the layout crate's indirector (seed 001
//! Algorithm 5), writes absorbed by the write buffer, the map made durable on FLUSH, copy
//! steps (destage, reconfiguration, detach) executed against the backing store.
//!
//! Concurrency (docs/format.md "Ordering"):
//!
//! * `gate` (RwLock): foreground requests hold it shared from routing to the end of their
//!   I/O. A copy step holds it exclusively from before its source read to after its map
//!   update and commit, so reads and writes racing a move are put on hold (seed 001
//!   §3.5.2) and never see a half-moved page or write into a slot being freed. A FLUSH
//!   holds it exclusively only while it snapshots the dirty summaries, so every request
//!   whose map update the snapshot contains has finished its data I/O.
//! * `commit` (Mutex): one metadata commit at a time, so each summary copy is written at
//!   most once between two syncs and the other copy, the last durable one, is never
//!   overwritten before the new one is durable.
//! * `state` (Mutex): the indirector and the dirty-segment set; held only while routing.
//!
//! * `stripes` (mutexes keyed by page): every write holds the stripes of its pages
//!   exclusively from routing (or, for a byte write that is not sector aligned, from its
//!   read) to the end of its data I/O. So two writers of different bytes of one sector
//!   cannot write back each other's stale bytes, and a write whose I/O fails can undo its
//!   map change (an absorbed page unmapped again) without undoing a racing write to the
//!   same page that was already acknowledged. Writes to pages of different stripes still
//!   run in parallel. A read shares the stripes of its pages: a write maps a page to its
//!   write-buffer slot before its data reaches the slot, so a read that did not wait
//!   could return the slot's previous page's bytes.
//!
//! * A destage (engine/destage.rs) holds `commit` for its batch and, per eviction, the
//!   stripes of the pages it copies home, but not the gate: foreground requests keep
//!   running, and the slots it frees are held unallocated until its commit.
//!
//! Lock order: commit, stripes (ascending), gate, state. (No path holding stripes takes
//! `commit`: a FUA write flushes after releasing them.)

use crate::format::{Layout, Summary, Superblock, FLAG_DIRTY, FLAG_NEEDS_CHECK};
use crate::meta::{self, MetaError, RebuildReport};
use crate::store::{Dev, Store};
use reblock_layout::{
    diff, Branch, CopyKind, DiffOptions, DiffStats, Geometry, Indirector, IoRequest, Mode, Op,
    PhysIo, Plan, Region, Step,
};
use serde::Serialize;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

mod checksum;
mod copier;
mod destage;
mod replica;
mod resume;
mod trim;

pub use replica::{HeadCost, ReplicaMarks};
pub use resume::{reconfig_file_of, ResumeError};

/// Engine knobs (the CLI's flags and TOML file fill them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineOptions {
    pub read_only: bool,
    /// Destage once fewer write-buffer pages than this are free (`None`: a quarter).
    pub destage_below_free_pages: Option<u32>,
    /// Largest single copy, in pages.
    pub max_copy_pages: u64,
    /// Sequential cutoff in bytes: unmapped writes of more full pages than this holds go
    /// home, not into the write buffer (see `Indirector::set_absorb_max_pages`); `None`:
    /// absorb whatever fits, as Algorithm 5.
    pub sequential_cutoff_bytes: Option<u64>,
    /// Compute, store and verify a CRC-32C of every page in the optimized region
    /// (format version 3 images; docs/format.md "Data checksums").
    pub data_checksums: bool,
    /// The background copier's staging buffer: one round copies at most this many bytes
    /// (as the copy scheduler's batches), holding the gate one batch at a time, and a
    /// kept reconfiguration commits its progress after each round.
    pub copier_staging_bytes: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            read_only: false,
            destage_below_free_pages: None,
            max_copy_pages: 64,
            sequential_cutoff_bytes: None,
            data_checksums: true,
            copier_staging_bytes: copier::STAGING_BYTES,
        }
    }
}

#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    flushes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    /// Reads served at least partly from the BOPT.
    read_hits: AtomicU64,
    absorbed_writes: AtomicU64,
    bytes_moved: AtomicU64,
    steps_done: AtomicU64,
    steps_refused: AtomicU64,
    commits: AtomicU64,
    /// Pages copied home -> BOPT by reconfiguration (incoming pages).
    promotions: AtomicU64,
    /// NBD connections open now.
    connections: AtomicU64,
    /// Pages in the optimized region that failed their checksum (engine/checksum.rs).
    data_checksum_errors: AtomicU64,
    /// Backing requests the reconfiguration copier issued (engine/copier.rs).
    copier_requests: AtomicU64,
    /// Pages placed from a foreground read's data (piggybacking, engine/copier.rs).
    piggybacked_pages: AtomicU64,
}

struct State {
    ind: Indirector,
    dirty_segments: Vec<bool>,
    queue: VecDeque<Step>,
    plan: Option<Plan>,
    replans: u32,
    reconfig: ReconfigStatus,
    /// Incoming pages of the running plan not yet placed (for piggybacking).
    pending: reblock_layout::PendingIncoming,
    /// Bumped whenever `queue` is replaced, so the copier takes the steps it ran off
    /// the queue only if the queue is still the one it took them from.
    queue_gen: u64,
}

/// What one commit writes: the changed segments' summaries and free-map chunks.
struct Snapshot {
    summaries: Vec<(u32, Vec<u8>)>,
    free: Vec<(u32, Vec<u8>)>,
    replicas: Vec<(u32, Vec<u8>)>,
}

impl Snapshot {
    fn is_empty(&self) -> bool {
        self.summaries.is_empty() && self.free.is_empty() && self.replicas.is_empty()
    }
}

struct CommitState {
    sb: Superblock,
    /// Per segment, the copy holding its last durable summary.
    durable_copy: Vec<u32>,
}

/// What `reblock status` shows of an ongoing or finished reconfiguration.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReconfigStatus {
    pub state: String,
    pub policy: Option<String>,
    pub planned_pages: u64,
    pub steps_total: u64,
    pub steps_pending: u64,
    pub diff: Option<DiffStatsJson>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DiffStatsJson {
    pub static_pages: u64,
    pub relocate_pages: u64,
    pub incoming_pages: u64,
    pub outgoing_dirty_pages: u64,
    pub outgoing_clean_pages: u64,
    pub bytes_moved: u64,
}

impl From<DiffStats> for DiffStatsJson {
    fn from(s: DiffStats) -> Self {
        DiffStatsJson {
            static_pages: s.static_pages,
            relocate_pages: s.relocate_pages,
            incoming_pages: s.incoming_pages,
            outgoing_dirty_pages: s.outgoing_dirty_pages,
            outgoing_clean_pages: s.outgoing_clean_pages,
            bytes_moved: s.bytes_moved,
        }
    }
}

/// The engine's state as `reblock status` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub data_bytes: u64,
    pub page_bytes: u32,
    pub bopt_pages: u32,
    pub read_cache_pages: u32,
    pub write_buffer_pages: u32,
    pub mapped_pages: u32,
    /// Heap bytes of the in-memory map (the bar: at most 8 per mapped page).
    pub map_heap_bytes: u64,
    pub mapped_write_buffer_pages: u32,
    pub dirty_pages: u64,
    pub mode: String,
    pub read_only: bool,
    pub needs_check: bool,
    pub requests_served: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_hits: u64,
    pub hit_rate: f64,
    pub absorbed_writes: u64,
    pub bytes_moved: u64,
    pub steps_done: u64,
    pub steps_refused: u64,
    pub commits: u64,
    pub reconfiguration: ReconfigStatus,
    pub recovery: RebuildReport,
    /// Online re-planning (`serve --replan-policy`), absent when it is off.
    pub replan: Option<crate::replan::ReplanStatus>,
    /// The persistent backing-store error that turned the export read-only, if any.
    pub io_failure: Option<String>,
    /// Seconds since the engine opened the image.
    pub uptime_s: f64,
    /// NBD connections open now.
    pub connections: u64,
    /// Reads served entirely from home (`reads - read_hits`).
    pub read_misses: u64,
    /// Share of the write buffer's pages holding absorbed writes, 0..1.
    pub write_buffer_fill: f64,
    /// Dirty BOPT pages: what destaging (or detach) still has to copy home.
    pub destage_backlog_pages: u64,
    /// Pages promoted (copied home -> BOPT) by reconfiguration since the engine opened.
    pub promotions: u64,
    /// Busy seconds of the emulated disk (`serve --emulate`); absent without emulation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_busy_s: Option<f64>,
    /// Data pages the free-space map holds as free (trimmed, zeroed, or free in the
    /// image's file system): they read as zeros and BLOCK_STATUS calls them holes.
    pub free_pages: u64,
    /// FS2 replicas of hot pages kept in free pages now.
    pub replicas: u64,
    /// Reads (of one page each) served from a replica because it lay closer to the head.
    pub replica_hits: u64,
    /// FS2's free-space watermarks and what they ask now.
    pub replica_marks: replica::ReplicaMarks,
    /// Pages in the optimized region carry checksums verified on every read.
    pub data_checksums: bool,
    /// Pages of the optimized region found damaged (checksum mismatch) while serving.
    pub data_checksum_errors: u64,
    /// Backing requests the reconfiguration copier issued: each merged, ascending
    /// extent of a batch is one, so far fewer than the pages (or steps) it copied.
    pub copier_requests: u64,
    /// Pages placed in their slot from a foreground read's data (piggybacking), with
    /// no copy of their own.
    pub piggybacked_pages: u64,
}

/// Why a plan was not taken up.
#[derive(Debug, thiserror::Error)]
pub enum ReconfigureError {
    #[error("the engine is read-only")]
    ReadOnly,
    #[error("the engine is detached; 'reblock reconfigure --plan' re-enables the BOPT")]
    Detached,
    #[error("the plan does not fit this engine: {0}")]
    Plan(#[from] reblock_layout::PlanError),
}

/// What opening found.
#[derive(Clone, Debug, Serialize)]
pub struct OpenReport {
    pub unclean: bool,
    pub rebuild: RebuildReport,
    pub bad_summary_copies: Vec<(u32, u32, String)>,
    /// Segments with no valid summary copy (their pages answer EIO).
    pub lost_segments: Vec<u32>,
    /// Segments whose newest committed summary copy may be the damaged one (their pages
    /// answer EIO).
    pub stale_segments: Vec<u32>,
    /// Summary copies of a commit cut short by a crash, erased at open.
    pub erased_copies: u64,
    /// The engine serves read-only because metadata cannot be trusted.
    pub forced_read_only: bool,
    /// What loading the free-space map found wrong.
    pub free_map: crate::freemap::FreeMapReport,
    /// What loading the replica table found wrong (its replicas are dropped).
    pub replica_table: crate::replicas::ReplicaReport,
    /// FS pages whose slot did not match its durable checksum after an unclean stop:
    /// written since the last FLUSH, or damaged; their contents were taken as found.
    pub unverifiable_pages: Vec<u64>,
}

impl OpenReport {
    /// What an operator must be told at startup, one line each (empty when all is well).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.lost_segments.is_empty() || !self.stale_segments.is_empty() {
            out.push(format!(
                "segment summaries damaged: lost segments {:?}, segments whose newest copy is damaged {:?}; \
                 {} FS pages{} answer EIO instead of possibly stale data, and the export is read-only \
                 until 'reblock check --repair' recovers what it can",
                self.lost_segments,
                self.stale_segments,
                self.rebuild.untrusted_pages,
                if self.rebuild.untrusted_unknown {
                    " (and every page not mapped elsewhere, since some could not be identified)"
                } else {
                    ""
                }
            ));
        }
        for (seg, copy, why) in &self.bad_summary_copies {
            out.push(format!("segment {seg} summary copy {copy}: {why}"));
        }
        for (chunk, copy, why) in &self.free_map.bad_copies {
            out.push(format!("free-space map chunk {chunk} copy {copy}: {why}"));
        }
        out.extend(self.replica_table.bad_entries.iter().cloned());
        if !self.free_map.untrusted_chunks.is_empty() {
            out.push(format!(
                "free-space map chunks {:?} may have lost their newest commit: none of their pages is taken as free",
                self.free_map.untrusted_chunks
            ));
        }
        out
    }

    /// What an unclean stop is expected to leave and is not damage: pages written since
    /// the last FLUSH whose checksums do not match (the client was never promised them).
    /// Kept apart from [`OpenReport::warnings`] so that an operator's logs show an
    /// ordinary crash of an unflushing client as a notice, not as an error.
    pub fn notices(&self) -> Vec<String> {
        if self.unverifiable_pages.is_empty() {
            return Vec::new();
        }
        vec![unverifiable_warning(&self.unverifiable_pages)]
    }
}

pub struct Engine {
    store: Arc<dyn Store>,
    layout: Layout,
    geo: Geometry,
    opts: EngineOptions,
    state: Mutex<State>,
    gate: RwLock<()>,
    stripes: Vec<RwLock<()>>,
    /// Pages foreground reads carried for the running plan, not yet written (copier.rs).
    carried: copier::Carried,
    commit: Mutex<CommitState>,
    read_only: AtomicBool,
    needs_check: AtomicBool,
    closed: AtomicBool,
    counters: Counters,
    epoch: Instant,
    last_io_ns: AtomicU64,
    recovery: RebuildReport,
    replan: Mutex<Option<crate::replan::ReplanStatus>>,
    /// Where the plan under way is kept until its last step (engine/resume.rs).
    reconfig_file: Mutex<Option<std::path::PathBuf>>,
    untrusted: Untrusted,
    /// The persistent I/O error that turned the engine read-only, if any.
    io_failure: Mutex<Option<String>>,
    /// Pages the client trimmed or zeroed (engine/trim.rs); locked after `state`.
    free: Mutex<crate::freemap::FreeMap>,
    /// FS2 replicas (engine/replica.rs); locked after `free`.
    replicas: Mutex<crate::replicas::ReplicaTable>,
    /// Read counts of pages served from home; locked after `replicas`.
    heat: Mutex<replica::Heat>,
    /// The data page where the last data-area I/O ended (the head's last position).
    head_page: AtomicU64,
    /// What reaching a copy from there costs (FS2's read rule, engine/replica.rs).
    head_cost: replica::HeadCost,
    replica_hits: AtomicU64,
    /// Checksums of the slots' pages (engine/checksum.rs).
    sums: checksum::SlotSums,
}

/// Pages whose map cannot be trusted (their segment's summaries are lost, or its newest
/// committed copy is damaged): they answer EIO rather than stale data.
#[derive(Default)]
struct Untrusted {
    pages: std::collections::HashSet<u64>,
    /// Some pages are unknown: every page not mapped by a trusted segment answers EIO.
    unknown: bool,
}

impl Untrusted {
    fn any(&self) -> bool {
        self.unknown || !self.pages.is_empty()
    }
}

/// Each page of a write and its mapping (slot, dirty) before routing, to undo the map
/// change if the write's I/O fails ([`Indirector::restore`]).
type MappingBefore = Vec<(u64, Option<(u32, bool)>)>;

/// Number of page-keyed locks serialising writes to the same pages.
const STRIPES: usize = 256;

/// A held stripe: exclusive for writers and destage copies, shared for readers.
#[allow(dead_code)] // held for its drop only
enum StripeGuard<'a> {
    Exclusive(RwLockWriteGuard<'a, ()>),
    Shared(RwLockReadGuard<'a, ()>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn rofs() -> io::Error {
    io::Error::from_raw_os_error(libc::EROFS)
}

fn to_io(e: MetaError) -> io::Error {
    match e {
        MetaError::Io { source, what } => {
            io::Error::new(source.kind(), format!("{what}: {source}"))
        }
        other => io::Error::other(other.to_string()),
    }
}

impl Engine {
    /// Formats an empty BOPT on `store` (the data area is untouched).
    pub fn format(
        store: &dyn Store,
        layout: &Layout,
        image_id: u64,
    ) -> Result<Superblock, MetaError> {
        meta::format(store, layout, image_id)
    }

    /// Opens a formatted store: reads the superblock, rebuilds the map from the segment
    /// summaries (every entry dirty after an unclean stop, seed 001 §3.5.1) and, unless
    /// read-only, marks the superblock DIRTY before serving.
    pub fn open(
        store: Arc<dyn Store>,
        opts: EngineOptions,
    ) -> Result<(Engine, OpenReport), MetaError> {
        let found = meta::read_superblock(store.as_ref())?;
        let mut sb = found.sb;
        let layout = sb.layout;
        let geo = layout.geometry().map_err(|e| MetaError::Io {
            what: "superblock".into(),
            source: io::Error::other(e.to_string()),
        })?;
        if store
            .len(Dev::Data)
            .map_err(meta::io_err("data device size"))?
            < layout.data_bytes
        {
            return Err(MetaError::Size {
                actual: store.len(Dev::Data).unwrap_or(0),
                expected: layout.data_bytes,
            });
        }
        let needs_check = sb.flags & FLAG_NEEDS_CHECK != 0;
        if needs_check && !opts.read_only {
            return Err(MetaError::Io {
                what: "superblock".into(),
                source: io::Error::other(
                    "flag NEEDS_CHECK is set (a metadata commit failed); run 'reblock check --repair' or serve --read-only",
                ),
            });
        }
        let unclean = meta::was_unclean(&sb);
        let loaded = meta::load_summaries(store.as_ref(), &sb)?;
        let (map, mut rebuild) = meta::rebuild_map(&layout, &loaded, !unclean)?;
        let sums = checksum::load(
            store.as_ref(),
            &layout,
            &loaded,
            &map,
            unclean,
            opts.data_checksums,
        )?;
        rebuild.unverifiable_data_pages = sums.unverifiable.len() as u64;
        let (free, free_report) = crate::freemap::load(store.as_ref(), &sb)?;
        let (replicas, replica_report) = crate::replicas::load(store.as_ref(), &sb, |o, r| {
            !free.is_free(o) && free.is_free(r) && map.lookup(r).is_none()
        })?;
        if unclean {
            tracing::warn!(
                entries = rebuild.entries,
                "unclean stop: map rebuilt from segment summaries, every entry dirty"
            );
        }
        let untrusted = Untrusted {
            pages: loaded.untrusted_pages.iter().copied().collect(),
            unknown: loaded.untrusted_unknown,
        };
        let forced_read_only = untrusted.any() && !opts.read_only;
        let opts = EngineOptions {
            read_only: opts.read_only || untrusted.any(),
            ..opts
        };
        let mut ind = Indirector::with_map(geo, map);
        ind.set_home_under_pressure(true);
        if let Some(p) = opts.destage_below_free_pages {
            ind.set_destage_below_free_pages(p);
        }
        if let Some(bytes) = opts.sequential_cutoff_bytes {
            let pages = bytes / (geo.page.sectors() * 512);
            ind.set_absorb_max_pages(u32::try_from(pages).unwrap_or(u32::MAX));
        }
        let mut dirty_segments = vec![false; layout.segments() as usize];
        for &s in rebuild
            .rewrite_segments
            .iter()
            .chain(&sums.rewrite_segments)
        {
            dirty_segments[s as usize] = true;
        }
        if !opts.read_only {
            // Erase what a commit cut short left before anything else: the next commit
            // reuses its number, which would make such a copy count (docs/format.md).
            meta::erase_leftovers(store.as_ref(), &sb, &loaded)?;
            sb.flags |= FLAG_DIRTY;
            sb.pending_commit = 0;
            meta::write_superblock(store.as_ref(), &mut sb)?;
        }
        let report = OpenReport {
            unclean,
            rebuild: rebuild.clone(),
            bad_summary_copies: loaded.bad_copies.clone(),
            lost_segments: loaded.lost.clone(),
            stale_segments: loaded.stale.clone(),
            erased_copies: if opts.read_only {
                0
            } else {
                loaded.leftovers.len() as u64
            },
            forced_read_only,
            free_map: free_report,
            replica_table: replica_report,
            unverifiable_pages: sums.unverifiable.iter().map(|&(p, _)| p).collect(),
        };
        for w in report.warnings() {
            tracing::error!("{w}");
        }
        for n in report.notices() {
            tracing::warn!("{n}");
        }
        let engine = Engine {
            store,
            layout,
            geo,
            opts,
            state: Mutex::new(State {
                ind,
                dirty_segments,
                queue: VecDeque::new(),
                plan: None,
                replans: 0,
                reconfig: ReconfigStatus {
                    state: "idle".into(),
                    ..Default::default()
                },
                pending: Default::default(),
                queue_gen: 0,
            }),
            gate: RwLock::new(()),
            stripes: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            carried: copier::Carried::new(STRIPES),
            commit: Mutex::new(CommitState {
                sb,
                durable_copy: loaded.copy,
            }),
            read_only: AtomicBool::new(opts.read_only),
            needs_check: AtomicBool::new(needs_check),
            closed: AtomicBool::new(false),
            counters: Counters::default(),
            epoch: Instant::now(),
            last_io_ns: AtomicU64::new(0),
            recovery: rebuild,
            replan: Mutex::new(None),
            reconfig_file: Mutex::new(None),
            untrusted,
            io_failure: Mutex::new(None),
            free: Mutex::new(free),
            replicas: Mutex::new(replicas),
            heat: Mutex::default(),
            head_page: AtomicU64::new(0),
            head_cost: replica::HeadCost::Pages,
            replica_hits: AtomicU64::new(0),
            sums: sums.sums,
        };
        Ok((engine, report))
    }

    /// How FS2's read rule rates a copy from the head's last position (by default the
    /// distance in pages; `serve` sets its disk model's).
    pub fn set_head_cost(&mut self, cost: replica::HeadCost) {
        self.head_cost = cost;
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only.load(Relaxed)
    }
    /// Nanoseconds since the last foreground request started.
    pub fn idle_ns(&self) -> u64 {
        (self.epoch.elapsed().as_nanos() as u64).saturating_sub(self.last_io_ns.load(Relaxed))
    }
    /// A copy of the indirector (for checks in tests and reports).
    pub fn indirector(&self) -> Indirector {
        lock(&self.state).ind.clone()
    }

    fn dev_of(region: Region) -> Dev {
        match region {
            Region::Data => Dev::Data,
            Region::Bopt => Dev::Bopt,
        }
    }

    /// Routes `req` through the indirector. For a write, also returns the mapping of its
    /// pages from before routing, to undo the map change if the write's I/O fails.
    fn route(&self, req: IoRequest, out: &mut Vec<PhysIo>) -> io::Result<(Branch, MappingBefore)> {
        self.last_io_ns
            .store(self.epoch.elapsed().as_nanos() as u64, Relaxed);
        let mut st = lock(&self.state);
        let before = if req.op == Op::Write {
            st.ind.mapping_of(req.sector, req.sectors)
        } else {
            self.refuse_untrusted(&st.ind, req)?;
            Vec::new()
        };
        let branch = st
            .ind
            .indirect(req, out)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let absorbed = matches!(
            branch,
            Branch::NoneMappedWriteAbsorbed | Branch::PartialWrite
        );
        if absorbed {
            self.counters.absorbed_writes.fetch_add(1, Relaxed);
        }
        // The map changed (pages absorbed), or slots' checksums will: their segments'
        // summaries must be rewritten at the next commit.
        if absorbed || (req.op == Op::Write && self.sums.enabled()) {
            for io in out.iter().filter(|io| io.region == Region::Bopt) {
                let first = self.slot_of(io.device_sector);
                let last = self.slot_of(io.device_sector + io.sectors - 1);
                for slot in first..=last {
                    let seg = self.geo.segment_of(slot) as usize;
                    st.dirty_segments[seg] = true;
                }
            }
        }
        Ok((branch, before))
    }

    /// EIO for a read touching a page whose map cannot be trusted (docs/format.md
    /// "Damaged metadata"): its current data may be in a slot no valid summary names.
    fn refuse_untrusted(&self, ind: &Indirector, req: IoRequest) -> io::Result<()> {
        if !self.untrusted.any() {
            return Ok(());
        }
        let per_page = self.geo.page.sectors();
        let pages = req.sector / per_page..(req.sector + req.sectors).div_ceil(per_page);
        let bad = pages.clone().find(|&p| {
            self.untrusted.pages.contains(&p)
                || (self.untrusted.unknown && ind.map().lookup(p).is_none())
        });
        match bad {
            None => Ok(()),
            Some(p) => {
                tracing::error!(
                    fs_page = p,
                    "read refused: the page's segment summaries are damaged; run 'reblock check --repair'"
                );
                Err(io::Error::from_raw_os_error(libc::EIO))
            }
        }
    }

    fn slot_of(&self, device_sector: u64) -> u32 {
        ((device_sector - self.geo.bopt_start_sector) / self.geo.page.sectors()) as u32
    }

    /// Reads whole sectors from `sector` into `buf` (a multiple of 512 bytes).
    pub fn read_sectors(&self, buf: &mut [u8], sector: u64) -> io::Result<()> {
        let _stripes = self.share_stripes(sector, sector + buf.len() as u64 / 512);
        self.read_sectors_locked(buf, sector)?;
        self.piggyback_read(buf, sector);
        Ok(())
    }

    /// Reads whole sectors; the caller holds the sectors' stripes (shared or exclusive).
    fn read_sectors_locked(&self, buf: &mut [u8], sector: u64) -> io::Result<()> {
        let _g = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let mut ios = Vec::new();
        let req = IoRequest {
            op: Op::Read,
            sector,
            sectors: buf.len() as u64 / 512,
        };
        let (branch, _) = self.route(req, &mut ios)?;
        self.route_to_replicas(&mut ios);
        if matches!(branch, Branch::AllMapped | Branch::PartialReadDirty) {
            self.counters.read_hits.fetch_add(1, Relaxed);
        }
        for io in &ios {
            let at = (io.buf_offset_sectors * 512) as usize;
            let part = &mut buf[at..at + (io.sectors * 512) as usize];
            self.store
                .read_at(Self::dev_of(io.region), part, io.device_sector * 512)
                .map_err(|e| self.io_failed(e, "read"))?;
        }
        self.verify_slot_reads(&ios, buf)?;
        self.zero_free_pages(buf, sector);
        self.counters.reads.fetch_add(1, Relaxed);
        self.counters
            .bytes_read
            .fetch_add(buf.len() as u64, Relaxed);
        Ok(())
    }

    /// Writes whole sectors; the data goes where Algorithm 5 says, the map update is
    /// durable after the next [`Engine::flush`]. The caller holds the pages' stripes
    /// exclusively. If the data I/O fails, the map change is undone before the gate is
    /// released, so no commit ever names a slot the failed write left half written.
    fn write_sectors_locked(&self, buf: &[u8], sector: u64) -> io::Result<()> {
        if self.is_read_only() {
            return Err(rofs());
        }
        let (buf, sector) = self.pad_free_edges(buf, sector);
        let buf = &buf[..];
        let _g = self.gate.read().unwrap_or_else(|e| e.into_inner());
        let mut ios = Vec::new();
        let req = IoRequest {
            op: Op::Write,
            sector,
            sectors: buf.len() as u64 / 512,
        };
        let (_, before) = self.route(req, &mut ios)?;
        let undo = |e: io::Error| {
            if !lock(&self.state).ind.restore(&before) {
                self.fail_persistently("a failed write's map change could not be undone");
            }
            e
        };
        let sums = self.sums_of_write(&ios, buf).map_err(&undo)?;
        for io in &ios {
            let at = (io.buf_offset_sectors * 512) as usize;
            let part = &buf[at..at + (io.sectors * 512) as usize];
            if let Err(e) =
                self.store
                    .write_at(Self::dev_of(io.region), part, io.device_sector * 512)
            {
                self.resum_after_failed_write(&ios);
                return Err(self.io_failed(undo(e), "write"));
            }
        }
        self.set_sums(&sums);
        self.claim_pages(sector, req.sectors);
        self.counters.writes.fetch_add(1, Relaxed);
        self.counters
            .bytes_written
            .fetch_add(buf.len() as u64, Relaxed);
        Ok(())
    }

    /// Writes whole sectors (see [`Engine::write_bytes`]).
    pub fn write_sectors(&self, buf: &[u8], sector: u64) -> io::Result<()> {
        let end = sector + buf.len() as u64 / 512;
        let _stripes = self.lock_stripes_for_write(sector, end)?;
        self.write_sectors_locked(buf, sector)
    }

    /// Classifies a failed backing I/O: ENOSPC fails the request only (space may come
    /// back); anything else on a write, and a backing store that shrank, is persistent:
    /// the export turns read-only rather than serve a guess.
    fn io_failed(&self, e: io::Error, what: &str) -> io::Error {
        let shrunk = crate::store::is_shrunk(&e);
        if e.raw_os_error() == Some(libc::ENOSPC) {
            tracing::warn!(error = %e, "backing store {what} failed: no space; the request fails, the export stays writable");
        } else if what != "read" || shrunk {
            self.fail_persistently(&format!("backing store {what} failed: {e}"));
        } else {
            tracing::error!(error = %e, "backing store read failed");
        }
        e
    }

    /// Turns the engine read-only for good (until restarted): every later write fails
    /// with EROFS and every FLUSH with EIO, since what is durable is no longer known.
    fn fail_persistently(&self, why: &str) {
        let mut f = lock(&self.io_failure);
        if f.is_none() {
            tracing::error!("{why}: the export is now read-only; writes fail with EROFS and FLUSH with EIO until the server is restarted");
            *f = Some(why.to_string());
        }
        self.read_only.store(true, Relaxed);
    }

    fn has_failed(&self) -> bool {
        lock(&self.io_failure).is_some()
    }

    /// Byte-granular read (sub-sector edges read the enclosing sectors).
    pub fn read_bytes(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if offset.is_multiple_of(512) && buf.len().is_multiple_of(512) {
            return self.read_sectors(buf, offset / 512);
        }
        let start = offset / 512 * 512;
        let end = (offset + buf.len() as u64).div_ceil(512) * 512;
        let mut tmp = vec![0u8; (end - start) as usize];
        self.read_sectors(&mut tmp, start / 512)?;
        let at = (offset - start) as usize;
        buf.copy_from_slice(&tmp[at..at + buf.len()]);
        Ok(())
    }

    /// Byte-granular write: sub-sector edges are read, patched and written back, with
    /// the sectors' stripes held exclusively from the read to the write back.
    pub fn write_bytes(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let aligned = offset.is_multiple_of(512) && buf.len().is_multiple_of(512);
        let start = offset / 512 * 512;
        let end = (offset + buf.len() as u64).div_ceil(512) * 512;
        let _stripes = self.lock_stripes_for_write(start / 512, end / 512)?;
        if aligned {
            return self.write_sectors_locked(buf, offset / 512);
        }
        let mut tmp = vec![0u8; (end - start) as usize];
        self.read_sectors_locked(&mut tmp, start / 512)?;
        let at = (offset - start) as usize;
        tmp[at..at + buf.len()].copy_from_slice(buf);
        self.write_sectors_locked(&tmp, start / 512)
    }

    /// The stripes of sectors `first..end` for a client write, with the replicas the
    /// write makes stale already dropped and committed. The engine's lock order is
    /// `commit`, then stripes, then the gate: a destage or a TRIM holds `commit` while it
    /// waits for stripes, so a writer holding stripes must never wait for `commit` (that
    /// deadlocked a served export). Replicas are rare, so the common write takes its
    /// stripes only; one that meets a replica starts again, `commit` first. No replica
    /// of these pages can appear meanwhile: making one needs their stripes.
    fn lock_stripes_for_write(&self, first: u64, end: u64) -> io::Result<Vec<StripeGuard<'_>>> {
        let stripes = self.lock_stripes(first, end);
        if !self.write_meets_replicas(first, end - first) {
            return Ok(stripes);
        }
        drop(stripes);
        let mut c = lock(&self.commit);
        let stripes = self.lock_stripes(first, end);
        self.release_replicas(&mut c, first, end - first)?;
        Ok(stripes)
    }

    /// Locks the stripes of the pages holding sectors `first..end`, in ascending stripe
    /// order (so two writers never wait on each other crosswise).
    fn lock_stripes(&self, first: u64, end: u64) -> Vec<StripeGuard<'_>> {
        self.lock_stripe_ids(self.stripe_ids(first, end))
    }

    /// Locks the stripes `ids` exclusively; `ids` ascending (the lock order).
    fn lock_stripe_ids(&self, ids: Vec<usize>) -> Vec<StripeGuard<'_>> {
        ids.into_iter()
            .map(|i| {
                let guard = self.stripes[i].write().unwrap_or_else(|e| e.into_inner());
                // Whoever holds a stripe exclusively may change its pages' bytes.
                self.carried.touch(i);
                StripeGuard::Exclusive(guard)
            })
            .collect()
    }

    /// Shares the stripes of the pages holding sectors `first..end` (a read): it waits
    /// for a write in progress on them, whose page may already be mapped to a slot its
    /// data has not reached yet, and runs alongside other reads.
    fn share_stripes(&self, first: u64, end: u64) -> Vec<StripeGuard<'_>> {
        self.stripe_ids(first, end)
            .into_iter()
            .map(|i| StripeGuard::Shared(self.stripes[i].read().unwrap_or_else(|e| e.into_inner())))
            .collect()
    }

    /// The stripes of the pages holding sectors `first..end`, ascending (the lock order).
    fn stripe_ids(&self, first: u64, end: u64) -> Vec<usize> {
        let per_page = self.geo.page.sectors();
        let (p0, p1) = (first / per_page, (end.max(first + 1) - 1) / per_page);
        let n = STRIPES as u64;
        let mut ids: Vec<usize> = if p1 - p0 + 1 >= n {
            (0..STRIPES).collect()
        } else {
            (p0..=p1).map(|p| (p % n) as usize).collect()
        };
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Makes every write completed before the call durable, map included: data synced
    /// first, then the changed segment summaries written and synced (docs/format.md).
    ///
    /// After a persistent I/O error (a failed commit, sync or write) every FLUSH fails
    /// with EIO: a retry that happens to succeed must not tell the client its writes are
    /// safe when an earlier one may have been lost. An engine opened read-only wrote
    /// nothing, so its FLUSH has nothing to promise and succeeds.
    pub fn flush(&self) -> io::Result<()> {
        let refuse = || {
            (self.has_failed() || (self.needs_check.load(Relaxed) && !self.opts.read_only))
                .then(|| io::Error::from_raw_os_error(libc::EIO))
        };
        if let Some(e) = refuse() {
            return Err(e);
        }
        let mut c = lock(&self.commit);
        if let Some(e) = refuse() {
            return Err(e);
        }
        self.counters.flushes.fetch_add(1, Relaxed);
        self.commit_changes(&mut c)
    }

    /// Commits the changed segments' summaries (and free-map chunks): the map as it is
    /// now becomes the durable one.
    fn commit_changes(&self, c: &mut CommitState) -> io::Result<()> {
        let snap = self.snapshot_gated(c);
        self.persist(c, snap)
    }

    /// [`Engine::snapshot`] under a moment's exclusive hold of the gate (readers that
    /// routed before it finish first).
    fn snapshot_gated(&self, c: &CommitState) -> Snapshot {
        let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
        self.snapshot(c)
    }

    /// Encodes the dirty segments' summaries under the next commit number and clears
    /// their dirty marks. Called with `gate` held exclusively.
    fn snapshot(&self, c: &CommitState) -> Snapshot {
        let mut st = lock(&self.state);
        let commit = c.sb.commit + 1;
        let mut out = Vec::new();
        for seg in 0..self.layout.segments() {
            if !std::mem::take(&mut st.dirty_segments[seg as usize]) {
                continue;
            }
            let s = Summary {
                segment: seg,
                commit,
                image_id: c.sb.image_id,
                entries: meta::segment_entries(&self.layout, st.ind.map(), seg, |slot| {
                    self.sums.get(slot)
                }),
            };
            out.push((seg, s.encode(&self.layout)));
        }
        Snapshot {
            summaries: out,
            free: lock(&self.free).snapshot(&c.sb, commit),
            replicas: lock(&self.replicas).snapshot(&c.sb, commit),
        }
    }

    /// The commit order (docs/format.md "Ordering"): (1) write the superblock naming
    /// commit `n + 1` as pending, unsynced; (2) fdatasync the data (and the BOPT device,
    /// which makes (1) durable with it); (3) write each changed summary to the copy not
    /// holding its last durable version; (4) fdatasync; (5) write the superblock with
    /// commit `n + 1` and nothing pending; fdatasync.
    ///
    /// A failure leaves the device as a crash at that point would (recovery takes commit
    /// `n` or `n + 1`, both whole), but which of the two is durable is unknown here, so
    /// the engine turns read-only and later FLUSHes fail with EIO.
    fn persist(&self, c: &mut CommitState, snap: Snapshot) -> io::Result<()> {
        let r = self.persist_inner(c, &snap);
        if let Err(e) = &r {
            self.fail_persistently(&format!("metadata commit failed: {e}"));
            let mut st = lock(&self.state);
            for (seg, _) in &snap.summaries {
                st.dirty_segments[*seg as usize] = true;
            }
            lock(&self.free).retouch(&snap.free);
            lock(&self.replicas).retouch(&snap.replicas);
        }
        r
    }

    fn persist_inner(&self, c: &mut CommitState, snap: &Snapshot) -> io::Result<()> {
        if !snap.is_empty() {
            // A summary copy that does not decode is forgiven as a torn write only while
            // a durable superblock names its commit as pending; this write becomes
            // durable with the data sync below, before any summary is written.
            c.sb.pending_commit = c.sb.commit + 1;
            meta::put_superblock(self.store.as_ref(), &mut c.sb).map_err(to_io)?;
        }
        self.store.sync(Dev::Data)?;
        if !self.store.shared() {
            self.store.sync(Dev::Bopt)?;
        }
        if snap.is_empty() {
            return Ok(());
        }
        for (seg, bytes) in &snap.summaries {
            let copy = 1 - c.durable_copy[*seg as usize];
            self.store
                .write_at(Dev::Bopt, bytes, self.layout.summary_offset(*seg, copy))?;
        }
        for (chunk, bytes) in &snap.free {
            let at = lock(&self.free).next_offset(&c.sb, *chunk);
            self.store.write_at(Dev::Bopt, bytes, at)?;
        }
        for (block, bytes) in &snap.replicas {
            let at = lock(&self.replicas).next_offset(&c.sb, *block);
            self.store.write_at(Dev::Bopt, bytes, at)?;
        }
        self.store.sync(Dev::Bopt)?;
        // The commit record: summaries of this commit count only once the superblock
        // naming it is durable, so a commit touching several segments (a page relocated
        // from one to another) is all or nothing.
        c.sb.commit += 1;
        c.sb.pending_commit = 0;
        meta::write_superblock(self.store.as_ref(), &mut c.sb).map_err(to_io)?;
        for (seg, _) in &snap.summaries {
            c.durable_copy[*seg as usize] = 1 - c.durable_copy[*seg as usize];
        }
        lock(&self.free).committed(&snap.free);
        lock(&self.replicas).committed(&snap.replicas);
        self.counters.commits.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Copies a step's pages from its source to its destination. The caller keeps
    /// anyone from writing either side meanwhile (the gate, or the pages' stripes and
    /// the commit lock).
    fn copy_pages(&self, op: &reblock_layout::CopyOp) -> io::Result<()> {
        let mut buf = vec![0u8; op.bytes(&self.geo) as usize];
        let mut at = 0usize;
        for e in op.src.device_extents(&self.geo) {
            let n = e.bytes() as usize;
            self.store
                .read_at(
                    Self::dev_of(op.src.region),
                    &mut buf[at..at + n],
                    e.start_sector * 512,
                )
                .map_err(|e| self.io_failed(e, "copy read"))?;
            at += n;
        }
        if op.src.region == Region::Bopt {
            self.verify_copy_source(op.src.first as u32, &buf)?;
        }
        self.write_run(&op.dst, &buf)?;
        if op.dst.region == Region::Bopt {
            self.sum_copied_pages(op.dst.first as u32, &buf);
        }
        self.counters
            .bytes_moved
            .fetch_add(buf.len() as u64, Relaxed);
        Ok(())
    }

    /// Writes `bytes` to the pages of `run`, one request per device extent; returns the
    /// requests issued.
    fn write_run(&self, run: &reblock_layout::PageRun, bytes: &[u8]) -> io::Result<u64> {
        let extents = run.device_extents(&self.geo);
        let mut at = 0usize;
        for e in &extents {
            let n = e.bytes() as usize;
            self.store
                .write_at(
                    Self::dev_of(run.region),
                    &bytes[at..at + n],
                    e.start_sector * 512,
                )
                .map_err(|e| self.io_failed(e, "copy write"))?;
            at += n;
        }
        Ok(extents.len() as u64)
    }

    /// Applies a step's map effect after its copy, marks its segments for the next
    /// commit and counts it. With `hold`, the slots it frees stay unallocatable until
    /// [`Indirector::release_held`] (after the commit that stops naming them).
    fn apply_step(&self, step: &Step, hold: bool) -> io::Result<()> {
        let mut st = lock(&self.state);
        st.ind
            .apply(step)
            .map_err(|e| io::Error::other(e.to_string()))?;
        if hold {
            for slot in step_freed_slots(step) {
                st.ind.hold_slot(slot);
            }
        }
        for run in step_bopt_runs(step) {
            for slot in run.0..run.1 {
                let seg = self.geo.segment_of(slot) as usize;
                st.dirty_segments[seg] = true;
            }
        }
        self.counters.steps_done.fetch_add(1, Relaxed);
        if let Step::Copy(op) = step {
            if op.kind == CopyKind::Incoming {
                self.counters.promotions.fetch_add(op.pages(), Relaxed);
            }
        }
        Ok(())
    }

    /// Bytes copied by background steps so far.
    pub fn bytes_moved(&self) -> u64 {
        self.counters.bytes_moved.load(Relaxed)
    }

    /// True while reconfiguration steps wait.
    pub fn reconfig_pending(&self) -> bool {
        !lock(&self.state).queue.is_empty()
    }

    /// One round of background work: the next staging buffer's worth of queued
    /// reconfiguration steps as scheduled batches (engine/copier.rs), else a
    /// destage of the oldest write-buffer segment when the buffer runs low (the layout
    /// crate's policy, docs/layout.md §4). Returns the number of steps run.
    /// `allow_reconfig` false leaves the reconfiguration queue alone (the caller yields
    /// to foreground I/O); destage runs regardless, since a full buffer sends writes home.
    pub fn background_tick(&self, allow_reconfig: bool) -> io::Result<usize> {
        if self.is_read_only() {
            return Ok(0);
        }
        // FS2's watermarks first: giving replica pages back costs no I/O.
        let marks = self.enforce_marks();
        if allow_reconfig {
            let ran = self.copier_tick()?;
            if ran > 0 {
                self.commit_progress()?;
                return Ok(ran);
            }
        }
        let steps = {
            let st = lock(&self.state);
            st.ind
                .wants_destage()
                .then(|| st.ind.destage_oldest(self.opts.max_copy_pages))
        };
        match steps {
            Some(steps) => self.destage(&steps),
            // Nothing to destage: FS2 replicas, under the same rate limit and idleness.
            None => self.replica_tick(allow_reconfig, marks),
        }
    }

    fn after_reconfig_step(&self, ok: bool) {
        let mut st = lock(&self.state);
        st.reconfig.steps_pending = st.queue.len() as u64;
        if !ok {
            st.reconfig.state = "refused-step".into();
        }
        if !st.queue.is_empty() {
            return;
        }
        // A refused step means a foreground write got there first: re-diff once or twice
        // against the current map rather than guessing (docs/layout.md §6).
        if st.reconfig.state == "refused-step" && st.replans < 3 {
            st.replans += 1;
            if let Some(plan) = st.plan.clone() {
                if let Ok(r) = diff(
                    &plan,
                    &st.ind,
                    DiffOptions {
                        max_copy_pages: self.opts.max_copy_pages,
                    },
                ) {
                    st.reconfig.steps_total += r.steps.len() as u64;
                    self.queue_scheduled(&mut st, &r.steps);
                    st.reconfig.steps_pending = st.queue.len() as u64;
                    st.reconfig.state = "running".into();
                    return;
                }
            }
        }
        st.reconfig.state = "done".into();
    }

    /// Starts applying `plan` in the background: the layout crate's diff gives ordered
    /// copy steps, which [`Engine::background_tick`] executes as the copy scheduler's
    /// batches.
    ///
    /// This is the operator's request (`reblock reconfigure`, the control socket): on a
    /// detached engine it re-enables the BOPT. Automatic re-planning goes through
    /// [`Engine::reconfigure_unless_detached`] instead, so a detach stays done.
    pub fn reconfigure(&self, plan: Plan) -> Result<DiffStats, ReconfigureError> {
        self.reconfigure_inner(plan, true)
    }

    /// Like [`Engine::reconfigure`], but refused while the engine is detached (after
    /// `reblock detach`, only the operator re-enables the BOPT).
    pub fn reconfigure_unless_detached(&self, plan: Plan) -> Result<DiffStats, ReconfigureError> {
        self.reconfigure_inner(plan, false)
    }

    /// True after [`Engine::detach`] until an explicit [`Engine::reconfigure`].
    pub fn is_detached(&self) -> bool {
        lock(&self.state).ind.mode() == Mode::Detaching
    }

    fn reconfigure_inner(
        &self,
        plan: Plan,
        leave_detach: bool,
    ) -> Result<DiffStats, ReconfigureError> {
        if self.is_read_only() {
            return Err(ReconfigureError::ReadOnly);
        }
        let mut st = lock(&self.state);
        if st.ind.mode() == Mode::Detaching {
            if !leave_detach {
                return Err(ReconfigureError::Detached);
            }
            st.ind.set_mode(Mode::Normal);
        }
        let r = diff(
            &plan,
            &st.ind,
            DiffOptions {
                max_copy_pages: self.opts.max_copy_pages,
            },
        )?;
        self.queue_scheduled(&mut st, &r.steps);
        st.replans = 0;
        st.reconfig = ReconfigStatus {
            state: if r.steps.is_empty() {
                "done".into()
            } else {
                "running".into()
            },
            policy: Some(plan.policy.clone()),
            planned_pages: plan.pages(),
            steps_total: r.steps.len() as u64,
            steps_pending: r.steps.len() as u64,
            diff: Some(r.stats.into()),
        };
        st.plan = Some(plan.clone());
        drop(st);
        self.keep_plan_unless_done(&plan, r.steps.is_empty());
        Ok(r.stats)
    }

    /// Flush back (seed 001 §3.5.5): nothing new is absorbed, every page leaves the BOPT
    /// (dirty ones copied home), the map is committed empty and the data area alone is
    /// the complete image. The engine keeps serving with everything at home.
    ///
    /// A foreground write may dirty a page between the flush-back plan and its step (the
    /// step is then refused as stale, seed 001 §3.5.2): the flush back is planned again
    /// from the current map until the BOPT is empty. Nothing new is absorbed meanwhile,
    /// so each round leaves fewer pages; a write storm on the remaining ones can only
    /// delay it, and a bound turns a pathological livelock into an error.
    pub fn detach(&self) -> io::Result<u64> {
        const MAX_ROUNDS: u32 = 10_000;
        if self.is_read_only() {
            return Err(rofs());
        }
        {
            let mut st = lock(&self.state);
            st.queue.clear();
            st.queue_gen += 1;
            st.pending = Default::default();
            self.carried.note_waiting(&st.pending);
            st.reconfig.state = "detached".into();
            st.ind.set_mode(Mode::Detaching);
        }
        let mut moved = 0;
        for round in 0.. {
            let steps = lock(&self.state)
                .ind
                .flush_back(true, self.opts.max_copy_pages);
            if steps.is_empty() {
                break;
            }
            if round == MAX_ROUNDS {
                return Err(io::Error::other(format!(
                    "detach: the BOPT still holds pages after {MAX_ROUNDS} flush-back rounds"
                )));
            }
            // The copier's batches: one commit per batch that frees slots, not per step.
            let r = self.run_batches(&steps)?;
            if r.refused > 0 {
                tracing::debug!(round, "detach steps refused by racing writes; re-planning");
            }
            moved += r.bytes;
        }
        self.clear_replicas()?;
        self.flush()?;
        Ok(moved)
    }

    /// Clean stop: flush, rewrite every summary with its true dirty bits, clear DIRTY.
    /// With `detach`, flush back first. Idempotent.
    pub fn close(&self, detach: bool) -> io::Result<()> {
        if self.closed.swap(true, Relaxed) || self.is_read_only() {
            return Ok(());
        }
        if detach {
            self.detach()?;
        }
        let mut c = lock(&self.commit);
        let snap = {
            let _g = self.gate.write().unwrap_or_else(|e| e.into_inner());
            lock(&self.state)
                .dirty_segments
                .iter_mut()
                .for_each(|d| *d = true);
            lock(&self.free).touch_all();
            lock(&self.replicas).touch_all();
            self.snapshot(&c)
        };
        self.persist(&mut c, snap)?;
        c.sb.flags &= !FLAG_DIRTY;
        meta::write_superblock(self.store.as_ref(), &mut c.sb).map_err(to_io)?;
        self.read_only.store(true, Relaxed);
        Ok(())
    }

    pub fn status(&self) -> Status {
        let st = lock(&self.state);
        let map = st.ind.map();
        let dirty_pages = map.iter().filter(|&(_, _, d)| d).count() as u64;
        let reads = self.counters.reads.load(Relaxed);
        let hits = self.counters.read_hits.load(Relaxed);
        let writes = self.counters.writes.load(Relaxed);
        let flushes = self.counters.flushes.load(Relaxed);
        let wb_pages = self.layout.write_buffer_pages;
        let wb_used = st.ind.segments().write_buffer_valid();
        // Before the literal: its `free_pages` field holds the free-map lock to its end.
        let replica_marks = self.replica_marks();
        Status {
            data_bytes: self.layout.data_bytes,
            page_bytes: self.layout.page_bytes,
            bopt_pages: self.layout.bopt_pages,
            read_cache_pages: self.layout.read_cache_pages,
            write_buffer_pages: self.layout.write_buffer_pages,
            mapped_pages: map.len(),
            map_heap_bytes: map.heap_bytes() as u64,
            mapped_write_buffer_pages: st.ind.segments().write_buffer_valid(),
            dirty_pages,
            mode: mode_name(st.ind.mode(), map.len()),
            read_only: self.is_read_only(),
            needs_check: self.needs_check.load(Relaxed),
            requests_served: reads + writes + flushes,
            reads,
            writes,
            flushes,
            bytes_read: self.counters.bytes_read.load(Relaxed),
            bytes_written: self.counters.bytes_written.load(Relaxed),
            read_hits: hits,
            hit_rate: if reads == 0 {
                0.0
            } else {
                hits as f64 / reads as f64
            },
            absorbed_writes: self.counters.absorbed_writes.load(Relaxed),
            bytes_moved: self.counters.bytes_moved.load(Relaxed),
            steps_done: self.counters.steps_done.load(Relaxed),
            steps_refused: self.counters.steps_refused.load(Relaxed),
            commits: self.counters.commits.load(Relaxed),
            reconfiguration: st.reconfig.clone(),
            recovery: self.recovery.clone(),
            replan: lock(&self.replan).clone(),
            io_failure: lock(&self.io_failure).clone(),
            uptime_s: self.epoch.elapsed().as_secs_f64(),
            connections: self.counters.connections.load(Relaxed),
            read_misses: reads.saturating_sub(hits),
            write_buffer_fill: if wb_pages == 0 {
                0.0
            } else {
                f64::from(wb_used) / f64::from(wb_pages)
            },
            destage_backlog_pages: dirty_pages,
            promotions: self.counters.promotions.load(Relaxed),
            emulated_busy_s: self.store.emulated_busy_s(),
            free_pages: lock(&self.free).free_pages(),
            replicas: self.replica_count() as u64,
            replica_hits: self.replica_hits(),
            replica_marks,
            data_checksums: self.sums.enabled(),
            data_checksum_errors: self.counters.data_checksum_errors.load(Relaxed),
            copier_requests: self.counters.copier_requests.load(Relaxed),
            piggybacked_pages: self.counters.piggybacked_pages.load(Relaxed),
        }
    }

    /// The NBD server opened (`true`) or closed a connection (for `status`).
    pub fn count_connection(&self, opened: bool) {
        if opened {
            self.counters.connections.fetch_add(1, Relaxed);
        } else {
            self.counters.connections.fetch_sub(1, Relaxed);
        }
    }

    /// Publishes the re-planner's state for `status`.
    pub fn set_replan_status(&self, s: crate::replan::ReplanStatus) {
        *lock(&self.replan) = Some(s);
    }
}

/// The warning for pages found unverifiable after an unclean stop.
fn unverifiable_warning(pages: &[u64]) -> String {
    let shown: Vec<String> = pages.iter().take(16).map(u64::to_string).collect();
    format!(
        "{} pages of the optimized region did not match their checksums after the unclean stop: \
         each was written since the last FLUSH (a crash may leave old, new or mixed bytes of \
         such a write) or is damaged, which cannot be told apart, so its contents were taken \
         as found (FS pages [{}]{})",
        pages.len(),
        shown.join(", "),
        if pages.len() > 16 { ", ..." } else { "" }
    )
}

/// The mode `status` reports: the indirector's, except that a finished detach (nothing
/// left mapped) reads "detached" rather than "detaching".
fn mode_name(mode: Mode, mapped_pages: u32) -> String {
    if mode == Mode::Detaching && mapped_pages == 0 {
        return "detached".into();
    }
    format!("{mode:?}").to_lowercase()
}

/// BOPT slots a step frees (a drop's, an eviction's source).
fn step_freed_slots(step: &Step) -> std::ops::Range<u32> {
    let run = match step {
        Step::Drop(r) => *r,
        Step::Copy(op) if op.kind == CopyKind::Evict => op.src,
        Step::Copy(_) => return 0..0,
    };
    run.first as u32..run.end() as u32
}

/// BOPT slot ranges a step touches (their segments' summaries change).
fn step_bopt_runs(step: &Step) -> Vec<(u32, u32)> {
    let runs = match step {
        Step::Drop(r) => vec![*r],
        Step::Copy(op) => vec![op.src, op.dst],
    };
    runs.into_iter()
        .filter(|r| r.region == Region::Bopt)
        .map(|r| (r.first as u32, r.end() as u32))
        .collect()
}

/// The NBD face of the engine: the export is the data area, byte for byte.
impl reblock_nbd::Export for Engine {
    fn size_bytes(&self) -> u64 {
        self.layout.data_bytes
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_bytes(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64, fua: bool) -> io::Result<()> {
        self.write_bytes(buf, offset)?;
        if fua {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        Engine::flush(self)
    }
    /// Whole pages become free in the free-space map (engine/trim.rs).
    fn trim(&self, offset: u64, len: u64, fua: bool) -> io::Result<()> {
        self.trim_bytes(offset, len)?;
        if fua {
            Engine::flush(self)?;
        }
        Ok(())
    }
    /// Whole pages trimmed unless the client asked for NO_HOLE, edges written as zeros.
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool, may_trim: bool) -> io::Result<()> {
        self.zero_bytes(offset, len, may_trim)?;
        if fua {
            Engine::flush(self)?;
        }
        Ok(())
    }
    /// One engine, one map, one backing store: a flush on any connection commits every
    /// completed write.
    fn can_multi_conn(&self) -> bool {
        true
    }
    fn read_only(&self) -> bool {
        self.is_read_only()
    }
    fn describe(&self) -> String {
        format!(
            "reblock engine: {} data bytes, BOPT {} pages ({} read cache, {} write buffer)",
            self.layout.data_bytes,
            self.layout.bopt_pages,
            self.layout.read_cache_pages,
            self.layout.write_buffer_pages
        )
    }
    fn preferred_block_bytes(&self) -> u32 {
        self.layout.page_bytes
    }
    fn connection_changed(&self, opened: bool) {
        self.count_connection(opened);
    }
    /// Free pages (trimmed, zeroed, or free in the file system) are holes reading zeros.
    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<(u64, u32)>> {
        let hole = reblock_nbd::proto::STATE_HOLE | reblock_nbd::proto::STATE_ZERO;
        Ok(Engine::allocation(self, offset, len)
            .into_iter()
            .map(|(bytes, free)| (bytes, if free { hole } else { 0 }))
            .collect())
    }
}
