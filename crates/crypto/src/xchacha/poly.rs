//! Poly1305 (RFC 8439 2.5) with 64-bit limbs: the accumulator and `r` in
//! three limbs of 44, 44 and 42 bits, products in `u128` (the "donna-64"
//! layout). On 4 KiB blocks it measured 1.3-2x the `poly1305` crate's AVX2
//! backend here (decision record 0080), and the crate has no aarch64
//! backend; the crate stays as the test oracle. Long runs of full blocks
//! go four at a time through the AVX2 kernel where the CPU has it
//! (`poly_avx2`, decision record 0107). Constant time: no branch or index
//! depends on the key or the message.

const M44: u64 = (1 << 44) - 1;
const M42: u64 = (1 << 42) - 1;
#[cfg(target_arch = "x86_64")]
const M26: u64 = (1 << 26) - 1;
/// Full blocks from which a run goes through the AVX2 kernel (shorter
/// ones, as a block's associated data, stay serial).
#[cfg(target_arch = "x86_64")]
const WIDE_MIN: usize = 256;

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
        #[cfg(target_arch = "x86_64")]
        let m = if hibit == 1 << 40 && m.len() >= WIDE_MIN && super::poly_avx2::available() {
            let n = m.len() & !63;
            self.blocks_wide(&m[..n]);
            &m[n..]
        } else {
            m
        };
        self.blocks_serial(m, hibit);
    }

    /// [`Poly1305::blocks`] four blocks at a time (`m`: a multiple of 64
    /// bytes, every block full) on a CPU with AVX2.
    #[cfg(target_arch = "x86_64")]
    fn blocks_wide(&mut self, m: &[u8]) {
        use super::poly_avx2::{blocks, Powers};
        let r = self.r;
        let r2 = mul(r, r);
        let r3 = mul(r2, r);
        let r4 = mul(r2, r2);
        let p = Powers::new(to26(r), to26(r2), to26(r3), to26(r4));
        let mut h = to26(strict(self.h));
        // SAFETY: `blocks_wide` runs only where `poly_avx2::available()`
        // found AVX2.
        unsafe { blocks(&mut h, &p, m) };
        self.h = from26(&h);
        zeroize::Zeroize::zeroize(&mut h);
    }

    /// [`Poly1305::blocks`] one block at a time.
    fn blocks_serial(&mut self, m: &[u8], hibit: u64) {
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

#[cfg(target_arch = "x86_64")]
/// `a · b` mod 2^130 − 5 in 44/44/42-bit limbs (`b`'s limbs within
/// their widths), limbs within their widths.
fn mul(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
    let (s1, s2) = (b[1] * 20, b[2] * 20);
    let m = |x: u64, y: u64| u128::from(x) * u128::from(y);
    let d0 = m(a[0], b[0]) + m(a[1], s2) + m(a[2], s1);
    let mut d1 = m(a[0], b[1]) + m(a[1], b[0]) + m(a[2], s2);
    let mut d2 = m(a[0], b[2]) + m(a[1], b[1]) + m(a[2], b[0]);
    let mut c = (d0 >> 44) as u64;
    let h0 = d0 as u64 & M44;
    d1 += u128::from(c);
    c = (d1 >> 44) as u64;
    let h1 = d1 as u64 & M44;
    d2 += u128::from(c);
    c = (d2 >> 42) as u64;
    let h2 = d2 as u64 & M42;
    strict([h0 + c * 5, h1, h2])
}

#[cfg(target_arch = "x86_64")]
/// The same value mod 2^130 − 5 with every limb within its width (44,
/// 44, 42 bits; the top one at most 2^42): below 2^130 + 2^88.
fn strict(h: [u64; 3]) -> [u64; 3] {
    let [mut h0, mut h1, mut h2] = h;
    for _ in 0..2 {
        let mut c = h0 >> 44;
        h0 &= M44;
        h1 += c;
        c = h1 >> 44;
        h1 &= M44;
        h2 += c;
        c = h2 >> 42;
        h2 &= M42;
        h0 += c * 5;
    }
    let mut c = h0 >> 44;
    h0 &= M44;
    h1 += c;
    c = h1 >> 44;
    h1 &= M44;
    [h0, h1, h2 + c]
}

#[cfg(target_arch = "x86_64")]
/// 44/44/42-bit limbs (within their widths) as five 26-bit ones (the top
/// one at most 2^26).
fn to26(h: [u64; 3]) -> [u64; 5] {
    [
        h[0] & M26,
        ((h[0] >> 26) | (h[1] << 18)) & M26,
        (h[1] >> 8) & M26,
        ((h[1] >> 34) | (h[2] << 10)) & M26,
        h[2] >> 16,
    ]
}

#[cfg(target_arch = "x86_64")]
/// Five 26-bit limbs (the second below 2^26 + 2^10) as 44/44/42-bit ones
/// (the top one at most a little over 2^42, as the serial loop takes it).
fn from26(a: &[u64; 5]) -> [u64; 3] {
    let x = a[0] + (a[1] << 26);
    let y = (x >> 44) + (a[2] << 8) + (a[3] << 34);
    let z = (y >> 44) + (a[4] << 16);
    [x & M44, y & M44, z]
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

    /// The tag of `m` (padded) one block at a time, never through the
    /// AVX2 kernel.
    #[cfg(target_arch = "x86_64")]
    fn serial(key: &[u8; 32], m: &[u8]) -> [u8; 16] {
        let mut p = Poly1305::new(key);
        let whole = m.len() & !15;
        p.blocks_serial(&m[..whole], 1 << 40);
        let mut last = [0u8; 16];
        if whole < m.len() {
            last[..m.len() - whole].copy_from_slice(&m[whole..]);
            p.blocks_serial(&last, 1 << 40);
        }
        p.finish()
    }

    /// The limb conversions keep the value: 44/44/42 to 26 and back.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn limbs_convert_both_ways() {
        for h in [[M44, M44, M42], [0, 0, 0], [1, M44, 1 << 42], [M44 - 3, 1 << 43, 5]] {
            let s = strict(h);
            assert_eq!(from26(&to26(s)), s, "{h:?}");
        }
    }

    #[cfg(target_arch = "x86_64")]
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(warpfs_testkit::cases(500)))]
        /// The AVX2 kernel (where the CPU has it; else the serial code
        /// again) gives the serial tag for any key and any length,
        /// accumulators near 2^130 − 5 and every limb at its largest
        /// included; a note line says which ran.
        #[test]
        fn four_blocks_at_a_time_equal_one_at_a_time(
            key in proptest::prop_oneof![
                proptest::array::uniform32(0u8..),
                proptest::array::uniform32(proptest::prop_oneof![proptest::strategy::Just(0xffu8), proptest::strategy::Just(0u8)]),
            ],
            pre in proptest::collection::vec(0u8.., 0..48),
            m in proptest::collection::vec(0u8.., 200..4300),
            ones in proptest::bool::ANY,
        ) {
            let m = if ones { vec![0xff; m.len()] } else { m };
            let mut ours = Poly1305::new(&key);
            ours.update_padded(&pre);
            ours.update_padded(&m);
            let mut all = pre.clone();
            all.resize(pre.len().next_multiple_of(16), 0);
            all.extend_from_slice(&m);
            proptest::prop_assert_eq!(ours.finish(), serial(&key, &all));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn says_which_path_ran() {
        if !super::super::poly_avx2::available() {
            println!("note: no AVX2 on this CPU: the four-block kernel's tests checked the serial path");
        }
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
