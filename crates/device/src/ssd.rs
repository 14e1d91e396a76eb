//! The flash device model (DESIGN.md "Device models"; the SSD of seed 003).
//!
//! Flash elements (channels x packages x dies) work in parallel; each serves one page
//! operation at a time: a read costs page read + flash-bus transfer of the bytes asked
//! for (with their spare bytes), a write bus transfer + page program, plus any garbage
//! collection it triggers. Planes of one element are not overlapped: the MSR model with
//! one parallel unit per element ("Number of parallel units = 1") does not overlap them
//! either. A finished request then crosses the host interface, one request at a time
//! (DiskSim's bus to the host: a fixed overhead plus a transfer time per sector); in the
//! MSR model completions wait for that bus in the order their elements finish.
//!
//! Parallelism: logical pages are striped over the elements (page `p` on element
//! `p mod E`), and the device keeps a busy-until time per element. A request's pages on
//! different elements overlap; pages on the same element queue. The request's service
//! time is the latest element's completion minus the start, so `service` and
//! `estimate_ns` both see the parallelism a single-request interface would otherwise hide.
//!
//! The FTL is page-mapped and log-structured per element: a write goes to the next free
//! page of the element's active block, the old copy becomes invalid; when an element has
//! fewer than `gc_free_blocks` erased blocks, greedy GC picks the block with the fewest
//! valid pages, copies them (read + program inside the element, no bus) and erases it.
//! The device starts *preconditioned*: every logical page written once, in order, so
//! that only the over-provisioned blocks are free and GC begins as soon as they are used,
//! as on a drive in service. An element's mapping tables are allocated on its first write
//! (about 8 MB for the K9XXG08UXM), so read-only replays cost no memory.

use crate::energy::{Activity, PowerModel};
use crate::params::{LoadedModel, ModelParams, SsdParams};
use crate::{DevRequest, Device, Service};

const INVALID: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct Ssd {
    name: String,
    elements: u32,
    blocks_per_element: u32,
    pages_per_block: u32,
    page_sectors: u64,
    logical_pages: u64,
    read_ns: f64,
    program_ns: f64,
    erase_ns: f64,
    bus_ns_per_byte: f64,
    /// Flash-bus bytes per 512 data bytes (data + spare).
    bus_bytes_per_sector: f64,
    overhead_ns: f64,
    host_ns_per_sector: f64,
    gc_free_blocks: u32,
    queue_depth: usize,
    /// Host-interface transfers booked, start (ns) -> end (ns): the interface is one,
    /// shared by all elements.
    host_bus: std::collections::BTreeMap<u64, u64>,
    busy_until_ns: Vec<f64>,
    ftl: Vec<Option<Box<ElementFtl>>>,
    stats: FlashStats,
    power: Option<PowerModel>,
    activity: Activity,
    last_sector: u64,
}

/// What the flash did, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlashStats {
    pub page_reads: u64,
    pub page_programs: u64,
    pub erases: u64,
    /// Valid pages GC copied (write amplification = (programs) / (host page writes)).
    pub gc_copies: u64,
}

/// The page map of one element.
#[derive(Clone, Debug)]
struct ElementFtl {
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid: Vec<u32>,
    free: Vec<u32>,
    active: Option<(u32, u32)>,
}

impl ElementFtl {
    /// Preconditioned: logical page i at physical page i, the rest erased.
    fn new(logical: u32, blocks: u32, ppb: u32) -> ElementFtl {
        let physical = blocks * ppb;
        let p2l = (0..physical)
            .map(|p| if p < logical { p } else { INVALID })
            .collect();
        let valid = (0..blocks)
            .map(|b| logical.saturating_sub(b * ppb).min(ppb))
            .collect::<Vec<_>>();
        let free = (0..blocks).rev().filter(|&b| b * ppb >= logical).collect();
        ElementFtl {
            l2p: (0..logical).collect(),
            p2l,
            valid,
            free,
            active: None,
        }
    }

    /// Places `lpn` on the next free page; returns false when no erased page is left.
    fn append(&mut self, lpn: u32, ppb: u32) -> bool {
        let (block, page) = match self.active {
            Some((b, p)) if p < ppb => (b, p),
            _ => match self.free.pop() {
                Some(b) => (b, 0),
                None => return false,
            },
        };
        let old = self.l2p[lpn as usize];
        if old != INVALID && self.p2l[old as usize] == lpn {
            self.p2l[old as usize] = INVALID;
            self.valid[(old / ppb) as usize] -= 1;
        }
        let ppn = block * ppb + page;
        self.l2p[lpn as usize] = ppn;
        self.p2l[ppn as usize] = lpn;
        self.valid[block as usize] += 1;
        self.active = Some((block, page + 1));
        true
    }

