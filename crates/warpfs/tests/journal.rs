//! Rekey undo journals planted in CIPHERDIR (FORMAT.md 10.3) through real
//! mounts: a journal that is not authenticated under the volume's key, or
//! that points outside CIPHERDIR (absolute path, `..`, a symlink anywhere on
//! the path, the journal itself a symlink), is refused with a clear message,
//! never applied, reported by `warpfs fsck`, and cannot make the mount
//! daemon write to a file outside CIPHERDIR, even one that starts with a
//! warpfs header of the volume.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

const JOURNAL: &str = "warpfs.rekey.undo-0";

fn fsck(v: &Volume, extra: &[&str]) -> Out {
    let mut a = args!["fsck", "--passfile", &v.passfile];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(v.cipher.clone().into());
    warpfs(a)
}

/// Regular backing files holding contents (reserved names excluded).
fn content_files(v: &Volume) -> Vec<PathBuf> {
    v.backing_paths()
        .into_iter()
        .filter(|p| {
            !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.")
                && fs::symlink_metadata(p).unwrap().is_file()
        })
        .collect()
}

/// A version 1 record (FORMAT.md 10.3 as earlier builds wrote it: no MAC,
/// SHA-256 of everything before), written here from the spec: what anyone
/// who can write to CIPHERDIR can make.
fn v1_record(file_id: &[u8], path: &[u8], ranges: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"WRPFUNDO".to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(file_id);
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(path.len() as u32).to_le_bytes());
    b.extend_from_slice(path);
    b.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
    for (off, d) in ranges {
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&(d.len() as u32).to_le_bytes());
        b.extend_from_slice(d);
    }
    let sum = sha256(&b);
    b.extend_from_slice(&sum);
    b
}

/// SHA-256 by sha256sum (an implementation other than the daemon's).
fn sha256(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut c = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b).unwrap();
    let o = c.wait_with_output().unwrap();
    let hex = String::from_utf8(o.stdout).unwrap();
    (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// A version 2 record with a made-up tag (the forger lacks the key), of
/// generation 1 (a rekey to it is not even under way).
fn v2_forged(file_id: &[u8], path: &[u8], ranges: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut b = b"WRPFUNDO".to_vec();
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&0u32.to_le_bytes()); // length, set below
    b.extend_from_slice(&1u32.to_le_bytes());
    let v1 = v1_record(file_id, path, ranges);
    b.extend_from_slice(&v1[12..v1.len() - 32]);
    let n = (b.len() + 32) as u32;
    b[12..16].copy_from_slice(&n.to_le_bytes());
    b.extend_from_slice(&[0x42; 32]);
    b
}

/// A planted journal stops the mount with `why` in its message, changes
/// nothing outside, is reported by fsck, and `fsck --discard-journals`
/// removes it without applying it; then the volume mounts and reads back.
fn refused(v: &mut Volume, outside: &Path, want_outside: &[u8], why: &str, data: &[u8]) {
    let o = v.try_mount(&[]);
    assert!(!o.ok(), "{why}: the mount should refuse\n{o}");
    assert_eq!(o.code, Some(13), "{o}");
    assert!(o.stderr.contains("not applied") && o.stderr.contains(why), "{why}: {o}");
    assert!(
        fs::read(outside).unwrap() == want_outside,
        "{why}: the file outside CIPHERDIR changed"
    );
    let o = fsck(v, &[]);
    o.expect_code(20, why);
    assert!(o.stdout.contains(JOURNAL) && o.stdout.contains(why), "{why}: {o}");
    let o = fsck(v, &["--repair"]);
    o.expect_code(20, "--repair alone does not apply or remove a refused journal");
    assert!(fs::symlink_metadata(v.cipher.join(JOURNAL)).is_ok());
    fsck(v, &["--discard-journals"]).expect_code(21, why);
    assert!(fs::symlink_metadata(v.cipher.join(JOURNAL)).is_err());
    assert!(fs::read(outside).unwrap() == want_outside, "{why}: changed by fsck");
    v.mount();
    assert!(
        fs::read(v.p("victim")).unwrap() == data,
        "{why}: the volume's file changed"
    );
    v.unmount();
}

