//! Block encryption (FORMAT.md 3.5): keystream from the `Keystream` engine,
//! GHASH from `GcmTagger` (or, with XChaCha20, FORMAT.md 15, Poly1305
//! under the one-time key the mask starts with), AD = file ID ‖ block
//! number (u64 big-endian); in `xts` (FORMAT.md 7) XTS with tweak file ID ⊕
//! block number instead.

use crate::entry::{self, Entry};
use crate::layout::BLOCK_USIZE;
use crate::{ContentError, Mode};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use warpfs_crypto::{file_block_tweak, poly1305_tag, GcmTagger, TagMask, XtsKey};
use warpfs_keystream::{BlockReader, Inline, Keystream, OnDemand, Splitter, XtsOffload};

mod xts_runs;

pub use xts_runs::XTS_SPLIT_MIN;

/// How a `gcm` layout's tags are made.
enum Tagger {
    /// GHASH keyed with H; tag = GHASH ⊕ E(J0) (AES and Twofish).
    Ghash(GcmTagger),
    /// Poly1305 under the one-time key the mask starts with (XChaCha20).
    Poly1305,
}

/// The per-volume encryption context shared by all open files.
pub struct Cipher {
    mode: Mode,
    keystream: Arc<dyn Keystream>,
    tagger: Tagger,
    /// The XTS key (`xts` mode only).
    xts: Option<XtsKey>,
    /// Masks made on the calling thread, for blocks the open file's reader
    /// was not made for (another key generation, mid-rekey).
    on_demand: OnDemand<dyn Keystream>,
    /// Key generation of this cipher's content key (FORMAT.md 10).
    generation: u32,
    /// Where XTS runs of many blocks are spread (the engine's workers).
    split: Arc<dyn Splitter>,
    /// Where long XTS runs go whole (a GPU's fused XTS kernels), if anywhere.
    device: Option<Arc<dyn XtsOffload>>,
    #[cfg(feature = "bench-nocrypto")]
    copy_nonces: warpfs_keystream::NonceSource,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// E(J0): the first 16 bytes of a block cipher's tag mask.
fn ej0_of(tm: &TagMask) -> [u8; 16] {
    tm[..16].try_into().expect("a tag mask holds 32 bytes")
}

/// GCM associated data of a block: file ID ‖ block number (big-endian).
pub(crate) fn aad(file_id: &[u8; 16], block: u64) -> [u8; 24] {
    let mut a = [0u8; 24];
    a[..16].copy_from_slice(file_id);
    a[16..].copy_from_slice(&block.to_be_bytes());
    a
}

impl Cipher {
    /// A cipher for `mode`; all keystream comes from `keystream`, `tagger`
    /// (for the same content key) is used for GHASH only.
    /// `mode` must not be [`Mode::Xts`] (use [`Cipher::new_xts`]).
    pub fn new(mode: Mode, keystream: Arc<dyn Keystream>, tagger: GcmTagger) -> Self {
        assert!(mode != Mode::Xts, "an xts cipher needs its XTS key: Cipher::new_xts");
        Self::with_tagger(mode, keystream, Tagger::Ghash(tagger))
    }

    /// An XChaCha20 cipher (FORMAT.md 15) for `mode` (`Ctr`, or `Gcm` for
    /// `xchacha20-poly1305`: the tag is Poly1305's); `keystream` makes
    /// XChaCha20 masks (`Direct::xchacha`, or a write pool on an XChaCha20
    /// engine key).
    pub fn new_xchacha(mode: Mode, keystream: Arc<dyn Keystream>) -> Self {
        assert!(mode != Mode::Xts, "XChaCha20 has no XTS mode");
        Self::with_tagger(mode, keystream, Tagger::Poly1305)
    }

    fn with_tagger(mode: Mode, keystream: Arc<dyn Keystream>, tagger: Tagger) -> Self {
        Self {
            mode,
            on_demand: OnDemand::new(keystream.clone()),
            keystream,
            tagger,
            xts: None,
            generation: 0,
            split: Arc::new(Inline),
            device: None,
            #[cfg(feature = "bench-nocrypto")]
            copy_nonces: warpfs_keystream::NonceSource::new(),
        }
    }

