//! `--mode xts` through real mounts: the on-disk layout (header byte 3, no
//! nonce table, data at 32 + 4096·b), XTS ciphertext with tweak file ID ⊕
//! block number, sparse holes, Twofish and 128-bit keys, `warpfs info`, and
//! bad flag combinations.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::os::unix::fs::MetadataExt;

/// `warpfs init` with extra flags on a blank volume.
fn init_with(extra: &[&str]) -> (Volume, Out) {
    let v = Volume::blank(Mode::Xts);
    let mut a = args!["init", "--passfile", &v.passfile];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(v.cipher.clone().into());
    let o = warpfs(&a);
    (v, o)
}

fn round_trip(extra: &[&str], info_has: &[&str]) {
    require_fuse!();
    let (mut v, o) = init_with(extra);
    o.expect_ok("init");
    let info = warpfs(args!["info", &v.cipher]);
    info.expect_ok("info");
    for s in info_has {
        assert!(info.stdout.contains(s), "info lacks {s:?}:\n{info}");
    }
    v.mount();
    let mut rng = Rng::for_test("xts-round-trip");
    let data = rng.bytes(3 * 4096 + 1000);
    fs::write(v.p("f"), &data).unwrap();
    fs::write(v.p("tiny"), b"0123456789").unwrap();
    v.remount();
    assert_eq!(fs::read(v.p("f")).unwrap(), data);
    assert_eq!(fs::read(v.p("tiny")).unwrap(), b"0123456789");
    // Backing files: header (mode byte 3) + data, no nonce entries.
    let mut lens: Vec<u64> = v
        .root_backing_entries()
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .collect();
    lens.sort();
    assert_eq!(lens, vec![32 + 10, 32 + data.len() as u64]);
    for p in v.root_backing_entries() {
        let raw = fs::read(&p).unwrap();
        assert_eq!(&raw[..4], b"WRPF");
        assert_eq!(raw[6], 3, "mode byte of {}", p.display());
        assert!(!raw.windows(10).any(|w| w == b"0123456789"));
        assert!(!raw.windows(64).any(|w| w == &data[..64]));
    }
}

#[test]
fn aes256_default() {
    round_trip(&["--mode", "xts"], &["content mode:  xts", "AES-256", "512 bits"]);
}

#[test]
fn aes128() {
    round_trip(&["--mode", "xts", "--key-bits", "128"], &["AES-128", "256 bits"]);
}

#[test]
fn twofish256() {
    round_trip(
        &["--mode", "xts", "--cipher", "twofish"],
        &["xts-twofish", "Twofish-256"],
    );
}

#[test]
fn twofish128() {
    round_trip(
        &["--mode", "xts", "--cipher", "twofish", "--key-bits", "128"],
        &["xts-twofish", "Twofish-128"],
    );
}

#[test]
fn ctr_and_gcm_key_bits_128_shown_by_info() {
    for mode in ["ctr", "gcm"] {
        let (v, o) = init_with(&["--mode", mode, "--key-bits", "128"]);
        o.expect_ok("init");
        let info = warpfs(args!["info", &v.cipher]);
        assert!(info.stdout.contains("AES-128"), "{info}");
        assert!(info.stdout.contains(&format!("content mode:  {mode}")), "{info}");
    }
}

#[test]
fn key_bits_192_are_refused() {
    let (v, o) = init_with(&["--mode", "xts", "--key-bits", "192"]);
    o.expect_code(2, "192-bit keys");
    assert!(!v.cipher.join("warpfs.conf").exists());
}

#[test]
fn holes_stay_sparse_and_read_as_zeros() {
    require_fuse!();
    let mut v = Volume::new(Mode::Xts);
    {
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(v.p("s"))
            .unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(b"tail", 64 << 20).unwrap();
        // A punched full block becomes zeros on disk, and reads as zeros.
        f.write_all_at(&[0x5a; 3 * 4096], 8192).unwrap();
        fallocate(&f, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 12288, 4096).unwrap();
        f.sync_all().unwrap();
    }
    v.remount();
    let back = v.single_backing_file();
    let m = fs::metadata(&back).unwrap();
    assert_eq!(m.len(), 32 + (64 << 20) + 4);
    assert!(
        m.blocks() * 512 < 4 << 20,
        "backing file is not sparse: {} blocks",
        m.blocks()
    );
    let raw = fs::read(&back).unwrap();
    assert!(
        raw[32 + 12288..32 + 16384].iter().all(|&x| x == 0),
        "punched block not zero on disk"
    );
    let plain = fs::read(v.p("s")).unwrap();
    assert_eq!(&plain[..4], b"head");
    assert!(plain[4..8192].iter().all(|&x| x == 0));
    assert!(plain[8192..12288].iter().all(|&x| x == 0x5a));
    assert!(plain[12288..16384].iter().all(|&x| x == 0));
    assert!(plain[16384..20480].iter().all(|&x| x == 0x5a));
    assert!(plain[20480..64 << 20].iter().all(|&x| x == 0));
    assert_eq!(&plain[64 << 20..], b"tail");
}

#[test]
fn ciphertext_is_malleable_and_block_bound() {
    // XTS has no integrity (FORMAT.md 7): a flipped ciphertext bit garbles
    // its 16-byte cipher block only, and no error is reported.
    require_fuse!();
    let mut v = Volume::new(Mode::Xts);
    let data = vec![0x11u8; 2 * 4096];
    fs::write(v.p("m"), &data).unwrap();
    v.unmount();
    let back = v.single_backing_file();
    let mut raw = fs::read(&back).unwrap();
    raw[32 + 4096 + 100] ^= 1;
    fs::write(&back, &raw).unwrap();
    v.mount();
    let got = fs::read(v.p("m")).unwrap();
    assert_eq!(got.len(), data.len());
    let differ: Vec<usize> = (0..got.len()).filter(|&i| got[i] != data[i]).collect();
    assert!(!differ.is_empty());
    assert!(
        differ.iter().all(|&i| (4096 + 96..4096 + 112).contains(&i)),
        "{differ:?}"
    );
}
