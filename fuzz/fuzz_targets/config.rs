//! Fuzz `warpfs.conf` parsing (FORMAT.md 2.1) and, for configs that parse
//! with the cheapest allowed KDF, unlocking with a fixed password: every
//! input must give a config or an error, never a panic; a fixed wrong
//! password must never unlock.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warpfs_config::{Config, KdfParams};

fuzz_target!(|data: &[u8]| {
    let Ok(cfg) = Config::from_json(data) else {
        return;
    };
    // A parsed config must serialize and parse back to the same AAD.
    let again = Config::from_json(cfg.to_json().as_bytes()).expect("a parsed config re-parses");
    assert_eq!(again.aad(), cfg.aad());
    let k = cfg.kdf_params();
    // Argon2 at the minimum costs ~50 ms; bigger parameters would only slow
    // the fuzzer down (or exhaust its memory limit) without new paths.
    if k.memory_kib <= KdfParams::MIN.memory_kib && k.iterations <= KdfParams::MIN.iterations && k.parallelism <= 2 {
        assert!(cfg.unlock(b"fuzz: not the password").is_err());
    }
});
