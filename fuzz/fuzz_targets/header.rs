//! Fuzz cipher-file header and nonce-entry parsing (FORMAT.md 3.1, 3.2),
//! the size arithmetic of 3.3/3.4 and the rekey undo record (10.3):
//! errors, never panics, `plain_size(backing_len(s)) == s` for every size
//! warpfs writes, and a record that parses encodes back to the same bytes
//! (also past the record's tag: the input is fuzzed again with a valid
//! length and tag); fsck's undo file (6b) is read into an error, never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warpfs_content::header::Header;
use warpfs_content::undo::{Content, Record};
use warpfs_content::{entry, layout, Mode};
use warpfs_crypto::{JournalKey, MasterKey, UndoKey};

fn key() -> &'static JournalKey {
    static K: std::sync::OnceLock<JournalKey> = std::sync::OnceLock::new();
    K.get_or_init(|| JournalKey::derive(&MasterKey::from_bytes(&[7; 32]).unwrap()))
}

fn undo_key() -> &'static UndoKey {
    static K: std::sync::OnceLock<UndoKey> = std::sync::OnceLock::new();
    K.get_or_init(|| UndoKey::derive(&MasterKey::from_bytes(&[7; 32]).unwrap()))
}

fuzz_target!(|data: &[u8]| {
    let _ = warpfs_content::zeroundo::decode(data, undo_key());
    match Record::decode(data, key()) {
        Ok(Content::Record(r)) => assert_eq!(r.encode(key()), data),
        Ok(Content::Unauthenticated(r)) => assert_eq!(r.encode_unauthenticated(), data),
        _ => {}
    }
    if data.len() >= 20 && data[..8] == *b"WRPFUNDO" {
        let mut t = data.to_vec();
        let n = (t.len() + 32) as u32;
        t[12..16].copy_from_slice(&n.to_le_bytes());
        let tag = key().tag(&t);
        t.extend_from_slice(&tag);
        if let Ok(Content::Record(r)) = Record::decode(&t, key()) {
            assert_eq!(r.encode(key()), t);
        }
    }
    if let Ok(h) = Header::parse(data) {
        assert_eq!(&h.to_bytes()[..], &data[..32]);
    }
    for mode in [Mode::Ctr, Mode::Gcm] {
        // The nnode after the header, then any further bytes, as entries.
        let e = mode.entry_len();
        for (i, chunk) in data.get(32..).unwrap_or(&[]).chunks(e).enumerate() {
            if let Ok(Some(en)) = entry::parse(mode, chunk, i as u64) {
                let mut back = vec![0u8; e];
                entry::write(mode, Some(&en), &mut back);
                assert_eq!(back, chunk);
            }
        }
        if data.len() >= 8 {
            let n = u64::from_le_bytes(data[..8].try_into().unwrap());
            let _ = layout::plain_size(mode, n);
            let s = n % (layout::MAX_PLAIN_SIZE + 1);
            let l = layout::backing_len(mode, s);
            assert_eq!(layout::plain_size(mode, l).unwrap(), s);
            let b = s / layout::BLOCK;
            assert!(layout::entry_offset(mode, b) < layout::data_offset(mode, b).max(1));
        }
    }
});
