//! `reblock freemap` end to end on an image made by mkfs.ext4: the free bytes it prints are
//! the file system's own free count, and a file that is not ext4 is a clear error.

use std::process::Command as Std;

use assert_cmd::Command;

#[test]
fn freemap_reports_what_the_file_system_counts() {
    if Std::new("mkfs.ext4").arg("-V").output().is_err() {
        eprintln!("skipping: mkfs.ext4 not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fs.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let ok = Std::new("mkfs.ext4")
        .args(["-F", "-q", "-b", "4096", "-g", "4096"])
        .arg(&img)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .args(["freemap", "--json"])
        .arg(&img)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    // dumpe2fs -h prints the superblock's free block count.
    let head = Std::new("dumpe2fs").arg("-h").arg(&img).output().unwrap();
    let head = String::from_utf8_lossy(&head.stdout);
    let free: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("Free blocks:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(v["free_blocks"].as_u64().unwrap(), free);
    assert_eq!(v["block_size"].as_u64().unwrap(), 4096);
    assert_eq!(v["groups"].as_u64().unwrap(), 4);
    let extents = v["extents"].as_array().unwrap();
    let sum: u64 = extents.iter().map(|e| e["len"].as_u64().unwrap()).sum();
    assert_eq!(sum, free * 8, "extents are in 512-byte sectors by default");
}

#[test]
fn freemap_names_a_file_that_is_not_ext4() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("zeros.img");
    std::fs::write(&img, vec![0u8; 8192]).unwrap();
    let out = Command::cargo_bin("reblock")
        .unwrap()
        .arg("freemap")
        .arg(&img)
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        err.contains("zeros.img") && err.contains("not an ext2/3/4 file system"),
        "{err}"
    );
}
