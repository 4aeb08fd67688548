//! The rekey undo journal (FORMAT.md 10.3): the old bytes of the one
//! segment an in-place rekey is re-encrypting, made durable before the
//! segment is touched, so that after a crash at any point the segment can
//! be put back exactly as it was. A record is authenticated with an
//! HMAC-SHA256 under the volume's journal key and names its file by a
//! relative path that cannot leave CIPHERDIR; anything else is refused.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::os::unix::fs::FileExt;
use warpfs_crypto::{JournalKey, JOURNAL_TAG_LEN};

/// First bytes of a journal record.
pub const MAGIC: [u8; 8] = *b"WRPFUNDO";
/// Record format version written now: authenticated (HMAC-SHA256).
pub const VERSION: u16 = 2;
/// The record version of earlier builds: a SHA-256 checksum, no MAC.
pub const VERSION_UNAUTHENTICATED: u16 = 1;
/// Most bytes a record may restore (a segment's header, entries and data
/// are about 1 MiB + 8 KiB); a larger claim is corrupt.
const MAX_RESTORE: usize = 4 << 20;
/// Most ranges in a record (header, entries, and a segment's runs of
/// written blocks: at most 128 between holes).
const MAX_RANGES: usize = 512;
/// Most bytes of the path hint.
const MAX_PATH: usize = 64 << 10;
/// Bytes before the file ID in a version 2 record: magic, version,
/// reserved, record length, key generation.
const PREFIX: usize = 8 + 2 + 2 + 4 + 4;
/// Most bytes a journal file may hold.
const MAX_FILE: usize = PREFIX + 16 + 8 + 4 + MAX_PATH + 4 + MAX_RANGES * 12 + MAX_RESTORE + JOURNAL_TAG_LEN;

/// Why a journal is refused (never applied): the reason, for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// A journal that could not be read, or that is refused.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading or writing the journal failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The journal is refused: never applied.
    #[error("refused: {0}")]
    Refused(#[from] Refused),
}

/// One record: which file, and the bytes to put back at which offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The key generation the rekey was moving the file to (0 in a
    /// version 1 record, which did not say).
    pub generation: u32,
    /// The cipher file's ID (its header bytes 8..24).
    pub file_id: [u8; 16],
    /// The backing inode number when the record was written (a hint).
    pub ino: u64,
    /// The backing path relative to CIPHERDIR when the record was written
    /// (a hint: the file may have been renamed since). Empty, or names
    /// separated by `/`, none empty, `.` or `..` ([`check_path`]).
    pub path: Vec<u8>,
    /// (offset, old bytes) to write back.
    pub ranges: Vec<(u64, Vec<u8>)>,
}

/// What a journal file holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Content {
    /// Nothing to undo (no segment was being moved).
    Empty,
    /// A record shorter than it says it is: it was not completely written,
    /// so the crash came before the segment was touched and there is
    /// nothing to undo. Never applied.
    Torn,
    /// An authenticated record: a segment may be half moved, put these
    /// bytes back.
    Record(Record),
    /// A complete version 1 record (earlier builds): it has no MAC, so
    /// anyone who can write to CIPHERDIR could have made it. Applied only
    /// when the user says so.
    Unauthenticated(Record),
}

