//! `warpfs upgrade` (FORMAT.md 12.6): file summaries turned on for a
//! volume made without them. Every frozen example volume of an
//! authenticated mode without summaries is upgraded (on a copy), shows its
//! `expected/` tree, and a block rolled back after that is found by a
//! mount and by fsck; an upgrade killed after any file, or between a
//! file's record and its header, finishes when run again; a mounted volume
//! is upgraded while it serves (a writer writing, a handle open), and one
//! whose mount is killed part way finishes unmounted; what it refuses and
//! how it exits.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn volumes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("volumes")
}

fn conf_of(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("warpfs.conf")).unwrap()).unwrap()
}

fn flags(c: &serde_json::Value) -> Vec<String> {
    c["feature_flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect()
}

/// The frozen volumes `warpfs upgrade` takes: an authenticated mode with
/// summaries, none yet, no rekey or upgrade under way.
fn upgradable() -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir(volumes_dir()).unwrap() {
        let p = e.unwrap().path();
        if !p.is_dir() {
            continue;
        }
        let c = conf_of(&p.join("cipher"));
        let mode = c["content_mode"].as_str().unwrap();
        let f = flags(&c);
        if ["gcm", "xchacha20-poly1305"].contains(&mode)
            && !f.iter().any(|x| x == "file-summary" || x == "summary-upgrade")
            && c.get("rekey_target").is_none()
        {
            out.push(p.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// A copy of frozen volume `name` (its cipher dir and password).
fn copy_of(name: &str) -> Volume {
    let src = volumes_dir().join(name);
    let v = Volume::blank(Mode::Gcm);
    copy_tree(&src.join("cipher"), &v.cipher);
    fs::copy(src.join("password.txt"), &v.passfile).unwrap();
    v
}

/// `warpfs upgrade` of `v`, with `kill` as `WARPFS_UPGRADE_KILL`.
fn upgrade(v: &Volume, kill: Option<&str>) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.args(["upgrade", "--passfile"]).arg(&v.passfile).arg(&v.cipher);
    if let Some(k) = kill {
        cmd.env("WARPFS_UPGRADE_KILL", k);
    }
    run_cmd(cmd, Duration::from_secs(300))
}

/// What is in the cipher dir (the dir's own times left out: the lock
/// file an offline command takes comes and goes).
fn files_state(v: &Volume) -> std::collections::BTreeMap<PathBuf, (u32, u64, u32, i128, i128)> {
    let mut s = dir_state(&v.cipher);
    s.remove(&v.cipher);
    s
}

fn fsck(v: &Volume) -> Out {
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher])
}

/// The one content file of `v` whose backing length is that of a
/// plaintext of `size` bytes.
fn backing_by_size(v: &Volume, size: u64) -> PathBuf {
    let want = Mode::Gcm.backing_len(size);
    let found: Vec<PathBuf> = v
        .backing_paths()
        .into_iter()
        .filter(|p| {
            let md = fs::symlink_metadata(p).unwrap();
            md.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.") && md.len() == want
        })
        .collect();
    assert_eq!(found.len(), 1, "one backing file of length {want}: {found:?}");
    found.into_iter().next().unwrap()
}

/// The replay attack of tests/attacks.rs on block `b` of the mounted
/// file `rel` (`size` bytes): its entry and data are saved, the block is
/// rewritten through the mount and synced, the volume unmounted, and the
/// old entry and data put back. Then a mount's read of the file fails
/// with EIO and its log names the file, and fsck reports it.
fn rolled_back_block_is_found(v: &mut Volume, rel: &str, size: u64, b: u64, ctx: &str) {
    let back = backing_by_size(v, size);
    let (eo, dof) = (Mode::Gcm.block_entry_offset(b), Mode::Gcm.block_data_offset(b));
    let f = fs::File::open(&back).unwrap();
    let (mut old_e, mut old_d) = ([0u8; 32], vec![0u8; BLOCK as usize]);
    f.read_exact_at(&mut old_e, eo).unwrap();
    f.read_exact_at(&mut old_d, dof).unwrap();
    drop(f);
    let w = open_rw(&v.p(rel));
    write_at(&w, b * BLOCK, &[0x5a; BLOCK as usize]).unwrap();
    w.sync_all().unwrap();
    drop(w);
    v.unmount();
    let f = fs::OpenOptions::new().write(true).open(&back).unwrap();
    f.write_all_at(&old_e, eo).unwrap();
    f.write_all_at(&old_d, dof).unwrap();
    drop(f);
    v.mount();
    let e = fs::read(v.p(rel)).expect_err(ctx);
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{ctx}: {e}");
    let log = v.log();
    assert!(
        log.lines()
            .any(|l| l.contains(rel) && l.contains("file summary does not verify")),
        "{ctx}: no log line names {rel}:\n{log}"
    );
    v.unmount();
    let o = fsck(v);
    o.expect_code(20, ctx);
    assert!(
        o.stdout
            .lines()
            .any(|l| l.starts_with("problem:") && l.contains(rel) && l.contains("summary")),
        "{ctx}\n{o}"
    );
}

#[test]
fn frozen_volumes_are_upgraded_and_then_a_rolled_back_block_is_found() {
    let names = upgradable();
    for want in ["v1-gcm", "v3-gcm", "v3-aes128-gcm"] {
        assert!(names.iter().any(|n| n == want), "{want} not among {names:?}");
    }
    require_fuse!();
    for name in names {
        let mut v = copy_of(&name);
        let before = conf_of(&v.cipher);
        let o = upgrade(&v, None);
        o.expect_ok(&name);
        assert!(o.stdout.contains("file summaries are on"), "{name}\n{o}");
        let after = conf_of(&v.cipher);
        let f = flags(&after);
        assert!(f.iter().any(|x| x == "file-summary"), "{name}: {f:?}");
        assert!(!f.iter().any(|x| x == "summary-upgrade"), "{name}: {f:?}");
        // Format 1 becomes 2 (the version follows the flags); 3 stays 3.
        let v0 = before["version"].as_u64().unwrap();
        assert_eq!(after["version"].as_u64().unwrap(), v0.max(2), "{name}");
        assert_eq!(after["creator"], before["creator"], "{name}");
        v.mount();
        let want = snapshot(&volumes_dir().join(&name).join("expected"));
        assert_snapshots_eq(&snapshot(&v.mnt), &want, &name);
        // Block 30 of the two-segment file: its entry holds no summary
        // bytes (FORMAT.md 12.2), so only the summary can tell.
        rolled_back_block_is_found(&mut v, "cross-page1.bin", 1_119_112, 30, &name);
    }
}

#[test]
fn an_xchacha20_poly1305_volume_is_upgraded_too() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::XChaCha20Poly1305, &["--file-summary", "off"]);
    v.mount();
    let mut rng = Rng::for_test("upgrade-xchacha");
    let big = rng.bytes(300 * BLOCK as usize + 11);
    let small = rng.bytes(5000);
    write_file(&v.p("big"), &big);
    write_file(&v.p("small"), &small);
    v.unmount();
    upgrade(&v, None).expect_ok("xchacha20-poly1305");
    assert!(flags(&conf_of(&v.cipher)).iter().any(|x| x == "file-summary"));
    v.mount();
    assert_bytes_eq(&fs::read(v.p("big")).unwrap(), &big, "big");
    assert_bytes_eq(&fs::read(v.p("small")).unwrap(), &small, "small");
    rolled_back_block_is_found(&mut v, "big", big.len() as u64, 100, "xchacha20-poly1305");
}

