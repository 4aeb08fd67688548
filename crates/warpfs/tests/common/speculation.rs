//! Speculation forced on or off for one test (`speculation_tests!`), and
//! the check, through `warpfs stats`, that a mount really runs the engine
//! path it was asked for (a silently ignored flag would pass otherwise).

use super::{warpfs, Mode};
use std::cell::Cell;
use std::path::Path;
use warpfs_engine::StatsSnapshot;

thread_local! {
    /// The `--speculation` value this thread's mounts get, over
    /// `WARPFS_TEST_SPECULATION`.
    static FORCED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// The value [`with_speculation`] set for this thread, if any.
pub fn forced_speculation() -> Option<&'static str> {
    FORCED.with(Cell::get)
}

/// Run `f` with every `warpfs mount` of this thread given `--speculation
/// on` (`on == true`) or `off`, whatever `WARPFS_TEST_SPECULATION` says.
pub fn with_speculation<R>(on: bool, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<&'static str>);
    impl Drop for Reset {
        fn drop(&mut self) {
            FORCED.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(FORCED.with(|c| c.replace(Some(if on { "on" } else { "off" }))));
    f()
}

/// `warpfs stats --json` of the mount at `mnt`.
pub fn stats_at(mnt: &Path) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

/// Assert that the `mode` mount at `mnt`, which has sealed blocks since it
/// was mounted, runs the engine as this thread's forced speculation says:
/// on, worker threads made masks and writes sealed with them (ready or
/// waited for; xts has no masks, its workers split requests); off, no
/// worker and every mask made by the caller. Without a forced value it
/// checks nothing.
pub fn assert_speculation_ran(mnt: &Path, mode: Mode, what: &str) {
    let Some(want) = forced_speculation() else {
        return;
    };
    let s = stats_at(mnt);
    assert_eq!(
        s.speculation_why,
        format!("--speculation {want}"),
        "{what}: the mount did not take the flag:\n{s}"
    );
    if want == "on" {
        assert!(s.speculation && s.threads > 0, "{what}: speculation is not on:\n{s}");
        if mode.base() != Mode::Xts {
            assert!(
                s.made_by_workers > 0 && s.ready_hits + s.waits > 0,
                "{what}: no write sealed with a mask a worker made:\n{s}"
            );
        }
    } else {
        assert!(!s.speculation, "{what}: speculation is on:\n{s}");
        assert_eq!(
            (s.threads, s.made_by_workers, s.ready_hits, s.waits),
            (0, 0, 0, 0),
            "{what}: a worker made masks with speculation off:\n{s}"
        );
    }
}
