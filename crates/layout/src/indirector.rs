//! The I/O indirector: seed 001 Algorithm 5 ("Indirect I/O Requests"), seed 000 §4.5.
//!
//! A request in FS sectors becomes a list of physical extents (region, device sector,
//! sectors, read/write, offset in the request's buffer), coalesced where contiguous, and
//! the map is updated for writes absorbed into the write buffer or landing on mapped pages.
//!
//! Branches (docs/layout.md §3 has the full table):
//!
//! | mapped pages | read | write |
//! |---|---|---|
//! | all (lines 3-7) | BOPT | BOPT, marked dirty |
//! | none (lines 8-12) | FS, unchanged | write buffer if every full page fits, else FS |
//! | some (lines 13-27) | FS whole if the mapped pages are clean, else split | mapped -> BOPT dirty; unmapped full pages absorbed while room, rest FS |
//!
//! Beyond the seed, [`Mode::Bypass`] stops indirecting as far as the data allows (the
//! degradation guard, seed 001 §5.2.2, extended to writes): reads go home except dirty
//! pages, writes go home and free the slots they make stale, except a piece covering only
//! part of a dirty page, whose other sectors are current only in its slot.
//!
//! Partial pages (seed 000 §5.3): a piece that covers only part of an *unmapped* page is
//! never absorbed — the slot would hold a page only partly written, and filling the rest
//! needs a read-modify-write — so it goes home, where the page is current. A partial piece
//! of a *mapped* page is served from its slot at the piece's offset.

use crate::bopt::{Geometry, Region, Segments};
use crate::copy::{self, CopyKind, PageMove, Step};
use crate::map::{Map, MapError};
use crate::units::PagePiece;
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
}

/// A request in the FS (exported) sector space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoRequest {
    pub op: Op,
    pub sector: u64,
    pub sectors: u64,
}

/// One physical I/O a request becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysIo {
    pub region: Region,
    pub op: Op,
    /// Sector on the device holding `region` (see [`Geometry`]).
    pub device_sector: u64,
    pub sectors: u64,
    /// Where this extent's data starts in the request's buffer.
    pub buf_offset_sectors: u64,
}

/// Which branch of Algorithm 5 served a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Branch {
    /// Lines 3-7: every page mapped; served by the BOPT (writes mark dirty).
    AllMapped,
    /// Lines 8, 12: no page mapped, a read: issued unchanged to the FS.
    NoneMappedRead,
    /// Lines 9-10: no page mapped, a write the write buffer has room for: absorbed.
    NoneMappedWriteAbsorbed,
    /// Lines 9, 12: no page mapped, a write without room: issued unchanged to the FS.
    NoneMappedWriteHome,
    /// Partial read whose mapped pages are all clean: whole request to the FS (§3.4.5).
    PartialReadClean,
    /// Partial read with a dirty mapped page: split, mapped pages from the BOPT.
    PartialReadDirty,
    /// Lines 13-27 for a write: mapped pages to the BOPT, unmapped absorbed while room.
    PartialWrite,
    /// Guard mode read: dirty pages from the BOPT, everything else from the FS.
    GuardRead,
    /// Bypass mode write: home, except pieces covering part of a dirty page; the slots of
    /// the other mapped pages it wrote are freed.
    BypassWrite,
}

/// How the indirector treats requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Algorithm 5 as written.
    #[default]
    Normal,
    /// Degradation guard: writes are indirected as in `Normal`, reads go home except for
    /// dirty pages (whose home copy is stale).
    Guard,
    /// Detaching (seed 001 §3.5.5): nothing new is absorbed; unmapped writes go home.
    Detaching,
    /// Stop indirecting (degradation guard for reads and writes): reads as in `Guard`;
    /// writes go home, and a mapped page they make current at home leaves the map (its
    /// slot would be stale). Only a piece covering part of a dirty page still goes to its
    /// slot. With no dirty page mapped this is the plain layout, I/O for I/O.
    Bypass,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RequestError {
    #[error("request of 0 sectors at sector {0}")]
    Empty(u64),
    #[error("request sectors {start}..{end} pass the data area's end at sector {limit}")]
    OutOfRange { start: u64, end: u64, limit: u64 },
}

