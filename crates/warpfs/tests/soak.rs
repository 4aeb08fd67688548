//! Soak: random mixed operations on a real mount, every result checked
//! against an in-memory model, with remounts in between (after each
//! remount every file is verified whole). Run by `bench/soak.sh --minutes N`
//! (ignored in a plain `cargo test`; `WARPFS_SOAK_SECS` sets the length,
//! `WARPFS_SOAK_JSON` a file for the counts).
//!
//! Operations: writes (small, block-aligned, large and across nonce
//! pages), reads of random ranges, truncation up and down, hole punching,
//! fsync, renames, unlink + recreate, and whole-file verifies. Half the time
//! runs in `gcm`, half in `ctr`.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::time::{Duration, Instant};

const FILES: usize = 12;
const MAX_SIZE: u64 = 3 * 1024 * 1024;
/// Remount after this many operations.
const REMOUNT_EVERY: u64 = 25_000;

#[derive(Default)]
struct Counts {
    ops: u64,
    failures: u64,
    remounts: u64,
    bytes_written: u64,
    bytes_verified: u64,
    by_op: BTreeMap<&'static str, u64>,
}

struct Soak<'a> {
    v: &'a mut Volume,
    rng: Rng,
    /// Plaintext name -> model contents.
    model: Vec<(String, Vec<u8>)>,
    handles: Vec<Option<File>>,
    c: Counts,
    first_failures: Vec<String>,
}

impl Soak<'_> {
    fn fail(&mut self, what: String) {
        self.c.failures += 1;
        if self.first_failures.len() < 10 {
            eprintln!("SOAK FAILURE: {what}");
            self.first_failures.push(what);
        }
    }

    fn handle(&mut self, i: usize) -> &File {
        if self.handles[i].is_none() {
            self.handles[i] = Some(open_rw(&self.v.p(&self.model[i].0)));
        }
        self.handles[i].as_ref().unwrap()
    }

    fn verify(&mut self, i: usize, ctx: &str) {
        let p = self.v.p(&self.model[i].0);
        match fs::read(&p) {
            Ok(got) if got == self.model[i].1 => self.c.bytes_verified += got.len() as u64,
            Ok(got) => {
                let first = got.iter().zip(&self.model[i].1).position(|(a, b)| a != b);
                let msg = format!(
                    "{ctx}: {} differs: len {} want {}, first diff {first:?}",
                    self.model[i].0,
                    got.len(),
                    self.model[i].1.len()
                );
                self.fail(msg);
                self.model[i].1 = got; // resync so one bug is counted once
            }
            Err(e) => self.fail(format!("{ctx}: read {}: {e}", self.model[i].0)),
        }
    }

    fn step(&mut self) {
        let i = self.rng.below(FILES as u64) as usize;
        let op = self.rng.below(100);
        let size = self.model[i].1.len() as u64;
        let name: &'static str = match op {
            0..=34 => {
                // write: small / aligned / large
                let len = match self.rng.below(3) {
                    0 => self.rng.range(1, 300),
                    1 => BLOCK * self.rng.range(1, 8),
                    _ => self.rng.range(4_000, 300_000),
                };
                let off = if self.rng.chance(30) {
                    size
                } else {
                    let o = self.rng.below(size.saturating_add(64 * 1024).min(MAX_SIZE));
                    if self.rng.chance(40) {
                        o / BLOCK * BLOCK
                    } else {
                        o
                    }
                };
                let len = len.min(MAX_SIZE.saturating_sub(off)).max(1);
                let data = self.rng.bytes(len as usize);
                let r = write_at(self.handle(i), off, &data);
                match r {
                    Ok(()) => {
                        let m = &mut self.model[i].1;
                        let end = (off + len) as usize;
                        if m.len() < end {
                            m.resize(end, 0);
                        }
                        m[off as usize..end].copy_from_slice(&data);
                        self.c.bytes_written += len;
                    }
                    Err(e) => self.fail(format!("write {} @{off}+{len}: {e}", self.model[i].0)),
                }
                "write"
            }
            35..=64 => {
                let off = self.rng.below(size + 10);
                let len = self.rng.range(1, 200_000) as usize;
                let r = read_at(self.handle(i), off, len);
                match r {
                    Ok(got) => {
                        let m = &self.model[i].1;
                        let s = (off as usize).min(m.len());
                        let e = (s + len).min(m.len());
                        if got != m[s..e] {
                            self.fail(format!("read {} @{off}+{len}: content differs", self.model[i].0));
                        } else {
                            self.c.bytes_verified += got.len() as u64;
                        }
                    }
                    Err(e) => self.fail(format!("read {} @{off}+{len}: {e}", self.model[i].0)),
                }
                "read"
            }
            65..=72 => {
                let new = if self.rng.chance(50) {
                    self.rng.below(size + 1)
                } else {
                    self.rng.below(MAX_SIZE)
                };
                let r = self.handle(i).set_len(new);
                match r {
                    Ok(()) => self.model[i].1.resize(new as usize, 0),
                    Err(e) => self.fail(format!("truncate {} to {new}: {e}", self.model[i].0)),
                }
                "truncate"
            }
            73..=78 => {
                if size > 0 {
                    let off = self.rng.below(size);
                    let len = self.rng.range(1, 100_000);
                    let r = fallocate(
                        self.handle(i),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        off,
                        len,
                    );
                    match r {
                        Ok(()) => {
                            let m = &mut self.model[i].1;
                            let e = ((off + len) as usize).min(m.len());
                            m[off as usize..e].fill(0);
                        }
                        Err(e) => self.fail(format!("punch {} @{off}+{len}: {e}", self.model[i].0)),
                    }
                }
                "punch"
            }
            79..=83 => {
                let r = self.handle(i).sync_all();
                if let Err(e) = r {
                    self.fail(format!("fsync {}: {e}", self.model[i].0));
                }
                "fsync"
            }
            84..=89 => {
                // rename to a fresh name (keeping the handle open)
                let new = format!("f{i}-{}", self.rng.next_u64() % 1_000_000);
                let (from, to) = (self.v.p(&self.model[i].0), self.v.p(&new));
                match fs::rename(&from, &to) {
                    Ok(()) => self.model[i].0 = new,
                    Err(e) => self.fail(format!("rename {} -> {new}: {e}", self.model[i].0)),
                }
                "rename"
            }
            90..=93 => {
                // unlink + recreate empty
                self.handles[i] = None;
                let p = self.v.p(&self.model[i].0);
                match fs::remove_file(&p) {
                    Ok(()) => {
                        self.model[i].1.clear();
                        if let Err(e) = File::create(&p) {
                            self.fail(format!("recreate {}: {e}", self.model[i].0));
                        }
                    }
                    Err(e) => self.fail(format!("unlink {}: {e}", self.model[i].0)),
                }
                "unlink"
            }
            _ => {
                self.handles[i] = None;
                self.verify(i, "verify");
                "verify"
            }
        };
        *self.c.by_op.entry(name).or_default() += 1;
        self.c.ops += 1;
    }

    fn remount(&mut self) {
        self.handles.iter_mut().for_each(|h| *h = None);
        self.v.remount();
        self.c.remounts += 1;
        for i in 0..FILES {
            self.verify(i, "after remount");
        }
    }
}

