//! Known-answer checks of the on-disk layout against the independent
//! `aes-gcm` crate, sparseness and persistence.

mod common;

use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::Aes256Gcm;
use common::*;
use std::os::unix::fs::{FileExt, MetadataExt};
use warpfs_content::layout::{data_offset, entry_offset, header_len};
use warpfs_content::{plain_size_of, CipherFile, ContentError, Mode};

fn raw(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Decrypt block `b` of a gcm file with `aes-gcm` from the raw bytes.
fn aes_gcm_block(file: &[u8], b: u64, len: usize) -> Result<Vec<u8>, ()> {
    let m = Mode::Gcm;
    let file_id = &file[8..24];
    let eo = entry_offset(m, b) as usize;
    let nonce: [u8; 12] = file[eo..eo + 12].try_into().unwrap();
    assert_eq!(&file[eo + 12..eo + 16], &[0, 0, 0, 0]);
    let tag: [u8; 16] = file[eo + 16..eo + 32].try_into().unwrap();
    let d = data_offset(m, b) as usize;
    let mut buf = file[d..d + len].to_vec();
    let mut ad = file_id.to_vec();
    ad.extend_from_slice(&b.to_be_bytes());
    let c = Aes256Gcm::new_from_slice(&KEY).unwrap();
    c.decrypt_inout_detached(&nonce.into(), &ad, buf.as_mut_slice().into(), &tag.into())
        .map_err(|_| ())?;
    Ok(buf)
}

#[test]
fn gcm_blocks_decrypt_with_aes_gcm_crate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = cipher(Mode::Gcm);
    let f = open(&path, &c);
    let size = 300 * 4096 + 1000;
    let data = pattern(9, size);
    f.write_at(0, &data).unwrap();
    f.sync(true).unwrap();
    let file = raw(&path);
    assert_eq!(&file[..4], b"WRPF");
    assert_eq!(&file[4..8], &[1, 0, 2, 0]);
    assert_eq!(&file[24..32], &[0; 8]);
    assert_eq!(
        file.len() as u64,
        warpfs_content::layout::backing_len(Mode::Gcm, size as u64)
    );
    for b in [0u64, 1, 15, 16, 17, 271, 272, 299] {
        let p = aes_gcm_block(&file, b, 4096).expect("tag must verify with aes-gcm");
        assert_eq!(p, &data[b as usize * 4096..][..4096], "block {b}");
    }
    // the short last block
    let p = aes_gcm_block(&file, 300, 1000).unwrap();
    assert_eq!(p, &data[300 * 4096..]);
    // AD binds the block number: block 5's bytes do not verify as block 6.
    let mut moved = file.clone();
    let (e5, e6) = (entry_offset(Mode::Gcm, 5) as usize, entry_offset(Mode::Gcm, 6) as usize);
    let ent5 = moved[e5..e5 + 32].to_vec();
    moved[e6..e6 + 32].copy_from_slice(&ent5);
    let (d5, d6) = (data_offset(Mode::Gcm, 5) as usize, data_offset(Mode::Gcm, 6) as usize);
    let dat5 = moved[d5..d5 + 4096].to_vec();
    moved[d6..d6 + 4096].copy_from_slice(&dat5);
    assert!(aes_gcm_block(&moved, 6, 4096).is_err());
}

#[test]
fn ctr_ciphertext_equals_gcm_keystream() {
    // ctr mode: C = P xor AES-CTR(nonce || 2..), which is exactly the
    // ciphertext AES-GCM produces for the same key and nonce.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = cipher(Mode::Ctr);
    let f = open(&path, &c);
    let data = pattern(3, 20 * 4096);
    f.write_at(0, &data).unwrap();
    let file = raw(&path);
    assert_eq!(file[6], 1);
    assert_eq!(header_len(Mode::Ctr), 288);
    for b in [0u64, 15, 16, 19] {
        let eo = entry_offset(Mode::Ctr, b) as usize;
        let nonce: [u8; 12] = file[eo..eo + 12].try_into().unwrap();
        let d = data_offset(Mode::Ctr, b) as usize;
        let mut expect = data[b as usize * 4096..][..4096].to_vec();
        let gcm = Aes256Gcm::new_from_slice(&KEY).unwrap();
        gcm.encrypt_inout_detached(&nonce.into(), &[], expect.as_mut_slice().into())
            .unwrap();
        assert_eq!(&file[d..d + 4096], &expect[..], "block {b}");
    }
}

#[test]
fn nonces_are_fresh_per_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = cipher(Mode::Gcm);
    let f = open(&path, &c);
    f.write_at(0, &[1u8; 4096]).unwrap();
    let n1 = raw(&path)[32..44].to_vec();
    f.write_at(0, &[1u8; 4096]).unwrap();
    let n2 = raw(&path)[32..44].to_vec();
    assert_ne!(n1, n2);
    // partial write also re-encrypts under a fresh nonce
    f.write_at(10, &[2u8; 1]).unwrap();
    assert_ne!(raw(&path)[32..44].to_vec(), n2);
}