/// A step that does not match the current map (a stale reconfiguration, or a foreground
/// write that got there first, seed 001 §3.5.2). The map is left unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("step {step:?} does not apply: {why}")]
pub struct ApplyError {
    pub step: Step,
    pub why: String,
}

/// Map, segments and write-buffer allocation, driven by Algorithm 5.
#[derive(Clone, Debug)]
pub struct Indirector {
    geo: Geometry,
    map: Map,
    segs: Segments,
    wb_cursor: u32,
    mode: Mode,
    /// A destage is wanted once fewer than this many write-buffer pages are free.
    destage_below_free_pages: u32,
    /// Writes that find none of their pages mapped and hold more full pages than this go
    /// home instead of into the write buffer (`u32::MAX`: never, Algorithm 5 as written).
    absorb_max_pages: u32,
    /// Unmapped writes go home while a destage is wanted (see
    /// [`Indirector::set_home_under_pressure`]).
    home_under_pressure: bool,
    /// Slots freed in the map but not yet free on disk (see [`Indirector::hold_slot`]):
    /// counted as valid in `segs` and never allocated.
    held: Vec<u32>,
    scratch: Vec<(PagePiece, Option<u32>)>,
}

impl Indirector {
    pub fn new(geo: Geometry) -> Result<Indirector, MapError> {
        let map = Map::new(geo.fs_pages, geo.bopt_pages)?;
        Ok(Indirector::with_map(geo, map))
    }