/// Killed after each file in turn (and between a file's record and its
/// header at several files, and right after the config is written), the
/// volume is refused until `warpfs upgrade` runs again, which finishes:
/// every file reads back and fsck is clean.
#[test]
fn an_upgrade_killed_at_any_file_finishes_when_run_again() {
    require_fuse!();
    let name = "v1-gcm";
    let want = snapshot(&volumes_dir().join(name).join("expected"));
    let mut points: Vec<String> = vec!["config:0".into()];
    points.extend((1..=40).map(|n| format!("file:{n}")));
    points.extend((1..=40).step_by(6).map(|n| format!("record:{n}")));
    let mut killed = 0;
    let mut past_the_end: Vec<&str> = Vec::new();
    for point in &points {
        let kind = point.split(':').next().unwrap();
        if past_the_end.contains(&kind) {
            continue;
        }
        let mut v = copy_of(name);
        let o = upgrade(&v, Some(point));
        if o.code.is_some() {
            // Past the last file: the run was not stopped.
            o.expect_ok(point);
            assert_ne!(kind, "config", "{o}");
            past_the_end.push(kind);
            continue;
        }
        killed += 1;
        let c = conf_of(&v.cipher);
        assert!(flags(&c).iter().any(|x| x == "summary-upgrade"), "{point}: {c}");
        assert_eq!(c["version"], 1, "{point}: the flag does not change the version");
        if point.starts_with("record:") {
            // One file has its record but still its old header.
            let half = v
                .backing_paths()
                .into_iter()
                .filter(|p| fs::symlink_metadata(p).unwrap().is_file())
                .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.conf"))
                .filter(|p| {
                    let b = fs::read(p).unwrap();
                    b.len() > 64 && b[..4] == *b"WRPF" && b[4] == 1 && b[32 + 12..32 + 16] != [0; 4]
                })
                .count();
            assert_eq!(half, 1, "{point}");
        }
        let o = v.try_mount(&[]);
        o.expect_code(18, point);
        assert!(o.stderr.contains("run `warpfs upgrade` again"), "{point}\n{o}");
        fsck(&v).expect_code(18, point);
        let o = upgrade(&v, None);
        o.expect_ok(point);
        assert!(o.stderr.contains("resuming"), "{point}\n{o}");
        let c = conf_of(&v.cipher);
        assert!(flags(&c).iter().any(|x| x == "file-summary"), "{point}: {c}");
        assert_eq!(c["version"], 2, "{point}");
        v.mount();
        assert_snapshots_eq(&snapshot(&v.mnt), &want, point);
        v.unmount();
        let o = fsck(&v);
        o.expect_ok(point);
        assert!(o.stdout.contains("fsck: clean"), "{point}\n{o}");
    }
    assert!(killed >= 20, "only {killed} kill points stopped the upgrade");
}

