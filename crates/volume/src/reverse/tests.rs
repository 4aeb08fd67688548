//! A view copied file by file (as rsync would, without a kernel) opens as a
//! forward volume and reads back as the plaintext tree; the same tree gives
//! the same bytes from a second view; an edit changes only its blocks.

use super::*;
use crate::{Options, Volume};
use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use warpfs_config::{Config, KdfParams};

const FAST: KdfParams = KdfParams {
    memory_kib: 32768,
    iterations: 2,
    parallelism: 1,
};

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

struct Fixture {
    plain: tempfile::TempDir,
    cfg: Config,
    master: MasterKey,
}

fn fixture() -> Fixture {
    fixture_with(false)
}

/// The fixture's tree, its config with file summaries when `summary`.
fn fixture_with(summary: bool) -> Fixture {
    let plain = tempfile::tempdir().unwrap();
    let p = plain.path();
    std::fs::write(p.join("a.txt"), b"hello").unwrap();
    std::fs::write(p.join("empty"), b"").unwrap();
    std::fs::write(p.join("big"), pattern(300 * 4096 + 123, 1)).unwrap();
    std::fs::create_dir_all(p.join("dir/sub")).unwrap();
    std::fs::write(p.join("dir/sub/deep"), pattern(70_000, 2)).unwrap();
    std::fs::write(p.join("x".repeat(200)), b"long").unwrap();
    std::os::unix::fs::symlink("../some/target", p.join("dir/link")).unwrap();
    let (cfg, master) = Config::create_reverse(&p.join(HIDDEN_CONFIG), b"pw", 256, FAST, summary).unwrap();
    Fixture { plain, cfg, master }
}

fn view(f: &Fixture, opts: ReverseOptions) -> ReverseView {
    let path = f.plain.path().join(HIDDEN_CONFIG);
    let (_, bytes) = Config::load_file_bytes(&path).unwrap();
    let stat = warpfs_backing::Root::open(f.plain.path())
        .unwrap()
        .lstat(Path::new(HIDDEN_CONFIG))
        .unwrap();
    ReverseView::new(
        f.plain.path().to_owned(),
        &f.master,
        &f.cfg,
        ConfigShown { bytes, stat },
        opts,
    )
    .unwrap()
}

/// Copy the view of directory `rel` into `dst`.
fn copy(v: &ReverseView, rel: &[u8], dst: &Path) {
    for e in v.list(rel).unwrap() {
        let to = dst.join(&e.name);
        match (&e.node, e.kind) {
            (Node::Entry(child), Kind::Dir) => {
                std::fs::create_dir(&to).unwrap();
                copy(v, child, &to);
            }
            (Node::Entry(child), Kind::File) => {
                let f = v.open(child).unwrap();
                let mut buf = vec![0u8; f.len() as usize];
                // Odd-sized pieces, as the kernel's pages would cut it.
                let mut off = 0;
                while off < buf.len() {
                    let end = (off + 5000).min(buf.len());
                    assert_eq!(f.read_at(off as u64, &mut buf[off..end]).unwrap(), end - off);
                    off = end;
                }
                std::fs::write(&to, buf).unwrap();
            }
            (Node::Entry(child), Kind::Symlink) => {
                let t = v.sealed_target(child).unwrap();
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&t), &to).unwrap();
            }
            (n, _) => std::fs::write(&to, v.virtual_bytes(n).unwrap()).unwrap(),
        }
        // The lookup of every listed name finds the same node.
        let (node, attr) = v.lookup(rel, e.name.as_bytes()).unwrap();
        assert_eq!(node, e.node, "{}", e.name);
        assert_eq!(attr.ino, e.ino, "{}", e.name);
    }
}

