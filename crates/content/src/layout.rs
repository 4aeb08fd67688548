//! Pure offset arithmetic of a cipher file (FORMAT.md 3.3, 3.4): where each
//! block's nonce entry and data live, and plaintext size ⇄ backing length.

use crate::{ContentError, Mode};

/// Plaintext block size in bytes.
pub const BLOCK: u64 = 4096;
/// [`BLOCK`] as `usize`.
pub const BLOCK_USIZE: usize = BLOCK as usize;
/// Length of the fixed header.
pub const HEADER_LEN: u64 = 32;
/// Blocks whose entries sit in the header area (the nnode).
pub const NNODE_BLOCKS: u64 = 16;
/// Blocks per nonce page.
pub const PAGE_BLOCKS: u64 = 256;
/// Data bytes covered by one nonce page (`S`, 1 MiB).
pub const SEGMENT: u64 = PAGE_BLOCKS * BLOCK;
/// Plaintext bytes covered by the nnode (64 KiB).
pub const NNODE_BYTES: u64 = NNODE_BLOCKS * BLOCK;
/// Largest plaintext size warpfs writes (1 EiB); keeps every backing offset
/// well inside `off_t`.
pub const MAX_PLAIN_SIZE: u64 = 1 << 60;

/// Length of one nonce entry (`E`).
pub const fn entry_len(mode: Mode) -> u64 {
    mode.entry_len() as u64
}

/// Length of the header area including the nnode (`H = 32 + 16·E`).
pub const fn header_len(mode: Mode) -> u64 {
    HEADER_LEN + NNODE_BLOCKS * entry_len(mode)
}

/// Length of one nonce page (`P = 256·E`).
pub const fn page_len(mode: Mode) -> u64 {
    PAGE_BLOCKS * entry_len(mode)
}

/// Offset of the nonce page in front of segment `k` (blocks `16 + 256k ..`).
fn page_offset(mode: Mode, k: u64) -> u64 {
    (header_len(mode) + NNODE_BYTES).saturating_add(k.saturating_mul(page_len(mode) + SEGMENT))
}

/// Offset of block `b`'s nonce entry. Valid for blocks below
/// `MAX_PLAIN_SIZE / BLOCK` (saturates beyond).
pub fn entry_offset(mode: Mode, b: u64) -> u64 {
    let e = entry_len(mode);
    if b < NNODE_BLOCKS {
        HEADER_LEN + b * e
    } else {
        let (k, i) = ((b - NNODE_BLOCKS) / PAGE_BLOCKS, (b - NNODE_BLOCKS) % PAGE_BLOCKS);
        page_offset(mode, k).saturating_add(i * e)
    }
}

/// Offset of block `b`'s data. Valid for blocks below
/// `MAX_PLAIN_SIZE / BLOCK` (saturates beyond).
pub fn data_offset(mode: Mode, b: u64) -> u64 {
    if b < NNODE_BLOCKS {
        header_len(mode) + b * BLOCK
    } else {
        let (k, i) = ((b - NNODE_BLOCKS) / PAGE_BLOCKS, (b - NNODE_BLOCKS) % PAGE_BLOCKS);
        page_offset(mode, k).saturating_add(page_len(mode) + i * BLOCK)
    }
}

/// Plaintext size from the backing length `L` (FORMAT.md 3.4). `L = 0` is
/// 0; `0 < L < H` is corrupt; a length ending inside a nonce page reads as
/// the size at that page's start.
pub fn plain_size(mode: Mode, backing_len: u64) -> Result<u64, ContentError> {
    if backing_len == 0 {
        return Ok(0);
    }
    let h = header_len(mode);
    if backing_len < h {
        return Err(ContentError::corrupt(format!(
            "backing length {backing_len} is shorter than the header ({h})"
        )));
    }
    let r = backing_len - h;
    if r <= NNODE_BYTES {
        return Ok(r);
    }
    let r2 = r - NNODE_BYTES;
    let (p, seg) = (page_len(mode), page_len(mode) + SEGMENT);
    let (k, q) = (r2 / seg, r2 % seg);
    Ok(NNODE_BYTES + k * SEGMENT + q.saturating_sub(p))
}

/// The one backing length of a plaintext size (inverse of [`plain_size`]).
/// A size ending on a segment boundary has no trailing nonce page.
/// Saturates for sizes beyond [`MAX_PLAIN_SIZE`].
pub fn backing_len(mode: Mode, plain_size: u64) -> u64 {
    if plain_size == 0 {
        return 0;
    }
    let h = header_len(mode);
    if plain_size <= NNODE_BYTES {
        return h + plain_size;
    }
    let r2 = plain_size - NNODE_BYTES;
    let (k, q) = (r2 / SEGMENT, r2 % SEGMENT);
    let base = page_offset(mode, k);
    if q == 0 {
        base
    } else {
        base.saturating_add(page_len(mode) + q)
    }
}

