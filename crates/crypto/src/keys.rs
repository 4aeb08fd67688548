//! Key types: the volume master key (with its printable recovery form) and
//! the subkeys derived from it with HKDF-SHA256.

use crate::aes_ctr::ContentKey;
pub use crate::error::KeyLengthError;
use crate::error::{Error, Result};
use crate::locked::{Locked, LockedBytes};
use crate::names::NameCipher;
use crate::seal::Sealer;
use crate::xts::{XtsCipher, XtsKey};
use hkdf::Hkdf;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Length of the master key in bytes.
pub const MASTER_KEY_LEN: usize = 32;

/// HKDF info string of the content key.
pub const INFO_CONTENT: &[u8] = b"warpfs v1 content";
/// HKDF info string of the XTS content key `K1 ‖ K2` (`xts` modes).
pub const INFO_CONTENT_XTS: &[u8] = b"warpfs v1 content xts";
/// HKDF info string of the name-encryption key.
pub const INFO_NAMES: &[u8] = b"warpfs v1 names";
/// HKDF info string of the key that seals symlink targets and xattr values.
pub const INFO_SEAL: &[u8] = b"warpfs v1 symlink+xattr";

/// The volume master key: 256 random bits, stored only wrapped in
/// `warpfs.conf`. Locked in RAM and zeroized on drop (`Locked`); `Debug` never shows the bytes.
#[derive(Clone)]
pub struct MasterKey(Locked<[u8; MASTER_KEY_LEN]>);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

/// Constant-time comparison.
impl PartialEq for MasterKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.ct_eq(&*other.0).into()
    }
}
impl Eq for MasterKey {}

impl MasterKey {
    /// A fresh random master key from the OS CSPRNG.
    pub fn generate() -> Self {
        let mut k = Locked::new([0u8; MASTER_KEY_LEN]);
        crate::rand::fill(&mut *k);
        Self(k)
    }

    /// A master key from exactly 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut k = Locked::new([0u8; MASTER_KEY_LEN]);
        if bytes.len() != MASTER_KEY_LEN {
            return Err(Error::KeyLength);
        }
        k.copy_from_slice(bytes);
        Ok(Self(k))
    }

    /// The raw key bytes.
    pub fn as_bytes(&self) -> &[u8; MASTER_KEY_LEN] {
        &self.0
    }

    /// The key as 64 lowercase hex digits in 8 groups of 8 joined by `-`,
    /// for the user to write down (`warpfs init` shows it once).
    pub fn recovery_text(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(MASTER_KEY_LEN * 2 + 7);
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 && i % 4 == 0 {
                s.push('-');
            }
            s.push(HEX[usize::from(b >> 4)] as char);
            s.push(HEX[usize::from(b & 15)] as char);
        }
        s
    }

    /// Parse a recovery key: 64 hex digits (either case); dashes and
    /// whitespace anywhere are ignored.
    pub fn from_recovery_text(text: &str) -> Result<Self> {
        let mut k = Locked::new([0u8; MASTER_KEY_LEN]);
        let mut n = 0usize;
        for c in text.chars() {
            if c == '-' || c.is_whitespace() {
                continue;
            }
            let v = c
                .to_digit(16)
                .ok_or(Error::RecoveryText("it contains a character that is not a hex digit"))?;
            if n >= MASTER_KEY_LEN * 2 {
                return Err(Error::RecoveryText("it has more than 64 hex digits"));
            }
            // v < 16, so the cast is lossless.
            k[n / 2] |= (v as u8) << if n & 1 == 0 { 4 } else { 0 };
            n += 1;
        }
        if n != MASTER_KEY_LEN * 2 {
            return Err(Error::RecoveryText("it must have exactly 64 hex digits"));
        }
        Ok(Self(k))
    }
}

/// The working keys of a mounted volume, derived from the master key with
/// HKDF-SHA256 (no salt) under fixed info strings. The derived bytes are
/// zeroized as soon as the key objects are built.
pub struct Subkeys {
    /// File content key (AES-128 or AES-256), info [`INFO_CONTENT`].
    pub content: ContentKey,
    /// Name encryption (AES-SIV, 64-byte key), info [`INFO_NAMES`].
    pub names: NameCipher,
    /// Randomised sealing of symlink targets and xattr values (AES-SIV,
    /// 64-byte key), info [`INFO_SEAL`].
    pub seal: Sealer,
}

