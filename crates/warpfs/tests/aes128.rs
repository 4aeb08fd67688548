//! AES-128 content keys in gcm and ctr through real mounts (FORMAT.md 7:
//! `--key-bits 128`): `warpfs info` names AES-128; files of every size
//! class (within a block, across blocks, past the nnode into the first
//! nonce page, rewritten in the middle, truncated) read back after a
//! remount; the bytes on disk are AES-128-CTR under the first 16 bytes of
//! the HKDF content key (and, in gcm, tagged with AES-128-GCM), which the
//! 256-bit key of the same derivation does not open; a flipped ciphertext
//! bit is EIO in gcm. Each case runs with speculation on (the write pool's
//! masks made by worker threads under the 128-bit key) and off.

#[macro_use]
mod common;

use common::*;
use std::ffi::OsString;
use std::fs;
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::{ContentKey, GcmTagger};

/// `warpfs init --key-bits 128` of `mode`; returns the volume and its
/// volume key, which the recovery key `init` printed opens.
fn init_128(mode: Mode) -> (Volume, MasterKey) {
    let v = Volume::blank(mode);
    let mut a = args!["init", "--passfile", &v.passfile, "--key-bits", "128"];
    a.extend(mode.init_args().into_iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    let o = warpfs(a);
    o.expect_ok("init --key-bits 128");
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

/// The stored form of block 0 of the volume's only file: (file ID, nonce,
/// ciphertext, stored tag (gcm)).
fn block0(v: &Volume) -> ([u8; 16], [u8; 12], Vec<u8>, Vec<u8>) {
    let raw = fs::read(v.single_backing_file()).unwrap();
    let base = v.mode.base();
    assert_eq!(raw[6], base.mode_byte(), "mode byte");
    let e = base.block_entry_offset(0) as usize;
    let d = base.block_data_offset(0) as usize;
    let tag = if base == Mode::Gcm {
        raw[e + 16..e + 32].to_vec()
    } else {
        Vec::new()
    };
    (
        raw[8..24].try_into().unwrap(),
        raw[e..e + 12].try_into().unwrap(),
        raw[d..d + BLOCK as usize].to_vec(),
        tag,
    )
}

#[test]
fn gcm_speculation_on() {
    with_speculation(true, || aes128_round_trip(Mode::Gcm));
}

#[test]
fn gcm_speculation_off() {
    with_speculation(false, || aes128_round_trip(Mode::Gcm));
}

#[test]
fn ctr_speculation_on() {
    with_speculation(true, || aes128_round_trip(Mode::Ctr));
}

#[test]
fn ctr_speculation_off() {
    with_speculation(false, || aes128_round_trip(Mode::Ctr));
}

fn aes128_round_trip(mode: Mode) {
    require_fuse!();
    let (mut v, master) = init_128(mode);
    let info = warpfs(args!["info", &v.cipher]);
    info.expect_ok("info");
    for s in [format!("content mode:  {}", mode.name()), "AES-128".to_string()] {
        assert!(info.stdout.contains(&s), "info lacks {s:?}:\n{info}");
    }
    assert!(!info.stdout.contains("AES-256"), "{info}");

    // One block first: its stored form is checked against the key.
    v.mount();
    let block: Vec<u8> = (0..BLOCK as u32).map(|i| (i * 13 + 5) as u8).collect();
    fs::write(v.p("one"), &block).unwrap();
    assert_speculation_ran(&v.mnt, mode, "the first mount");
    v.unmount();
    let (id, nonce, stored, tag) = block0(&v);
    let key_bytes = Subkeys::content_key_bytes(&master, 128);
    assert_eq!(key_bytes.len(), 16);
    let key = ContentKey::new(&key_bytes).unwrap();
    let mut plain = stored.clone();
    key.xor_keystream(&nonce, warpfs_crypto::gcm::DATA_COUNTER, &mut plain);
    assert_eq!(plain, block, "block 0 is not AES-128-CTR under the content key");
    let mut wide = stored.clone();
    ContentKey::new(&Subkeys::content_key_bytes(&master, 256))
        .unwrap()
        .xor_keystream(&nonce, warpfs_crypto::gcm::DATA_COUNTER, &mut wide);
    assert_ne!(wide, block, "the 256-bit key opens a 128-bit volume");
    if mode.base() == Mode::Gcm {
        let mut aad = id.to_vec();
        aad.extend_from_slice(&0u64.to_be_bytes());
        let want = GcmTagger::new(&key).tag(&aad, &stored, &warpfs_crypto::gcm::tag_mask(&key, &nonce));
        assert_eq!(tag, want, "block 0's tag is not AES-128-GCM");
    }

    // gcm: a flipped bit of block 0 is EIO (ctr is not authenticated).
    if mode.base() == Mode::Gcm {
        let back = v.single_backing_file();
        let orig = fs::read(&back).unwrap();
        let mut raw = orig.clone();
        raw[Mode::Gcm.block_data_offset(0) as usize + 9] ^= 0x10;
        fs::write(&back, &raw).unwrap();
        v.mount();
        let e = fs::read(v.p("one")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "a flipped bit read without EIO: {e}");
        v.unmount();
        fs::write(&back, &orig).unwrap();
    }

    // Every size class, a rewrite in the middle, a truncation, a remount.
    v.mount();
    let mut rng = Rng::for_test(&format!("aes128-{}", mode.name()));
    let mut files: Vec<(String, Vec<u8>)> = [0usize, 1, 4095, 4097, 70_000, (1 << 20) + 100_000]
        .iter()
        .map(|&n| (format!("f{n}"), rng.bytes(n)))
        .collect();
    for (name, data) in &files {
        fs::write(v.p(name), data).unwrap();
    }
    {
        let (name, data) = files.last_mut().unwrap();
        let f = fs::OpenOptions::new().write(true).open(v.p(&*name)).unwrap();
        let patch = rng.bytes(9000);
        write_at(&f, 300_000, &patch).unwrap();
        data[300_000..309_000].copy_from_slice(&patch);
        f.set_len(1_000_003).unwrap();
        data.truncate(1_000_003);
    }
    assert_speculation_ran(&v.mnt, mode, "the second mount");
    v.remount();
    assert_eq!(fs::read(v.p("one")).unwrap(), block);
    for (name, data) in &files {
        let got = fs::read(v.p(name)).unwrap();
        assert_bytes_eq(&got, data, &format!("{} {name} after a remount", mode.name()));
    }
    v.unmount();
}
