//! XChaCha20 through real mounts (FORMAT.md 15): `warpfs info` names the
//! cipher and mode; the bytes on disk are XChaCha20-Poly1305 (the
//! `chacha20poly1305` crate's, as the oracle) under the HKDF content key of
//! the volume key that the recovery key `init` printed opens, with the nonce `nonce ‖ 0^96` and the
//! associated data `file ID ‖ block number`, in blocks of the nnode and of a
//! nonce page, from the write pool (speculation on) and the direct path
//! (off); `ctr-xchacha20` stores the same ciphertext without a tag; a
//! flipped ciphertext bit is EIO; `--speculation auto` turns look-ahead on
//! and `warpfs stats` says so.

#[macro_use]
mod common;

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::XChaCha20Poly1305;
use common::*;
use std::ffi::OsString;
use std::fs;
use warpfs_crypto::keys::{MasterKey, Subkeys};

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
    for (mode, want, authenticated) in [
        (
            Mode::XChaCha20Poly1305,
            "authenticated: XChaCha20-Poly1305 tag per block",
            true,
        ),
        (Mode::CtrXChaCha20, "not authenticated: XChaCha20 keystream only", false),
    ] {
        let (v, _) = init(mode, &[]);
        let info = warpfs(args!["info", &v.cipher]);
        info.expect_ok("info");
        for s in [
            format!("content mode:  {} (", mode.name()),
            want.to_string(),
            "XChaCha20-256".to_string(),
            "cipher:        XChaCha20".to_string(),
        ] {
            assert!(info.stdout.contains(&s), "info lacks {s:?}:\n{info}");
        }
        let j = warpfs(args!["info", "--json", &v.cipher]);
        let j: serde_json::Value = serde_json::from_str(j.stdout.trim()).unwrap();
        assert_eq!(j["authenticated"], authenticated, "{j}");
        assert_eq!(j["cipher"], "XChaCha20", "{j}");
    }
}

#[test]
fn xchacha20_needs_gcm_or_ctr_and_256_bit_keys() {
    let v = Volume::blank(Mode::XChaCha20Poly1305);
    for (extra, want) in [
        (&["--mode", "xts"][..], "no XTS mode"),
        (&["--key-bits", "128"][..], "256-bit keys only"),
        (
            &["--mode", "ctr", "--file-summary", "on"][..],
            "--file-summary on needs",
        ),
    ] {
        let mut a = args!["init", "--passfile", &v.passfile, "--cipher", "xchacha20"];
        a.extend(extra.iter().map(OsString::from));
        a.push(v.cipher.clone().into());
        let o = warpfs(a);
        assert!(!o.ok() && o.stderr.contains(want), "{extra:?}: {o}");
        assert!(
            fs::read_dir(&v.cipher).unwrap().next().is_none(),
            "a refused init wrote files"
        );
    }
}

/// Write two blocks (0, in the nnode, and 20, behind nonce page 0) through
/// the mount and check their stored form against XChaCha20-Poly1305
/// computed here by the `chacha20poly1305` crate from the master key.
fn on_disk_is_xchacha20_poly1305(mode: Mode, speculation: &str, extra: &[&str]) {
    require_fuse!();
    let (mut v, master) = init(mode, extra);
    v.mount_with(&["--speculation", speculation]);
    let data: Vec<u8> = (0..21 * 4096u32).map(|i| (i * 7 + 3) as u8).collect();
    fs::write(v.p("f"), &data).unwrap();
    v.unmount();
    let raw = fs::read(v.single_backing_file()).unwrap();
    let base = mode.base();
    assert_eq!(raw[6], base.mode_byte());
    let id: [u8; 16] = raw[8..24].try_into().unwrap();
    let key = Subkeys::content_key_bytes(&master, 256);
    let oracle = XChaCha20Poly1305::new_from_slice(&key).unwrap();
    for b in [0u64, 20] {
        let e = base.block_entry_offset(b) as usize;
        let mut xnonce = [0u8; 24];
        xnonce[..12].copy_from_slice(&raw[e..e + 12]);
        assert_ne!(&xnonce[..12], &[0u8; 12]);
        let mut aad = id.to_vec();
        aad.extend_from_slice(&b.to_be_bytes());
        let mut want = data[(b * 4096) as usize..][..4096].to_vec();
        let tag = oracle
            .encrypt_inout_detached(&xnonce.into(), &aad, want.as_mut_slice().into())
            .unwrap();
        let d = base.block_data_offset(b) as usize;
        assert!(
            raw[d..d + 4096] == want[..],
            "block {b}: stored data is not XChaCha20 under the content key and nonce ‖ 0^96"
        );
        if base == Mode::Gcm {
            assert_eq!(
                &raw[e + 16..e + 32],
                &tag[..],
                "block {b}: stored tag is not XChaCha20-Poly1305 over file ID ‖ block number"
            );
        } else {
            assert_eq!(base.entry_size(), 16);
        }
    }
    v.mount();
    assert!(fs::read(v.p("f")).unwrap() == data, "did not read back");
}