/// Whether `p` may name a file of the record: empty (no hint), or a
/// relative path of names separated by single `/`, none of them `.` or
/// `..`, without NUL bytes.
pub fn check_path(p: &[u8]) -> Result<(), Refused> {
    if p.is_empty() {
        return Ok(());
    }
    let shown = String::from_utf8_lossy(p);
    if p[0] == b'/' {
        return Err(Refused(format!("its path {shown:?} is absolute")));
    }
    if p.contains(&0) {
        return Err(Refused(format!("its path {shown:?} contains a NUL byte")));
    }
    for c in p.split(|&b| b == b'/') {
        match c {
            b"" => return Err(Refused(format!("its path {shown:?} has an empty component"))),
            b"." | b".." => {
                return Err(Refused(format!(
                    "its path {shown:?} contains {:?}",
                    String::from_utf8_lossy(c)
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Encode a version 2 record (see [`Record::encode`]) from borrowed ranges
/// into `out` (cleared first), so a rekey reuses one buffer and copies the
/// old bytes once.
#[allow(clippy::too_many_arguments)]
pub fn encode_into(
    key: &JournalKey,
    generation: u32,
    file_id: &[u8; 16],
    ino: u64,
    path: &[u8],
    ranges: &[(u64, &[u8])],
    out: &mut Vec<u8>,
) {
    let body: usize = ranges.iter().map(|(_, b)| 12 + b.len()).sum();
    let total = PREFIX + 16 + 8 + 4 + path.len() + 4 + body + JOURNAL_TAG_LEN;
    out.clear();
    out.reserve(total);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    body_into(file_id, ino, path, ranges, out);
    let tag = key.tag(out);
    out.extend_from_slice(&tag);
    debug_assert_eq!(out.len(), total);
}

/// File ID, inode, path and ranges, as both versions lay them out.
fn body_into(file_id: &[u8; 16], ino: u64, path: &[u8], ranges: &[(u64, &[u8])], out: &mut Vec<u8>) {
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
}

impl Record {
    fn borrowed(&self) -> Vec<(u64, &[u8])> {
        self.ranges.iter().map(|(o, b)| (*o, b.as_slice())).collect()
    }

    /// The bytes on disk (version 2): magic, version, reserved (2), the
    /// record's length in bytes (u32, tag included), key generation (u32),
    /// file ID, inode, path length (u32) and path, range count (u32), per
    /// range offset (u64), length (u32) and bytes, then HMAC-SHA256 of
    /// everything before under `key`. Integers little-endian.
    pub fn encode(&self, key: &JournalKey) -> Vec<u8> {
        let mut v = Vec::new();
        encode_into(
            key,
            self.generation,
            &self.file_id,
            self.ino,
            &self.path,
            &self.borrowed(),
            &mut v,
        );
        v
    }

    /// The version 1 layout earlier builds wrote (magic, version 1,
    /// reserved, then as version 2 from the file ID on, then SHA-256 of
    /// everything before): to test how such a journal is handled.
    pub fn encode_unauthenticated(&self) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&MAGIC);
        v.extend_from_slice(&VERSION_UNAUTHENTICATED.to_le_bytes());
        v.extend_from_slice(&[0, 0]);
        body_into(&self.file_id, self.ino, &self.path, &self.borrowed(), &mut v);
        let sum = Sha256::digest(&v);
        v.extend_from_slice(&sum);
        v
    }

    /// Parse a journal's bytes, checking a version 2 record's tag under
    /// `key`. A record shorter than it says is [`Content::Torn`]; a record
    /// whose tag does not verify, or that breaks the format (unknown
    /// version, oversized claims, a path that could leave CIPHERDIR), is
    /// refused; never a panic.
    pub fn decode(b: &[u8], key: &JournalKey) -> Result<Content, Refused> {
        if b.is_empty() {
            return Ok(Content::Empty);
        }
        if b.len() < 12 {
            return Ok(Content::Torn);
        }
        // Uncommitted: the magic is written last, once the rest is durable
        // ([`Journal::save_encoded`]), so the segment was never touched.
        if b[..8] == [0; 8] {
            return Ok(Content::Torn);
        }
        if b[..8] != MAGIC {
            return Err(Refused("it is not an undo journal (bad magic)".into()));
        }
        let version = u16::from_le_bytes([b[8], b[9]]);
        if b[10..12] != [0, 0] {
            return Err(Refused("reserved bytes are not zero".into()));
        }
        match version {
            VERSION => decode_v2(b, key),
            VERSION_UNAUTHENTICATED => decode_v1(b),
            v => Err(Refused(format!("unsupported record version {v}"))),
        }
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

fn decode_v2(b: &[u8], key: &JournalKey) -> Result<Content, Refused> {
    if b.len() < PREFIX {
        return Ok(Content::Torn);
    }
    let total = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as usize;
    if !(PREFIX + 16 + 8 + 4 + 4 + JOURNAL_TAG_LEN..=MAX_FILE).contains(&total) {
        return Err(Refused(format!("its record length {total} is impossible")));
    }
    if b.len() < total {
        return Ok(Content::Torn);
    }
    if b.len() > total {
        return Err(Refused("bytes follow its record".into()));
    }
    let (signed, tag) = b.split_at(total - JOURNAL_TAG_LEN);
    if !key.verify(signed, tag) {
        return Err(Refused(
            "its MAC does not verify: it was not written with this volume's key (forged, or damaged)".into(),
        ));
    }
    let generation = u32::from_le_bytes([b[16], b[17], b[18], b[19]]);
    let rec = parse_body(&signed[PREFIX..], generation)?;
    Ok(Content::Record(rec))
}

fn decode_v1(b: &[u8]) -> Result<Content, Refused> {
    if b.len() < 12 + 32 {
        return Ok(Content::Torn);
    }
    let (body, sum) = b.split_at(b.len() - 32);
    if Sha256::digest(body).as_slice() != sum {
        return Ok(Content::Torn);
    }
    Ok(Content::Unauthenticated(parse_body(&body[12..], 0)?))
}

/// File ID, inode, path and ranges, and nothing after them.
fn parse_body(body: &[u8], generation: u32) -> Result<Record, Refused> {
    let bad = |what: &str| Refused(format!("corrupt record: {what}"));
    let short = || bad("short");
    let mut r = Reader { b: body };
    let file_id: [u8; 16] = r.array().ok_or_else(short)?;
    let ino = u64::from_le_bytes(r.array().ok_or_else(short)?);
    let plen = u32::from_le_bytes(r.array().ok_or_else(short)?) as usize;
    if plen > MAX_PATH {
        return Err(bad("path too long"));
    }
    let path = r.take(plen).ok_or_else(short)?.to_vec();
    check_path(&path)?;
    let n = u32::from_le_bytes(r.array().ok_or_else(short)?) as usize;
    if n > MAX_RANGES {
        return Err(bad("too many ranges"));
    }
    let mut ranges = Vec::with_capacity(n);
    let mut total = 0usize;
    for _ in 0..n {
        let off = u64::from_le_bytes(r.array().ok_or_else(short)?);
        let len = u32::from_le_bytes(r.array().ok_or_else(short)?) as usize;
        total = total.saturating_add(len);
        if total > MAX_RESTORE || off.checked_add(len as u64).is_none_or(|e| e > i64::MAX as u64) {
            return Err(bad("range too large"));
        }
        ranges.push((off, r.take(len).ok_or_else(short)?.to_vec()));
    }
    if !r.b.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(Record {
        generation,
        file_id,
        ino,
        path,
        ranges,
    })
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
    /// Take over an open journal file (read-write to save and clear).
    pub fn new(file: File) -> Self {
        Self { file }
    }

    /// What the journal holds now, its tag checked under `key`.
    pub fn load(&self, key: &JournalKey) -> Result<Content, JournalError> {
        let len = self.file.metadata()?.len();
        if len > MAX_FILE as u64 {
            return Err(Refused(format!("it is too large ({len} bytes)")).into());
        }
        let mut b = vec![0u8; len as usize];
        self.file.read_exact_at(&mut b, 0)?;
        Ok(Record::decode(&b, key)?)
    }

    /// Write `rec` and make it durable.
    pub fn save(&self, rec: &Record, key: &JournalKey) -> std::io::Result<()> {
        self.save_encoded(&rec.encode(key))
    }

    /// Write a record already encoded ([`encode_into`]) and make it
    /// durable: all but the magic, synced, then the magic, synced. The
    /// pages of one write reach the disk in any order after a power loss,
    /// so a record written at once could come back at full length with
    /// pages of zeros, which a reader must refuse as damaged; this way a
    /// record without its magic is uncommitted (its segment untouched) and
    /// one with it is whole.
    pub fn save_encoded(&self, b: &[u8]) -> std::io::Result<()> {
        self.file.set_len(0)?;
        let m = MAGIC.len().min(b.len());
        self.file.write_all_at(&b[m..], m as u64)?;
        self.file.sync_data()?;
        self.file.write_all_at(&b[..m], 0)?;
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
    use warpfs_crypto::MasterKey;

    fn key(b: u8) -> JournalKey {
        JournalKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
    }

    fn rec() -> Record {
        Record {
            generation: 3,
            file_id: [7; 16],
            ino: 42,
            path: b"dir/file".to_vec(),
            ranges: vec![(0, vec![1; 32]), (32, vec![2; 512]), (544, vec![3; 4096])],
        }
    }

    fn refused(b: &[u8], k: &JournalKey, why: &str) {
        match Record::decode(b, k) {
            Err(Refused(m)) => assert!(m.contains(why), "{m:?} does not say {why:?}"),
            other => panic!("accepted ({other:?}), want refused: {why}"),
        }
    }

    #[test]
    fn round_trip_empty_and_torn() {
        let k = key(1);
        let r = rec();
        let b = r.encode(&k);
        assert_eq!(Record::decode(&b, &k).unwrap(), Content::Record(r));
        assert_eq!(Record::decode(&[], &k).unwrap(), Content::Empty);
        // Any prefix is torn (shorter than the length it says it has).
        for cut in [1, 10, 12, 19, 20, 39, b.len() / 2, b.len() - 1] {
            assert_eq!(Record::decode(&b[..cut], &k).unwrap(), Content::Torn, "cut {cut}");
        }
    }

    #[test]
    fn a_record_without_the_volume_key_is_refused() {
        let r = rec();
        let b = r.encode(&key(1));
        refused(&b, &key(2), "MAC does not verify");
        for at in [9, 16, 20, 40, 60, b.len() - 1] {
            let mut flipped = b.clone();
            flipped[at] ^= 1;
            let m = Record::decode(&flipped, &key(1));
            assert!(m.is_err(), "byte {at} flipped: {m:?}");
        }
        // A forger who recomputes a SHA-256 (what version 1 checked) over a
        // version 2 record gets nowhere either.
        let mut forged = b[..b.len() - 32].to_vec();
        let sum = Sha256::digest(&forged);
        forged.extend_from_slice(&sum);
        refused(&forged, &key(1), "MAC does not verify");
        // Trailing bytes after a whole record, and a wrong length.
        let mut long = b.clone();
        long.push(0);
        refused(&long, &key(1), "bytes follow");
        let mut tiny = b.clone();
        tiny[12..16].copy_from_slice(&8u32.to_le_bytes());
        refused(&tiny, &key(1), "record length");
    }

    #[test]
    fn paths_that_could_leave_cipherdir_are_refused_even_when_authenticated() {
        let k = key(1);
        for (p, why) in [
            (&b"/etc/passwd"[..], "absolute"),
            (b"../outside", "\"..\""),
            (b"a/../../outside", "\"..\""),
            (b"a/..", "\"..\""),
            (b"./a", "\".\""),
            (b"a//b", "empty component"),
            (b"a/", "empty component"),
            (b"a\0b", "NUL"),
        ] {
            let r = Record {
                path: p.to_vec(),
                ..rec()
            };
            refused(&r.encode(&k), &k, why);
            refused(&r.encode_unauthenticated(), &k, why);
        }
        for p in [&b""[..], b"f", b"a/b/c", b"warpfs.long.x", b"..a/b..", b"a.b/.c"] {
            check_path(p).unwrap();
        }
    }

    #[test]
    fn a_version_1_record_is_unauthenticated() {
        let k = key(1);
        let r = Record { generation: 0, ..rec() };
        let b = r.encode_unauthenticated();
        assert_eq!(&b[8..10], &1u16.to_le_bytes());
        // Whatever the key: it has no MAC.
        assert_eq!(Record::decode(&b, &k).unwrap(), Content::Unauthenticated(r.clone()));
        assert_eq!(Record::decode(&b, &key(9)).unwrap(), Content::Unauthenticated(r));
        // Cut or changed, its checksum fails: torn, as earlier builds read it.
        assert_eq!(Record::decode(&b[..b.len() - 1], &k).unwrap(), Content::Torn);
        let mut flipped = b.clone();
        flipped[60] ^= 1;
        assert_eq!(Record::decode(&flipped, &k).unwrap(), Content::Torn);
    }

    fn resum(mut body: Vec<u8>) -> Vec<u8> {
        let sum = Sha256::digest(&body);
        body.extend_from_slice(&sum);
        body
    }

    fn retag(mut b: Vec<u8>, k: &JournalKey) -> Vec<u8> {
        b.truncate(b.len() - 32);
        let n = b.len() + 32;
        b[12..16].copy_from_slice(&(n as u32).to_le_bytes());
        let t = k.tag(&b);
        b.extend_from_slice(&t);
        b
    }

    #[test]
    fn well_tagged_nonsense_is_refused() {
        let k = key(1);
        let b = rec().encode(&k);
        let mut v = b.clone();
        v[8] = 9; // version
        refused(&retag(v, &k), &k, "version 9");
        let mut v = b.clone();
        v[0] = b'X';
        refused(&retag(v, &k), &k, "bad magic");
        let mut v = b.clone();
        v[10] = 1;
        refused(&retag(v, &k), &k, "reserved");
        let mut v = b[..b.len() - 32].to_vec();
        v.extend_from_slice(&[0; 33]); // a trailing byte inside the record
        refused(&retag(v, &k), &k, "trailing");
        let huge = Record {
            ranges: vec![(0, vec![0; MAX_RESTORE + 1])],
            ..rec()
        };
        refused(&huge.encode(&k), &k, "range too large");
        let wrap = Record {
            ranges: vec![(u64::MAX, vec![0; 2])],
            ..rec()
        };
        refused(&wrap.encode(&k), &k, "range too large");
        // The same checks for version 1.
        let b1 = rec().encode_unauthenticated();
        let mut v = b1[..b1.len() - 32].to_vec();
        v.push(0);
        refused(&resum(v), &k, "trailing");
    }

    #[test]
    fn journal_saves_clears_and_applies() {
        let k = key(4);
        let j = Journal::new(tempfile::tempfile().unwrap());
        assert_eq!(j.load(&k).unwrap(), Content::Empty);
        let r = rec();
        j.save(&r, &k).unwrap();
        assert_eq!(j.load(&k).unwrap(), Content::Record(r.clone()));
        assert!(matches!(j.load(&key(5)), Err(JournalError::Refused(_))));
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
        assert_eq!(j.load(&k).unwrap(), Content::Empty);
    }

    #[test]
    fn a_record_without_its_magic_is_uncommitted() {
        // What a power loss may leave of save_encoded: the body (or only
        // its length, the pages in between zeros) without the magic.
        let k = key(4);
        let b = rec().encode(&k);
        let mut body = b.clone();
        body[..8].fill(0);
        assert_eq!(Record::decode(&body, &k).unwrap(), Content::Torn);
        assert_eq!(Record::decode(&vec![0; b.len()], &k).unwrap(), Content::Torn);
        // With its magic the record is whole; a zero page in it is damage.
        let mut holed = b.clone();
        holed[40..80].fill(0);
        assert!(Record::decode(&holed, &k).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Record::decode(&b, &key(1));
            let mut v = MAGIC.to_vec();
            v.extend_from_slice(&b);
            let _ = Record::decode(&v, &key(1));
        }

        #[test]
        fn random_records_round_trip(
            generation in any::<u32>(),
            id in any::<[u8; 16]>(),
            ino in any::<u64>(),
            path in proptest::collection::vec(b'a'..=b'z', 0..40),
            ranges in proptest::collection::vec((0u64..1 << 40, proptest::collection::vec(any::<u8>(), 0..100)), 0..4),
        ) {
            let r = Record { generation, file_id: id, ino, path, ranges };
            prop_assert_eq!(Record::decode(&r.encode(&key(2)), &key(2)).unwrap(), Content::Record(r));
        }
    }
}