    /// The full, non-active block with the fewest valid pages (greedy GC victim).
    fn victim(&self, ppb: u32) -> Option<u32> {
        let active = self.active.map(|a| a.0);
        let mut is_free = vec![false; self.valid.len()];
        for &b in &self.free {
            is_free[b as usize] = true;
        }
        (0..self.valid.len() as u32)
            .filter(|&b| Some(b) != active && !is_free[b as usize])
            .min_by_key(|&b| self.valid[b as usize])
            .filter(|&b| self.valid[b as usize] < ppb)
    }
}

impl Ssd {
    pub fn new(model: &LoadedModel) -> Option<Ssd> {
        let ModelParams::Ssd(p) = &model.params else {
            return None;
        };
        Some(Self::from_params(p))
    }

    pub fn from_params(p: &SsdParams) -> Ssd {
        let elements = p.channels * p.packages_per_channel * p.dies_per_package;
        let blocks_per_element = p.planes_per_die * p.blocks_per_plane;
        let physical_pages = elements as u64 * blocks_per_element as u64 * p.pages_per_block as u64;
        let logical_pages = (physical_pages as f64 * (1.0 - p.over_provisioning)).floor() as u64;
        Ssd {
            name: format!("ssd:{}", p.name),
            elements,
            blocks_per_element,
            pages_per_block: p.pages_per_block,
            page_sectors: p.page_bytes as u64 / 512,
            logical_pages,
            read_ns: p.read_us * 1e3,
            program_ns: p.program_us * 1e3,
            erase_ns: p.erase_us * 1e3,
            bus_ns_per_byte: p.bus_ns_per_byte,
            bus_bytes_per_sector: 512.0 + p.spare_bytes_per_sector as f64,
            overhead_ns: p.overhead_us * 1e3,
            host_ns_per_sector: p.host_ns_per_sector,
            gc_free_blocks: p.gc_free_blocks.max(1),
            queue_depth: p.queue_depth.max(1) as usize,
            host_bus: Default::default(),
            busy_until_ns: vec![0.0; elements as usize],
            ftl: vec![None; elements as usize],
            stats: FlashStats::default(),
            power: p.power.as_ref().map(PowerModel::from),
            activity: Activity::default(),
            last_sector: 0,
        }
    }

    pub fn stats(&self) -> FlashStats {
        self.stats
    }
    pub fn elements(&self) -> u32 {
        self.elements
    }

    fn local_logical_pages(&self) -> u32 {
        self.logical_pages.div_ceil(self.elements as u64) as u32
    }

    /// Element time of one page operation moving `bytes` over the element's bus.
    fn page_ns(&self, write: bool, bytes: u64) -> f64 {
        let flash = if write { self.program_ns } else { self.read_ns };
        flash + bytes as f64 / 512.0 * self.bus_bytes_per_sector * self.bus_ns_per_byte
    }

    /// Writes local page `lpn` of element `e`; returns the GC time it triggered.
    fn write_page(&mut self, e: usize, lpn: u32) -> f64 {
        let (logical, blocks, ppb) = (
            self.local_logical_pages(),
            self.blocks_per_element,
            self.pages_per_block,
        );
        let ftl =
            self.ftl[e].get_or_insert_with(|| Box::new(ElementFtl::new(logical, blocks, ppb)));
        let mut gc_ns = 0.0;
        while ftl.free.len() < self.gc_free_blocks as usize {
            let Some(v) = ftl.victim(ppb) else { break };
            let pages: Vec<u32> = (v * ppb..(v + 1) * ppb)
                .map(|p| ftl.p2l[p as usize])
                .filter(|&l| l != INVALID)
                .collect();
            for l in pages {
                ftl.append(l, ppb);
                gc_ns += self.read_ns + self.program_ns;
                self.stats.gc_copies += 1;
            }
            ftl.free.push(v);
            gc_ns += self.erase_ns;
            self.stats.erases += 1;
        }
        let ok = ftl.append(lpn.min(logical - 1), ppb);
        debug_assert!(ok, "an element ran out of erased pages");
        gc_ns
    }

