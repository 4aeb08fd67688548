//! Cipher dirs kept in step by Syncthing (two real instances on 127.0.0.1,
//! started and stopped here; tests/synced/syncthing.rs), each host with
//! its own warpfs mount of its own copy.
//!
//! - `syncthing_offline_edits_on_both_sides_lose_nothing`: the devices are paused,
//!   both hosts make conflicting changes, the devices are resumed (FORMAT.md
//!   13): the same file edited on both sides; the same directory made on
//!   both sides with different files inside (two `warpfs.diriv`); a
//!   long-name file edited on both sides; a file on one side and a
//!   directory of that name on the other; delete on one side, modify on the
//!   other; `warpfs passwd` on both sides (two `warpfs.conf`). Afterwards
//!   every plaintext written on either side is readable through a mount on
//!   either host; conflict copies carry Syncthing's marker and can be
//!   renamed and deleted; one password opens `warpfs.conf` on both hosts,
//!   the other is refused there (exit 11, naming the config and its copy)
//!   and opens the copy when it is named (`--config COPY`); `warpfs info`
//!   and `fsck` report the config copy; `warpfs passwd --from-copy`
//!   resolves the conflict on one host and the sync takes it to the other;
//!   the two-IV directory's entries of the other IV show only under its
//!   marker, `fsck --repair` does not merge them (regular files prove
//!   nothing about their directory) until they are renamed, then merges,
//!   and both hosts still read every entry after the next sync.
//! - `syncthing_partial_sync_reads_right_bytes_or_a_clean_error`: host B reads
//!   everything it sees while host A writes and Syncthing copies (B pulls
//!   largest first, so files come before their directory's IV and their
//!   long-name sidecars); then, deterministically, B's Syncthing ignores
//!   every `warpfs.diriv` and sidecar while A writes more: each read on B
//!   gives the right bytes or ENOENT/EIO, never other bytes, and once the
//!   ignore is lifted every file reads right.

#[macro_use]
mod common;
mod synced;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use synced::syncthing::Pair;

/// Skip (counted; a failure under WARPFS_NO_SKIP=1) without FUSE or Syncthing.
macro_rules! require_syncthing {
    () => {
        require_fuse!();
        if warpfs_testkit::skip_if(synced::missing("syncthing", "syncthing")) {
            return;
        }
    };
}

const ST_MARK: &str = ".sync-conflict-";

/// Every regular file under `root` (relative path → bytes or errno);
/// directories that cannot be listed are recorded with their errno.
fn read_tree(root: &Path) -> BTreeMap<String, Result<Vec<u8>, i32>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let rd = match fs::read_dir(root.join(&rel)) {
            Ok(rd) => rd,
            Err(e) => {
                out.insert(format!("{}/", rel.display()), Err(errno(&e)));
                continue;
            }
        };
        for e in rd {
            let Ok(e) = e else { continue };
            let r = rel.join(e.file_name());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(r),
                Ok(t) if t.is_file() => {
                    out.insert(r.display().to_string(), fs::read(root.join(&r)).map_err(|e| errno(&e)));
                }
                _ => {}
            }
        }
    }
    out
}

fn contents(tree: &BTreeMap<String, Result<Vec<u8>, i32>>) -> BTreeSet<Vec<u8>> {
    tree.values().filter_map(|r| r.as_ref().ok().cloned()).collect()
}

/// Host B: a blank cipher dir Syncthing fills from A, mounted once it is there.
fn host_b() -> Volume {
    let mut b = Volume::blank(Mode::Gcm);
    b.mount_args.push("--shared-storage".into());
    b
}

fn passwd(v: &Volume, old: &Path, new: &Path) {
    warpfs(args!["passwd", "--passfile", old, "--new-passfile", new, &v.cipher]).expect_ok("warpfs passwd");
}

/// Syncthing's copies of `warpfs.conf` in `cipher`.
fn config_copies(cipher: &Path) -> Vec<PathBuf> {
    fs::read_dir(cipher)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("warpfs") && n.contains(ST_MARK) && n.ends_with(".conf")
        })
        .collect()
}