/// Number of blocks of a file of `size` plaintext bytes.
pub const fn block_count(size: u64) -> u64 {
    size.div_ceil(BLOCK)
}

/// Length of block `b` in a file of `size` bytes (0 if past the end).
pub fn block_len(size: u64, b: u64) -> usize {
    let start = b.saturating_mul(BLOCK);
    size.saturating_sub(start).min(BLOCK) as usize
}

/// The first block after the segment holding block `b` (segments: the
/// nnode's blocks 0–15, then runs of 256 blocks each behind a nonce page).
/// Within a segment both entries and data are contiguous.
pub const fn segment_end(b: u64) -> u64 {
    if b < NNODE_BLOCKS {
        NNODE_BLOCKS
    } else {
        NNODE_BLOCKS + ((b - NNODE_BLOCKS) / PAGE_BLOCKS + 1) * PAGE_BLOCKS
    }
}

/// The first block of segment `k` (segment 0 is the nnode's blocks 0–15,
/// segment `k ≥ 1` the `k`-th run of 256 blocks).
pub const fn segment_start(k: u32) -> u64 {
    if k == 0 {
        0
    } else {
        NNODE_BLOCKS + (k as u64 - 1) * PAGE_BLOCKS
    }
}

/// The segment holding block `b` (saturating at `u32::MAX` for blocks of
/// files larger than any rekey watermark can describe, about 4 PiB).
pub fn segment_of(b: u64) -> u32 {
    if b < NNODE_BLOCKS {
        0
    } else {
        u32::try_from(1 + (b - NNODE_BLOCKS) / PAGE_BLOCKS).unwrap_or(u32::MAX)
    }
}

