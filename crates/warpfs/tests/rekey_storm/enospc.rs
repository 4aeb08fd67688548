//! A full backing file system in the middle of an online rekey: the cipher
//! dir is a small tmpfs, filled through the mount while the rekey runs, so
//! the rekey (its undo journal needs space) and the writers hit ENOSPC part
//! way; then space is freed and `warpfs rekey` run again finishes.
//!
//! What the test allows, precisely: a file written and fsynced before the
//! disk filled reads back exactly, always (on the full disk, after the
//! rekey, after a remount). A write (O_DIRECT, so its error comes back from
//! the write itself) that succeeded is in the model like any other. A
//! write that failed with ENOSPC may have stored part of itself: each
//! 4 KiB block it touched reads back whole, as before the write or as
//! after it, and the file's size is between the two; no other outcome (no
//! EIO, no block that is neither) is allowed. Any errno other than ENOSPC
//! fails the test.

use super::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};

mode_tests!(online_rekey_with_the_disk_full);

/// Files written and fsynced before the rekey: (count, bytes each).
const KEPT: (usize, usize) = (6, 1_800_000);
/// Files written with O_DIRECT before and while the disk is full.
const WRITTEN: usize = 3;

fn open_direct(p: &Path, create: bool) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_DIRECT)
        .open(p)
        .unwrap_or_else(|e| panic!("open {}: {e}", p.display()))
}

/// Append `chunk`-sized O_DIRECT writes to a new file until the backing
/// file system is full; returns the errno that stopped it.
fn fill(p: &Path, chunk: usize, rng: &mut Rng) -> i32 {
    let f = open_direct(p, true);
    let data = rng.bytes(chunk);
    let mut off = 0u64;
    for _ in 0..100_000 {
        match write_at(&f, off, &data) {
            Ok(()) => off += chunk as u64,
            Err(e) => return errno(&e),
        }
    }
    panic!("{}: the backing file system never filled up", p.display());
}

/// A file written with O_DIRECT: its model, and the model it would have
/// had if the one write that failed with ENOSPC had been stored (after
/// which it is not written again).
struct Written {
    name: String,
    model: Vec<u8>,
    failed: Option<Vec<u8>>,
}

impl Written {
    /// One O_DIRECT write of `d` at `off` (a single pwrite: a short write
    /// counts for what it stored); false if it failed with ENOSPC.
    fn write(&mut self, f: &File, off: usize, d: &[u8]) -> bool {
        let apply = |m: &mut Vec<u8>, d: &[u8]| {
            if off + d.len() > m.len() {
                m.resize(off + d.len(), 0);
            }
            m[off..off + d.len()].copy_from_slice(d);
        };
        match f.write_at(d, off as u64) {
            Ok(n) => {
                apply(&mut self.model, &d[..n]);
                true
            }
            Err(e) => {
                assert_eq!(errno(&e), libc::ENOSPC, "{}: write at {off}: {e}", self.name);
                let mut after = self.model.clone();
                apply(&mut after, d);
                self.failed = Some(after);
                false
            }
        }
    }

    /// `got` is the model, or (after a failed write) block by block the
    /// model before or after that write, its size between the two.
    #[track_caller]
    fn check(&self, got: &[u8], ctx: &str) {
        let ctx = format!("{ctx}: {}", self.name);
        let Some(after) = &self.failed else {
            return assert_bytes_eq(got, &self.model, &ctx);
        };
        let (lo, hi) = (self.model.len().min(after.len()), self.model.len().max(after.len()));
        assert!(
            (lo..=hi).contains(&got.len()),
            "{ctx}: size {} outside {lo}..={hi} (before and after the failed write)",
            got.len()
        );
        for (b, g) in got.chunks(BLOCK as usize).enumerate() {
            let at = |m: &[u8]| {
                let s = (b * BLOCK as usize).min(m.len());
                let mut x = m[s..(s + g.len()).min(m.len())].to_vec();
                x.resize(g.len(), 0);
                x
            };
            assert!(
                g == at(&self.model).as_slice() || g == at(after).as_slice(),
                "{ctx}: block {b} is neither as before nor as after the write that failed with ENOSPC"
            );
        }
    }
}