    /// Bytes of page `page` (absolute) that `[start, end)` sectors cover.
    fn page_bytes(&self, page: u64, start: u64, end: u64) -> u64 {
        let ps = page * self.page_sectors;
        (end.min(ps + self.page_sectors) - start.max(ps)) * 512
    }

    /// (first sector, end sector, first page, last page) of `req`, wrapped into range.
    fn span(&self, req: &DevRequest) -> (u64, u64, u64, u64) {
        let capacity = self.logical_pages * self.page_sectors;
        let first = req.sector % capacity.max(1);
        let end = (first + req.sectors.max(1) as u64).min(capacity);
        (
            first,
            end,
            first / self.page_sectors,
            (end - 1) / self.page_sectors,
        )
    }

    /// Runs the request's pages element by element, writing the FTL and busy times.
    fn run(&mut self, start_ns: u64, req: &DevRequest) -> f64 {
        let start = start_ns as f64;
        let (first, end, p0, p1) = self.span(req);
        let e_count = self.elements as u64;
        let mut done = start;
        for j in 0..(p1 - p0 + 1).min(e_count) {
            let e = ((p0 + j) % e_count) as usize;
            let began = start.max(self.busy_until_ns[e]);
            let mut t = began;
            let mut page = p0 + j;
            while page <= p1 {
                t += self.page_ns(req.write, self.page_bytes(page, first, end));
                if req.write {
                    t += self.write_page(e, (page / e_count) as u32);
                    self.stats.page_programs += 1;
                } else {
                    self.stats.page_reads += 1;
                }
                page += e_count;
            }
            self.activity.transfer_ns += (t - began) as u64;
            self.busy_until_ns[e] = t;
            done = done.max(t);
        }
        self.last_sector = end;
        let host_ns = self.host_ns(end - first);
        self.book_host_bus(start, done, host_ns) - start
    }

    /// Time of a request of `sectors` on the host interface.
    fn host_ns(&self, sectors: u64) -> u64 {
        (self.overhead_ns + sectors as f64 * self.host_ns_per_sector).round() as u64
    }

    /// Books the host interface for `len` ns in its first free gap from `ready_ns`;
    /// returns when the transfer ends. Bookings that ended before `now_ns` are dropped
    /// (every later request starts after it).
    fn book_host_bus(&mut self, now_ns: f64, ready_ns: f64, len: u64) -> f64 {
        if len == 0 {
            return ready_ns;
        }
        while let Some((_, &end)) = self.host_bus.first_key_value() {
            if end as f64 > now_ns {
                break;
            }
            self.host_bus.pop_first();
        }
        let mut at = ready_ns.round() as u64;
        // Bookings may differ in length: any that started before `at` may still be on.
        for (&b, &e) in self.host_bus.iter() {
            if b >= at + len {
                break;
            }
            if e > at {
                at = e;
            }
        }
        self.host_bus.insert(at, at + len);
        (at + len) as f64
    }
}

impl Device for Ssd {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.logical_pages * self.page_sectors
    }
    fn service(&mut self, start_ns: u64, req: &DevRequest) -> Service {
        let ns = self.run(start_ns, req).round() as u64;
        Service {
            total_ns: ns,
            transfer_ns: ns,
            ..Service::default()
        }
    }
    /// Without the GC a write may trigger (not known until the FTL runs).
    fn estimate_ns(&self, start_ns: u64, req: &DevRequest) -> u64 {
        let start = start_ns as f64;
        let (first, end, p0, p1) = self.span(req);
        let e_count = self.elements as u64;
        let mut done = start;
        for j in 0..(p1 - p0 + 1).min(e_count) {
            let e = ((p0 + j) % e_count) as usize;
            let mut t = start.max(self.busy_until_ns[e]);
            let mut page = p0 + j;
            while page <= p1 {
                t += self.page_ns(req.write, self.page_bytes(page, first, end));
                page += e_count;
            }
            done = done.max(t);
        }
        (done - start).round() as u64 + self.host_ns(end - first)
    }
    fn position_key(&self, sector: u64) -> u64 {
        sector
    }
    fn head_key(&self) -> u64 {
        self.last_sector
    }
    fn queue_depth(&self) -> usize {
        self.queue_depth
    }
    fn serves_in_parallel(&self) -> bool {
        true
    }
    fn energy_j(&self, elapsed_ns: u64) -> Option<f64> {
        self.power.map(|p| p.energy_j(elapsed_ns, self.activity))
    }
    fn power(&self) -> Option<crate::energy::PowerModel> {
        self.power
    }
}
