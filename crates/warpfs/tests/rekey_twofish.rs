//! `warpfs rekey` of Twofish volumes (FORMAT.md 10 and 11), offline and
//! online (the volume mounted, a file written during the rekey), in every
//! Twofish content mode (offline with 256-bit keys, online with 128-bit): afterwards every file's header is at key
//! generation 1, block 0 of each file is Twofish under the generation-1 key
//! (CTR and the GCM tag, or XTS; computed here from the volume key the
//! recovery key opens) and no longer under generation 0's, every file
//! reads back after a remount, and `warpfs fsck` finds nothing.

#[macro_use]
mod common;

use common::*;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::PathBuf;
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::xts::file_block_tweak;
use warpfs_crypto::{ContentKey, GcmTagger, XtsCipher};

#[test]
fn gcm_twofish_offline() {
    rekey_twofish(Mode::GcmTwofish, false, 256);
}

#[test]
fn gcm_twofish_online() {
    rekey_twofish(Mode::GcmTwofish, true, 128);
}

#[test]
fn ctr_twofish_offline() {
    rekey_twofish(Mode::CtrTwofish, false, 256);
}

#[test]
fn ctr_twofish_online() {
    rekey_twofish(Mode::CtrTwofish, true, 128);
}

#[test]
fn xts_twofish_offline() {
    rekey_twofish(Mode::XtsTwofish, false, 256);
}

#[test]
fn xts_twofish_online() {
    rekey_twofish(Mode::XtsTwofish, true, 128);
}