#[test]
fn planted_journals_never_write_outside_cipherdir() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let data = Rng::new(7).bytes(200_000);
    write_file(&v.p("victim"), &data);
    v.unmount();
    let backing = content_files(&v).pop().unwrap();
    // Outside CIPHERDIR, a file that starts with the victim's header (same
    // file ID): what a journal aimed outside would find "its" file in.
    let outside = v.root().join("outside");
    fs::create_dir(&outside).unwrap();
    let target = outside.join("target");
    let before = fs::read(&backing).unwrap();
    fs::write(&target, &before).unwrap();
    let id = &before[8..24];
    let evil = vec![(0u64, vec![0xAA; 4096]), (40_000u64, vec![0xBB; 4096])];
    let abs = target.as_os_str().as_encoded_bytes().to_vec();
    let up = format!("../outside/{}", "target").into_bytes();
    let rel = backing
        .strip_prefix(&v.cipher)
        .unwrap()
        .as_os_str()
        .as_encoded_bytes()
        .to_vec();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (v1_record(id, &abs, &evil), "is absolute"),
        (v1_record(id, &up, &evil), "contains \"..\""),
        (v1_record(id, &rel, &evil), "no MAC"),
        (v2_forged(id, &abs, &evil), "MAC does not verify"),
        (v2_forged(id, &up, &evil), "MAC does not verify"),
    ];
    for (bytes, why) in cases {
        fs::write(v.cipher.join(JOURNAL), &bytes).unwrap();
        refused(&mut v, &target, &before, why, &data);
    }
    // The journal itself a symlink to the outside file.
    symlink(&target, v.cipher.join(JOURNAL)).unwrap();
    refused(&mut v, &target, &before, "symbolic link", &data);
    // Even a user who trusts old journals cannot apply one aimed out.
    for path in [&abs, &up] {
        fs::write(v.cipher.join(JOURNAL), v1_record(id, path, &evil)).unwrap();
        let o = fsck(&v, &["--apply-old-journals"]);
        o.expect_code(20, "an old journal aimed outside");
        assert!(o.stdout.contains("refused"), "{o}");
        assert!(fs::read(&target).unwrap() == before);
        fsck(&v, &["--discard-journals"]).expect_code(21, "discard");
    }
    // A torn journal (cut short): nothing to undo; removed, never applied.
    let mut torn = v2_forged(id, &abs, &evil);
    torn.truncate(torn.len() - 100);
    fs::write(v.cipher.join(JOURNAL), &torn).unwrap();
    let o = fsck(&v, &[]);
    o.expect_code(20, "torn");
    assert!(o.stdout.contains("torn"), "{o}");
    let o = v.try_mount(&[]);
    assert!(o.ok() && o.stderr.contains("torn"), "{o}");
    assert!(!v.cipher.join(JOURNAL).exists());
    assert!(fs::read(v.p("victim")).unwrap() == data);
    v.unmount();
    assert!(fs::read(&target).unwrap() == before);
    assert!(fs::read(&backing).unwrap() == before);
}

/// A genuine journal (a rekey killed mid-segment, authenticated under the
/// volume's key) whose file, or a directory on its path, was then swapped
/// for a symlink to a copy outside: refused, the copy unchanged; put back,
/// the same journal is applied and the file reads back.
#[test]
fn a_genuine_journal_is_not_followed_through_a_symlink() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    fs::create_dir(v.p("sub")).unwrap();
    let data = Rng::new(8).bytes(3 * 1024 * 1024 + 5);
    write_file(&v.p("sub/victim"), &data);
    v.unmount();
    let mut cmd = Command::new(BIN);
    cmd.args(["rekey", "--jobs", "1", "--passfile"])
        .arg(&v.passfile)
        .arg(&v.cipher)
        .env("WARPFS_REKEY_KILL", "data:2");
    let o = run_cmd(cmd, std::time::Duration::from_secs(300));
    assert_eq!(o.code, None, "the rekey should have been killed\n{o}");
    assert!(fs::metadata(v.cipher.join(JOURNAL)).unwrap().len() > 0);
    let backing = content_files(&v).pop().unwrap();
    let dir = backing.parent().unwrap().to_path_buf();
    let out = v.root().join("out");
    fs::create_dir(&out).unwrap();
    let bytes = fs::read(&backing).unwrap();

    // The file swapped for a symlink to a copy of itself outside.
    let copy = out.join("copy");
    fs::write(&copy, &bytes).unwrap();
    let kept = v.root().join("kept");
    fs::rename(&backing, &kept).unwrap();
    symlink(&copy, &backing).unwrap();
    let o = v.try_mount(&[]);
    assert_eq!(o.code, Some(13), "{o}");
    assert!(
        o.stderr.contains("symbolic link") && o.stderr.contains("not applied"),
        "{o}"
    );
    assert!(fs::read(&copy).unwrap() == bytes, "the copy outside changed");
    let o = fsck(&v, &[]);
    assert!(o.stdout.contains("symbolic link"), "{o}");
    fs::remove_file(&backing).unwrap();
    fs::rename(&kept, &backing).unwrap();

    // Its directory swapped for a symlink to a copy outside.
    let outdir = out.join("dir");
    fs::rename(&dir, &outdir).unwrap();
    symlink(&outdir, &dir).unwrap();
    let moved = outdir.join(backing.file_name().unwrap());
    let o = v.try_mount(&[]);
    assert_eq!(o.code, Some(13), "{o}");
    assert!(o.stderr.contains("symbolic link"), "{o}");
    assert!(fs::read(&moved).unwrap() == bytes, "the directory outside changed");
    fs::remove_file(&dir).unwrap();
    fs::rename(&outdir, &dir).unwrap();

    // Back in place, the journal is the rekey's own and is applied.
    let o = v.try_mount(&[]);
    assert!(o.ok() && o.stderr.contains("put back 1 segment"), "{o}");
    assert!(fs::read(v.p("sub/victim")).unwrap() == data);
    v.unmount();
    assert!(!v.cipher.join(JOURNAL).exists());
}

