//! `warpfs rekey`: files written through a real mount
//! are moved in place to a new content key generation; every header
//! records it, every data block is re-encrypted, inodes and hard links
//! stay, contents read back equal after a remount; a SIGKILL of the rekey
//! (offline) or of the mount daemon (online) at any point loses nothing,
//! the undo journal is applied at the next mount, the volume mounts
//! mid-rekey and a rerun finishes; on a mounted volume the daemon moves
//! every file while reads and writes go on; a wrong password is refused.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mode_tests!(rekey_round_trip, rekey_twice, online_rekey_while_reading_and_writing,);

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

/// Key generation in a cipher file's header (bytes 24..28) of a file no
/// rekey is moving (watermark, bytes 28..32, zero); `None` if empty.
fn header_gen(p: &Path) -> Option<u32> {
    let (g, w) = header_gen_mark(p)?;
    assert_eq!(w, 0, "{}: rekey watermark left set", p.display());
    Some(g)
}

/// Key generation and rekey watermark of a cipher file; `None` if empty.
fn header_gen_mark(p: &Path) -> Option<(u32, u32)> {
    let b = fs::read(p).unwrap();
    if b.is_empty() {
        return None;
    }
    assert_eq!(&b[..4], b"WRPF");
    Some((
        u32::from_le_bytes(b[24..28].try_into().unwrap()),
        u32::from_le_bytes(b[28..32].try_into().unwrap()),
    ))
}

fn rekey_with(v: &Volume, extra: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.arg("rekey")
        .arg("--passfile")
        .arg(&v.passfile)
        .args(extra)
        .arg(&v.cipher);
    for (k, val) in env {
        cmd.env(k, val);
    }
    run_cmd(cmd, std::time::Duration::from_secs(300))
}

fn rekey_env(v: &Volume, env: &[(&str, &str)]) -> Out {
    rekey_with(v, &[], env)
}

fn rekey(v: &Volume) -> Out {
    rekey_env(v, &[])
}

fn fsck(v: &Volume, extra: &[&str]) -> Out {
    let mut a = args!["fsck", "--passfile", &v.passfile];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(v.cipher.clone().into());
    warpfs(a)
}

fn config_text(v: &Volume) -> String {
    fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap()
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
    let inodes: Vec<u64> = before.keys().map(|p| fs::metadata(p).unwrap().ino()).collect();
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
    let inodes_after: Vec<u64> = after.iter().map(|p| fs::metadata(p).unwrap().ino()).collect();
    assert_eq!(inodes_after, inodes, "in place: the same inodes");
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
    // Several segments (nnode + 6 pages), so kills fall inside a file too.
    let d = data(99, 1_500_000);
    write_file(&v.p("big"), &d);
    m.insert("big".into(), d);
    v.unmount();
    (v, m)
}

fn check_all(v: &Volume, m: &BTreeMap<String, Vec<u8>>) {
    for (k, d) in m {
        assert!(fs::read(v.p(k)).unwrap() == *d, "{k} differs");
    }
}

/// After a killed rekey: the config names the target, `info` says so; a
/// kill inside a segment leaves an undo journal that fsck reports (the
/// segment's blocks do not authenticate until it is applied) and a mount
/// applies.
fn after_kill(v: &mut Volume, m: &mut BTreeMap<String, Vec<u8>>, what: &str, mid_segment: bool) {
    assert!(
        config_text(v).contains("\"rekey_target\": 1"),
        "{what}: {}",
        config_text(v)
    );
    assert!(info(v).contains("unfinished"));
    let journals: Vec<PathBuf> = leftovers(v)
        .into_iter()
        .filter(|p| fs::metadata(p).unwrap().len() > 0)
        .collect();
    assert_eq!(
        journals.len(),
        mid_segment as usize,
        "{what}: undo journals {journals:?}"
    );
    let o = fsck(v, &[]);
    if mid_segment {
        o.expect_code(20, what);
        assert!(o.stdout.contains("undo journal"), "{what}: {o}");
    } else {
        o.expect_ok(what);
    }
    // Mid-rekey: the volume mounts (applying the journal), reads old,
    // new and half-moved files, and writes.
    v.mount();
    assert!(leftovers(v).iter().all(|p| fs::metadata(p).unwrap().len() == 0));
    check_all(v, m);
    let listed: Vec<String> = fs::read_dir(&v.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        listed,
        m.keys().cloned().collect::<Vec<_>>(),
        "{what}: a rekey file shows in the mount"
    );
    let d = data(999, 12345);
    write_file(&v.p("written-mid-rekey"), &d);
    m.insert("written-mid-rekey".into(), d);
    let d = data(998, 300_000);
    write_file(&v.p("big"), &d); // overwrite a file, whatever its state
    m.insert("big".into(), d);
    v.unmount();
    fsck(v, &[]).expect_ok(&format!("{what}: fsck mid-rekey"));
}

