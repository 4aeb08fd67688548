//! The populated template volume, made once per content mode and test
//! binary, and copied into each scenario: a few files in the root, in `a`
//! and in `b`, two long-named files, and the genuine old material an
//! attacker may keep: the config from before a `warpfs rekey` (same
//! password), the undo journal of that rekey (killed once, then finished)
//! and the backing file of `victim` before it was rewritten; and the undo
//! file of fsck of another volume (tests/hostile/undo.rs).

use crate::common::*;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The file whose backing file is replaced (content cells).
pub const VICTIM: &str = "victim";
/// Name of the rekey's first worker's undo journal (FORMAT.md 10.3).
pub const JOURNAL: &str = "warpfs.rekey.undo-0";

/// A long name (FORMAT.md 4.3: 176 bytes or more) whose sidecar is planted.
pub fn long1() -> String {
    "l".repeat(200)
}

/// A second long name, whose sidecar stands in for the first one's.
pub fn long2() -> String {
    "m".repeat(200)
}

pub struct Template {
    pub mode: Mode,
    /// The template's CIPHERDIR (never changed after it is made).
    pub cipher: PathBuf,
    /// Every plaintext file and its content.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Backing path (relative to CIPHERDIR) of each plaintext file and of
    /// the directories `a` and `b`.
    pub backing: BTreeMap<String, PathBuf>,
    /// `victim`'s content before it was rewritten.
    pub victim_old: Vec<u8>,
    /// `warpfs.conf` before the rekey (the same password opens it).
    pub old_conf: Vec<u8>,
    /// The rekey's undo journal, taken when the rekey was killed.
    pub journal: Vec<u8>,
    /// `victim`'s backing file while it held `victim_old` (after the rekey).
    pub old_victim: Vec<u8>,
    /// A genuine `warpfs.fsck.undo-1` of another volume (`gcm` only).
    pub foreign_undo: Vec<u8>,
}

impl Template {
    pub fn rel(&self, plain: &str) -> &Path {
        self.backing
            .get(plain)
            .unwrap_or_else(|| panic!("no backing path recorded for {plain}"))
    }

    /// The bytes of a backing file of the template.
    pub fn read(&self, rel: impl AsRef<Path>) -> Vec<u8> {
        let p = self.cipher.join(rel);
        fs::read(&p).unwrap_or_else(|e| panic!("template {}: {e}", p.display()))
    }

    /// A long name's sidecar (relative path).
    pub fn sidecar(&self, plain: &str) -> PathBuf {
        let rel = self.rel(plain);
        PathBuf::from(format!("{}.name", rel.display()))
    }
}

/// The template of `mode`, made on first use.
pub fn template(mode: Mode) -> &'static Template {
    static T: [OnceLock<Template>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let i = match mode {
        Mode::Gcm => 0,
        Mode::Ctr => 1,
        Mode::Xts => 2,
        m => panic!("no hostile template for {m:?}"),
    };
    T[i].get_or_init(|| build(mode))
}

fn rekey(v: &Volume, kill: Option<&str>) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.args(["rekey", "--jobs", "1", "--passfile"])
        .arg(&v.passfile)
        .arg(&v.cipher);
    if let Some(k) = kill {
        cmd.env("WARPFS_REKEY_KILL", k);
    }
    run_cmd(cmd, Duration::from_secs(120))
}

fn build(mode: Mode) -> Template {
    // The cheapest KDF allowed: every scenario unlocks several times.
    let mut v = Volume::init_with(mode, &["--kdf-memory", "32768", "--kdf-iterations", "2"]);
    v.mount();
    fs::create_dir(v.p("a")).unwrap();
    fs::create_dir(v.p("b")).unwrap();
    let victim_old = Rng::new(2).bytes(20 * BLOCK as usize + 100);
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert("file1".into(), Rng::new(1).bytes(10_000));
    files.insert(VICTIM.into(), victim_old.clone());
    files.insert("a/f1".into(), Rng::new(4).bytes(5_000));
    files.insert("a/f2".into(), Rng::new(5).bytes(300));
    files.insert("b/g".into(), Rng::new(6).bytes(7_000));
    files.insert(long1(), Rng::new(7).bytes(3_000));
    files.insert(long2(), Rng::new(8).bytes(2_000));
    for (p, d) in &files {
        write_file(&v.p(p), d);
    }
    // Node ids are backing inode numbers (FORMAT.md 13.6): find each
    // plaintext entry's backing path by its inode number.
    let mut inos: BTreeMap<u64, String> = BTreeMap::new();
    for p in files.keys().map(String::as_str).chain(["a", "b"]) {
        inos.insert(fs::symlink_metadata(v.p(p)).unwrap().ino(), p.to_string());
    }
    v.unmount();
    let mut backing = BTreeMap::new();
    for p in v.backing_paths() {
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n.ends_with(".name") || (n.starts_with("warpfs.") && !n.starts_with("warpfs.long.")) {
            continue;
        }
        if let Some(plain) = inos.get(&fs::symlink_metadata(&p).unwrap().ino()) {
            let rel = p.strip_prefix(&v.cipher).unwrap().to_path_buf();
            assert!(
                backing.insert(plain.clone(), rel).is_none(),
                "two backing entries for {plain}"
            );
        }
    }
    assert_eq!(
        backing.len(),
        files.len() + 2,
        "every entry's backing path found by inode: {backing:?}"
    );
    let old_conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    // A rekey killed once its first undo record is durable: the journal.
    let o = rekey(&v, Some("saved:1"));
    assert_eq!(o.code, None, "the template's rekey should have been killed\n{o}");
    let journal = fs::read(v.cipher.join(JOURNAL)).unwrap();
    assert!(!journal.is_empty(), "the killed rekey left an empty journal");
    rekey(&v, None).expect_ok("finishing the template's rekey");
    assert!(
        !v.cipher.join(JOURNAL).exists(),
        "the finished rekey removed its journal"
    );
    assert_ne!(fs::read(v.cipher.join("warpfs.conf")).unwrap(), old_conf);
    let old_victim = fs::read(v.cipher.join(&backing[VICTIM])).unwrap();
    v.mount();
    let victim_new = Rng::new(3).bytes(victim_old.len());
    write_file(&v.p(VICTIM), &victim_new);
    files.insert(VICTIM.into(), victim_new);
    for (p, d) in &files {
        assert_bytes_eq(&fs::read(v.p(p)).unwrap(), d, &format!("template {p}"));
    }
    v.unmount();
    assert_ne!(fs::read(v.cipher.join(&backing[VICTIM])).unwrap(), old_victim);
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("warpfs-templates");
    let cipher = base.join(format!("{}-hostile{}", std::process::id(), mode.name()));
    let _ = fs::remove_dir_all(&cipher);
    copy_tree(&v.cipher, &cipher);
    Template {
        mode,
        cipher,
        files,
        backing,
        victim_old,
        old_conf,
        journal,
        old_victim,
        foreign_undo: super::undo::foreign(mode),
    }
}