/// The one copy of `warpfs.conf` in `cipher`.
fn config_copy(cipher: &Path) -> PathBuf {
    let copies = config_copies(cipher);
    assert_eq!(copies.len(), 1, "config copies in {}: {copies:?}", cipher.display());
    copies[0].clone()
}

#[test]
fn syncthing_offline_edits_on_both_sides_lose_nothing() {
    require_syncthing!();
    let mut a = Volume::init(Mode::Gcm);
    a.mount_args.push("--shared-storage".into());
    let mut b = host_b();
    let pair = Pair::start(a.root(), &a.cipher, &b.cipher, "random").unwrap();
    pair.wait_synced().unwrap();
    a.mount();
    b.mount();
    let long = "L".repeat(200);
    // Shared starting point, made on A.
    write_file(&a.p("same.txt"), b"base same");
    write_file(&a.p(&long), b"base long");
    write_file(&a.p("delmod.txt"), b"base delmod");
    pair.wait_synced().unwrap();
    assert_eq!(fs::read(b.p("same.txt")).unwrap(), b"base same");

    pair.pause().unwrap();
    // Each side's changes: (case, plaintexts written).
    let mut wrote: Vec<(&str, Vec<&[u8]>)> = Vec::new();
    write_file(&a.p("same.txt"), b"same: edited on A");
    write_file(&b.p("same.txt"), b"same: edited on B");
    wrote.push((
        "same file edited on both sides",
        vec![b"same: edited on A", b"same: edited on B"],
    ));
    for (v, side) in [(&a, "A"), (&b, "B")] {
        fs::create_dir(v.p("D")).unwrap();
        write_file(&v.p("D/both.txt"), format!("D/both.txt made on {side}").as_bytes());
        write_file(
            &v.p(format!("D/only-{side}.txt")),
            format!("D/only-{side} made on {side}").as_bytes(),
        );
    }
    wrote.push((
        "same directory made on both sides",
        vec![
            b"D/both.txt made on A",
            b"D/both.txt made on B",
            b"D/only-A made on A",
            b"D/only-B made on B",
        ],
    ));
    write_file(&a.p(&long), b"long: edited on A");
    write_file(&b.p(&long), b"long: edited on B");
    wrote.push((
        "long name edited on both sides",
        vec![b"long: edited on A", b"long: edited on B"],
    ));
    write_file(&a.p("clash"), b"clash: a file on A");
    fs::create_dir(b.p("clash")).unwrap();
    write_file(&b.p("clash/inner"), b"clash/inner: in a directory on B");
    wrote.push((
        "file on A, directory of that name on B",
        vec![b"clash: a file on A", b"clash/inner: in a directory on B"],
    ));
    fs::remove_file(a.p("delmod.txt")).unwrap();
    write_file(&b.p("delmod.txt"), b"delmod: modified on B");
    wrote.push(("deleted on A, modified on B", vec![b"delmod: modified on B"]));
    let (pw_a, pw_b) = (a.root().join("pw-a"), a.root().join("pw-b"));
    fs::write(&pw_a, "password of host A\n").unwrap();
    fs::write(&pw_b, "password of host B\n").unwrap();
    passwd(&a, &a.passfile, &pw_a);
    passwd(&b, &b.passfile, &pw_b);
    pair.resume().unwrap();
    pair.wait_synced().unwrap();

    // Every plaintext, on both hosts, through a fresh mount with either
    // host's new password: the one warpfs.conf has opens it; the other is
    // refused (warpfs.conf and its copy named) and opens the copy only when
    // the copy is named.
    a.unmount();
    b.unmount();
    let mut main_pw = None;
    for (v, host) in [(&mut a, "A"), (&mut b, "B")] {
        let copy = config_copy(&v.cipher);
        let mut opened = Vec::new();
        for pw in [&pw_a, &pw_b] {
            v.passfile = pw.clone();
            let o = v.try_mount(&[]);
            if o.ok() {
                opened.push(pw.clone());
            } else {
                o.expect_code(11, "the copy's password on warpfs.conf");
                assert!(
                    o.stderr.contains(&*copy.to_string_lossy())
                        && o.stderr.contains(&*v.cipher.join("warpfs.conf").to_string_lossy())
                        && o.stderr.contains("warpfs passwd --from-copy"),
                    "{o}"
                );
                v.mount_with(&["--config", copy.to_str().unwrap()]);
            }
            let tree = read_tree(&v.mnt);
            let have = contents(&tree);
            for (case, texts) in &wrote {
                let readable = texts.iter().filter(|t| have.contains(**t)).count();
                eprintln!(
                    "host {host} ({}): {case}: {} written, {readable} readable",
                    pw.file_name().unwrap().to_string_lossy(),
                    texts.len()
                );
                assert_eq!(readable, texts.len(), "host {host}: {case}: lost data; tree: {tree:#?}");
            }
            assert!(
                tree.values().all(|r| r.is_ok()),
                "host {host}: unreadable entries: {tree:#?}"
            );
            let names: Vec<&String> = tree.keys().collect();
            eprintln!("host {host} lists: {names:?}");
            // Conflict copies carry Syncthing's marker after the plaintext name.
            assert!(
                names.iter().any(|n| n.starts_with(&format!("same.txt{ST_MARK}"))),
                "{names:?}"
            );
            assert!(
                names.iter().any(|n| n.starts_with(&format!("{long}{ST_MARK}"))),
                "{names:?}"
            );
            assert!(
                names.iter().any(|n| n.starts_with(&format!("D/both.txt{ST_MARK}"))),
                "{names:?}"
            );
            v.unmount();
        }
        assert_eq!(opened.len(), 1, "host {host}: warpfs.conf opened with {opened:?}");
        assert!(
            main_pw.as_ref().is_none_or(|p| *p == opened[0]),
            "the hosts' warpfs.conf differ"
        );
        main_pw = Some(opened[0].clone());
        let info = warpfs(args!["info", &v.cipher]);
        info.expect_ok("warpfs info");
        assert!(info.stdout.contains("conflicting config copy"), "{info}");
        let o = warpfs(args!["fsck", "--passfile", &opened[0], &v.cipher]);
        o.expect_code(20, "fsck after conflicts");
        assert!(o.stdout.contains("conflicting copy of the config"), "{o}");
        // D's other IV decrypts regular files, which carry no proof of
        // their directory: reported, not merged by --repair.
        assert!(
            o.stdout.contains("copy of the directory IV") && o.stdout.contains("not merged"),
            "{o}"
        );
        assert!(o.stdout.contains("conflict copy"), "{o}");
    }
    // Resolved on A: the copy's password, kept, becomes warpfs.conf's; the
    // next sync takes the config to B and removes B's copy.
    let main_pw = main_pw.unwrap();
    let copy_pw = if main_pw == pw_a { pw_b.clone() } else { pw_a.clone() };
    let copy = config_copy(&a.cipher);
    warpfs(args![
        "passwd",
        "--passfile",
        &copy_pw,
        "--new-passfile",
        &copy_pw,
        "--from-copy",
        &copy,
        &a.cipher
    ])
    .expect_ok("passwd --from-copy");
    assert!(!copy.exists());
    a.passfile = main_pw.clone();
    a.try_mount(&[])
        .expect_code(10, "warpfs.conf's old password after the resolution");

    // A conflict copy is renamed and deleted like any file; fsck --repair
    // merges the two-IV directory on A; after the next sync both hosts
    // still read everything.
    a.passfile = copy_pw.clone();
    b.passfile = copy_pw.clone();
    a.mount();
    let copy = fs::read_dir(&a.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&format!("same.txt{ST_MARK}")))
        .unwrap();
    let copied = fs::read(a.p(&copy)).unwrap();
    fs::rename(a.p(&copy), a.p("same-other.txt")).unwrap();
    assert_eq!(fs::read(a.p("same-other.txt")).unwrap(), copied);
    let long_copy = fs::read_dir(&a.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&format!("{long}{ST_MARK}")))
        .unwrap();
    let long_copied = fs::read(a.p(&long_copy)).unwrap();
    fs::remove_file(a.p(&long_copy)).unwrap();
    assert!(!a.p(&long_copy).exists());
    // D's entries of the other IV show only under its marker; renamed,
    // they take names under D's own IV, and the IV copy decrypts nothing.
    let marked: Vec<String> = fs::read_dir(a.p("D"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(ST_MARK))
        .collect();
    assert!(!marked.is_empty());
    for n in marked {
        let plain = &n[..n.find(ST_MARK).unwrap()];
        // Only this side's both.txt is found by a plain name.
        let taken = a.p(format!("D/{plain}")).exists();
        assert_eq!(taken, plain == "both.txt", "D/{plain}");
        let to = if taken {
            format!("{plain}-other")
        } else {
            plain.to_string()
        };
        fs::rename(a.p(format!("D/{n}")), a.p(format!("D/{to}"))).unwrap();
    }
    let before = contents(&read_tree(&a.mnt));
    a.unmount();
    let o = warpfs(args!["fsck", "--repair", "--passfile", &copy_pw, &a.cipher]);
    assert!(o.stdout.contains("[repaired: merged into one IV"), "{o}");
    assert!(!o.stdout.contains("conflicting copy of the config"), "{o}");
    pair.wait_synced().unwrap();
    assert_eq!(
        fs::read(b.cipher.join("warpfs.conf")).unwrap(),
        fs::read(a.cipher.join("warpfs.conf")).unwrap(),
        "B has the config A resolved"
    );
    assert_eq!(config_copies(&b.cipher), Vec::<PathBuf>::new(), "B keeps a config copy");
    for v in [&mut a, &mut b] {
        v.mount();
        let after = contents(&read_tree(&v.mnt));
        assert_eq!(after, before, "after the merge and a sync");
        assert!(!after.contains(&long_copied) || long_copied == fs::read(v.p(&long)).unwrap());
        v.unmount();
    }
}

