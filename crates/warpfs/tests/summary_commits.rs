//! When a mount commits file summaries (FORMAT.md 12.3,
//! docs/decisions/0102-fsync-without-a-commit.md), through real mounts: an
//! fsync syncs the file without a commit, and the mount commits it later
//! while it is still open; a file that keeps changing after its fsync is
//! committed all the same; after an unmount nothing is left uncommitted.
//! The crash states of these commits are checked by
//! `power_loss::summaries`.

#[macro_use]
mod common;

use common::*;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// The commit sequence number of the summary record of the volume's one
/// backing file (read without the key: what the mount last committed).
fn committed_seq(v: &Volume) -> u64 {
    let f = File::open(v.single_backing_file()).unwrap();
    warpfs_content::summary::peek(&f).expect("a summary record").1.seq
}

/// Wait (up to a minute) until the record's sequence reaches `seq`.
fn wait_for_seq(v: &Volume, seq: u64, what: &str) {
    let t0 = Instant::now();
    while committed_seq(v) < seq {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what}: the record stayed at {} (want {seq})",
            committed_seq(v)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn an_fsynced_file_held_open_is_committed_by_the_mount() {
    require_fuse!();
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "on"]);
    v.mount();
    let mut f = File::options()
        .create_new(true)
        .read(true)
        .write(true)
        .open(v.p("f"))
        .unwrap();
    f.write_all(&vec![7u8; 300 * BLOCK as usize]).unwrap();
    f.sync_all().unwrap();
    // Still open: the mount's committer commits it once it holds still.
    wait_for_seq(&v, 1, "an fsynced file held open");
    let seq = committed_seq(&v);
    // Written again and fsynced after every write for longer than the
    // committer lets a changing file go: committed while it changes.
    let t0 = Instant::now();
    let mut i = 0u64;
    while committed_seq(&v) == seq {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "a file fsynced while it keeps changing was never committed"
        );
        f.write_all_at(&[i as u8; 4096], (i % 300) * BLOCK).unwrap();
        f.sync_data().unwrap();
        i += 1;
    }
    drop(f);
    let mut want = vec![7u8; 300 * BLOCK as usize];
    for j in 0..i {
        let at = ((j % 300) * BLOCK) as usize;
        want[at..at + 4096].fill(j as u8);
    }
    v.unmount();
    v.mount();
    assert_bytes_eq(&std::fs::read(v.p("f")).unwrap(), &want, "f after a remount");
    v.unmount();
    let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
    assert!(o.ok(), "fsck after the commits: {o}");
    assert!(
        !o.stdout.contains("changed since the file's last commit"),
        "nothing left uncommitted after an unmount: {o}"
    );
}
