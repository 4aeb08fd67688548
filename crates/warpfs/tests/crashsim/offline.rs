//! Crash states of an offline command, `warpfs upgrade` (FORMAT.md 12.6):
//! the command runs under strace on an unmounted CIPHERDIR, its changes
//! become the model of `persist`, and each crash state picked from it is
//! finished by running `warpfs upgrade` again, then mounted and compared
//! with the plaintext tree the volume holds, and checked by fsck.

use super::fsmodel::FsModel;
use super::ops::{self, Conv};
use super::persist::Model;
use super::record::{Recording, STRING_LIMIT, TRACED};
use super::{states, trace};
use crate::common::*;
use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Run `argv` under strace and model what it changed under `cipher`.
fn record(cipher: &Path, argv: &[OsString], work: &Path) -> Recording {
    let snapshot = FsModel::load(cipher);
    let out = work.join("trace.txt");
    let mut cmd = Command::new("strace");
    cmd.args([
        "-f",
        "-xx",
        "-y",
        "-s",
        STRING_LIMIT,
        "-e",
        &format!("trace={TRACED}"),
        "-o",
    ])
    .arg(&out)
    .arg("--")
    .args(argv);
    // Its output to files that stay (the recorder refuses a descriptor of
    // a deleted file it did not see opened).
    let (o, e) = (work.join("command.out"), work.join("command.err"));
    let status = cmd
        .stdin(std::process::Stdio::null())
        .stdout(fs::File::create(&o).unwrap())
        .stderr(fs::File::create(&e).unwrap())
        .status()
        .expect("run strace");
    assert!(
        status.success(),
        "the recorded command failed ({status}):\n{}{}",
        fs::read_to_string(&o).unwrap_or_default(),
        fs::read_to_string(&e).unwrap_or_default()
    );
    let text = fs::read_to_string(&out).expect("read the trace");
    let calls = trace::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let main = calls.first().expect("a traced call").tid;
    let procs = ops::processes(&calls, &[(main, main)]);
    let mut conv = Conv::new(cipher.as_os_str().as_bytes(), snapshot.clone(), &procs);
    conv.feed(&calls).unwrap_or_else(|e| panic!("recording: {e}"));
    if let Some(d) = FsModel::load(cipher).diff(&conv.model) {
        panic!("replaying the recorded operations does not give the real CIPHERDIR: {d}");
    }
    let model = Model::build(&snapshot, conv.ops);
    Recording {
        snapshot,
        model,
        calls: calls.len(),
    }
}

/// One crash state of an upgrade: run it again (unless the crash came
/// after its end), then the volume must have summaries, show `want` and
/// check clean.
fn check_upgrade_state(
    dir: &Path,
    passfile: &Path,
    mnt: &Path,
    want: &std::collections::BTreeMap<std::path::PathBuf, Node>,
) -> Result<(), String> {
    let conf = fs::read_to_string(dir.join("warpfs.conf")).map_err(|e| format!("warpfs.conf: {e}"))?;
    if !conf.contains("\"file-summary\"") {
        let o = warpfs(args!["upgrade", "--passfile", passfile, dir]);
        if !o.ok() {
            return Err(format!("warpfs upgrade does not finish the state:\n{o}"));
        }
    }
    let conf = fs::read_to_string(dir.join("warpfs.conf")).map_err(|e| format!("warpfs.conf: {e}"))?;
    if !conf.contains("\"file-summary\"") || conf.contains("summary-upgrade") {
        return Err(format!("the config after the upgrade:\n{conf}"));
    }
    let log = dir.with_file_name("state.log");
    let o = warpfs(args!["mount", "--passfile", passfile, "--log-file", &log, dir, mnt]);
    if !o.ok() {
        return Err(format!("the state does not mount:\n{o}"));
    }
    let _dog = Watchdog::start(mnt);
    // A file that does not read back (EIO) is this state's failure, not
    // the test's panic: the mount is taken down and the state kept.
    let got = std::panic::catch_unwind(|| snapshot(mnt));
    unmount_path(mnt)?;
    let got = got.map_err(|e| {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "reading the mount panicked".into());
        format!("{why}; log:\n{}", fs::read_to_string(&log).unwrap_or_default())
    })?;
    if &got != want {
        let differ: Vec<_> = want
            .iter()
            .filter(|(p, n)| got.get(*p) != Some(*n))
            .map(|(p, _)| p.display().to_string())
            .collect();
        return Err(format!(
            "the mount does not show the volume's tree (differ: {differ:?}); log:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        ));
    }
    let o = warpfs(args!["fsck", "--passfile", passfile, dir]);
    if !o.ok() || !o.stdout.contains("fsck: clean") {
        return Err(format!("fsck:\n{o}"));
    }
    Ok(())
}

/// `warpfs upgrade` of a copy of the frozen example volume `name`,
/// recorded, and `WARPFS_CRASH_STATES` of its crash states checked.
pub fn upgrade(name: &str) {
    require_fuse!();
    if warpfs_testkit::skip_if(super::record::unavailable()) {
        return;
    }
    let start = Instant::now();
    let tag = format!("power-loss-upgrade-{name}");
    let mut rng = Rng::for_test(&tag);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/volumes").join(name);
    let v = Volume::blank(Mode::Gcm);
    copy_tree(&src.join("cipher"), &v.cipher);
    fs::copy(src.join("password.txt"), &v.passfile).unwrap();
    let want = snapshot(&src.join("expected"));
    let work = v.root().join("crashsim");
    fs::create_dir(&work).unwrap();
    let argv: Vec<OsString> = args![BIN, "upgrade", "--passfile", &v.passfile, &v.cipher];
    let rec = record(&v.cipher, &argv, &work);
    let budget = super::budget();
    let (mut checked, mut planned) = (0usize, 0usize);
    let mut done = HashSet::new();
    let (dir, mnt) = (work.join("state").join("c"), work.join("mnt"));
    fs::create_dir_all(&mnt).unwrap();
    for plan in states::Planner::new(&rec.model, rng.next_u64()) {
        if checked >= budget || planned >= budget * 50 {
            break;
        }
        planned += 1;
        let state = rec.model.state(&rec.snapshot, &plan.set);
        if !done.insert(state.digest()) {
            continue;
        }
        let _ = fs::remove_dir_all(dir.parent().unwrap());
        fs::create_dir_all(&dir).unwrap();
        state.materialize(&dir);
        if let Err(why) = check_upgrade_state(&dir, &v.passfile, &mnt, &want) {
            let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("crash-state-{tag}"));
            let _ = fs::remove_dir_all(&keep);
            fs::create_dir_all(&keep).unwrap();
            state.materialize(&keep);
            panic!(
                "{tag}: crash state {checked} fails: crash before operation {} of {} ({}), state kept in {}:\n{why}",
                plan.c,
                rec.model.ops.len(),
                plan.how,
                keep.display()
            );
        }
        checked += 1;
    }
    // The budget, unless 50 plans per state wanted gave fewer distinct
    // states (an upgrade of a small volume has few).
    assert!(
        checked >= budget || (planned >= budget * 50 && checked > 0),
        "{tag}: {checked} crash state(s) checked of a budget of {budget}, after {planned} plan(s)"
    );
    eprintln!(
        "{tag}: {checked} crash states checked ({planned} planned) in {:.1} s ({} calls, {} operations, {} units)",
        start.elapsed().as_secs_f64(),
        rec.calls,
        rec.model.ops.len(),
        rec.model.units.len()
    );
    println!("crash states checked: {checked} ({tag})");
}