fn soak_mode(mode: Mode, secs: u64, seed_tag: &str, total: &mut Counts) {
    let mut v = Volume::new(mode);
    let mut s = Soak {
        rng: Rng::for_test(seed_tag),
        model: (0..FILES).map(|i| (format!("f{i}"), Vec::new())).collect(),
        handles: (0..FILES).map(|_| None).collect(),
        v: &mut v,
        c: Counts::default(),
        first_failures: Vec::new(),
    };
    for i in 0..FILES {
        File::create(s.v.p(format!("f{i}"))).unwrap();
    }
    let start = Instant::now();
    let mut since = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
        s.step();
        since += 1;
        if since >= REMOUNT_EVERY {
            s.remount();
            since = 0;
        }
    }
    s.remount();
    eprintln!(
        "soak {}: {} ops, {} failures, {} remounts, {:.1} MiB written, {:.1} MiB verified, {:?}",
        mode.name(),
        s.c.ops,
        s.c.failures,
        s.c.remounts,
        s.c.bytes_written as f64 / 1048576.0,
        s.c.bytes_verified as f64 / 1048576.0,
        s.c.by_op
    );
    total.ops += s.c.ops;
    total.failures += s.c.failures;
    total.remounts += s.c.remounts;
    total.bytes_written += s.c.bytes_written;
    total.bytes_verified += s.c.bytes_verified;
    for (k, n) in &s.c.by_op {
        *total.by_op.entry(k).or_default() += n;
    }
    let log = s.v.log();
    drop(s);
    assert!(!log.contains("panicked"), "daemon panicked:\n{log}");
}

#[test]
#[ignore = "long; run by bench/soak.sh"]
fn soak() {
    require_fuse!();
    let secs: u64 = std::env::var("WARPFS_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let t0 = Instant::now();
    let mut total = Counts::default();
    soak_mode(Mode::Gcm, secs / 3, "soak-gcm", &mut total);
    soak_mode(Mode::Ctr, secs / 3, "soak-ctr", &mut total);
    soak_mode(Mode::Xts, secs - 2 * (secs / 3), "soak-xts", &mut total);
    let el = t0.elapsed().as_secs_f64();
    let by_op: Vec<String> = total.by_op.iter().map(|(k, n)| format!("\"{k}\": {n}")).collect();
    let json = format!(
        "{{\"seconds\": {el:.1}, \"ops\": {}, \"failures\": {}, \"remounts\": {}, \"bytes_written\": {}, \
         \"bytes_verified\": {}, \"ops_per_second\": {:.0}, \"by_op\": {{{}}}}}\n",
        total.ops,
        total.failures,
        total.remounts,
        total.bytes_written,
        total.bytes_verified,
        total.ops as f64 / el,
        by_op.join(", ")
    );
    if let Ok(p) = std::env::var("WARPFS_SOAK_JSON") {
        fs::write(p, &json).unwrap();
    }
    eprintln!("soak: {json}");
    assert_eq!(total.failures, 0, "soak found {} failures", total.failures);
}
