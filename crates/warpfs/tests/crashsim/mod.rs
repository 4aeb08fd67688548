//! Crash states after a power loss, as ALICE and CrashMonkey build them
//! (docs/decisions/0006-crash-state-testing.md): record every change the
//! daemon (and `warpfs rekey`) makes to CIPHERDIR during a workload with
//! strace (`record`, `trace`, `ops`), cut it into units that reach the disk
//! on their own under a weak POSIX persistence model (`persist`), pick
//! crash states (`states`), write each one out (`fsmodel`) and check it
//! through the real mount against what the workload may have lost
//! (`oracle`, `check`).
//!
//! `offline` does the same for `warpfs upgrade` run on an unmounted
//! volume.
//!
//! `WARPFS_CRASH_STATES` sets how many distinct states each test checks
//! (default 24); `WARPFS_TEST_SEED` replays a run.

pub mod check;
pub mod exec;
pub mod fsmodel;
pub mod offline;
pub mod ops;
pub mod oracle;
pub mod persist;
pub mod record;
pub mod states;
pub mod trace;
pub mod workload;

use crate::common::*;
use std::collections::HashSet;
use std::ffi::CString;
use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;
use workload::Setup;

const DEFAULT_STATES: usize = 24;

fn budget() -> usize {
    std::env::var("WARPFS_CRASH_STATES")
        .ok()
        .map(|s| s.parse().expect("WARPFS_CRASH_STATES must be a number"))
        .unwrap_or(DEFAULT_STATES)
}

/// Record workload `name` on a fresh `mode` volume and check crash states.
pub fn run(mode: Mode, name: &str) {
    run_with(mode, name, &[])
}

/// [`run`] on a volume made with `extra` arguments of `warpfs init` (e.g.
/// `--file-summary on`).
pub fn run_with(mode: Mode, name: &str, extra: &[&str]) {
    require_fuse!();
    if warpfs_testkit::skip_if(record::unavailable()) {
        return;
    }
    let start = Instant::now();
    let suffix = if extra.is_empty() { "" } else { "-summaries" };
    let tag = format!("power-loss-{name}-{}{suffix}", mode.name());
    let mut rng = Rng::for_test(&tag);
    let w = workload::make(name, &mut rng);
    let mut v = Volume::blank(mode);
    // The weakest KDF accepted: every state costs a mount (and some an
    // fsck and a rekey), each one Argon2id run.
    warpfs(
        args![
            "init",
            "--passfile",
            &v.passfile,
            "--kdf-memory",
            "32768",
            "--kdf-iterations",
            "2",
            &v.cipher
        ]
        .into_iter()
        .chain(mode.init_args().into_iter().map(std::ffi::OsString::from))
        .chain(extra.iter().map(std::ffi::OsString::from))
        .collect::<Vec<_>>(),
    )
    .expect_ok("warpfs init");
    v.mount();
    for s in &w.setup {
        match s {
            Setup::Dir(p) => fs::create_dir(v.p(p)).unwrap(),
            Setup::File(p, d) => {
                fs::write(v.p(p), d).unwrap();
                File::open(v.p(p)).unwrap().sync_all().unwrap();
            }
        }
    }
    let work = v.root().join("crashsim");
    fs::create_dir(&work).unwrap();
    let rekey: Vec<CString> = [
        BIN.as_bytes(),
        b"rekey",
        b"--passfile",
        v.passfile.as_os_str().as_bytes(),
        b"--jobs",
        b"2",
        b"--max-rate",
        b"1",
        v.cipher.as_os_str().as_bytes(),
    ]
    .iter()
    .map(|a| CString::new(*a).unwrap())
    .collect();
    let daemon = v.daemon_pids()[0];
    let rec = record::record(&v.cipher, &v.mnt, daemon, &w.steps, &rekey, &work);
    assert_speculation_ran(&v.mnt, mode, &format!("{tag}: the recorded mount"));
    v.unmount();
    let recorded = start.elapsed();

    let oracle = oracle::Oracle::new(&w);
    let mut checker = check::Checker::new(mode, &oracle, &v.passfile, &work);
    let want = budget();
    let (mut checked, mut planned) = (0usize, 0usize);
    let mut done: HashSet<(u64, usize)> = HashSet::new();
    let mut points = HashSet::new();
    // Finished workload steps at each planned crash point: states with
    // different counts are never duplicates of each other.
    let mut acked = HashSet::new();
    let dir = work.join("state");
    for plan in states::Planner::new(&rec.model, rng.next_u64()) {
        if checked >= want || planned >= want * 50 {
            break;
        }
        planned += 1;
        let a = rec.model.acked(plan.c);
        acked.insert(a);
        let state = rec.model.state(&rec.snapshot, &plan.set);
        if !done.insert((state.digest(), a)) {
            continue;
        }
        points.insert(plan.c);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        state.materialize(&dir);
        if let Err(why) = checker.check(&dir, a) {
            let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("crash-state-{tag}"));
            let _ = fs::remove_dir_all(&keep);
            fs::create_dir_all(&keep).unwrap();
            state.materialize(&keep);
            panic!(
                "{tag}: crash state {checked} fails: crash before operation {} of {} ({}: {:?}), {a} of {} steps finished ({:?} in flight), state kept in {}:\n{why}",
                plan.c,
                rec.model.ops.len(),
                plan.how,
                rec.model.ops.get(plan.c.saturating_sub(1)).map(op_name),
                oracle.steps,
                w.steps.get(a).map(step_name),
                keep.display()
            );
        }
        checked += 1;
    }
    let _ = fs::remove_dir_all(&dir);
    // The budget, unless 50 plans per state wanted gave fewer distinct
    // states (a small workload): then still at least one state per count
    // of finished steps the plans reached. A planner that stops early, or
    // a check that drops states as duplicates, fails here.
    assert!(
        checked >= want || (planned >= want * 50 && checked >= acked.len()),
        "{tag}: {checked} crash state(s) checked of a budget of {want}, after {planned} plan(s) \
         reaching {} count(s) of finished steps",
        acked.len()
    );
    let t = &checker.totals;
    eprintln!(
        "{tag}: {checked} crash states checked ({} crash points, {planned} planned) in {:.1} s \
         (recording {:.1} s: {} calls, {} operations, {} units); {} EIO blocks all named by fsck ({} runs); {} states mid-segment with an undo record, {} rekeys finished",
        points.len(),
        start.elapsed().as_secs_f64(),
        recorded.as_secs_f64(),
        rec.calls,
        rec.model.ops.len(),
        rec.model.units.len(),
        t.eio_blocks,
        t.fsck_runs,
        t.journals,
        t.rekeys
    );
    println!("crash states checked: {checked} ({tag})");
}

fn op_name(op: &ops::BOp) -> String {
    let s = format!("{op:?}");
    s.chars().take(160).collect()
}

fn step_name(s: &workload::Step) -> String {
    let s = format!("{s:?}");
    s.chars().take(120).collect()
}