/// Every file of a tree: relative path → bytes (symlinks: "->" target).
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_symlink() {
                let mut v = b"->".to_vec();
                v.extend_from_slice(std::fs::read_link(&p).unwrap().as_os_str().as_bytes());
                out.insert(rel, v);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The forward volume at `cipher` read back as a snapshot.
fn forward(f: &Fixture, cipher: &Path) -> BTreeMap<String, Vec<u8>> {
    let vol = Volume::open(cipher, &f.cfg, &f.master, Options { read_only: true }).unwrap();
    let mut out = BTreeMap::new();
    let mut stack = vec![(std::path::PathBuf::new(), String::new())];
    while let Some((bdir, pdir)) = stack.pop() {
        for e in vol.readdir(&bdir).unwrap() {
            let b = bdir.join(&e.cname);
            let p = if pdir.is_empty() {
                e.name.to_string_lossy().into_owned()
            } else {
                format!("{pdir}/{}", e.name.to_string_lossy())
            };
            match e.kind {
                Kind::Dir => stack.push((b, p)),
                Kind::Symlink => {
                    let mut v = b"->".to_vec();
                    v.extend_from_slice(&vol.readlink(&b).unwrap());
                    out.insert(p, v);
                }
                _ => {
                    let of = vol.open_file(&b, libc::O_RDONLY, p.clone()).unwrap();
                    let mut buf = vec![0u8; of.size() as usize];
                    assert_eq!(of.read_at(0, &mut buf).unwrap(), buf.len());
                    out.insert(p, buf);
                }
            }
        }
    }
    out
}

#[test]
fn a_copy_of_the_view_is_a_forward_volume_of_the_tree() {
    let f = fixture();
    let v = view(&f, ReverseOptions::default());
    let c = tempfile::tempdir().unwrap();
    copy(&v, b"", c.path());
    assert!(c.path().join("warpfs.conf").exists());
    assert!(c.path().join("warpfs.diriv").exists());
    let mut want = snapshot(f.plain.path());
    want.remove(HIDDEN_CONFIG);
    assert_eq!(forward(&f, c.path()), want);
}

/// With `file-summary` every non-empty file of a copy has a version 2
/// header and a record that verifies: the forward volume (which checks
/// each file's summary at open) reads the tree back.
#[test]
fn a_copy_of_a_view_with_summaries_verifies_as_a_forward_volume() {
    let f = fixture_with(true);
    assert!(f.cfg.has_feature(FeatureFlag::FileSummary));
    let v = view(&f, ReverseOptions::default());
    let c = tempfile::tempdir().unwrap();
    copy(&v, b"", c.path());
    let mut want = snapshot(f.plain.path());
    want.remove(HIDDEN_CONFIG);
    assert_eq!(forward(&f, c.path()), want);
    let big = v.open(b"big").unwrap();
    let mut h = [0u8; 32];
    big.read_at(0, &mut h).unwrap();
    assert!(warpfs_content::header::Header::parse(&h).unwrap().summary);
    let mut copied = BTreeMap::new();
    for (name, bytes) in snapshot(c.path()) {
        copied.insert(bytes.len(), name);
    }
    // The summary checker itself agrees (the largest file is `big`).
    let (_, name) = copied.last_key_value().unwrap();
    let file = std::fs::File::open(c.path().join(name)).unwrap();
    let key = warpfs_crypto::SummaryKey::derive(&f.master);
    let id = v.keys.rev.file_id(b"big");
    let size = 300 * 4096 + 123;
    warpfs_content::summary::check(&file, &key, &id, size).unwrap();
}

/// A file changed after its summary was made: a segment that no longer
/// gives the sum it was summed with is not served.
#[test]
fn a_file_changed_after_it_was_summed_reads_as_eio() {
    let f = fixture_with(true);
    let v = view(&f, ReverseOptions::default());
    let h = v.open(b"big").unwrap();
    let mut buf = vec![0u8; 600];
    h.read_at(0, &mut buf).unwrap();
    let p = f.plain.path().join("big");
    let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, b"changed", 100 * 4096).unwrap();
    let at = layout::data_offset(Mode::Gcm, 100);
    assert_eq!(h.read_at(at, &mut buf).unwrap_err(), Error::EIO);
    // A new open sums the new version and serves it.
    let again = v.open(b"big").unwrap();
    again.read_at(0, &mut buf).unwrap();
    again.read_at(at, &mut buf).unwrap();
}