#[test]
fn killed_rekey_loses_nothing_and_a_rerun_finishes() {
    if warpfs_testkit::skip_if(fuse_unavailable()) {
        return;
    }
    for (kill, mid_segment) in [
        ("config:0", false),
        ("file:4", false),
        ("segment:5", false),
        ("saved:3", true),
        ("data:6", true),
    ] {
        let (mut v, mut m) = many_files(10);
        let o = rekey_with(&v, &["--jobs", "1"], &[("WARPFS_REKEY_KILL", kill)]);
        assert_eq!(o.code, None, "{kill}: rekey should have been killed\n{o}");
        let marks: Vec<Option<(u32, u32)>> = content_files(&v).iter().map(|p| header_gen_mark(p)).collect();
        if kill != "config:0" {
            assert!(
                marks.iter().any(|g| matches!(g, Some((1, _)) | Some((0, 1..)))),
                "{kill}: nothing moved before the kill: {marks:?}"
            );
        }
        after_kill(&mut v, &mut m, kill, mid_segment);
        rekey(&v).expect_ok("rerun");
        fsck(&v, &[]).expect_ok("fsck after rekey");
        assert!(leftovers(&v).is_empty());
        assert!(content_files(&v).iter().all(|p| header_gen(p) == Some(1)));
        assert!(info(&v).contains("key generation: 1"));
        v.mount();
        check_all(&v, &m);
        v.unmount();
    }
}