impl std::fmt::Debug for Subkeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Subkeys(content: AES-{}, ..)", self.content.bits())
    }
}

impl Subkeys {
    /// Derive the subkeys. `content_key_bits` is 128 or 256.
    ///
    /// # Panics
    /// If `content_key_bits` is neither 128 nor 256. The config loader
    /// refuses any other value, so a volume can never reach this.
    pub fn derive(master: &MasterKey, content_key_bits: u32) -> Subkeys {
        Self::derive_gen(master, content_key_bits, 0)
    }

    /// [`derive`](Self::derive) with the content key of key generation
    /// `generation` (FORMAT.md 10; generation 0 is the original key).
    pub fn derive_gen(master: &MasterKey, content_key_bits: u32, generation: u32) -> Subkeys {
        let content_len = content_len(content_key_bits);
        let hk = Hkdf::<Sha256>::new(None, master.as_bytes());
        let mut okm = Locked::new([0u8; 64]);
        let expand = |info: &[u8], out: &mut [u8]| {
            // Output lengths here are far below HKDF's 255·32-byte limit.
            hk.expand(info, out)
                .expect("HKDF-SHA256 output length is within bounds");
        };

        expand(&gen_info(INFO_CONTENT, generation), &mut okm[..content_len]);
        let content = ContentKey::new(&okm[..content_len]).expect("content key length is 16 or 32");
        expand(INFO_NAMES, &mut okm[..]);
        let names = NameCipher::new(&okm);
        expand(INFO_SEAL, &mut okm[..]);
        let seal = Sealer::new(&okm);
        Subkeys { content, names, seal }
    }

    /// The XTS content key of an `xts` volume: `2 · key_bits / 8` bytes of
    /// HKDF-SHA256 under [`INFO_CONTENT_XTS`], split into `K1 ‖ K2`.
    ///
    /// # Panics
    /// As [`derive`](Self::derive), for a key size other than 128 or 256.
    pub fn xts_key(master: &MasterKey, key_bits: u32, cipher: XtsCipher) -> XtsKey {
        Self::xts_key_gen(master, key_bits, cipher, 0)
    }

    /// [`xts_key`](Self::xts_key) of key generation `generation`.
    pub fn xts_key_gen(master: &MasterKey, key_bits: u32, cipher: XtsCipher, generation: u32) -> XtsKey {
        let okm = Self::xts_key_bytes_gen(master, key_bits, generation);
        XtsKey::new(cipher, &okm).expect("XTS key length is 32 or 64")
    }

    /// The raw bytes (Key1 ‖ Key2, 32 or 64 bytes, on locked pages zeroed
    /// on drop) of the XTS key [`xts_key_gen`](Self::xts_key_gen) expands,
    /// for a device that expands the key itself (the GPU XTS kernels).
    pub fn xts_key_bytes_gen(master: &MasterKey, key_bits: u32, generation: u32) -> LockedBytes {
        let mut okm = LockedBytes::zeroed(2 * content_len(key_bits));
        Hkdf::<Sha256>::new(None, master.as_bytes())
            .expand(&gen_info(INFO_CONTENT_XTS, generation), &mut okm)
            .expect("HKDF-SHA256 output length is within bounds");
        okm
    }

    /// The raw bytes of the content key that [`derive`](Self::derive) puts
    /// in `content` (16 or 32 bytes, on locked pages zeroed on drop), for a keystream
    /// backend that expands the key itself (the engine's forced software
    /// AES for `WARPFS_NO_AESNI=1` experiments).
    ///
    /// # Panics
    /// As [`derive`](Self::derive), for a key size other than 128 or 256.
    pub fn content_key_bytes(master: &MasterKey, content_key_bits: u32) -> LockedBytes {
        Self::content_key_bytes_gen(master, content_key_bits, 0)
    }