/// The disk fills during an online rekey: reads of fsynced files go on,
/// writes that need space fail with ENOSPC and nothing else, the rekey
/// fails or finishes; with space freed, a rerun finishes; everything reads
/// back as the rules above allow, at generation 1, before and after a
/// remount, and fsck is clean.
fn online_rekey_with_the_disk_full(mode: Mode) {
    require_fuse!();
    let (mut v, _t) = volume_on_tmpfs(mode, "32m");
    v.mount();
    let mut rng = Rng::for_test(&format!("rekey-storm-enospc-{}", mode.name()));
    let mut kept = Model::new();
    for i in 0..KEPT.0 {
        let d = rng.bytes(KEPT.1);
        write_file(&v.p(format!("kept{i}")), &d);
        kept.insert(format!("kept{i}"), d);
    }
    let mut written: Vec<Written> = (0..WRITTEN)
        .map(|i| Written {
            name: format!("written{i}"),
            model: Vec::new(),
            failed: None,
        })
        .collect();
    for w in &mut written {
        let f = open_direct(&v.p(&w.name), true);
        let len = rng.range(100_000, 400_000) as usize;
        assert!(w.write(&f, 0, &rng.bytes(len)), "{}: write before the fill", w.name);
        f.sync_all().unwrap();
    }
    let child = spawn_rekey(&v, &["--max-rate", "1", "--jobs", "2"]);
    assert!(
        wait_for(Duration::from_secs(60), || rekey_moving(&v, 1)),
        "the online rekey never started moving a file"
    );
    // Fill the disk to its last bytes.
    for (i, chunk) in [1 << 20, 64 << 10, 4 << 10, 512].into_iter().enumerate() {
        let e = fill(&v.p(format!("fill{i}")), chunk, &mut rng);
        assert!(e == libc::ENOSPC, "fill with {chunk}-byte writes: errno {e}");
    }
    // On the full disk: writes in place, across blocks and past the end,
    // each file's until one fails; reads of everything fsynced.
    let mut refused = 0;
    for round in 0..8 {
        for w in written.iter_mut().filter(|w| w.failed.is_none()) {
            let f = open_direct(&v.p(&w.name), false);
            let size = w.model.len() as u64;
            let off = if round % 2 == 0 {
                rng.below(size)
            } else {
                size - rng.below(2 * BLOCK)
            };
            let len = rng.range(1, 3 * BLOCK) as usize;
            let d = rng.bytes(len);
            if !w.write(&f, off as usize, &d) {
                refused += 1;
            }
        }
        for (k, d) in &kept {
            let got = fs::read(v.p(k)).unwrap_or_else(|e| panic!("read {k} on the full disk: {e}"));
            assert_bytes_eq(&got, d, &format!("{k} on the full disk"));
        }
    }
    assert!(refused > 0, "no write past the end failed on the full disk");
    let (code, out, err) = wait_rekey(child);
    eprintln!("{mode:?}: first rekey exit {code:?}\n{out}{err}");
    for i in 0..4 {
        fs::remove_file(v.p(format!("fill{i}"))).unwrap();
    }
    if code == Some(0) {
        eprintln!("{mode:?}: the rekey finished on the full disk; no rerun");
    } else {
        assert_eq!(code, Some(1), "the first rekey:\n{out}{err}");
        assert!(
            err.contains("No space left"),
            "the first rekey failed for another reason than a full disk:\n{out}{err}"
        );
        let o = rekey_with(&v, &["--jobs", "2"]);
        o.expect_ok("the rekey run again once space is free");
        assert!(o.stdout.contains("to key generation 1"), "{o}");
    }
    let check = |v: &Volume, ctx: &str| {
        for (k, d) in &kept {
            let got = fs::read(v.p(k)).unwrap_or_else(|e| panic!("{ctx}: read {k}: {e}"));
            assert_bytes_eq(&got, d, &format!("{ctx}: {k}"));
        }
        for w in &written {
            let got = fs::read(v.p(&w.name)).unwrap_or_else(|e| panic!("{ctx}: read {}: {e}", w.name));
            w.check(&got, ctx);
        }
    };
    assert_all_at_generation(&v, 1, "after the rekey");
    assert!(leftovers(&v).is_empty(), "{:?}", leftovers(&v));
    assert_config_final(&v, 1);
    check(&v, "after the rekey");
    v.remount();
    check(&v, "after a remount");
    assert!(!v.log().contains("panicked"), "the daemon panicked:\n{}", v.log());
    // Space is back: writes work again.
    write_file(&v.p("after"), &[7u8; 50_000]);
    v.unmount();
    assert_all_at_generation(&v, 1, "after unmounting");
    fsck(&v).expect_ok("fsck after the rekey");
}