#[test]
fn the_same_tree_gives_the_same_bytes_and_an_edit_only_its_block() {
    let f = fixture();
    let (c1, c2, c3) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    copy(&view(&f, ReverseOptions::default()), b"", c1.path());
    copy(&view(&f, ReverseOptions::default()), b"", c2.path());
    let s1 = snapshot(c1.path());
    assert_eq!(s1, snapshot(c2.path()));
    // Change one 4 KiB block in the middle of "big" (block 100).
    let big = f.plain.path().join("big");
    let mut data = std::fs::read(&big).unwrap();
    data[100 * 4096 + 7] ^= 0xff;
    std::fs::write(&big, &data).unwrap();
    copy(&view(&f, ReverseOptions::default()), b"", c3.path());
    let s3 = snapshot(c3.path());
    let changed: Vec<_> = s1.keys().filter(|k| s1[*k] != s3[*k]).collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    let (a, b) = (&s1[changed[0]], &s3[changed[0]]);
    assert_eq!(a.len(), b.len());
    let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    let (lo, hi) = (diff[0] as u64, *diff.last().unwrap() as u64);
    let m = warpfs_content::Mode::Gcm;
    // Only block 100's entry (nonce and tag) and its data changed.
    assert!(lo >= layout::entry_offset(m, 100) && lo < layout::entry_offset(m, 100) + 32);
    assert!(hi >= layout::data_offset(m, 100) && hi < layout::data_offset(m, 100) + 4096);
    let between = (layout::entry_offset(m, 100) + 32)..layout::data_offset(m, 100);
    assert!(diff
        .iter()
        .all(|&i| !between.contains(&(i as u64)) || i as u64 >= layout::data_offset(m, 100)));
    let mut want = snapshot(f.plain.path());
    want.remove(HIDDEN_CONFIG);
    assert_eq!(forward(&f, c3.path()), want);
}

#[test]
fn excluded_entries_are_not_in_the_view() {
    let f = fixture();
    let mut opts = ReverseOptions::default();
    opts.excludes.add_path(b"dir/sub").unwrap();
    opts.excludes.add_pattern(b"*.txt").unwrap();
    let v = view(&f, opts);
    let c = tempfile::tempdir().unwrap();
    copy(&v, b"", c.path());
    let got = forward(&f, c.path());
    assert!(got.contains_key("big") && got.contains_key("dir/link"));
    assert!(!got.contains_key("a.txt") && !got.contains_key("dir/sub/deep"));
    // Nor found by their names.
    let iv = v.keys.rev.dir_iv(b"");
    let name = v.keys.names.encrypt_name(&iv, b"a.txt").unwrap();
    assert_eq!(v.lookup(b"", name.as_bytes()).unwrap_err(), Error(libc::ENOENT));
    let hidden = v.keys.names.encrypt_name(&iv, HIDDEN_CONFIG.as_bytes()).unwrap();
    assert_eq!(v.lookup(b"", hidden.as_bytes()).unwrap_err(), Error(libc::ENOENT));
}

#[test]
fn hostile_names_and_a_file_that_shrinks() {
    let f = fixture();
    let v = view(&f, ReverseOptions::default());
    for bad in [
        &b"warpfs.long.nothing"[..],
        b"warpfs.long.x.name",
        b"warpfs.other",
        b"!!",
        b"",
        &[0xff; 3],
    ] {
        assert!(v.lookup(b"", bad).is_err());
    }
    assert!(v.lookup(b"a.txt", b"warpfs.diriv").is_err());
    let vf = v.open(b"big").unwrap();
    std::fs::write(f.plain.path().join("big"), b"short now").unwrap();
    let mut buf = vec![0u8; 8192];
    assert_eq!(
        vf.read_at(layout::data_offset(warpfs_content::Mode::Gcm, 20), &mut buf)
            .unwrap_err(),
        Error::EIO
    );
}

