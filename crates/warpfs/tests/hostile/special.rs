//! The cases that do not fit the matrix: a damaged `warpfs.conf` beside an
//! older genuine copy, a backing name with an arbitrary tail, the lock
//! file control, and `fsck`'s repairs on a damaged file that is a link to
//! a file outside CIPHERDIR.

use super::canary::Canary;
use super::expect::{judge, one, Findings, Op, Want};
use super::fixture::{long2, template, VICTIM};
use super::guard::Scope;
use super::plant::{conf_copy_name, Kind, Target, CONFLICT};
use super::scenario::Scenario;
use super::session::{list, read};
use crate::common::*;
use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

/// How `warpfs.conf` is damaged.
#[derive(Clone, Copy, Debug)]
pub enum Flip {
    /// Its first byte (`{` becomes `z`): not JSON any more.
    Json,
    /// One character of the wrapped key: valid JSON whose key does not
    /// unwrap, as with a wrong password.
    WrappedKey,
}

fn damage(conf: &Path, how: Flip) {
    let mut b = fs::read(conf).unwrap();
    let i = match how {
        Flip::Json => 0,
        Flip::WrappedKey => {
            let s = String::from_utf8_lossy(&b).into_owned();
            s.find("\"ciphertext\": \"").expect("ciphertext field") + 20
        }
    };
    b[i] = match (how, b[i]) {
        (Flip::Json, c) => c ^ 0x01,
        (Flip::WrappedKey, b'A') => b'B',
        (Flip::WrappedKey, _) => b'A',
    };
    let _ = fs::remove_file(conf);
    fs::write(conf, &b).unwrap();
}

/// `warpfs.conf` with one byte changed and the config from before the
/// rekey present as a sync tool's copy: every command exits 11; the mount
/// names both files and never mounts with the copy.
pub fn conf_flipped_beside_older_copy(how: Flip, mode: Mode) {
    require_fuse!();
    let t = template(mode);
    let mut f = Findings::new(format!(
        "warpfs.conf damaged ({how:?}) beside an older genuine copy ({})",
        mode.name()
    ));
    for op in [Op::Mount, Op::Fsck, Op::Rekey, Op::Passwd] {
        let mut s = Scenario::new(t, Target::ConfCopy, Kind::OldCopy);
        let conf = s.v.cipher.join("warpfs.conf");
        damage(&conf, how);
        let names = if op == Op::Mount {
            vec![one("warpfs.conf"), one(conf_copy_name())]
        } else {
            vec![one("warpfs.conf")]
        };
        let w = Want::Refuse(Some(11), names);
        let newpass = s.v.root().join("newpass");
        fs::write(&newpass, "another password\n").unwrap();
        let mut c = Command::new(BIN);
        match op {
            Op::Mount => {
                c.args(["mount", "--log-file"]).arg(&s.v.logfile);
            }
            Op::Fsck => {
                c.arg("fsck");
            }
            Op::Rekey => {
                c.args(["rekey", "--jobs", "1"]);
            }
            _ => {
                c.args(["passwd", "--new-passfile"]).arg(&newpass);
            }
        }
        c.arg("--passfile").arg(&s.v.passfile).arg(&s.v.cipher);
        if op == Op::Mount {
            c.arg(&s.v.mnt);
        }
        let r = s.scope.cmd(&format!("warpfs {op:?}"), c);
        if is_mounted(&s.v.mnt) {
            f.fail(format!("{op:?}: the volume was mounted (with the older copy)"));
            s.scope.stop();
        }
        match r {
            Err(e) => f.fail(format!("{op:?}: {e}")),
            Ok(out) => {
                let log = s.v.log();
                s.check(op, &w, &out, &log, &mut f)
            }
        }
        // No data lost: the genuine config back, every file reads.
        s.plant.remove();
        fs::remove_file(&conf).unwrap();
        fs::write(&conf, t.read("warpfs.conf")).unwrap();
        if let Err(e) = s.read_everything() {
            f.fail(format!("{op:?}: data lost afterwards: {e}"));
        }
    }
    f.finish(false);
}

