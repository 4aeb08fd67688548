//! Attacks on the cipher dir as tests (`gcm` and `xchacha20-poly1305`;
//! SECURITY.md "What a CIPHERDIR writer can and cannot do").
//!
//! An attacker with write access to CIPHERDIR edits it while the volume is
//! unmounted; then it is mounted and every tampered file is read:
//!
//! - `detected`: each attack that the format detects gives EIO (never the
//!   bytes) and a log line naming the plaintext path;
//! - `undetectable_by_design` (tests/undetectable.rs): what the format
//!   does not detect shows the documented behaviour;
//! - `config_edits_are_refused`: weakened KDF parameters and flipped
//!   feature flags or modes make `mount` refuse the volume;
//! - `keys_locked_in_memory`: the running daemon has locked memory (VmLck).

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const MODE: Mode = Mode::Gcm;

fn backing_by_size(v: &Volume, size: u64) -> PathBuf {
    let want = MODE.backing_len(size);
    let found: Vec<PathBuf> = v
        .backing_paths()
        .into_iter()
        .filter(|p| {
            let md = fs::symlink_metadata(p).unwrap();
            md.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.") && md.len() == want
        })
        .collect();
    assert_eq!(found.len(), 1, "one backing file of length {want}: {found:?}");
    found.into_iter().next().unwrap()
}

fn read_range(p: &Path, off: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    File::open(p).unwrap().read_exact_at(&mut b, off).unwrap();
    b
}

fn write_range(p: &Path, off: u64, data: &[u8]) {
    let f = OpenOptions::new().write(true).open(p).unwrap();
    f.write_all_at(data, off).unwrap();
}

fn flip(p: &Path, off: u64, mask: u8) {
    let mut b = read_range(p, off, 1);
    b[0] ^= mask;
    write_range(p, off, &b);
}

/// Whether the log has a line matching `pred`. The daemon logs a corrupt
/// block or header (unbuffered) before it replies EIO: once the failed call
/// returned, the line is there.
fn log_has(v: &Volume, pred: impl Fn(&str) -> bool) -> bool {
    v.log().lines().any(pred)
}

/// Size of test file `i`: 20 blocks plus `i` bytes (unique backing lengths).
fn size_of(i: u64) -> u64 {
    20 * BLOCK + i
}

/// One attack on the backing file(s) of test files; `bad` are the blocks
/// that must read as EIO (`None`: opening or every read fails). `sums`:
/// the attack changes the file's nonces or size, so with file summaries
/// (FORMAT.md 12) every read of the file fails instead.
struct Attack {
    name: &'static str,
    file: u64,
    bad: Option<Vec<u64>>,
    sums: bool,
    apply: Box<dyn Fn(&Volume)>,
}

/// A volume of `mode` (the gcm layout: `gcm` or `xchacha20-poly1305`):
/// with file summaries (`init --file-summary on`) or without them (the
/// default: format 1's layout).
fn volume(mode: Mode, summary: bool) -> Volume {
    assert_eq!(mode.base(), MODE, "the attacks address the gcm layout");
    let mut v = if summary {
        Volume::init_with(mode, &["--file-summary", "on"])
    } else {
        Volume::init_with(mode, &["--file-summary", "off"])
    };
    v.mount();
    v
}

mod detected {
    use super::Mode;
    #[test]
    fn with_summaries() {
        super::detected(Mode::Gcm, true)
    }
    #[test]
    fn without_summaries() {
        super::detected(Mode::Gcm, false)
    }
    #[test]
    fn xchacha20_poly1305_with_summaries() {
        super::detected(Mode::XChaCha20Poly1305, true)
    }
    #[test]
    fn xchacha20_poly1305_without_summaries() {
        super::detected(Mode::XChaCha20Poly1305, false)
    }
}

