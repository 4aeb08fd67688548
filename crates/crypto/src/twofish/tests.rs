//! Known answers from the Twofish submission's test files (`ecb_ival.txt`:
//! the subkeys of the all-zero 128-bit key and one block per key size;
//! `ecb_tbl.txt`: the 49-step iterated tables for 128/192/256-bit keys),
//! and property tests against the `twofish` crate (an independent
//! implementation, used as a test oracle only).

use super::*;
use proptest::prelude::*;

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

fn enc(key: &[u8], pt: &[u8]) -> [u8; 16] {
    let mut b: [u8; 16] = pt.try_into().unwrap();
    Twofish::new(key).unwrap().encrypt_block(&mut b);
    b
}

#[test]
fn ecb_ival_subkeys_of_the_zero_128_bit_key() {
    let want: [u32; 40] = [
        0x52C54DDE, 0x11F0626D, 0x7CAC9D4A, 0x4D1B4AAA, 0xB7B83A10, 0x1E7D0BEB, 0xEE9C341F, 0xCFE14BE4, 0xF98FFEF9,
        0x9C5B3C17, 0x15A48310, 0x342A4D81, 0x424D89FE, 0xC14724A7, 0x311B834C, 0xFDE87320, 0x3302778F, 0x26CD67B4,
        0x7A6C6362, 0xC2BAF60E, 0x3411B994, 0xD972C87F, 0x84ADB1EA, 0xA7DEE434, 0x54D2960F, 0xA2F7CAA8, 0xA6B8FF8C,
        0x8014C425, 0x6A748D1C, 0xEDBAF720, 0x928EF78C, 0x0338EE13, 0x9949D6BE, 0xC8314176, 0x07C07D68, 0xECAE7EA7,
        0x1FE71844, 0x85C05C89, 0xF298311E, 0x696EA672,
    ];
    assert_eq!(Twofish::new(&[0u8; 16]).unwrap().subkeys(), want);
}

#[test]
fn ecb_ival_blocks() {
    let z = [0u8; 16];
    let cases = [
        ("00000000000000000000000000000000", "9f589f5cf6122c32b6bfec2f2ae8c35a"),
        (
            "0123456789abcdeffedcba98765432100011223344556677",
            "cfd1d2e5a9be9cdf501f13b892bd2248",
        ),
        (
            "0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff",
            "37527be0052334b89f0cfccae87cfa20",
        ),
    ];
    for (key, ct) in cases {
        let k = Twofish::new(&h(key)).unwrap();
        let mut b = z;
        k.encrypt_block(&mut b);
        assert_eq!(hex::encode(b), ct, "key {key}");
        k.decrypt_block(&mut b);
        assert_eq!(b, z);
    }
}

