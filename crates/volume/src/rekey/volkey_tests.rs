//! A rekey to a new volume key through the library: the volume reads the
//! same afterwards; a copy of the config from before, opened with the
//! revoked secret, gives keys that decrypt no content block, no name, no
//! symlink target and no xattr of the volume; a run stopped anywhere
//! finishes when run again.

use super::*;
use crate::rekey::{recover, Decisions, Event};
use crate::Caller;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use warpfs_config::{ContentMode, Input, KdfParams, NewSlot, SlotKind};
use warpfs_content::{layout, Mode};
use warpfs_crypto::gcm::tag_mask;
use warpfs_crypto::names::{is_long_file, is_sidecar};
use warpfs_crypto::GcmTagger;

const KEPT: &[u8] = b"the password that stays";
const GONE: &[u8] = b"the password taken away";
const WHO: Caller = Caller { uid: 0, gid: 0 };

/// A volume (gcm, bound seals, with or without file summaries) with a
/// kept and a revoked password slot, and a tree of every kind of entry
/// written through the library.
fn volume(dir: &Path, summaries: bool) -> Config {
    let p = warpfs_config::config_path(dir);
    let mut flags = vec![FeatureFlag::BoundSeals];
    if summaries {
        flags.push(FeatureFlag::FileSummary);
    }
    let (c, vk) = Config::create_slots_at(
        &p,
        KEPT,
        SlotKind::Password,
        ContentMode::Gcm,
        256,
        KdfParams::MIN,
        &flags,
        None,
    )
    .unwrap();
    let new = NewSlot::Secret {
        bytes: GONE,
        kind: SlotKind::Password,
        kdf: KdfParams::MIN,
    };
    let (c, _) = c.with_slot(&vk, Some(0), &new, "revoked").unwrap();
    c.save_at(&p).unwrap();
    Volume::init_root(&Root::open(dir).unwrap()).unwrap();
    let v = Volume::open(dir, &c, &vk, Options::default()).unwrap();
    let file = |d: &Path, name: &str, data: &[u8]| {
        let (_, _, f, _) = v
            .create(d, OsStr::new(name), 0o640, libc::O_RDWR, WHO, name.into())
            .unwrap();
        f.write_at(0, data).unwrap();
        f.sync(false).unwrap();
    };
    let data = |n: usize, seed: u8| {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>()
    };
    let root = Path::new("");
    file(root, "small.txt", b"hello");
    // Past the nnode and into the second nonce page.
    file(root, "big.bin", &data(16 * 4096 + 256 * 4096 + 5000, 1));
    file(root, "empty", b"");
    let (sub, _) = v.mkdir(root, OsStr::new("sub"), 0o755, WHO).unwrap();
    let sub = PathBuf::from(sub);
    let long = "l".repeat(200);
    file(&sub, &long, &data(9000, 2));
    let (deeper, _) = v.mkdir(&sub, OsStr::new("deeper"), 0o700, WHO).unwrap();
    let deeper = sub.join(deeper);
    file(&deeper, "d.txt", b"deep down");
    let (long_dir, _) = v.mkdir(root, OsStr::new(&"D".repeat(190)), 0o755, WHO).unwrap();
    file(Path::new(&long_dir), "in-long-dir", b"x");
    v.symlink(root, OsStr::new("link"), OsStr::new("small.txt"), WHO)
        .unwrap();
    v.symlink(&sub, OsStr::new(&"s".repeat(180)), OsStr::new("../big.bin"), WHO)
        .unwrap();
    let (small, _) = v.lookup(root, OsStr::new("small.txt")).unwrap();
    v.setxattr(Path::new(&small), b"user.colour", b"blue", 0).unwrap();
    v.setxattr(&sub, b"user.tag", b"on a directory", 0).unwrap();
    v.link(Path::new(&small), &sub, OsStr::new("hard")).unwrap();
    c
}