/// The backing symlinks directly in `dir` of a copy of a view, by name.
fn backing_links(dir: &Path) -> BTreeMap<String, std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_symlink())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_link(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Give the backing symlinks `a` and `b` of `dir` each other's target.
fn swap_targets(dir: &Path, a: &str, b: &str) {
    let links = backing_links(dir);
    for (name, target) in [(a, &links[b]), (b, &links[a])] {
        std::fs::remove_file(dir.join(name)).unwrap();
        std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
    }
}

#[test]
fn a_new_view_binds_symlink_targets_to_their_entry() {
    let f = fixture();
    assert!(f.cfg.has_feature(FeatureFlag::BoundSeals));
    let long = "l".repeat(190);
    std::os::unix::fs::symlink("elsewhere", f.plain.path().join("dir/other")).unwrap();
    std::os::unix::fs::symlink("a long one's target", f.plain.path().join(format!("dir/{long}"))).unwrap();
    let c = tempfile::tempdir().unwrap();
    copy(&view(&f, ReverseOptions::default()), b"", c.path());
    // Each target opens at its own entry (a forward mount of the copy).
    let mut want = snapshot(f.plain.path());
    want.remove(HIDDEN_CONFIG);
    assert_eq!(forward(&f, c.path()), want);
    // Moved to another entry of the directory, none opens.
    let vol = Volume::open(c.path(), &f.cfg, &f.master, Options { read_only: true }).unwrap();
    let bdir = vol.encrypt_path(Path::new("dir")).unwrap();
    let links = backing_links(&c.path().join(&bdir));
    assert_eq!(links.len(), 3, "{links:?}");
    let names: Vec<&String> = links.keys().collect();
    assert!(names.iter().any(|n| n.starts_with("warpfs.long.")), "{names:?}");
    let (a, b, l) = (names[0].clone(), names[1].clone(), names[2].clone());
    swap_targets(&c.path().join(&bdir), &a, &b);
    swap_targets(&c.path().join(&bdir), &b, &l);
    for n in [&a, &b, &l] {
        assert_eq!(vol.readlink(&bdir.join(n)).unwrap_err(), Error::EIO, "{n}");
    }
}

/// The frozen format 1 reverse view (crates/warpfs/tests/revkit/freeze.sh).
fn frozen_v1() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../warpfs/tests/revkit/v1")
}

/// Copy the tree `src` (files, directories, symlinks) to `dst`.
fn copy_plain(src: &Path, dst: &Path) {
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        let t = e.file_type().unwrap();
        if t.is_dir() {
            std::fs::create_dir(&to).unwrap();
            copy_plain(&e.path(), &to);
        } else if t.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &to).unwrap();
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A copy of a view in the form of the frozen `view.txt`.
fn listing(root: &Path) -> String {
    use sha2::Digest;
    let mut lines = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_symlink() {
                lines.push(format!("l {} {rel}", std::fs::read_link(&p).unwrap().display()));
            } else if m.is_dir() {
                lines.push(format!("d {rel}"));
                stack.push(p);
            } else {
                let sum = sha2::Sha256::digest(std::fs::read(&p).unwrap());
                let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
                lines.push(format!("f {hex} {rel}"));
            }
        }
    }
    // As `sort` orders the paths in view.txt (LC_ALL=C: by bytes).
    lines.sort_by(|a, b| a.rsplit(' ').next().cmp(&b.rsplit(' ').next()));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn a_format_1_reverse_config_gives_the_frozen_view_byte_for_byte() {
    let frozen = frozen_v1();
    let plain = tempfile::tempdir().unwrap();
    copy_plain(&frozen.join("plain"), plain.path());
    let path = plain.path().join(HIDDEN_CONFIG);
    let (cfg, bytes) = Config::load_file_bytes(&path).unwrap();
    assert!(!cfg.has_feature(FeatureFlag::BoundSeals));
    let pw = std::fs::read_to_string(frozen.join("password.txt")).unwrap();
    let master = cfg.unlock(pw.lines().next().unwrap().as_bytes()).unwrap();
    let stat = warpfs_backing::Root::open(plain.path())
        .unwrap()
        .lstat(Path::new(HIDDEN_CONFIG))
        .unwrap();
    let v = ReverseView::new(
        plain.path().to_owned(),
        &master,
        &cfg,
        ConfigShown { bytes, stat },
        ReverseOptions::default(),
    )
    .unwrap();
    let c = tempfile::tempdir().unwrap();
    copy(&v, b"", c.path());
    let want = std::fs::read_to_string(frozen.join("view.txt")).unwrap();
    assert_eq!(listing(c.path()), want);
    // Its symlink targets stay unbound: moved to another entry, one opens there.
    let vol = Volume::open(c.path(), &cfg, &master, Options { read_only: true }).unwrap();
    let links = backing_links(c.path());
    let names: Vec<&String> = links.keys().collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let before = vol.readlink(Path::new(names[0])).unwrap();
    swap_targets(c.path(), names[0], names[1]);
    assert_eq!(vol.readlink(Path::new(names[1])).unwrap(), before);
}

