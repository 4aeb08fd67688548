//! Keys and primitives of the per-file summaries (FORMAT.md 12): an
//! XOR-MAC (Bellare–Guérin–Rogaway) over a file's nonce entries, with
//! AES-256 as the PRF of each written block, and HMAC-SHA256 tags over
//! the file's summary record and its segments' dirty markers. Both keys
//! come from the master key with HKDF-SHA256 and live in locked memory.

use crate::keys::MasterKey;
use crate::locked::Locked;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes256;
use hkdf::hmac::{Hmac, Mac};
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::Zeroizing;

/// HKDF info string of the summary keys (64 bytes: PRF key ‖ MAC key).
pub const INFO_SUMMARY: &[u8] = b"warpfs v2 file summary";
/// Length of a record or marker tag in bytes.
pub const SUMMARY_TAG_LEN: usize = 16;

/// The PRF and MAC keys of file summaries; `Debug` never shows them.
pub struct SummaryKey {
    prf: Locked<Aes256>,
    mac: Locked<[u8; 32]>,
}

impl std::fmt::Debug for SummaryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SummaryKey(..)")
    }
}

impl SummaryKey {
    /// The summary keys of `master`.
    pub fn derive(master: &MasterKey) -> Self {
        let mut okm = Zeroizing::new([0u8; 64]);
        Hkdf::<Sha256>::new(None, master.as_bytes())
            .expand(INFO_SUMMARY, &mut *okm)
            .expect("64 bytes is a valid HKDF-SHA256 output length");
        let prf = Locked::new(Aes256::new_from_slice(&okm[..32]).expect("32-byte key"));
        let mut mac = Locked::new([0u8; 32]);
        mac.copy_from_slice(&okm[32..]);
        Self { prf, mac }
    }

