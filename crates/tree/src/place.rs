//! Placing a supernode tree on a disk (the dissertation's §2.3).
//!
//! - default: the supernodes one after the other in document order (a file written
//!   sequentially);
//! - tree-structured (Algorithm 2): the root on the first track; then, parent by parent
//!   in ascending order, its children as one run on the next free track, the first child
//!   at the sector the head reaches when it seeks there right after reading the parent
//!   (semi-sequential: no rotational wait), its siblings after it;
//! - optimized (Algorithm 3): the children run may share a track: the nearest track on
//!   either side of the parent's, one track further each time, whose rotationally-optimal
//!   track region (the first 1/k of a track from where the head lands) has a free run
//!   long enough for all the children;
//! - level order: the supernodes one after the other in the order the breadth-first
//!   grouping made them, so that siblings are sequential as in the tree placements and
//!   so are the children runs of consecutive siblings: a level of the tree is one
//!   sequential run (Algorithm 3's node ordering, getNextNode, taken breadth-first, with
//!   each children run right after the previous one instead of near its parent).
//!
//! Positions come from the drive model itself: its zones, sectors per track, track and
//! cylinder skew, seek curve and command overhead, through `Hdd::find_semi_sequential`.
//! The landing point also skips the think time between two requests (§2.3.3: the 95th
//! percentile of the think-time sample), so that the child is still ahead of the head.

use reblock_device::Hdd;
use serde::Serialize;

use crate::error::TreeError;
use crate::group::Supernodes;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Placement {
    #[serde(rename = "default")]
    Default,
    #[serde(rename = "tree-structured")]
    Tree,
    #[serde(rename = "optimized")]
    Optimized,
    #[serde(rename = "level-order")]
    LevelOrder,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Default => "default",
            Placement::Tree => "tree-structured",
            Placement::Optimized => "optimized",
            Placement::LevelOrder => "level-order",
        }
    }
}

/// Where every supernode of a grouping lies.
#[derive(Clone, Debug)]
pub struct Layout {
    pub placement: Placement,
    /// First sector of every supernode.
    pub sector_of: Vec<u64>,
    pub sectors_per_block: u64,
    /// Sectors from the first placed sector to the end of the last.
    pub span_sectors: u64,
    /// Free sectors inside that span, as a fraction of it.
    pub external_fragmentation: f64,
}

/// The free space of a disk, track by track in logical order.
struct Disk<'a> {
    hdd: &'a Hdd,
    /// First sector of every track, ascending.
    tracks: Vec<u64>,
    capacity: u64,
    used: Vec<u64>,
    free_in_track: Vec<u32>,
    /// Fixed delay between the end of a read and the start of the next one's seek.
    lead_ns: f64,
}