/// Deterministic content of a test file from its name.
fn content_of(name: &str, len: usize) -> Vec<u8> {
    // The same bytes every time for a name (FNV-1a of it as the seed).
    let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ c as u64).wrapping_mul(0x100_0000_01b3)
    });
    Rng::new(seed).bytes(len)
}

/// Check every file B shows: right bytes, or a clean ENOENT/EIO. Returns
/// (right, clean errors, marked names pending).
fn check_reads(b: &Volume, want: &BTreeMap<String, Vec<u8>>) -> (usize, usize, usize) {
    let (mut right, mut errors, mut pending) = (0, 0, 0);
    for (path, r) in read_tree(&b.mnt) {
        if path.contains(".warpfs-undecryptable") {
            pending += 1;
            continue;
        }
        match r {
            Ok(got) => {
                let w = want
                    .get(&path)
                    .unwrap_or_else(|| panic!("B shows {path}, never written"));
                // A file may be shown before Syncthing finished it only
                // through its temporary name (hidden), so a shown file is
                // complete: its bytes must be exactly A's.
                assert_bytes_eq(&got, w, &format!("B reads {path} during sync"));
                right += 1;
            }
            Err(e) if e == libc::ENOENT || e == libc::EIO => errors += 1,
            Err(e) => panic!("B: {path}: unexpected errno {e}"),
        }
    }
    (right, errors, pending)
}