/// What `warpfs upgrade` refuses (exit 1, the config unchanged), the
/// wrong password (exit 10), and what a volume mid-upgrade refuses
/// (mount, fsck, rekey: exit 18).
#[test]
fn refusals_and_their_exit_codes() {
    for (name, why) in [
        ("v1-ctr", "no authentication to build on"),
        ("v1-xts", "no authentication to build on"),
        ("v1-xts-twofish", "no authentication to build on"),
        ("v2-ctr-xchacha20", "no authentication to build on"),
        ("v1-gcm-twofish", "has no file summaries"),
        ("v2-gcm", "already detects"),
        ("v2-xchacha20-poly1305", "already detects"),
        ("v1-midrekey-gcm", "a rekey is unfinished"),
    ] {
        let v = copy_of(name);
        let before = dir_state(&v.cipher);
        let o = upgrade(&v, None);
        o.expect_code(1, name);
        assert!(o.stderr.contains(why), "{name}\n{o}");
        assert_eq!(dir_state(&v.cipher), before, "{name}: changed");
    }
    // A wrong password changes nothing.
    let v = copy_of("v1-gcm");
    let before = files_state(&v);
    fs::write(&v.passfile, "not the password\n").unwrap();
    upgrade(&v, None).expect_code(10, "wrong password");
    assert_eq!(files_state(&v), before);
    // Mid-upgrade: only warpfs upgrade uses the volume.
    let v = copy_of("v3-midupgrade-gcm");
    let before = files_state(&v);
    for (what, o) in [
        ("fsck", fsck(&v)),
        ("rekey", warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher])),
        (
            "rekey --new-volume-key",
            warpfs(args![
                "rekey",
                "--new-volume-key",
                "--yes",
                "--passfile",
                &v.passfile,
                &v.cipher
            ]),
        ),
    ] {
        o.expect_code(18, what);
        assert!(o.stderr.contains("run `warpfs upgrade` again"), "{what}\n{o}");
    }
    assert_eq!(files_state(&v), before, "refused, yet changed");
    let o = warpfs(args!["info", &v.cipher]);
    o.expect_ok("info");
    assert!(o.stdout.contains("run warpfs upgrade again"), "{o}");
}

/// The header version of every content file of `v` (1: no summary).
fn header_versions(v: &Volume) -> Vec<u16> {
    v.backing_paths()
        .into_iter()
        .filter(|p| {
            let md = fs::symlink_metadata(p).unwrap();
            md.is_file() && md.len() > 0 && !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.")
        })
        .map(|p| {
            let h = fs::read(&p).unwrap();
            u16::from_le_bytes([h[4], h[5]])
        })
        .collect()
}

