//! Directories holding copies of their IV file (FORMAT.md 13.2): the other
//! side of a directory made on two hosts, shown under the copy's marker
//! and merged by fsck only where each entry proves where it was sealed;
//! another directory's IV copied in with that directory's entries, shown
//! marked and never merged; a copy under a marker no tool writes, unused.

use super::tests::*;
use super::How;
use crate::fsck::{self, Fix, Kind};
use crate::Error;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A directory `D` made on both sides of a sync: this side's IV and entry
/// `a`, the other side's IV (as Syncthing's copy) with `a`, `b` and a long
/// name. Returns D's backing name and the long name.
fn two_sided_dir(v: &crate::Volume) -> (String, String) {
    let (d, _) = v.mkdir(Path::new(""), OsStr::new("D"), 0o755, WHO).unwrap();
    write(v, &d, "a", b"A on this side");
    let (e, _) = v.mkdir(Path::new(""), OsStr::new("E"), 0o755, WHO).unwrap();
    let eb = write(v, &e, "b", b"B over there");
    let ea = write(v, &e, "a", b"A over there");
    let long = "L".repeat(200);
    let el = write(v, &e, &long, b"long over there");
    for f in [&eb, &ea, &el, &format!("{el}.name")] {
        fs::rename(backing(v, &format!("{e}/{f}")), backing(v, &format!("{d}/{f}"))).unwrap();
    }
    fs::rename(
        backing(v, &format!("{e}/warpfs.diriv")),
        backing(v, &format!("{d}/warpfs{ST}.diriv")),
    )
    .unwrap();
    fs::remove_dir(backing(v, &e)).unwrap();
    (d, long)
}

fn sorted(mut v: Vec<OsString>) -> Vec<OsString> {
    v.sort();
    v
}

/// The IV files (`warpfs.diriv` and copies) of backing directory `d`.
fn iv_files(v: &crate::Volume, d: &str) -> Vec<OsString> {
    sorted(
        fs::read_dir(backing(v, d))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.as_bytes().ends_with(b".diriv"))
            .collect(),
    )
}

/// Every backing name in `d`.
fn backing_names(v: &crate::Volume, d: &str) -> Vec<OsString> {
    sorted(
        fs::read_dir(backing(v, d))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect(),
    )
}

fn lookup_errno(v: &crate::Volume, d: &str, name: &str) -> Option<Error> {
    v.lookup(Path::new(d), OsStr::new(name)).err()
}

fn repair() -> fsck::Options {
    let mut o = fsck::Options::default();
    o.repairs.merge_dir_ivs = true;
    o
}

fn check(v: &crate::Volume, o: fsck::Options) -> fsck::Report {
    fsck::check(v, o, &mut |_, _| {})
}

#[test]
fn the_other_sides_entries_of_a_directory_made_twice_show_only_marked() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let (d, long) = two_sided_dir(&v);
    let (a2, b2, long2) = (format!("a{ST}"), format!("b{ST}"), format!("{long}{ST}"));
    assert_eq!(names(&v, &d), sorted(vec![s("a"), s(&a2), s(&b2), s(&long2)]));
    assert_eq!(read(&v, &d, "a"), b"A on this side");
    assert_eq!(read(&v, &d, &a2), b"A over there");
    assert_eq!(read(&v, &d, &b2), b"B over there");
    assert_eq!(read(&v, &d, &long2), b"long over there");
    // Never found by their plain names, listed first or not.
    assert_eq!(lookup_errno(&v, &d, "b"), Some(Error(libc::ENOENT)));
    assert_eq!(lookup_errno(&v, &d, &long), Some(Error(libc::ENOENT)));
    let v2 = volume_again(&v, t.path());
    assert_eq!(lookup_errno(&v2, &d, "b"), Some(Error(libc::ENOENT)));
    assert_eq!(lookup_errno(&v2, &d, &long), Some(Error(libc::ENOENT)));
    assert_eq!(read(&v2, &d, &b2), b"B over there");
    assert_eq!(read(&v2, &d, &a2), b"A over there");
    // A new entry of the plain name is a new entry beside the marked one.
    write(&v2, &d, "b", b"new b");
    assert_eq!(read(&v2, &d, "b"), b"new b");
    assert_eq!(read(&v2, &d, &b2), b"B over there");
    // Renamed through the volume, an entry takes a name of its own under
    // warpfs.diriv and shows plainly.
    v2.rename(Path::new(&d), OsStr::new(&b2), Path::new(&d), OsStr::new("b-there"), 0)
        .unwrap();
    v2.rename(Path::new(&d), OsStr::new(&long2), Path::new(&d), OsStr::new(&long), 0)
        .unwrap();
    assert_eq!(read(&v2, &d, "b-there"), b"B over there");
    assert_eq!(read(&v2, &d, &long), b"long over there");
    assert_eq!(
        names(&v2, &d),
        sorted(vec![s("a"), s(&a2), s("b"), s("b-there"), s(&long)])
    );
    let view = v2.view(&v2.dir(Path::new(&d)).unwrap()).unwrap();
    for e in &view.shown {
        let plain = e.name != *a2.as_str();
        assert_eq!(e.how == How::Plain, plain, "{e:?}");
    }
}

