//! Fuzz the block read path of the content crate on random cipher files:
//! input = mode (1: 0 gcm, 1 ctr, 2 xts; mod 3) ‖ 4 × (offset u32, length u16) ‖ cipher file bytes. The
//! file is opened as a `CipherFile` with the example volume's content key
//! (so seeds made from that volume decrypt) and read at the given ranges:
//! every read returns data or an error (never a panic, never more bytes than
//! asked, zeros on error), and a read that succeeds returns the same bytes
//! as block-by-block reads. fsck's per-file scan runs on the same bytes:
//! it must not panic, and a file it finds clean must read without error.
//! The keyring is mid-rekey (generation 1, a fixed test key, after the
//! example volume's generation 0), so headers with a rekey watermark take
//! the two-generation paths.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::{Arc, OnceLock};
use warpfs_content::{Cipher, CipherFile, Keyring, Mode};
use warpfs_crypto::{ContentKey, GcmTagger, XtsCipher, XtsKey};
use warpfs_keystream::Direct;

fn cipher(mode: Mode) -> Arc<Cipher> {
    static GCM: OnceLock<Arc<Cipher>> = OnceLock::new();
    static CTR: OnceLock<Arc<Cipher>> = OnceLock::new();
    static XTS: OnceLock<Arc<Cipher>> = OnceLock::new();
    let (cell, name) = match mode {
        Mode::Gcm => (&GCM, "gcm"),
        Mode::Ctr => (&CTR, "ctr"),
        Mode::Xts => {
            return XTS
                .get_or_init(|| {
                    let (keys, xts) = common::xts_keys();
                    let k = &keys.content;
                    Arc::new(Cipher::new_xts(
                        xts.clone(),
                        Arc::new(Direct::new(k.clone())),
                        GcmTagger::new(k),
                    ))
                })
                .clone()
        }
    };
    cell.get_or_init(|| {
        let k = &common::keys(name).content;
        Arc::new(Cipher::new(mode, Arc::new(Direct::new(k.clone())), GcmTagger::new(k)))
    })
    .clone()
}

/// Generation 1 of `mode` (a fixed key) over the example volume's generation 0.
fn keyring(mode: Mode) -> Arc<Keyring> {
    let k = ContentKey::new(&[7u8; 32]).expect("a 32-byte key");
    let ks = Arc::new(Direct::new(k.clone()));
    let g1 = match mode {
        Mode::Xts => Cipher::new_xts(
            XtsKey::new(XtsCipher::Aes, &[8u8; 64]).expect("a 64-byte XTS key"),
            ks,
            GcmTagger::new(&k),
        ),
        m => Cipher::new(m, ks, GcmTagger::new(&k)),
    };
    Arc::new(Keyring::new(Arc::new(g1.with_generation(1)), Some(cipher(mode))))
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
    let mode = match data[0] % 3 {
        0 => Mode::Gcm,
        1 => Mode::Ctr,
        _ => Mode::Xts,
    };
    let ranges: Vec<(u64, usize)> = data[1..25]
        .chunks_exact(6)
        .map(|c| {
            let off = u32::from_le_bytes(c[..4].try_into().unwrap()) as u64 % (1 << 20);
            let len = u16::from_le_bytes(c[4..6].try_into().unwrap()) as usize;
            (off, len)
        })
        .collect();
    let body = &data[25..];
    let c = keyring(mode);
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
