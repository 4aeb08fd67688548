//! Unit tests of `CipherFile` (the `file` module).
use super::*;
use crate::layout::{entry_offset, MAX_PLAIN_SIZE};
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

fn cf(mode: Mode) -> CipherFile {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let tagger = GcmTagger::new(&key);
    let c = if mode == Mode::Xts {
        let x = warpfs_crypto::XtsKey::new(warpfs_crypto::XtsCipher::Aes, &[2u8; 32]).unwrap();
        Arc::new(Cipher::new_xts(x, Arc::new(Direct::new(key)), tagger))
    } else {
        Arc::new(Cipher::new(mode, Arc::new(Direct::new(key)), tagger))
    };
    CipherFile::open(tempfile::tempfile().unwrap(), c, "unit".into()).unwrap()
}

fn raw(f: &CipherFile) -> Vec<u8> {
    let mut v = vec![0u8; f.backing().metadata().unwrap().len() as usize];
    sysio::read_exact_at(&f.file, &mut v, 0).unwrap();
    v
}

#[test]
fn xts_layout_holes_and_short_tails() {
    let f = cf(Mode::Xts);
    f.write_at(3 * 4096 + 5, b"hello").unwrap();
    // header 32 + data, no entries; blocks 0-2 are holes (zeros on disk).
    assert_eq!(f.backing().metadata().unwrap().len(), 32 + 3 * 4096 + 10);
    let r = raw(&f);
    assert_eq!(&r[..4], b"WRPF");
    assert_eq!(r[6], 3);
    assert!(r[32..32 + 3 * 4096].iter().all(|&x| x == 0));
    assert!(!r.windows(5).any(|w| w == b"hello"));
    let mut b = vec![9u8; 3 * 4096 + 10];
    f.read_at(0, &mut b).unwrap();
    assert!(b[..3 * 4096 + 5].iter().all(|&x| x == 0));
    assert_eq!(&b[3 * 4096 + 5..], b"hello");
    // Growing to a partial block writes it (encrypted zeros), not a hole.
    f.set_len(5 * 4096 + 3).unwrap();
    let r = raw(&f);
    assert!(r[32 + 5 * 4096..].iter().any(|&x| x != 0));
    let mut b = vec![9u8; 3];
    f.read_at(5 * 4096, &mut b).unwrap();
    assert_eq!(b, [0, 0, 0]);
    // Shrinking into a hole block leaves a readable partial block.
    f.set_len(7).unwrap();
    let mut b = vec![9u8; 7];
    assert_eq!(f.read_at(0, &mut b).unwrap(), 7);
    assert_eq!(b, [0u8; 7]);
    // Punching a whole partial last block rewrites it instead.
    f.write_at(0, b"abcdefgh").unwrap();
    f.punch_hole(0, 100).unwrap();
    let mut b = vec![9u8; 8];
    f.read_at(0, &mut b).unwrap();
    assert_eq!(b, [0u8; 8]);
    // Punching a full block makes it a zero (sparse) block on disk.
    f.write_at(0, &vec![0x77u8; 2 * 4096]).unwrap();
    f.punch_hole(0, 4096).unwrap();
    assert!(raw(&f)[32..32 + 4096].iter().all(|&x| x == 0));
    let mut b = vec![9u8; 2 * 4096];
    f.read_at(0, &mut b).unwrap();
    assert!(b[..4096].iter().all(|&x| x == 0) && b[4096..].iter().all(|&x| x == 0x77));
}

fn entry_at(f: &CipherFile, b: u64) -> Vec<u8> {
    let mut e = vec![0u8; f.mode().entry_len()];
    sysio::read_exact_at(&f.file, &mut e, entry_offset(f.mode(), b)).unwrap();
    e
}

#[test]
fn page_existence() {
    assert!(page_of_exists(0));
    assert!(page_of_exists(15));
    assert!(!page_of_exists(16));
    assert!(page_of_exists(17));
    assert!(!page_of_exists(272));
}

#[test]
fn empty_file_has_no_header_until_written() {
    let f = cf(Mode::Gcm);
    f.write_at(0, &[]).unwrap();
    f.punch_hole(0, 10).unwrap();
    assert_eq!(f.backing().metadata().unwrap().len(), 0);
    f.write_at(3, b"x").unwrap();
    assert_eq!(f.backing().metadata().unwrap().len(), 544 + 4);
    f.set_len(0).unwrap();
    assert_eq!(f.backing().metadata().unwrap().len(), 0);
    f.set_len(10).unwrap();
    let mut b = [9u8; 16];
    assert_eq!(f.read_at(0, &mut b).unwrap(), 10);
    assert_eq!(b[..10], [0u8; 10]);
}

