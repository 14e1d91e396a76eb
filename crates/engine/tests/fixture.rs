//! Every later version must open images earlier versions made: a small image made by
//! each format version (committed gzip-compressed in tests/fixtures/vN.img.gz) is
//! opened, its pages read back, and `check` finds it clean. `REBLOCK_WRITE_FIXTURE=1`
//! writes the current version's image (only when the format version changes; the older
//! files stay under their versions' names).

use flate2::read::GzDecoder;
use reblock_engine::check::check;
use reblock_engine::format::{LayoutRequest, FORMAT_VERSION};
use reblock_engine::{Engine, EngineOptions, Layout, MemStore};
use reblock_layout::Plan;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

fn fixture(version: u32) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}.img.gz"))
}

fn page_of(p: u64) -> Vec<u8> {
    (0..4096u64).map(|i| (p * 37 + i / 13) as u8).collect()
}

/// Pages 0..16 written; 2..6 planned into the read cache, 8..12 rewritten into the write
/// buffer; clean stop.
fn make() -> Vec<u8> {
    let l = Layout::plan(&LayoutRequest {
        data_bytes: 16 * 4096,
        bopt_bytes: 4 * (2 * 4096 + 4 * 4096)
            + 3 * 4096
            + 34 * reblock_engine::format::FREEMAP_CHUNK_BYTES, // free-space area: 1 map chunk + 16 replica blocks, 2 copies
        page_bytes: 4096,
        segment_pages: 4,
        write_buffer_fraction: 0.5,
        separate: false,
    })
    .unwrap();
    let store = Arc::new(MemStore::new(vec![0u8; l.device_bytes as usize], None));
    Engine::format(store.as_ref(), &l, 0x5eed).unwrap();
    let (e, _) = Engine::open(store.clone(), EngineOptions::default()).unwrap();
    for p in 0..16 {
        e.write_sectors(&page_of(p), p * 8).unwrap();
    }
    e.detach().unwrap();
    let mut plan = Plan::new(8, "fixture");
    plan.push(2, 4, 0);
    e.reconfigure(plan).unwrap();
    while e.background_tick(true).unwrap() > 0 {}
    for p in 8..12 {
        e.write_sectors(&page_of(p), p * 8).unwrap();
    }
    e.close(false).unwrap();
    store.devices().0
}

/// Opens the fixture of format `version`, checks it and reads every page back; returns
/// the engine and how many data pages `check` verified against checksums.
fn opens_and_reads_back(version: u32) -> (Engine, u64) {
    if std::env::var_os("REBLOCK_WRITE_FIXTURE").is_some() && version == FORMAT_VERSION {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut gz, &make()).unwrap();
        std::fs::write(fixture(version), gz.finish().unwrap()).unwrap();
    }
    let mut bytes = Vec::new();
    GzDecoder::new(std::fs::File::open(fixture(version)).unwrap())
        .read_to_end(&mut bytes)
        .unwrap();
    let store = Arc::new(MemStore::new(bytes, None));
    let rep = check(store.as_ref(), false).unwrap();
    assert!(rep.is_clean(), "{:?}", rep.problems);
    let (e, open) = Engine::open(store, EngineOptions::default()).unwrap();
    assert!(!open.unclean && open.warnings().is_empty());
    assert_eq!(e.layout().version, version);
    let map = e.indirector().map().clone();
    assert_eq!(map.lookup(2), Some(0), "read cache as planned");
    assert!(map.lookup(9).is_some(), "write buffer kept");
    for p in 0..16 {
        let mut b = vec![0u8; 4096];
        e.read_sectors(&mut b, p * 8).unwrap();
        assert_eq!(b, page_of(p), "page {p}");
    }
    (e, rep.data_pages_verified)
}

#[test]
fn image_made_by_format_version_2_opens_and_reads_back_without_data_checksums() {
    let (e, verified) = opens_and_reads_back(2);
    assert_eq!(verified, 0);
    assert!(!e.status().data_checksums, "version 2 has no room for them");
    // It keeps serving and committing as version 2.
    e.write_sectors(&page_of(3), 3 * 8).unwrap();
    e.flush().unwrap();
}

#[test]
fn image_made_by_format_version_3_opens_and_verifies_its_data_checksums() {
    let (e, verified) = opens_and_reads_back(3);
    assert_eq!(verified, 8, "read cache 2..6 and write buffer 8..12");
    assert!(e.status().data_checksums);
}
