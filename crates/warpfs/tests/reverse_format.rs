//! Reverse configs and the format of their views (FORMAT.md 14): a
//! reverse config of format 1 or 2 (frozen in `revkit/v1/` and `revkit/v2/`
//! by earlier warpfs builds) keeps giving exactly the same view, so a
//! backup of it does not change; a copy of that view restores read-write;
//! a new one (`warpfs init --reverse`) is format 2 with `bound-seals`, so a
//! copy of its view binds symlink targets, and xattrs set on it later, to
//! their entry.

#[macro_use]
mod common;
mod revkit;

use common::*;
use revkit::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every entry of the view at `root` in the form of `revkit/*/view.txt`
/// (the same commands as `revkit/freeze.sh`).
fn view_listing(root: &Path) -> String {
    sh(Command::new("bash").current_dir(root).env("LC_ALL", "C").arg("-c").arg(
        r#"set -euo pipefail
        find . -mindepth 1 | sed 's|^\./||' | sort | while IFS= read -r e; do
            if [[ -L $e ]]; then printf 'l %s %s\n' "$(readlink "$e")" "$e"
            elif [[ -d $e ]]; then printf 'd %s\n' "$e"
            else printf 'f %s %s\n' "$(sha256sum <"$e" | cut -d' ' -f1)" "$e"; fi
        done"#,
    ))
}

/// The frozen view `name` (revkit/freeze.sh).
fn frozen(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/revkit").join(name)
}

/// The frozen plaintext tree and config `name` (of format `version`),
/// mounted as a reverse view, which must be its frozen view byte for byte.
fn frozen_view_is_kept(name: &str, version: u64) -> Rev {
    let mut r = Rev::new();
    let f = frozen(name);
    sh(Command::new("cp").arg("-a").arg(f.join("plain/.")).arg(&r.plain));
    r.pass = f.join("password.txt");
    assert_eq!(format_of(&r.plain.join(HIDDEN)).0, version);
    r.mount_view(&[]);
    let want = fs::read_to_string(f.join("view.txt")).unwrap();
    assert_eq!(
        view_listing(&r.view),
        want,
        "the view of the frozen format {version} config {name} changed"
    );
    r
}

/// The backing symlinks in the root of a copy of a view.
fn root_links(copy: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(copy)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_symlink())
        .collect();
    v.sort();
    v
}

fn swap_targets(a: &Path, b: &Path) {
    let (ta, tb) = (fs::read_link(a).unwrap(), fs::read_link(b).unwrap());
    for (p, t) in [(a, tb), (b, ta)] {
        fs::remove_file(p).unwrap();
        std::os::unix::fs::symlink(t, p).unwrap();
    }
}

/// The `version` and `feature_flags` of the config at `path`.
fn format_of(path: &Path) -> (u64, Vec<String>) {
    let j: serde_json::Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    let flags = j["feature_flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    (j["version"].as_u64().unwrap(), flags)
}

/// A read-write forward mount, unmounted on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            unmount_path(&self.0).unwrap();
        }
    }
}