#[test]
fn rekey_refuses_a_wrong_password_and_keeps_hard_links() {
    if warpfs_testkit::skip_if(fuse_unavailable()) {
        return;
    }
    let mut v = Volume::new(Mode::Gcm);
    let d = data(5, 20_000);
    write_file(&v.p("a"), &d);
    fs::hard_link(v.p("a"), v.p("b")).unwrap();
    v.unmount();
    let conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let bad = v.cipher.parent().unwrap().join("bad-pass");
    fs::write(&bad, "not the password\n").unwrap();
    let o = warpfs(args!["rekey", "--passfile", &bad, &v.cipher]);
    o.expect_code(10, "wrong password");
    assert_eq!(
        fs::read(v.cipher.join("warpfs.conf")).unwrap(),
        conf,
        "config untouched"
    );
    rekey(&v).expect_ok("rekey with hard links");
    let files = content_files(&v);
    assert_eq!(files.len(), 2);
    assert_eq!(
        fs::metadata(&files[0]).unwrap().ino(),
        fs::metadata(&files[1]).unwrap().ino()
    );
    assert_eq!(
        fs::metadata(&files[0]).unwrap().nlink(),
        2,
        "still one inode with two names"
    );
    assert_eq!(header_gen(&files[0]), Some(1));
    v.mount();
    assert!(fs::read(v.p("a")).unwrap() == d && fs::read(v.p("b")).unwrap() == d);
    write_file(&v.p("b"), b"changed");
    assert_eq!(fs::read(v.p("a")).unwrap(), b"changed");
}
#[test]
fn a_running_rekey_locks_out_mounts_and_other_rekeys() {
    use std::os::fd::AsRawFd;
    if warpfs_testkit::skip_if(fuse_unavailable()) {
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

/// The rekey of a mounted volume: the daemon moves every file (slowed down
/// with --max-rate so it overlaps) while a thread writes and reads a file
/// being moved and reads the others; nothing read differs from what was
/// written, and every file ends at the new generation.
fn online_rekey_while_reading_and_writing(mode: Mode) {
    let mut v = Volume::new(mode);
    let m = populate(&v, 3);
    let live0 = data(77, 2 * 1024 * 1024);
    write_file(&v.p("live"), &live0);
    let stop = Arc::new(AtomicBool::new(false));
    let (mnt, stop2) = (v.mnt.clone(), stop.clone());
    let big = m["big"].clone();
    let worker = std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        let mut model = live0;
        let mut rng = Rng::new(4242);
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(mnt.join("live"))
            .unwrap();
        let mut ops = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            let len = rng.range(1, 40_000) as usize;
            let off = rng.below(model.len() as u64 + 10_000) as usize;
            let d = rng.bytes(len);
            f.write_all_at(&d, off as u64).unwrap();
            if off + len > model.len() {
                model.resize(off + len, 0);
            }
            model[off..off + len].copy_from_slice(&d);
            let mut back = vec![0u8; len + 100];
            let n = f.read_at(&mut back, off as u64).unwrap();
            assert!(back[..len] == d[..], "live: write at {off} read back differently");
            assert_eq!(n, (model.len() - off).min(len + 100));
            if ops.is_multiple_of(20) {
                assert!(
                    fs::read(mnt.join("big")).unwrap() == big,
                    "big differs during the rekey"
                );
            }
            ops += 1;
        }
        f.sync_all().unwrap();
        (model, ops)
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    let o = rekey_with(&v, &["--max-rate", "3", "--jobs", "2"], &[]);
    stop.store(true, Ordering::Relaxed);
    let (live, ops) = worker.join().expect("the reader/writer thread failed");
    o.expect_ok("online rekey");
    assert!(
        o.stdout.contains("to key generation 1") && o.stdout.contains("online"),
        "{o}"
    );
    assert!(o.stderr.contains("is mounted at"), "{o}");
    assert!(ops > 10, "only {ops} operations overlapped the rekey");
    eprintln!(
        "{mode:?}: {ops} reads/writes during the online rekey; {}",
        o.stdout.trim()
    );
    // While still mounted: every backing file is at generation 1, the
    // config is final, no journal is left.
    assert!(content_files(&v).iter().all(|p| header_gen(p).is_none_or(|g| g == 1)));
    let cfg = config_text(&v);
    assert!(
        cfg.contains("\"key_generation\": 1") && !cfg.contains("rekey_target"),
        "{cfg}"
    );
    assert!(leftovers(&v).is_empty(), "{:?}", leftovers(&v));
    check_contents(&v, &m);
    assert!(fs::read(v.p("live")).unwrap() == live);
    // New files get generation 1 right away; after a remount all reads back.
    write_file(&v.p("after"), b"after the rekey");
    v.remount();
    check_contents(&v, &m);
    assert!(fs::read(v.p("live")).unwrap() == live);
    assert_eq!(fs::read(v.p("after")).unwrap(), b"after the rekey");
    v.unmount();
    fsck(&v, &[]).expect_ok("fsck after the online rekey");
    assert!(info(&v).contains("key generation: 1"));
}

/// The mount daemon is killed (SIGKILL) at several points of an online
/// rekey: `warpfs rekey` reports it, the dead mount is detached, fsck
/// reports an unapplied undo journal where a segment was half moved (and
/// `fsck --repair` applies it), a remount reads everything, and `warpfs
/// rekey` on the new mount finishes.
#[test]
fn online_rekey_with_the_daemon_killed_loses_nothing() {
    if warpfs_testkit::skip_if(fuse_unavailable()) {
        return;
    }
    for (kill, mid_segment) in [("data:4", true), ("segment:3", false), ("saved:2", true)] {
        let mut v = Volume::init(Mode::Gcm);
        let o = v.try_mount_env(&[], &[("WARPFS_REKEY_KILL", kill)]);
        assert!(o.ok(), "{o}");
        let mut m = BTreeMap::new();
        for i in 0..4 {
            let d = data(500 + i, 700_000 + 1000 * i as usize);
            write_file(&v.p(format!("g{i}")), &d);
            m.insert(format!("g{i}"), d);
        }
        let o = rekey_with(&v, &["--jobs", "1"], &[]);
        assert_eq!(o.code, Some(1), "{kill}: the rekey should fail with its mount\n{o}");
        v.unmount();
        assert!(config_text(&v).contains("\"rekey_target\": 1"));
        let journals: Vec<PathBuf> = leftovers(&v)
            .into_iter()
            .filter(|p| fs::metadata(p).unwrap().len() > 0)
            .collect();
        assert_eq!(journals.len(), mid_segment as usize, "{kill}: {journals:?}");
        if mid_segment {
            let o = fsck(&v, &[]);
            o.expect_code(20, kill);
            assert!(o.stdout.contains("undo journal"), "{o}");
            fsck(&v, &["--repair"]).expect_code(21, "fsck --repair applies the journal");
        }
        fsck(&v, &[]).expect_ok(&format!("{kill}: fsck mid-rekey"));
        v.mount();
        check_all(&v, &m);
        let o = rekey(&v);
        o.expect_ok("online rerun");
        assert!(o.stderr.contains("resuming"), "{o}");
        check_all(&v, &m);
        assert!(content_files(&v).iter().all(|p| header_gen(p) == Some(1)));
        v.unmount();
        fsck(&v, &[]).expect_ok("fsck after");
    }
}

/// A read-only mount refuses an online rekey with the reason.
#[test]
fn online_rekey_of_a_read_only_mount_is_refused() {
    if warpfs_testkit::skip_if(fuse_unavailable()) {
        return;
    }
    let mut v = Volume::new(Mode::Ctr);
    write_file(&v.p("a"), b"x");
    v.unmount();
    v.mount_with(&["-o", "ro"]);
    let conf = config_text(&v);
    let o = rekey(&v);
    o.expect_code(1, "read-only mount");
    assert!(o.stderr.contains("read-only"), "{o}");
    assert_eq!(config_text(&v), conf, "config untouched");
}

/// Files renamed through the mount after an online rekey has listed the
/// volume are still moved: the rekey walks again until every file is at
/// the new generation, so none is left under a key the finished rekey
/// drops (they would read as EIO after a remount).
#[test]
fn online_rekey_moves_files_renamed_after_its_walk_began() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let names: Vec<String> = (0..5).map(|i| format!("f{i}")).collect();
    let mut m = BTreeMap::new();
    for (i, n) in names.iter().enumerate() {
        let d = data(900 + i as u64, 2 * 1024 * 1024);
        write_file(&v.p(n), &d);
        m.insert(n.clone(), d);
    }
    let child = Command::new(BIN)
        .args(["rekey", "--jobs", "1", "--max-rate", "1", "--passfile"])
        .arg(&v.passfile)
        .arg(&v.cipher)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The walk has listed the files once the first segment of any file
    // carries the new generation or a watermark.
    let started = wait_for(std::time::Duration::from_secs(60), || {
        content_files(&v)
            .iter()
            .any(|p| header_gen_mark(p).is_some_and(|(g, w)| g == 1 || w > 0))
    });
    assert!(started, "the online rekey never started moving a file");
    let mut renamed = BTreeMap::new();
    for (n, d) in &m {
        let to = format!("{n}-renamed");
        fs::rename(v.p(n), v.p(&to)).unwrap();
        renamed.insert(to, d.clone());
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "rekey failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        content_files(&v).iter().all(|p| header_gen(p).is_none_or(|g| g == 1)),
        "a renamed file was left at the old generation"
    );
    v.remount();
    for (n, d) in &renamed {
        assert!(fs::read(v.p(n)).unwrap() == *d, "{n} differs after the rekey");
    }
    v.unmount();
    fsck(&v, &[]).expect_ok("fsck after the rekey");
}
