//! What the format does not detect (SECURITY.md "Not protected"), shown as
//! the documented behaviour through a mount (`gcm`): with and without file
//! summaries (FORMAT.md 12). The attacker edits CIPHERDIR while the volume
//! is unmounted, as in tests/attacks.rs.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

const MODE: Mode = Mode::Gcm;

fn read_range(p: &Path, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    File::open(p).unwrap().read_exact_at(&mut b, off).unwrap();
    b
}

fn write_range(p: &Path, off: u64, data: &[u8]) {
    let f = OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(data, off).unwrap();
}

/// Whether the log has a line matching `pred` (logged before the EIO reply).
fn log_has(v: &Volume, pred: impl Fn(&str) -> bool) -> bool {
    v.log().lines().any(pred)
}

/// A gcm volume with file summaries (`init --file-summary on`) or without
/// them (the default).
fn volume(summary: bool) -> Volume {
    let mut v = if summary {
        Volume::init_with(MODE, &["--file-summary", "on"])
    } else {
        Volume::init_with(MODE, &["--file-summary", "off"])
    };
    v.mount();
    v
}

mod undetectable_by_design {
    #[test]
    fn with_summaries() {
        super::undetectable_by_design(true)
    }
    #[test]
    fn without_summaries() {
        super::undetectable_by_design(false)
    }
}

/// What the format does not detect by itself (SECURITY.md "Holes and rollback"),
/// shown as the documented behaviour. 8 cases; with file summaries
/// (FORMAT.md 12) three of them are detected: a zeroed nonce entry, a
/// truncation at a block boundary and a block rolled back with its entry.
fn undetectable_by_design(summary: bool) {
    require_fuse!();
    let mut v = volume(summary);
    let mut rng = Rng::for_test("attacks-undetectable");
    let sizes = [30_001u64, 30_002, 30_003, 30_004, 30_005, 30_006, 30_007, 30_008];
    let data: Vec<Vec<u8>> = sizes.iter().map(|&s| rng.bytes(s as usize)).collect();
    for (i, d) in data.iter().enumerate() {
        write_file(&v.p(format!("u{i}")), d);
    }
    // Rollback: keep a copy of u2's backing file, then change u2.
    let bk = |v: &Volume, i: usize| {
        v.backing_paths()
            .into_iter()
            .find(|p| p.is_file() && fs::metadata(p).unwrap().len() == MODE.backing_len(sizes[i]))
            .unwrap()
    };
    let old_u2 = fs::read(bk(&v, 2)).unwrap();
    {
        let f = open_rw(&v.p("u2"));
        write_at(&f, 0, &[0xEE; 100]).unwrap();
        f.sync_all().unwrap();
    }
    // A block rolled back with its entry: u7's block 1 as it was before.
    let p7 = bk(&v, 7);
    let old_b1 = (
        read_range(&p7, MODE.block_data_offset(1), BLOCK as usize),
        read_range(&p7, MODE.block_entry_offset(1), MODE.entry_size() as usize),
    );
    {
        let f = open_rw(&v.p("u7"));
        write_at(&f, BLOCK, &[0xDD; 4096]).unwrap();
        f.sync_all().unwrap();
    }
    let (p0, p1, p2, p3, p4, p5, p6) = (
        bk(&v, 0),
        bk(&v, 1),
        bk(&v, 2),
        bk(&v, 3),
        bk(&v, 4),
        bk(&v, 5),
        bk(&v, 6),
    );
    v.unmount();
    // 6. A file replaced by a copy of another file (made first, so the
    // copy is of u0 as it was written).
    fs::copy(&p0, &p6).unwrap();
    // 1. A nonce entry zeroed: block 2 of u0 reads as a hole (zeros).
    write_range(&p0, MODE.block_entry_offset(2), &vec![0u8; MODE.entry_size() as usize]);
    // 2. Truncated at a block boundary: u1 becomes 3 blocks long.
    OpenOptions::new()
        .write(true)
        .open(&p1)
        .unwrap()
        .set_len(MODE.backing_len(3 * BLOCK))
        .unwrap();
    // 3. Rolled back to the older copy.
    fs::write(&p2, &old_u2).unwrap();
    // 4. Deleted.
    fs::remove_file(&p3).unwrap();
    // 5. Two files' backing names swapped (same directory).
    let tmp = p4.with_extension("swap");
    fs::rename(&p4, &tmp).unwrap();
    fs::rename(&p5, &p4).unwrap();
    fs::rename(&tmp, &p5).unwrap();
    // 8. A block rolled back: data and entry.
    write_range(&p7, MODE.block_data_offset(1), &old_b1.0);
    write_range(&p7, MODE.block_entry_offset(1), &old_b1.1);
    v.mount();
    let mut want0 = data[0].clone();
    want0[2 * BLOCK as usize..3 * BLOCK as usize].fill(0);
    if summary {
        for (f, what) in [
            ("u0", "zeroed entry"),
            ("u1", "truncated at a block boundary"),
            ("u7", "block rolled back with its entry"),
        ] {
            assert_errno(fs::read(v.p(f)), libc::EIO, &format!("{what}: detected"));
            assert!(
                log_has(&v, |l| l.contains(&format!("/{f}")) && l.contains("summary")),
                "{what}: no log line; log:\n{}",
                v.log()
            );
        }
    } else {
        assert_bytes_eq(&fs::read(v.p("u0")).unwrap(), &want0, "zeroed entry reads as a hole");
        assert_bytes_eq(
            &fs::read(v.p("u1")).unwrap(),
            &data[1][..3 * BLOCK as usize],
            "truncated",
        );
        assert_bytes_eq(
            &fs::read(v.p("u7")).unwrap(),
            &data[7],
            "block rolled back with its entry",
        );
    }
    assert_bytes_eq(&fs::read(v.p("u2")).unwrap(), &data[2], "rolled back to the old copy");
    assert_errno(fs::metadata(v.p("u3")).map(drop), libc::ENOENT, "deleted");
    assert_bytes_eq(&fs::read(v.p("u4")).unwrap(), &data[5], "swapped names: u4 shows u5");
    assert_bytes_eq(&fs::read(v.p("u5")).unwrap(), &data[4], "swapped names: u5 shows u4");
    assert_bytes_eq(&fs::read(v.p("u6")).unwrap(), &data[0], "replaced by a copy of u0");
    // 7. Metadata (mode, times) is stored in the clear: changing it is not detected.
    v.unmount();
    fs::set_permissions(&p2, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    v.mount();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs::metadata(v.p("u2")).unwrap().permissions().mode() & 0o777, 0o600);
    eprintln!(
        "attacks: undetectable by design ({}): 8 shown as documented",
        if summary {
            "file summaries: 3 of them detected"
        } else {
            "no file summaries"
        }
    );
}
