//! The inline cipher against the libraries, one core, 4 KiB blocks: what a
//! warpfs request costs when no mask was made ahead (gcm seal and open,
//! ctr, xts encrypt and decrypt, AES-256), side by side with aws-lc
//! (aws-lc-rs for GCM, its EVP interface through aws-lc-sys for CTR and
//! XTS) and the system's OpenSSL (EVP through libcrypto). Prints one JSON
//! object on stdout.
//!
//! Every case first checks its output against warpfs's for the same key,
//! nonce or tweak, associated data and plaintext (and the libraries'
//! against each other), so a fast but wrong path cannot win; then each
//! runs for `--seconds` (default 1), all cases of a round one after the
//! other, for `--rounds` rounds (default 3): the JSON keeps every round's
//! GB/s (10^9 bytes of block data per second) and the median. Each
//! operation copies the 4 KiB in first, as a request does.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce as AwsNonce, UnboundKey, AES_256_GCM};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::hint::black_box;
use std::time::{Duration, Instant};
use warpfs_crypto::aes_ctr::ContentKey;
use warpfs_crypto::gcm::{GcmTagger, DATA_COUNTER, J0_COUNTER};
use warpfs_crypto::{file_block_tweak, XtsCipher, XtsKey};

const BLOCK: usize = 4096;
const KEY: [u8; 32] = [0x2b; 32];
/// An XTS key: two different 256-bit halves (libraries refuse equal ones).
const XTS_KEY: [u8; 64] = {
    let mut k = [0x3cu8; 64];
    let mut i = 32;
    while i < 64 {
        k[i] = 0xa7;
        i += 1;
    }
    k
};
const NONCE: [u8; 12] = [0x5a; 12];
/// AD = file ID ‖ block number, as warpfs does (FORMAT.md 3.5).
const AAD: [u8; 24] = [0x11; 24];
const FILE_ID: [u8; 16] = [0x42; 16];

/// The system's OpenSSL (libcrypto), the EVP calls used here.
mod ossl {
    use std::ffi::{c_char, c_int, c_void};
    #[link(name = "crypto")]
    extern "C" {
        pub fn EVP_CIPHER_CTX_new() -> *mut c_void;
        pub fn EVP_CIPHER_CTX_free(ctx: *mut c_void);
        pub fn EVP_EncryptInit_ex(
            ctx: *mut c_void,
            c: *const c_void,
            e: *mut c_void,
            key: *const u8,
            iv: *const u8,
        ) -> c_int;
        pub fn EVP_DecryptInit_ex(
            ctx: *mut c_void,
            c: *const c_void,
            e: *mut c_void,
            key: *const u8,
            iv: *const u8,
        ) -> c_int;
        pub fn EVP_EncryptUpdate(ctx: *mut c_void, out: *mut u8, outl: *mut c_int, inp: *const u8, inl: c_int)
            -> c_int;
        pub fn EVP_DecryptUpdate(ctx: *mut c_void, out: *mut u8, outl: *mut c_int, inp: *const u8, inl: c_int)
            -> c_int;
        pub fn EVP_EncryptFinal_ex(ctx: *mut c_void, out: *mut u8, outl: *mut c_int) -> c_int;
        pub fn EVP_DecryptFinal_ex(ctx: *mut c_void, out: *mut u8, outl: *mut c_int) -> c_int;
        pub fn EVP_CIPHER_CTX_ctrl(ctx: *mut c_void, t: c_int, arg: c_int, ptr: *mut c_void) -> c_int;
        pub fn EVP_aes_256_gcm() -> *const c_void;
        pub fn EVP_aes_256_ctr() -> *const c_void;
        pub fn EVP_aes_256_xts() -> *const c_void;
        pub fn OpenSSL_version(t: c_int) -> *const c_char;
    }
}

const EVP_CTRL_GCM_GET_TAG: c_int = 0x10;
const EVP_CTRL_GCM_SET_TAG: c_int = 0x11;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Gcm,
    Ctr,
    Xts,
}

