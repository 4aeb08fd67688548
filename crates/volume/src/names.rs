//! Plaintext name ↔ backing name inside one backing directory, including
//! long names (hashed backing name + `.name` sidecar holding the full
//! encrypted name).

use crate::error::{Error, Result};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use warpfs_backing::Dir;
use warpfs_crypto::names::{is_long_file, is_reserved, long_sidecar, BackingName, NameCipher, MAX_NAME};

/// Longest plaintext name accepted (as on ext4/tmpfs).
pub(crate) const NAME_MAX: usize = 255;

/// The backing name for `name` in a directory with IV `iv`.
pub(crate) fn encode(names: &NameCipher, iv: &[u8; 16], name: &OsStr) -> Result<BackingName> {
    let b = name.as_bytes();
    if b.len() > NAME_MAX {
        return Err(Error::ENAMETOOLONG);
    }
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(Error::EINVAL);
    }
    names.backing_name(iv, b).map_err(|_| Error::EINVAL)
}

/// The file name used in the backing directory.
pub(crate) fn file_of(b: &BackingName) -> &str {
    match b {
        BackingName::Short(s) => s,
        BackingName::Long { file, .. } => file,
    }
}

/// Write the sidecar of a long name if it is not there yet, fsynced: an
/// fsync of the directory makes the entry and its sidecar durable, and
/// the sidecar must not then be empty after a power loss (the entry would
/// vanish from listings). Returns whether this call created it (so a
/// failed operation can remove it again).
pub(crate) fn write_sidecar(dir: &Dir, b: &BackingName) -> Result<bool> {
    let BackingName::Long { file, encoded } = b else {
        return Ok(false);
    };
    let side = long_sidecar(file);
    match warpfs_backing::create_file(&dir.entry(OsStr::new(&side)), 0o444, encoded.as_bytes(), true) {
        Ok(()) => Ok(true),
        Err(Error(libc::EEXIST)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Remove the sidecar of a long name (best effort: a leftover sidecar is harmless).
pub(crate) fn remove_sidecar(dir: &Dir, b: &BackingName) {
    if let BackingName::Long { file, .. } = b {
        let _ = warpfs_backing::unlink(&dir.entry(OsStr::new(&long_sidecar(file))));
    }
}

/// Largest long-name sidecar read.
pub(crate) const MAX_SIDECAR: usize = 8192;

/// Decode a backing name to its plaintext name, with the long-name sidecar `side` (a file name in the same
/// directory) read by `read_sidecar`: the pure part, also driven by the
/// `names` fuzz target. Every input is hostile; errors, never panics.
pub fn decode_with(
    names: &NameCipher,
    iv: &[u8; 16],
    backing: &[u8],
    read_sidecar: impl FnOnce(&str) -> std::io::Result<Vec<u8>>,
) -> Option<std::result::Result<Vec<u8>, String>> {
    let s = match std::str::from_utf8(backing) {
        Ok(s) => s,
        _ => return Some(Err("backing name is not UTF-8".into())),
    };
    if is_long_file(s) {
        let encoded = match read_sidecar(&long_sidecar(s)) {
            Ok(e) if e.len() <= MAX_SIDECAR => e,
            Ok(_) => return Some(Err("long-name sidecar too large".into())),
            Err(e) => return Some(Err(format!("long-name sidecar unreadable: {e}"))),
        };
        let Ok(encoded) = String::from_utf8(encoded) else {
            return Some(Err("long-name sidecar is not text".into()));
        };
        // The hashed file name must match the sidecar's content.
        match names.backing_name_of_encoded(&encoded) {
            Some(f) if f == s => {}
            _ => return Some(Err("long-name sidecar does not match its file".into())),
        }
        return Some(names.decrypt_name(iv, &encoded).map_err(|e| e.to_string()));
    }
    if is_reserved(s) {
        // Our own files: directory IVs, long-name sidecars, the config.
        return None;
    }
    if s.len() > MAX_NAME {
        // Not a name warpfs writes (an encrypted name this long is stored
        // as a long name), and none a Linux file system holds; refused
        // rather than decrypted, so a sidecar's content is never a name.
        return Some(Err("backing name longer than 255 bytes".into()));
    }
    Some(names.decrypt_name(iv, s).map_err(|e| e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpfs_crypto::keys::{MasterKey, Subkeys};

    fn names() -> NameCipher {
        Subkeys::derive(&MasterKey::from_bytes(&[9; 32]).unwrap(), 256).names
    }

    fn no_sidecar(_: &str) -> std::io::Result<Vec<u8>> {
        Err(std::io::Error::from_raw_os_error(libc::ENOENT))
    }

    #[test]
    fn a_long_names_encrypted_form_is_not_a_short_name() {
        // Found by the `names` fuzz target: the sidecar content of a long
        // name, used as a backing file name, decrypted to the long name's
        // plaintext.
        let (n, iv) = (names(), [3u8; 16]);
        let plain = vec![b'x'; 200];
        let BackingName::Long { file, encoded } = n.backing_name(&iv, &plain).unwrap() else {
            panic!("a 200-byte name is a long name");
        };
        assert!(encoded.len() > MAX_NAME);
        let side = |_: &str| Ok(encoded.clone().into_bytes());
        assert_eq!(decode_with(&n, &iv, file.as_bytes(), side), Some(Ok(plain)));
        assert!(matches!(
            decode_with(&n, &iv, encoded.as_bytes(), no_sidecar),
            Some(Err(_))
        ));
        // The longest short name still decodes.
        let plain = vec![b'y'; 175];
        let BackingName::Short(short) = n.backing_name(&iv, &plain).unwrap() else {
            panic!("a 175-byte name is a short name");
        };
        assert_eq!(short.len(), MAX_NAME);
        assert_eq!(decode_with(&n, &iv, short.as_bytes(), no_sidecar), Some(Ok(plain)));
    }
}
