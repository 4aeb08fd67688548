//! A sync tool's copies of a directory's IV file and of names, through a
//! real mount and `warpfs fsck` (FORMAT.md 13): the other side of a
//! directory made on two hosts shows under the copy's marker, is taken in
//! by renames and then merged; another directory's IV copied in with that
//! directory's entries shows them only marked and is never merged; a name
//! with text no sync tool adds shows as undecryptable.

use super::*;

const ST: &str = ".sync-conflict-20261125-141403-ABCDEFG";

/// The backing directories in the cipher root.
fn backing_dirs(v: &Volume) -> BTreeSet<PathBuf> {
    v.root_backing_entries().into_iter().filter(|p| p.is_dir()).collect()
}

/// `mkdir name` through the mount, with `files` in it; its backing directory.
fn mkdir_with(v: &Volume, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let before = backing_dirs(v);
    fs::create_dir(v.p(name)).unwrap();
    for (f, data) in files {
        write_file(&v.p(format!("{name}/{f}")), data);
    }
    let made: Vec<PathBuf> = backing_dirs(v).difference(&before).cloned().collect();
    assert_eq!(made.len(), 1);
    made[0].clone()
}

/// Backing names in `dir`.
fn listing(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Move every entry but the IV from backing directory `from` into `to`.
fn move_entries(from: &Path, to: &Path) {
    for n in listing(from) {
        if n != "warpfs.diriv" {
            fs::rename(from.join(&n), to.join(&n)).unwrap();
        }
    }
}

fn fsck(v: &Volume, extra: &[&str]) -> Out {
    let mut a = args!["fsck", "--passfile", &v.passfile];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(v.cipher.clone().into());
    warpfs(&a)
}

#[test]
fn a_directory_made_on_two_hosts_shows_the_other_side_marked_until_renamed_and_merged() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let d = mkdir_with(&v, "D", &[("x", b"x here")]);
    let e = mkdir_with(&v, "E", &[("x", b"x there"), ("y", b"y there")]);
    v.unmount();
    // What Syncthing leaves of D made on both hosts: one IV file kept,
    // the other renamed, the entries side by side.
    move_entries(&e, &d);
    fs::rename(e.join("warpfs.diriv"), d.join(format!("warpfs{ST}.diriv"))).unwrap();
    fs::remove_dir(&e).unwrap();
    v.mount();
    let (x2, y2) = (format!("x{ST}"), format!("y{ST}"));
    assert_eq!(names(&v.p("D")), set(&["x", &x2, &y2]));
    assert_errno(fs::metadata(v.p("D/y")), libc::ENOENT, "D/y by its plain name");
    assert_eq!(fs::read(v.p(format!("D/{y2}"))).unwrap(), b"y there");
    v.unmount();
    // Regular files carry no proof of their directory: not merged.
    let o = fsck(&v, &["--repair"]);
    o.expect_code(20, "fsck --repair with entries lacking proof");
    assert!(o.stdout.contains("not merged") && o.stdout.contains(&y2), "{o}");
    assert_eq!(listing(&d).len(), 5, "{:?}", listing(&d));
    // The user takes them in by renaming; then fsck merges.
    v.mount();
    fs::rename(v.p(format!("D/{y2}")), v.p("D/y")).unwrap();
    fs::rename(v.p(format!("D/{x2}")), v.p("D/x-there")).unwrap();
    assert_eq!(names(&v.p("D")), set(&["x", "x-there", "y"]));
    v.unmount();
    let o = fsck(&v, &["--repair"]);
    o.expect_code(21, "fsck --repair once every entry was renamed");
    assert!(o.stdout.contains("[repaired: merged into one IV"), "{o}");
    fsck(&v, &[]).expect_ok("fsck after the merge");
    v.mount();
    assert_eq!(names(&v.p("D")), set(&["x", "x-there", "y"]));
    assert_eq!(fs::read(v.p("D/x")).unwrap(), b"x here");
    assert_eq!(fs::read(v.p("D/x-there")).unwrap(), b"x there");
    assert_eq!(fs::read(v.p("D/y")).unwrap(), b"y there");
}

#[test]
fn another_directorys_iv_and_entries_moved_in_never_show_plainly_or_merge() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let a = mkdir_with(&v, "A", &[("secret", b"secret of A"), ("notes", b"notes of A")]);
    let b = mkdir_with(&v, "B", &[("other", b"B's own")]);
    write_file(&v.p("report"), b"report");
    v.unmount();
    // A copy of A's IV placed in B as a conflict copy, A's entries moved in.
    fs::copy(a.join("warpfs.diriv"), b.join(format!("warpfs{ST}.diriv"))).unwrap();
    move_entries(&a, &b);
    // And a name given a tail no sync tool adds.
    let report = v.root_backing_entries().into_iter().find(|p| p.is_file()).unwrap();
    let renamed = format!("{}.pdf", report.file_name().unwrap().to_string_lossy());
    fs::rename(&report, v.cipher.join(&renamed)).unwrap();
    let before = listing(&b);
    v.mount();
    let (secret2, notes2) = (format!("secret{ST}"), format!("notes{ST}"));
    assert_eq!(names(&v.p("B")), set(&["other", &secret2, &notes2]));
    assert_errno(
        fs::metadata(v.p("B/secret")),
        libc::ENOENT,
        "B/secret by its plain name",
    );
    assert_errno(fs::read(v.p("B/notes")), libc::ENOENT, "B/notes by its plain name");
    assert!(names(&v.p("A")).is_empty());
    let root = names(&v.mnt);
    assert!(root.contains(&format!("{renamed}.warpfs-undecryptable")), "{root:?}");
    assert!(!root.contains("report.pdf") && !root.contains("report"), "{root:?}");
    assert_errno(fs::metadata(v.p("report.pdf")), libc::ENOENT, "report.pdf");
    v.unmount();
    let o = fsck(&v, &["--repair"]);
    o.expect_code(20, "fsck --repair of a copied IV");
    assert!(
        o.stdout.contains("not merged") && o.stdout.contains("also the IV of backing directory"),
        "{o}"
    );
    assert_eq!(listing(&b), before, "fsck --repair changed B");
    v.mount();
    assert_eq!(names(&v.p("B")), set(&["other", &secret2, &notes2]));
}
