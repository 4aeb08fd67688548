//! Fuzz encrypted-name decoding (FORMAT.md 4.2–4.5) with the example gcm
//! volume's name key: input = directory IV (16) ‖ backing name ‖ 0 ‖
//! long-name sidecar content. Errors, never panics; a decoded name is a
//! valid plaintext name that encrypts back to the same backing name.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use warpfs_crypto::names::{validate_name, BackingName};

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let keys = common::keys("gcm");
    let iv: [u8; 16] = data[..16].try_into().unwrap();
    let rest = &data[16..];
    let (name, sidecar) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let r = warpfs_volume::decode_backing_name(&keys.names, &iv, name, |_| match sidecar {
        Some(s) => Ok(s.to_vec()),
        None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
    });
    if let Some(Ok(plain)) = r {
        validate_name(&plain).expect("a decoded name is a valid name");
        let back = keys.names.backing_name(&iv, &plain).expect("re-encrypts");
        match back {
            BackingName::Short(s) => assert_eq!(s.as_bytes(), name),
            BackingName::Long { file, .. } => assert_eq!(file.as_bytes(), name),
        }
    }
    if let Ok(s) = std::str::from_utf8(rest) {
        let _ = keys.names.decrypt_xattr_name(s);
    }
});