    /// [`content_key_bytes`](Self::content_key_bytes) of key generation `generation`.
    pub fn content_key_bytes_gen(master: &MasterKey, content_key_bits: u32, generation: u32) -> LockedBytes {
        let mut out = LockedBytes::zeroed(content_len(content_key_bits));
        Hkdf::<Sha256>::new(None, master.as_bytes())
            .expand(&gen_info(INFO_CONTENT, generation), &mut out)
            .expect("HKDF-SHA256 output length is within bounds");
        out
    }
}

/// The HKDF info of a content key of key generation `g`: the base info for
/// generation 0, `base ‖ " gen " ‖ decimal g` after a rekey (FORMAT.md 10).
pub fn gen_info(base: &[u8], g: u32) -> Vec<u8> {
    let mut v = base.to_vec();
    if g > 0 {
        v.extend_from_slice(format!(" gen {g}").as_bytes());
    }
    v
}

fn content_len(content_key_bits: u32) -> usize {
    match content_key_bits {
        128 => 16,
        256 => 32,
        other => panic!("content key size must be 128 or 256 bits, not {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_generations_give_distinct_keys() {
        let m = MasterKey::from_bytes(&[7u8; 32]).unwrap();
        assert_eq!(gen_info(INFO_CONTENT, 0), INFO_CONTENT);
        assert_eq!(gen_info(INFO_CONTENT, 12), b"warpfs v1 content gen 12");
        let g0 = Subkeys::content_key_bytes_gen(&m, 256, 0);
        assert_eq!(*g0, *Subkeys::content_key_bytes(&m, 256));
        let g1 = Subkeys::content_key_bytes_gen(&m, 256, 1);
        let g2 = Subkeys::content_key_bytes_gen(&m, 256, 2);
        assert_ne!(*g0, *g1);
        assert_ne!(*g1, *g2);
        // Known answer: HKDF-SHA256(ikm = master, info = "warpfs v1 content gen 1").
        let mut want = [0u8; 32];
        Hkdf::<Sha256>::new(None, &[7u8; 32])
            .expand(b"warpfs v1 content gen 1", &mut want)
            .unwrap();
        assert_eq!(&g1[..], &want[..]);
    }

    #[test]
    fn master_key_debug_hides_bytes() {
        let k = MasterKey::from_bytes(&[0xab; 32]).unwrap();
        let d = format!("{k:?}");
        assert_eq!(d, "MasterKey(..)");
        assert!(!d.contains("ab"));
        assert!(!format!("{:?}", Subkeys::derive(&k, 256)).contains("ab"));
    }

    #[test]
    fn content_key_bytes_are_the_derived_content_key() {
        let k = MasterKey::from_bytes(&[7; 32]).unwrap();
        for bits in [128, 256] {
            let raw = Subkeys::content_key_bytes(&k, bits);
            assert_eq!(raw.len() * 8, bits as usize);
            let a = Subkeys::derive(&k, bits).content;
            let b = ContentKey::new(&raw).unwrap();
            let (mut x, mut y) = ([0u8; 16], [0u8; 16]);
            a.encrypt_block(&mut x);
            b.encrypt_block(&mut y);
            assert_eq!(x, y);
        }
    }

    #[test]
    fn xts_key_is_hkdf_under_its_own_info() {
        let k = MasterKey::from_bytes(&[7; 32]).unwrap();
        for bits in [128u32, 256] {
            let x = Subkeys::xts_key(&k, bits, XtsCipher::Aes);
            assert_eq!(x.bits(), bits);
            let mut okm = vec![0u8; bits as usize / 4];
            Hkdf::<Sha256>::new(None, k.as_bytes())
                .expand(INFO_CONTENT_XTS, &mut okm)
                .unwrap();
            let y = XtsKey::new(XtsCipher::Aes, &okm).unwrap();
            let (mut a, mut b) = (vec![1u8; 100], vec![1u8; 100]);
            x.encrypt_unit(&[0; 16], &mut a);
            y.encrypt_unit(&[0; 16], &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn from_bytes_checks_length() {
        assert_eq!(MasterKey::from_bytes(&[1; 31]), Err(Error::KeyLength));
        assert_eq!(MasterKey::from_bytes(&[1; 33]), Err(Error::KeyLength));
        assert_eq!(MasterKey::from_bytes(&[1; 32]).unwrap().as_bytes(), &[1; 32]);
    }

    #[test]
    fn generate_is_random() {
        assert_ne!(MasterKey::generate(), MasterKey::generate());
    }

    #[test]
    fn recovery_text_format_and_round_trip() {
        let bytes: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(37).wrapping_add(5)).collect();
        let k = MasterKey::from_bytes(&bytes).unwrap();
        let t = k.recovery_text();
        assert_eq!(t.len(), 64 + 7);
        let groups: Vec<&str> = t.split('-').collect();
        assert_eq!(groups.len(), 8);
        assert!(groups.iter().all(|g| g.len() == 8));
        assert!(t.starts_with("052a4f74-"));
        assert_eq!(MasterKey::from_recovery_text(&t).unwrap(), k);
        // Without dashes, upper case, with spaces and newlines.
        let loose: String = t.replace('-', "").to_uppercase();
        let loose = format!("  {}\n {} ", &loose[..30], &loose[30..]);
        assert_eq!(MasterKey::from_recovery_text(&loose).unwrap(), k);
    }

    #[test]
    fn bad_recovery_text_is_an_error() {
        let t = MasterKey::generate().recovery_text();
        assert!(MasterKey::from_recovery_text("").is_err());
        assert!(MasterKey::from_recovery_text(&t[..t.len() - 1]).is_err());
        assert!(MasterKey::from_recovery_text(&format!("{t}0")).is_err());
        assert!(MasterKey::from_recovery_text(&t.replacen('-', "g", 1)).is_err());
        assert!(MasterKey::from_recovery_text(&"é".repeat(64)).is_err());
    }

    #[test]
    fn subkeys_are_distinct_and_deterministic() {
        let k = MasterKey::from_bytes(&[7; 32]).unwrap();
        let a = Subkeys::derive(&k, 256);
        let b = Subkeys::derive(&k, 256);
        assert_eq!(a.content.bits(), 256);
        assert_eq!(Subkeys::derive(&k, 128).content.bits(), 128);
        let iv = [3u8; 16];
        let n1 = a.names.encrypt_name(&iv, b"x").unwrap();
        assert_eq!(n1, b.names.encrypt_name(&iv, b"x").unwrap());
        // Content and name keys differ from each other and from the master key.
        let mut c = [0u8; 16];
        a.content.encrypt_block(&mut c);
        let direct = ContentKey::new(k.as_bytes()).unwrap();
        let mut d = [0u8; 16];
        direct.encrypt_block(&mut d);
        assert_ne!(c, d);
        // Another master key gives other names.
        let k2 = MasterKey::from_bytes(&[8; 32]).unwrap();
        assert_ne!(Subkeys::derive(&k2, 256).names.encrypt_name(&iv, b"x").unwrap(), n1);
        // A sealed value opens only with the same subkeys.
        let s = a.seal.seal(b"ad", b"target");
        assert_eq!(b.seal.open(b"ad", &s).unwrap(), b"target");
        assert!(Subkeys::derive(&k2, 256).seal.open(b"ad", &s).is_err());
    }

    #[test]
    fn content_key_matches_hkdf_rfc5869_style_expand() {
        // Independent check of the derivation: HKDF-SHA256 with no salt is
        // HMAC(PRK = HMAC(0^32, ikm), info || 0x01) for one block.
        use hkdf::hmac::{Hmac, KeyInit, Mac};
        let ikm = [0x42u8; 32];
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&[0u8; 32]).unwrap();
        m.update(&ikm);
        let prk = m.finalize().into_bytes();
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&prk).unwrap();
        m.update(INFO_CONTENT);
        m.update(&[1]);
        let t1 = m.finalize().into_bytes();
        let expected = ContentKey::new(&t1).unwrap();
        let got = Subkeys::derive(&MasterKey::from_bytes(&ikm).unwrap(), 256).content;
        let (mut a, mut b) = ([9u8; 16], [9u8; 16]);
        expected.encrypt_block(&mut a);
        got.encrypt_block(&mut b);
        assert_eq!(a, b);
    }
}