#[test]
fn a_format_1_reverse_config_keeps_giving_the_frozen_view_byte_for_byte() {
    require_fuse!();
    let mut r = frozen_view_is_kept("v1", 1);
    // Its symlink targets stay unbound (format 1): swapped in a copy, they open.
    let copy = r.p("copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy));
    let links = root_links(&copy);
    assert_eq!(links.len(), 2, "{links:?}");
    swap_targets(&links[0], &links[1]);
    let fwd = r.forward(&copy);
    let targets: Vec<PathBuf> = ["link-abs", "link-rel"]
        .iter()
        .map(|n| fs::read_link(fwd.join(n)).unwrap())
        .collect();
    assert_eq!(targets, [PathBuf::from("hello.txt"), PathBuf::from("/etc/hostname")]);
}

#[test]
fn a_new_reverse_config_is_format_2_and_binds_symlink_targets_and_xattrs() {
    require_fuse!();
    let mut r = Rev::new();
    fs::write(r.plain.join("f"), b"file f").unwrap();
    fs::write(r.plain.join("g"), b"file g").unwrap();
    std::os::unix::fs::symlink("target of a", r.plain.join("a")).unwrap();
    std::os::unix::fs::symlink("target of b", r.plain.join("b")).unwrap();
    r.init();
    let (version, flags) = format_of(&r.plain.join(HIDDEN));
    assert_eq!(version, 2);
    assert!(
        flags.iter().any(|f| f == "bound-seals") && flags.iter().any(|f| f == "reverse"),
        "{flags:?}"
    );
    r.mount_view(&[]);
    let copy = r.p("copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy));
    let intact = r.p("intact");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&intact));
    // Swapped in a copy, neither target opens.
    let links = root_links(&copy);
    assert_eq!(links.len(), 2, "{links:?}");
    swap_targets(&links[0], &links[1]);
    let fwd = r.forward(&copy);
    for n in ["a", "b"] {
        assert_errno(
            fs::read_link(fwd.join(n)),
            libc::EIO,
            &format!("readlink {n} after the swap"),
        );
    }
    r.unmount(&fwd);
    // The copy mounted read-write: xattr values are bound to their entry.
    if !backing_supports_user_xattrs(&intact) || !mounts_serve_xattrs() {
        warpfs_testkit::skip("no user xattrs on the backing file system or the mounts");
        return;
    }
    let mnt = r.p("rw");
    fs::create_dir(&mnt).unwrap();
    let log = r.p("rw.log");
    warpfs(args!["mount", "--passfile", &r.pass, "--log-file", &log, &intact, &mnt]).expect_ok("mount the copy");
    let m = Mounted(mnt.clone());
    assert_eq!(fs::read_link(mnt.join("a")).unwrap(), PathBuf::from("target of a"));
    setxattr(&mnt.join("f"), "user.k", b"value of f", 0).unwrap();
    setxattr(&mnt.join("g"), "user.k", b"value of g", 0).unwrap();
    drop(m);
    let backing: Vec<PathBuf> = fs::read_dir(&intact)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| listxattr(p).unwrap_or_default().iter().any(|n| n == "user.warpfs.id"))
        .collect();
    assert_eq!(backing.len(), 2, "{backing:?}");
    let name = listxattr(&backing[0])
        .unwrap()
        .into_iter()
        .find(|n| n.starts_with("user.warpfs.") && n != "user.warpfs.id")
        .unwrap();
    let (v0, v1) = (
        getxattr(&backing[0], &name).unwrap(),
        getxattr(&backing[1], &name).unwrap(),
    );
    setxattr(&backing[0], &name, &v1, 0).unwrap();
    setxattr(&backing[1], &name, &v0, 0).unwrap();
    warpfs(args!["mount", "--passfile", &r.pass, "--log-file", &log, &intact, &mnt]).expect_ok("remount the copy");
    let _m = Mounted(mnt.clone());
    for n in ["f", "g"] {
        assert_errno(
            getxattr(&mnt.join(n), "user.k"),
            libc::EIO,
            &format!("getxattr {n} after the swap"),
        );
    }
}