/// A backing name followed by a tail of no documented sync-tool form
/// (`.evil`) is never shown as the plaintext name followed by the tail; a
/// Syncthing conflict copy beside it is (the control).
pub fn arbitrary_tail_is_not_a_copy(mode: Mode) {
    require_fuse!();
    let t = template(mode);
    let mut f = Findings::new(format!("backing names with an arbitrary tail ({})", mode.name()));
    let mut s = Scenario::unplanted(t);
    let file1 = s.v.cipher.join(t.rel("file1"));
    let long = s.v.cipher.join(t.rel(&long2()));
    let evil = format!("{}.evil", file1.display());
    let control = format!("{}{CONFLICT}", file1.display());
    fs::copy(&file1, &evil).unwrap();
    fs::copy(&file1, &control).unwrap();
    fs::copy(&long, format!("{}.evil", long.display())).unwrap();
    let r = s.scope.run("warpfs mount", || s.v.try_mount(&[]));
    match r {
        Ok(o) if o.ok() => {}
        Ok(o) => panic!("mount failed\n{o}"),
        Err(e) => panic!("{e}"),
    }
    let shown_control = format!("file1{CONFLICT}");
    let evil_names = ["file1.evil".to_string(), format!("{}.evil", long2())];
    let mut body = || -> Result<(), String> {
        let names = list(&s, "")?.map_err(|e| format!("listing /: {e}"))?;
        if names.contains(&shown_control) {
            f.reached("the Syncthing conflict copy is shown with its marker (control)");
            match read(&s, &shown_control)? {
                Ok(b) if b == t.files["file1"] => {}
                other => f.fail(format!("the conflict copy reads as {:?}", other.map(|b| b.len()))),
            }
        } else {
            f.fail(format!(
                "control: the conflict copy {shown_control} is not shown: {names:?}"
            ));
        }
        for n in &evil_names {
            if names.contains(n) {
                f.fail(format!("listing /: shows {n}: a backing name with an arbitrary tail is shown as the decrypted name plus the tail"));
            }
            if let Ok(b) = read(&s, n)? {
                f.fail(format!("/{n} reads ({} bytes): found by lookup as a copy", b.len()));
            }
        }
        Ok(())
    };
    if let Err(e) = body() {
        f.fail(e);
        s.scope.stop();
        super::guard::lazy_unmount(&s.v.mnt);
        s.v.daemon_stopped();
    } else if let Some(e) = s.unmount_guarded() {
        f.fail(format!("unmount: {e}"));
    }
    f.finish(false);
}

/// Control for the lock cells: with a regular `warpfs.lock` whose flock
/// another process holds, mount, fsck and rekey refuse: each of them does
/// look at `warpfs.lock`.
pub fn lock_is_looked_at_by_every_command() {
    require_fuse!();
    let t = template(Mode::Gcm);
    let mut f = Findings::new("warpfs.lock held by another process (control)");
    let s = Scenario::unplanted(t);
    let lock = fs::File::create(s.v.cipher.join("warpfs.lock")).unwrap();
    // SAFETY: flock on a descriptor we own.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    for (op, args) in [
        (Op::Mount, vec!["mount"]),
        (Op::Fsck, vec!["fsck"]),
        (Op::Rekey, vec!["rekey", "--jobs", "1"]),
    ] {
        let mut c = Command::new(BIN);
        c.args(&args).arg("--passfile").arg(&s.v.passfile).arg(&s.v.cipher);
        if op == Op::Mount {
            c.arg(&s.v.mnt);
        }
        match s.scope.cmd(&format!("warpfs {op:?}"), c) {
            Err(e) => f.fail(format!("{op:?}: {e}")),
            Ok(o) if o.code.is_some_and(|c| c != 0) && !is_mounted(&s.v.mnt) => {
                f.reached(format!("{op:?} refused while warpfs.lock is held"))
            }
            Ok(o) => f.fail(format!("{op:?} did not refuse while warpfs.lock is held\n{o}")),
        }
        if is_mounted(&s.v.mnt) {
            s.scope.stop();
        }
    }
    drop(lock);
    f.finish(false);
}

