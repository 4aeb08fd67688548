//! Poly1305 (RFC 8439 2.5) with 64-bit limbs: the accumulator and `r` in
//! three limbs of 44, 44 and 42 bits, products in `u128` (the "donna-64"
//! layout). On 4 KiB blocks it measured 1.3-2x the `poly1305` crate's AVX2
//! backend here (decision record 0080), and the crate has no aarch64
//! backend; the crate stays as the test oracle. Constant time: no
//! branch or index depends on the key or the message.

const M44: u64 = (1 << 44) - 1;
const M42: u64 = (1 << 42) - 1;

/// One Poly1305 computation under a 32-byte one-time key `r ‖ s`.
pub(crate) struct Poly1305 {
    r: [u64; 3],
    /// `r1·20`, `r2·20`: the reductions mod 2^130 − 5 folded in.
    s: [u64; 2],
    h: [u64; 3],
    pad: [u64; 2],
}

fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

impl Poly1305 {
    /// The state for `key` (`r` clamped as RFC 8439 2.5 says).
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        let (t0, t1) = (le64(&key[0..]), le64(&key[8..]));
        let r0 = t0 & 0xffc_0fff_ffff;
        let r1 = ((t0 >> 44) | (t1 << 20)) & 0xfff_ffc0_ffff;
        let r2 = (t1 >> 24) & 0x00f_ffff_fc0f;
        Self {
            r: [r0, r1, r2],
            s: [r1 * 20, r2 * 20],
            h: [0; 3],
            pad: [le64(&key[16..]), le64(&key[24..])],
        }
    }

    /// Absorb whole 16-byte blocks; `hibit` is 2^128 (as `1 << 40` of the
    /// top limb) for every block but an unpadded final partial one.
    fn blocks(&mut self, m: &[u8], hibit: u64) {
        let [r0, r1, r2] = self.r;
        let [s1, s2] = self.s;
        let [mut h0, mut h1, mut h2] = self.h;
        for b in m.chunks_exact(16) {
            let (t0, t1) = (le64(b), le64(&b[8..]));
            h0 += t0 & M44;
            h1 += ((t0 >> 44) | (t1 << 20)) & M44;
            h2 += ((t1 >> 24) & M42) | hibit;
            let m = |a: u64, b: u64| u128::from(a) * u128::from(b);
            let d0 = m(h0, r0) + m(h1, s2) + m(h2, s1);
            let mut d1 = m(h0, r1) + m(h1, r0) + m(h2, s2);
            let mut d2 = m(h0, r2) + m(h1, r1) + m(h2, r0);
            let mut c = (d0 >> 44) as u64;
            h0 = d0 as u64 & M44;
            d1 += u128::from(c);
            c = (d1 >> 44) as u64;
            h1 = d1 as u64 & M44;
            d2 += u128::from(c);
            c = (d2 >> 42) as u64;
            h2 = d2 as u64 & M42;
            h0 += c * 5;
            c = h0 >> 44;
            h0 &= M44;
            h1 += c;
        }
        self.h = [h0, h1, h2];
    }

    /// Absorb `data` zero-padded to a multiple of 16 bytes (RFC 8439 2.8's
    /// `pad16`): every block full, with 2^128 set.
    pub(crate) fn update_padded(&mut self, data: &[u8]) {
        let whole = data.len() & !15;
        self.blocks(&data[..whole], 1 << 40);
        if whole < data.len() {
            let mut last = [0u8; 16];
            last[..data.len() - whole].copy_from_slice(&data[whole..]);
            self.blocks(&last, 1 << 40);
        }
    }

    /// Absorb a message's bytes as RFC 8439 2.5 does: a final partial
    /// block gets a 1 byte after it and no 2^128.
    #[cfg(test)]
    pub(crate) fn update_unpadded(&mut self, data: &[u8]) {
        let whole = data.len() & !15;
        self.blocks(&data[..whole], 1 << 40);
        if whole < data.len() {
            let mut last = [0u8; 16];
            let n = data.len() - whole;
            last[..n].copy_from_slice(&data[whole..]);
            last[n] = 1;
            self.blocks(&last, 0);
        }
    }

    /// The tag: `(h mod 2^130 − 5) + s mod 2^128`.
    pub(crate) fn finish(self) -> [u8; 16] {
        let [mut h0, mut h1, mut h2] = self.h;
        // Fully carry h.
        let mut c = h1 >> 44;
        h1 &= M44;
        for _ in 0..2 {
            h2 += c;
            c = h2 >> 42;
            h2 &= M42;
            h0 += c * 5;
            c = h0 >> 44;
            h0 &= M44;
            h1 += c;
            c = h1 >> 44;
            h1 &= M44;
        }
        h2 += c;
        // g = h + 5 − 2^130; keep g when it does not underflow (h >= p).
        let mut g0 = h0 + 5;
        c = g0 >> 44;
        g0 &= M44;
        let mut g1 = h1 + c;
        c = g1 >> 44;
        g1 &= M44;
        let g2 = (h2 + c).wrapping_sub(1 << 42);
        let keep_g = (g2 >> 63).wrapping_sub(1);
        h0 = (h0 & !keep_g) | (g0 & keep_g);
        h1 = (h1 & !keep_g) | (g1 & keep_g);
        h2 = (h2 & !keep_g) | (g2 & keep_g);
        // h + s mod 2^128.
        let [t0, t1] = self.pad;
        h0 += t0 & M44;
        c = h0 >> 44;
        h0 &= M44;
        h1 += (((t0 >> 44) | (t1 << 20)) & M44) + c;
        c = h1 >> 44;
        h1 &= M44;
        h2 = (h2 + ((t1 >> 24) & M42) + c) & M42;
        let lo = h0 | (h1 << 44);
        let hi = (h1 >> 20) | (h2 << 24);
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&lo.to_le_bytes());
        out[8..].copy_from_slice(&hi.to_le_bytes());
        out
    }
}

