//! How logical sectors land on member devices: one device, RAID-0, RAID-1, RAID-5, and an
//! explicit block-to-disk placement (the parallel layout optimizer of seed 003).
//!
//! Each array returns the member I/Os of a request in phases ([`Phases`]); pieces of one
//! request that are contiguous on the same member are merged into one I/O.

use crate::{Array, DevRequest, MemberIo, Phases};

/// Appends `[sector, sector + sectors)` at `member` to `phase`, merging with that member's
/// previous piece when contiguous.
fn push(phase: &mut Vec<MemberIo>, member: usize, sector: u64, sectors: u64, write: bool) {
    for io in phase.iter_mut().rev() {
        if let MemberIo::At { member: m, req } = io {
            if *m == member && req.write == write {
                if req.sector + req.sectors as u64 == sector {
                    req.sectors += sectors as u32;
                    return;
                }
                break;
            }
        }
    }
    phase.push(MemberIo::At {
        member,
        req: DevRequest {
            sector,
            sectors: sectors as u32,
            write,
        },
    });
}

/// One device: the identity mapping.
#[derive(Clone, Debug)]
pub struct Single {
    name: String,
    capacity_sectors: u64,
}

impl Single {
    pub fn new(name: &str, capacity_sectors: u64) -> Single {
        Single {
            name: name.to_string(),
            capacity_sectors,
        }
    }
}

impl Array for Single {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    fn members(&self) -> usize {
        1
    }
    fn map(&self, req: &DevRequest) -> Phases {
        vec![vec![MemberIo::At {
            member: 0,
            req: *req,
        }]]
    }
}

/// RAID-0: stripe units of `stripe_sectors` dealt round robin over the members.
#[derive(Clone, Debug)]
pub struct Raid0 {
    name: String,
    members: usize,
    stripe_sectors: u64,
    rows: u64,
}

impl Raid0 {
    pub fn new(members: usize, stripe_sectors: u64, member_sectors: u64) -> Raid0 {
        Raid0 {
            name: format!("raid0:{members}x:stripe={stripe_sectors}"),
            members,
            stripe_sectors,
            rows: member_sectors / stripe_sectors,
        }
    }
}

impl Array for Raid0 {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.rows * self.stripe_sectors * self.members as u64
    }
    fn members(&self) -> usize {
        self.members
    }
    fn map(&self, req: &DevRequest) -> Phases {
        let (su, n) = (self.stripe_sectors, self.members as u64);
        let mut phase = Vec::new();
        let (mut s, end) = (req.sector, req.sector + req.sectors as u64);
        while s < end {
            let (unit, off) = (s / su, s % su);
            let len = (su - off).min(end - s);
            push(
                &mut phase,
                (unit % n) as usize,
                (unit / n) * su + off,
                len,
                req.write,
            );
            s += len;
        }
        vec![phase]
    }
}

/// RAID-1: every member holds everything. Reads go to whichever copy finishes first (the
/// simulator decides with `estimate_ns`), writes to all.
#[derive(Clone, Debug)]
pub struct Raid1 {
    name: String,
    members: usize,
    member_sectors: u64,
}

impl Raid1 {
    pub fn new(members: usize, member_sectors: u64) -> Raid1 {
        Raid1 {
            name: format!("raid1:{members}x"),
            members,
            member_sectors,
        }
    }
}

impl Array for Raid1 {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.member_sectors
    }
    fn members(&self) -> usize {
        self.members
    }
    fn map(&self, req: &DevRequest) -> Phases {
        if req.write {
            vec![(0..self.members)
                .map(|member| MemberIo::At { member, req: *req })
                .collect()]
        } else {
            vec![vec![MemberIo::AnyOf(
                (0..self.members).map(|m| (m, *req)).collect(),
            )]]
        }
    }
}

/// RAID-5 with left-symmetric parity: in row `r` parity sits on member
/// `n - 1 - (r mod n)` and the row's data units follow it round robin, so consecutive
/// data units visit every member before any repeats.
///
/// A write covering a whole row writes its data and freshly computed parity in one phase.
/// Any other write to a row is a read-modify-write: phase 1 reads the old data and old
/// parity, phase 2 writes the new data and parity (four I/Os for a small write).
#[derive(Clone, Debug)]
pub struct Raid5 {
    name: String,
    members: usize,
    stripe_sectors: u64,
    rows: u64,
}