/// Kill `warpfs rekey --jobs 1` of `dir` at `at` (FORMAT.md 10.4's points).
fn rekey_killed(dir: &Path, passfile: &Path, at: &str) {
    let mut cmd = Command::new(BIN);
    cmd.args(["rekey", "--jobs", "1", "--passfile"])
        .arg(passfile)
        .arg(dir)
        .env("WARPFS_REKEY_KILL", at);
    let o = run_cmd(cmd, std::time::Duration::from_secs(300));
    assert_eq!(o.code, None, "the rekey should have been killed at {at}\n{o}");
}

/// Genuine records (tagged under the volume's key, of the generation under
/// way) that are not of this point of this rekey: the record of a segment
/// the rekey has since moved on from (replayed from earlier in the same
/// journal), and a record of another rekey (a copy of the volume rekeyed
/// on its own: same key, same generation, same file). Each stops the mount
/// and is reported, nothing applied; the rekey's own journal is applied
/// and the rekey finishes.
#[test]
fn replayed_and_foreign_rekey_records_are_refused() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    // The nnode's blocks and three segments.
    let data = Rng::new(9).bytes(3 * 1024 * 1024 + 5);
    write_file(&v.p("victim"), &data);
    v.unmount();
    let copy = v.root().join("copy");
    copy_tree(&v.cipher, &copy);
    rekey_killed(&copy, &v.passfile, "saved:1");
    let foreign = fs::read(copy.join(JOURNAL)).unwrap();
    // The record of segment 0; then a run that moves segments 0 and 1 and
    // stops while moving segment 2.
    rekey_killed(&v.cipher, &v.passfile, "saved:1");
    let first = fs::read(v.cipher.join(JOURNAL)).unwrap();
    rekey_killed(&v.cipher, &v.passfile, "data:3");
    let genuine = fs::read(v.cipher.join(JOURNAL)).unwrap();
    assert!(genuine != first);
    let backing = content_files(&v).pop().unwrap();
    let before = fs::read(&backing).unwrap();
    for (bytes, why) in [(&first, "out of sequence"), (&foreign, "another rekey")] {
        fs::write(v.cipher.join(JOURNAL), bytes).unwrap();
        let o = v.try_mount(&[]);
        assert_eq!(o.code, Some(13), "{why}: the mount should refuse\n{o}");
        assert!(o.stderr.contains("not applied") && o.stderr.contains(why), "{why}: {o}");
        assert!(fs::read(&backing).unwrap() == before, "{why}: the file changed");
        let o = fsck(&v, &["--repair"]);
        o.expect_code(20, why);
        assert!(o.stdout.contains(JOURNAL) && o.stdout.contains(why), "{why}: {o}");
        assert!(
            fs::read(&backing).unwrap() == before,
            "{why}: fsck --repair changed the file"
        );
    }
    fs::write(v.cipher.join(JOURNAL), &genuine).unwrap();
    let o = v.try_mount(&[]);
    assert!(o.ok() && o.stderr.contains("put back 1 segment"), "{o}");
    assert!(fs::read(v.p("victim")).unwrap() == data);
    v.unmount();
    let mut cmd = Command::new(BIN);
    cmd.args(["rekey", "--passfile"]).arg(&v.passfile).arg(&v.cipher);
    run_cmd(cmd, std::time::Duration::from_secs(300)).expect_ok("the rekey finishes");
    v.mount();
    assert!(fs::read(v.p("victim")).unwrap() == data);
    v.unmount();
}