/// One library's EVP interface, as plain function pointers over `c_void`.
struct Lib {
    name: &'static str,
    new: fn() -> *mut c_void,
    free: fn(*mut c_void),
    /// (ctx, mode or None to keep the cipher, encrypt?, key or null, iv or null)
    init: fn(*mut c_void, Option<Mode>, bool, *const u8, *const u8) -> bool,
    /// (ctx, encrypt?, out (null: associated data), in, len)
    update: fn(*mut c_void, bool, *mut u8, *const u8, usize) -> bool,
    finish: fn(*mut c_void, bool) -> bool,
    ctrl: fn(*mut c_void, c_int, c_int, *mut c_void) -> bool,
}

macro_rules! lib {
    ($name:expr, $m:ident) => {
        Lib {
            name: $name,
            new: || unsafe { $m::EVP_CIPHER_CTX_new() as *mut c_void },
            free: |c| unsafe { $m::EVP_CIPHER_CTX_free(c as _) },
            init: |c, mode, enc, key, iv| unsafe {
                let cipher = match mode {
                    None => std::ptr::null(),
                    Some(Mode::Gcm) => $m::EVP_aes_256_gcm() as *const c_void,
                    Some(Mode::Ctr) => $m::EVP_aes_256_ctr() as *const c_void,
                    Some(Mode::Xts) => $m::EVP_aes_256_xts() as *const c_void,
                };
                if enc {
                    $m::EVP_EncryptInit_ex(c as _, cipher as _, std::ptr::null_mut(), key, iv) == 1
                } else {
                    $m::EVP_DecryptInit_ex(c as _, cipher as _, std::ptr::null_mut(), key, iv) == 1
                }
            },
            update: |c, enc, out, inp, len| unsafe {
                let mut outl: c_int = 0;
                let r = if enc {
                    $m::EVP_EncryptUpdate(c as _, out, &mut outl, inp, len as c_int)
                } else {
                    $m::EVP_DecryptUpdate(c as _, out, &mut outl, inp, len as c_int)
                };
                r == 1 && outl as usize == len
            },
            finish: |c, enc| unsafe {
                let mut outl: c_int = 0;
                let mut tail = [0u8; 32];
                let r = if enc {
                    $m::EVP_EncryptFinal_ex(c as _, tail.as_mut_ptr(), &mut outl)
                } else {
                    $m::EVP_DecryptFinal_ex(c as _, tail.as_mut_ptr(), &mut outl)
                };
                r == 1 && outl == 0
            },
            ctrl: |c, t, arg, p| unsafe { $m::EVP_CIPHER_CTX_ctrl(c as _, t, arg, p as _) == 1 },
        }
    };
}

/// A context of `lib` set up for `mode` in one direction.
struct Ctx<'a> {
    lib: &'a Lib,
    ctx: *mut c_void,
    enc: bool,
}

impl<'a> Ctx<'a> {
    fn new(lib: &'a Lib, mode: Mode, enc: bool) -> Self {
        let ctx = (lib.new)();
        assert!(!ctx.is_null(), "{}: no context", lib.name);
        let key = if mode == Mode::Xts {
            XTS_KEY.as_ptr()
        } else {
            KEY.as_ptr()
        };
        assert!(
            (lib.init)(ctx, Some(mode), enc, key, std::ptr::null()),
            "{}: init",
            lib.name
        );
        Self { lib, ctx, enc }
    }

    /// CTR or XTS over `buf` in place from `iv` (16 bytes).
    fn run(&self, iv: &[u8; 16], buf: &mut [u8]) {
        assert!((self.lib.init)(self.ctx, None, self.enc, std::ptr::null(), iv.as_ptr()));
        assert!((self.lib.update)(
            self.ctx,
            self.enc,
            buf.as_mut_ptr(),
            buf.as_ptr(),
            buf.len()
        ));
    }

