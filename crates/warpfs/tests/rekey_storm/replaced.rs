//! Files replaced by rename while an online rekey looks at them: two
//! threads swap files by three renames each (every name is replaced by
//! another file) through a series of online rekeys, and once a rekey has
//! listed the volume each file gets a second name (a hard link), so the
//! rekey counts its links again before it rewrites it. A file replaced
//! between the rekey's looks is another file, which the rekey must leave
//! to its next walk instead of failing; a link missed by a count made
//! while names move must not be taken for one outside CIPHERDIR; and the
//! last look for files behind must not miss one that moved while it
//! listed.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Files swapped over and over.
const FILES: usize = 200;
/// Online rekeys in a row.
const REKEYS: u32 = 4;

/// The first contents of file `k`.
fn contents(k: usize) -> Vec<u8> {
    let mut r = Rng::new(k as u64);
    let len = r.range(1, 3 * BLOCK) as usize;
    r.bytes(len)
}

/// Each online rekey under a storm of renames finishes (a replaced file
/// is moved by a later walk, never an error); every file reads back as
/// swapped, every header is at the last generation (none left behind),
/// and fsck is clean.
#[test]
fn online_rekeys_go_on_while_files_are_replaced_by_rename() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let model = Arc::new(Mutex::new(Model::new()));
    for k in 0..FILES {
        let d = contents(k);
        write_file(&v.p(format!("f{k}")), &d);
        model.lock().unwrap().insert(format!("f{k}"), d);
    }
    let stop = Arc::new(AtomicBool::new(false));
    // Two swappers, each over its own half of the files.
    let swappers: Vec<_> = (0..2)
        .map(|s| {
            let (stop, mnt, model) = (stop.clone(), v.mnt.clone(), model.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                let mut r = Rng::new(s as u64);
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    // Swap two files of this half by three renames: each
                    // name is replaced by another (old) file.
                    let a = s + 2 * r.below(FILES as u64 / 2) as usize;
                    let b = s + 2 * r.below(FILES as u64 / 2) as usize;
                    if a == b {
                        continue;
                    }
                    let (a, b, tmp) = (format!("f{a}"), format!("f{b}"), format!(".swap{s}"));
                    // The model's lock is held over the swap: the links
                    // below never see a name half swapped.
                    let mut m = model.lock().unwrap();
                    for (from, to) in [(&a, &tmp), (&b, &a), (&tmp, &b)] {
                        fs::rename(mnt.join(from), mnt.join(to))
                            .unwrap_or_else(|e| panic!("rename {from} → {to}: {e}"));
                    }
                    let da = m.remove(&a).unwrap();
                    let db = m.insert(b.clone(), da).unwrap();
                    m.insert(a, db);
                }
                n
            })
        })
        .collect();
    let mut failed = Vec::new();
    for gen in 1..=REKEYS {
        let child = spawn_rekey(&v, &["--max-rate", "0.5", "--jobs", "2"]);
        // Once the walk has listed the files, give each a second name: the
        // rekey counts a file's links again before it rewrites it.
        let listed = wait_for(Duration::from_secs(60), || rekey_moving(&v, gen));
        for k in 0..FILES {
            let (f, h) = (format!("f{k}"), format!("h{k}"));
            let mut m = model.lock().unwrap();
            fs::hard_link(v.p(&f), v.p(&h)).unwrap_or_else(|e| panic!("link {f} → {h}: {e}"));
            let d = m[&f].clone();
            m.insert(h, d);
        }
        let (code, out, err) = wait_rekey(child);
        assert!(
            listed,
            "the online rekey to generation {gen} never started moving a file:\n{out}{err}"
        );
        if code != Some(0) {
            failed.push(format!("rekey to generation {gen}: exit {code:?}\n{out}{err}"));
            // Finish it, so the next one starts from a finished rekey.
            rekey_with(&v, &["--jobs", "2"]).expect_ok("the rekey run again");
        }
        for k in 0..FILES {
            fs::remove_file(v.p(format!("h{k}"))).unwrap();
            model.lock().unwrap().remove(&format!("h{k}"));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps: Vec<u64> = swappers
        .into_iter()
        .map(|t| t.join().expect("a swapper failed"))
        .collect();
    eprintln!("{swaps:?} swaps during {REKEYS} online rekeys");
    assert!(
        failed.is_empty(),
        "online rekeys failed under renames:\n{}",
        failed.join("\n")
    );
    let model = model.lock().unwrap().clone();
    assert_all_at_generation(&v, REKEYS, "after the online rekeys");
    assert!(leftovers(&v).is_empty(), "{:?}", leftovers(&v));
    assert_config_final(&v, REKEYS);
    assert_model(&v, &model, "after the online rekeys");
    v.remount();
    assert_model(&v, &model, "after a remount");
    v.unmount();
    fsck(&v).expect_ok("fsck after the online rekeys");
}
