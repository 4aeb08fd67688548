//! The rekey undo journal (FORMAT.md 10.3): the old bytes of the one
//! segment an in-place rekey is re-encrypting, made durable before the
//! segment is touched, so that after a crash at any point the segment can
//! be put back exactly as it was.

use crate::ContentError;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// First bytes of a journal record.
pub const MAGIC: [u8; 8] = *b"WRPFUNDO";
/// Record format version.
pub const VERSION: u16 = 1;
/// Most bytes a record may restore (a segment's header, entries and data
/// are about 1 MiB + 8 KiB); a larger claim is corrupt.
const MAX_RESTORE: usize = 4 << 20;
/// Most ranges in a record (header, entries, and a segment's runs of
/// written blocks: at most 128 between holes).
const MAX_RANGES: usize = 512;
/// Most bytes of the path hint.
const MAX_PATH: usize = 64 << 10;

/// One record: which file, and the bytes to put back at which offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The cipher file's ID (its header bytes 8..24).
    pub file_id: [u8; 16],
    /// The backing inode number when the record was written (a hint).
    pub ino: u64,
    /// The backing path relative to CIPHERDIR when the record was written
    /// (a hint: the file may have been renamed since).
    pub path: Vec<u8>,
    /// (offset, old bytes) to write back.
    pub ranges: Vec<(u64, Vec<u8>)>,
}

/// What a journal file holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Content {
    /// Nothing to undo (no segment was being moved).
    Empty,
    /// A record that was not completely written: the crash came before the
    /// segment was touched, so there is nothing to undo.
    Torn,
    /// A segment may be half moved: put these bytes back.
    Record(Record),
}

/// Encode a record (see [`Record::encode`]) from borrowed ranges into
/// `out` (cleared first), so a rekey reuses one buffer and copies the old
/// bytes once.
pub fn encode_into(file_id: &[u8; 16], ino: u64, path: &[u8], ranges: &[(u64, &[u8])], out: &mut Vec<u8>) {
    let body: usize = ranges.iter().map(|(_, b)| 12 + b.len()).sum();
    out.clear();
    out.reserve(8 + 4 + 16 + 8 + 4 + path.len() + 4 + body + 32);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(file_id);
    out.extend_from_slice(&ino.to_le_bytes());
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path);
    out.extend_from_slice(&(ranges.len() as u32).to_le_bytes());
    for (off, b) in ranges {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    }
    let sum = Sha256::digest(&out[..]);
    out.extend_from_slice(&sum);
}

impl Record {
    /// The bytes on disk: magic, version, reserved (2), file ID, inode,
    /// path length (u32) and path, range count (u32), per range offset
    /// (u64), length (u32) and bytes, then SHA-256 of everything before.
    /// Integers little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let ranges: Vec<(u64, &[u8])> = self.ranges.iter().map(|(o, b)| (*o, b.as_slice())).collect();
        let mut v = Vec::new();
        encode_into(&self.file_id, self.ino, &self.path, &ranges, &mut v);
        v
    }

    /// Parse a journal's bytes. A record whose checksum or length does not
    /// fit is [`Content::Torn`] (written only part way); a complete record
    /// that breaks the format (unknown version, oversized claims) is an
    /// error, never a panic.
    pub fn decode(b: &[u8]) -> Result<Content, ContentError> {
        if b.is_empty() {
            return Ok(Content::Empty);
        }
        if b.len() < 32 + 8 {
            return Ok(Content::Torn);
        }
        let (body, sum) = b.split_at(b.len() - 32);
        if Sha256::digest(body).as_slice() != sum {
            return Ok(Content::Torn);
        }
        let bad = |what: &str| ContentError::corrupt(format!("rekey undo journal: {what}"));
        let mut r = Reader { b: body };
        if r.take(8).ok_or_else(|| bad("short"))? != MAGIC {
            return Err(bad("bad magic"));
        }
        let version = u16::from_le_bytes(r.array().ok_or_else(|| bad("short"))?);
        let reserved: [u8; 2] = r.array().ok_or_else(|| bad("short"))?;
        if version != VERSION || reserved != [0, 0] {
            return Err(bad(&format!("unsupported version {version}")));
        }
        let file_id: [u8; 16] = r.array().ok_or_else(|| bad("short"))?;
        let ino = u64::from_le_bytes(r.array().ok_or_else(|| bad("short"))?);
        let plen = u32::from_le_bytes(r.array().ok_or_else(|| bad("short"))?) as usize;
        if plen > MAX_PATH {
            return Err(bad("path too long"));
        }
        let path = r.take(plen).ok_or_else(|| bad("short"))?.to_vec();
        let n = u32::from_le_bytes(r.array().ok_or_else(|| bad("short"))?) as usize;
        if n > MAX_RANGES {
            return Err(bad("too many ranges"));
        }
        let mut ranges = Vec::with_capacity(n);
        let mut total = 0usize;
        for _ in 0..n {
            let off = u64::from_le_bytes(r.array().ok_or_else(|| bad("short"))?);
            let len = u32::from_le_bytes(r.array().ok_or_else(|| bad("short"))?) as usize;
            total = total.saturating_add(len);
            if total > MAX_RESTORE || off.checked_add(len as u64).is_none() {
                return Err(bad("range too large"));
            }
            ranges.push((off, r.take(len).ok_or_else(|| bad("short"))?.to_vec()));
        }
        if !r.b.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(Content::Record(Record {
            file_id,
            ino,
            path,
            ranges,
        }))
    }

    /// Put the old bytes back into `file` and make them durable. The caller
    /// checked that `file` is the record's file (header file ID).
    pub fn apply(&self, file: &File) -> std::io::Result<()> {
        for (off, b) in &self.ranges {
            file.write_all_at(b, *off)?;
        }
        file.sync_data()
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
}

