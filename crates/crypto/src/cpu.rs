//! Which hardware paths this CPU gives AES and GHASH, found at run time:
//! on x86-64 AES-NI and PCLMULQDQ (and our own VAES/VPCLMULQDQ-512
//! kernels, `simd`), on aarch64 the ARMv8 crypto extensions AES and PMULL
//! (the `aes` and `ghash`/`polyval` crates detect them through the kernel's
//! HWCAP bits), else the portable constant-time software paths. Twofish is
//! portable everywhere. `warpfs speed`, the mount's speculation policy and
//! the engine's backend names ask here, so that no caller tests an
//! architecture's features itself (docs/decisions/0086).

/// The CPU's architecture and its features that decide a path here, as
/// (name, present), in a fixed order per architecture.
pub fn features() -> (&'static str, Vec<(&'static str, bool)>) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        (
            "x86_64",
            vec![
                ("aes", has!("aes")),
                ("pclmulqdq", has!("pclmulqdq")),
                ("avx2", has!("avx2")),
                ("vaes", has!("vaes")),
                ("vpclmulqdq", has!("vpclmulqdq")),
                ("avx512f", has!("avx512f")),
            ],
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        (
            "aarch64",
            vec![
                ("neon", has!("neon")),
                ("aes", has!("aes")),
                ("pmull", has!("pmull")),
                ("sha2", has!("sha2")),
            ],
        )
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        (std::env::consts::ARCH, Vec::new())
    }
}

/// Whether the `aes` crate runs AES in hardware here (AES-NI, or the ARMv8
/// AES instructions with PMULL): false on a CPU without them and in a build
/// with `--cfg aes_backend="soft"`.
pub fn aes_in_hardware() -> bool {
    aes::hardware_accelerated()
}

/// The AES path content keys take on this CPU, in words.
pub fn aes_path() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::has_vaes512() {
        return "VAES-512 (warpfs-crypto kernel)";
    }
    if !aes_in_hardware() {
        return "software (aes crate, fixsliced, constant time)";
    }
    if cfg!(target_arch = "aarch64") {
        "ARMv8 AES (aes crate)"
    } else {
        "AES-NI (aes crate)"
    }
}

/// The GHASH path of GCM tags on this CPU, in words.
pub fn ghash_path() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::simd::has_vpclmul512() {
            return "VPCLMULQDQ-512 (warpfs-crypto kernel)";
        }
        if !cfg!(polyval_backend = "soft") && std::arch::is_x86_feature_detected!("pclmulqdq") {
            return "PCLMULQDQ (ghash crate)";
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        // polyval asks for HWCAP AES and PMULL together (cpufeatures "aes").
        if !cfg!(polyval_backend = "soft")
            && std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("pmull")
        {
            return "ARMv8 PMULL (ghash crate)";
        }
    }
    "software (ghash crate, constant time)"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the CPU itself reports, asked without the `aes` crate.
    fn cpu_has_aes() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("aes")
        }
        #[cfg(target_arch = "aarch64")]
        {
            std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull")
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            false
        }
    }

    #[test]
    fn hardware_aes_is_seen_wherever_the_cpu_has_it() {
        // The speculation policy takes a CPU without hardware AES for a
        // slow one: an arm64 CPU with the crypto extensions must count.
        assert_eq!(aes_in_hardware(), cpu_has_aes() && !cfg!(aes_backend = "soft"));
        let (arch, f) = features();
        assert_eq!(arch, std::env::consts::ARCH);
        let named = |n: &str| f.iter().any(|&(x, on)| x == n && on);
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            assert_eq!(
                named("aes") && (arch == "x86_64" || named("pmull")),
                cpu_has_aes(),
                "{f:?}"
            );
        }
    }

    #[test]
    fn paths_name_the_instructions_this_cpu_runs() {
        let (aes, ghash) = (aes_path(), ghash_path());
        if !aes_in_hardware() {
            assert!(aes.starts_with("software"), "{aes}");
        } else if cfg!(target_arch = "aarch64") {
            assert_eq!(aes, "ARMv8 AES (aes crate)");
        } else {
            assert!(aes.contains("AES-NI") || aes.contains("VAES"), "{aes}");
        }
        if cfg!(target_arch = "aarch64") && cpu_has_aes() && !cfg!(polyval_backend = "soft") {
            assert_eq!(ghash, "ARMv8 PMULL (ghash crate)");
        }
        if cfg!(polyval_backend = "soft") {
            assert!(ghash.starts_with("software"), "{ghash}");
        }
        // No x86 instruction is ever named on another architecture.
        if !cfg!(target_arch = "x86_64") {
            for x in ["AES-NI", "VAES", "PCLMULQDQ"] {
                assert!(!aes.contains(x) && !ghash.contains(x), "{aes} / {ghash}");
            }
        }
    }
}
