//! Twofish in every content mode through real mounts (FORMAT.md 7 and 11):
//! `warpfs info` names the cipher and mode; the bytes on disk are Twofish
//! (CTR with the NIST counter layout, GCM tags with H = Twofish_K(0^128))
//! under the HKDF content key of the volume key (opened from the config by
//! the password through the library); a
//! flipped ciphertext bit is EIO in `gcm-twofish`; and the write pool
//! (speculation on) and the direct path (off) write the same format.

#[macro_use]
mod common;

use common::*;
use std::ffi::OsString;
use std::fs;
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::{ContentKey, GcmTagger, XtsCipher};

/// `warpfs init` of `mode` (with `extra` flags); returns the volume and its
/// volume key, which the recovery key `init` printed opens.
fn init(mode: Mode, extra: &[&str]) -> (Volume, MasterKey) {
    let v = Volume::blank(mode);
    let mut a = args!["init", "--passfile", &v.passfile];
    a.extend(mode.init_args().into_iter().map(OsString::from));
    a.extend(extra.iter().map(OsString::from));
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
    assert_eq!(key, cfg.unlock(PASSWORD.as_bytes()).unwrap());
    (v, key)
}

#[test]
fn info_names_cipher_and_mode() {
    for (mode, bits, want) in [
        (Mode::GcmTwofish, "256", "authenticated: Twofish-GCM tag per block"),
        (Mode::CtrTwofish, "128", "not authenticated: Twofish-CTR only"),
        (Mode::XtsTwofish, "256", "XTS-Twofish per 4 KiB block"),
    ] {
        let (v, _) = init(mode, &["--key-bits", bits]);
        let info = warpfs(args!["info", &v.cipher]);
        info.expect_ok("info");
        for s in [
            format!("content mode:  {} (", mode.name()),
            want.to_string(),
            format!("Twofish-{bits}"),
            "cipher:        Twofish".to_string(),
        ] {
            assert!(info.stdout.contains(&s), "info lacks {s:?}:\n{info}");
        }
    }
}

/// Write one block through the mount and check its stored form against
/// Twofish-CTR (and the GCM tag) computed here from the master key.
fn on_disk_is_twofish(mode: Mode, bits: u32, speculation: &str) {
    require_fuse!();
    let (mut v, master) = init(mode, &["--key-bits", &bits.to_string()]);
    v.mount_with(&["--speculation", speculation]);
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    fs::write(v.p("f"), &data).unwrap();
    v.unmount();
    let raw = fs::read(v.single_backing_file()).unwrap();
    let base = mode.base();
    assert_eq!(raw[6], base.mode_byte());
    let e = base.block_entry_offset(0) as usize;
    let nonce: [u8; 12] = raw[e..e + 12].try_into().unwrap();
    let d = base.block_data_offset(0) as usize;
    let stored = &raw[d..d + 4096];
    let key_bytes = Subkeys::content_key_bytes(&master, bits);
    let key = ContentKey::with_cipher(XtsCipher::Twofish, &key_bytes).unwrap();
    let mut plain = stored.to_vec();
    key.xor_keystream(&nonce, warpfs_crypto::gcm::DATA_COUNTER, &mut plain);
    assert_eq!(plain, data, "stored block is not Twofish-CTR under the content key");
    // The AES key of the same bytes does not decrypt it.
    let mut aes = stored.to_vec();
    ContentKey::new(&key_bytes)
        .unwrap()
        .xor_keystream(&nonce, warpfs_crypto::gcm::DATA_COUNTER, &mut aes);
    assert_ne!(aes, data);
    if base == Mode::Gcm {
        let id: [u8; 16] = raw[8..24].try_into().unwrap();
        let mut aad = id.to_vec();
        aad.extend_from_slice(&0u64.to_be_bytes());
        let tag = GcmTagger::new(&key).tag(&aad, stored, &warpfs_crypto::gcm::tag_mask(&key, &nonce));
        assert_eq!(&raw[e + 16..e + 32], &tag, "stored tag is not Twofish-GCM");
    }
    v.mount();
    assert_eq!(fs::read(v.p("f")).unwrap(), data);
}

#[test]
fn gcm_twofish_on_disk() {
    on_disk_is_twofish(Mode::GcmTwofish, 256, "on");
}

#[test]
fn ctr_twofish_128_on_disk() {
    on_disk_is_twofish(Mode::CtrTwofish, 128, "on");
}

#[test]
fn gcm_twofish_on_disk_without_speculation() {
    on_disk_is_twofish(Mode::GcmTwofish, 128, "off");
}