/// Everything a user sees: plaintext path → (kind, bytes or target, xattrs).
type Seen = BTreeMap<String, (String, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>;

fn seen(v: &Volume) -> Seen {
    let mut out = Seen::new();
    let mut dirs = vec![(PathBuf::new(), String::new())];
    while let Some((b, p)) = dirs.pop() {
        for e in v.readdir(&b).unwrap() {
            let (bp, pp) = (b.join(&e.cname), format!("{p}/{}", e.name.to_string_lossy()));
            assert!(!pp.contains(crate::UNDECRYPTABLE), "{pp}");
            let a = v.getattr(&bp).unwrap();
            let body = match a.kind {
                crate::Kind::Dir => {
                    dirs.push((bp.clone(), pp.clone()));
                    Vec::new()
                }
                crate::Kind::Symlink => v.readlink(&bp).unwrap(),
                _ => {
                    let f = v.open_file(&bp, libc::O_RDONLY, String::new()).unwrap();
                    let mut buf = vec![0u8; a.size as usize];
                    let n = f.read_at(0, &mut buf).unwrap();
                    assert_eq!(n, buf.len());
                    buf
                }
            };
            let mut xs = Vec::new();
            if a.kind != crate::Kind::Symlink {
                for n in v.listxattr(&bp).unwrap().split(|&c| c == 0).filter(|n| !n.is_empty()) {
                    xs.push((n.to_vec(), v.getxattr(&bp, n).unwrap()));
                }
            }
            out.insert(pp, (format!("{:?}/{}", a.kind, a.nlink), body, xs));
        }
    }
    out
}

/// Every directory IV of the volume at `dir` (`warpfs.diriv` files).
fn ivs(dir: &Path) -> Vec<[u8; 16]> {
    let mut out = Vec::new();
    for e in walk(dir) {
        if e.file_name().is_some_and(|n| n == "warpfs.diriv") {
            out.push(std::fs::read(&e).unwrap().try_into().unwrap());
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.symlink_metadata().unwrap().is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// Run the whole rekey as `warpfs key remove 1 --rekey` does, keeping
/// slot 0; `hook` sees every event (it may panic to stop the run, as a
/// kill would: with one job, nothing else goes on meanwhile).
fn rekey(dir: &Path, hook: Option<Arc<dyn Fn(Event) + Send + Sync>>) {
    let c = Config::load(dir).unwrap();
    let p = warpfs_config::config_path(dir);
    let c = if c.volume_rekey_under_way() {
        c
    } else {
        let o = c
            .open(&Input::Secret {
                bytes: KEPT,
                kind: None,
            })
            .unwrap();
        let kept = [(0, o.slot_key.unwrap())];
        let (mid, _) = c.begin_volume_rekey(&o.key, o.slot, &kept, None).unwrap();
        mid.save_at(&p).unwrap();
        mid
    };
    let o = c
        .open(&Input::Secret {
            bytes: KEPT,
            kind: None,
        })
        .unwrap();
    let (vol, prev) = open_volume_rekey(dir, &c, &o.key).unwrap();
    let r = recover(&vol, Decisions::automatic()).unwrap();
    assert!(r.kept.is_empty(), "{}", r.kept_message());
    let opts = RekeyOptions {
        jobs: if hook.is_some() { 1 } else { 2 },
        on_event: hook,
        ..Default::default()
    };
    let (progress, stop) = (Progress::default(), AtomicBool::new(false));
    assert!(run_volume_rekey(&vol, &c, (&o.key, &prev), &opts, &progress, &stop).unwrap());
    drop(vol);
    c.finish_volume_rekey(&o.key, o.slot).unwrap().save_at(&p).unwrap();
}

fn open(dir: &Path) -> Volume {
    let c = Config::load(dir).unwrap();
    let k = c.unlock(KEPT).unwrap();
    Volume::open(dir, &c, &k, Options::default()).unwrap()
}

#[test]
fn after_a_volume_key_rekey_the_revoked_secret_decrypts_nothing() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    volume(dir, true);
    let before_conf = std::fs::read_to_string(warpfs_config::config_path(dir)).unwrap();
    let want = seen(&open(dir));
    let old_ivs = ivs(dir);
    assert_eq!(want.len(), 12, "{want:#?}");
    rekey(dir, None);
    let now = Config::load(dir).unwrap();
    assert!(!now.volume_rekey_under_way() && now.key_generation() == 1);
    assert!(matches!(
        now.unlock(GONE),
        Err(warpfs_config::ConfigError::WrongPassword)
    ));
    let new = now.unlock(KEPT).unwrap();
    assert_eq!(seen(&open(dir)), want, "the volume reads the same");
    // Every directory has a new IV, and no reserved file of the rekey is left.
    let new_ivs = ivs(dir);
    assert_eq!(new_ivs.len(), old_ivs.len());
    assert!(new_ivs.iter().all(|iv| !old_ivs.contains(iv)));
    assert!(walk(dir)
        .iter()
        .all(|p| !p.to_string_lossy().contains("warpfs.rekey") && !p.to_string_lossy().contains("symlink.tmp")));

    // The old config, opened with the revoked password: its keys.
    let old_conf = Config::from_json(before_conf.as_bytes()).unwrap();
    let old = old_conf.unlock(GONE).unwrap();
    assert_ne!(old, new);
    let old_sub = Subkeys::derive(&old, 256);
    let new_sub = Subkeys::derive(&new, 256);
    let old_content: Vec<_> = (0..=3).map(|g| Subkeys::derive_gen(&old, 256, g).content).collect();
    let new_content = Subkeys::derive_gen(&new, 256, 1).content;
    let all_ivs: Vec<[u8; 16]> = old_ivs.iter().chain(&new_ivs).copied().collect();
    let (mut blocks, mut names, mut links, mut xattrs) = (0, 0, 0, 0);
    for p in walk(dir) {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let md = p.symlink_metadata().unwrap();
        // Names: the entry's own (or, long, its sidecar's), under every IV
        // the volume ever had.
        let enc = if is_sidecar(&name) {
            Some(std::fs::read_to_string(&p).unwrap())
        } else if !name.starts_with("warpfs.") {
            Some(name.clone())
        } else {
            None
        };
        if let Some(enc) = &enc {
            names += 1;
            for iv in &all_ivs {
                assert!(
                    old_sub.names.decrypt_name(iv, enc).is_err(),
                    "{name} opens with the old key"
                );
            }
            let here: [u8; 16] = std::fs::read(p.parent().unwrap().join("warpfs.diriv"))
                .unwrap()
                .try_into()
                .unwrap();
            assert!(new_sub.names.decrypt_name(&here, enc).is_ok(), "{name}: control");
        }
        if md.file_type().is_symlink() {
            links += 1;
            let t = std::fs::read_link(&p).unwrap();
            let t = t.to_str().unwrap();
            for iv in &all_ivs {
                for n in [name.as_bytes(), b"" as &[u8]] {
                    let a = crate::bound::ad(crate::bound::SYMLINK_AD_BOUND, &[iv, n]);
                    assert!(
                        old_sub.seal.open_b64(&a, t).is_err(),
                        "{name}: target opens with the old key"
                    );
                }
            }
            continue;
        }
        // Xattr names and values.
        for (n, v) in xattrs_of(&p) {
            if let Some(enc) = n.strip_prefix("user.warpfs.").filter(|_| n != "user.warpfs.id") {
                xattrs += 1;
                assert!(old_sub.names.decrypt_xattr_name(enc).is_err(), "{name}: xattr name");
                let plain = new_sub.names.decrypt_xattr_name(enc).unwrap();
                let id = xattrs_of(&p)
                    .into_iter()
                    .find(|(n, _)| n == "user.warpfs.id")
                    .unwrap()
                    .1;
                let a = crate::bound::ad(crate::bound::VALUE_AD_BOUND, &[&id, &plain]);
                assert!(old_sub.seal.open(&a, &v).is_err(), "{name}: xattr value");
                assert!(new_sub.seal.open(&a, &v).is_ok(), "{name}: xattr value, control");
            }
        }
        if !md.is_file() || md.len() == 0 || name.starts_with("warpfs.") && !is_long_file(&name) {
            continue;
        }
        // Every written block of every content file, under every content
        // key of the old volume key (generations 0 to 3).
        let f = std::fs::File::open(&p).unwrap();
        let mut h = [0u8; 32];
        f.read_exact_at(&mut h, 0).unwrap();
        let hdr = warpfs_content::header::Header::parse(&h).unwrap();
        assert_eq!((hdr.generation, hdr.rekeyed), (1, 0));
        let size = layout::plain_size(Mode::Gcm, md.len()).unwrap();
        for b in 0..layout::block_count(size) {
            let mut e = [0u8; 32];
            f.read_exact_at(&mut e, layout::entry_offset(Mode::Gcm, b)).unwrap();
            let nonce: [u8; 12] = e[..12].try_into().unwrap();
            if nonce == [0; 12] {
                continue;
            }
            let tag: [u8; 16] = e[16..].try_into().unwrap();
            let len = (size - b * 4096).min(4096) as usize;
            let mut data = vec![0u8; len];
            f.read_exact_at(&mut data, layout::data_offset(Mode::Gcm, b)).unwrap();
            let mut aad = hdr.file_id.to_vec();
            aad.extend_from_slice(&b.to_be_bytes());
            let opens =
                |k: &warpfs_crypto::ContentKey| GcmTagger::new(k).verify(&aad, &data, &tag_mask(k, &nonce), &tag);
            for (g, k) in old_content.iter().enumerate() {
                assert!(!opens(k), "{name} block {b} opens under the old key's generation {g}");
            }
            assert!(opens(&new_content), "{name} block {b}: control");
            blocks += 1;
        }
    }
    assert!(
        blocks > 280 && names >= 12 && links == 2 && xattrs == 3,
        "{blocks} {names} {links} {xattrs}"
    );
}

fn xattrs_of(p: &Path) -> Vec<(String, Vec<u8>)> {
    let root = Root::open(p.parent().unwrap()).unwrap();
    let l = root.top().entry(p.file_name().unwrap());
    let raw = warpfs_backing::llistxattr(&l).unwrap_or_default();
    raw.split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| {
            let n = String::from_utf8(n.to_vec()).unwrap();
            let v = warpfs_backing::lgetxattr(&l, &n).unwrap();
            (n, v)
        })
        .collect()
}

#[test]
fn a_volume_key_rekey_stopped_anywhere_finishes_when_run_again() {
    // Stop at the k-th event of each kind; the next run finishes. The stop
    // is a panic, which (unlike a kill) runs destructors: a file's last
    // handle closing commits its summary, so these volumes have none (the
    // CLI's crash test kills the process of a volume with summaries).
    for (ev, k) in [
        (Event::Saved, 2),
        (Event::DataWritten, 1),
        (Event::File, 3),
        (Event::Name, 1),
        (Event::Name, 5),
        (Event::Directory, 1),
        (Event::Directory, 3),
    ] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        volume(dir, false);
        let want = seen(&open(dir));
        let n = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let hook: Arc<dyn Fn(Event) + Send + Sync> = {
            let n = n.clone();
            Arc::new(move |e| {
                if e == ev && n.fetch_add(1, Ordering::SeqCst) + 1 == k {
                    panic!("stopped here");
                }
            })
        };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rekey(dir, Some(hook))));
        assert!(r.is_err(), "{ev:?} {k}: not stopped");
        let c = Config::load(dir).unwrap();
        assert!(c.volume_rekey_under_way(), "{ev:?} {k}");
        // Nothing but the rekey opens it meanwhile.
        let key = c.unlock(KEPT).unwrap();
        let e = Volume::open(dir, &c, &key, Options::default()).err().unwrap();
        assert!(e.contains("unfinished"), "{e}");
        rekey(dir, None);
        assert_eq!(seen(&open(dir)), want, "{ev:?} {k}");
        assert!(!walk(dir).iter().any(|p| p.to_string_lossy().contains("warpfs.rekey")));
    }
}