/// The view of a frozen format 2 config is the frozen one byte for byte,
/// and a copy of it (a backup being restored) mounts read-write: what was
/// backed up reads back, new files, overwrites, appends, a new directory
/// and a rename survive a remount, and fsck finds the copy clean.
#[test]
fn a_format_2_reverse_config_keeps_giving_the_frozen_view_and_its_copy_restores_read_write() {
    require_fuse!();
    let mut r = frozen_view_is_kept("v2", 2);
    let copy = r.p("copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy));
    let view = r.view.clone();
    r.unmount(&view);
    let plain = |n: &str| fs::read(r.plain.join(n)).unwrap();
    let mut rng = Rng::for_test("reverse-restore-rw");
    let new = rng.bytes(100_000);
    let patch = rng.bytes(4000);
    let mut cross = plain("cross-64k.bin");
    cross[5000..9000].copy_from_slice(&patch);
    let mut hello = plain("hello.txt");
    hello.extend_from_slice(b"appended after the restore\n");
    let mnt = r.p("rw");
    fs::create_dir(&mnt).unwrap();
    let log = r.p("rw.log");
    let mount = || {
        warpfs(args!["mount", "--passfile", &r.pass, "--log-file", &log, &copy, &mnt])
            .expect_ok("mount the restored copy");
        Mounted(mnt.clone())
    };
    {
        let _m = mount();
        assert_eq!(fs::read(mnt.join("cross-64k.bin")).unwrap(), plain("cross-64k.bin"));
        assert_eq!(
            fs::read(mnt.join("dir/sub/deep.txt")).unwrap(),
            plain("dir/sub/deep.txt")
        );
        fs::write(mnt.join("new.bin"), &new).unwrap();
        let f = fs::OpenOptions::new()
            .write(true)
            .open(mnt.join("cross-64k.bin"))
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &patch, 5000).unwrap();
        drop(f);
        let mut f = fs::OpenOptions::new().append(true).open(mnt.join("hello.txt")).unwrap();
        std::io::Write::write_all(&mut f, b"appended after the restore\n").unwrap();
        drop(f);
        fs::create_dir(mnt.join("newdir")).unwrap();
        fs::rename(mnt.join("empty"), mnt.join("newdir/moved")).unwrap();
    }
    {
        let _m = mount();
        assert_eq!(fs::read(mnt.join("new.bin")).unwrap(), new, "new file after a remount");
        assert_eq!(fs::read(mnt.join("cross-64k.bin")).unwrap(), cross, "overwritten file");
        assert_eq!(fs::read(mnt.join("hello.txt")).unwrap(), hello, "appended file");
        assert_eq!(fs::read(mnt.join("newdir/moved")).unwrap(), b"", "renamed file");
        assert!(!mnt.join("empty").exists(), "the old name of the renamed file");
        assert_eq!(fs::read_link(mnt.join("link-rel")).unwrap(), PathBuf::from("hello.txt"));
    }
    warpfs(args!["fsck", "--passfile", &r.pass, &copy]).expect_ok("fsck of the restored copy");
}

/// The cipher file of `cross-64k.bin` in a copy of a frozen view: the
/// largest file of its root.
fn largest(copy: &Path) -> PathBuf {
    fs::read_dir(copy)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.is_symlink())
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap()
}

/// Two copies of the mounted view of `r`, the second made after block 10
/// of `cross-64k.bin` changed in PLAINDIR, with that block's nonce entry
/// and data then put back from the first: a genuine older version of the
/// block, which its GCM tag accepts.
fn spliced_copies(r: &mut Rev, tag: &str) -> (PathBuf, PathBuf) {
    let (old, new) = (r.p(&format!("{tag}-old")), r.p(&format!("{tag}-new")));
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&old));
    let view = r.view.clone();
    r.unmount(&view);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(r.plain.join("cross-64k.bin"))
        .unwrap();
    let newer = format!("{tag}: a newer version of block 10");
    std::os::unix::fs::FileExt::write_all_at(&f, newer.as_bytes(), 10 * 4096 + 100).unwrap();
    drop(f);
    r.mount_view(&[]);
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&new));
    let (e, d) = (32 + 10 * 32, 32 + 512 + 10 * 4096);
    let a = fs::read(largest(&old)).unwrap();
    let mut b = fs::read(largest(&new)).unwrap();
    assert_ne!(a[e..e + 32], b[e..e + 32], "block 10 differs between the copies");
    b[e..e + 32].copy_from_slice(&a[e..e + 32]);
    b[d..d + 4096].copy_from_slice(&a[d..d + 4096]);
    fs::write(largest(&new), b).unwrap();
    (old, new)
}