#[test]
fn gcm_twofish_tampering_is_eio() {
    require_fuse!();
    let mut v = Volume::new(Mode::GcmTwofish);
    fs::write(v.p("t"), vec![0x42u8; 3 * 4096]).unwrap();
    v.unmount();
    let back = v.single_backing_file();
    let mut raw = fs::read(&back).unwrap();
    raw[Mode::Gcm.block_data_offset(1) as usize + 9] ^= 0x10;
    fs::write(&back, &raw).unwrap();
    v.mount();
    let e = fs::read(v.p("t")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(v.log().contains("block 1"), "no log line names the block:\n{}", v.log());
}

fn stats(v: &Volume) -> warpfs_engine::StatsSnapshot {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    warpfs_engine::StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

/// Requests of 64 KiB or more in `xts` are split across the engine's
/// workers; the data round-trips. No decrypt-ahead: its threads would make
/// the splits instead of the FUSE thread. Which thread runs how many parts
/// depends on the scheduler (a busy machine can leave the FUSE thread
/// none): that the caller takes a share is tested in the engine
/// (`split::tests`), where it is deterministic.
fn big_xts_requests_are_split(mode: Mode) {
    require_fuse!();
    let mut v = Volume::init(mode);
    v.mount_with(&["--speculation", "on", "--engine-threads", "2", "--read-ahead", "0"]);
    let data = Rng::for_test("xts-split").bytes(8 << 20);
    {
        use std::io::Write;
        let mut f = fs::File::create(v.p("big")).unwrap();
        for c in data.chunks(1 << 20) {
            f.write_all(c).unwrap();
        }
        drop_cache(&f);
    }
    assert!(fs::read(v.p("big")).unwrap() == data, "8 MiB did not read back");
    let s = stats(&v);
    assert!(s.split_requests > 0, "no request was split:\n{s}");
    assert!(s.split_parts_workers > 0, "no worker took a part:\n{s}");
    assert!(
        s.split_parts_workers + s.split_parts_caller >= 2 * s.split_requests,
        "a split request ran fewer than two parts:\n{s}"
    );
    v.remount();
    assert!(
        fs::read(v.p("big")).unwrap() == data,
        "8 MiB did not read back after a remount"
    );
}

#[test]
fn big_xts_twofish_requests_are_split() {
    big_xts_requests_are_split(Mode::XtsTwofish);
}

#[test]
fn big_xts_aes_requests_are_split() {
    big_xts_requests_are_split(Mode::Xts);
}

/// `--speculation auto` turns look-ahead on for a Twofish volume whatever
/// the CPU, and `warpfs stats` says why; an explicit flag wins and is named.
#[test]
fn auto_speculation_is_on_for_twofish_and_stats_say_why() {
    require_fuse!();
    let mut v = Volume::init(Mode::GcmTwofish);
    v.mount();
    fs::write(v.p("f"), vec![1u8; 200_000]).unwrap();
    let s = stats(&v);
    if let Some(forced) = test_speculation() {
        // WARPFS_TEST_SPECULATION put a flag on every mount: no auto here.
        assert_eq!(s.speculation_why, format!("--speculation {forced}"), "{s}");
        return;
    }
    assert!(s.speculation, "{s}");
    assert!(s.speculation_why.contains("Twofish"), "{s}");
    assert!(s.twofish_keys >= 1, "{s}");
    let o = warpfs(args!["stats", &v.mnt]);
    assert!(
        o.stdout
            .contains("speculation on: auto: the volume's cipher is Twofish"),
        "{o}"
    );
    v.unmount();
    v.mount_with(&["--speculation", "off"]);
    let s = stats(&v);
    assert!(!s.speculation && s.speculation_why == "--speculation off", "{s}");
}

/// `--speculation auto` (and `-o speculation=auto`) is the default said out
/// loud: the volume and the CPU decide, and `warpfs stats` gives auto's
/// reason, not a flag's.
#[test]
fn speculation_auto_is_accepted_and_decides_as_the_default_does() {
    require_fuse!();
    let mut v = Volume::init(Mode::GcmTwofish);
    for how in [&["--speculation", "auto"][..], &["-o", "speculation=auto"]] {
        v.mount_with(how);
        fs::write(v.p("f"), vec![2u8; 100_000]).unwrap();
        let s = stats(&v);
        assert!(s.speculation, "{how:?}: {s}");
        assert!(s.speculation_why.starts_with("auto: "), "{how:?}: {s}");
        assert!(s.speculation_why.contains("Twofish"), "{how:?}: {s}");
        v.unmount();
    }
}