    /// GCM seal in place; the tag.
    fn seal(&self, buf: &mut [u8]) -> [u8; 16] {
        assert!((self.lib.init)(self.ctx, None, true, std::ptr::null(), NONCE.as_ptr()));
        assert!((self.lib.update)(
            self.ctx,
            true,
            std::ptr::null_mut(),
            AAD.as_ptr(),
            AAD.len()
        ));
        assert!((self.lib.update)(
            self.ctx,
            true,
            buf.as_mut_ptr(),
            buf.as_ptr(),
            buf.len()
        ));
        assert!((self.lib.finish)(self.ctx, true));
        let mut tag = [0u8; 16];
        assert!((self.lib.ctrl)(
            self.ctx,
            EVP_CTRL_GCM_GET_TAG,
            16,
            tag.as_mut_ptr().cast()
        ));
        tag
    }

    /// GCM open in place; whether the tag verified.
    fn open(&self, buf: &mut [u8], tag: &[u8; 16]) -> bool {
        let mut t = *tag;
        assert!((self.lib.init)(self.ctx, None, false, std::ptr::null(), NONCE.as_ptr()));
        assert!((self.lib.update)(
            self.ctx,
            false,
            std::ptr::null_mut(),
            AAD.as_ptr(),
            AAD.len()
        ));
        assert!((self.lib.update)(
            self.ctx,
            false,
            buf.as_mut_ptr(),
            buf.as_ptr(),
            buf.len()
        ));
        assert!((self.lib.ctrl)(
            self.ctx,
            EVP_CTRL_GCM_SET_TAG,
            16,
            t.as_mut_ptr().cast()
        ));
        (self.lib.finish)(self.ctx, false)
    }
}

impl Drop for Ctx<'_> {
    fn drop(&mut self) {
        (self.lib.free)(self.ctx);
    }
}

struct Case<'a> {
    mode: &'static str,
    op: &'static str,
    who: &'static str,
    what: String,
    run: Box<dyn FnMut() + 'a>,
    rounds: Vec<f64>,
}