/// One data piece of a request inside one row: (member, member sector, sectors).
type Piece = (usize, u64, u64);

impl Raid5 {
    /// Panics if `members < 3` (spec parsing rejects that with an error first).
    pub fn new(members: usize, stripe_sectors: u64, member_sectors: u64) -> Raid5 {
        assert!(members >= 3, "RAID-5 needs at least 3 members");
        Raid5 {
            name: format!("raid5:{members}x:stripe={stripe_sectors}"),
            members,
            stripe_sectors,
            rows: member_sectors / stripe_sectors,
        }
    }

    fn parity_member(&self, row: u64) -> usize {
        self.members - 1 - (row % self.members as u64) as usize
    }

    /// Data unit `u` (logical order): (member, row).
    pub fn data_member(&self, u: u64) -> (usize, u64) {
        let d = self.members as u64 - 1;
        let row = u / d;
        let p = self.parity_member(row) as u64;
        (((p + 1 + u % d) % self.members as u64) as usize, row)
    }

    /// Calls `f(row, pieces)` for each row `[start, end)` touches; `pieces` is reused.
    fn rows_of(&self, start: u64, end: u64, mut f: impl FnMut(u64, &[Piece])) {
        let su = self.stripe_sectors;
        let row_sectors = su * (self.members as u64 - 1);
        let mut pieces: Vec<Piece> = Vec::new();
        let mut s = start;
        while s < end {
            let row = s / row_sectors;
            let row_end = ((row + 1) * row_sectors).min(end);
            pieces.clear();
            while s < row_end {
                let (unit, off) = (s / su, s % su);
                let len = (su - off).min(row_end - s);
                pieces.push((self.data_member(unit).0, row * su + off, len));
                s += len;
            }
            f(row, &pieces);
        }
    }
}

impl Array for Raid5 {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.rows * self.stripe_sectors * (self.members as u64 - 1)
    }
    fn members(&self) -> usize {
        self.members
    }
    fn map(&self, req: &DevRequest) -> Phases {
        let (start, end) = (req.sector, req.sector + req.sectors as u64);
        let su = self.stripe_sectors;
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        self.rows_of(start, end, |row, pieces| {
            if !req.write {
                for &(m, s, n) in pieces {
                    push(&mut reads, m, s, n, false);
                }
                return;
            }
            let pm = self.parity_member(row);
            let covered: u64 = pieces.iter().map(|p| p.2).sum();
            if covered == su * (self.members as u64 - 1) {
                // Full-stripe write: parity from the new data alone.
                for &(m, s, n) in pieces {
                    push(&mut writes, m, s, n, true);
                }
                push(&mut writes, pm, row * su, su, true);
                return;
            }
            // Read-modify-write: parity over the union of the offsets written.
            let lo = pieces.iter().map(|p| p.1).min().unwrap_or(row * su);
            let hi = pieces.iter().map(|p| p.1 + p.2).max().unwrap_or(row * su);
            for &(m, s, n) in pieces {
                push(&mut reads, m, s, n, false);
                push(&mut writes, m, s, n, true);
            }
            push(&mut reads, pm, lo, hi - lo, false);
            push(&mut writes, pm, lo, hi - lo, true);
        });
        [reads, writes]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect()
    }
}

/// An explicit placement of fixed-size blocks on disks (seed 003's parallel optimizer).
///
/// Block `b` covers logical sectors `[b * block_sectors, (b + 1) * block_sectors)` and
/// lives on `disk(b)`. By default blocks are dealt round robin (`b mod n`); moved blocks
/// are kept as exceptions, so an array of 100 M blocks costs memory only for the blocks
/// moved. The blocks of one disk are laid out contiguously in the order of their ids: a
/// block's member sector is its rank among its disk's blocks times `block_sectors`, so
/// moving a block shifts the later blocks of both disks (the re-layout the optimizer's
/// plan implies). Ranks are found by binary search in each disk's sorted exception lists.
/// A disk given more blocks than it holds wraps around on the member device.
#[derive(Clone, Debug)]
pub struct Placement {
    name: String,
    members: usize,
    block_sectors: u64,
    blocks: u64,
    /// Blocks moved away from their default disk: block -> disk.
    moved: std::collections::HashMap<u64, u32>,
    /// Per disk, sorted: blocks moved onto it, and its default blocks moved away.
    moved_in: Vec<Vec<u64>>,
    moved_out: Vec<Vec<u64>>,
}