impl Drop for Poly1305 {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.r);
        zeroize::Zeroize::zeroize(&mut self.s);
        zeroize::Zeroize::zeroize(&mut self.h);
        zeroize::Zeroize::zeroize(&mut self.pad);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use poly1305::universal_hash::{KeyInit, UniversalHash};

    fn ours_raw(key: &[u8; 32], msg: &[u8]) -> [u8; 16] {
        let mut p = Poly1305::new(key);
        p.update_unpadded(msg);
        p.finish()
    }

    /// RFC 8439 2.5.2, and the edge cases of poly1305-donna's self test
    /// (h near 2^130 − 5, s carrying past 2^128).
    #[test]
    fn rfc8439_and_edge_vectors() {
        let key: [u8; 32] = hex::decode("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b")
            .unwrap()
            .try_into()
            .unwrap();
        assert_eq!(
            hex::encode(ours_raw(&key, b"Cryptographic Forum Research Group")),
            "a8061dc1305136c6c22b8baf0c0127a9"
        );
        // r = 2, s = 0, m = 2^129 − 1 (one full block): tag 3.
        let mut k = [0u8; 32];
        k[0] = 2;
        let mut p = Poly1305::new(&k);
        p.update_padded(&[0xff; 16]);
        assert_eq!(hex::encode(p.finish()), "03000000000000000000000000000000");
        // s = 2^128 − 1 carries out.
        let mut k = [0xffu8; 32];
        k[..16].fill(0);
        k[0] = 1;
        let mut p = Poly1305::new(&k);
        p.update_padded(&[0u8; 16]);
        let mut c = poly1305::Poly1305::new(&k.into());
        c.update_padded(&[0u8; 16]);
        assert_eq!(p.finish(), <[u8; 16]>::from(c.finalize()));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(500)))]
        /// Equal to the `poly1305` crate (padded, as the AEAD uses it, and
        /// unpadded) for any key and message, keys with every limb at its
        /// largest included.
        #[test]
        fn equals_the_poly1305_crate(
            key in proptest::prop_oneof![
                proptest::array::uniform32(0u8..),
                proptest::array::uniform32(proptest::prop_oneof![proptest::strategy::Just(0xffu8), proptest::strategy::Just(0u8)]),
            ],
            a in proptest::collection::vec(0u8.., 0..40),
            m in proptest::collection::vec(0u8.., 0..4200),
            hi in proptest::bool::ANY,
        ) {
            let m = if hi { m.iter().map(|_| 0xff).collect::<Vec<u8>>() } else { m };
            let mut ours = Poly1305::new(&key);
            ours.update_padded(&a);
            ours.update_padded(&m);
            let mut theirs = poly1305::Poly1305::new(&key.into());
            theirs.update_padded(&a);
            theirs.update_padded(&m);
            proptest::prop_assert_eq!(ours.finish(), <[u8; 16]>::from(theirs.finalize()));
            let raw = poly1305::Poly1305::new(&key.into()).compute_unpadded(&m);
            proptest::prop_assert_eq!(ours_raw(&key, &m), <[u8; 16]>::from(raw));
        }
    }
}
