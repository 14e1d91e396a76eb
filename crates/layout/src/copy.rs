//! Copy operations: the data movement a reconfiguration, a destage or a flush-back turns
//! into, as explicit steps the caller executes (the simulator charges them to the
//! reconfiguration phase; the engine performs them).
//!
//! Semantics of one [`CopyOp`]: read the whole source run, then write the whole
//! destination run, then apply the op's map effect with [`crate::Indirector::apply`].
//! Because the source is read completely before anything is written, a run may overlap its
//! own destination (a chain shifted by one slot is one op, like `memmove`).

use crate::bopt::{Geometry, Region};
use crate::units::Extent;

/// `pages` consecutive pages of one region: FS pages of the data area or BOPT slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageRun {
    pub region: Region,
    pub first: u64,
    pub pages: u64,
}

impl PageRun {
    pub fn new(region: Region, first: u64, pages: u64) -> PageRun {
        PageRun {
            region,
            first,
            pages,
        }
    }
    pub fn end(&self) -> u64 {
        self.first + self.pages
    }
    pub fn contains(&self, page: u64) -> bool {
        self.first <= page && page < self.end()
    }
    /// Device extents of the run (two for a data run crossing a BOPT inside the data area).
    pub fn device_extents(&self, g: &Geometry) -> Vec<Extent> {
        let ps = g.page.sectors();
        match self.region {
            Region::Bopt => vec![Extent::new(
                g.bopt_sector(self.first as u32, 0),
                self.pages * ps,
            )],
            Region::Data => g
                .data_extents(self.first * ps, self.pages * ps)
                .map(|(e, _)| e)
                .collect(),
        }
    }
}

/// Why a copy happens, which fixes its map effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// BOPT -> home; the pages stay mapped and become clean (flush back, seed 001 §3.5.5).
    WriteBack,
    /// BOPT -> home; the slots are freed (outgoing dirty pages, seed 000 §4.4; destage).
    Evict,
    /// BOPT -> BOPT; each page moves to its new slot with its dirty bit (seed 000 §4.4).
    Relocate,
    /// home -> BOPT; each page becomes mapped, clean (seed 000 §4.4).
    Incoming,
}

/// One copy of a run of pages; page `i` of `src` goes to page `i` of `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CopyOp {
    pub kind: CopyKind,
    pub src: PageRun,
    pub dst: PageRun,
}

impl CopyOp {
    pub fn pages(&self) -> u64 {
        self.src.pages
    }
    /// Bytes read (and again written) by this op.
    pub fn bytes(&self, g: &Geometry) -> u64 {
        self.pages() * g.page.bytes()
    }
}

/// One ordered step of a reconfiguration, destage or flush-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Free clean BOPT slots: no I/O, the home copy is current (outgoing clean pages).
    Drop(PageRun),
    /// Copy, then apply the map effect of its kind.
    Copy(CopyOp),
}

impl Step {
    pub fn bytes_moved(&self, g: &Geometry) -> u64 {
        match self {
            Step::Drop(_) => 0,
            Step::Copy(op) => op.bytes(g),
        }
    }
}

/// One page's move, before coalescing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageMove {
    pub src: u64,
    pub dst: u64,
}

/// Merges consecutive page moves of one kind into runs, keeping their order, when both
/// sides continue (ascending or descending) and the merged op stays within `max_pages`.
/// A move never joins a run whose destination covers its source: in a valid order a page
/// is never read after another move wrote it, and the buffered semantics of [`CopyOp`]
/// must not change that.
pub(crate) fn coalesce(
    kind: CopyKind,
    src_region: Region,
    dst_region: Region,
    moves: &[PageMove],
    max_pages: u64,
    out: &mut Vec<Step>,
) {
    let mut run: Option<CopyOp> = None;
    for m in moves {
        if let Some(op) = run.as_mut() {
            let full = op.pages() >= max_pages;
            let blocked = op.dst.contains(m.src) && src_region == dst_region;
            if !full && !blocked {
                if m.src == op.src.end() && m.dst == op.dst.end() {
                    op.src.pages += 1;
                    op.dst.pages += 1;
                    continue;
                }
                if m.src + 1 == op.src.first && m.dst + 1 == op.dst.first {
                    op.src.first -= 1;
                    op.dst.first -= 1;
                    op.src.pages += 1;
                    op.dst.pages += 1;
                    continue;
                }
            }
            out.push(Step::Copy(*op));
        }
        run = Some(CopyOp {
            kind,
            src: PageRun::new(src_region, m.src, 1),
            dst: PageRun::new(dst_region, m.dst, 1),
        });
    }
    out.extend(run.map(Step::Copy));
}

/// Merges sorted slots into [`Step::Drop`] runs.
pub(crate) fn drops(slots: &[u32], out: &mut Vec<Step>) {
    let mut run: Option<PageRun> = None;
    for &s in slots {
        let s = u64::from(s);
        if let Some(r) = run.as_mut() {
            if r.end() == s {
                r.pages += 1;
                continue;
            }
            out.push(Step::Drop(*r));
        }
        run = Some(PageRun::new(Region::Bopt, s, 1));
    }
    out.extend(run.map(Step::Drop));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(src: u64, dst: u64) -> PageMove {
        PageMove { src, dst }
    }

    #[test]
    fn ascending_and_descending_runs_merge() {
        let mut out = Vec::new();
        let moves = [mv(10, 0), mv(11, 1), mv(12, 2), mv(6, 7), mv(5, 6)];
        coalesce(
            CopyKind::Incoming,
            Region::Data,
            Region::Bopt,
            &moves,
            64,
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                Step::Copy(CopyOp {
                    kind: CopyKind::Incoming,
                    src: PageRun::new(Region::Data, 10, 3),
                    dst: PageRun::new(Region::Bopt, 0, 3),
                }),
                Step::Copy(CopyOp {
                    kind: CopyKind::Incoming,
                    src: PageRun::new(Region::Data, 5, 2),
                    dst: PageRun::new(Region::Bopt, 6, 2),
                }),
            ]
        );
    }

    #[test]
    fn run_is_cut_at_max_pages_and_at_read_after_write() {
        let mut out = Vec::new();
        coalesce(
            CopyKind::Relocate,
            Region::Bopt,
            Region::Bopt,
            &[mv(0, 1), mv(1, 2)],
            64,
            &mut out,
        );
        // 1 was written by the first move; reading it afterwards must not be buffered
        // into the same op (it would read the old page 1, not the moved page 0).
        assert_eq!(out.len(), 2);
        out.clear();
        let moves = [mv(0, 10), mv(1, 11), mv(2, 12)];
        coalesce(
            CopyKind::Relocate,
            Region::Bopt,
            Region::Bopt,
            &moves,
            2,
            &mut out,
        );
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn drops_merge_consecutive_slots() {
        let mut out = Vec::new();
        drops(&[1, 2, 3, 7], &mut out);
        assert_eq!(
            out,
            vec![
                Step::Drop(PageRun::new(Region::Bopt, 1, 3)),
                Step::Drop(PageRun::new(Region::Bopt, 7, 1))
            ]
        );
    }
}