/// `warpfs upgrade --reverse` replaces a format 2 reverse config with one
/// with file summaries under a new master key, the old one kept hidden
/// beside it: every byte of the view changes once, so the next backup
/// copies every file. Before it, a copy holding a block put back from an
/// older copy reads back without an error; after it, the same splice
/// reads as EIO with a log line naming the file, and fsck reports it.
#[test]
fn a_reverse_config_upgraded_to_file_summaries_changes_its_view_once_and_detects_a_spliced_block() {
    require_fuse!();
    if warpfs_testkit::skip_if(rsync_missing()) {
        return;
    }
    let mut r = frozen_view_is_kept("v2", 2);
    let backup = r.p("backup");
    fs::create_dir(&backup).unwrap();
    rsync(&[], &r.view, &backup);
    let (_, new) = spliced_copies(&mut r, "before");
    let fwd = r.forward(&new);
    let spliced = fs::read(fwd.join("cross-64k.bin")).expect("no summaries: the splice goes unseen");
    assert_eq!(
        &spliced[10 * 4096 + 100..10 * 4096 + 106],
        &fs::read(frozen("v2").join("plain/cross-64k.bin")).unwrap()[10 * 4096 + 100..10 * 4096 + 106]
    );
    r.unmount(&fwd);
    let view = r.view.clone();
    r.unmount(&view);

    let out = warpfs(args![
        "upgrade",
        "--reverse",
        "--passfile",
        &r.pass,
        "--quiet",
        &r.plain
    ]);
    out.expect_ok("upgrade --reverse");
    assert!(out.stdout.contains("the next backup copies everything"), "{out}");
    let (version, flags) = format_of(&r.plain.join(HIDDEN));
    assert_eq!(version, 2);
    assert!(flags.iter().any(|f| f == "file-summary"), "{flags:?}");
    let aside: Vec<PathBuf> = fs::read_dir(&r.plain)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".warpfs.reverse.conf.old-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        fs::read(&aside[0]).unwrap(),
        fs::read(frozen("v2").join("plain").join(HIDDEN)).unwrap(),
        "the old config is kept as it was"
    );
    warpfs(args!["upgrade", "--reverse", "--passfile", &r.pass, &r.plain]).expect_code(1, "a second upgrade --reverse");

    r.mount_view(&[]);
    let old = fs::read_to_string(frozen("v2").join("view.txt")).unwrap();
    let now = view_listing(&r.view);
    let kept: Vec<&str> = now.lines().filter(|l| old.lines().any(|o| o == *l)).collect();
    assert!(kept.is_empty(), "entries of the view that did not change: {kept:?}");
    assert!(!now.contains(".warpfs.reverse.conf"), "{now}");
    let files = now.lines().filter(|l| l.starts_with("f ")).count() as u64;
    let s = rsync(&["--delete"], &r.view, &backup);
    assert_eq!(
        s.transferred, files,
        "the backup after the upgrade copies every file: {s:?}"
    );

    let was = fs::read(r.plain.join("cross-64k.bin")).unwrap();
    let (old_copy, new) = spliced_copies(&mut r, "after");
    let fwd = r.forward(&old_copy);
    assert_eq!(fs::read(fwd.join("cross-64k.bin")).unwrap(), was);
    r.unmount(&fwd);
    let fwd = r.forward(&new);
    let e = fs::read(fwd.join("cross-64k.bin")).expect_err("the spliced block is detected");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(fs::read(fwd.join("hello.txt")).unwrap(), b"hello\n", "other files read");
    r.unmount(&fwd);
    let log = fs::read_to_string(r.p("fwd.log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("/cross-64k.bin") && l.contains("summary")),
        "{log}"
    );
    let out = warpfs(args!["fsck", "--passfile", &r.pass, &new]);
    assert!(
        !out.ok() && out.stdout.contains("file summary does not verify"),
        "{out}"
    );
    warpfs(args!["fsck", "--passfile", &r.pass, &old_copy]).expect_ok("fsck of the copy before the change");
}

/// A reverse config made with `--file-summary on` (frozen in
/// `revkit/v2-summary/`) keeps giving the same view byte for byte, and a
/// copy of it is a volume that verifies every file's summary.
#[test]
fn a_reverse_config_with_file_summaries_keeps_giving_the_frozen_view() {
    require_fuse!();
    let mut r = frozen_view_is_kept("v2-summary", 2);
    assert!(format_of(&r.plain.join(HIDDEN)).1.iter().any(|f| f == "file-summary"));
    let copy = r.p("copy");
    sh(Command::new("cp").arg("-a").arg(&r.view).arg(&copy));
    let fwd = r.forward(&copy);
    assert_eq!(tree(&fwd), tree(&r.plain));
    r.unmount(&fwd);
    warpfs(args!["fsck", "--passfile", &r.pass, &copy]).expect_ok("fsck of the copy");
}