/// A read's bytes, and whether they came from an encrypt-ahead buffer.
#[derive(Default)]
struct Collect {
    data: Vec<u8>,
    ahead: bool,
}

impl crate::ReadSink for Collect {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        self.data.resize(size, 0);
        &mut self.data
    }
    fn filled(&mut self, n: usize) {
        self.data.truncate(n);
        self.ahead = false;
    }
    fn bytes(&mut self, b: &[u8]) {
        self.data = b.to_vec();
        self.ahead = true;
    }
}

/// A sequential reader of a view file through a handle of a view with an
/// engine: its next requests are encrypted ahead and served from the
/// threads' buffers (counted), and every byte is the one a handle without
/// encrypt-ahead reads. Waits for states, never for time.
#[test]
fn a_view_handle_serves_a_sequential_reader_encrypted_ahead() {
    use warpfs_engine::{Engine, EngineConfig};
    const REQ: usize = 2 * warpfs_engine::ahead_stream::CHUNK;
    let f = fixture();
    let want = {
        let h = view(&f, ReverseOptions::default()).open(b"big").unwrap();
        assert!(!h.reads_ahead(), "a view without an engine reads ahead");
        let mut b = vec![0u8; h.len() as usize];
        assert_eq!(h.read_at(0, &mut b).unwrap(), b.len());
        b
    };
    let engine = Engine::new(EngineConfig {
        speculation: false,
        ahead_without_speculation: true,
        read_ahead: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut v = view(&f, ReverseOptions::default());
    v.use_engine(engine.clone());
    let h = v.open(b"big").unwrap();
    assert!(h.reads_ahead());
    let mut got = Vec::new();
    let mut served = 0;
    while got.len() < want.len() {
        let mut c = Collect::default();
        h.read(got.len() as u64, REQ, &mut c).unwrap();
        assert!(!c.data.is_empty(), "short at {}", got.len());
        served += usize::from(c.ahead);
        got.extend_from_slice(&c.data);
        // The next requests (two at most) are planned: wait until made.
        let planned = (want.len() - got.len()).div_ceil(REQ).min(2);
        let t0 = std::time::Instant::now();
        while h.read_ahead_done() < planned {
            assert!(t0.elapsed().as_secs() < 60, "the encrypt-ahead jobs never finished");
            std::thread::yield_now();
        }
    }
    assert!(got == want, "bytes encrypted ahead differ from the view's");
    let requests = want.len().div_ceil(REQ);
    assert_eq!(served, requests - 1, "every request after the first is served ahead");
    let s = engine.stats();
    let blocks = (want.len() - REQ).div_ceil(4096) as u64;
    assert_eq!((s.ahead_served, s.ahead_stolen), (blocks, 0), "{s}");
}