#[test]
fn fsck_merges_a_directory_made_twice_only_once_no_entry_lacks_proof() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let (d, long) = two_sided_dir(&v);
    let copy = format!("warpfs{ST}.diriv");
    let (a2, b2, long2) = (format!("a{ST}"), format!("b{ST}"), format!("{long}{ST}"));
    // Regular files carry nothing that names their directory: reported,
    // with each entry, and not merged.
    for opts in [fsck::Options::default(), repair()] {
        let r = check(&v, opts);
        assert!(!r.findings.iter().any(|f| matches!(f.kind, Kind::DirIvCopies(_))));
        let f: Vec<_> = r
            .findings
            .iter()
            .filter(|f| matches!(f.kind, Kind::DirIvCopyUnproven { .. }))
            .collect();
        assert_eq!(f.len(), 1, "{:?}", r.findings);
        let Kind::DirIvCopyUnproven {
            copies,
            entries,
            elsewhere,
        } = &f[0].kind
        else {
            unreachable!()
        };
        assert_eq!((copies, elsewhere), (&vec![copy.clone()], &None));
        let mut want: Vec<String> = [&a2, &b2, &long2]
            .iter()
            .map(|n| format!("{n} (a regular file)"))
            .collect();
        want.sort();
        let mut got = entries.clone();
        got.sort();
        assert_eq!(got, want);
        assert_eq!((f[0].path.as_str(), &f[0].fix), ("/D", &Fix::None));
        let shown = f[0].to_string();
        assert!(shown.contains(&copy) && shown.contains("not merged") && shown.contains("rename"));
        assert!(!r.all_repaired());
        assert_eq!(iv_files(&v, &d), sorted(vec![s("warpfs.diriv"), s(&copy)]));
        assert_eq!(names(&v, &d), sorted(vec![s("a"), s(&a2), s(&b2), s(&long2)]));
    }
    // The user takes them in by renaming; the copy then decrypts nothing
    // and fsck --repair removes it.
    for (from, to) in [(&a2, "a-there"), (&b2, "b"), (&long2, long.as_str())] {
        v.rename(Path::new(&d), OsStr::new(from), Path::new(&d), OsStr::new(to), 0)
            .unwrap();
    }
    let r = check(&v, fsck::Options::default());
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    assert_eq!(r.findings[0].kind, Kind::DirIvCopies(vec![copy.clone()]));
    assert_eq!(r.findings[0].fix, Fix::NotAsked("--repair"));
    let r = check(&v, repair());
    assert!(r.all_repaired(), "{:?}", r.findings);
    assert_eq!(iv_files(&v, &d), vec![s("warpfs.diriv")]);
    let v2 = volume_again(&v, t.path());
    assert_eq!(names(&v2, &d), sorted(vec![s("a"), s("a-there"), s("b"), s(&long)]));
    assert_eq!(read(&v2, &d, "a-there"), b"A over there");
    assert_eq!(read(&v2, &d, &long), b"long over there");
    assert!(check(&v2, fsck::Options::default()).clean());
}

