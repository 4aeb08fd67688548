//! Randomness from the OS CSPRNG (getrandom; on x86 the kernel pool mixes in RDRAND).

/// Fill `buf` with random bytes from the OS. Aborts the process if the OS
/// cannot provide randomness: continuing without it would reuse nonces.
pub fn fill(buf: &mut [u8]) {
    if let Err(e) = getrandom::fill(buf) {
        eprintln!("warpfs: fatal: the OS random generator failed: {e}");
        std::process::abort();
    }
}

/// A random array.
pub fn array<const N: usize>() -> [u8; N] {
    let mut a = [0u8; N];
    fill(&mut a);
    a
}

/// A random u64.
pub fn u64() -> u64 {
    u64::from_le_bytes(array())
}
