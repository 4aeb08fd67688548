//! Proofs on a live mount's control requests: an HMAC-SHA256 tag under a
//! key derived from the master key, so that the mount daemon can tell a
//! request from someone who unlocked the config (knows the password) without
//! the password or the master key ever reaching the daemon in a request.

use crate::keys::MasterKey;
use crate::locked::Locked;
use hkdf::hmac::{Hmac, KeyInit, Mac};
use hkdf::Hkdf;
use sha2::Sha256;

/// HKDF info string of the control-request key.
pub const INFO_CONTROL: &[u8] = b"warpfs v1 control";
/// What the key that carries a new volume key to a mount is made for
/// (and the associated data of what it seals).
pub const INFO_HANDOVER: &[u8] = b"warpfs v1 control volume key handover";
/// Length of a control tag in bytes.
pub const CONTROL_TAG_LEN: usize = 32;

/// The key that tags control requests: HKDF-SHA256 of the master key (no
/// salt) under [`INFO_CONTROL`]. On locked pages, zeroized on drop (it
/// lives as long as the mount); `Debug` never shows it.
pub struct ControlKey(Locked<[u8; 32]>);

impl std::fmt::Debug for ControlKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlKey(..)")
    }
}

impl ControlKey {
    /// The control key of `master`.
    pub fn derive(master: &MasterKey) -> Self {
        let mut k = Locked::new([0u8; 32]);
        Hkdf::<Sha256>::new(None, master.as_bytes())
            .expand(INFO_CONTROL, &mut *k)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Self(k)
    }