/// Every attack on a volume of `mode` (AES-GCM or XChaCha20-Poly1305:
/// the same layout, FORMAT.md 15) is EIO and a log line.
fn detected(mode: Mode, summary: bool) {
    require_fuse!();
    let mut v = volume(mode, summary);
    let mut rng = Rng::for_test("attacks");
    let e = MODE.entry_size();
    let (d, en) = (|b| MODE.block_data_offset(b), |b| MODE.block_entry_offset(b));
    let bk = move |v: &Volume, i: u64| backing_by_size(v, size_of(i));
    let mut attacks: Vec<Attack> = vec![
        Attack {
            name: "bit flipped in data (nnode block)",
            file: 1,
            bad: Some(vec![3]),
            sums: false,
            apply: Box::new(move |v| flip(&bk(v, 1), d(3) + 7, 0x01)),
        },
        Attack {
            name: "bit flipped in data (page block)",
            file: 2,
            bad: Some(vec![17]),
            sums: false,
            apply: Box::new(move |v| flip(&bk(v, 2), d(17) + 4095, 0x80)),
        },
        Attack {
            name: "bit flipped in a tag",
            file: 3,
            bad: Some(vec![4]),
            sums: false,
            apply: Box::new(move |v| flip(&bk(v, 3), en(4) + 16, 0x01)),
        },
        Attack {
            name: "bit flipped in a nonce",
            file: 4,
            bad: Some(vec![5]),
            sums: true,
            apply: Box::new(move |v| flip(&bk(v, 4), en(5), 0x01)),
        },
        Attack {
            name: "bit flipped in a page nonce entry",
            file: 5,
            bad: Some(vec![18]),
            sums: true,
            apply: Box::new(move |v| flip(&bk(v, 5), en(18) + 11, 0x10)),
        },
        Attack {
            name: "tag zeroed (nonce kept)",
            file: 6,
            bad: Some(vec![2]),
            sums: false,
            apply: Box::new(move |v| write_range(&bk(v, 6), en(2) + 16, &[0u8; 16])),
        },
        Attack {
            name: "nonce zeroed (tag kept)",
            file: 7,
            bad: Some(vec![2]),
            sums: true,
            apply: Box::new(move |v| write_range(&bk(v, 7), en(2), &[0u8; 16])),
        },
        Attack {
            name: "block (data + entry) copied to another offset",
            file: 8,
            bad: Some(vec![9]),
            sums: true,
            apply: Box::new(move |v| {
                let p = bk(v, 8);
                let (dd, ee) = (read_range(&p, d(8), 4096), read_range(&p, en(8), e as usize));
                write_range(&p, d(9), &dd);
                write_range(&p, en(9), &ee);
            }),
        },
        Attack {
            name: "block copied from another file (same offset)",
            file: 9,
            bad: Some(vec![6]),
            sums: true,
            apply: Box::new(move |v| {
                let (src, dst) = (bk(v, 10), bk(v, 9));
                write_range(&dst, d(6), &read_range(&src, d(6), 4096));
                write_range(&dst, en(6), &read_range(&src, en(6), e as usize));
            }),
        },
        Attack {
            name: "two nonce entries swapped",
            file: 11,
            bad: Some(vec![2, 4]),
            sums: true,
            apply: Box::new(move |v| {
                let p = bk(v, 11);
                let (a, b) = (read_range(&p, en(2), e as usize), read_range(&p, en(4), e as usize));
                write_range(&p, en(2), &b);
                write_range(&p, en(4), &a);
            }),
        },
        Attack {
            name: "two blocks (data + entries) swapped",
            file: 12,
            bad: Some(vec![10, 11]),
            sums: true,
            apply: Box::new(move |v| {
                let p = bk(v, 12);
                let (da, db) = (read_range(&p, d(10), 4096), read_range(&p, d(11), 4096));
                let (ea, eb) = (read_range(&p, en(10), e as usize), read_range(&p, en(11), e as usize));
                write_range(&p, d(10), &db);
                write_range(&p, d(11), &da);
                write_range(&p, en(10), &eb);
                write_range(&p, en(11), &ea);
            }),
        },
        Attack {
            name: "file ID in the header flipped",
            file: 13,
            bad: None,
            sums: true,
            apply: Box::new(move |v| flip(&bk(v, 13), 12, 0x02)),
        },
        Attack {
            name: "header magic flipped",
            file: 14,
            bad: None,
            sums: true,
            apply: Box::new(move |v| flip(&bk(v, 14), 0, 0x01)),
        },
        Attack {
            name: "header mode byte changed to ctr",
            file: 15,
            bad: None,
            sums: true,
            apply: Box::new(move |v| write_range(&bk(v, 15), 6, &[Mode::Ctr.mode_byte()])),
        },
        Attack {
            name: "headers swapped between two files",
            file: 16,
            bad: None,
            sums: true,
            apply: Box::new(move |v| {
                let (a, b) = (bk(v, 16), bk(v, 17));
                let (ha, hb) = (read_range(&a, 0, 32), read_range(&b, 0, 32));
                write_range(&a, 0, &hb);
                write_range(&b, 0, &ha);
            }),
        },
        Attack {
            name: "backing file cut inside the last block",
            file: 18,
            bad: Some(vec![19]),
            sums: true,
            apply: Box::new(move |v| {
                let p = bk(v, 18);
                let len = fs::metadata(&p).unwrap().len();
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(len - 100)
                    .unwrap();
            }),
        },
        Attack {
            name: "backing file cut inside the header",
            file: 19,
            bad: None,
            sums: true,
            apply: Box::new(move |v| {
                OpenOptions::new()
                    .write(true)
                    .open(bk(v, 19))
                    .unwrap()
                    .set_len(200)
                    .unwrap();
            }),
        },
        Attack {
            name: if summary {
                "block rolled back: its old ciphertext and nonce entry put back together (replay within the file)"
            } else {
                "data of a block replaced by its old ciphertext (replay within the file)"
            },
            file: 20,
            bad: Some(vec![1]),
            sums: true,
            // Prepared below: the old ciphertext and entry of block 1 are
            // saved before the block is rewritten through the mount. Without
            // summaries only the data is replayed (the old entry with it is
            // not detected: undetectable_by_design).
            apply: Box::new(move |v| {
                let old = fs::read(v.root().join("old-block-1")).unwrap();
                write_range(&bk(v, 20), d(1), &old);
                if summary {
                    let old_e = fs::read(v.root().join("old-entry-1")).unwrap();
                    write_range(&bk(v, 20), en(1), &old_e);
                }
            }),
        },
    ];
    // A page-1 block (file of 300 blocks).
    let big = rng.bytes(300 * BLOCK as usize + 77);
    write_file(&v.p("big"), &big);
    attacks.push(Attack {
        name: "bit flipped in a page-1 nonce entry",
        file: 0,
        bad: Some(vec![290]),
        sums: false,
        apply: Box::new(move |v| flip(&backing_by_size(v, 300 * BLOCK + 77), en(290) + 20, 0x04)),
    });
    let mut contents = std::collections::BTreeMap::new();
    for i in 1..=20u64 {
        let data = rng.bytes(size_of(i) as usize);
        write_file(&v.p(format!("f{i:02}")), &data);
        contents.insert(i, data);
    }
    contents.insert(0, big);
    // Replay: save block 1's ciphertext, then rewrite block 1.
    let old = read_range(&backing_by_size(&v, size_of(20)), d(1), 4096);
    fs::write(v.root().join("old-block-1"), old).unwrap();
    let old_e = read_range(&backing_by_size(&v, size_of(20)), en(1), e as usize);
    fs::write(v.root().join("old-entry-1"), old_e).unwrap();
    {
        let f = open_rw(&v.p("f20"));
        let newb = rng.bytes(4096);
        write_at(&f, BLOCK, &newb).unwrap();
        f.sync_all().unwrap();
        contents.get_mut(&20).unwrap()[4096..8192].copy_from_slice(&newb);
    }
    v.unmount();
    for a in &attacks {
        (a.apply)(&v);
    }
    v.mount();
    let mut detected = 0;
    for a in &attacks {
        let plain = if a.file == 0 {
            "big".to_string()
        } else {
            format!("f{:02}", a.file)
        };
        let want = &contents[&a.file];
        let ctx = format!("attack `{}` on /{plain}", a.name);
        let bad = if summary && a.sums { &None } else { &a.bad };
        match bad {
            None => {
                // The header is bad: opening or every read fails with EIO.
                let r = File::open(v.p(&plain)).and_then(|f| read_at(&f, 0, 4096));
                assert_errno(r, libc::EIO, &ctx);
                let r = fs::read(v.p(&plain));
                assert_errno(r, libc::EIO, &ctx);
            }
            Some(bad) => {
                let f = File::open(v.p(&plain)).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
                let n = want.len() as u64;
                for b in 0..n.div_ceil(BLOCK) {
                    let r = read_at(&f, b * BLOCK, BLOCK as usize);
                    if bad.contains(&b) {
                        assert_errno(r, libc::EIO, &format!("{ctx}: block {b}"));
                    } else if a.name.starts_with("backing file cut") {
                        // Other blocks still read (the size shrank by 100 bytes).
                        r.unwrap_or_else(|e| panic!("{ctx}: block {b}: {e}"));
                    } else {
                        let got = r.unwrap_or_else(|e| panic!("{ctx}: untampered block {b}: {e}"));
                        let s = (b * BLOCK) as usize;
                        assert_bytes_eq(&got, &want[s..(s + BLOCK as usize).min(want.len())], &ctx);
                    }
                }
                assert_errno(fs::read(v.p(&plain)), libc::EIO, &format!("{ctx}: whole-file read"));
            }
        }
        assert!(
            log_has(&v, |l| l.contains(&format!("/{plain}"))),
            "{ctx}: no log line naming /{plain}; log:\n{}",
            v.log()
        );
        detected += 1;
    }
    // The mount is still healthy.
    write_file(&v.p("after"), b"still works");
    assert_eq!(fs::read(v.p("after")).unwrap(), b"still works");
    eprintln!(
        "attacks ({}, {}): {} tried, {detected} detected (EIO + log line)",
        mode.name(),
        if summary { "file summaries" } else { "no file summaries" },
        attacks.len()
    );
    assert_eq!(detected, attacks.len());
}