/// A journal file: one record at a time, written whole and synced, then
/// truncated to empty once the segment it protects is durable.
pub struct Journal {
    file: File,
}

impl Journal {
    /// Take over an open (read-write) journal file.
    pub fn new(file: File) -> Self {
        Self { file }
    }

    /// What the journal holds now.
    pub fn load(&self) -> Result<Content, ContentError> {
        let len = self.file.metadata()?.len();
        if len > (MAX_RESTORE + MAX_PATH + 4096) as u64 {
            return Err(ContentError::corrupt("rekey undo journal: too large"));
        }
        let mut b = vec![0u8; len as usize];
        self.file.read_exact_at(&mut b, 0)?;
        Record::decode(&b)
    }

    /// Write `rec` and make it durable.
    pub fn save(&self, rec: &Record) -> std::io::Result<()> {
        self.save_encoded(&rec.encode())
    }

    /// Write a record already encoded ([`encode_into`]) and make it durable.
    pub fn save_encoded(&self, b: &[u8]) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.write_all_at(b, 0)?;
        self.file.sync_data()
    }

    /// Forget the record (its segment is durable) and make that durable.
    pub fn clear(&self) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec() -> Record {
        Record {
            file_id: [7; 16],
            ino: 42,
            path: b"dir/file".to_vec(),
            ranges: vec![(0, vec![1; 32]), (32, vec![2; 512]), (544, vec![3; 4096])],
        }
    }

    #[test]
    fn round_trip_empty_and_torn() {
        let r = rec();
        let b = r.encode();
        assert_eq!(Record::decode(&b).unwrap(), Content::Record(r));
        assert_eq!(Record::decode(&[]).unwrap(), Content::Empty);
        // Any prefix is torn (the checksum or the length does not fit).
        for cut in [1, 10, 39, b.len() / 2, b.len() - 1] {
            assert_eq!(Record::decode(&b[..cut]).unwrap(), Content::Torn, "cut {cut}");
        }
        let mut flipped = b.clone();
        flipped[60] ^= 1;
        assert_eq!(Record::decode(&flipped).unwrap(), Content::Torn);
    }

    fn resum(mut body: Vec<u8>) -> Vec<u8> {
        let sum = Sha256::digest(&body);
        body.extend_from_slice(&sum);
        body
    }

    #[test]
    fn well_summed_nonsense_is_an_error() {
        let b = rec().encode();
        let body = &b[..b.len() - 32];
        let mut v = body.to_vec();
        v[8] = 9; // version
        assert!(Record::decode(&resum(v)).is_err());
        let mut v = body.to_vec();
        v[0] = b'X';
        assert!(Record::decode(&resum(v)).is_err());
        let mut v = body.to_vec();
        v.push(0); // trailing byte
        assert!(Record::decode(&resum(v)).is_err());
        let huge = Record {
            ranges: vec![(0, vec![0; MAX_RESTORE + 1])],
            ..rec()
        };
        assert!(Record::decode(&huge.encode()).is_err());
        let wrap = Record {
            ranges: vec![(u64::MAX, vec![0; 2])],
            ..rec()
        };
        assert!(Record::decode(&wrap.encode()).is_err());
    }

    #[test]
    fn journal_saves_clears_and_applies() {
        let j = Journal::new(tempfile::tempfile().unwrap());
        assert_eq!(j.load().unwrap(), Content::Empty);
        let r = rec();
        j.save(&r).unwrap();
        assert_eq!(j.load().unwrap(), Content::Record(r.clone()));
        let target = tempfile::tempfile().unwrap();
        target.write_all_at(&[9; 5000], 0).unwrap();
        r.apply(&target).unwrap();
        let mut b = vec![0u8; 5000];
        target.read_exact_at(&mut b, 0).unwrap();
        assert!(b[..32].iter().all(|&x| x == 1));
        assert!(b[32..544].iter().all(|&x| x == 2));
        assert!(b[544..4640].iter().all(|&x| x == 3));
        assert!(b[4640..].iter().all(|&x| x == 9));
        j.clear().unwrap();
        assert_eq!(j.load().unwrap(), Content::Empty);
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Record::decode(&b);
        }

        #[test]
        fn random_records_round_trip(
            id in any::<[u8; 16]>(),
            ino in any::<u64>(),
            path in proptest::collection::vec(any::<u8>(), 0..40),
            ranges in proptest::collection::vec((0u64..1 << 40, proptest::collection::vec(any::<u8>(), 0..100)), 0..4),
        ) {
            let r = Record { file_id: id, ino, path, ranges };
            prop_assert_eq!(Record::decode(&r.encode()).unwrap(), Content::Record(r));
        }
    }
}
