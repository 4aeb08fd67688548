//! `warpfs speed` (as gocryptfs -speed): in about a second, the throughput
//! on this CPU of each content mode and cipher, encrypting 4 KiB blocks as
//! a write stores them, and of each keystream backend that is available
//! for each cipher, making masks as the engine does, with what warpfs
//! would pick marked, after the CPU's architecture, features and the AES
//! and GHASH paths chosen on it (`warpfs_crypto::cpu`). A new mode or
//! cipher is one entry of [`MODES`].

use super::exit::CliError;
use clap::Args;
use std::time::{Duration, Instant};
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::{file_block_tweak, poly1305_tag, ContentCipher, GcmTagger, TagMask, XChaChaKey, XtsCipher};
use warpfs_engine::gpu::{DeviceBackend, EngineKind};
use warpfs_engine::{Backend, CpuBackend, MaskCipher, MaskJob, Nonce};
use warpfs_keystream::{Direct, Keystream};

/// Version of the `speed --json` object.
pub const SPEED_SCHEMA: u32 = 1;
const BLOCK: usize = 4096;

/// Arguments of `warpfs speed`.
#[derive(Args, Debug)]
pub struct SpeedArgs {
    /// Print one JSON object (fields: docs/CLI.md).
    #[arg(long)]
    json: bool,
    /// Time spent on each measurement, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    time_ms: u64,
}

/// Encrypts one 4 KiB block in place (block number given).
type Sealer = Box<dyn FnMut(&mut [u8], u64)>;

/// One content mode and cipher: how a write encrypts a block.
struct ModeCase {
    mode: &'static str,
    cipher: &'static str,
    bits: u32,
    /// What `warpfs init` makes without options.
    default: bool,
    make: fn(&MasterKey, u32) -> Sealer,
}

/// E(J0): the first 16 bytes of a block cipher's tag mask.
fn ej0(tm: &TagMask) -> [u8; 16] {
    tm[..16].try_into().expect("a tag mask holds 32 bytes")
}

fn gcm(m: &MasterKey, bits: u32) -> Sealer {
    let key = Subkeys::derive(m, bits).content;
    let tagger = GcmTagger::new(&key);
    let ks = Direct::new(key);
    Box::new(move |buf, block| {
        let (_nonce, tm) = ks.seal(buf);
        let mut aad = [0u8; 24];
        aad[16..].copy_from_slice(&block.to_be_bytes());
        std::hint::black_box(tagger.tag(&aad, buf, &ej0(&tm)));
    })
}

fn ctr(m: &MasterKey, bits: u32) -> Sealer {
    let ks = Direct::new(Subkeys::derive(m, bits).content);
    Box::new(move |buf, _| {
        std::hint::black_box(ks.seal(buf));
    })
}

/// The content key of `gcm-twofish` / `ctr-twofish` (FORMAT.md 11): the
/// same HKDF bytes as the AES content key, expanded as Twofish.
fn twofish_key(m: &MasterKey, bits: u32) -> warpfs_crypto::ContentKey {
    let raw = Subkeys::content_key_bytes_gen(m, bits, 0);
    warpfs_crypto::ContentKey::with_cipher(XtsCipher::Twofish, &raw).expect("a 128- or 256-bit key")
}

fn gcm_twofish(m: &MasterKey, bits: u32) -> Sealer {
    let key = twofish_key(m, bits);
    let tagger = GcmTagger::new(&key);
    let ks = Direct::new(key);
    Box::new(move |buf, block| {
        let (_nonce, tm) = ks.seal(buf);
        let mut aad = [0u8; 24];
        aad[16..].copy_from_slice(&block.to_be_bytes());
        std::hint::black_box(tagger.tag(&aad, buf, &ej0(&tm)));
    })
}

fn ctr_twofish(m: &MasterKey, bits: u32) -> Sealer {
    let ks = Direct::new(twofish_key(m, bits));
    Box::new(move |buf, _| {
        std::hint::black_box(ks.seal(buf));
    })
}

