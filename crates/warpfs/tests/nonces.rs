//! Nonce uniqueness through real mounts (FORMAT.md 3.5): every block write
//! takes a fresh nonce from the volume's write pool, also across remounts
//! (each mount draws a new epoch). Writes and rewrites many blocks (whole
//! blocks, partial blocks, appends, truncation) over three mounts; after
//! each round it scans every cipher file's nonce entries at the FORMAT.md
//! 3.3 offsets and checks that no nonce appears twice, and that a nonce seen
//! in an earlier round only reappears for the same block with the same
//! ciphertext (a block nobody rewrote). Each case runs with speculation on
//! (nonces drawn ahead into the write pool's masks) and off (drawn on
//! demand), each checked in `warpfs stats`.

#[macro_use]
mod common;

use common::*;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

speculation_tests!(nonce: no_nonce_is_used_twice_across_remounts);

/// Where a nonce was seen: file, block, ciphertext.
type Seen = HashMap<[u8; 12], (PathBuf, u64, Vec<u8>)>;

/// Every written block's (nonce, file, block, ciphertext) in the cipher dir.
fn scan(v: &Volume) -> Vec<([u8; 12], PathBuf, u64, Vec<u8>)> {
    let mode = v.mode;
    let mut out = Vec::new();
    for p in v.root_backing_entries() {
        let raw = fs::read(&p).unwrap();
        if raw.is_empty() || !fs::symlink_metadata(&p).unwrap().is_file() {
            continue;
        }
        assert_eq!(&raw[..4], b"WRPF", "{}: not a cipher file", p.display());
        let size = mode
            .plain_size(raw.len() as u64)
            .unwrap_or_else(|| panic!("{}: corrupt length {}", p.display(), raw.len()));
        for b in 0..size.div_ceil(BLOCK) {
            let eo = mode.block_entry_offset(b) as usize;
            let ent = &mode.entry_view(&raw[eo..eo + mode.entry_size() as usize]);
            if ent.iter().all(|&x| x == 0) {
                continue; // a hole
            }
            let mut nonce = [0u8; 12];
            nonce.copy_from_slice(&ent[..12]);
            assert_ne!(
                nonce,
                [0u8; 12],
                "{} block {b}: zero nonce in a written entry",
                p.display()
            );
            let d = mode.block_data_offset(b) as usize;
            let len = (size - b * BLOCK).min(BLOCK) as usize;
            out.push((nonce, p.clone(), b, raw[d..d + len].to_vec()));
        }
    }
    out
}

/// Check one scan: unique within itself, consistent with earlier rounds.
fn check(v: &Volume, seen: &mut Seen, round: usize) -> usize {
    let now = scan(v);
    let mut here: HashMap<[u8; 12], (PathBuf, u64)> = HashMap::new();
    for (nonce, path, b, ct) in &now {
        if let Some((p0, b0)) = here.insert(*nonce, (path.clone(), *b)) {
            panic!(
                "round {round}: nonce {} used by {} block {b0} and {} block {b}",
                hex(nonce),
                p0.display(),
                path.display()
            );
        }
        if let Some((p0, b0, ct0)) = seen.get(nonce) {
            assert!(
                p0 == path && b0 == b && ct0 == ct,
                "round {round}: nonce {} of {} block {b} was already used for {} block {b0} \
                 (same ciphertext: {})",
                hex(nonce),
                path.display(),
                p0.display(),
                ct0 == ct
            );
        }
    }
    for (nonce, path, b, ct) in now.iter().cloned() {
        seen.insert(nonce, (path, b, ct));
    }
    now.len()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .unwrap()
}

fn no_nonce_is_used_twice_across_remounts(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let mut rng = Rng::for_test(&format!("nonces-{}", mode.name()));
    let names = ["big", "small", "grow"];
    let mut models: HashMap<&str, Vec<u8>> = names.iter().map(|n| (*n, Vec::new())).collect();
    let mut seen = Seen::new();
    let mut total = 0;
    for round in 0..3 {
        if round > 0 {
            v.remount();
        }
        // big: 3 MiB + a partial block (nnode, two nonce pages), then
        // rewrites of random whole blocks and unaligned ranges.
        let f = rw(&v.p("big"));
        let m = models.get_mut("big").unwrap();
        if round == 0 {
            let data = rng.bytes((3 << 20) + 5000);
            write_at(&f, 0, &data).unwrap();
            *m = data;
        } else {
            for _ in 0..48 {
                let nblocks = (m.len() as u64).div_ceil(BLOCK);
                let b = rng.below(nblocks);
                let (off, len) = if rng.chance(50) {
                    (b * BLOCK, BLOCK as usize)
                } else {
                    (b * BLOCK + rng.below(BLOCK), 1 + rng.below(6000) as usize)
                };
                let data = rng.bytes(len);
                write_at(&f, off, &data).unwrap();
                let end = off as usize + len;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[off as usize..end].copy_from_slice(&data);
            }
            if round == 2 {
                // Shrink into a block (re-encrypts it), then grow again.
                let cut = m.len() as u64 - 3 * BLOCK - 123;
                f.set_len(cut).unwrap();
                m.truncate(cut as usize);
                let tail = rng.bytes(9000);
                write_at(&f, cut, &tail).unwrap();
                m.extend_from_slice(&tail);
            }
        }
        drop_cache(&f);
        drop(f);
        // small: the same 10 KiB rewritten whole every round.
        let data = rng.bytes(10 * 1024);
        fs::write(v.p("small"), &data).unwrap();
        models.insert("small", data);
        // grow: appends of 100 KiB + a bit (the old last block is redone).
        let f = OpenOptions::new().create(true).append(true).open(v.p("grow")).unwrap();
        let data = rng.bytes(100 * 1024 + 77);
        use std::io::Write;
        (&f).write_all(&data).unwrap();
        models.get_mut("grow").unwrap().extend_from_slice(&data);
        drop_cache(&f);
        drop(f);
        for n in names {
            let f = File::open(v.p(n)).unwrap();
            drop_cache(&f);
            let got = read_at(&f, 0, models[n].len() + 1).unwrap();
            assert_bytes_eq(&got, &models[n], &format!("round {round}: {n}"));
        }
        total = check(&v, &mut seen, round);
        assert_speculation_ran(&v.mnt, mode, &format!("round {round}"));
    }
    v.unmount();
    assert_eq!(check(&v, &mut seen, 3), total);
    let blocks: u64 = models.values().map(|m| (m.len() as u64).div_ceil(BLOCK)).sum();
    assert_eq!(total as u64, blocks, "every block of the three files is written");
    assert!(
        seen.len() > total + 100,
        "rewrites made new nonces: {} seen",
        seen.len()
    );
}