#[test]
fn sparse_holes_read_zero_and_stay_sparse() {
    for mode in [Mode::Ctr, Mode::Gcm] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let c = cipher(mode);
        let f = open(&path, &c);
        f.write_at(100, b"head").unwrap();
        let far = 200 << 20;
        f.write_at(far, b"tail").unwrap();
        assert_eq!(f.size(), far + 4);
        let mut b = vec![0xffu8; 3 << 20];
        assert_eq!(f.read_at(5 << 20, &mut b).unwrap(), b.len());
        assert!(b.iter().all(|&x| x == 0));
        let mut h = [0u8; 8];
        f.read_at(98, &mut h).unwrap();
        assert_eq!(&h, b"\0\0head\0\0");
        let mut t = [0u8; 10];
        assert_eq!(f.read_at(far - 2, &mut t).unwrap(), 6);
        assert_eq!(&t[..6], b"\0\0tail");
        let md = std::fs::metadata(&path).unwrap();
        assert!(md.len() > far);
        assert!(
            md.blocks() * 512 < (2 << 20),
            "backing not sparse: {} blocks",
            md.blocks()
        );
        // truncate-extend leaves a hole too
        f.set_len(far * 2).unwrap();
        let md = std::fs::metadata(&path).unwrap();
        assert!(md.blocks() * 512 < (2 << 20));
        let mut b = vec![0xffu8; 4096];
        f.read_at(far + 4096 * 7, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        // punching a big range deallocates it
        let big = pattern(1, 4 << 20);
        f.write_at(1 << 20, &big).unwrap();
        let before = std::fs::metadata(&path).unwrap().blocks();
        f.punch_hole(1 << 20, 4 << 20).unwrap();
        let after = std::fs::metadata(&path).unwrap().blocks();
        assert!(after < before, "punch freed nothing: {before} -> {after}");
        let mut b = vec![0xffu8; 4 << 20];
        f.read_at(1 << 20, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        assert_eq!(f.size(), far * 2);
    }
}

#[test]
fn persistence_across_reopen_and_plain_size_of() {
    for mode in [Mode::Ctr, Mode::Gcm] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let c = cipher(mode);
        let data = pattern(77, 3 * 1024 * 1024 + 333);
        {
            let f = open(&path, &c);
            f.write_at(0, &data).unwrap();
            f.sync(false).unwrap();
        }
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(plain_size_of(mode, len), data.len() as u64);
        let f = open(&path, &c);
        assert_eq!(f.size(), data.len() as u64);
        assert_eq!(read_all(&f), data);
        f.set_len(0).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        drop(f);
        let f = open(&path, &c);
        assert_eq!(f.size(), 0);
        let mut b = [0u8; 4];
        assert_eq!(f.read_at(0, &mut b).unwrap(), 0);
    }
}

#[test]
fn read_only_files_refuse_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = cipher(Mode::Gcm);
    open(&path, &c).write_at(0, b"hello").unwrap();
    let ro = std::fs::File::open(&path).unwrap();
    let f = CipherFile::open(ro, c.clone(), "ro".into()).unwrap();
    let mut b = [0u8; 5];
    f.read_at(0, &mut b).unwrap();
    assert_eq!(&b, b"hello");
    let e = f.write_at(0, b"x").unwrap_err();
    assert!(matches!(e, ContentError::ReadOnly));
    assert_eq!(e.errno(), libc_ebadf());
    assert!(f.set_len(0).is_err());
    assert!(f.punch_hole(0, 1).is_err());
    // backing() gives the fd for fstat
    assert!(f.backing().metadata().unwrap().len() > 0);
    f.set_label("renamed".into());
}

fn libc_ebadf() -> i32 {
    9
}

#[test]
fn raw_block_positions() {
    // Write one block at a time and check that only the expected bytes change.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let c = cipher(Mode::Gcm);
    let f = open(&path, &c);
    f.write_at(0, &vec![0u8; 300 * 4096]).unwrap();
    for b in [3u64, 16, 280] {
        let before = raw(&path);
        f.write_at(b * 4096, &[7u8; 4096]).unwrap();
        let after = raw(&path);
        let eo = entry_offset(Mode::Gcm, b) as usize;
        let d = data_offset(Mode::Gcm, b) as usize;
        for i in 0..before.len() {
            let inside = (eo..eo + 32).contains(&i) || (d..d + 4096).contains(&i);
            if !inside {
                assert_eq!(before[i], after[i], "byte {i} changed writing block {b}");
            }
        }
    }
    let file = raw(&path);
    let _ = file.len();
    let mut ent = [0u8; 32];
    f.backing()
        .read_exact_at(&mut ent, entry_offset(Mode::Gcm, 280))
        .unwrap();
    assert_ne!(ent, [0u8; 32]);
}