impl<'a> Disk<'a> {
    fn new(hdd: &'a Hdd, think_skew_ns: f64) -> Disk<'a> {
        let g = hdd.geometry();
        let capacity = g.capacity_sectors();
        let mut tracks = Vec::new();
        let mut s = 0;
        while s < capacity {
            let l = g.locate(s);
            tracks.push(s);
            s += (l.sectors_per_track - l.sector) as u64;
        }
        let free_in_track = (0..tracks.len())
            .map(|t| (tracks.get(t + 1).copied().unwrap_or(capacity) - tracks[t]) as u32)
            .collect();
        Disk {
            hdd,
            tracks,
            capacity,
            used: vec![0; capacity.div_ceil(64) as usize],
            free_in_track,
            lead_ns: hdd.read_overhead_ns() + think_skew_ns,
        }
    }

    fn track_of(&self, sector: u64) -> usize {
        self.tracks.partition_point(|&t| t <= sector) - 1
    }
    fn track_end(&self, t: usize) -> u64 {
        self.tracks.get(t + 1).copied().unwrap_or(self.capacity)
    }
    fn is_free(&self, s: u64) -> bool {
        self.used[(s / 64) as usize] & (1 << (s % 64)) == 0
    }
    fn run_is_free(&self, start: u64, len: u64) -> bool {
        start + len <= self.capacity && (start..start + len).all(|s| self.is_free(s))
    }
    fn mark(&mut self, start: u64, len: u64) {
        for s in start..start + len {
            self.used[(s / 64) as usize] |= 1 << (s % 64);
            let t = self.track_of(s);
            self.free_in_track[t] -= 1;
        }
    }

    /// The sector of track `t` that a read issued right after reading `len` sectors at
    /// `parent` reaches with no rotational wait.
    fn semi_sequential(&self, parent: u64, len: u64, t: usize) -> u64 {
        let g = self.hdd.geometry();
        let end = g.locate(parent + len - 1);
        let rot = self.hdd.rotation_ns();
        let end_angle = end.angle + 1.0 / end.sectors_per_track as f64;
        let after_ns = (end_angle * rot + self.lead_ns).round() as u64;
        let to = g.locate(self.tracks[t]);
        self.hdd
            .find_semi_sequential(after_ns, (end.cylinder, end.head), to.cylinder, to.head)
            .expect("a track of the disk")
    }
}

fn full(layout: &'static str, needed: u64, disk: &Disk<'_>) -> TreeError {
    TreeError::DiskFull {
        layout,
        message: format!(
            "the document's blocks need {needed} sectors and this layout's free space between them more than the drive's {} sectors; use a larger block size or a larger drive",
            disk.capacity
        ),
    }
}

/// Algorithm 2 ran out of tracks: it gives every children run a fresh track.
fn out_of_tracks(sn: &Supernodes, disk: &Disk<'_>) -> TreeError {
    let runs = sn.list.iter().filter(|s| !s.children.is_empty()).count();
    TreeError::DiskFull {
        layout: "tree-structured",
        message: format!(
            "gives each of the document's {runs} children runs a track of its own, but the drive has {} tracks; use a larger block size (fewer supernodes), a larger drive, or the optimized layout (ekm-ots), which shares tracks",
            disk.tracks.len()
        ),
    }
}

/// Sectors of the children run of supernode `s`.
fn children_sectors(sn: &Supernodes, s: usize, spb: u64) -> u64 {
    sn.list[s]
        .children
        .iter()
        .map(|&c| sn.list[c as usize].blocks as u64 * spb)
        .sum()
}

/// Places the children of `s` one after the other from `start`.
fn place_children(sn: &Supernodes, s: usize, spb: u64, start: u64, sector_of: &mut [u64]) {
    let mut at = start;
    for &c in &sn.list[s].children {
        sector_of[c as usize] = at;
        at += sn.list[c as usize].blocks as u64 * spb;
    }
}

/// Lays out `sn` on `hdd` with `placement`; `think_skew_ns` is the extra rotational skew
/// of a first child (the tree placements only).
pub fn place(
    sn: &Supernodes,
    placement: Placement,
    hdd: &Hdd,
    think_skew_ns: f64,
) -> Result<Layout, TreeError> {
    let spb = sn.block_bytes / 512;
    let needed = sn.total_blocks() * spb;
    let mut disk = Disk::new(hdd, think_skew_ns);
    if needed > disk.capacity {
        return Err(full(placement.name(), needed, &disk));
    }
    let mut sector_of = vec![0u64; sn.len()];
    match placement {
        // Both lay the supernodes out in the order their grouping made them.
        Placement::Default | Placement::LevelOrder => {
            let mut at = 0;
            for (s, node) in sn.list.iter().enumerate() {
                sector_of[s] = at;
                at += node.blocks as u64 * spb;
            }
        }
        Placement::Tree => place_tree(sn, spb, &mut disk, &mut sector_of)?,
        Placement::Optimized => place_optimized(sn, spb, &mut disk, &mut sector_of, 4)?,
    }
    let span_start = sector_of.iter().copied().min().unwrap_or(0);
    let span_end = (0..sn.len())
        .map(|s| sector_of[s] + sn.list[s].blocks as u64 * spb)
        .max()
        .unwrap_or(0);
    let span = span_end - span_start;
    Ok(Layout {
        placement,
        sector_of,
        sectors_per_block: spb,
        span_sectors: span,
        external_fragmentation: 1.0 - needed as f64 / span.max(1) as f64,
    })
}

/// Algorithm 2: every children run starts a fresh track.
fn place_tree(
    sn: &Supernodes,
    spb: u64,
    disk: &mut Disk<'_>,
    sector_of: &mut [u64],
) -> Result<(), TreeError> {
    let root_len = sn.list[0].blocks as u64 * spb;
    disk.mark(0, root_len);
    let mut next_track = disk.track_of(root_len - 1) + 1;
    for s in 0..sn.len() {
        let len = children_sectors(sn, s, spb);
        if len == 0 {
            continue;
        }
        if next_track >= disk.tracks.len() {
            return Err(out_of_tracks(sn, disk));
        }
        let parent_len = sn.list[s].blocks as u64 * spb;
        let start = disk.semi_sequential(sector_of[s], parent_len, next_track);
        if start + len > disk.capacity {
            return Err(out_of_tracks(sn, disk));
        }
        place_children(sn, s, spb, start, sector_of);
        disk.mark(start, len);
        next_track = disk.track_of(start + len - 1) + 1;
    }
    Ok(())
}

/// The first start in the rotationally-optimal region of track `t` (1/k of the track
/// from the landing sector) with `len` free sectors before the track's end.
fn free_region_start(
    disk: &Disk<'_>,
    parent: u64,
    parent_len: u64,
    t: usize,
    len: u64,
    k: u64,
) -> Option<u64> {
    if (disk.free_in_track[t] as u64) < len {
        return None;
    }
    let (first, end) = (disk.tracks[t], disk.track_end(t));
    let spt = end - first;
    let landing = disk.semi_sequential(parent, parent_len, t);
    (0..(spt / k).max(1))
        .map(|off| first + (landing - first + off) % spt)
        .find(|&s| s + len <= end && disk.run_is_free(s, len))
}

/// Algorithm 3 with `k` track regions per track. A run longer than a track cannot share
/// one: it starts semi-sequentially on the first track of enough wholly free tracks.
fn place_optimized(
    sn: &Supernodes,
    spb: u64,
    disk: &mut Disk<'_>,
    sector_of: &mut [u64],
    k: u64,
) -> Result<(), TreeError> {
    let root_len = sn.list[0].blocks as u64 * spb;
    disk.mark(0, root_len);
    let tracks = disk.tracks.len();
    for s in 0..sn.len() {
        let len = children_sectors(sn, s, spb);
        if len == 0 {
            continue;
        }
        let parent_len = sn.list[s].blocks as u64 * spb;
        let pt = disk.track_of(sector_of[s]);
        let mut found = None;
        for skip in 1..tracks {
            let candidates = [pt.checked_add(skip), pt.checked_sub(skip)];
            let valid: Vec<usize> = candidates
                .into_iter()
                .flatten()
                .filter(|&t| t < tracks)
                .collect();
            if valid.is_empty() {
                break;
            }
            found = valid
                .into_iter()
                .find_map(|t| free_region_start(disk, sector_of[s], parent_len, t, len, k));
            if found.is_some() {
                break;
            }
        }
        let start = match found {
            Some(start) => start,
            None => wide_run_start(disk, sector_of[s], parent_len, pt, len)
                .ok_or_else(|| full("optimized", sn.total_blocks() * spb, disk))?,
        };
        place_children(sn, s, spb, start, sector_of);
        disk.mark(start, len);
    }
    Ok(())
}

/// For a run too long for any region: the first wholly free stretch of tracks after the
/// parent's track, entered semi-sequentially, with room for the run.
fn wide_run_start(
    disk: &Disk<'_>,
    parent: u64,
    parent_len: u64,
    pt: usize,
    len: u64,
) -> Option<u64> {
    let mut t = pt + 1;
    while t < disk.tracks.len() {
        if disk.free_in_track[t] as u64 == disk.track_end(t) - disk.tracks[t] {
            let start = disk.semi_sequential(parent, parent_len, t);
            if disk.run_is_free(start, len) {
                return Some(start);
            }
        }
        t += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::{Builder, Document};
    use crate::group::Grouping;
    use reblock_device::params::builtin;
    use reblock_device::{DevRequest, Device};

    /// A tree of the given fanout per level; every node is 490 bytes, one per 512-byte
    /// block.
    fn tree(fanouts: &[usize]) -> Document {
        fn add(b: &mut Builder, fanouts: &[usize]) {
            b.open("n", &[("v", "x".repeat(480), 480)]);
            if let Some((&f, rest)) = fanouts.split_first() {
                for _ in 0..f {
                    add(b, rest);
                }
            }
            b.close();
        }
        let mut b = Builder::default();
        add(&mut b, fanouts);
        b.finish()
    }

    fn barracuda() -> Hdd {
        Hdd::new(&builtin("barracuda").unwrap())
            .unwrap()
            .without_cache()
    }

    /// Rotational wait of reading every first child right after its parent.
    fn first_child_waits_ns(sn: &Supernodes, layout: &Layout) -> Vec<u64> {
        let read = |s: usize| DevRequest {
            sector: layout.sector_of[s],
            sectors: 1,
            write: false,
        };
        let mut waits = Vec::new();
        for (s, node) in sn.list.iter().enumerate() {
            let Some(&c) = node.children.first() else {
                continue;
            };
            let mut d = barracuda();
            let t0 = 1_000_000 + s as u64 * 777_777;
            let p = d.service(t0, &read(s));
            waits.push(d.service(t0 + p.total_ns, &read(c as usize)).rotate_ns);
        }
        waits
    }

    #[test]
    fn tree_structured_first_children_need_no_rotational_wait() {
        let doc = tree(&[30, 8, 3]);
        let sn = Supernodes::build(&doc, Grouping::Sequential, 512);
        assert_eq!(sn.len(), doc.len());
        let hdd = barracuda();
        let layout = place(&sn, Placement::Tree, &hdd, 0.0).unwrap();
        let sector_ns = hdd.rotation_ns() / 119.0;
        let waits = first_child_waits_ns(&sn, &layout);
        assert_eq!(waits.len(), 1 + 30 + 240);
        assert!(waits.iter().all(|&w| (w as f64) < sector_ns), "{waits:?}");
        // Siblings follow each other, and every children run has its own track.
        for node in &sn.list {
            for w in node.children.windows(2) {
                assert_eq!(
                    layout.sector_of[w[1] as usize],
                    layout.sector_of[w[0] as usize] + 1
                );
            }
        }
        assert!(
            layout.external_fragmentation > 0.9,
            "{}",
            layout.external_fragmentation
        );
        let default = place(&sn, Placement::Default, &hdd, 0.0).unwrap();
        assert_eq!(default.external_fragmentation, 0.0);
        assert_eq!(default.span_sectors, doc.len() as u64);
    }

    #[test]
    fn optimized_first_children_wait_at_most_a_track_region() {
        let doc = tree(&[30, 8, 3]);
        let sn = Supernodes::build(&doc, Grouping::Sequential, 512);
        let hdd = barracuda();
        let layout = place(&sn, Placement::Optimized, &hdd, 0.0).unwrap();
        let waits = first_child_waits_ns(&sn, &layout);
        let region_ns = hdd.rotation_ns() / 4.0 + hdd.rotation_ns() / 119.0;
        assert!(waits.iter().all(|&w| (w as f64) < region_ns), "{waits:?}");
        // Sharing tracks: far less free space than Algorithm 2.
        let basic = place(&sn, Placement::Tree, &hdd, 0.0).unwrap();
        assert!(
            layout.span_sectors * 4 < basic.span_sectors,
            "{} vs {}",
            layout.span_sectors,
            basic.span_sectors
        );
    }

    #[test]
    fn a_think_time_skew_keeps_the_child_ahead_of_the_head() {
        let doc = tree(&[5, 2]);
        let sn = Supernodes::build(&doc, Grouping::Sequential, 512);
        let hdd = barracuda();
        let think_ns = 1_500_000.0;
        let layout = place(&sn, Placement::Tree, &hdd, think_ns).unwrap();
        let read = |s: u32| DevRequest {
            sector: layout.sector_of[s as usize],
            sectors: 1,
            write: false,
        };
        let mut d = barracuda();
        let p = d.service(0, &read(0));
        let c = d.service(p.total_ns + think_ns as u64, &read(sn.list[0].children[0]));
        assert!((c.rotate_ns as f64) < hdd.rotation_ns() / 119.0, "{c:?}");
    }
}
