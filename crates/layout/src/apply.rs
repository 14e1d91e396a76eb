//! The map effect of a [`Step`], checked against the current map before anything changes.
//!
//! Every copy kind names its pages on both sides, so a step that no longer matches the
//! map — computed from an older map, or overtaken by a foreground write during a move
//! (seed 001 §3.5.2) — is refused as a whole rather than half applied.

use crate::bopt::{Geometry, Region, Segments};
use crate::copy::{CopyKind, CopyOp, PageRun, Step};
use crate::map::Map;

pub(crate) fn validate(map: &Map, step: &Step) -> Result<(), String> {
    match step {
        Step::Drop(run) => {
            expect_region(map, run, Region::Bopt, "drop")?;
            for s in slots(run) {
                match map.fs_page_of(s) {
                    None => return Err(format!("slot {s} is free")),
                    Some(p) if map.is_dirty(s) => {
                        return Err(format!(
                            "slot {s} holds dirty FS page {p}; dropping it loses data"
                        ))
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        Step::Copy(op) => validate_copy(map, op),
    }
}

fn validate_copy(map: &Map, op: &CopyOp) -> Result<(), String> {
    if op.src.pages != op.dst.pages {
        return Err("source and destination differ in length".into());
    }
    let (src, dst) = match op.kind {
        CopyKind::WriteBack | CopyKind::Evict => (Region::Bopt, Region::Data),
        CopyKind::Relocate => (Region::Bopt, Region::Bopt),
        CopyKind::Incoming => (Region::Data, Region::Bopt),
    };
    expect_region(map, &op.src, src, "source")?;
    expect_region(map, &op.dst, dst, "destination")?;
    for i in 0..op.src.pages {
        let (s, d) = (op.src.first + i, op.dst.first + i);
        match op.kind {
            CopyKind::WriteBack | CopyKind::Evict => {
                if map.fs_page_of(s as u32) != Some(d) {
                    return Err(format!("slot {s} does not hold FS page {d}"));
                }
            }
            CopyKind::Relocate => {
                if map.fs_page_of(s as u32).is_none() {
                    return Err(format!("slot {s} is free"));
                }
                // A destination inside the source run is vacated by this same op first.
                if map.fs_page_of(d as u32).is_some() && !op.src.contains(d) {
                    return Err(format!("destination slot {d} is taken"));
                }
            }
            CopyKind::Incoming => {
                if let Some(slot) = map.lookup(s) {
                    return Err(format!("FS page {s} is already mapped to slot {slot}"));
                }
                if map.fs_page_of(d as u32).is_some() {
                    return Err(format!("destination slot {d} is taken"));
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn commit(map: &mut Map, segs: &mut Segments, g: &Geometry, step: &Step) {
    match step {
        Step::Drop(run) => {
            for s in slots(run) {
                map.remove_slot(s).expect("validated");
                segs.sub(g, s);
            }
        }
        Step::Copy(op) => commit_copy(map, segs, g, op),
    }
}

fn commit_copy(map: &mut Map, segs: &mut Segments, g: &Geometry, op: &CopyOp) {
    match op.kind {
        CopyKind::WriteBack => {
            for s in slots(&op.src) {
                map.set_dirty(s, false).expect("validated");
            }
        }
        CopyKind::Evict => {
            for s in slots(&op.src) {
                map.remove_slot(s).expect("validated");
                segs.sub(g, s);
            }
        }
        CopyKind::Relocate => {
            // Moving up, the highest page first; moving down, the lowest first: each
            // destination inside the run is vacated before it is filled.
            let order: Vec<u64> = if op.dst.first > op.src.first {
                (0..op.src.pages).rev().collect()
            } else {
                (0..op.src.pages).collect()
            };
            for i in order {
                let (s, d) = ((op.src.first + i) as u32, (op.dst.first + i) as u32);
                map.move_slot(s, d).expect("validated");
                segs.sub(g, s);
                segs.add(g, d);
            }
        }
        CopyKind::Incoming => {
            for i in 0..op.src.pages {
                let d = (op.dst.first + i) as u32;
                map.insert(op.src.first + i, d, false).expect("validated");
                segs.add(g, d);
            }
        }
    }
}

fn expect_region(map: &Map, run: &PageRun, region: Region, what: &str) -> Result<(), String> {
    if run.region != region {
        return Err(format!(
            "{what} must be in {region:?}, not {:?}",
            run.region
        ));
    }
    let limit = match region {
        Region::Bopt => u64::from(map.bopt_pages()),
        Region::Data => map.fs_pages(),
    };
    if run.end() > limit {
        return Err(format!(
            "{what} pages {}..{} pass the {region:?} end at {limit}",
            run.first,
            run.end()
        ));
    }
    Ok(())
}

fn slots(run: &PageRun) -> impl Iterator<Item = u32> {
    (run.first as u32)..(run.end() as u32)
}