/// `warpfs init` of `mode` with `bits`-bit keys; the volume and its volume
/// key (opened by the recovery key `init` printed).
fn init(mode: Mode, bits: u32) -> (Volume, MasterKey) {
    let v = Volume::blank(mode);
    let mut a = args!["init", "--passfile", &v.passfile, "--key-bits", bits.to_string()];
    a.extend(mode.init_args().into_iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    let o = warpfs(a);
    o.expect_ok("init");
    let text = o
        .stdout
        .lines()
        .map(str::trim)
        .find(|l| l.len() >= 64 && l.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        .unwrap_or_else(|| panic!("no recovery text in:\n{o}"));
    let rk = warpfs_crypto::slotkeys::RecoveryKey::from_text(text).unwrap();
    let cfg = warpfs_config::Config::load(&v.cipher).unwrap();
    let key = cfg.open(&warpfs_config::Input::Recovery(&rk)).unwrap().key;
    (v, key)
}

/// The cipher files in the root of the cipher dir (reserved names left out).
fn content_files(v: &Volume) -> Vec<PathBuf> {
    v.root_backing_entries()
        .into_iter()
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.") && p.is_file())
        .collect()
}

/// Block 0 of cipher file `raw` decrypted under key generation `generation`
/// (Twofish), or `None` when a gcm tag does not match it.
fn open_block0(mode: Mode, bits: u32, master: &MasterKey, generation: u32, raw: &[u8]) -> Option<Vec<u8>> {
    let base = mode.base();
    assert_eq!(raw[6], base.mode_byte(), "mode byte");
    let id: [u8; 16] = raw[8..24].try_into().unwrap();
    let d = base.block_data_offset(0) as usize;
    let len = (raw.len() - d).min(BLOCK as usize);
    let mut buf = raw[d..d + len].to_vec();
    if base == Mode::Xts {
        let key = Subkeys::xts_key_gen(master, bits, XtsCipher::Twofish, generation);
        key.decrypt_unit(&file_block_tweak(&id, 0), &mut buf);
        return Some(buf);
    }
    let e = base.block_entry_offset(0) as usize;
    let nonce: [u8; 12] = raw[e..e + 12].try_into().unwrap();
    let key_bytes = Subkeys::content_key_bytes_gen(master, bits, generation);
    let key = ContentKey::with_cipher(XtsCipher::Twofish, &key_bytes).unwrap();
    if base == Mode::Gcm {
        let mut aad = id.to_vec();
        aad.extend_from_slice(&0u64.to_be_bytes());
        let tag = GcmTagger::new(&key).tag(&aad, &buf, &warpfs_crypto::gcm::tag_mask(&key, &nonce));
        if raw[e + 16..e + 32] != tag {
            return None;
        }
    }
    key.xor_keystream(&nonce, warpfs_crypto::gcm::DATA_COUNTER, &mut buf);
    Some(buf)
}

/// Every cipher file is at key generation `generation` and its block 0
/// opens under that generation's Twofish key as one of `files`' first
/// block, and not under generation `generation - 1`'s.
fn check_on_disk(v: &Volume, bits: u32, master: &MasterKey, generation: u32, files: &BTreeMap<String, Vec<u8>>) {
    let cipher = content_files(v);
    assert_eq!(cipher.len(), files.len(), "cipher files: {cipher:?}");
    for p in cipher {
        let raw = fs::read(&p).unwrap();
        assert_eq!(&raw[..4], b"WRPF", "{}", p.display());
        let g = u32::from_le_bytes(raw[24..28].try_into().unwrap());
        let mark = u32::from_le_bytes(raw[28..32].try_into().unwrap());
        assert_eq!((g, mark), (generation, 0), "{}: generation, watermark", p.display());
        let plain = open_block0(v.mode, bits, master, generation, &raw).unwrap_or_else(|| {
            panic!(
                "{}: block 0's tag is not Twofish-GCM of generation {generation}",
                p.display()
            )
        });
        let first = |d: &Vec<u8>| d[..d.len().min(BLOCK as usize)].to_vec();
        assert!(
            files.values().any(|d| first(d) == plain),
            "{}: block 0 is not Twofish of generation {generation} of any file",
            p.display()
        );
        if generation > 0 {
            let old = open_block0(v.mode, bits, master, generation - 1, &raw);
            assert!(
                old.is_none_or(|o| !files.values().any(|d| first(d) == o)),
                "{}: block 0 still opens under generation {}",
                p.display(),
                generation - 1
            );
        }
    }
}

/// Rekey a `mode` volume of `bits`-bit keys, mounted (`online`) or not.
fn rekey_twofish(mode: Mode, online: bool, bits: u32) {
    require_fuse!();
    let (mut v, master) = init(mode, bits);
    v.mount();
    let mut rng = Rng::for_test(&format!("rekey-{}", mode.name()));
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (name, n) in [
        ("small", 100usize),
        ("block", 4096),
        ("mid", 70_000),
        ("big", (3 << 20) + 123),
    ] {
        files.insert(name.to_string(), rng.bytes(n));
    }
    for (name, d) in &files {
        fs::write(v.p(name), d).unwrap();
    }
    if !online {
        v.unmount();
    }
    check_on_disk(&v, bits, &master, 0, &files);
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["rekey", "--jobs", "2", "--passfile"])
        .arg(&v.passfile)
        .arg(&v.cipher);
    let (writer, o) = if online {
        // A file rewritten while the rekey runs.
        let (mnt, data) = (v.mnt.clone(), rng.bytes(1 << 20));
        let w = std::thread::spawn(move || {
            for i in 0..8u8 {
                let mut d = data.clone();
                d[0] = i;
                fs::write(mnt.join("live"), &d).unwrap();
            }
            let mut d = data;
            d[0] = 7;
            d
        });
        let o = run_cmd(cmd, std::time::Duration::from_secs(300));
        (Some(w), o)
    } else {
        (None, run_cmd(cmd, std::time::Duration::from_secs(300)))
    };
    o.expect_ok("rekey");
    assert!(o.stdout.contains("to key generation 1"), "{o}");
    assert_eq!(o.stdout.contains("online"), online, "{o}");
    if let Some(w) = writer {
        files.insert("live".to_string(), w.join().expect("the writer failed"));
        assert!(fs::read(v.p("live")).unwrap() == files["live"], "live after the rekey");
        v.unmount();
    }
    check_on_disk(&v, bits, &master, 1, &files);
    let info = warpfs(args!["info", &v.cipher]);
    info.expect_ok("info");
    assert!(
        info.stdout.contains("key generation: 1") && info.stdout.contains(&format!("Twofish-{bits}")),
        "{info}"
    );
    v.mount();
    for (name, d) in &files {
        let got = fs::read(v.p(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_bytes_eq(&got, d, &format!("{} {name} after the rekey", mode.name()));
    }
    v.unmount();
    let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
    o.expect_ok("fsck after the rekey");
}
