//! XChaCha20 keys (FORMAT.md 15): the write pool and read windows hand out
//! the XChaCha20 stream of each nonce from block 0 (the Poly1305 one-time
//! key, then the data from block 1), with workers (masks made ahead, in
//! contexts long enough for the later data) and without, the same bytes as
//! the direct backend.

use super::*;
use warpfs_crypto::{MaskLayout, XChaChaKey};

/// The XChaCha20 stream of `nonce` (`nonce ‖ 0^96`) from block 0.
fn stream(raw: &[u8], nonce: &Nonce, len: usize) -> Vec<u8> {
    let mut s = vec![0u8; len];
    XChaChaKey::new(raw).unwrap().keystream(nonce, 0, &mut s);
    s
}

#[test]
fn pools_and_windows_make_xchacha20_masks() {
    let raw = [0x2bu8; 32];
    for speculation in [true, false] {
        let e = Engine::new(EngineConfig {
            threads: 2,
            speculation,
            pool_size: 8,
            ..EngineConfig::default()
        })
        .unwrap();
        let k = e
            .add_raw_key_cipher(warpfs_crypto::ContentCipher::XChaCha20, &raw)
            .unwrap();
        assert_eq!(e.cipher(k).unwrap().layout(), MaskLayout::XCHACHA);
        assert_eq!(e.stats().xchacha_keys, 1);
        let pool = WritePool::with_nonces(e.clone(), k, Box::new(Counting(Mutex::new(0)))).unwrap();
        let win = ReadWindow::new(e.clone(), k).unwrap();
        let mut rng = Rng::new(3);
        for i in 0..24u64 {
            let len = [4096, 1, 4000, 64][i as usize % 4];
            let mut pt = vec![0u8; len];
            rng.fill(&mut pt);
            e.quiesce();
            let mut buf = pt.clone();
            let (n, otk) = pool.seal(&mut buf);
            let s = stream(&raw, &n, 64 + len);
            assert_eq!(
                &otk[..],
                &s[..32],
                "speculation {speculation}: the tag mask is block 0's key"
            );
            assert_eq!(
                xor(&buf, &pt),
                s[64..].to_vec(),
                "speculation {speculation}: data from block 1"
            );
            assert_eq!(pool.tag_mask(&n), otk);
            let r = win.plan(i, 1);
            win.prefetch(&[(r.start, n)]);
            e.quiesce();
            let mut back = buf.clone();
            assert_eq!(win.open(i, &n, &mut back), otk);
            win.finish(i, 1);
            assert_eq!(back, pt);
            // The direct backend agrees.
            let mut d = buf.clone();
            let direct = Direct::xchacha(XChaChaKey::new(&raw).unwrap());
            assert_eq!(direct.open(&n, &mut d), otk);
            assert_eq!(d, pt);
        }
        if speculation {
            let s = e.stats();
            assert!(s.made_by_workers > 0 && s.ready_hits > 0, "{s}");
        }
    }
}

/// The backend's name says what runs the keys the engine holds: an engine
/// with only an XChaCha20 key (an XChaCha20 volume's) names the XChaCha20
/// implementation, not AES; one with an AES key names the AES path.
#[test]
fn the_backend_name_names_the_cipher_it_runs() {
    let e = Engine::new(EngineConfig::default()).unwrap();
    e.add_raw_key_cipher(warpfs_crypto::ContentCipher::XChaCha20, &[7u8; 32])
        .unwrap();
    let name = e.backend_name();
    assert!(name.starts_with("cpu (xchacha20: chacha20 "), "{name}");
    assert!(!name.contains("aes"), "{name}");
    e.add_raw_key(&[9u8; 32]).unwrap();
    let name = e.backend_name();
    assert!(name.contains("aes"), "{name}");
}