impl Placement {
    /// `blocks` blocks dealt round robin over `members` disks.
    pub fn new(members: usize, block_sectors: u64, blocks: u64) -> Placement {
        Placement {
            name: format!("place:{members}x:block={block_sectors}"),
            members,
            block_sectors,
            blocks,
            moved: Default::default(),
            moved_in: vec![Vec::new(); members],
            moved_out: vec![Vec::new(); members],
        }
    }

    fn default_disk(&self, block: u64) -> usize {
        (block % self.members as u64) as usize
    }

    /// Blocks below `block` whose default disk is `disk`.
    fn default_below(&self, block: u64, disk: usize) -> u64 {
        let d = disk as u64;
        if block <= d {
            0
        } else {
            (block - d - 1) / self.members as u64 + 1
        }
    }

    pub fn block_sectors(&self) -> u64 {
        self.block_sectors
    }
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
    /// The disk of `block`, or `None` past the last block.
    pub fn disk(&self, block: u64) -> Option<usize> {
        (block < self.blocks).then(|| {
            self.moved
                .get(&block)
                .map_or_else(|| self.default_disk(block), |&d| d as usize)
        })
    }
    /// (disk, member sector) of `block`.
    pub fn location(&self, block: u64) -> Option<(usize, u64)> {
        let disk = self.disk(block)?;
        let below = |v: &Vec<u64>| v.partition_point(|&x| x < block) as u64;
        let rank = self.default_below(block, disk) + below(&self.moved_in[disk])
            - below(&self.moved_out[disk]);
        Some((disk, rank * self.block_sectors))
    }
    /// Moves one block; see [`Placement::set_disks`].
    pub fn set_disk(&mut self, block: u64, disk: usize) -> Result<(), String> {
        self.set_disks(&[(block, disk)])
    }
    /// Moves blocks to disks; the disks' layouts follow in id order.
    pub fn set_disks(&mut self, moves: &[(u64, usize)]) -> Result<(), String> {
        if let Some(&(b, d)) = moves
            .iter()
            .find(|&&(b, d)| d >= self.members || b >= self.blocks)
        {
            return Err(format!(
                "block {b} to disk {d}: the array has {} blocks and {} disks",
                self.blocks, self.members
            ));
        }
        for &(b, d) in moves {
            let (home, now) = (self.default_disk(b), self.disk(b).unwrap_or(0));
            if now != home {
                remove_sorted(&mut self.moved_in[now], b);
                remove_sorted(&mut self.moved_out[home], b);
                self.moved.remove(&b);
            }
            if d != home {
                insert_sorted(&mut self.moved_in[d], b);
                insert_sorted(&mut self.moved_out[home], b);
                self.moved.insert(b, d as u32);
            }
        }
        Ok(())
    }
    /// Blocks per disk.
    pub fn load(&self) -> Vec<u64> {
        (0..self.members)
            .map(|d| {
                self.default_below(self.blocks, d) + self.moved_in[d].len() as u64
                    - self.moved_out[d].len() as u64
            })
            .collect()
    }
}

fn insert_sorted(v: &mut Vec<u64>, x: u64) {
    if let Err(i) = v.binary_search(&x) {
        v.insert(i, x);
    }
}

fn remove_sorted(v: &mut Vec<u64>, x: u64) {
    if let Ok(i) = v.binary_search(&x) {
        v.remove(i);
    }
}

impl Array for Placement {
    fn name(&self) -> &str {
        &self.name
    }
    fn capacity_sectors(&self) -> u64 {
        self.blocks() * self.block_sectors
    }
    fn members(&self) -> usize {
        self.members
    }
    fn map(&self, req: &DevRequest) -> Phases {
        let bs = self.block_sectors;
        let mut phase = Vec::new();
        let (mut s, end) = (req.sector, req.sector + req.sectors as u64);
        let cap = self.capacity_sectors().max(1);
        while s < end {
            // Past the last block wraps (arrays never panic on a stray request).
            let (block, off) = ((s % cap) / bs, s % bs);
            let len = (bs - off).min(end - s);
            let (disk, base) = self.location(block).unwrap_or((0, 0));
            push(&mut phase, disk, base + off, len, req.write);
            s += len;
        }
        vec![phase]
    }
    fn as_placement_mut(&mut self) -> Option<&mut Placement> {
        Some(self)
    }
    fn as_placement(&self) -> Option<&Placement> {
        Some(self)
    }
}