    /// The contribution of a written block to its file's sum:
    /// `AES-256(K_prf, nonce ‖ u32be(block mod 2^32))`. Nonces never
    /// repeat, so every write of a block contributes a fresh value.
    pub fn contribution(&self, nonce: &[u8; 12], block: u64) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..12].copy_from_slice(nonce);
        b[12..].copy_from_slice(&(block as u32).to_be_bytes());
        let mut blk = aes::Block::from(b);
        self.prf.encrypt_block(&mut blk);
        blk.into()
    }

    fn hmac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&*self.mac).expect("HMAC takes any key length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    /// The tag of a summary record: HMAC-SHA256(K_mac, "warpfs summary
    /// record" ‖ file ID ‖ u64le seq ‖ u64le size ‖ sum), first 16 bytes.
    pub fn record_tag(&self, file_id: &[u8; 16], seq: u64, size: u64, sum: &[u8; 16]) -> [u8; SUMMARY_TAG_LEN] {
        let h = self.hmac(&[
            b"warpfs summary record",
            file_id,
            &seq.to_le_bytes(),
            &size.to_le_bytes(),
            sum,
        ]);
        h[..SUMMARY_TAG_LEN].try_into().expect("16 of 32 bytes")
    }

    /// A dirty marker of segment `seg` under record `seq`: the segment's
    /// sum `c` encrypted (XOR with HMAC(K_mac, "warpfs summary pad" ‖ file
    /// ID ‖ seq ‖ seg)), then the kind byte, then 15 bytes of
    /// HMAC(K_mac, "warpfs summary marker" ‖ file ID ‖ seq ‖ seg ‖ kind ‖ c).
    pub fn seal_marker(&self, file_id: &[u8; 16], seq: u64, seg: u64, kind: u8, c: &[u8; 16]) -> [u8; 32] {
        let mut out = [0u8; 32];
        let pad = self.pad(file_id, seq, seg);
        for i in 0..16 {
            out[i] = c[i] ^ pad[i];
        }
        out[16] = kind;
        let t = self.marker_tag(file_id, seq, seg, kind, c);
        out[17..].copy_from_slice(&t[..15]);
        out
    }

    /// The kind and sum of a marker that is valid for (`file_id`, `seq`,
    /// `seg`) (tag compared in constant time); `None` otherwise.
    pub fn open_marker(&self, file_id: &[u8; 16], seq: u64, seg: u64, m: &[u8; 32]) -> Option<(u8, [u8; 16])> {
        let pad = self.pad(file_id, seq, seg);
        let mut c = [0u8; 16];
        for i in 0..16 {
            c[i] = m[i] ^ pad[i];
        }
        let kind = m[16];
        let t = self.marker_tag(file_id, seq, seg, kind, &c);
        bool::from(subtle::ConstantTimeEq::ct_eq(&t[..15], &m[17..])).then_some((kind, c))
    }

    fn pad(&self, file_id: &[u8; 16], seq: u64, seg: u64) -> [u8; 32] {
        self.hmac(&[b"warpfs summary pad", file_id, &seq.to_le_bytes(), &seg.to_le_bytes()])
    }

    fn marker_tag(&self, file_id: &[u8; 16], seq: u64, seg: u64, kind: u8, c: &[u8; 16]) -> [u8; 32] {
        self.hmac(&[
            b"warpfs summary marker",
            file_id,
            &seq.to_le_bytes(),
            &seg.to_le_bytes(),
            &[kind],
            c,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SummaryKey {
        SummaryKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
    }

    #[test]
    fn contribution_is_aes256_under_the_hkdf_key() {
        // Independent: HKDF by hand from the hmac crate, AES from aes-gcm's
        // re-export (a separate path through the RustCrypto stack).
        let master = [3u8; 32];
        let prk = {
            let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&[0u8; 32]).unwrap();
            m.update(&master);
            m.finalize().into_bytes()
        };
        let t = |prev: &[u8], i: u8| {
            let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&prk).unwrap();
            m.update(prev);
            m.update(INFO_SUMMARY);
            m.update(&[i]);
            m.finalize().into_bytes()
        };
        let t1 = t(&[], 1);
        let aes = aes_gcm::aes::Aes256::new_from_slice(&t1).unwrap();
        let nonce = [9u8; 12];
        let mut b = [0u8; 16];
        b[..12].copy_from_slice(&nonce);
        b[12..].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        let mut blk = aes_gcm::aes::Block::from(b);
        aes.encrypt_block(&mut blk);
        let want: [u8; 16] = blk.into();
        let k = key(3);
        assert_eq!(k.contribution(&nonce, 0x7_0102_0304), want);
        assert_ne!(k.contribution(&nonce, 5), k.contribution(&nonce, 6));
    }

    #[test]
    fn markers_open_only_for_their_file_seq_and_segment() {
        let k = key(1);
        let id = [4u8; 16];
        let c = [0x5au8; 16];
        let m = k.seal_marker(&id, 7, 3, 2, &c);
        assert_ne!(&m[..16], &c, "the sum is not stored in the clear");
        assert_eq!(k.open_marker(&id, 7, 3, &m), Some((2, c)));
        assert_eq!(k.open_marker(&id, 8, 3, &m), None);
        assert_eq!(k.open_marker(&id, 7, 4, &m), None);
        assert_eq!(k.open_marker(&[5u8; 16], 7, 3, &m), None);
        assert_eq!(key(2).open_marker(&id, 7, 3, &m), None);
        for i in 0..32 {
            let mut bad = m;
            bad[i] ^= 1;
            assert_eq!(k.open_marker(&id, 7, 3, &bad), None, "byte {i}");
        }
    }

    #[test]
    fn record_tags_bind_every_field() {
        let k = key(1);
        let t = k.record_tag(&[1; 16], 2, 3, &[4; 16]);
        assert_ne!(t, k.record_tag(&[2; 16], 2, 3, &[4; 16]));
        assert_ne!(t, k.record_tag(&[1; 16], 3, 3, &[4; 16]));
        assert_ne!(t, k.record_tag(&[1; 16], 2, 4, &[4; 16]));
        assert_ne!(t, k.record_tag(&[1; 16], 2, 3, &[5; 16]));
        assert_ne!(t, key(2).record_tag(&[1; 16], 2, 3, &[4; 16]));
        assert_eq!(t, k.record_tag(&[1; 16], 2, 3, &[4; 16]));
    }
}