    /// HMAC over the request, each part length-prefixed (u32 LE) so that no
    /// two (name, value) pairs give the same input.
    fn mac(&self, name: &[u8], value: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.0).expect("HMAC takes any key length");
        for part in [name, value] {
            m.update(&(part.len() as u32).to_le_bytes());
            m.update(part);
        }
        m
    }

    /// The tag of request `name` with `value`.
    pub fn tag(&self, name: &[u8], value: &[u8]) -> [u8; CONTROL_TAG_LEN] {
        self.mac(name, value).finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of `name` with `value` (constant time).
    pub fn verify(&self, name: &[u8], value: &[u8], tag: &[u8]) -> bool {
        self.mac(name, value).verify_slice(tag).is_ok()
    }

    /// The key that carries a new volume key to a mount (an online rekey
    /// to a new volume key): HMAC-SHA256 of [`INFO_HANDOVER`] under the
    /// control key, on locked pages.
    fn handover_key(&self) -> Locked<[u8; 32]> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.0).expect("HMAC takes any key length");
        m.update(INFO_HANDOVER);
        let mut k = Locked::new([0u8; 32]);
        k.copy_from_slice(&m.finalize().into_bytes());
        k
    }

    /// `key` sealed for the mount whose volume key this control key is
    /// of: AES-256-GCM under [`Self::handover_key`] (a random nonce), as
    /// hex text (nonce ‖ ciphertext ‖ tag), for a control request.
    pub fn seal_key(&self, key: &MasterKey) -> String {
        let w = crate::wrap::wrap(&self.handover_key(), key, INFO_HANDOVER);
        w.nonce
            .iter()
            .chain(&w.ciphertext)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The key [`Self::seal_key`] sealed; `None` for any other text, a
    /// changed byte or another control key.
    pub fn open_key(&self, hex: &str) -> Option<MasterKey> {
        let n = crate::wrap::WRAP_NONCE_LEN + crate::wrap::WRAPPED_LEN;
        if hex.len() != 2 * n || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let b: Vec<u8> = (0..n)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
            .collect::<Result<_, _>>()
            .ok()?;
        let w = crate::wrap::Wrapped {
            nonce: b[..crate::wrap::WRAP_NONCE_LEN].try_into().ok()?,
            ciphertext: b[crate::wrap::WRAP_NONCE_LEN..].to_vec(),
        };
        crate::wrap::unwrap(&self.handover_key(), &w, INFO_HANDOVER).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> ControlKey {
        ControlKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
    }

    #[test]
    fn a_sealed_key_opens_only_under_the_same_control_key_and_unchanged() {
        let (k, new) = (key(1), MasterKey::from_bytes(&[7; 32]).unwrap());
        let s = k.seal_key(&new);
        assert_eq!(s.len(), 2 * (12 + 48));
        assert_eq!(k.open_key(&s).unwrap().as_bytes(), new.as_bytes());
        assert_ne!(k.seal_key(&new), s, "a fresh nonce each time");
        assert!(key(2).open_key(&s).is_none(), "another control key");
        for i in [0, 30, s.len() - 1] {
            let mut b = s.clone().into_bytes();
            b[i] = if b[i] == b'0' { b'1' } else { b'0' };
            assert!(
                k.open_key(std::str::from_utf8(&b).unwrap()).is_none(),
                "byte {i} changed"
            );
        }
        for bad in ["", "zz", &s[2..], &format!("{s}00"), &s.replace('a', "g")] {
            if bad != s {
                assert!(k.open_key(bad).is_none(), "{bad:?}");
            }
        }
        // The handover key is HMAC(control key, INFO_HANDOVER).
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*k.0).unwrap();
        m.update(INFO_HANDOVER);
        assert_eq!(&*k.handover_key(), &m.finalize().into_bytes()[..]);
    }

    #[test]
    fn tag_is_hmac_under_the_hkdf_key() {
        // Independent computation: the key is HKDF-SHA256's first block,
        // HMAC(PRK, info || 0x01) with PRK = HMAC(0^32, master); the tag is
        // HMAC(key, len(name) || name || len(value) || value).
        let h = |k: &[u8], parts: &[&[u8]]| {
            let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(k).unwrap();
            for p in parts {
                m.update(p);
            }
            m.finalize().into_bytes()
        };
        let prk = h(&[0u8; 32], &[&[3u8; 32]]);
        let k = h(&prk, &[INFO_CONTROL, &[1]]);
        let want = h(&k, &[&4u32.to_le_bytes(), b"name", &5u32.to_le_bytes(), b"value"]);
        assert_eq!(key(3).tag(b"name", b"value")[..], want[..]);
    }

    #[test]
    fn the_control_key_is_on_locked_pages() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain getrlimit into a local.
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 && lim.rlim_cur < 1 << 20 {
            warpfs_testkit::skip("RLIMIT_MEMLOCK below 1 MiB and not root: mlock is not allowed");
            return;
        }
        assert!(key(1).0.is_locked(), "the mount's control key is not locked in RAM");
    }

    #[test]
    fn only_the_same_key_request_and_tag_verify() {
        let k = key(1);
        let t = k.tag(b"trusted.warpfs.rekey", b"start 1 2 0");
        assert!(k.verify(b"trusted.warpfs.rekey", b"start 1 2 0", &t));
        assert!(
            !key(2).verify(b"trusted.warpfs.rekey", b"start 1 2 0", &t),
            "another master key"
        );
        assert!(!k.verify(b"trusted.warpfs.rekey", b"start 2 2 0", &t), "another value");
        assert!(!k.verify(b"trusted.warpfs.stats", b"start 1 2 0", &t), "another name");
        // The length prefixes keep the split between name and value.
        assert!(
            !k.verify(b"trusted.warpfs.rekeys", b"tart 1 2 0", &t),
            "a shifted split"
        );
        let mut bad = t;
        bad[31] ^= 1;
        assert!(
            !k.verify(b"trusted.warpfs.rekey", b"start 1 2 0", &bad),
            "a changed tag"
        );
        assert!(
            !k.verify(b"trusted.warpfs.rekey", b"start 1 2 0", &t[..16]),
            "a short tag"
        );
        assert!(!k.verify(b"trusted.warpfs.rekey", b"start 1 2 0", &[]), "no tag");
        assert_eq!(format!("{k:?}"), "ControlKey(..)");
    }
}