#[test]
fn shrinking_clears_stale_entries_of_the_kept_page() {
    for mode in [Mode::Ctr, Mode::Gcm] {
        let f = cf(mode);
        f.write_at(0, &vec![7u8; 40 * 4096]).unwrap();
        assert!(entry_at(&f, 30).iter().any(|&x| x != 0));
        f.set_len(20 * 4096 + 5).unwrap();
        for b in 21..40 {
            assert!(entry_at(&f, b).iter().all(|&x| x == 0), "block {b}");
        }
        assert!(entry_at(&f, 20).iter().any(|&x| x != 0));
        f.set_len(40 * 4096).unwrap();
        let mut buf = vec![1u8; 20 * 4096];
        f.read_at(20 * 4096, &mut buf).unwrap();
        assert!(buf[..5].iter().all(|&x| x == 7));
        assert!(buf[5..].iter().all(|&x| x == 0));
    }
}

#[test]
fn extending_pads_the_old_last_block_to_full_length() {
    let f = cf(Mode::Gcm);
    f.write_at(0, &[5u8; 100]).unwrap();
    f.write_at(3 * 4096, b"z").unwrap();
    assert_eq!(f.size(), 3 * 4096 + 1);
    let mut b = vec![0u8; 4096];
    f.read_at(0, &mut b).unwrap();
    assert!(b[..100].iter().all(|&x| x == 5) && b[100..].iter().all(|&x| x == 0));
    // blocks 1 and 2 are holes: zero entries
    assert!(entry_at(&f, 1).iter().all(|&x| x == 0));
    assert!(entry_at(&f, 2).iter().all(|&x| x == 0));
}

#[test]
fn huge_offsets_are_efbig_not_panics() {
    let f = cf(Mode::Ctr);
    assert_eq!(f.write_at(u64::MAX - 1, b"ab").unwrap_err().errno(), libc::EFBIG);
    assert_eq!(f.write_at(MAX_PLAIN_SIZE, b"a").unwrap_err().errno(), libc::EFBIG);
    assert_eq!(f.set_len(u64::MAX).unwrap_err().errno(), libc::EFBIG);
    let mut b = [0u8; 4];
    assert_eq!(f.read_at(u64::MAX - 1, &mut b).unwrap(), 0);
    f.punch_hole(u64::MAX - 1, u64::MAX).unwrap();
}

/// A keystream whose reader records the order in which blocks are opened.
struct Recording {
    inner: Direct,
    opened: Arc<std::sync::Mutex<Vec<u64>>>,
}

struct RecordingReader {
    inner: Arc<Recording>,
}

impl warpfs_keystream::Keystream for Recording {
    fn seal(&self, buf: &mut [u8]) -> (warpfs_crypto::Nonce, warpfs_crypto::TagMask) {
        self.inner.seal(buf)
    }
    fn open(&self, nonce: &warpfs_crypto::Nonce, buf: &mut [u8]) -> warpfs_crypto::TagMask {
        self.inner.open(nonce, buf)
    }
    fn tag_mask(&self, nonce: &warpfs_crypto::Nonce) -> warpfs_crypto::TagMask {
        self.inner.tag_mask(nonce)
    }
    fn reader(self: Arc<Self>) -> Box<dyn warpfs_keystream::BlockReader> {
        Box::new(RecordingReader { inner: self })
    }
}

impl warpfs_keystream::BlockReader for RecordingReader {
    fn open(&self, block: u64, nonce: &warpfs_crypto::Nonce, buf: &mut [u8]) -> warpfs_crypto::TagMask {
        self.inner.opened.lock().unwrap().push(block);
        warpfs_keystream::Keystream::open(&*self.inner, nonce, buf)
    }
}

#[test]
fn a_run_is_opened_last_block_first() {
    // Workers make prefetched masks nearest first; the reader starts at
    // the far end so that it does not race them for the same mask.
    for mode in [Mode::Gcm, Mode::Ctr] {
        let key = ContentKey::new(&[1u8; 32]).unwrap();
        let opened = Arc::new(std::sync::Mutex::new(Vec::new()));
        let ks = Arc::new(Recording {
            inner: Direct::new(key.clone()),
            opened: opened.clone(),
        });
        let c = Arc::new(Cipher::new(mode, ks, GcmTagger::new(&key)));
        let f = CipherFile::open(tempfile::tempfile().unwrap(), c, "unit".into()).unwrap();
        let data: Vec<u8> = (0..6 * 4096 + 100).map(|i| (i % 253) as u8).collect();
        f.write_at(0, &data).unwrap();
        opened.lock().unwrap().clear();
        // Partial first and last blocks, four whole ones between.
        let mut b = vec![0u8; 5 * 4096];
        f.read_at(2000, &mut b).unwrap();
        assert_eq!(b, data[2000..2000 + 5 * 4096]);
        assert_eq!(*opened.lock().unwrap(), vec![5, 4, 3, 2, 1, 0], "{mode:?}");
    }
}
