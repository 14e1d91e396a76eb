//! The fuzz target's body (`check::fuzz_one`) on random bytes and on real images with
//! bytes flipped, superblock checksums recomputed so the fields themselves are attacked.

use reblock_engine::check::{check, fuzz_one};
use reblock_engine::format::{LayoutRequest, Superblock};
use reblock_engine::{Engine, Layout, MemStore};

fn image() -> Vec<u8> {
    let l = Layout::plan(&LayoutRequest {
        data_bytes: 32 * 4096,
        bopt_bytes: 2 * (2 * 4096 + 4 * 4096)
            + 3 * 4096
            + 34 * reblock_engine::format::FREEMAP_CHUNK_BYTES, // free-space area: 1 map chunk + 16 replica blocks, 2 copies
        page_bytes: 4096,
        segment_pages: 4,
        write_buffer_fraction: 0.5,
        separate: false,
    })
    .unwrap();
    let store = MemStore::new(vec![0u8; l.device_bytes as usize], None);
    Engine::format(&store, &l, 5).unwrap();
    store.devices().0
}

#[test]
fn random_and_mutated_images_never_panic() {
    let base = image();
    assert!(check(&MemStore::new(base.clone(), None), false)
        .unwrap()
        .is_clean());
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let sb_at = base.len() - 4096;
    let mut cases = 0;
    for i in 0..400 {
        let mut img = base.clone();
        if i % 2 == 0 {
            // Attack a superblock field and re-seal its checksum.
            let off = sb_at + (rnd() % 120) as usize;
            img[off] ^= 1 << (rnd() % 8);
            let crc = reblock_engine::crc::crc32c(&[&img[sb_at..sb_at + 124]]);
            img[sb_at + 124..sb_at + 128].copy_from_slice(&crc.to_le_bytes());
            if let Ok(sb) = Superblock::decode(&img[sb_at..]) {
                assert_eq!(sb.encode()[..128], img[sb_at..sb_at + 128]);
            }
        } else {
            for _ in 0..8 {
                let off = (rnd() as usize) % img.len();
                img[off] = rnd() as u8;
            }
        }
        fuzz_one(&img);
        let n = (rnd() % 9000) as usize;
        let junk: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
        fuzz_one(&junk);
        cases += 2;
    }
    assert_eq!(cases, 800);
}