/// Split the block range `[first, end)` into runs that each lie inside one
/// segment (contiguous entries and contiguous data).
pub fn segment_runs(first: u64, end: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut a = first;
    std::iter::from_fn(move || {
        if a >= end {
            return None;
        }
        let b = segment_end(a).min(end);
        let run = (a, b);
        a = b;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MODES: [Mode; 3] = [Mode::Ctr, Mode::Gcm, Mode::Xts];

    #[test]
    fn constants_match_format_md() {
        assert_eq!(header_len(Mode::Ctr), 288);
        assert_eq!(header_len(Mode::Gcm), 544);
        assert_eq!(page_len(Mode::Ctr), 4096);
        assert_eq!(page_len(Mode::Gcm), 8192);
        // xts: no entries, the data follows the header contiguously.
        assert_eq!(header_len(Mode::Xts), 32);
        assert_eq!(page_len(Mode::Xts), 0);
        for b in [0, 15, 16, 17, 271, 272, 1 << 20] {
            assert_eq!(data_offset(Mode::Xts, b), 32 + 4096 * b);
        }
        assert_eq!(backing_len(Mode::Xts, 5_000_000), 32 + 5_000_000);
        assert_eq!(plain_size(Mode::Xts, 32 + 5_000_000).unwrap(), 5_000_000);
    }

    #[test]
    fn worked_offsets() {
        let m = Mode::Gcm;
        assert_eq!(entry_offset(m, 0), 32);
        assert_eq!(entry_offset(m, 15), 32 + 15 * 32);
        assert_eq!(data_offset(m, 0), 544);
        assert_eq!(data_offset(m, 15), 544 + 15 * 4096);
        // page 0 follows block 15's data
        assert_eq!(entry_offset(m, 16), 544 + 65536);
        assert_eq!(data_offset(m, 16), 544 + 65536 + 8192);
        assert_eq!(entry_offset(m, 17), 544 + 65536 + 32);
        assert_eq!(entry_offset(m, 272), 544 + 65536 + 8192 + (1 << 20));
        assert_eq!(data_offset(m, 272), 544 + 65536 + 2 * 8192 + (1 << 20));
        let c = Mode::Ctr;
        assert_eq!(data_offset(c, 16), 288 + 65536 + 4096);
        assert_eq!(data_offset(c, 271), 288 + 65536 + 4096 + 255 * 4096);
    }

    #[test]
    fn sizes_and_lengths() {
        for m in MODES {
            let h = header_len(m);
            let p = page_len(m);
            assert_eq!(backing_len(m, 0), 0);
            assert_eq!(backing_len(m, 1), h + 1);
            assert_eq!(backing_len(m, 65536), h + 65536);
            assert_eq!(backing_len(m, 65537), h + 65536 + p + 1);
            assert_eq!(backing_len(m, 65536 + SEGMENT), h + 65536 + p + SEGMENT);
            assert_eq!(backing_len(m, 65536 + SEGMENT + 1), h + 65536 + 2 * p + SEGMENT + 1);
            assert!(plain_size(m, 1).is_err());
            assert!(plain_size(m, h - 1).is_err());
            assert_eq!(plain_size(m, h).unwrap(), 0);
            // Ending inside a nonce page reads as the boundary size.
            for q in [1, p / 2, p].into_iter().filter(|_| p > 0) {
                assert_eq!(plain_size(m, h + 65536 + q).unwrap(), 65536);
                assert_eq!(plain_size(m, h + 65536 + p + SEGMENT + q).unwrap(), 65536 + SEGMENT);
            }
            assert!(plain_size(m, u64::MAX).is_ok());
        }
    }

    #[test]
    fn segments() {
        assert_eq!(segment_end(0), 16);
        assert_eq!(segment_start(0), 0);
        assert_eq!(segment_start(1), 16);
        assert_eq!(segment_start(2), 272);
        for b in [0u64, 15, 16, 271, 272, 100_000] {
            let k = segment_of(b);
            assert!(segment_start(k) <= b && b < segment_end(segment_start(k)), "block {b}");
        }
        assert_eq!(segment_end(15), 16);
        assert_eq!(segment_end(16), 272);
        assert_eq!(segment_end(271), 272);
        assert_eq!(segment_end(272), 528);
        let runs: Vec<_> = segment_runs(3, 600).collect();
        assert_eq!(runs, vec![(3, 16), (16, 272), (272, 528), (528, 600)]);
        assert_eq!(segment_runs(5, 5).count(), 0);
        assert_eq!(block_len(10_000, 2), 10_000 - 8192);
        assert_eq!(block_len(10_000, 3), 0);
        assert_eq!(block_count(4097), 2);
    }

    #[test]
    fn huge_inputs_do_not_panic() {
        for m in MODES {
            let _ = entry_offset(m, u64::MAX);
            let _ = data_offset(m, u64::MAX);
            let _ = backing_len(m, u64::MAX);
            assert!(backing_len(m, MAX_PLAIN_SIZE) < i64::MAX as u64);
            let _ = block_len(u64::MAX, u64::MAX);
        }
    }

    fn mode() -> impl Strategy<Value = Mode> {
        prop_oneof![Just(Mode::Ctr), Just(Mode::Gcm), Just(Mode::Xts)]
    }

    proptest! {
        #[test]
        fn size_round_trip(m in mode(), s in prop_oneof![0u64..5_000_000, 0u64..MAX_PLAIN_SIZE]) {
            prop_assert_eq!(plain_size(m, backing_len(m, s)).unwrap(), s);
        }

        #[test]
        fn backing_len_is_monotonic(m in mode(), s in 0u64..MAX_PLAIN_SIZE - 1) {
            prop_assert!(backing_len(m, s + 1) > backing_len(m, s));
        }

        #[test]
        fn plain_size_is_monotonic(m in mode(), l in 544u64..50_000_000) {
            prop_assert!(plain_size(m, l + 1).unwrap() >= plain_size(m, l).unwrap());
            prop_assert!(plain_size(m, l + 1).unwrap() <= plain_size(m, l).unwrap() + 1);
        }

        #[test]
        fn offsets_monotonic_and_disjoint(m in mode(), b in prop_oneof![0u64..2000, 0u64..(MAX_PLAIN_SIZE / BLOCK - 2)]) {
            let e = entry_len(m);
            let (eo, d) = (entry_offset(m, b), data_offset(m, b));
            let (eo1, d1) = (entry_offset(m, b + 1), data_offset(m, b + 1));
            prop_assert!(eo >= HEADER_LEN);
            prop_assert!(eo1 >= eo + e);
            prop_assert!(d1 >= d + BLOCK);
            // Consecutive blocks in one segment are packed.
            if segment_end(b) > b + 1 {
                prop_assert_eq!(eo1, eo + e);
                prop_assert_eq!(d1, d + BLOCK);
            } else {
                // the next entry starts right after this block's data
                prop_assert_eq!(eo1, d + BLOCK);
            }
            // An entry never overlaps any data block: it lies inside its
            // segment's entry area, which ends where the segment's data starts.
            let seg_first = if b < NNODE_BLOCKS { 0 } else { segment_end(b) - PAGE_BLOCKS };
            prop_assert!(eo + e <= data_offset(m, seg_first));
            // The file holding block b's data ends at or past it.
            prop_assert!(backing_len(m, (b + 1) * BLOCK) == d + BLOCK);
        }
    }
}