#[test]
fn a_bound_symlink_of_the_other_side_is_proven_and_merged_under_its_marked_name() {
    let t = tempfile::tempdir().unwrap();
    let v = bound_volume(t.path());
    // The other side's version of symlink `l`, sealed for `l`, kept by the
    // sync tool under a conflict name; then this side's `l`.
    let theirs = link(&v, "", "l", "/their/target");
    fs::rename(backing(&v, &theirs), backing(&v, &format!("{theirs}{ST}"))).unwrap();
    link(&v, "", "l", "/my/target");
    assert_eq!(target(&v, "", "l"), b"/my/target");
    assert_eq!(target(&v, "", &format!("l{ST}")), b"/their/target");
    // A directory made on both sides: a symlink sealed under the other
    // side's IV, which is now a copy of warpfs.diriv.
    let (d, _) = v.mkdir(Path::new(""), OsStr::new("D"), 0o755, WHO).unwrap();
    let (e, _) = v.mkdir(Path::new(""), OsStr::new("E"), 0o755, WHO).unwrap();
    let el = link(&v, &e, "s", "over/there");
    // And one whose target was swapped for s's: its seal names s.
    let et = link(&v, &e, "t", "elsewhere");
    let sealed_s = fs::read_link(backing(&v, &format!("{e}/{el}"))).unwrap();
    fs::remove_file(backing(&v, &format!("{e}/{et}"))).unwrap();
    std::os::unix::fs::symlink(&sealed_s, backing(&v, &format!("{e}/{et}"))).unwrap();
    for f in [&el, &et] {
        fs::rename(backing(&v, &format!("{e}/{f}")), backing(&v, &format!("{d}/{f}"))).unwrap();
    }
    fs::rename(
        backing(&v, &format!("{e}/warpfs.diriv")),
        backing(&v, &format!("{d}/warpfs{ST}.diriv")),
    )
    .unwrap();
    fs::remove_dir(backing(&v, &e)).unwrap();
    let s2 = format!("s{ST}");
    let v2 = volume_again(&v, t.path());
    assert_eq!(lookup_errno(&v2, &d, "s"), Some(Error(libc::ENOENT)));
    assert_eq!(target(&v2, &d, &s2), b"over/there");
    // t's seal does not name t: no proof, no merge.
    let t2 = format!("t{ST}");
    let r = check(&v2, repair());
    let kinds: Vec<_> = r.findings.iter().map(|f| &f.kind).collect();
    assert!(
        kinds.contains(&&Kind::DirIvCopyUnproven {
            copies: vec![format!("warpfs{ST}.diriv")],
            entries: vec![format!(
                "{t2} (a symlink whose target is not sealed for this IV and name)"
            )],
            elsewhere: None,
        }),
        "{kinds:?}"
    );
    assert_eq!(iv_files(&v2, &d).len(), 2);
    v2.unlink(Path::new(&d), OsStr::new(&t2)).unwrap();
    // s's seal names the copy's IV and its name: proven, so fsck --repair
    // moves it under warpfs.diriv (sealed again there), keeping the name
    // it was shown as.
    let r = check(&v2, repair());
    assert!(r.all_repaired(), "{:?}", r.findings);
    assert_eq!(iv_files(&v2, &d), vec![s("warpfs.diriv")]);
    let v3 = volume_again(&v, t.path());
    assert_eq!(names(&v3, &d), vec![s(&s2)]);
    assert_eq!(target(&v3, &d, &s2), b"over/there");
    assert!(check(&v3, fsck::Options::default()).clean());
    // Still bound: the target moved onto another entry does not open.
    let (mine, _) = v3.lookup(Path::new(""), OsStr::new("l")).unwrap();
    let (other, _) = v3.lookup(Path::new(&d), OsStr::new(&s2)).unwrap();
    let sealed = fs::read_link(backing(&v3, &format!("{d}/{other}"))).unwrap();
    fs::remove_file(backing(&v3, &mine)).unwrap();
    std::os::unix::fs::symlink(sealed, backing(&v3, &mine)).unwrap();
    assert!(v3.readlink(Path::new(&mine)).is_err());
}