/// A mounted volume is upgraded while it serves: one writer keeps
/// writing a file (with fsyncs) and another handle stays open; every file
/// gets its summary, files made meanwhile and afterwards get one too,
/// every byte reads back as written, fsck is clean and a rolled-back block
/// is found afterwards.
#[test]
fn a_mounted_volume_is_upgraded_while_it_serves() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "off"]);
    v.mount();
    let mut want: Vec<(String, Vec<u8>)> = (0..30)
        .map(|i| (format!("f{i:02}"), Rng::new(i).bytes(3_000 + 70_000 * i as usize)))
        .collect();
    for (n, d) in &want {
        write_file(&v.p(n), d);
    }
    const BUSY: u64 = 3 << 20;
    write_file(&v.p("busy"), &vec![0u8; BUSY as usize]);
    write_file(&v.p("held"), b"held open");
    assert!(header_versions(&v).iter().all(|&h| h == 1), "made without summaries");
    let held = open_rw(&v.p("held"));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let busy = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let f = open_rw(&v.p("busy"));
            let mut model = vec![0u8; BUSY as usize];
            let mut rng = Rng::new(99);
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 200 {
                let b = rng.below(BUSY / BLOCK);
                let val = (n % 251) as u8 + 1;
                write_at(&f, b * BLOCK, &[val; BLOCK as usize]).unwrap();
                model[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize].fill(val);
                n += 1;
                if n.is_multiple_of(32) {
                    f.sync_all().unwrap();
                }
            }
            model
        });
        let o = upgrade(&v, None);
        o.expect_ok("upgrade while mounted");
        assert!(o.stdout.contains("while mounted"), "{o}");
        write_file(&v.p("after"), b"made after the upgrade");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap()
    });
    write_at(&held, 0, b"HELD").unwrap();
    drop(held);
    want.push(("busy".into(), busy));
    want.push(("held".into(), b"HELD open".to_vec()));
    want.push(("after".into(), b"made after the upgrade".to_vec()));
    for (n, d) in &want {
        assert_bytes_eq(&fs::read(v.p(n)).unwrap(), d, n);
    }
    let conf = fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
    assert!(
        conf.contains("\"file-summary\"") && !conf.contains("summary-upgrade"),
        "{conf}"
    );
    v.unmount();
    assert!(
        header_versions(&v).iter().all(|&h| h == 2),
        "every file has its summary"
    );
    let o = fsck(&v);
    o.expect_ok("fsck after the upgrade while mounted");
    assert!(o.stdout.contains("fsck: clean"), "{o}");
    v.mount();
    rolled_back_block_is_found(
        &mut v,
        "f10",
        3_000 + 70_000 * 10,
        100,
        "after an upgrade while mounted",
    );
}

/// The mount is killed part way through an upgrade (its third file): the
/// config still marks the upgrade under way, so the volume does not
/// mount; `warpfs upgrade` unmounted finishes it, and every file reads
/// back and checks.
#[test]
fn an_upgrade_of_a_mounted_volume_killed_part_way_finishes_unmounted() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "off"]);
    v.try_mount_env(&[], &[("WARPFS_UPGRADE_KILL", "file:3")])
        .expect_ok("mount");
    let want: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| (format!("f{i}"), Rng::new(i + 40).bytes(9_000 * (i as usize + 1))))
        .collect();
    for (n, d) in &want {
        write_file(&v.p(n), d);
    }
    let o = upgrade(&v, None);
    o.expect_code(1, "the mount was killed part way");
    assert!(o.stderr.contains("run warpfs upgrade again"), "{o}");
    v.unmount();
    let versions = header_versions(&v);
    assert!(
        versions.contains(&1) && versions.contains(&2),
        "part way: files of both versions {versions:?}"
    );
    let o = v.try_mount(&[]);
    o.expect_code(18, "mid-upgrade");
    upgrade(&v, None).expect_ok("finished unmounted");
    assert!(header_versions(&v).iter().all(|&h| h == 2));
    fsck(&v).expect_ok("fsck after");
    v.mount();
    for (n, d) in &want {
        assert_bytes_eq(&fs::read(v.p(n)).unwrap(), d, n);
    }
}

/// A cipher file whose header does not parse is left as it is and named;
/// every other file gets its summary and the upgrade finishes.
#[test]
fn a_file_whose_header_does_not_parse_is_left_and_named() {
    require_fuse!();
    let mut v = copy_of("v1-gcm");
    let bad = backing_by_size(&v, 70_000);
    let f = fs::OpenOptions::new().write(true).open(&bad).unwrap();
    f.write_all_at(b"XXXX", 0).unwrap();
    drop(f);
    let before = fs::read(&bad).unwrap();
    let o = upgrade(&v, None);
    o.expect_ok("a bad header");
    let name = bad.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        o.stderr
            .lines()
            .any(|l| l.contains(&name) && l.contains("left without a file summary")),
        "{o}"
    );
    assert_eq!(fs::read(&bad).unwrap(), before, "left as it was");
    assert!(flags(&conf_of(&v.cipher)).iter().any(|x| x == "file-summary"));
    v.mount();
    let e = fs::read(v.p("cross-64k.bin")).expect_err("a bad header reads as an error");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let want = fs::read(volumes_dir().join("v1-gcm/expected/cross-page1.bin")).unwrap();
    assert_bytes_eq(&fs::read(v.p("cross-page1.bin")).unwrap(), &want, "cross-page1.bin");
}
