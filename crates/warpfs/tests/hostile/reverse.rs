//! The reverse config planted in PLAINDIR (`.warpfs.reverse.conf`,
//! FORMAT.md 14): `warpfs mount --reverse` refuses in bounded time naming
//! it, touches nothing outside, and changes nothing in PLAINDIR.

use super::canary::Canary;
use super::expect::{judge, one, Findings, Want};
use super::guard::Scope;
use super::plant::{plant_at, Kind};
use super::scenario::backing_state;
use crate::common::*;
use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The hidden reverse config in PLAINDIR.
pub const HIDDEN: &str = ".warpfs.reverse.conf";

/// A genuine reverse config (made once per test binary; it does not
/// depend on PLAINDIR's path).
fn genuine() -> &'static [u8] {
    static C: OnceLock<Vec<u8>> = OnceLock::new();
    C.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("plain");
        fs::create_dir(&plain).unwrap();
        let pass = d.path().join("pass");
        fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
        let a = args![
            "init",
            "--reverse",
            "--passfile",
            &pass,
            "--kdf-memory",
            "32768",
            "--kdf-iterations",
            "2",
            "--quiet",
            &plain
        ];
        warpfs(a).expect_ok("init --reverse");
        fs::read(plain.join(HIDDEN)).unwrap()
    })
}

pub fn reverse_conf(kind: Kind) {
    require_fuse!();
    let conf = genuine();
    let mut f = Findings::new(format!("{HIDDEN} planted as {kind:?}"));
    let dir = tempfile::Builder::new().prefix("warpfs-test-").tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (plain, view) = (root.join("plain"), root.join("view"));
    fs::create_dir_all(plain.join("sub")).unwrap();
    fs::create_dir(&view).unwrap();
    fs::write(plain.join("hello"), Rng::new(9).bytes(9_000)).unwrap();
    fs::write(plain.join("sub/x"), b"x").unwrap();
    let pass = root.join("pass");
    fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
    let log = root.join("log");
    fs::write(plain.join(HIDDEN), conf).unwrap();
    let mut canary = Canary::new(&root, conf);
    let plant = plant_at(&plain.join(HIDDEN), &canary, kind, conf);
    canary.watch_plant(&plant.path);
    let mut fifos = vec![(canary.fifo.clone(), canary.fifo_own.clone())];
    if kind == Kind::Fifo {
        fifos.push((plant.path.clone(), canary.plant_own.clone()));
    }
    let scope = Scope {
        root: root.clone(),
        mnt: Some(view.clone()),
        fifos,
    };
    let skip: Vec<PathBuf> = vec![plant.path.clone()];
    let before = backing_state(&plain, &skip);
    plant.in_place().unwrap();
    canary.begin();
    let mut c = Command::new(BIN);
    c.args(["mount", "--reverse", "--passfile"])
        .arg(&pass)
        .arg("--log-file")
        .arg(&log)
        .arg(&plain)
        .arg(&view);
    let r = scope.cmd("warpfs mount --reverse", c);
    let win = canary.end();
    if is_mounted(&view) {
        f.fail("the view was mounted with the planted config");
        scope.stop();
    }
    match r {
        Err(e) => f.fail(e),
        Ok(o) => {
            let text = fs::read_to_string(&log).unwrap_or_default();
            match judge(&Want::Refuse(None, vec![one(HIDDEN)]), &o, &text) {
                Ok(_) => f.reached(format!("mount --reverse refused naming {HIDDEN}")),
                Err(e) => f.fail(format!("mount --reverse: {e}\n{o}")),
            }
        }
    }
    for o in win.outside.iter().chain(canary.changed().iter()) {
        f.fail(o.clone());
    }
    if backing_state(&plain, &skip) != before {
        f.fail("PLAINDIR changed");
    }
    f.finish(false);
}