#[test]
fn a_directory_with_a_copy_of_its_iv_is_refused_before_anything_changes() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    volume(dir, false);
    let v = open(dir);
    let root = v.backing().clone();
    drop(v);
    assert_eq!(survey(&root, ContentMode::Gcm).unwrap().files, 7);
    std::fs::write(
        dir.join("warpfs.sync-conflict-20260101-120000-ABCDEFG.diriv"),
        [7u8; 16],
    )
    .unwrap();
    let e = survey(&root, ContentMode::Gcm).unwrap_err();
    assert!(e.contains("copy of a directory IV"), "{e}");
}

#[test]
fn sync_tool_copies_keep_their_tails_and_foreign_names_stay() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    volume(dir, false);
    // A sync tool's copies of a short and of a long name (FORMAT.md 13.1),
    // a foreign file and a name that decrypts under no key.
    let v = open(dir);
    let (small, _) = v.lookup(Path::new(""), OsStr::new("small.txt")).unwrap();
    let sub = PathBuf::from(v.lookup(Path::new(""), OsStr::new("sub")).unwrap().0);
    let (long, _) = v.lookup(&sub, OsStr::new(&"l".repeat(200))).unwrap();
    drop(v);
    let tail = ".sync-conflict-20260101-120000-ABCDEFG";
    std::fs::copy(dir.join(&small), dir.join(format!("{small}{tail}"))).unwrap();
    let hash = long.rsplit('.').next().unwrap();
    let long_copy = format!("warpfs.long{tail}.{hash}");
    std::fs::copy(dir.join(&sub).join(&long), dir.join(&sub).join(&long_copy)).unwrap();
    std::fs::write(dir.join(".DS_Store"), b"foreign").unwrap();
    std::os::unix::fs::symlink("nobody's", dir.join("QUJDREVGR0hJSktMTU5PUFFSU1RVVg")).unwrap();
    let want = seen_all(&open(dir));
    assert!(want.keys().any(|k| k == &format!("/small.txt{tail}")), "{want:#?}");
    assert!(
        want.keys().any(|k| k == &format!("/sub/{}{tail}", "l".repeat(200))),
        "{want:#?}"
    );
    rekey(dir, None);
    assert_eq!(seen_all(&open(dir)), want);
    assert_eq!(std::fs::read(dir.join(".DS_Store")).unwrap(), b"foreign");
    assert_eq!(
        std::fs::read_link(dir.join("QUJDREVGR0hJSktMTU5PUFFSU1RVVg")).unwrap(),
        Path::new("nobody's")
    );
    // No sidecar of the old long names is left.
    let sidecars = walk(dir)
        .iter()
        .filter(|p| is_sidecar(p.file_name().unwrap().to_string_lossy().as_ref()))
        .count();
    assert_eq!(sidecars, 3, "one per long name (two entries and a symlink)");
}

/// [`seen`] that also lists names shown as undecryptable.
fn seen_all(v: &Volume) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![(PathBuf::new(), String::new())];
    while let Some((b, p)) = dirs.pop() {
        for e in v.readdir(&b).unwrap() {
            let (bp, pp) = (b.join(&e.cname), format!("{p}/{}", e.name.to_string_lossy()));
            let body = match e.kind {
                crate::Kind::Dir => {
                    dirs.push((bp, pp.clone()));
                    Vec::new()
                }
                crate::Kind::Symlink => v.readlink(&bp).unwrap_or_default(),
                // A planted file that is no cipher file reads as an error.
                _ => match v.open_file(&bp, libc::O_RDONLY, String::new()) {
                    Ok(f) => {
                        let mut buf = vec![0u8; 1 << 21];
                        let n = f.read_at(0, &mut buf).unwrap();
                        buf.truncate(n);
                        buf
                    }
                    Err(e) => format!("{e:?}").into_bytes(),
                },
            };
            out.insert(pp, body);
        }
    }
    out
}
