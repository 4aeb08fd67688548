//! An online rekey releases the old key generation's engine key: once
//! `warpfs rekey` has moved every file of a mounted volume and finished,
//! `warpfs stats --json` shows the old key retired and released (and its
//! masks gone), while every file, one of them held open across the whole
//! rekey, still reads back byte-exact and takes writes.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use warpfs_engine::StatsSnapshot;

mode_tests!(nonce: online_rekey_retires_the_old_key,);

fn stats(v: &Volume) -> StatsSnapshot {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

fn keys_added(s: &StatsSnapshot) -> u64 {
    s.software_keys + s.hardware_keys + s.twofish_keys + s.xchacha_keys
}

fn online_rekey_retires_the_old_key(mode: Mode) {
    require_fuse!();
    for speculation in ["on", "off"] {
        let mut v = Volume::init(mode);
        v.mount_with(&["--speculation", speculation, "--pool-size", "16"]);
        let mut model = std::collections::BTreeMap::new();
        for (i, len) in [0usize, 1, 4095, 4096, 70_000, 1 << 20, (3 << 20) + 17]
            .into_iter()
            .enumerate()
        {
            let d = Rng::new(i as u64 + 1).bytes(len);
            write_file(&v.p(format!("f{i}")), &d);
            model.insert(format!("f{i}"), d);
        }
        // A file held open across the rekey, read sequentially (its read
        // window makes masks under the old key when speculating).
        let mut held_data = Rng::new(99).bytes(2 << 20);
        write_file(&v.p("held"), &held_data);
        let held = OpenOptions::new().read(true).write(true).open(v.p("held")).unwrap();
        let mut back = vec![0u8; held_data.len()];
        held.read_exact_at(&mut back, 0).unwrap();
        assert!(back == held_data);
        let before = stats(&v);
        assert_eq!(
            (keys_added(&before), before.keys_live, before.keys_retired),
            (1, 1, 0),
            "{speculation}: one key generation before the rekey\n{before}"
        );

        warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]).expect_ok("online rekey");

        // The rekey added the new generation's key and retired the old one:
        // live back to one, and the old key was dropped from memory.
        let after = stats(&v);
        assert_eq!(keys_added(&after), 2, "{speculation}: {after}");
        assert_eq!(
            (after.keys_live, after.keys_retired, after.keys_released),
            (1, 1, 1),
            "{speculation}: the old generation's key was not released\n{after}"
        );
        if speculation == "off" {
            assert_eq!(after.masks_held, 0, "{after}");
        }
        // The handle held across the rekey reads and writes correctly.
        held.read_exact_at(&mut back, 0).unwrap();
        assert!(back == held_data, "{speculation}: held file differs after the rekey");
        let patch = Rng::new(7).bytes(50_000);
        held.write_all_at(&patch, 12_345).unwrap();
        held_data[12_345..12_345 + patch.len()].copy_from_slice(&patch);
        held.write_all_at(b"tail", held_data.len() as u64).unwrap();
        held_data.extend_from_slice(b"tail");
        held.sync_all().unwrap();
        let mut back = vec![0u8; held_data.len()];
        held.read_exact_at(&mut back, 0).unwrap();
        assert!(back == held_data, "{speculation}: held file after writes through it");
        drop(held);
        for (name, d) in &model {
            assert!(fs::read(v.p(name)).unwrap() == *d, "{speculation}: {name} differs");
        }
        assert!(fs::read(v.p("held")).unwrap() == held_data);
        // Still one live key after all that, and after a remount (which
        // reads the config's new generation) everything reads back.
        let end = stats(&v);
        assert_eq!((end.keys_live, end.keys_retired), (1, 1), "{end}");
        v.remount();
        for (name, d) in &model {
            assert!(
                fs::read(v.p(name)).unwrap() == *d,
                "{speculation}: {name} differs after remount"
            );
        }
        assert!(fs::read(v.p("held")).unwrap() == held_data);
        v.unmount();
    }
}