/// The content key of `xchacha20-poly1305` / `ctr-xchacha20` (FORMAT.md
/// 15): the same 32 HKDF bytes as the AES-256 content key.
fn xchacha_key(m: &MasterKey, bits: u32) -> XChaChaKey {
    XChaChaKey::new(&Subkeys::content_key_bytes_gen(m, bits, 0)).expect("a 256-bit key")
}

fn xchacha20_poly1305(m: &MasterKey, bits: u32) -> Sealer {
    let ks = Direct::xchacha(xchacha_key(m, bits));
    Box::new(move |buf, block| {
        let (_nonce, otk) = ks.seal(buf);
        let mut aad = [0u8; 24];
        aad[16..].copy_from_slice(&block.to_be_bytes());
        std::hint::black_box(poly1305_tag(&otk, &aad, buf));
    })
}

fn ctr_xchacha20(m: &MasterKey, bits: u32) -> Sealer {
    let ks = Direct::xchacha(xchacha_key(m, bits));
    Box::new(move |buf, _| {
        std::hint::black_box(ks.seal(buf));
    })
}

fn xts(cipher: XtsCipher) -> impl Fn(&MasterKey, u32) -> Sealer {
    move |m, bits| {
        let key = Subkeys::xts_key(m, bits, cipher);
        Box::new(move |buf, block| key.encrypt_unit(&file_block_tweak(&[7; 16], block), buf))
    }
}

fn xts_aes(m: &MasterKey, bits: u32) -> Sealer {
    xts(XtsCipher::Aes)(m, bits)
}

fn xts_twofish(m: &MasterKey, bits: u32) -> Sealer {
    xts(XtsCipher::Twofish)(m, bits)
}

/// Every content mode and cipher `warpfs init` offers.
const MODES: &[ModeCase] = &[
    ModeCase {
        mode: "gcm",
        cipher: "AES",
        bits: 256,
        default: true,
        make: gcm,
    },
    ModeCase {
        mode: "gcm",
        cipher: "AES",
        bits: 128,
        default: false,
        make: gcm,
    },
    ModeCase {
        mode: "ctr",
        cipher: "AES",
        bits: 256,
        default: false,
        make: ctr,
    },
    ModeCase {
        mode: "ctr",
        cipher: "AES",
        bits: 128,
        default: false,
        make: ctr,
    },
    ModeCase {
        mode: "xts",
        cipher: "AES",
        bits: 256,
        default: false,
        make: xts_aes,
    },
    ModeCase {
        mode: "xts",
        cipher: "AES",
        bits: 128,
        default: false,
        make: xts_aes,
    },
    ModeCase {
        mode: "gcm",
        cipher: "Twofish",
        bits: 256,
        default: false,
        make: gcm_twofish,
    },
    ModeCase {
        mode: "ctr",
        cipher: "Twofish",
        bits: 256,
        default: false,
        make: ctr_twofish,
    },
    ModeCase {
        mode: "xts",
        cipher: "Twofish",
        bits: 256,
        default: false,
        make: xts_twofish,
    },
    ModeCase {
        mode: "xts",
        cipher: "Twofish",
        bits: 128,
        default: false,
        make: xts_twofish,
    },
    ModeCase {
        mode: "gcm",
        cipher: "XChaCha20",
        bits: 256,
        default: false,
        make: xchacha20_poly1305,
    },
    ModeCase {
        mode: "ctr",
        cipher: "XChaCha20",
        bits: 256,
        default: false,
        make: ctr_xchacha20,
    },
];