    /// An indirector over an existing map (e.g. one rebuilt after a crash,
    /// [`Map::rebuild_from_segments`]). Panics if the map's sizes differ from `geo`'s.
    pub fn with_map(geo: Geometry, map: Map) -> Indirector {
        assert_eq!(
            (map.fs_pages(), map.bopt_pages()),
            (geo.fs_pages, geo.bopt_pages)
        );
        let mut segs = Segments::new(&geo);
        for (_, slot, _) in map.iter() {
            segs.add(&geo, slot);
        }
        Indirector {
            destage_below_free_pages: geo.write_buffer_pages / 4,
            absorb_max_pages: u32::MAX,
            home_under_pressure: false,
            held: Vec::new(),
            wb_cursor: geo.write_buffer_start(),
            geo,
            map,
            segs,
            mode: Mode::Normal,
            scratch: Vec::new(),
        }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    pub fn map(&self) -> &Map {
        &self.map
    }
    pub fn segments(&self) -> &Segments {
        &self.segs
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }
    /// Free write-buffer pages.
    pub fn write_buffer_free(&self) -> u32 {
        self.geo.write_buffer_pages - self.segs.write_buffer_valid()
    }
    /// Sets the sequential cutoff: a write that finds none of its pages mapped and holds
    /// more than `pages` full pages goes home, not into the write buffer. The write
    /// buffer exists to turn scattered small writes into sequential ones (seed 000 §3.3);
    /// a large write is already sequential at home, and absorbing it only adds a destage
    /// copy later (bcache's `sequential_cutoff` has the same reason). `u32::MAX`, the
    /// default, keeps Algorithm 5 exactly as written.
    pub fn set_absorb_max_pages(&mut self, pages: u32) {
        self.absorb_max_pages = pages;
    }
    /// With `on`, a write to unmapped pages goes home, not into the write buffer, while
    /// the buffer is low on room ([`Indirector::wants_destage`]). Absorbing it then only
    /// queues one more page for the destage to copy home later (a read and a write more
    /// than writing it home now), which is what slowed random writes wider than the
    /// buffer; writes to pages already mapped still go to their slots. Off by default
    /// (Algorithm 5 absorbs whatever fits).
    pub fn set_home_under_pressure(&mut self, on: bool) {
        self.home_under_pressure = on;
    }
    fn under_pressure(&self) -> bool {
        self.home_under_pressure && self.wants_destage()
    }
    /// Sets the free-page level below which [`Indirector::wants_destage`] says yes.
    pub fn set_destage_below_free_pages(&mut self, pages: u32) {
        self.destage_below_free_pages = pages;
    }
    /// True when the write buffer is low on room and a destage should run.
    pub fn wants_destage(&self) -> bool {
        self.geo.write_buffer_pages > 0
            && self.write_buffer_free() < self.destage_below_free_pages.max(1)
    }

    /// Routes one request (Algorithm 5). `out` is cleared and filled with the physical
    /// I/Os in request order; the map is already updated when this returns.
    pub fn indirect(
        &mut self,
        req: IoRequest,
        out: &mut Vec<PhysIo>,
    ) -> Result<Branch, RequestError> {
        let limit = self.geo.data_sectors();
        if req.sectors == 0 {
            return Err(RequestError::Empty(req.sector));
        }
        let end = req.sector.saturating_add(req.sectors);
        if end > limit {
            return Err(RequestError::OutOfRange {
                start: req.sector,
                end,
                limit,
            });
        }
        out.clear();
        // Line 1-2: split into pages and classify them.
        let mut pieces = std::mem::take(&mut self.scratch);
        pieces.clear();
        let (mut mapped, mut dirty) = (0usize, 0usize);
        for piece in self.geo.page.split(req.sector, req.sectors) {
            let slot = self.map.lookup(piece.page);
            if let Some(s) = slot {
                mapped += 1;
                dirty += usize::from(self.map.is_dirty(s));
            }
            pieces.push((piece, slot));
        }
        let branch = match req.op {
            Op::Read => self.route_read(req, &pieces, mapped, dirty, out),
            Op::Write => self.route_write(req, &pieces, mapped, out),
        };
        self.scratch = pieces;
        Ok(branch)
    }

    fn route_read(
        &self,
        req: IoRequest,
        pieces: &[(PagePiece, Option<u32>)],
        mapped: usize,
        dirty: usize,
        out: &mut Vec<PhysIo>,
    ) -> Branch {
        if matches!(self.mode, Mode::Guard | Mode::Bypass) {
            if dirty == 0 {
                self.emit_home_whole(req, out);
            } else {
                for &(p, slot) in pieces {
                    match slot.filter(|&s| self.map.is_dirty(s)) {
                        Some(s) => self.emit_bopt(s, p, Op::Read, out),
                        None => self.emit_home(p, Op::Read, out),
                    }
                }
            }
            return Branch::GuardRead;
        }
        if mapped == pieces.len() {
            for &(p, slot) in pieces {
                self.emit_bopt(slot.expect("all mapped"), p, Op::Read, out);
            }
            return Branch::AllMapped;
        }
        if mapped == 0 || dirty == 0 {
            // Clean mapped pages equal their home copies; one FS request seeks less than
            // serving part of it from the BOPT (seed 000 §4.5).
            self.emit_home_whole(req, out);
            return if mapped == 0 {
                Branch::NoneMappedRead
            } else {
                Branch::PartialReadClean
            };
        }
        for &(p, slot) in pieces {
            match slot {
                Some(s) => self.emit_bopt(s, p, Op::Read, out),
                None => self.emit_home(p, Op::Read, out),
            }
        }
        Branch::PartialReadDirty
    }

    fn route_write(
        &mut self,
        req: IoRequest,
        pieces: &[(PagePiece, Option<u32>)],
        mapped: usize,
        out: &mut Vec<PhysIo>,
    ) -> Branch {
        let page = self.geo.page;
        if self.mode == Mode::Bypass {
            return self.bypass_write(req, pieces, out);
        }
        if mapped == pieces.len() {
            for &(p, slot) in pieces {
                let s = slot.expect("all mapped");
                self.map.set_dirty(s, true).expect("mapped slot");
                self.emit_bopt(s, p, Op::Write, out);
            }
            return Branch::AllMapped;
        }
        if mapped == 0 {
            // Line 9: space_in_opt(req) — room for every page that can be absorbed.
            let full = pieces.iter().filter(|(p, _)| p.is_full(page)).count();
            let fits = full > 0
                && full <= self.write_buffer_free() as usize
                && full <= self.absorb_max_pages as usize
                && !self.under_pressure();
            if self.mode == Mode::Detaching || !fits {
                self.emit_home_whole(req, out);
                return Branch::NoneMappedWriteHome;
            }
        }
        for &(p, slot) in pieces {
            match slot {
                Some(s) => {
                    self.map.set_dirty(s, true).expect("mapped slot");
                    self.emit_bopt(s, p, Op::Write, out);
                }
                None => match self.absorb(p) {
                    Some(s) => self.emit_bopt(s, p, Op::Write, out),
                    None => self.emit_home(p, Op::Write, out),
                },
            }
        }
        if mapped == 0 {
            Branch::NoneMappedWriteAbsorbed
        } else {
            Branch::PartialWrite
        }
    }

    /// [`Mode::Bypass`] writes: a piece goes to its slot only when it covers part of a
    /// dirty page (home lacks the page's other sectors); every other piece goes home, and
    /// the slot of a mapped page written home is freed, since home is now newer.
    fn bypass_write(
        &mut self,
        req: IoRequest,
        pieces: &[(PagePiece, Option<u32>)],
        out: &mut Vec<PhysIo>,
    ) -> Branch {
        let page = self.geo.page;
        let to_slot = |map: &Map, p: &PagePiece, slot: Option<u32>| {
            slot.filter(|&s| map.is_dirty(s) && !p.is_full(page))
        };
        let split = pieces
            .iter()
            .any(|(p, s)| to_slot(&self.map, p, *s).is_some());
        if !split {
            self.emit_home_whole(req, out);
        }
        for &(p, slot) in pieces {
            match (to_slot(&self.map, &p, slot), slot) {
                (Some(s), _) => self.emit_bopt(s, p, Op::Write, out),
                (None, stale) => {
                    if split {
                        self.emit_home(p, Op::Write, out);
                    }
                    if let Some(s) = stale {
                        self.map.remove_slot(s).expect("mapped slot");
                        self.segs.sub(&self.geo, s);
                    }
                }
            }
        }
        Branch::BypassWrite
    }

    /// Lines 22-24: takes a write-buffer slot for a full unmapped page, if room.
    fn absorb(&mut self, p: PagePiece) -> Option<u32> {
        if self.mode == Mode::Detaching || !p.is_full(self.geo.page) || self.under_pressure() {
            return None;
        }
        let slot = self.alloc_write_buffer_slot()?;
        self.map
            .insert(p.page, slot, true)
            .expect("free slot, unmapped page");
        self.segs.add(&self.geo, slot);
        Some(slot)
    }

    /// Next free write-buffer slot at or after the cursor, circularly, skipping full
    /// segments by their valid counts; consecutive absorbed pages get consecutive slots.
    fn alloc_write_buffer_slot(&mut self) -> Option<u32> {
        if self.write_buffer_free() == 0 {
            return None;
        }
        let (start, end) = (self.geo.write_buffer_start(), self.geo.bopt_pages);
        let seg_pages = self.geo.segment_pages;
        let mut slot = self.wb_cursor;
        // At most every segment once, plus the cursor's segment again from its start.
        for _ in 0..=self.geo.segments() {
            let seg = self.geo.segment_of(slot);
            let seg_end = (seg + 1) * seg_pages;
            if self.segs.valid(seg) < seg_pages {
                let free = |s: &u32| self.map.fs_page_of(*s).is_none() && !self.held.contains(s);
                if let Some(s) = (slot..seg_end).find(free) {
                    self.wb_cursor = if s + 1 == end { start } else { s + 1 };
                    return Some(s);
                }
            }
            slot = if seg_end == end { start } else { seg_end };
        }
        unreachable!("write buffer reports free pages but none was found")
    }

    fn emit_bopt(&self, slot: u32, p: PagePiece, op: Op, out: &mut Vec<PhysIo>) {
        let io = PhysIo {
            region: Region::Bopt,
            op,
            device_sector: self.geo.bopt_sector(slot, u64::from(p.offset_sectors)),
            sectors: u64::from(p.sectors),
            buf_offset_sectors: p.buf_offset_sectors,
        };
        push_coalesced(out, io);
    }

    fn emit_home(&self, p: PagePiece, op: Op, out: &mut Vec<PhysIo>) {
        let fs_sector = self.geo.page.first_sector(p.page) + u64::from(p.offset_sectors);
        self.emit_data(
            fs_sector,
            u64::from(p.sectors),
            p.buf_offset_sectors,
            op,
            out,
        );
    }

    fn emit_home_whole(&self, req: IoRequest, out: &mut Vec<PhysIo>) {
        self.emit_data(req.sector, req.sectors, 0, req.op, out);
    }

    fn emit_data(&self, fs_sector: u64, sectors: u64, buf: u64, op: Op, out: &mut Vec<PhysIo>) {
        for (e, off) in self.geo.data_extents(fs_sector, sectors) {
            let io = PhysIo {
                region: Region::Data,
                op,
                device_sector: e.start_sector,
                sectors: e.sectors,
                buf_offset_sectors: buf + off,
            };
            push_coalesced(out, io);
        }
    }

    /// Checks that `step` still matches the current map, without changing anything. An
    /// executor calls it before the step's I/O, so a stale step (seed 001 §3.5.2) is
    /// refused before it overwrites a slot that was taken meanwhile.
    pub fn validate(&self, step: &Step) -> Result<(), ApplyError> {
        self.refuse_held(step)?;
        crate::apply::validate(&self.map, step).map_err(|why| ApplyError { step: *step, why })
    }

    /// A step may not copy into a held slot: the durable map may still name its old page.
    fn refuse_held(&self, step: &Step) -> Result<(), ApplyError> {
        let Step::Copy(op) = step else {
            return Ok(());
        };
        if op.dst.region != Region::Bopt {
            return Ok(());
        }
        match self.held.iter().find(|&&s| op.dst.contains(u64::from(s))) {
            None => Ok(()),
            Some(s) => Err(ApplyError {
                step: *step,
                why: format!("destination slot {s} is held until the next commit"),
            }),
        }
    }

    /// Keeps the free slot `slot` from being allocated until [`Indirector::release_held`].
    /// An executor that frees a slot without committing at once (a destage that lets
    /// foreground requests run) holds it: the durable map still names the page it held,
    /// so new data written there before the next commit would be read as that page after
    /// a crash.
    pub fn hold_slot(&mut self, slot: u32) {
        debug_assert!(self.map.fs_page_of(slot).is_none() && !self.held.contains(&slot));
        self.segs.add(&self.geo, slot);
        self.held.push(slot);
    }

    /// Frees every held slot for allocation (after a commit that no longer names them).
    pub fn release_held(&mut self) {
        for s in std::mem::take(&mut self.held) {
            self.segs.sub(&self.geo, s);
        }
    }

    /// Applies the map effect of one step after the caller has performed its I/O.
    /// Validates the whole step first; on error nothing changed.
    pub fn apply(&mut self, step: &Step) -> Result<(), ApplyError> {
        self.refuse_held(step)?;
        crate::apply::validate(&self.map, step).map_err(|why| ApplyError { step: *step, why })?;
        crate::apply::commit(&mut self.map, &mut self.segs, &self.geo, step);
        Ok(())
    }

    /// The mapping of each page of `sector..sector + sectors` now: (FS page, slot and
    /// dirty bit). Taken before routing a write, so that [`Indirector::restore`] can undo
    /// the write's map changes if its I/O fails.
    pub fn mapping_of(&self, sector: u64, sectors: u64) -> Vec<(u64, Option<(u32, bool)>)> {
        let per_page = self.geo.page.sectors();
        let (first, end) = (sector / per_page, (sector + sectors).div_ceil(per_page));
        (first..end.min(self.geo.fs_pages))
            .map(|p| (p, self.map.lookup(p).map(|s| (s, self.map.is_dirty(s)))))
            .collect()
    }

    /// Undoes the map changes of a write whose I/O failed, given [`Indirector::mapping_of`]
    /// from before it was routed: a page it absorbed is unmapped again (home still holds
    /// the page), a page bypass mode unmapped is mapped to its slot again (the slot still
    /// holds it). A page written in place stays mapped and dirty, since its slot may be
    /// partly overwritten. Returns false when a slot to restore was taken meanwhile, so
    /// the page could not be put back.
    pub fn restore(&mut self, before: &[(u64, Option<(u32, bool)>)]) -> bool {
        let mut all = true;
        for &(page, was) in before {
            match (was, self.map.lookup(page)) {
                (None, Some(now)) => {
                    self.map.remove_slot(now).expect("mapped slot");
                    self.segs.sub(&self.geo, now);
                }
                (Some((slot, dirty)), None)
                    if self.map.fs_page_of(slot).is_none() && !self.held.contains(&slot) =>
                {
                    self.map.insert(page, slot, dirty).expect("free slot");
                    self.segs.add(&self.geo, slot);
                }
                (Some(_), None) => all = false,
                _ => {}
            }
        }
        all
    }

    /// Steps that empty the oldest write-buffer segment: dirty pages are evicted home,
    /// clean ones dropped. "Oldest" is the first non-empty segment after the allocation
    /// cursor's, circularly, since absorption fills segments in cursor order. Empty when
    /// the write buffer holds nothing.
    pub fn destage_oldest(&self, max_copy_pages: u64) -> Vec<Step> {
        let wb_segs = self.geo.write_buffer_pages / self.geo.segment_pages.max(1);
        let first = self.segs.first_write_buffer_segment();
        let cursor_seg = self.geo.segment_of(self.wb_cursor).saturating_sub(first);
        let victim = (1..=wb_segs)
            .map(|i| first + (cursor_seg + i) % wb_segs)
            .find(|&s| self.segs.valid(s) > 0);
        let Some(seg) = victim else {
            return Vec::new();
        };
        let slots = seg * self.geo.segment_pages..(seg + 1) * self.geo.segment_pages;
        self.write_home(slots, true, max_copy_pages)
    }

    /// Flush back (seed 001 §3.5.5): every dirty page copied home. With `unmap`, every
    /// slot is also freed, so the data area alone is a complete image; otherwise the
    /// pages stay mapped, clean.
    pub fn flush_back(&self, unmap: bool, max_copy_pages: u64) -> Vec<Step> {
        self.write_home(0..self.geo.bopt_pages, unmap, max_copy_pages)
    }

    fn write_home(&self, slots: std::ops::Range<u32>, unmap: bool, max: u64) -> Vec<Step> {
        let (mut moves, mut clean) = (Vec::new(), Vec::new());
        for s in slots {
            match self.map.fs_page_of(s) {
                Some(p) if self.map.is_dirty(s) => moves.push(PageMove {
                    src: u64::from(s),
                    dst: p,
                }),
                Some(_) if unmap => clean.push(s),
                _ => {}
            }
        }
        let kind = if unmap {
            CopyKind::Evict
        } else {
            CopyKind::WriteBack
        };
        let mut out = Vec::new();
        copy::drops(&clean, &mut out);
        copy::coalesce(kind, Region::Bopt, Region::Data, &moves, max, &mut out);
        out
    }

    /// Checks the map's invariants and that the segment valid counts match it.
    pub fn check(&self) {
        self.map.check();
        let mut fresh = Segments::new(&self.geo);
        for (_, slot, _) in self.map.iter() {
            fresh.add(&self.geo, slot);
        }
        for &slot in &self.held {
            fresh.add(&self.geo, slot);
        }
        assert_eq!(
            fresh, self.segs,
            "segment valid counts disagree with the map"
        );
        assert!(
            self.wb_cursor >= self.geo.write_buffer_start() || self.geo.write_buffer_pages == 0
        );
        debug_assert!(self.map.iter().all(|(_, s, _)| s < self.geo.bopt_pages));
    }
}

/// Appends `io`, extending the last extent when it continues it on the device and in the
/// buffer.
fn push_coalesced(out: &mut Vec<PhysIo>, io: PhysIo) {
    if let Some(last) = out.last_mut() {
        if last.region == io.region
            && last.op == io.op
            && last.device_sector + last.sectors == io.device_sector
            && last.buf_offset_sectors + last.sectors == io.buf_offset_sectors
        {
            last.sectors += io.sectors;
            return;
        }
    }
    out.push(io);
}