    /// An `xts` cipher. `keystream` and `tagger` are not used for the data
    /// (XTS has no masks); the keystream's reader still paces read requests.
    pub fn new_xts(key: XtsKey, keystream: Arc<dyn Keystream>, tagger: GcmTagger) -> Self {
        Self {
            mode: Mode::Xts,
            on_demand: OnDemand::new(keystream.clone()),
            keystream,
            tagger: Tagger::Ghash(tagger),
            xts: Some(key),
            generation: 0,
            split: Arc::new(Inline),
            device: None,
            #[cfg(feature = "bench-nocrypto")]
            copy_nonces: warpfs_keystream::NonceSource::new(),
        }
    }

    /// This cipher as the one of key generation `generation` (FORMAT.md 10;
    /// headers and rekey watermarks record it).
    pub fn with_generation(mut self, generation: u32) -> Self {
        self.generation = generation;
        self
    }

    /// Key generation of this cipher's content key.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// The content mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// A block reader for one open file (a read window with a speculative
    /// engine; on-demand masks with the direct backend).
    pub fn reader(&self) -> Box<dyn BlockReader> {
        self.keystream.clone().reader()
    }

    /// A reader without look-ahead: every mask made by the caller.
    pub(crate) fn on_demand(&self) -> &dyn BlockReader {
        &self.on_demand
    }

    /// Encrypt one block's plaintext in place under a fresh nonce and write
    /// its entry into `entry_out` (`mode.entry_len()` bytes).
    pub(crate) fn seal_block(&self, file_id: &[u8; 16], block: u64, buf: &mut [u8], entry_out: &mut [u8]) {
        #[cfg(feature = "bench-nocrypto")]
        {
            // Bench-only ceiling: the cipher is a copy (entries still written).
            let _ = (file_id, block, buf);
            let nonce = self.copy_nonces.next();
            entry::write(self.mode, Some(&Entry { nonce, tag: [0u8; 16] }), entry_out);
            return;
        }
        #[allow(unreachable_code)]
        if let Some(x) = &self.xts {
            x.encrypt_unit(&file_block_tweak(file_id, block), buf);
            return;
        }
        let (nonce, mut tm) = self.keystream.seal(buf);
        let tag = match (self.mode, &self.tagger) {
            (Mode::Ctr | Mode::Xts, _) => [0u8; 16],
            (Mode::Gcm, Tagger::Ghash(g)) => g.tag(&aad(file_id, block), buf, &ej0_of(&tm)),
            (Mode::Gcm, Tagger::Poly1305) => poly1305_tag(&tm, &aad(file_id, block), buf),
        };
        zeroize::Zeroize::zeroize(&mut tm);
        entry::write(self.mode, Some(&Entry { nonce, tag }), entry_out);
    }

    /// The name of the tag, for the log line of a failed block.
    fn tag_name(&self) -> &'static str {
        match self.tagger {
            Tagger::Ghash(_) => "GCM",
            Tagger::Poly1305 => "Poly1305",
        }
    }

    /// Decrypt one block in place given its raw entry bytes, with masks
    /// from `reader` (the open file's). An unwritten entry yields zeros. In
    /// `gcm` the tag is checked (GHASH over the ciphertext, then decrypt,
    /// then a constant-time compare); on a mismatch the buffer is zeroed,
    /// one error line is logged and `BadTag` returned.
    pub(crate) fn open_block(
        &self,
        reader: &dyn BlockReader,
        file_id: &[u8; 16],
        block: u64,
        entry_bytes: &[u8],
        buf: &mut [u8],
        label: &dyn Fn() -> String,
    ) -> Result<(), ContentError> {
        let r = self.open_block_quiet(reader, file_id, block, entry_bytes, buf);
        if let Err(ContentError::BadTag { .. }) = r {
            tracing::error!(
                "{}: block {}: {} authentication failed (tampered, moved or torn block)",
                label(),
                block,
                self.tag_name()
            );
        }
        r
    }

