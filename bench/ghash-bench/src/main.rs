//! GHASH and AES-GCM paths on one core, 4 KiB blocks (which path each
//! warpfs mode uses and why). Prints one JSON object on stdout.
//!
//! Every case first checks its output against the RustCrypto `aes-gcm`
//! reference (same key, nonce, AAD, plaintext), so a fast but wrong path
//! cannot win; then it runs for `--seconds` (default 1) and reports GB/s
//! (10^9 bytes of block data per second).

use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce as GcmNonce};
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce as AwsNonce, UnboundKey, AES_256_GCM};
use ghash::universal_hash::UniversalHash;
use polyval::hazmat::FieldElement;
use polyval::Polyval;
use std::hint::black_box;
use std::time::{Duration, Instant};
use warpfs_crypto::aes_ctr::{xor_in_place, ContentKey};
use warpfs_crypto::gcm::{GcmTagger, DATA_COUNTER, J0_COUNTER};

const BLOCK: usize = 4096;
const KEY: [u8; 32] = [0x2b; 32];
const NONCE: [u8; 12] = [0x5a; 12];
/// AD = file ID ‖ block number, as warpfs does (FORMAT.md 3.5).
const AAD: [u8; 24] = [0x11; 24];

struct Case {
    name: &'static str,
    what: &'static str,
    gbs: f64,
}

