//! `warpfs rekey` (issue 7, item 5): files written through a real mount
//! are moved to a new content key generation; every header records it,
//! every data block is re-encrypted, contents read back equal after a
//! remount; a SIGKILL at any point loses nothing, the volume mounts mid-rekey
//! and a rerun finishes; a mounted volume and a wrong password are refused.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mode_tests!(rekey_round_trip, rekey_twice,);

fn data(seed: u64, len: usize) -> Vec<u8> {
    Rng::new(seed).bytes(len)
}

/// Backing content files (reserved `warpfs.*` names excluded), recursively.
fn content_files(v: &Volume) -> Vec<PathBuf> {
    v.backing_paths()
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            !n.starts_with("warpfs.") && fs::symlink_metadata(p).unwrap().is_file()
        })
        .collect()
}

fn leftovers(v: &Volume) -> Vec<PathBuf> {
    v.backing_paths()
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("warpfs.rekey"))
        .collect()
}

/// Key generation in a cipher file's header (bytes 24..28); `None` if empty.
fn header_gen(p: &Path) -> Option<u32> {
    let b = fs::read(p).unwrap();
    if b.is_empty() {
        return None;
    }
    assert_eq!(&b[..4], b"WRPF");
    assert_eq!(&b[28..32], &[0; 4], "reserved header bytes");
    Some(u32::from_le_bytes(b[24..28].try_into().unwrap()))
}

fn rekey_env(v: &Volume, env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.arg("rekey").arg("--passfile").arg(&v.passfile).arg(&v.cipher);
    for (k, val) in env {
        cmd.env(k, val);
    }
    run_cmd(cmd, std::time::Duration::from_secs(300))
}

fn rekey(v: &Volume) -> Out {
    rekey_env(v, &[])
}

/// Write a set of files through the mount: small, multi-segment, sparse,
/// empty, in a subdirectory, plus a symlink; returns name → contents.
fn populate(v: &Volume, seed: u64) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    fs::create_dir_all(v.p("sub/deeper")).unwrap();
    m.insert("small".to_string(), data(seed, 100));
    m.insert("big".to_string(), data(seed + 1, 3 * 1024 * 1024 + 123));
    m.insert("empty".to_string(), Vec::new());
    m.insert("sub/deeper/f".to_string(), data(seed + 2, 70_000));
    for (k, d) in &m {
        write_file(&v.p(k), d);
    }
    // Sparse: 4 KiB of data at 5 MiB, a hole before it.
    let mut sparse = vec![0u8; 5 * 1024 * 1024];
    let tail = data(seed + 3, 4096);
    {
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(v.p("sparse"))
            .unwrap();
        f.write_all_at(&tail, sparse.len() as u64).unwrap();
    }
    sparse.extend_from_slice(&tail);
    m.insert("sparse".to_string(), sparse);
    std::os::unix::fs::symlink("sub/deeper/f", v.p("link")).unwrap();
    m
}

fn check_contents(v: &Volume, m: &BTreeMap<String, Vec<u8>>) {
    for (k, d) in m {
        let got = fs::read(v.p(k)).unwrap_or_else(|e| panic!("{k}: {e}"));
        assert!(
            got == *d,
            "{k}: contents differ after rekey ({} vs {} bytes)",
            got.len(),
            d.len()
        );
    }
    assert_eq!(fs::read_link(v.p("link")).unwrap(), Path::new("sub/deeper/f"));
}

fn info(v: &Volume) -> String {
    let o = warpfs(args!["info", &v.cipher]);
    o.expect_ok("info");
    o.stdout.clone()
}