#[test]
fn xchacha20_poly1305_on_disk() {
    on_disk_is_xchacha20_poly1305(Mode::XChaCha20Poly1305, "on", &[]);
}

#[test]
fn xchacha20_poly1305_on_disk_without_speculation() {
    on_disk_is_xchacha20_poly1305(Mode::XChaCha20Poly1305, "off", &[]);
}

#[test]
fn xchacha20_poly1305_on_disk_with_file_summaries() {
    on_disk_is_xchacha20_poly1305(Mode::XChaCha20Poly1305, "on", &["--file-summary", "on"]);
}

#[test]
fn ctr_xchacha20_on_disk() {
    on_disk_is_xchacha20_poly1305(Mode::CtrXChaCha20, "on", &[]);
}

#[test]
fn xchacha20_poly1305_tampering_is_eio_and_logged() {
    require_fuse!();
    let mut v = Volume::new(Mode::XChaCha20Poly1305);
    fs::write(v.p("t"), vec![0x42u8; 3 * 4096]).unwrap();
    v.unmount();
    let back = v.single_backing_file();
    let mut raw = fs::read(&back).unwrap();
    raw[Mode::Gcm.block_data_offset(1) as usize + 9] ^= 0x10;
    fs::write(&back, &raw).unwrap();
    v.mount();
    let e = fs::read(v.p("t")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let log = v.log();
    assert!(
        log.lines()
            .any(|l| l.contains("block 1") && l.contains("Poly1305 authentication failed")),
        "no log line names the block and the tag:\n{log}"
    );
}

fn stats(v: &Volume) -> warpfs_engine::StatsSnapshot {
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("warpfs stats --json");
    warpfs_engine::StatsSnapshot::from_json(o.stdout.trim()).unwrap_or_else(|e| panic!("bad stats JSON ({e})\n{o}"))
}

/// `--speculation auto` on an XChaCha20 volume: decrypt-ahead alone below 4
/// cores, speculation too with 4 or more (decision 0081); the masks are
/// XChaCha20 masks of the engine, and `warpfs stats` says which policy runs
/// and why.
#[test]
fn auto_policy_for_xchacha20_follows_the_cores_and_stats_say_so() {
    require_fuse!();
    let mut v = Volume::init(Mode::XChaCha20Poly1305);
    v.mount();
    let data = Rng::for_test("xchacha-stats").bytes(2 << 20);
    fs::write(v.p("f"), &data).unwrap();
    assert!(fs::read(v.p("f")).unwrap() == data);
    let s = stats(&v);
    assert!(s.xchacha_keys >= 1, "{s}");
    if let Some(forced) = test_speculation() {
        assert_eq!(s.speculation_why, format!("--speculation {forced}"), "{s}");
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(s.speculation, cores >= 4, "{cores} cores:\n{s}");
    assert!(
        s.speculation_why.starts_with("auto: ") && s.speculation_why.contains("XChaCha20"),
        "{s}"
    );
    let want = match (s.speculation, cores >= 2) {
        (true, _) => "speculation and decrypt-ahead",
        (false, true) => "decrypt-ahead",
        (false, false) => "none",
    };
    assert_eq!(s.policy(), want, "{s}");
    assert!(s.defines > 0, "no mask was defined:\n{s}");
    let o = warpfs(args!["stats", &v.mnt]);
    o.expect_ok("stats");
    let on = if s.speculation { "on" } else { "off" };
    assert!(o.stdout.contains(&format!("speculation {on}: auto: ")), "{o}");
    assert!(o.stdout.contains(&format!("ahead of need: {}", s.policy())), "{o}");
    assert!(o.stdout.contains("1 XChaCha20") || s.xchacha_keys > 1, "{o}");
}