fn write_batch(a: &Volume, tag: &str, want: &mut BTreeMap<String, Vec<u8>>) {
    for d in 0..6 {
        let dir = format!("{tag}-dir{d}");
        fs::create_dir_all(a.p(&dir)).unwrap();
        for f in 0..3 {
            let name = if f == 2 {
                format!("{dir}/{}-{f}", "n".repeat(190))
            } else {
                format!("{dir}/file-{f}")
            };
            let data = content_of(&name, 20_000 + 7_000 * f + 1_000 * d);
            write_file(&a.p(&name), &data);
            want.insert(name, data);
        }
    }
}

#[test]
fn syncthing_partial_sync_reads_right_bytes_or_a_clean_error() {
    require_syncthing!();
    let mut a = Volume::init(Mode::Gcm);
    a.mount_args.push("--shared-storage".into());
    let mut b = host_b();
    let pair = Pair::start(a.root(), &a.cipher, &b.cipher, "largestFirst").unwrap();
    pair.wait_synced().unwrap();
    a.mount();
    b.mount();
    let mut want = BTreeMap::new();

    // Live: B reads while A writes and Syncthing copies.
    write_batch(&a, "live", &mut want);
    let mut rounds = Vec::new();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                seen.push(check_reads(&b, &want));
            }
            seen
        });
        let r = pair.wait_synced();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        rounds = h.join().unwrap();
        r.unwrap();
    });
    let errors: usize = rounds.iter().map(|r| r.1).sum();
    let pending: usize = rounds.iter().map(|r| r.2).sum();
    eprintln!(
        "live: {} read rounds on B, {errors} clean errors, {pending} names pending their sidecar",
        rounds.len()
    );
    assert_eq!(check_reads(&b, &want), (want.len(), 0, 0), "after the live sync");

    // Deterministic: B's Syncthing ignores every IV file and sidecar, so
    // files arrive without them.
    fs::write(b.cipher.join(".stignore"), "warpfs.diriv\n*.name\n").unwrap();
    pair.b.scan().unwrap();
    let mut later = BTreeMap::new();
    write_batch(&a, "held", &mut later);
    // Long names in directories B has: their sidecars are held back.
    for d in 0..6 {
        let name = format!("live-dir{d}/{}-held", "h".repeat(190));
        let data = content_of(&name, 30_000);
        write_file(&a.p(&name), &data);
        later.insert(name, data);
    }
    // Wait until B has every backing file of A but the ignored ones.
    pair.a.scan().unwrap();
    let expect: Vec<(PathBuf, u64)> = backing_files(&a.cipher)
        .into_iter()
        .filter(|(p, _)| {
            let n = p.file_name().unwrap().to_string_lossy();
            n != "warpfs.diriv" && !n.ends_with(".name") && n != ".stignore"
        })
        .collect();
    synced::poll("B has the files of the held batch", synced::syncthing::SYNC, || {
        let have = backing_files(&b.cipher);
        Ok(expect.iter().all(|e| have.contains(e)).then_some(()))
    })
    .unwrap();
    want.extend(later.clone());
    let (right, errors, pending) = check_reads(&b, &want);
    eprintln!("held: B reads {right} right, {errors} clean errors, {pending} names pending their sidecar");
    assert!(errors > 0, "the directories without their IV should read as errors");
    assert!(pending > 0, "long names without their sidecar should be shown marked");
    // Looked up by its name, such a file reads right already.
    let name = format!("live-dir0/{}-held", "h".repeat(190));
    assert_bytes_eq(
        &fs::read(b.p(&name)).unwrap(),
        &want[&name],
        "a long name before its sidecar",
    );
    // The IVs and sidecars arrive: every file reads right.
    fs::write(b.cipher.join(".stignore"), "").unwrap();
    pair.wait_synced().unwrap();
    assert_eq!(
        check_reads(&b, &want),
        (want.len(), 0, 0),
        "after the held files' IVs arrived"
    );
}

/// Regular backing files under `dir` (relative path, length), foreign
/// ones and Syncthing's temporary files excluded.
fn backing_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(dir.join(&rel)).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(".st") || n.starts_with(".syncthing.") {
                continue;
            }
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(rel.join(&n)),
                Ok(m) if m.is_file() => out.push((rel.join(&n), m.len())),
                _ => {}
            }
        }
    }
    out
}