#[test]
fn another_directorys_iv_copied_in_with_its_entries_is_shown_marked_and_never_merged() {
    let t = tempfile::tempdir().unwrap();
    let v = bound_volume(t.path());
    let (a, _) = v.mkdir(Path::new(""), OsStr::new("A"), 0o755, WHO).unwrap();
    let (b, _) = v.mkdir(Path::new(""), OsStr::new("B"), 0o755, WHO).unwrap();
    let secret = write(&v, &a, "secret", b"secret of A");
    let ln = link(&v, &a, "ln", "/target/of/A");
    write(&v, &b, "other", b"B's own");
    // Whoever holds CIPHERDIR copies A's IV into B as a sync tool's copy
    // and moves A's entries in beside it.
    fs::copy(
        backing(&v, &format!("{a}/warpfs.diriv")),
        backing(&v, &format!("{b}/warpfs{ST}.diriv")),
    )
    .unwrap();
    for f in [&secret, &ln] {
        fs::rename(backing(&v, &format!("{a}/{f}")), backing(&v, &format!("{b}/{f}"))).unwrap();
    }
    let (secret2, ln2) = (format!("secret{ST}"), format!("ln{ST}"));
    for v in [&v, &volume_again(&v, t.path())] {
        // Never under their plain names, by lookup or listing.
        assert_eq!(lookup_errno(v, &b, "secret"), Some(Error(libc::ENOENT)));
        assert_eq!(lookup_errno(v, &b, "ln"), Some(Error(libc::ENOENT)));
        assert_eq!(names(v, &b), sorted(vec![s(&ln2), s("other"), s(&secret2)]));
        assert!(names(v, &a).is_empty());
    }
    // fsck names the copy, the other directory holding its IV and the
    // entry without proof; --repair changes nothing.
    let before = backing_names(&v, &b);
    for opts in [fsck::Options::default(), repair()] {
        let r = check(&v, opts);
        assert!(!r.all_repaired());
        assert!(!r.findings.iter().any(|f| matches!(f.kind, Kind::DirIvCopies(_))));
        let f = r
            .findings
            .iter()
            .find(|f| matches!(f.kind, Kind::DirIvCopyUnproven { .. }))
            .unwrap_or_else(|| panic!("{:?}", r.findings));
        assert_eq!(
            f.kind,
            Kind::DirIvCopyUnproven {
                copies: vec![format!("warpfs{ST}.diriv")],
                entries: vec![format!("{secret2} (a regular file)")],
                elsewhere: Some(a.clone()),
            }
        );
        assert_eq!((f.path.as_str(), &f.fix), ("/B", &Fix::None));
        assert!(f.to_string().contains("also the IV of backing directory"), "{f}");
        assert_eq!(backing_names(&v, &b), before);
    }
    // The symlink's seal names the IV and its name, but A holds that IV:
    // with the regular file gone, still not merged.
    v.unlink(Path::new(&b), OsStr::new(&secret2)).unwrap();
    let r = check(&v, repair());
    assert!(!r.all_repaired(), "{:?}", r.findings);
    let kinds: Vec<_> = r.findings.iter().map(|f| &f.kind).collect();
    assert_eq!(
        kinds,
        vec![&Kind::DirIvCopyUnproven {
            copies: vec![format!("warpfs{ST}.diriv")],
            entries: vec![],
            elsewhere: Some(a.clone()),
        }]
    );
    assert_eq!(iv_files(&v, &b).len(), 2);
    // With A gone too, nothing tells the symlink from one the other side
    // of a sync made: it is taken in, under its marked name only.
    fs::remove_file(backing(&v, &format!("{a}/warpfs.diriv"))).unwrap();
    fs::remove_dir(backing(&v, &a)).unwrap();
    let r = check(&v, repair());
    assert!(r.all_repaired(), "{:?}", r.findings);
    let v2 = volume_again(&v, t.path());
    assert_eq!(names(&v2, &b), sorted(vec![s(&ln2), s("other")]));
    assert_eq!(lookup_errno(&v2, &b, "ln"), Some(Error(libc::ENOENT)));
    assert_eq!(target(&v2, &b, &ln2), b"/target/of/A");
}

#[test]
fn a_copy_of_the_iv_under_a_marker_no_tool_writes_is_not_used() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let (d, long) = two_sided_dir(&v);
    // Renamed as no sync tool would, to choose how its names show.
    let odd = "warpfs.pdf.diriv";
    fs::rename(
        backing(&v, &format!("{d}/warpfs{ST}.diriv")),
        backing(&v, &format!("{d}/{odd}")),
    )
    .unwrap();
    for v in [&v, &volume_again(&v, t.path())] {
        let shown = names(v, &d);
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert!(shown.contains(&s("a")), "{shown:?}");
        let marked = shown
            .iter()
            .filter(|n| n.as_bytes().ends_with(b".warpfs-undecryptable"));
        assert_eq!(marked.count(), 3, "{shown:?}");
        for n in ["b", "b.pdf", "a.pdf", &long, &format!("{long}.pdf")] {
            assert_eq!(lookup_errno(v, &d, n), Some(Error(libc::ENOENT)), "{n}");
        }
    }
    let r = check(&v, repair());
    let f = r
        .findings
        .iter()
        .find(|f| f.backing.ends_with(odd))
        .unwrap_or_else(|| panic!("{:?}", r.findings));
    assert!(
        matches!(&f.kind, Kind::DirIv(w) if w.contains("no sync tool's conflict marker")),
        "{f}"
    );
    assert!(!r.all_repaired());
    assert!(iv_files(&v, &d).contains(&s(odd)));
}
