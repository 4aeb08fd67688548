//! A view file's summary (FORMAT.md 14, 12.2): with `file-summary` a view
//! file's header has version 2 and the slots of its nnode entries 0–7 hold
//! its record (seq 1, its size, the tag over the sum of every block's
//! contribution), as `warpfs upgrade` leaves a forward file, and no other
//! slot holds anything. The sum needs every block's synthetic nonce, so
//! all of the plaintext: it is made once per open file, before its first
//! segment is served, and each segment's own sum is kept, so that a
//! segment encrypted later whose sum differs (the plaintext changed since)
//! fails instead of serving blocks the record does not vouch for.

use super::keys::Keys;
use warpfs_content::layout::BLOCK_USIZE;
use warpfs_content::summary::{sum_of, Record};
use warpfs_content::upgrade::FIRST_SEQ;
use warpfs_crypto::SummaryKey;

/// The sums of one open view file.
pub(super) struct Sums {
    /// Each segment's sum, in order.
    segs: Vec<[u8; 16]>,
    /// The record's 32 bytes.
    pub(super) record: [u8; 32],
}

fn xor(a: &mut [u8; 16], b: &[u8; 16]) {
    a.iter_mut().zip(b).for_each(|(x, y)| *x ^= y);
}

/// The sum of the blocks from `first` on whose plaintext is `plain` (4096
/// bytes each, the last one maybe shorter): each block's contribution
/// under its synthetic nonce.
fn sum_plain(keys: &Keys, key: &SummaryKey, id: &[u8; 16], first: u64, plain: &[u8]) -> [u8; 16] {
    let mut s = [0u8; 16];
    for (i, p) in plain.chunks(BLOCK_USIZE).enumerate() {
        let b = first + i as u64;
        xor(&mut s, &key.contribution(&keys.rev.block_nonce(id, b, p), b));
    }
    s
}

impl Sums {
    /// Sum file `id` of `size` bytes, segment by segment, `plain(k, buf)`
    /// filling `buf` with the plaintext of segment `k` (of `segments`).
    pub(super) fn make<E>(
        keys: &Keys,
        key: &SummaryKey,
        id: &[u8; 16],
        (size, segments): (u64, u64),
        mut plain: impl FnMut(u64, &mut Vec<u8>) -> Result<(), E>,
    ) -> Result<Self, E> {
        let mut segs = Vec::with_capacity(segments as usize);
        let mut total = [0u8; 16];
        let mut buf = Vec::new();
        for k in 0..segments {
            plain(k, &mut buf)?;
            let first = super::content::seg_blocks(k).0;
            let c = sum_plain(keys, key, id, first, &buf);
            xor(&mut total, &c);
            segs.push(c);
        }
        let record = Record::sealed(key, id, FIRST_SEQ, size, &total).to_bytes();
        Ok(Self { segs, record })
    }

    /// Whether the entries of segment `k` (first block `first`, slots
    /// still zero) give the sum this file was summed with.
    pub(super) fn agrees(&self, key: &SummaryKey, k: u64, first: u64, entries: &[u8]) -> bool {
        self.segs.get(k as usize) == Some(&sum_of(key, entries, first))
    }
}
