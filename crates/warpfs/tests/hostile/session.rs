//! The mount session of a scenario: `warpfs mount`, then every listing,
//! `lstat`, read and write through the mount, each under the guard, with
//! what each planted name must do to them; then the unmount.

use super::expect::{Findings, Op, Want};
use super::fixture::{long1, long2, VICTIM};
use super::plant::{Kind, Target};
use super::scenario::{shows_as, Scenario};
use crate::common::*;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};

/// The suffix of an undecryptable entry's shown name (FORMAT.md 13.4).
pub const UNDECRYPTABLE: &str = ".warpfs-undecryptable";

/// Reads stop here (a planted /dev/zero through a link would never end).
const READ_CAP: usize = 4 << 20;

/// A step's result: `Err` is a hang or runaway (the mount is gone).
type Step<T> = Result<io::Result<T>, String>;

fn errno_of(e: &io::Error) -> String {
    format!("{e}")
}

pub fn list(s: &Scenario, rel: &str) -> Step<Vec<String>> {
    let p = s.v.p(rel);
    s.scope.run(&format!("listing /{rel} through the mount"), move || {
        let mut v: Vec<String> = fs::read_dir(&p)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<io::Result<_>>()?;
        v.sort();
        Ok(v)
    })
}

pub fn read(s: &Scenario, rel: &str) -> Step<Vec<u8>> {
    let p = s.v.p(rel);
    s.scope.run(&format!("reading /{rel} through the mount"), move || {
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)?;
        let mut out = Vec::new();
        f.take(READ_CAP as u64).read_to_end(&mut out)?;
        Ok(out)
    })
}

fn lstat(s: &Scenario, rel: &str) -> Step<fs::Metadata> {
    let p = s.v.p(rel);
    s.scope.run(&format!("lstat /{rel} through the mount"), move || {
        fs::symlink_metadata(&p)
    })
}

fn create(s: &Scenario, rel: &str, data: &[u8]) -> Step<()> {
    let p = s.v.p(rel);
    let d = data.to_vec();
    s.scope
        .run(&format!("writing new file /{rel} through the mount"), move || {
            let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&p)?;
            f.write_all(&d)?;
            f.sync_all()
        })
}

fn overwrite(s: &Scenario, rel: &str, data: &[u8]) -> Step<()> {
    let p = s.v.p(rel);
    let d = data.to_vec();
    s.scope.run(&format!("writing into /{rel} through the mount"), move || {
        let f = fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)?;
        f.write_all_at(&d, 0)?;
        f.sync_all()
    })
}

/// What a directory listing must show.
enum Dir {
    /// Lists, with every one of `must` and none of `not`.
    Lists { must: Vec<String>, not: Vec<String> },
    /// Fails with EIO.
    Eio,
    /// Fails, or lists without any of these plain names.
    NoPlain(Vec<String>),
    /// Not looked at.
    Skip,
}