/// MB/s (10^6 bytes) of `f` run on 4 KiB blocks for about `t`.
fn measure(t: Duration, mut f: impl FnMut(&mut [u8], u64)) -> f64 {
    let mut buf = vec![0x5au8; BLOCK];
    f(&mut buf, 0); // warm up (key schedule, first touch)
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < t {
        for _ in 0..16 {
            f(&mut buf, n);
            n += 1;
        }
    }
    (n * BLOCK as u64) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// One keystream backend's result.
struct BackendResult {
    engine: &'static str,
    /// The cipher whose masks it made.
    cipher: ContentCipher,
    name: String,
    /// MB/s, or why it could not run.
    speed: Result<f64, String>,
    default: bool,
}

/// Masks of 4 KiB in batches of 64, as the engine's workers ask for them.
fn measure_backend(b: &dyn Backend, key: &MaskCipher, t: Duration) -> f64 {
    const BATCH: usize = 64;
    let mut bufs = vec![vec![0u8; BLOCK]; BATCH];
    let mut nonce_ctr = 0u64;
    let mut round = |bufs: &mut [Vec<u8>]| {
        let mut jobs: Vec<MaskJob<'_>> = bufs
            .iter_mut()
            .map(|out| {
                nonce_ctr += 1;
                let mut n = [0u8; 12];
                n[4..].copy_from_slice(&nonce_ctr.to_be_bytes());
                MaskJob {
                    cipher: key,
                    nonce: Nonce::from(n),
                    counter: key.layout().first,
                    out: &mut out[..],
                }
            })
            .collect();
        b.make(&mut jobs);
    };
    round(&mut bufs);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < t {
        round(&mut bufs);
        n += BATCH as u64;
    }
    (n * BLOCK as u64) as f64 / start.elapsed().as_secs_f64() / 1e6
}

/// The engine `warpfs mount` uses without --engine.
fn default_engine() -> EngineKind {
    std::env::var(super::mount::ENV_ENGINE)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(EngineKind::Cpu)
}

fn backends(t: Duration) -> Vec<BackendResult> {
    let raw = [0x42u8; 32];
    let want = default_engine();
    let soft_default = std::env::var("WARPFS_NO_AESNI").is_ok_and(|v| v == "1");
    let mut out = Vec::new();
    // The cpu makes every cipher's masks: AES (AES-NI/VAES where the CPU
    // has it, and the forced software AES), Twofish and XChaCha20.
    for (cipher, software) in [
        (ContentCipher::Aes, false),
        (ContentCipher::Aes, true),
        (ContentCipher::Twofish, false),
        (ContentCipher::XChaCha20, false),
    ] {
        let speed = MaskCipher::with_cipher(cipher, &raw, software)
            .map(|k| (k.implementation(), measure_backend(&CpuBackend, &k, t)))
            .map_err(|e| e.to_string());
        out.push(BackendResult {
            engine: "cpu",
            cipher,
            name: speed
                .as_ref()
                .map(|(i, _)| i.to_string())
                .unwrap_or_else(|_| "cpu".into()),
            speed: speed.map(|(_, s)| s),
            // For an AES volume; every other cipher's masks are the cpu's.
            default: cipher != ContentCipher::Aes || (want == EngineKind::Cpu && software == soft_default),
        });
    }
    let key = MaskCipher::new(&raw, false).ok();
    for (engine, kind, open) in [
        (
            "opencl",
            EngineKind::OpenCl,
            (|| DeviceBackend::opencl(true)) as fn() -> Result<DeviceBackend, String>,
        ),
        (
            "cuda",
            EngineKind::Cuda,
            DeviceBackend::cuda as fn() -> Result<DeviceBackend, String>,
        ),
    ] {
        let r = match (open(), &key) {
            (Ok(b), Some(k)) => BackendResult {
                engine,
                cipher: ContentCipher::Aes,
                name: Backend::name(&b),
                speed: Ok(measure_backend(&b, k, t)),
                default: want == kind,
            },
            (Err(e), _) => BackendResult {
                engine,
                cipher: ContentCipher::Aes,
                name: engine.into(),
                speed: Err(e),
                default: false,
            },
            (_, None) => continue,
        };
        out.push(r);
    }
    out
}

pub fn run(a: SpeedArgs) -> Result<(), CliError> {
    let t = Duration::from_millis(a.time_ms);
    let master = MasterKey::generate();
    let modes: Vec<(&ModeCase, f64)> = MODES
        .iter()
        .map(|c| (c, measure(t, (c.make)(&master, c.bits))))
        .collect();
    let backs = backends(t);
    let (arch, features) = warpfs_crypto::cpu::features();
    let present: Vec<&str> = features.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
    let (aes, ghash) = (warpfs_crypto::cpu::aes_path(), warpfs_crypto::cpu::ghash_path());
    if a.json {
        let j = serde_json::json!({
            "schema": SPEED_SCHEMA,
            "block_size": BLOCK,
            "threads": 1,
            "cpu": { "arch": arch, "features": present, "aes": aes, "ghash": ghash },
            "modes": modes.iter().map(|(c, s)| serde_json::json!({
                "mode": c.mode, "cipher": c.cipher, "key_bits": c.bits,
                "mb_per_s": (s * 10.0).round() / 10.0, "default": c.default,
            })).collect::<Vec<_>>(),
            "backends": backs.iter().map(|b| match &b.speed {
                Ok(s) => serde_json::json!({
                    "engine": b.engine, "cipher": b.cipher.name(), "name": b.name, "available": true,
                    "key_bits": 256, "mb_per_s": (s * 10.0).round() / 10.0, "default": b.default,
                }),
                Err(why) => serde_json::json!({
                    "engine": b.engine, "cipher": b.cipher.name(), "name": b.name, "available": false,
                    "why": why, "default": false,
                }),
            }).collect::<Vec<_>>(),
        });
        println!("{j}");
        return Ok(());
    }
    let present = if present.is_empty() {
        "none".into()
    } else {
        present.join(" ")
    };
    println!("CPU: {arch} ({present}); AES: {aes}; GHASH: {ghash}");
    println!("Content modes: one thread encrypting 4 KiB blocks as a write stores them (MB/s = 10^6 bytes/s)");
    for (c, s) in &modes {
        let mark = if c.default { "  <- warpfs init's default" } else { "" };
        println!("  {:<4} {:>9}-{:<3} {:>9.1} MB/s{mark}", c.mode, c.cipher, c.bits, s);
    }
    println!("Keystream backends: 256-bit masks of 4 KiB, 64 per call, as the engine's workers make them");
    for b in &backs {
        match &b.speed {
            Ok(s) => {
                let mark = if b.default { "  <- warpfs mount's default" } else { "" };
                println!(
                    "  {:<6} {:<9} {:<46} {:>9.1} MB/s{mark}",
                    b.engine,
                    b.cipher.name(),
                    b.name,
                    s
                );
            }
            Err(why) => println!("  {:<6} {:<9} not available: {why}", b.engine, b.cipher.name()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_case_encrypts_its_block() {
        let m = MasterKey::generate();
        for c in MODES {
            let mut f = (c.make)(&m, c.bits);
            let mut buf = vec![0u8; BLOCK];
            f(&mut buf, 3);
            assert!(
                buf.iter().any(|&b| b != 0),
                "{} {}-{} left the block as it was",
                c.mode,
                c.cipher,
                c.bits
            );
        }
        assert_eq!(MODES.iter().filter(|c| c.default).count(), 1);
        // Every cipher `warpfs init --cipher` offers has a row.
        for cipher in ["AES", "Twofish", "XChaCha20"] {
            assert!(MODES.iter().any(|c| c.cipher == cipher), "{cipher}");
        }
    }

    #[test]
    fn the_cpu_backend_is_listed_for_every_cipher() {
        let backs = backends(Duration::from_millis(1));
        for cipher in [ContentCipher::Aes, ContentCipher::Twofish, ContentCipher::XChaCha20] {
            assert!(
                backs
                    .iter()
                    .any(|b| b.engine == "cpu" && b.cipher == cipher && b.speed.is_ok()),
                "{cipher:?}"
            );
        }
        let x = backs.iter().find(|b| b.cipher == ContentCipher::XChaCha20).unwrap();
        assert!(x.name.contains("chacha20"), "{}", x.name);
    }
}
