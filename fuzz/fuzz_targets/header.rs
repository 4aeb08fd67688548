//! Fuzz cipher-file header and nonce-entry parsing (FORMAT.md 3.1, 3.2),
//! the size arithmetic of 3.3/3.4 and the rekey undo record (10.3):
//! errors, never panics, `plain_size(backing_len(s)) == s` for every size
//! warpfs writes, and a record that parses encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warpfs_content::header::Header;
use warpfs_content::undo::{Content, Record};
use warpfs_content::{entry, layout, Mode};

fuzz_target!(|data: &[u8]| {
    if let Ok(Content::Record(r)) = Record::decode(data) {
        assert_eq!(r.encode(), data);
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