/// What reading a file must give.
#[derive(Clone, Copy, PartialEq)]
enum File {
    Exact,
    /// An error (it must not be found or read).
    Fails,
    /// The right bytes or an error, never other bytes.
    ExactOrFails,
    Skip,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What reading each plaintext file must give.
type FileRule = Box<dyn Fn(&str) -> File>;

/// The expectations of the session, per directory and file.
fn plan(s: &Scenario) -> (Vec<(&'static str, Dir)>, FileRule) {
    let (l1, l2) = (long1(), long2());
    let root_all = strs(&["file1", VICTIM, "a", "b", &l1, &l2]);
    let old = s.kind == Kind::OldCopy;
    let normal = |must: Vec<String>| Dir::Lists { must, not: vec![] };
    let a_all = strs(&["f1", "f2"]);
    match s.target {
        Target::RootDiriv => (
            vec![("", Dir::NoPlain(root_all)), ("a", Dir::Skip), ("b", Dir::Skip)],
            Box::new(|_| File::Fails),
        ),
        Target::SubDiriv => (
            vec![
                ("", normal(root_all)),
                ("a", if old { Dir::NoPlain(a_all) } else { Dir::Eio }),
                ("b", normal(strs(&["g"]))),
            ],
            Box::new(|p| if p.starts_with("a/") { File::Fails } else { File::Exact }),
        ),
        Target::DirivCopy if old => (
            vec![
                ("", normal(root_all)),
                ("a", Dir::Skip),
                (
                    "b",
                    Dir::Lists {
                        must: strs(&["g"]),
                        not: a_all,
                    },
                ),
            ],
            Box::new(|p| if p.starts_with("a/") { File::Skip } else { File::Exact }),
        ),
        Target::DirivCopy => (
            vec![
                ("", normal(root_all)),
                (
                    "a",
                    Dir::Lists {
                        must: a_all,
                        not: strs(&["g"]),
                    },
                ),
                ("b", normal(vec![])),
            ],
            Box::new(|p| if p == "b/g" { File::Skip } else { File::Exact }),
        ),
        Target::Sidecar => (
            vec![("", Dir::Skip), ("a", normal(a_all)), ("b", normal(strs(&["g"])))],
            Box::new(move |p| if p == l1 { File::ExactOrFails } else { File::Exact }),
        ),
        Target::Content => {
            let root: Vec<String> = root_all.into_iter().filter(|n| n != VICTIM).collect();
            (
                vec![("", normal(root)), ("a", normal(a_all)), ("b", normal(strs(&["g"])))],
                Box::new(|p| if p == VICTIM { File::Skip } else { File::Exact }),
            )
        }
        Target::Conf if old => (
            vec![
                ("", normal(root_all)),
                ("a", normal(a_all)),
                ("b", normal(strs(&["g"]))),
            ],
            Box::new(|_| File::ExactOrFails),
        ),
        _ => (
            vec![
                ("", normal(root_all)),
                ("a", normal(a_all)),
                ("b", normal(strs(&["g"]))),
            ],
            Box::new(|_| File::Exact),
        ),
    }
}

/// `warpfs mount`, the session, the unmount.
pub fn session(s: &mut Scenario, w: &Want, f: &mut Findings) {
    let r = s.scope.run("warpfs mount", || s.v.try_mount(&[]));
    let out = match r {
        Ok(o) => o,
        Err(e) => {
            f.fail(format!("Mount: {e}"));
            return gone(s);
        }
    };
    let log = s.v.log();
    s.check(Op::Mount, w, &out, &log, f);
    if !out.ok() {
        if is_mounted(&s.v.mnt) {
            f.fail("Mount: exited non-zero but left a mount behind");
            s.scope.stop();
        }
        return;
    }
    if let Err(e) = browse(s, f) {
        f.fail(format!("Mount: {e}"));
        return gone(s);
    }
    if let Some(e) = s.unmount_guarded() {
        f.fail(format!("Mount: unmount: {e}"));
    }
}

/// The mount was stopped by the guard: forget it.
fn gone(s: &mut Scenario) {
    s.scope.stop();
    if s.v.is_mounted() || is_mounted(&s.v.mnt) {
        super::guard::lazy_unmount(&s.v.mnt);
        s.v.daemon_stopped();
    }
}

fn browse(s: &mut Scenario, f: &mut Findings) -> Result<(), String> {
    let (dirs, file_want) = plan(s);
    for (rel, want) in dirs {
        if matches!(want, Dir::Skip) {
            continue;
        }
        let got = list(s, rel)?;
        let shown = format!("{got:?}");
        let what = format!("listing /{rel}");
        match (want, got) {
            (Dir::Lists { must, not }, Ok(names)) => {
                let miss: Vec<&String> = must.iter().filter(|n| !names.contains(n)).collect();
                let bad: Vec<&String> = not.iter().filter(|n| names.contains(n)).collect();
                if !miss.is_empty() {
                    f.fail(format!("{what}: {miss:?} missing: {shown}"));
                }
                if !bad.is_empty() {
                    f.fail(format!(
                        "{what}: shows {bad:?} under their plain names (the planted object was trusted): {shown}"
                    ));
                }
                if names.iter().any(|n| n.ends_with(UNDECRYPTABLE)) && !not.is_empty() {
                    f.reached(format!("{what} shows a marked entry"));
                }
            }
            (Dir::Lists { .. }, Err(e)) => f.fail(format!("{what} should work: {}", errno_of(&e))),
            (Dir::Eio, Ok(names)) => f.fail(format!("{what} should fail with EIO, listed {names:?}")),
            (Dir::Eio, Err(e)) if e.raw_os_error() == Some(libc::EIO) => f.reached(format!("{what} failed with EIO")),
            (Dir::Eio, Err(e)) => f.fail(format!("{what} should fail with EIO, failed with {e}")),
            (Dir::NoPlain(plain), Ok(names)) => {
                let bad: Vec<&String> = plain.iter().filter(|n| names.contains(n)).collect();
                if bad.is_empty() {
                    f.reached(format!("{what} shows no plain name: {shown}"));
                } else {
                    f.fail(format!(
                        "{what}: shows {bad:?} under their plain names (the planted object was trusted)"
                    ));
                }
            }
            (Dir::NoPlain(_), Err(e)) => f.reached(format!("{what} failed: {e}")),
            (Dir::Skip, _) => {}
        }
    }
    if s.target == Target::Sidecar {
        sidecar_listing(s, f)?;
    }
    for (p, d) in s.files.clone() {
        let want = file_want(&p);
        if want == File::Skip {
            continue;
        }
        let got = read(s, &p)?;
        match (want, got) {
            (File::Exact | File::ExactOrFails, Ok(b)) if b == d => {}
            (File::Fails, Ok(_)) => f.fail(format!(
                "reading /{p} worked; it should fail (the planted object was trusted)"
            )),
            (_, Ok(b)) => f.fail(format!("reading /{p}: {} bytes, not the {} written", b.len(), d.len())),
            (File::Exact, Err(e)) => f.fail(format!("reading /{p} should work: {e}")),
            (_, Err(_)) => {}
        }
    }
    // Names the plant must not make findable.
    let hidden: &[&str] = match (s.target, s.kind) {
        (Target::DirivCopy, Kind::OldCopy) => &["b/f1", "b/f2"],
        (Target::DirivCopy, _) => &["a/g"],
        _ => &[],
    };
    for p in hidden {
        if let Ok(b) = read(s, p)? {
            f.fail(format!(
                "/{p} reads ({} bytes): an entry moved by the attacker is shown under its plain name",
                b.len()
            ));
        }
    }
    if s.target == Target::Content {
        victim(s, f)?;
    }
    writes(s, f)
}

/// The root's listing with the first long name's sidecar planted: the
/// entry is not shown by its plain name (a marked name or none), or the
/// listing fails with EIO; every other entry is shown.
fn sidecar_listing(s: &Scenario, f: &mut Findings) -> Result<(), String> {
    match list(s, "")? {
        Ok(names) => {
            let l1 = long1();
            if names.contains(&l1) {
                f.fail("listing /: shows the long name whose sidecar was planted (the planted sidecar was trusted)");
            } else if names.iter().any(|n| n.ends_with(UNDECRYPTABLE)) {
                f.reached("listing / shows the long-named entry marked undecryptable");
            } else {
                f.fail(format!(
                    "listing /: the long-named entry is neither shown marked nor refused: {names:?}"
                ));
            }
            let miss: Vec<String> = ["file1", VICTIM, "a", "b", &long2()]
                .iter()
                .map(|s| s.to_string())
                .filter(|n| !names.contains(n))
                .collect();
            if !miss.is_empty() {
                f.fail(format!("listing /: other entries missing: {miss:?}"));
            }
        }
        Err(e) if e.raw_os_error() == Some(libc::EIO) => f.reached("listing / failed with EIO"),
        Err(e) => f.fail(format!("listing /: should list or fail with EIO, failed with {e}")),
    }
    Ok(())
}

/// `victim`'s backing file was replaced: what the mount shows of it.
fn victim(s: &mut Scenario, f: &mut Findings) -> Result<(), String> {
    let st = lstat(s, VICTIM)?;
    let kind = s.kind;
    match &st {
        Ok(m) if shows_as(m, kind) => f.reached(format!("/{VICTIM} is shown as the planted {kind:?}")),
        Ok(m) if matches!(kind, Kind::Fifo | Kind::DevNull | Kind::DevZero | Kind::Dir) => f.fail(format!(
            "/{VICTIM}: the planted {kind:?} is shown as {:?} with mode {:o}",
            m.file_type(),
            std::os::unix::fs::PermissionsExt::mode(&m.permissions())
        )),
        Ok(_) => {}
        Err(e) => f.reached(format!("lstat /{VICTIM} failed: {e}")),
    }
    let t = s.t;
    match kind {
        Kind::SymlinkFile | Kind::SymlinkFifo | Kind::SymlinkDevZero | Kind::Dangling => {
            match read(s, VICTIM)? {
                Ok(b) if b == t.victim_old => f.fail(format!(
                    "reading /{VICTIM} returned the content of the file outside CIPHERDIR the planted symlink points to"
                )),
                Ok(b) => f.fail(format!(
                    "reading /{VICTIM} through the planted symlink returned {} bytes; it must fail",
                    b.len()
                )),
                Err(e) => f.reached(format!("reading /{VICTIM} failed: {e}")),
            }
            if let Ok(()) = overwrite(s, VICTIM, &[0xEE; 100])? {
                f.fail(format!(
                    "writing into /{VICTIM} through the planted symlink worked; it must fail"
                ));
            }
        }
        Kind::Fifo => {
            // Opened with O_NONBLOCK: a FIFO the mount shows is the kernel's.
            if st.as_ref().is_ok_and(|m| shows_as(m, kind)) {
                let _ = read(s, VICTIM)?;
            }
        }
        Kind::HardLink => {
            match read(s, VICTIM)? {
                Ok(b) if b == t.files[VICTIM] => f.reached(format!("/{VICTIM} read through the hard link")),
                Ok(b) => f.fail(format!("reading /{VICTIM}: {} bytes, not its content", b.len())),
                Err(e) => f.reached(format!("reading /{VICTIM} failed: {e}")),
            }
            // Whatever it answers, the file outside must stay as it was
            // (the canary says).
            let _ = overwrite(s, VICTIM, &[0xEE; 100])?;
        }
        Kind::OldCopy => match read(s, VICTIM)? {
            Ok(b) if b == t.victim_old => f.reached(format!("/{VICTIM} reads as its older version")),
            Ok(b) if b == t.files[VICTIM] => {}
            Ok(b) => f.fail(format!("reading /{VICTIM}: {} bytes of neither version", b.len())),
            Err(e) => f.reached(format!("reading /{VICTIM} failed: {e}")),
        },
        Kind::Dir => {
            let _ = list(s, VICTIM)?;
        }
        // (Another volume's object is planted at the undo file only.)
        Kind::DevNull | Kind::DevZero | Kind::Foreign => {}
    }
    Ok(())
}

/// New files in each directory the plant leaves writable; each must read
/// back, and is checked again after the unmount.
fn writes(s: &mut Scenario, f: &mut Findings) -> Result<(), String> {
    if matches!(s.target, Target::Conf | Target::RootDiriv) {
        return Ok(());
    }
    let mut places = vec!["w-root", "b/w-b"];
    if s.target != Target::SubDiriv {
        places.push("a/w-a");
    }
    for (i, p) in places.into_iter().enumerate() {
        let d = Rng::new(100 + i as u64).bytes(6_000 + i);
        match create(s, p, &d)? {
            Ok(()) => match read(s, p)? {
                Ok(b) if b == d => {
                    s.written.insert(p.to_string(), d);
                }
                other => f.fail(format!("/{p} written, then read back as {:?}", other.map(|b| b.len()))),
            },
            Err(e) => f.fail(format!("writing a new file /{p} should work: {e}")),
        }
    }
    Ok(())
}

/// After `fsck --repair` on the entry-move attack: the moved entries are
/// still not shown in `b` under their plain names (the repair did not
/// make the move permanent).
pub fn moved_entries_stay_hidden(s: &mut Scenario, f: &mut Findings) {
    let o = match s.scope.run("mount after fsck --repair", || s.v.try_mount(&[])) {
        Ok(o) => o,
        Err(e) => {
            f.fail(format!("Repair: mount afterwards: {e}"));
            return gone(s);
        }
    };
    if !o.ok() {
        f.fail(format!("Repair: the volume no longer mounts: {}", o.stderr.trim()));
        return;
    }
    let r = (|| -> Result<(), String> {
        match list(s, "b")? {
            Ok(names) => {
                let bad: Vec<&str> = ["f1", "f2"]
                    .into_iter()
                    .filter(|n| names.iter().any(|x| x == n))
                    .collect();
                if bad.is_empty() {
                    f.pass("after fsck --repair, b still does not show a's entries by their plain names");
                } else {
                    f.fail(format!(
                        "fsck --repair made the entry move permanent: b now shows {bad:?} ({names:?})"
                    ));
                }
            }
            Err(e) => f.fail(format!("Repair: listing /b afterwards: {e}")),
        }
        Ok(())
    })();
    if let Err(e) = r {
        f.fail(format!("Repair: {e}"));
        return gone(s);
    }
    if let Some(e) = s.unmount_guarded() {
        f.fail(format!("Repair: unmount: {e}"));
    }
}
