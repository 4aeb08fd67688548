//! The rekey undo journal (FORMAT.md 10.3): the old bytes of the one
//! segment an in-place rekey is re-encrypting, made durable before the
//! segment is touched, so that after a crash at any point the segment can
//! be put back exactly as it was. A record is authenticated with an
//! HMAC-SHA256 under the volume's journal key, names the rekey it belongs
//! to (its random ID) and its place in its file's move (a sequence
//! number), and names its file by a relative path that cannot leave
//! CIPHERDIR; anything else is refused.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::os::unix::fs::FileExt;
use warpfs_crypto::{JournalKey, JOURNAL_TAG_LEN};

/// First bytes of a journal record.
pub const MAGIC: [u8; 8] = *b"WRPFUNDO";
/// Record format version written now: authenticated (HMAC-SHA256), with
/// the rekey's ID and the record's sequence number.
pub const VERSION: u16 = 3;
/// The authenticated record of a rekey without an ID (one an earlier
/// warpfs started): written while such a rekey is finished, read always.
pub const VERSION_NO_ID: u16 = 2;
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
/// Bytes a version 3 record adds after them: rekey ID, sequence number.
const REKEY: usize = 16 + 8;
/// Most bytes a journal file may hold.
const MAX_FILE: usize = PREFIX + REKEY + 16 + 8 + 4 + MAX_PATH + 4 + MAX_RANGES * 12 + MAX_RESTORE + JOURNAL_TAG_LEN;

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

/// Which rekey a record belongs to, and its place in it (record version 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rekey {
    /// The rekey's random ID (the config's `rekey_id`, FORMAT.md 10.1).
    pub id: [u8; 16],
    /// The record's sequence number in its file's move: the rekey
    /// watermark the file's header had before the segment moved (its
    /// segments move in order, 0, 1, 2, …).
    pub seq: u64,
}

/// One record: which file, and the bytes to put back at which offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The key generation the rekey was moving the file to (0 in a
    /// version 1 record, which did not say).
    pub generation: u32,
    /// The rekey and the record's place in it; `None` in a record of
    /// version 1 or 2.
    pub rekey: Option<Rekey>,
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

/// Encode a record (see [`Record::encode`]) from borrowed ranges into
/// `out` (cleared first), so a rekey reuses one buffer and copies the old
/// bytes once: version 3 with `rekey`, else version 2.
#[allow(clippy::too_many_arguments)]
pub fn encode_into(
    key: &JournalKey,
    generation: u32,
    rekey: Option<&Rekey>,
    file_id: &[u8; 16],
    ino: u64,
    path: &[u8],
    ranges: &[(u64, &[u8])],
    out: &mut Vec<u8>,
) {
    let body: usize = ranges.iter().map(|(_, b)| 12 + b.len()).sum();
    let extra = if rekey.is_some() { REKEY } else { 0 };
    let total = PREFIX + extra + 16 + 8 + 4 + path.len() + 4 + body + JOURNAL_TAG_LEN;
    out.clear();
    out.reserve(total);
    out.extend_from_slice(&MAGIC);
    let version = if rekey.is_some() { VERSION } else { VERSION_NO_ID };
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&(total as u32).to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    if let Some(r) = rekey {
        out.extend_from_slice(&r.id);
        out.extend_from_slice(&r.seq.to_le_bytes());
    }
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

    /// The bytes on disk (version 3; version 2 without [`Record::rekey`]):
    /// magic, version, reserved (2), the record's length in bytes (u32, tag
    /// included), key generation (u32), (version 3:) rekey ID (16) and
    /// sequence number (u64), file ID, inode, path length (u32) and path,
    /// range count (u32), per range offset (u64), length (u32) and bytes,
    /// then HMAC-SHA256 of everything before under `key`. Integers
    /// little-endian.
    pub fn encode(&self, key: &JournalKey) -> Vec<u8> {
        let mut v = Vec::new();
        encode_into(
            key,
            self.generation,
            self.rekey.as_ref(),
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
            VERSION => decode_tagged(b, key, true),
            VERSION_NO_ID => decode_tagged(b, key, false),
            VERSION_UNAUTHENTICATED => decode_v1(b),
            v => Err(Refused(format!("unsupported record version {v}"))),
        }
    }

    /// The file's header before the move (the record's range at offset 0):
    /// its generation and rekey watermark say which segment the record
    /// protects. `None` when the record has no such range.
    pub fn old_header(&self) -> Option<crate::header::Header> {
        self.ranges
            .iter()
            .find(|(o, b)| *o == 0 && b.len() == crate::header::LEN)
            .and_then(|(_, b)| crate::header::Header::parse(b).ok())
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

/// A record of version 3 (`with_id`) or 2.
fn decode_tagged(b: &[u8], key: &JournalKey, with_id: bool) -> Result<Content, Refused> {
    if b.len() < PREFIX {
        return Ok(Content::Torn);
    }
    let head = PREFIX + if with_id { REKEY } else { 0 };
    let total = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as usize;
    if !(head + 16 + 8 + 4 + 4 + JOURNAL_TAG_LEN..=MAX_FILE).contains(&total) {
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
    let mut rec = parse_body(&signed[head..], generation)?;
    if with_id {
        rec.rekey = Some(Rekey {
            id: b[PREFIX..PREFIX + 16].try_into().expect("16 bytes"),
            seq: u64::from_le_bytes(b[PREFIX + 16..head].try_into().expect("8 bytes")),
        });
    }
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
        rekey: None,
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
#[path = "undo_tests.rs"]
mod tests;