/// A row of `ecb_tbl.txt`: (I, KEY, PT, CT).
type Row = (usize, &'static str, &'static str, &'static str);

/// `ecb_tbl.txt`: I=1 has key 0 and plaintext 0; step I+1 takes the key
/// (PT_I ‖ KEY_I) cut to the key size and the plaintext CT_I. Checked:
/// the rows the file prints for I = 1..3 and I = 49, and that decrypting
/// walks all the way back.
#[test]
fn ecb_tbl_iterated_tables() {
    // (key bytes, [(I, KEY, PT, CT)] rows from the file)
    let tables: [(usize, &[Row]); 3] = [
        (
            16,
            &[
                (
                    1,
                    "00000000000000000000000000000000",
                    "00000000000000000000000000000000",
                    "9f589f5cf6122c32b6bfec2f2ae8c35a",
                ),
                (
                    2,
                    "00000000000000000000000000000000",
                    "9f589f5cf6122c32b6bfec2f2ae8c35a",
                    "d491db16e7b1c39e86cb086b789f5419",
                ),
                (
                    3,
                    "9f589f5cf6122c32b6bfec2f2ae8c35a",
                    "d491db16e7b1c39e86cb086b789f5419",
                    "019f9809de1711858faac3a3ba20fbc3",
                ),
                (
                    49,
                    "bca724a54533c6987e14aa827952f921",
                    "6b459286f3ffd28d49f15b1581b08e42",
                    "5d9d4eeffa9151575524f115815a12e0",
                ),
            ],
        ),
        (
            24,
            &[
                (
                    1,
                    "000000000000000000000000000000000000000000000000",
                    "00000000000000000000000000000000",
                    "efa71f788965bd4453f860178fc19101",
                ),
                (
                    2,
                    "000000000000000000000000000000000000000000000000",
                    "efa71f788965bd4453f860178fc19101",
                    "88b2b2706b105e36b446bb6d731a1e88",
                ),
                (
                    3,
                    "efa71f788965bd4453f860178fc191010000000000000000",
                    "88b2b2706b105e36b446bb6d731a1e88",
                    "39da69d6ba4997d585b6dc073ca341b2",
                ),
                (
                    49,
                    "fb66522c332fcc4c042abe32fa9e902fdea4f3da75ec7a8e",
                    "f0ab73301125fa21ef70be5385fb76b6",
                    "e75449212beef9f4a390bd860a640941",
                ),
            ],
        ),
        (
            32,
            &[
                (
                    1,
                    "0000000000000000000000000000000000000000000000000000000000000000",
                    "00000000000000000000000000000000",
                    "57ff739d4dc92c1bd7fc01700cc8216f",
                ),
                (
                    49,
                    "248a7f3528b168acfdd1386e3f51e30c2e2158bc3e5fc714c1eeeca0ea696d48",
                    "431058f4dbc7f734da4f02f04cc4f459",
                    "37fe26ff1cf66175f5ddf4c33b97a205",
                ),
            ],
        ),
    ];
    for (len, rows) in tables {
        let mut key = vec![0u8; len];
        let mut pt = [0u8; 16];
        let mut steps = Vec::new();
        for i in 1..=49 {
            let ct = enc(&key, &pt);
            for &(ri, rk, rp, rc) in rows {
                if ri == i {
                    assert_eq!(
                        (hex::encode(&key), hex::encode(pt), hex::encode(ct)),
                        (rk.into(), rp.into(), rc.into()),
                        "{len}-byte key, I={i}"
                    );
                }
            }
            steps.push((key.clone(), pt));
            let mut next = pt.to_vec();
            next.extend_from_slice(&key);
            next.truncate(len);
            key = next;
            pt = ct;
        }
        // Walk back with decryption.
        for (k, p) in steps.iter().rev() {
            let mut b = pt;
            Twofish::new(k).unwrap().decrypt_block(&mut b);
            assert_eq!(&b, p);
            pt = b;
        }
        assert_eq!(pt, [0u8; 16]);
    }
}

#[test]
fn bad_key_lengths_are_errors() {
    for n in [0usize, 1, 15, 17, 20, 31, 33, 64] {
        assert!(Twofish::new(&vec![0u8; n]).is_err(), "{n}");
    }
    assert_eq!(Twofish::new(&[1u8; 24]).unwrap().bits(), 192);
}

#[test]
fn clones_encrypt_alike_on_their_own_pages() {
    let a = Twofish::new(&[9u8; 32]).unwrap();
    let b = a.clone();
    assert_eq!((a.subkeys(), a.bits()), (b.subkeys(), b.bits()));
    assert_ne!(&*a.tables as *const _, &*b.tables as *const _);
    let (mut x, mut y) = ([5u8; 16], [5u8; 16]);
    a.encrypt_block(&mut x);
    b.encrypt_block(&mut y);
    assert_eq!(x, y);
}

#[test]
fn debug_shows_no_key_material() {
    let k = Twofish::new(&[0xab; 32]).unwrap();
    assert_eq!(format!("{k:?}"), "Twofish-256(..)");
}

fn oracle(key: &[u8]) -> twofish::Twofish {
    use twofish::cipher::KeyInit;
    twofish::Twofish::new_from_slice(key).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(warpfs_testkit::cases(200)))]

    /// Any key size, any number of blocks (the multi-block path and its
    /// single-block tail): equal to the `twofish` crate both ways.
    #[test]
    fn matches_the_twofish_crate(
        klen in prop_oneof![Just(16usize), Just(24), Just(32)],
        key in proptest::collection::vec(any::<u8>(), 32),
        data in proptest::collection::vec(any::<[u8; 16]>(), 0..40),
    ) {
        use twofish::cipher::{BlockCipherDecrypt, BlockCipherEncrypt};
        let key = &key[..klen];
        let ours = Twofish::new(key).unwrap();
        let theirs = oracle(key);
        let mut a = data.clone();
        ours.encrypt_blocks(&mut a);
        let mut b = data.clone();
        for blk in b.iter_mut() {
            let mut x = twofish::cipher::Block::<twofish::Twofish>::from(*blk);
            theirs.encrypt_block(&mut x);
            *blk = x.into();
        }
        prop_assert_eq!(&a, &b);
        // Other lane counts agree too.
        let mut c = data.clone();
        ours.encrypt_blocks_n::<4>(&mut c);
        prop_assert_eq!(&c, &b);
        let mut c = data.clone();
        ours.encrypt_blocks_n::<2>(&mut c);
        prop_assert_eq!(&c, &b);
        ours.decrypt_blocks(&mut a);
        prop_assert_eq!(&a, &data);
        for blk in b.iter_mut() {
            let mut x = twofish::cipher::Block::<twofish::Twofish>::from(*blk);
            theirs.decrypt_block(&mut x);
            *blk = x.into();
        }
        prop_assert_eq!(&b, &data);
    }
}