/// Run `f` (one 4 KiB operation) for `secs` seconds; GB/s.
fn measure(secs: f64, mut f: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        f();
    }
    let limit = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < limit {
        for _ in 0..256 {
            f();
        }
        n += 256;
    }
    (n as f64 * BLOCK as f64) / t0.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let mut secs = 1.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => secs = args.next().and_then(|s| s.parse().ok()).expect("--seconds N"),
            _ => panic!("usage: ghash-bench [--seconds N]"),
        }
    }
    let pt: Vec<u8> = (0..BLOCK).map(|i| (i * 7 + 3) as u8).collect();

    // Reference: RustCrypto aes-gcm.
    let rc = Aes256Gcm::new(&KEY.into());
    let rc_nonce = GcmNonce::from(NONCE);
    let mut ref_ct = pt.clone();
    let ref_tag: [u8; 16] = rc
        .encrypt_inout_detached(&rc_nonce, &AAD, ref_ct.as_mut_slice().into())
        .unwrap()
        .into();

    // Our pieces.
    let key = ContentKey::new(&KEY).unwrap();
    let tagger = GcmTagger::new(&key);
    let mut mask = vec![0u8; 16 + BLOCK]; // E(J0) ‖ data keystream, as a ready engine mask
    key.keystream(&NONCE, J0_COUNTER, &mut mask);
    let ej0: [u8; 16] = mask[..16].try_into().unwrap();
    let mut h = [0u8; 16];
    key.encrypt_block(&mut h);

    let mut cases = Vec::new();
    let mut buf = ref_ct.clone();

    // 1. warpfs's tag path: S = GHASH_H(AAD, C) through GcmTagger.
    assert_eq!(xor16(tagger.ghash(&AAD, &ref_ct), ej0), ref_tag);
    cases.push(Case {
        name: "warpfs_ghash",
        what: "warpfs-crypto GcmTagger::ghash (warpfs's tag path): the VPCLMULQDQ-512 kernel where the CPU has it, else the ghash crate; AAD + 4 KiB + lengths",
        gbs: measure(secs, || {
            black_box(tagger.ghash(black_box(&AAD), black_box(&ref_ct)));
        }),
    });

    // 1b. the ghash crate alone (warpfs's fallback and the kernel's oracle).
    let ghash_crate = |c: &[u8]| -> [u8; 16] {
        let mut g = ghash::GHash::new(&h.into());
        g.update_padded(&AAD);
        g.update_padded(c);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((AAD.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((c.len() as u64) * 8).to_be_bytes());
        g.update(&[lens.into()]);
        g.finalize().into()
    };
    assert_eq!(xor16(ghash_crate(&ref_ct), ej0), ref_tag);
    cases.push(Case {
        name: "ghash_crate",
        what: "ghash 0.6 crate alone (warpfs's fallback without VPCLMULQDQ, and the kernel's test oracle): AAD + 4 KiB + lengths",
        gbs: measure(secs, || {
            black_box(ghash_crate(black_box(&ref_ct)));
        }),
    });

    // 2. polyval with the byte reversal done by hand (GHASH via POLYVAL, RFC 8452 appendix A).
    let hp: [u8; 16] = FieldElement::from(h).reverse().mulx().into();
    let pv = Polyval::new(&hp.into());
    let mut scratch = vec![0u8; BLOCK + 48];
    let polyval_ghash = |scratch: &mut [u8], c: &[u8]| -> [u8; 16] {
        let mut n = 0;
        let mut push = |blk: &[u8]| {
            let mut b = [0u8; 16];
            b[..blk.len()].copy_from_slice(blk);
            b.reverse();
            scratch[n..n + 16].copy_from_slice(&b);
            n += 16;
        };
        for blk in AAD.chunks(16) {
            push(blk);
        }
        for blk in c.chunks(16) {
            push(blk);
        }
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&((AAD.len() as u64) * 8).to_be_bytes());
        lens[8..].copy_from_slice(&((c.len() as u64) * 8).to_be_bytes());
        push(&lens);
        let mut g = pv.clone();
        g.update_padded(&scratch[..n]);
        let mut out: [u8; 16] = g.finalize().into();
        out.reverse();
        out
    };
    assert_eq!(xor16(polyval_ghash(&mut scratch, &ref_ct), ej0), ref_tag);
    cases.push(Case {
        name: "polyval_reverse",
        what: "polyval 0.7 with the GHASH byte reversal done by hand into a scratch buffer",
        gbs: measure(secs, || {
            black_box(polyval_ghash(&mut scratch, black_box(&ref_ct)));
        }),
    });

    // 3. raw polyval (no reversal: not GHASH, the multiply-add ceiling).
    cases.push(Case {
        name: "polyval_raw",
        what: "polyval 0.7 over the 4 KiB as is (no reversal; not GCM-compatible: the ceiling of the field arithmetic)",
        gbs: measure(secs, || {
            let mut g = pv.clone();
            g.update_padded(black_box(&ref_ct));
            black_box(g.finalize());
        }),
    });

    // 4. our gcm read path with the mask ready: GHASH(C), XOR mask, compare tag.
    let read = |buf: &mut [u8], ct: &[u8], mask: &[u8]| -> bool {
        buf.copy_from_slice(ct);
        let s = tagger.ghash(&AAD, buf);
        xor_in_place(buf, &mask[16..]);
        let t = xor16(s, mask[..16].try_into().unwrap());
        subtle_eq(&t, &ref_tag)
    };
    assert!(read(&mut buf, &ref_ct, &mask) && buf == pt);
    cases.push(Case {
        name: "warpfs_gcm_read_mask_ready",
        what: "warpfs gcm read, mask ready (engine hit): copy in, GHASH(C), XOR mask, tag compare",
        gbs: measure(secs, || {
            black_box(read(&mut buf, black_box(&ref_ct), &mask));
        }),
    });

    // 5. our write path with the mask ready: XOR mask, GHASH(C) -> tag.
    let write = |buf: &mut [u8], p: &[u8], mask: &[u8]| -> [u8; 16] {
        buf.copy_from_slice(p);
        xor_in_place(buf, &mask[16..]);
        tagger.tag(&AAD, buf, mask[..16].try_into().unwrap())
    };
    assert_eq!(write(&mut buf, &pt, &mask), ref_tag);
    assert_eq!(buf, ref_ct);
    cases.push(Case {
        name: "warpfs_gcm_write_mask_ready",
        what: "warpfs gcm write, mask ready (pool hit): copy in, XOR mask, GHASH(C), tag",
        gbs: measure(secs, || {
            black_box(write(&mut buf, black_box(&pt), &mask));
        }),
    });

    // 6. plain CTR XOR with the mask ready (warpfs ctr mode, hit).
    cases.push(Case {
        name: "ctr_xor_mask_ready",
        what: "warpfs ctr mode, mask ready: copy in, XOR mask (no tag)",
        gbs: measure(secs, || {
            buf.copy_from_slice(black_box(&ref_ct));
            xor_in_place(&mut buf, &mask[16..]);
            black_box(&buf);
        }),
    });

    // 7. gcm with the mask made inline (speculation off / a miss).
    let inline = |buf: &mut [u8], ct: &[u8]| -> bool {
        buf.copy_from_slice(ct);
        let s = tagger.ghash(&AAD, buf);
        let mut e = [0u8; 16];
        key.keystream(&NONCE, J0_COUNTER, &mut e);
        key.xor_keystream(&NONCE, DATA_COUNTER, buf);
        subtle_eq(&xor16(s, e), &ref_tag)
    };
    assert!(inline(&mut buf, &ref_ct) && buf == pt);
    cases.push(Case {
        name: "warpfs_gcm_read_inline_mask",
        what: "warpfs gcm read, mask made on the calling thread (miss / speculation off): GHASH + AES-CTR",
        gbs: measure(secs, || {
            black_box(inline(&mut buf, black_box(&ref_ct)));
        }),
    });

    // 8/9. aws-lc-rs AES-256-GCM (stitched AES-NI + PCLMUL/VPCLMUL assembly).
    let aws = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &KEY).unwrap());
    buf.copy_from_slice(&pt);
    let t = aws
        .seal_in_place_separate_tag(AwsNonce::assume_unique_for_key(NONCE), Aad::from(AAD), &mut buf)
        .unwrap();
    assert_eq!(t.as_ref(), &ref_tag[..]);
    assert_eq!(buf, ref_ct);
    cases.push(Case {
        name: "aws_lc_rs_seal",
        what: "aws-lc-rs AES-256-GCM seal_in_place_separate_tag (stitched AES+GHASH)",
        gbs: measure(secs, || {
            buf.copy_from_slice(black_box(&pt));
            let t = aws
                .seal_in_place_separate_tag(AwsNonce::assume_unique_for_key(NONCE), Aad::from(AAD), &mut buf)
                .unwrap();
            let _ = black_box(t);
        }),
    });
    buf.copy_from_slice(&ref_ct);
    aws.open_in_place_separate_tag(
        AwsNonce::assume_unique_for_key(NONCE),
        Aad::from(AAD),
        &ref_tag,
        &mut buf,
    )
    .unwrap();
    assert_eq!(buf, pt);
    cases.push(Case {
        name: "aws_lc_rs_open",
        what: "aws-lc-rs AES-256-GCM open_in_place_separate_tag",
        gbs: measure(secs, || {
            buf.copy_from_slice(black_box(&ref_ct));
            aws.open_in_place_separate_tag(
                AwsNonce::assume_unique_for_key(NONCE),
                Aad::from(AAD),
                &ref_tag,
                &mut buf,
            )
            .unwrap();
            black_box(&buf);
        }),
    });

    // 10. RustCrypto aes-gcm.
    cases.push(Case {
        name: "rustcrypto_aes_gcm_seal",
        what: "RustCrypto aes-gcm 0.11 Aes256Gcm encrypt_inout_detached",
        gbs: measure(secs, || {
            buf.copy_from_slice(black_box(&pt));
            let t = rc
                .encrypt_inout_detached(&rc_nonce, &AAD, buf.as_mut_slice().into())
                .unwrap();
            black_box(t);
        }),
    });

    let flag = |f: &str| {
        std::fs::read_to_string("/proc/cpuinfo")
            .map(|c| {
                c.lines()
                    .any(|l| l.starts_with("flags") && l.split_whitespace().any(|w| w == f))
            })
            .unwrap_or(false)
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(": ").nth(1))
                .map(str::to_string)
        })
        .unwrap_or_default();
    let out = serde_json::json!({
        "benchmark": "ghash",
        "block_bytes": BLOCK,
        "aad_bytes": AAD.len(),
        "key_bits": 256,
        "seconds_per_case": secs,
        "threads": 1,
        "cpu_model": cpu,
        "cpu_flags": {"aes": flag("aes"), "pclmulqdq": flag("pclmulqdq"), "vaes": flag("vaes"),
                      "vpclmulqdq": flag("vpclmulqdq"), "avx512f": flag("avx512f")},
        "results": cases.iter().map(|c| serde_json::json!({"case": c.name, "what": c.what, "gb_s": (c.gbs * 100.0).round() / 100.0})).collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

fn xor16(a: [u8; 16], b: [u8; 16]) -> [u8; 16] {
    std::array::from_fn(|i| a[i] ^ b[i])
}

/// Constant-time equality, as warpfs compares tags.
fn subtle_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    let mut d = 0u8;
    for i in 0..16 {
        d |= a[i] ^ b[i];
    }
    black_box(d) == 0
}
