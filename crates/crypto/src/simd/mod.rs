//! Hand-written x86-64 kernels for the hot loops of content encryption:
//! AES-CTR masks on VAES-512 ([`aes`]), GHASH on VPCLMULQDQ-512
//! ([`ghash`]) and AES-XTS on VAES-512 ([`xts`]). Each is chosen at run
//! time from the CPU's features; without them (or with `--cfg aes_backend="soft"`, which asks for software AES
//! everywhere) the `aes` and `ghash` crates do the work as before.
//!
//! Why our own: the `aes` 0.9 crate's VAES path encrypts counter blocks
//! that the caller has written to memory and, on this toolchain, does not
//! inline its key broadcast and loads (docs/decisions/0039); the
//! `ghash` crate's 128-bit CLMUL path byte-reverses every block in a
//! separate step and aggregates only 4 blocks. Both are tested against
//! published vectors and, by property tests, against those crates.
//!
//! The kernels use no other module of this crate: they take raw key bytes,
//! nonces and buffers, and the callers (`aes_ctr`, `gcm`) keep their round
//! keys in locked memory.

pub(crate) mod aes;
pub(crate) mod ghash;
pub(crate) mod xor;
pub(crate) mod xts;

use std::sync::OnceLock;

fn detect(f: impl FnOnce() -> bool) -> bool {
    #[cfg(aes_backend = "soft")]
    {
        let _ = f;
        false
    }
    #[cfg(not(aes_backend = "soft"))]
    {
        f()
    }
}

/// AES-NI, VAES and AVX-512 F/BW: the CTR kernel can run.
pub(crate) fn has_vaes512() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| {
        detect(|| {
            std::arch::is_x86_feature_detected!("aes")
                && std::arch::is_x86_feature_detected!("vaes")
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
        })
    })
}

/// PCLMULQDQ, VPCLMULQDQ and AVX-512 F/BW: the GHASH kernel can run.
pub(crate) fn has_vpclmul512() -> bool {
    static V: OnceLock<bool> = OnceLock::new();
    *V.get_or_init(|| {
        detect(|| {
            std::arch::is_x86_feature_detected!("pclmulqdq")
                && std::arch::is_x86_feature_detected!("vpclmulqdq")
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("ssse3")
        })
    })
}

/// In tests: whether the kernel can run here. Where it cannot (a CPU
/// without `features`, or a build with `--cfg aes_backend="soft"`) the
/// calling test checks the portable path the callers take there instead,
/// and says so in a `note:` line (`warpfs_testkit::note`): neither a skip
/// nor a failure, under WARPFS_NO_SKIP=1 too.
#[cfg(test)]
pub(crate) fn kernel_runs(available: bool, kernel: &str, features: &str) -> bool {
    if !available {
        let why = if cfg!(aes_backend = "soft") {
            "built with --cfg aes_backend=\"soft\"".to_string()
        } else {
            format!("this CPU lacks {features}")
        };
        warpfs_testkit::note(format!(
            "the {kernel} kernel cannot run ({why}): the portable path is tested instead"
        ));
    }
    available
}
