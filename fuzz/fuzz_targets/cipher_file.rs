//! Fuzz the block read path of the content crate on random cipher files:
//! input = volume kind (1 byte, mod 9, see [`KINDS`]) ‖ 4 × (offset u32,
//! length u16) ‖ cipher file bytes. The file is opened as a `CipherFile`
//! with the content key of that kind's example volume (so seeds made from
//! that volume decrypt) and read at the given ranges: every read returns
//! data or an error (never a panic, never more bytes than asked, zeros on
//! error), and a read that succeeds returns the same bytes as
//! block-by-block reads. fsck's per-file scan runs on the same bytes: it
//! must not panic, and a file it finds clean must read without error.
//! The kinds cover every content cipher (AES, Twofish, XChaCha20) in each
//! of its modes, and file summaries (the v2 gcm and XChaCha20-Poly1305
//! volumes have them: their record and markers are parsed and checked at
//! open). The keyring is mid-rekey (generation 1, a fixed test key of the
//! same cipher, after the example volume's generation 0), so headers with
//! a rekey watermark take the two-generation paths.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::{Arc, OnceLock};
use warpfs_config::ContentMode;
use warpfs_content::{Cipher, CipherFile, Keyring, Mode};
use warpfs_crypto::{ContentCipher, ContentKey, GcmTagger, Subkeys, SummaryKey, XChaChaKey, XtsCipher, XtsKey};
use warpfs_keystream::Direct;

/// The example volumes, by the input's first byte (mod 9). Seeds made by
/// fuzz/seed.sh start with the index of the volume they come from; 0, 1
/// and 2 are the first three as they always were.
const KINDS: [&str; 9] = [
    "v1-gcm",
    "v1-ctr",
    "v1-xts",
    "v1-gcm-twofish",
    "v1-ctr-twofish",
    "v1-xts-twofish",
    "v2-gcm",
    "v2-xchacha20-poly1305",
    "v2-ctr-xchacha20",
];

/// The cipher of `m` for content key bytes `raw` (and, in xts, XTS key
/// `xts`), as a volume makes it (its keys from the same HKDF bytes).
fn cipher_of(m: ContentMode, raw: &[u8], xts: Option<XtsKey>) -> Cipher {
    let mode = warpfs_volume::content_layout(m);
    if m.cipher() == ContentCipher::XChaCha20 {
        let k = XChaChaKey::new(raw).expect("a 32-byte XChaCha20 key");
        return Cipher::new_xchacha(mode, Arc::new(Direct::xchacha(k)));
    }
    let content = match m.cipher() {
        ContentCipher::Twofish => ContentKey::with_cipher(XtsCipher::Twofish, raw).expect("a Twofish key"),
        _ => ContentKey::new(raw).expect("an AES key"),
    };
    let ks = Arc::new(Direct::new(content.clone()));
    let tagger = GcmTagger::new(&content);
    match xts {
        Some(x) => Cipher::new_xts(x, ks, tagger),
        None => Cipher::new(mode, ks, tagger),
    }
}

/// Kind `i`'s keyring: generation 1 (fixed keys) over the example volume's
/// generation 0, with its file summary key when the volume has summaries;
/// and the content layout.
fn keyring(i: usize) -> (Arc<Keyring>, Mode) {
    static RINGS: [OnceLock<(Arc<Keyring>, Mode)>; 9] = [const { OnceLock::new() }; 9];
    RINGS[i]
        .get_or_init(|| {
            let (master, cfg) = common::unlock_example(KINDS[i]);
            let m = cfg.content_mode();
            let bits = cfg.key_bits();
            let xts0 = m.xts_cipher().map(|x| Subkeys::xts_key_gen(&master, bits, x, 0));
            let g0 = cipher_of(m, &Subkeys::content_key_bytes_gen(&master, bits, 0), xts0);
            let raw1 = vec![7u8; bits as usize / 8];
            let xts1 = m
                .xts_cipher()
                .map(|x| XtsKey::new(x, &vec![8u8; bits as usize / 4]).expect("an XTS key"));
            let g1 = cipher_of(m, &raw1, xts1).with_generation(1);
            let summary = cfg
                .has_feature(warpfs_config::FeatureFlag::FileSummary)
                .then(|| Arc::new(SummaryKey::derive(&master)));
            (
                Arc::new(Keyring::new(Arc::new(g1), Some(Arc::new(g0))).with_summary(summary)),
                warpfs_volume::content_layout(m),
            )
        })
        .clone()
}

/// An anonymous in-memory file holding `bytes`.
fn memfile(bytes: &[u8]) -> File {
    // SAFETY: memfd_create with a NUL-terminated name; the fd is checked and owned by the File.
    let fd = unsafe { libc::memfd_create(c"warpfs-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create failed");
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(bytes).unwrap();
    f
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 25 {
        return;
    }
    let (c, _mode) = keyring(data[0] as usize % KINDS.len());
    let ranges: Vec<(u64, usize)> = data[1..25]
        .chunks_exact(6)
        .map(|c| {
            let off = u32::from_le_bytes(c[..4].try_into().unwrap()) as u64 % (1 << 20);
            let len = u16::from_le_bytes(c[4..6].try_into().unwrap()) as usize;
            (off, len)
        })
        .collect();
    let body = &data[25..];
    let mem = memfile(body);
    let scan = warpfs_content::scan::scan(&mem, &c, 1 << 16, &mut |_, _| {}, &mut |_| {}).expect("fstat of a memfd");
    let Ok(f) = CipherFile::open(mem, c, "fuzz".into()) else {
        assert!(
            !scan.problems.is_empty(),
            "fsck found no problem in a file that does not open"
        );
        return;
    };
    if scan.problems.is_empty() {
        let mut all = vec![0u8; f.size() as usize];
        assert_eq!(
            f.read_at(0, &mut all).expect("a file fsck finds clean reads"),
            all.len()
        );
    }
    let size = f.size();
    for (off, len) in ranges {
        let mut buf = vec![0xa5u8; len];
        match f.read_at(off, &mut buf) {
            Ok(n) => {
                assert!(n <= len);
                assert_eq!(n as u64, size.saturating_sub(off).min(len as u64));
                // Block-by-block reads agree with the one big read.
                let mut pos = 0;
                while pos < n {
                    let o = off + pos as u64;
                    let step = ((4096 - o % 4096) as usize).min(n - pos);
                    let mut one = vec![0u8; step];
                    assert_eq!(f.read_at(o, &mut one).unwrap(), step);
                    assert_eq!(one, buf[pos..pos + step]);
                    pos += step;
                }
            }
            Err(_) => assert!(buf.iter().all(|&b| b == 0)),
        }
    }
});