/// Name attacks: an encrypted name moved to another directory (its name
/// was encrypted under the old directory's IV) and a directory IV replaced
/// by another directory's: the entries do not decrypt, are not shown under
/// any name, and the rest of the tree keeps working. 2 attacks.
#[test]
fn names_detected() {
    require_fuse!();
    let mut v = Volume::new(MODE);
    for d in ["a", "b", "c"] {
        fs::create_dir(v.p(d)).unwrap();
    }
    write_file(&v.p("a/moved"), b"moved file");
    write_file(&v.p("a/stays"), b"stays");
    write_file(&v.p("b/other"), b"other");
    write_file(&v.p("c/one"), b"one");
    write_file(&v.p("c/two"), b"two");
    v.unmount();
    let (adir, bdir, cdir) = (backing_dir(&v, "a"), backing_dir(&v, "b"), backing_dir(&v, "c"));
    let before_a: Vec<PathBuf> = fs::read_dir(&adir).unwrap().map(|e| e.unwrap().path()).collect();
    // 1. Move the backing entry of a/moved (by size) into b's backing dir.
    let moved = before_a
        .iter()
        .find(|p| fs::metadata(p).unwrap().len() == MODE.backing_len(10))
        .unwrap()
        .clone();
    fs::rename(&moved, bdir.join(moved.file_name().unwrap())).unwrap();
    // 2. Replace c's directory IV by a's.
    let c_iv = cdir.join("warpfs.diriv");
    let mut perm = fs::metadata(&c_iv).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    fs::set_permissions(&c_iv, perm).unwrap();
    fs::copy(adir.join("warpfs.diriv"), &c_iv).unwrap();
    v.mount();
    let list = |d: &str| -> Vec<String> {
        fs::read_dir(v.p(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    // A name that does not decrypt where it is is shown only under a
    // marked name (FORMAT.md 13.4), never as a plaintext name.
    let decrypted = |d: &str| -> Vec<String> {
        let mut l: Vec<String> = list(d)
            .into_iter()
            .filter(|n| !n.ends_with(".warpfs-undecryptable"))
            .collect();
        l.sort();
        l
    };
    let marked = |d: &str| list(d).len() - decrypted(d).len();
    assert_eq!(decrypted("a"), vec!["stays".to_string()]);
    assert_eq!(
        decrypted("b"),
        vec!["other".to_string()],
        "a moved name must not decrypt in b"
    );
    assert_eq!(marked("b"), 1, "the moved entry is shown marked in b: {:?}", list("b"));
    assert!(
        decrypted("c").is_empty(),
        "names under a swapped dir IV must not decrypt: {:?}",
        list("c")
    );
    assert_eq!(
        marked("c"),
        2,
        "both entries under the swapped IV are shown marked: {:?}",
        list("c")
    );
    assert_eq!(fs::read(v.p("b/other")).unwrap(), b"other");
    assert_eq!(fs::read(v.p("a/stays")).unwrap(), b"stays");
    assert_errno(fs::read(v.p("c/one")), libc::ENOENT, "c/one under a swapped IV");
    eprintln!("attacks: names: 2 tried, 2 detected (entries hidden)");
}

/// The backing dir of root-level dir `a`, `b` or `c`, told apart by the
/// backing lengths of their files.
fn backing_dir(v: &Volume, name: &str) -> PathBuf {
    let dirs: Vec<PathBuf> = v.root_backing_entries().into_iter().filter(|p| p.is_dir()).collect();
    let sizes = |d: &Path| -> Vec<u64> {
        let mut s: Vec<u64> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name() != "warpfs.diriv")
            .map(|e| e.metadata().unwrap().len())
            .collect();
        s.sort();
        s
    };
    let want: &[u64] = match name {
        "a" => &[MODE.backing_len(5), MODE.backing_len(10)],
        "b" => &[MODE.backing_len(5)],
        "c" => &[MODE.backing_len(3), MODE.backing_len(3)],
        _ => unreachable!(),
    };
    let mut w = want.to_vec();
    w.sort();
    let found: Vec<&PathBuf> = dirs.iter().filter(|d| sizes(d) == w).collect();
    assert_eq!(found.len(), 1, "backing dir of {name}: {found:?}");
    found[0].clone()
}

/// `warpfs.conf` edited to weaken the KDF, drop a feature flag, or change
/// the content mode or key size: `mount` refuses the volume.
#[test]
fn config_edits_are_refused() {
    require_fuse!();
    let mut v = Volume::init(MODE);
    let conf = v.cipher.join("warpfs.conf");
    let orig = fs::read_to_string(&conf).unwrap();
    let edits: [(&str, &str, &str); 6] = [
        (
            "KDF memory halved (still above the minimum)",
            "\"memory_kib\": 65536",
            "\"memory_kib\": 32768",
        ),
        ("KDF iterations lowered", "\"iterations\": 3", "\"iterations\": 2"),
        ("feature flag removed", "\"long-names\",\n", ""),
        (
            "content mode flipped to ctr",
            "\"content_mode\": \"gcm\"",
            "\"content_mode\": \"ctr\"",
        ),
        ("key size lowered to 128", "\"key_bits\": 256", "\"key_bits\": 128"),
        (
            "feature flag added",
            "\"siv-names\"",
            "\"siv-names\", \"plaintext-names\"",
        ),
    ];
    let mut refused = 0;
    for (what, from, to) in edits {
        assert!(orig.contains(from), "{what}: `{from}` not in warpfs.conf:\n{orig}");
        let mut perm = fs::metadata(&conf).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
        fs::set_permissions(&conf, perm).unwrap();
        fs::write(&conf, orig.replacen(from, to, 1)).unwrap();
        let o = v.try_mount(&[]);
        assert!(!o.ok(), "{what}: mount accepted the edited config\n{o}");
        assert!(!is_mounted(&v.mnt), "{what}: mounted");
        refused += 1;
    }
    fs::write(&conf, &orig).unwrap();
    v.mount();
    eprintln!("attacks: config edits: {refused} tried, {refused} refused");
}

/// The running daemon keeps its keys in locked memory (VmLck > 0) and is
/// not dumpable.
#[test]
fn keys_locked_in_memory() {
    require_fuse!();
    let v = Volume::new(MODE);
    write_file(&v.p("x"), b"x");
    let pids = daemon_pids(&v.mnt);
    assert!(!pids.is_empty());
    let st = fs::read_to_string(format!("/proc/{}/status", pids[0])).unwrap();
    let kb: u64 = st
        .lines()
        .find(|l| l.starts_with("VmLck:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    let log = v.log();
    if log.contains("cannot lock key memory") {
        warpfs_testkit::skip(format!("mlock is not allowed here (daemon log: {log})"));
        return;
    }
    assert!(kb > 0, "daemon VmLck is 0 kB; log:\n{log}");
    assert!(log.contains("key memory locked in RAM"), "log:\n{log}");
    eprintln!("daemon VmLck: {kb} kB");
}

/// File summaries exist in gcm only: `init --file-summary on` with another
/// mode is a usage error that writes nothing.
#[test]
fn file_summaries_need_gcm() {
    for mode in ["ctr", "xts"] {
        let v = Volume::blank(Mode::Gcm);
        let o = warpfs(args![
            "init",
            "--passfile",
            &v.passfile,
            "--mode",
            mode,
            "--file-summary",
            "on",
            &v.cipher
        ]);
        assert!(!o.ok(), "init --mode {mode} --file-summary on succeeded\n{o}");
        assert!(o.stderr.contains("needs --mode gcm"), "{o}");
        assert!(!v.cipher.join("warpfs.conf").exists(), "{mode}: a config was written");
    }
}