/// Cut `bytes` (a cipher file of 20 blocks) into the first nonce page
/// (a torn tail) and, where the mode has tags, change one byte of block 3.
fn damaged(mode: Mode, bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    if mode.base() == Mode::Gcm {
        b[mode.block_data_offset(3) as usize + 7] ^= 0x04;
    }
    b.truncate((mode.backing_len(16 * BLOCK) + mode.page_size() / 2) as usize);
    b
}

const REPAIRS: [&[&str]; 3] = [
    &["--zero-bad-blocks"],
    &["--fix-torn-tails"],
    &["--repair", "--zero-bad-blocks", "--fix-torn-tails"],
];

/// The damaged file (`victim`) is a symlink or a hard link to a damaged
/// file outside CIPHERDIR when `fsck` runs with its repairs: nothing
/// outside changes. The control: the same damage on the regular file in
/// CIPHERDIR is repaired by the same options.
pub fn fsck_repairs_never_write_outside(mode: Mode) {
    require_fuse!();
    let t = template(mode);
    let mut f = Findings::new(format!(
        "fsck repairs of a damaged file linked outside ({})",
        mode.name()
    ));
    let bad = damaged(mode, &t.read(t.rel(VICTIM)));
    for opts in REPAIRS {
        // ctr has no tags: no block is known bad, only the tail is torn.
        if mode.base() != Mode::Gcm && opts == ["--zero-bad-blocks"] {
            continue;
        }
        let s = Scenario::unplanted(t);
        let back = s.v.cipher.join(t.rel(VICTIM));
        fs::remove_file(&back).unwrap();
        fs::write(&back, &bad).unwrap();
        match run_fsck(&s.scope, &s.v.passfile, &s.v.cipher, opts) {
            Ok(o) if matches!(o.code, Some(20 | 21)) && fs::read(&back).unwrap() != bad => {
                f.reached(format!("control: fsck {opts:?} repairs the damaged regular file"))
            }
            Ok(o) => f.fail(format!(
                "control: fsck {opts:?} did not repair the damaged regular file\n{o}"
            )),
            Err(e) => f.fail(format!("control: {e}")),
        }
    }
    for kind in [Kind::SymlinkFile, Kind::HardLink] {
        for opts in REPAIRS {
            let s = Scenario::unplanted(t);
            let croot = s.v.root().join("damaged");
            fs::create_dir(&croot).unwrap();
            let mut canary = Canary::new(&croot, &bad);
            let back = s.v.cipher.join(t.rel(VICTIM));
            fs::remove_file(&back).unwrap();
            match kind {
                Kind::SymlinkFile => std::os::unix::fs::symlink(&canary.file, &back).unwrap(),
                _ => fs::hard_link(&canary.file, &back).unwrap(),
            }
            canary.begin();
            let out = run_fsck(&s.scope, &s.v.passfile, &s.v.cipher, opts);
            let w = canary.end();
            let what = format!("{kind:?}, fsck {}", opts.join(" "));
            for o in w.outside.iter().chain(canary.changed().iter()) {
                f.fail(format!("{what}: {o}"));
            }
            match out {
                Err(e) => f.fail(format!("{what}: {e}")),
                Ok(o) => match judge(&Want::Either(vec![one(VICTIM)]), &o, "") {
                    Ok(_) if o.stdout.contains(VICTIM) => f.reached(format!("{what} reported /{VICTIM}")),
                    Ok(_) => f.fail(format!("{what}: /{VICTIM} is not reported\n{o}")),
                    Err(e) => f.fail(format!("{what}: {e}")),
                },
            }
        }
    }
    f.finish(false);
}

fn run_fsck(scope: &Scope, pass: &Path, cipher: &Path, opts: &[&str]) -> Result<Out, String> {
    let mut c = Command::new(BIN);
    c.arg("fsck").args(opts).arg("--passfile").arg(pass).arg(cipher);
    scope.cmd(&format!("warpfs fsck {}", opts.join(" ")), c)
}
