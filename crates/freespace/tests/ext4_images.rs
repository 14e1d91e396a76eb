//! The ext4 reader against images made by mkfs.ext4 and filled by debugfs, compared block
//! for block with what dumpe2fs prints. Skips (with a message) where e2fsprogs is missing.

use std::path::Path;
use std::process::Command;

use reblock_freespace::{read_ext4_free, Ext4Error, FreeExtents};

fn have(tool: &str) -> bool {
    Command::new(tool).arg("-V").output().is_ok()
}

/// Makes an image of `mib` MiB with `mkfs.ext4 OPTIONS` and writes a few files into it
/// with debugfs (no mount needed), then deletes one so a hole opens up.
fn make_image(dir: &Path, mib: u64, options: &[&str]) -> std::path::PathBuf {
    let img = dir.join("fs.img");
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(mib << 20).unwrap();
    drop(f);
    let out = Command::new("mkfs.ext4")
        .args(["-F", "-q"])
        .args(options)
        .arg(&img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mkfs.ext4 {options:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let payload = dir.join("payload");
    std::fs::write(&payload, vec![0x5au8; 3 << 20]).unwrap();
    let small = dir.join("small");
    std::fs::write(&small, b"hello").unwrap();
    let script = format!(
        "write {p} a\nwrite {s} b\nmkdir d\nwrite {p} d/c\nwrite {s} d/e\nrm a\n",
        p = payload.display(),
        s = small.display()
    );
    let cmds = dir.join("cmds");
    std::fs::write(&cmds, script).unwrap();
    let out = Command::new("debugfs")
        .args(["-w", "-f"])
        .arg(&cmds)
        .arg(&img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "debugfs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    img
}

/// The free blocks dumpe2fs reports ("Free blocks: 10-20, 25" under each group).
fn dumpe2fs_free(img: &Path) -> FreeExtents {
    let out = Command::new("dumpe2fs").arg(img).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut free = FreeExtents::new();
    for line in text.lines() {
        // Group sections indent it; the superblock header has a "Free blocks:" count.
        let Some(list) = line.strip_prefix("  Free blocks: ") else {
            continue;
        };
        for item in list.split(", ").filter(|s| !s.is_empty()) {
            let (a, b) = item.split_once('-').unwrap_or((item, item));
            let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
            free.insert(a, b + 1);
        }
    }
    free
}

#[test]
fn free_blocks_match_dumpe2fs_on_every_layout() {
    if !have("mkfs.ext4") || !have("debugfs") || !have("dumpe2fs") {
        eprintln!("skipping: e2fsprogs (mkfs.ext4, debugfs, dumpe2fs) not installed");
        return;
    }
    let layouts: &[&[&str]] = &[
        &[],
        &["-b", "1024"],
        &["-O", "^flex_bg"],
        &["-O", "64bit"],
        &["-O", "^resize_inode,meta_bg"],
        &["-O", "^sparse_super,^resize_inode"],
        &["-b", "4096", "-g", "8192"],
        &["-b", "4096", "-g", "8192", "-O", "sparse_super2"],
        &["-t", "ext2"],
        &["-b", "2048", "-g", "4096"],
    ];
    for options in layouts {
        let dir = tempfile::tempdir().unwrap();
        let img = make_image(dir.path(), 96, options);
        let ours = read_ext4_free(&img).unwrap_or_else(|e| panic!("{options:?}: {e}"));
        let theirs = dumpe2fs_free(&img);
        assert!(theirs.total() > 0);
        assert_eq!(
            ours.free.iter().collect::<Vec<_>>(),
            theirs.iter().collect::<Vec<_>>(),
            "free extents differ for mkfs options {options:?}"
        );
        assert!(
            ours.count_mismatches.is_empty(),
            "{options:?}: {:?}",
            ours.count_mismatches
        );
        let sectors = ours.free_sectors();
        assert_eq!(sectors.total(), ours.free.total() * ours.block_size / 512);
    }
}

#[test]
fn refuses_what_is_not_ext4_or_not_clean() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("zeros.img");
    std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
    assert!(matches!(
        read_ext4_free(&img),
        Err(Ext4Error::NotExt4 { .. })
    ));
    let short = dir.path().join("short.img");
    std::fs::write(&short, [0u8; 100]).unwrap();
    assert!(matches!(read_ext4_free(&short), Err(Ext4Error::Io { .. })));
    if !have("mkfs.ext4") {
        return;
    }
    let img = make_image(dir.path(), 32, &[]);
    // Mark the journal as needing recovery: the bitmaps may then be stale.
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[1024 + 0x60] |= 0x4;
    std::fs::write(&img, &bytes).unwrap();
    let err = read_ext4_free(&img).unwrap_err();
    assert!(matches!(err, Ext4Error::NotClean { .. }), "{err}");
    assert!(err.to_string().contains("journal needs recovery"));
}