    /// [`Cipher::open_block`] without the log line (fsck reports problems
    /// itself).
    pub(crate) fn open_block_quiet(
        &self,
        reader: &dyn BlockReader,
        file_id: &[u8; 16],
        block: u64,
        entry_bytes: &[u8],
        buf: &mut [u8],
    ) -> Result<(), ContentError> {
        if let Some(x) = &self.xts {
            // An all-zero stored full block is a hole (FORMAT.md 7).
            if buf.len() == BLOCK_USIZE && buf.iter().all(|&v| v == 0) {
                return Ok(());
            }
            #[cfg(feature = "bench-nocrypto")]
            {
                let _ = (x, reader, file_id, block);
                return Ok(());
            }
            #[allow(unreachable_code)]
            {
                let _ = (reader, entry_bytes);
                x.decrypt_unit(&file_block_tweak(file_id, block), buf);
                return Ok(());
            }
        }
        let Some(e) = entry::parse(self.mode, entry_bytes, block)? else {
            buf.fill(0);
            return Ok(());
        };
        #[cfg(feature = "bench-nocrypto")]
        {
            let _ = (reader, file_id, e);
            return Ok(());
        }
        #[allow(unreachable_code)]
        match self.mode {
            Mode::Ctr | Mode::Xts => {
                reader.open(block, &e.nonce, buf);
                Ok(())
            }
            Mode::Gcm => {
                let t = match &self.tagger {
                    Tagger::Ghash(g) => {
                        let s = g.ghash(&aad(file_id, block), buf);
                        let ej0 = reader.open(block, &e.nonce, buf);
                        let mut t = [0u8; 16];
                        for i in 0..16 {
                            t[i] = s[i] ^ ej0[i];
                        }
                        t
                    }
                    Tagger::Poly1305 => {
                        // Poly1305 needs its key (the mask's first bytes)
                        // before the ciphertext, which the XOR replaces:
                        // keep a copy of the ciphertext to hash.
                        let mut ct = [0u8; BLOCK_USIZE];
                        let ct = &mut ct[..buf.len()];
                        ct.copy_from_slice(buf);
                        let mut otk = reader.open(block, &e.nonce, buf);
                        let t = poly1305_tag(&otk, &aad(file_id, block), ct);
                        zeroize::Zeroize::zeroize(&mut otk);
                        t
                    }
                };
                if bool::from(t.ct_eq(&e.tag)) {
                    Ok(())
                } else {
                    buf.fill(0);
                    Err(ContentError::BadTag { block })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warpfs_crypto::ContentKey;
    use warpfs_keystream::Direct;

    fn cipher(mode: Mode) -> Cipher {
        let key = ContentKey::new(&[5u8; 32]).unwrap();
        let tagger = GcmTagger::new(&key);
        Cipher::new(mode, Arc::new(Direct::new(key)), tagger)
    }

    #[test]
    fn seal_open_round_trip_both_modes() {
        for mode in [Mode::Ctr, Mode::Gcm] {
            let c = cipher(mode);
            let id = [7u8; 16];
            let pt: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
            let mut buf = pt.clone();
            let mut e = vec![0u8; mode.entry_len()];
            c.seal_block(&id, 4, &mut buf, &mut e);
            assert_ne!(buf, pt);
            let r = c.reader();
            let r = &*r;
            let mut dec = buf.clone();
            c.open_block(r, &id, 4, &e, &mut dec, &|| "t".into()).unwrap();
            assert_eq!(dec, pt);
            if mode == Mode::Gcm {
                // wrong block number, wrong file ID, flipped byte
                let mut d = buf.clone();
                assert!(matches!(
                    c.open_block(r, &id, 5, &e, &mut d, &|| "t".into()),
                    Err(ContentError::BadTag { block: 5 })
                ));
                assert!(d.iter().all(|&x| x == 0));
                let mut d = buf.clone();
                assert!(c.open_block(r, &[8; 16], 4, &e, &mut d, &|| "t".into()).is_err());
                let mut d = buf.clone();
                d[100] ^= 1;
                assert!(c.open_block(r, &id, 4, &e, &mut d, &|| "t".into()).is_err());
            }
        }
    }

    fn xchacha(mode: Mode) -> (Cipher, warpfs_crypto::XChaChaKey) {
        let key = warpfs_crypto::XChaChaKey::new(&[0x5c; 32]).unwrap();
        let c = Cipher::new_xchacha(mode, Arc::new(warpfs_keystream::Direct::xchacha(key.clone())));
        (c, key)
    }

    #[test]
    fn xchacha_blocks_are_xchacha20_poly1305_and_tampering_fails() {
        let id = [3u8; 16];
        for mode in [Mode::Ctr, Mode::Gcm] {
            let (c, key) = xchacha(mode);
            let r = c.reader();
            for len in [4096usize, 1000, 1] {
                let pt: Vec<u8> = (0..len).map(|i| (i * 11 + 5) as u8).collect();
                let mut buf = pt.clone();
                let mut e = vec![0u8; mode.entry_len()];
                c.seal_block(&id, 9, &mut buf, &mut e);
                // The data is the XChaCha20 stream of nonce ‖ 0^96 from block 1.
                let nonce: warpfs_crypto::Nonce = e[..12].try_into().unwrap();
                let mut want = pt.clone();
                key.xor_at(&nonce, 1, 0, &mut want);
                assert_eq!(buf, want);
                if mode == Mode::Gcm {
                    // The tag is Poly1305 under block 0's first 32 bytes
                    // over AD = file ID ‖ block number (big-endian).
                    let tag = poly1305_tag(&key.tag_mask(&nonce), &aad(&id, 9), &buf);
                    assert_eq!(&e[16..32], &tag);
                } else {
                    assert_eq!(&e[16..], &[] as &[u8]);
                }
                let mut d = buf.clone();
                c.open_block(&*r, &id, 9, &e, &mut d, &|| "t".into()).unwrap();
                assert_eq!(d, pt);
                if mode == Mode::Gcm {
                    for (fid, blk, flip) in [(id, 10, None), ([4u8; 16], 9, None), (id, 9, Some(len / 2))] {
                        let mut d = buf.clone();
                        if let Some(i) = flip {
                            d[i] ^= 0x01;
                        }
                        assert!(matches!(
                            c.open_block(&*r, &fid, blk, &e, &mut d, &|| "t".into()),
                            Err(ContentError::BadTag { .. })
                        ));
                        assert!(d.iter().all(|&x| x == 0), "a failed block is zeroed");
                    }
                    let mut bad = e.clone();
                    bad[31] ^= 0x80;
                    let mut d = buf.clone();
                    assert!(c.open_block(&*r, &id, 9, &bad, &mut d, &|| "t".into()).is_err());
                }
            }
        }
    }

    fn xts_cipher() -> Cipher {
        let key = ContentKey::new(&[5u8; 32]).unwrap();
        let tagger = GcmTagger::new(&key);
        let x = XtsKey::new(warpfs_crypto::XtsCipher::Aes, &[6u8; 64]).unwrap();
        Cipher::new_xts(x, Arc::new(Direct::new(key)), tagger)
    }

    #[test]
    fn xts_round_trip_holes_and_tweaks() {
        let c = xts_cipher();
        let r = c.reader();
        let id = [7u8; 16];
        for len in [4096usize, 4000, 17, 16, 5, 1] {
            let pt: Vec<u8> = (0..len).map(|i| (i * 3 + 1) as u8).collect();
            let mut buf = pt.clone();
            c.seal_block(&id, 9, &mut buf, &mut []);
            assert_ne!(buf, pt);
            // Equals XTS with tweak file ID ⊕ block number.
            let mut want = pt.clone();
            XtsKey::new(warpfs_crypto::XtsCipher::Aes, &[6u8; 64])
                .unwrap()
                .encrypt_unit(&file_block_tweak(&id, 9), &mut want);
            assert_eq!(buf, want);
            let mut d = buf.clone();
            c.open_block(&*r, &id, 9, &[], &mut d, &|| "t".into()).unwrap();
            assert_eq!(d, pt);
            // Another block number or file decrypts to something else.
            let mut d = buf.clone();
            c.open_block(&*r, &id, 10, &[], &mut d, &|| "t".into()).unwrap();
            assert_ne!(d, pt);
        }
        // A stored all-zero 4 KiB block is a hole; a shorter one is data.
        let mut z = vec![0u8; 4096];
        c.open_block(&*r, &id, 1, &[], &mut z, &|| "t".into()).unwrap();
        assert!(z.iter().all(|&x| x == 0));
        let mut z = vec![0u8; 100];
        c.open_block(&*r, &id, 1, &[], &mut z, &|| "t".into()).unwrap();
        assert!(z.iter().any(|&x| x != 0));
    }

    #[test]
    #[should_panic]
    fn xts_needs_new_xts() {
        let key = ContentKey::new(&[5u8; 32]).unwrap();
        let tagger = GcmTagger::new(&key);
        let _ = Cipher::new(Mode::Xts, Arc::new(Direct::new(key)), tagger);
    }

    #[test]
    fn unwritten_entry_reads_zeros() {
        let c = cipher(Mode::Gcm);
        let mut buf = vec![0x55u8; 4096];
        c.open_block(&*c.reader(), &[0; 16], 0, &[0u8; 32], &mut buf, &|| "t".into())
            .unwrap();
        assert!(buf.iter().all(|&x| x == 0));
    }
}