/// Run `f` (one 4 KiB operation) for `secs` seconds; GB/s.
fn measure(secs: f64, f: &mut dyn FnMut()) -> f64 {
    for _ in 0..200 {
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
    let (mut secs, mut rounds) = (1.0f64, 3usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => secs = args.next().and_then(|s| s.parse().ok()).expect("--seconds N"),
            "--rounds" => rounds = args.next().and_then(|s| s.parse().ok()).expect("--rounds N"),
            _ => panic!("usage: inline-bench [--seconds N] [--rounds N]"),
        }
    }
    let pt: Vec<u8> = (0..BLOCK).map(|i| (i * 7 + 3) as u8).collect();
    let aws_lc = lib!("aws-lc", aws_lc_sys);
    let openssl = lib!("openssl", ossl);

    // warpfs: gcm as a request with no mask ready makes it (E(J0), the
    // data keystream, GHASH), ctr (the data keystream), xts (a 4 KiB unit).
    let key = ContentKey::new(&KEY).unwrap();
    let tagger = GcmTagger::new(&key);
    let seal = |buf: &mut [u8]| -> [u8; 16] {
        let mut e = [0u8; 16];
        key.keystream(&NONCE, J0_COUNTER, &mut e);
        key.xor_keystream(&NONCE, DATA_COUNTER, buf);
        tagger.tag(&AAD, buf, &e)
    };
    let open = |buf: &mut [u8], tag: &[u8; 16]| -> bool {
        let mut e = [0u8; 16];
        key.keystream(&NONCE, J0_COUNTER, &mut e);
        let s = tagger.ghash(&AAD, buf);
        key.xor_keystream(&NONCE, DATA_COUNTER, buf);
        let t: [u8; 16] = std::array::from_fn(|i| s[i] ^ e[i]);
        // Constant time, as warpfs compares tags.
        black_box(t.iter().zip(tag).fold(0u8, |d, (a, b)| d | (a ^ b))) == 0
    };
    let mut ct = pt.clone();
    let tag = seal(&mut ct);
    let mut ctr_iv = [0u8; 16];
    ctr_iv[..12].copy_from_slice(&NONCE);
    ctr_iv[12..].copy_from_slice(&DATA_COUNTER.to_be_bytes());
    let mut ctr_ct = pt.clone();
    key.xor_keystream(&NONCE, DATA_COUNTER, &mut ctr_ct);
    let xts = XtsKey::new(XtsCipher::Aes, &XTS_KEY).unwrap();
    let tweak = file_block_tweak(&FILE_ID, 7);
    let mut xts_ct = pt.clone();
    xts.encrypt_unit(&tweak, &mut xts_ct);

    // aws-lc-rs GCM, and every EVP context.
    let aws = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &KEY).unwrap());
    let evp = |lib, mode, enc| Ctx::new(lib, mode, enc);
    let (lc_ctr, lc_xts_e, lc_xts_d) = (
        evp(&aws_lc, Mode::Ctr, true),
        evp(&aws_lc, Mode::Xts, true),
        evp(&aws_lc, Mode::Xts, false),
    );
    let (os_gcm_e, os_gcm_d) = (evp(&openssl, Mode::Gcm, true), evp(&openssl, Mode::Gcm, false));
    let (os_ctr, os_xts_e, os_xts_d) = (
        evp(&openssl, Mode::Ctr, true),
        evp(&openssl, Mode::Xts, true),
        evp(&openssl, Mode::Xts, false),
    );

    // Every library agrees with warpfs before anything is timed.
    let mut b = pt.clone();
    let t = aws
        .seal_in_place_separate_tag(AwsNonce::assume_unique_for_key(NONCE), Aad::from(AAD), &mut b)
        .unwrap();
    assert_eq!((&b, t.as_ref()), (&ct, &tag[..]), "aws-lc-rs GCM");
    let mut b = pt.clone();
    assert_eq!((os_gcm_e.seal(&mut b), &b), (tag, &ct), "OpenSSL GCM");
    assert!(os_gcm_d.open(&mut b, &tag) && b == pt, "OpenSSL GCM open");
    let mut b = ct.clone();
    b[9] ^= 1;
    assert!(!os_gcm_d.open(&mut b, &tag), "OpenSSL GCM open takes a changed block");
    for (name, c) in [("aws-lc CTR", &lc_ctr), ("OpenSSL CTR", &os_ctr)] {
        let mut b = pt.clone();
        c.run(&ctr_iv, &mut b);
        assert_eq!(b, ctr_ct, "{name}");
    }
    for (name, e, d) in [
        ("aws-lc XTS", &lc_xts_e, &lc_xts_d),
        ("OpenSSL XTS", &os_xts_e, &os_xts_d),
    ] {
        let mut b = pt.clone();
        e.run(&tweak, &mut b);
        assert_eq!(b, xts_ct, "{name}");
        d.run(&tweak, &mut b);
        assert_eq!(b, pt, "{name} decrypt");
    }
    let mut b = xts_ct.clone();
    xts.decrypt_unit(&tweak, &mut b);
    assert_eq!(b, pt, "warpfs XTS decrypt");

    let mut buf = vec![0u8; BLOCK];
    let buf = std::cell::RefCell::new(&mut buf);
    let (pt, ct, xts_ct) = (&pt, &ct, &xts_ct);
    macro_rules! case {
        ($mode:expr, $op:expr, $who:expr, $what:expr, $src:expr, |$b:ident| $body:expr) => {
            Case {
                mode: $mode,
                op: $op,
                who: $who,
                what: $what.to_string(),
                rounds: Vec::new(),
                run: Box::new(|| {
                    let mut g = buf.borrow_mut();
                    let $b: &mut [u8] = &mut g[..];
                    $b.copy_from_slice(black_box($src));
                    let _ = black_box($body);
                }),
            }
        };
    }
    let mut cases = vec![
        case!(
            "gcm",
            "seal",
            "warpfs",
            "E(J0) + AES-CTR keystream XOR + GHASH tag (warpfs-crypto)",
            pt,
            |b| seal(b)
        ),
        case!(
            "gcm",
            "seal",
            "aws-lc",
            "aws-lc-rs AES_256_GCM seal_in_place_separate_tag",
            pt,
            |b| aws
                .seal_in_place_separate_tag(AwsNonce::assume_unique_for_key(NONCE), Aad::from(AAD), b)
                .unwrap()
        ),
        case!(
            "gcm",
            "seal",
            "openssl",
            "EVP aes-256-gcm: init(iv), AAD, update, final, GET_TAG",
            pt,
            |b| os_gcm_e.seal(b)
        ),
        case!(
            "gcm",
            "open",
            "warpfs",
            "GHASH + E(J0) + AES-CTR keystream XOR, tag compared in constant time",
            ct,
            |b| assert!(open(b, &tag))
        ),
        case!(
            "gcm",
            "open",
            "aws-lc",
            "aws-lc-rs AES_256_GCM open_in_place_separate_tag",
            ct,
            |b| aws
                .open_in_place_separate_tag(AwsNonce::assume_unique_for_key(NONCE), Aad::from(AAD), &tag, b)
                .unwrap()
                .len()
        ),
        case!(
            "gcm",
            "open",
            "openssl",
            "EVP aes-256-gcm: init(iv), AAD, update, SET_TAG, final",
            ct,
            |b| assert!(os_gcm_d.open(b, &tag))
        ),
        case!(
            "ctr",
            "xor",
            "warpfs",
            "AES-CTR keystream XOR (ContentKey::xor_keystream)",
            pt,
            |b| key.xor_keystream(&NONCE, DATA_COUNTER, b)
        ),
        case!("ctr", "xor", "aws-lc", "EVP aes-256-ctr: init(iv), update", pt, |b| {
            lc_ctr.run(&ctr_iv, b)
        }),
        case!("ctr", "xor", "openssl", "EVP aes-256-ctr: init(iv), update", pt, |b| {
            os_ctr.run(&ctr_iv, b)
        }),
        case!(
            "xts",
            "encrypt",
            "warpfs",
            "XtsKey::encrypt_unit (E_K2(tweak), then the unit)",
            pt,
            |b| xts.encrypt_unit(&tweak, b)
        ),
        case!(
            "xts",
            "encrypt",
            "aws-lc",
            "EVP aes-256-xts: init(tweak), update",
            pt,
            |b| lc_xts_e.run(&tweak, b)
        ),
        case!(
            "xts",
            "encrypt",
            "openssl",
            "EVP aes-256-xts: init(tweak), update",
            pt,
            |b| os_xts_e.run(&tweak, b)
        ),
        case!("xts", "decrypt", "warpfs", "XtsKey::decrypt_unit", xts_ct, |b| xts
            .decrypt_unit(&tweak, b)),
        case!(
            "xts",
            "decrypt",
            "aws-lc",
            "EVP aes-256-xts: init(tweak), update",
            xts_ct,
            |b| lc_xts_d.run(&tweak, b)
        ),
        case!(
            "xts",
            "decrypt",
            "openssl",
            "EVP aes-256-xts: init(tweak), update",
            xts_ct,
            |b| os_xts_d.run(&tweak, b)
        ),
    ];
    for _ in 0..rounds {
        for c in cases.iter_mut() {
            let r = measure(secs, &mut c.run);
            c.rounds.push(r);
        }
    }
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.partial_cmp(b).unwrap());
        s[s.len() / 2]
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
    // SAFETY: OpenSSL_version returns a static string.
    let ossl_version = unsafe { CStr::from_ptr(ossl::OpenSSL_version(0) as *const c_char) }
        .to_string_lossy()
        .into_owned();
    let out = serde_json::json!({
        "benchmark": "inline",
        "block_bytes": BLOCK,
        "aad_bytes": AAD.len(),
        "key_bits": 256,
        "seconds_per_case": secs,
        "rounds": rounds,
        "threads": 1,
        "cpu_model": cpu,
        "warpfs": {"aes": warpfs_crypto::cpu::aes_path(), "ghash": warpfs_crypto::cpu::ghash_path(), "xts_vaes": xts.is_vaes()},
        "libraries": {"aws-lc": "aws-lc-sys 0.47 (aws-lc-rs 1)", "openssl": ossl_version},
        "results": cases.iter().map(|c| serde_json::json!({
            "mode": c.mode, "op": c.op, "who": c.who, "what": c.what,
            "gb_s": (median(&c.rounds) * 100.0).round() / 100.0,
            "rounds_gb_s": c.rounds.iter().map(|r| (r * 100.0).round() / 100.0).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