fn rekey_round_trip(mode: Mode) {
    let mut v = Volume::new(mode);
    let m = populate(&v, 1);
    v.unmount();
    let before: BTreeMap<PathBuf, Vec<u8>> = content_files(&v)
        .into_iter()
        .map(|p| {
            let b = fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    assert!(before.keys().all(|p| header_gen(p).unwrap_or(0) == 0));
    let o = rekey(&v);
    o.expect_ok("rekey");
    assert!(
        o.stdout.contains("to key generation 1") && o.stdout.contains("MB/s"),
        "{o}"
    );
    assert!(info(&v).contains("key generation: 1"));
    assert!(leftovers(&v).is_empty());
    let after = content_files(&v);
    assert_eq!(after, before.keys().cloned().collect::<Vec<_>>(), "same backing names");
    for p in &after {
        let old = &before[p];
        let new = fs::read(p).unwrap();
        assert_eq!(new.len(), old.len(), "{}: backing length", p.display());
        if old.is_empty() {
            continue;
        }
        assert_eq!(header_gen(p), Some(1), "{}", p.display());
        // Every 4 KiB of the new backing file differs from the old one:
        // nothing is left under the old key.
        for (i, (a, b)) in old.chunks(4096).zip(new.chunks(4096)).enumerate() {
            if a.iter().any(|&x| x != 0) {
                assert_ne!(a, b, "{}: chunk {i} unchanged", p.display());
            }
        }
    }
    // The hole stayed a hole.
    let sparse_backing = after.iter().max_by_key(|p| fs::metadata(p).unwrap().len()).unwrap();
    let md = fs::metadata(sparse_backing).unwrap();
    assert!(md.blocks() * 512 < md.len(), "sparse file was filled in");
    v.mount();
    check_contents(&v, &m);
    // New files get generation 1.
    write_file(&v.p("new"), b"hello");
    v.unmount();
    assert!(content_files(&v).iter().all(|p| header_gen(p).is_none_or(|g| g == 1)));
}

fn rekey_twice(mode: Mode) {
    let mut v = Volume::new(mode);
    let m = populate(&v, 2);
    v.unmount();
    rekey(&v).expect_ok("first rekey");
    rekey(&v).expect_ok("second rekey");
    assert!(info(&v).contains("key generation: 2"));
    assert!(content_files(&v).iter().all(|p| header_gen(p).is_none_or(|g| g == 2)));
    v.mount();
    check_contents(&v, &m);
    v.unmount();
    let cfg = fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
    assert!(
        cfg.contains("\"key_generation\": 2") && !cfg.contains("rekey_target"),
        "{cfg}"
    );
}

/// A volume of `n` small files (gcm), unmounted.
fn many_files(n: usize) -> (Volume, BTreeMap<String, Vec<u8>>) {
    let mut v = Volume::new(Mode::Gcm);
    let mut m = BTreeMap::new();
    for i in 0..n {
        let d = data(100 + i as u64, 5000 + 977 * i);
        write_file(&v.p(format!("f{i:02}")), &d);
        m.insert(format!("f{i:02}"), d);
    }
    v.unmount();
    (v, m)
}

fn check_all(v: &Volume, m: &BTreeMap<String, Vec<u8>>) {
    for (k, d) in m {
        assert!(fs::read(v.p(k)).unwrap() == *d, "{k} differs");
    }
}

#[test]
fn killed_rekey_loses_nothing_and_a_rerun_finishes() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    for hook in [
        ("WARPFS_REKEY_KILL_AFTER", "0"),
        ("WARPFS_REKEY_KILL_AFTER", "4"),
        ("WARPFS_REKEY_KILL_BEFORE_RENAME", "3"),
    ] {
        let (mut v, mut m) = many_files(10);
        let o = rekey_env(&v, &[hook]);
        assert_eq!(o.code, None, "{hook:?}: rekey should have been killed\n{o}");
        let cfg = fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
        assert!(cfg.contains("\"rekey_target\": 1"), "{hook:?}: {cfg}");
        assert!(info(&v).contains("unfinished"));
        let gens: Vec<Option<u32>> = content_files(&v).iter().map(|p| header_gen(p)).collect();
        let moved = gens.iter().filter(|g| **g == Some(1)).count();
        let want_moved = if hook.1 == "0" {
            0
        } else {
            hook.1.parse::<usize>().unwrap() - (hook.0.contains("RENAME") as usize)
        };
        assert_eq!(moved, want_moved, "{hook:?}: files moved before the kill: {gens:?}");
        if hook.0.contains("RENAME") {
            assert_eq!(leftovers(&v).len(), 1, "the killed copy is left behind");
        }
        // fsck checks files of both generations (and ignores the temp file).
        let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok("fsck mid-rekey");
        // Mid-rekey: the volume mounts, reads old and new files, and writes.
        v.mount();
        check_all(&v, &m);
        let listed: Vec<String> = fs::read_dir(&v.mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(
            listed,
            m.keys().cloned().collect::<Vec<_>>(),
            "a rekey temp file shows in the mount"
        );
        let d = data(999, 12345);
        write_file(&v.p("written-mid-rekey"), &d);
        m.insert("written-mid-rekey".into(), d);
        let d = data(998, 3000);
        write_file(&v.p("f00"), &d); // overwrite a file, whatever its generation
        m.insert("f00".into(), d);
        v.unmount();
        rekey(&v).expect_ok("rerun");
        warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_ok("fsck after rekey");
        assert!(leftovers(&v).is_empty());
        assert!(content_files(&v).iter().all(|p| header_gen(p) == Some(1)));
        assert!(info(&v).contains("key generation: 1"));
        v.mount();
        check_all(&v, &m);
        v.unmount();
    }
}

#[test]
fn rekey_refuses_wrong_password_mounted_volume_and_hard_links() {
    if let Some(why) = fuse_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("a"), b"data");
    let conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let o = rekey(&v);
    assert_eq!(o.code, Some(22), "mounted volume: {o}");
    assert!(o.stderr.contains("is mounted"), "{o}");
    fs::hard_link(v.p("a"), v.p("b")).unwrap();
    v.unmount();
    let bad = v.cipher.parent().unwrap().join("bad-pass");
    fs::write(&bad, "not the password\n").unwrap();
    let o = warpfs(args!["rekey", "--passfile", &bad, &v.cipher]);
    o.expect_code(10, "wrong password");
    let o = rekey(&v);
    o.expect_code(1, "hard links");
    assert!(o.stderr.contains("hard links"), "{o}");
    assert_eq!(
        fs::read(v.cipher.join("warpfs.conf")).unwrap(),
        conf,
        "config untouched"
    );
}

#[test]
fn a_running_rekey_locks_out_mounts_and_other_rekeys() {
    use std::os::fd::AsRawFd;
    if let Some(why) = fuse_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let (mut v, m) = many_files(2);
    // Hold the lock a running rekey holds (flock LOCK_EX on CIPHERDIR).
    let d = fs::File::open(&v.cipher).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(d.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
    let o = v.try_mount(&[]);
    assert!(!o.ok() && o.stderr.contains("rekey is running"), "{o}");
    assert!(!v.is_mounted());
    let o = rekey(&v);
    o.expect_code(1, "second rekey");
    assert!(o.stderr.contains("another warpfs rekey is running"), "{o}");
    drop(d);
    rekey(&v).expect_ok("rekey after the lock is gone");
    v.mount();
    check_all(&v, &m);
}
