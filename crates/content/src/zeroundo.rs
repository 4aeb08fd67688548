//! fsck's undo file (FORMAT.md 6b): the bytes `fsck --zero-bad-blocks`
//! changes in a cipher file, saved before it changes them, so that `fsck
//! --undo` can put the file back exactly. Each step (a run of blocks made
//! holes, or a file summary sealed again) is one record, tagged with
//! HMAC-SHA256 under the volume's undo key together with the file's random
//! ID and the record's place in it; a record that does not verify makes
//! the whole file refused. A restore puts bytes back only where the file
//! still holds what fsck wrote (or never got to write).

use crate::header::{self, Header};
use crate::layout::{block_count, block_len, data_offset, entry_offset, segment_end, NNODE_BLOCKS};
use crate::Mode;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use warpfs_crypto::{UndoKey, UNDO_TAG_LEN};

/// First bytes of an undo file.
pub const MAGIC: [u8; 8] = *b"WRPFZERO";
/// Undo file format version.
pub const VERSION: u16 = 1;
/// Bytes of the file header: magic, version, reserved, undo ID.
pub const HEADER_LEN: usize = 8 + 2 + 2 + 16;
/// First bytes of a committed record (written last).
const REC_MAGIC: [u8; 4] = *b"ZREC";
/// Bytes of a record before its body: magic, length, sequence, kind, reserved.
const REC_HEAD: usize = 4 + 4 + 4 + 1 + 3;
/// Most bytes one record may hold (a step covers at most [`CHUNK_BLOCKS`]
/// blocks: about 8 MiB of data and their entries).
pub const MAX_RECORD: usize = 32 << 20;
/// Most blocks one step makes holes (fsck splits a file's bad blocks into
/// steps of this many).
pub const CHUNK_BLOCKS: usize = 2048;
/// Most bytes of a path hint.
const MAX_PATH: usize = 64 << 10;
const KIND_STEP: u8 = 1;
const KIND_DONE: u8 = 2;

/// Why an undo file is refused (nothing of it is applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// What a range holds once its step is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// The step does not change it (a zeroed block's data: saved to
    /// recognise the block).
    Same,
    /// Zeros (a zeroed entry's nonce and tag).
    Zeros,
    /// Whatever the step wrote, recorded in its done record (a file
    /// summary's record and markers).
    Recorded,
}

impl After {
    fn to_byte(self) -> u8 {
        match self {
            After::Same => 0,
            After::Zeros => 1,
            After::Recorded => 2,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(After::Same),
            1 => Some(After::Zeros),
            2 => Some(After::Recorded),
            _ => None,
        }
    }
}

/// Bytes of a file before a step, and what they are after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// Offset in the cipher file.
    pub offset: u64,
    /// The bytes before the step.
    pub before: Vec<u8>,
    /// What the step leaves there.
    pub after: After,
}

/// Which file a step changed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    /// Device of the backing file.
    pub dev: u64,
    /// Its inode.
    pub ino: u64,
    /// Its file ID (header bytes 8..24).
    pub file_id: [u8; 16],
    /// Its backing path relative to CIPHERDIR (a hint: the file is found
    /// by device and inode).
    pub path: Vec<u8>,
}

/// One change fsck made to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The file.
    pub target: Target,
    /// Blocks the step made holes (empty for a summary sealed again).
    pub blocks: Vec<u64>,
    /// The bytes the step changes (or, for a zeroed block's data, keeps).
    pub ranges: Vec<Range>,
}

/// A step as read back: its record, and what its done record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The record's place in the undo file.
    pub seq: u32,
    /// The step.
    pub step: Step,
    /// The bytes of its [`After::Recorded`] ranges once it was done; `None`
    /// when fsck stopped before it was (those ranges must then still be as
    /// they were before).
    pub recorded: Option<Vec<Vec<u8>>>,
}

/// The header of a new undo file with ID `id`.
pub fn file_header(id: &[u8; 16]) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h[12..].copy_from_slice(id);
    h
}

fn record(key: &UndoKey, head: &[u8; HEADER_LEN], seq: u32, kind: u8, body: &[u8]) -> Vec<u8> {
    let total = REC_HEAD + body.len() + UNDO_TAG_LEN;
    let mut r = Vec::with_capacity(total);
    r.extend_from_slice(&REC_MAGIC);
    r.extend_from_slice(&(total as u32).to_le_bytes());
    r.extend_from_slice(&seq.to_le_bytes());
    r.extend_from_slice(&[kind, 0, 0, 0]);
    r.extend_from_slice(body);
    let tag = key.tag(&[head, &r]);
    r.extend_from_slice(&tag);
    r
}

/// The record of `step`, number `seq` of the undo file with header `head`.
pub fn encode_step(key: &UndoKey, head: &[u8; HEADER_LEN], seq: u32, step: &Step) -> Vec<u8> {
    let t = &step.target;
    let mut b = Vec::new();
    b.extend_from_slice(&t.dev.to_le_bytes());
    b.extend_from_slice(&t.ino.to_le_bytes());
    b.extend_from_slice(&t.file_id);
    b.extend_from_slice(&(t.path.len() as u32).to_le_bytes());
    b.extend_from_slice(&t.path);
    b.extend_from_slice(&(step.blocks.len() as u32).to_le_bytes());
    for x in &step.blocks {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b.extend_from_slice(&(step.ranges.len() as u32).to_le_bytes());
    for r in &step.ranges {
        b.extend_from_slice(&r.offset.to_le_bytes());
        b.extend_from_slice(&(r.before.len() as u32).to_le_bytes());
        b.push(r.after.to_byte());
        b.extend_from_slice(&r.before);
    }
    record(key, head, seq, KIND_STEP, &b)
}

/// The done record of step `of` (its sequence number): the bytes its
/// [`After::Recorded`] ranges now hold, in order.
pub fn encode_done(key: &UndoKey, head: &[u8; HEADER_LEN], seq: u32, of: u32, recorded: &[Vec<u8>]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&of.to_le_bytes());
    b.extend_from_slice(&(recorded.len() as u32).to_le_bytes());
    for r in recorded {
        b.extend_from_slice(&(r.len() as u32).to_le_bytes());
        b.extend_from_slice(r);
    }
    record(key, head, seq, KIND_DONE, &b)
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Refused> {
        if self.b.len() < n {
            return Err(Refused("corrupt record: short".into()));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Refused> {
        Ok(self.take(N)?.try_into().expect("N bytes taken"))
    }

    fn u32(&mut self) -> Result<usize, Refused> {
        Ok(u32::from_le_bytes(self.array()?) as usize)
    }

    fn u64(&mut self) -> Result<u64, Refused> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

fn parse_step(body: &[u8]) -> Result<Step, Refused> {
    let mut r = Reader { b: body };
    let dev = r.u64()?;
    let ino = r.u64()?;
    let file_id = r.array()?;
    let plen = r.u32()?;
    if plen > MAX_PATH {
        return Err(Refused("corrupt record: path too long".into()));
    }
    let path = r.take(plen)?.to_vec();
    crate::undo::check_path(&path).map_err(|e| Refused(e.0))?;
    let n = r.u32()?;
    if n > CHUNK_BLOCKS {
        return Err(Refused("corrupt record: too many blocks".into()));
    }
    let mut blocks = Vec::with_capacity(n);
    for _ in 0..n {
        blocks.push(r.u64()?);
    }
    let n = r.u32()?;
    // Every range takes at least 13 bytes of the record.
    if n > r.b.len() / 13 {
        return Err(Refused("corrupt record: too many ranges".into()));
    }
    let mut ranges = Vec::with_capacity(n);
    for _ in 0..n {
        let offset = r.u64()?;
        let len = r.u32()?;
        let after =
            After::from_byte(r.array::<1>()?[0]).ok_or_else(|| Refused("corrupt record: unknown range kind".into()))?;
        if offset.checked_add(len as u64).is_none_or(|e| e > i64::MAX as u64) {
            return Err(Refused("corrupt record: range too large".into()));
        }
        ranges.push(Range {
            offset,
            before: r.take(len)?.to_vec(),
            after,
        });
    }
    if !r.b.is_empty() {
        return Err(Refused("corrupt record: trailing bytes".into()));
    }
    Ok(Step {
        target: Target {
            dev,
            ino,
            file_id,
            path,
        },
        blocks,
        ranges,
    })
}

fn parse_done(body: &[u8]) -> Result<(u32, Vec<Vec<u8>>), Refused> {
    let mut r = Reader { b: body };
    let of = r.u32()? as u32;
    let n = r.u32()?;
    if n > r.b.len() / 4 {
        return Err(Refused("corrupt record: too many ranges".into()));
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let len = r.u32()?;
        v.push(r.take(len)?.to_vec());
    }
    if !r.b.is_empty() {
        return Err(Refused("corrupt record: trailing bytes".into()));
    }
    Ok((of, v))
}

/// Read an undo file's bytes, checking every record's tag under `key`.
/// Records are read up to the first one not committed (its magic not yet
/// written, or cut short: fsck stopped while writing it); a record that
/// breaks the format, a tag that does not verify, a record out of its
/// place or a done record that fits no step refuses the whole file.
pub fn decode(b: &[u8], key: &UndoKey) -> Result<Vec<Loaded>, Refused> {
    decode_from(&mut &b[..], key)
}

/// Read `n` bytes of `r` into `buf` (cleared first), fewer at its end.
fn fill(r: &mut impl Read, buf: &mut Vec<u8>, n: usize) -> Result<(), Refused> {
    buf.clear();
    r.take(n as u64)
        .read_to_end(buf)
        .map(drop)
        .map_err(|e| Refused(format!("cannot read it: {e}")))
}

/// [`decode`] reading the undo file from `r` one record at a time: a
/// record is read (at most [`MAX_RECORD`] bytes) only once every record
/// before it verified, so a file planted to be huge costs no more memory
/// than one record.
pub fn decode_from(r: &mut impl Read, key: &UndoKey) -> Result<Vec<Loaded>, Refused> {
    let mut buf = Vec::new();
    fill(r, &mut buf, HEADER_LEN)?;
    if buf.len() < HEADER_LEN {
        return Err(Refused(format!("it is not an undo file ({} bytes)", buf.len())));
    }
    let head: [u8; HEADER_LEN] = buf[..HEADER_LEN].try_into().expect("HEADER_LEN bytes");
    if head[..8] != MAGIC {
        return Err(Refused("it is not an undo file (bad magic)".into()));
    }
    let version = u16::from_le_bytes([head[8], head[9]]);
    if version != VERSION {
        return Err(Refused(format!("unsupported undo file version {version}")));
    }
    if head[10..12] != [0, 0] {
        return Err(Refused("reserved bytes are not zero".into()));
    }
    let mut out: Vec<Loaded> = Vec::new();
    let mut seq = 0u32;
    let mut rec = Vec::new();
    loop {
        fill(r, &mut rec, REC_HEAD)?;
        if rec.len() < REC_HEAD {
            break; // cut short while written
        }
        if rec[..4] == [0; 4] {
            break; // not committed: fsck stopped while writing it
        }
        if rec[..4] != REC_MAGIC {
            return Err(Refused(format!("record {seq}: bad magic")));
        }
        let total = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]) as usize;
        if !(REC_HEAD + UNDO_TAG_LEN..=MAX_RECORD).contains(&total) {
            return Err(Refused(format!("record {seq}: impossible length {total}")));
        }
        let mut rest = Vec::new();
        fill(r, &mut rest, total - REC_HEAD)?;
        if rest.len() < total - REC_HEAD {
            break; // cut short while written
        }
        rec.extend_from_slice(&rest);
        drop(rest);
        let r = &rec[..];
        let (signed, tag) = r[..total].split_at(total - UNDO_TAG_LEN);
        if !key.verify(&[&head, signed], tag) {
            return Err(Refused(format!(
                "record {seq}: its MAC does not verify: it was not written by fsck with this volume's key (forged, altered or damaged)"
            )));
        }
        if u32::from_le_bytes([r[8], r[9], r[10], r[11]]) != seq {
            return Err(Refused(format!("record {seq}: out of order")));
        }
        if r[13..16] != [0, 0, 0] {
            return Err(Refused(format!("record {seq}: reserved bytes are not zero")));
        }
        let body = &signed[REC_HEAD..];
        match r[12] {
            KIND_STEP => out.push(Loaded {
                seq,
                step: parse_step(body).map_err(|e| Refused(format!("record {seq}: {e}")))?,
                recorded: None,
            }),
            KIND_DONE => {
                let (of, v) = parse_done(body).map_err(|e| Refused(format!("record {seq}: {e}")))?;
                let s = out
                    .iter_mut()
                    .find(|s| s.seq == of && s.recorded.is_none())
                    .ok_or_else(|| Refused(format!("record {seq}: completes no step")))?;
                let want: Vec<usize> = s
                    .step
                    .ranges
                    .iter()
                    .filter(|x| x.after == After::Recorded)
                    .map(|x| x.before.len())
                    .collect();
                if want != v.iter().map(Vec::len).collect::<Vec<_>>() {
                    return Err(Refused(format!("record {seq}: does not fit step {of}")));
                }
                s.recorded = Some(v);
            }
            k => return Err(Refused(format!("record {seq}: unknown kind {k}"))),
        }
        seq += 1;
    }
    Ok(out)
}

/// Where the entry bytes a hole needs lie within an entry of `mode`: the
/// whole entry, or in a file with a summary (FORMAT.md 12) all of it but
/// the summary slot (bytes 12..16), which stays.
pub fn entry_zero_parts(mode: Mode, summary: bool) -> &'static [(usize, usize)] {
    match (mode, summary) {
        (Mode::Gcm, true) => &[(0, 12), (16, 32)],
        (Mode::Gcm, false) => &[(0, 32)],
        (Mode::Ctr, _) => &[(0, 16)],
        (Mode::Xts, _) => &[],
    }
}

fn read_at(file: &File, off: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut v = vec![0u8; len];
    file.read_exact_at(&mut v, off)?;
    Ok(v)
}

/// The step that makes `blocks` of `file` (plaintext `size`) holes: each
/// block's entry bytes a hole needs (after: zeros) and its data (kept,
/// saved to recognise the block), read now.
pub fn capture_zero(
    file: &File,
    mode: Mode,
    size: u64,
    summary: bool,
    blocks: &[u64],
    target: Target,
) -> std::io::Result<Step> {
    let mut ranges = Vec::new();
    for &x in blocks {
        let e = entry_offset(mode, x);
        for &(a, b) in entry_zero_parts(mode, summary) {
            ranges.push(Range {
                offset: e + a as u64,
                before: read_at(file, e + a as u64, b - a)?,
                after: After::Zeros,
            });
        }
        ranges.push(Range {
            offset: data_offset(mode, x),
            before: read_at(file, data_offset(mode, x), block_len(size, x))?,
            after: After::Same,
        });
    }
    Ok(Step {
        target,
        blocks: blocks.to_vec(),
        ranges,
    })
}

/// The step that seals a `gcm` file's summary again (FORMAT.md 12.2,
/// 12.3): the slots of the nnode's entries (the record and segment 0's
/// marker) and of the first 8 entries of every nonce page (the markers),
/// read now; after: what the seal writes there.
pub fn capture_reseal(file: &File, size: u64, target: Target) -> std::io::Result<Step> {
    let n = block_count(size);
    // The nnode's 16 entries are there whatever the size; a nonce page is
    // there when a block behind it is.
    let mut slots: Vec<u64> = (0..NNODE_BLOCKS).collect();
    let mut k = NNODE_BLOCKS;
    while k < n {
        slots.extend(k..k + 8);
        k = segment_end(k);
    }
    let mut ranges = Vec::with_capacity(slots.len());
    for x in slots {
        let off = entry_offset(Mode::Gcm, x) + 12;
        ranges.push(Range {
            offset: off,
            before: read_at(file, off, 4)?,
            after: After::Recorded,
        });
    }
    Ok(Step {
        target,
        blocks: Vec::new(),
        ranges,
    })
}

/// What `step`'s [`After::Recorded`] ranges hold now (once it is done).
pub fn recorded_now(file: &File, step: &Step) -> std::io::Result<Vec<Vec<u8>>> {
    step.ranges
        .iter()
        .filter(|r| r.after == After::Recorded)
        .map(|r| read_at(file, r.offset, r.before.len()))
        .collect()
}

/// Put `file` back as it was before `steps` (all of one file, in any
/// order: their ranges do not overlap). First every check: `file` is a
/// regular file with the steps' device, inode and file ID, and every range
/// holds either what its step left there (then the old bytes go back) or
/// its old bytes still (the step never got to it); only then is anything
/// written, and the file synced. Returns the blocks that are no longer
/// holes. Refused (nothing written) with the reason otherwise.
pub fn restore(file: &File, steps: &[&Loaded]) -> Result<u64, String> {
    restore_then_reseal(file, steps, |_| Err(String::new())).map(|(n, _)| n)
}

/// Whether `step` seals a summary again ([`capture_reseal`]): no blocks,
/// every range recorded.
fn is_reseal(step: &Step) -> bool {
    step.blocks.is_empty() && !step.ranges.is_empty() && step.ranges.iter().all(|r| r.after == After::Recorded)
}

/// [`restore`], where a summary sealed again since fsck (a rekey, or a
/// mount's commit after writing other blocks) does not refuse the file: if
/// `summary_ok` accepts the file as it is (its summary verifies), the
/// blocks are put back, the summary slots left as they are, and `true`
/// returned with the count: the caller seals the summary again over the
/// entries put back. A `summary_ok` error is the reason it is not restored.
pub fn restore_then_reseal(
    file: &File,
    steps: &[&Loaded],
    summary_ok: impl FnOnce(&File) -> Result<(), String>,
) -> Result<(u64, bool), String> {
    let Some(first) = steps.first() else {
        return Ok((0, false));
    };
    let t = &first.step.target;
    let md = file.metadata().map_err(|e| e.to_string())?;
    if !md.file_type().is_file() || (md.dev(), md.ino()) != (t.dev, t.ino) {
        return Err("it is not the file fsck changed (another device or inode)".into());
    }
    let mut h = [0u8; header::LEN];
    file.read_exact_at(&mut h, 0)
        .map_err(|e| format!("its header cannot be read: {e}"))?;
    match Header::parse(&h) {
        Ok(hdr) if hdr.file_id == t.file_id => {}
        Ok(_) => return Err("its file ID is not the one fsck saw".into()),
        Err(e) => return Err(format!("its header is not valid: {e}")),
    }
    let len = md.len();
    let mut writes: Vec<(u64, &[u8])> = Vec::new();
    let mut blocks = 0u64;
    let mut resealed = None;
    for s in steps {
        if s.step.target != *t {
            return Err("its steps name different files".into());
        }
        if is_reseal(&s.step) && sealed_since(file, s, len)? {
            resealed = Some(s.step.ranges[0].offset);
            continue;
        }
        let mut rec = s.recorded.iter().flatten();
        let mut back = false;
        for r in &s.step.ranges {
            let after: Option<std::borrow::Cow<[u8]>> = match r.after {
                After::Same => Some(r.before.as_slice().into()),
                After::Zeros => Some(vec![0u8; r.before.len()].into()),
                After::Recorded => rec.next().map(|v| v.as_slice().into()),
            };
            let end = r.offset + r.before.len() as u64;
            if end > len {
                return Err(format!("bytes {}..{end} are past its end ({len} bytes)", r.offset));
            }
            let now = read_at(file, r.offset, r.before.len()).map_err(|e| e.to_string())?;
            if now == r.before {
                continue;
            }
            if after.as_deref() != Some(now.as_slice()) {
                return Err(format!(
                    "bytes {}..{end} changed since fsck wrote them (the file was written since): not restored",
                    r.offset
                ));
            }
            back = true;
            writes.push((r.offset, &r.before));
        }
        if back {
            blocks += s.step.blocks.len() as u64;
        }
    }
    if let Some(off) = resealed {
        summary_ok(file).map_err(|why| {
            format!(
                "its summary (bytes from {off}) was sealed again since fsck (a rekey or a write){why}: not restored"
            )
        })?;
    }
    for (off, b) in writes {
        file.write_all_at(b, off).map_err(|e| e.to_string())?;
    }
    file.sync_data().map_err(|e| e.to_string())?;
    Ok((blocks, resealed.is_some()))
}

/// Whether the summary slots a reseal step `s` recorded hold neither what
/// they held before it nor what it wrote (sealed again since).
fn sealed_since(file: &File, s: &Loaded, len: u64) -> Result<bool, String> {
    let mut rec = s.recorded.iter().flatten();
    for r in &s.step.ranges {
        let after = rec.next();
        if r.offset + r.before.len() as u64 > len {
            return Ok(true);
        }
        let now = read_at(file, r.offset, r.before.len()).map_err(|e| e.to_string())?;
        if now != r.before && after.map(Vec::as_slice) != Some(now.as_slice()) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// An undo file being written: the header, then one record at a time,
/// each made durable before the change it undoes (all but its magic,
/// synced, then the magic, synced: a record without its magic is one fsck
/// did not finish writing).
pub struct Writer {
    file: File,
    head: [u8; HEADER_LEN],
    key: UndoKey,
    at: u64,
    seq: u32,
}

impl Writer {
    /// Start a new undo file in `file` (empty, opened for writing) with a
    /// random ID.
    pub fn new(file: File, key: UndoKey) -> std::io::Result<Self> {
        let head = file_header(&warpfs_crypto::rand::array());
        file.write_all_at(&head, 0)?;
        file.sync_all()?;
        Ok(Self {
            file,
            head,
            key,
            at: HEADER_LEN as u64,
            seq: 0,
        })
    }

    fn append(&mut self, rec: &[u8]) -> std::io::Result<u32> {
        self.file.write_all_at(&rec[4..], self.at + 4)?;
        self.file.sync_data()?;
        self.file.write_all_at(&rec[..4], self.at)?;
        self.file.sync_data()?;
        self.at += rec.len() as u64;
        self.seq += 1;
        Ok(self.seq - 1)
    }

    /// Make `step` durable before it is made; its sequence number.
    pub fn step(&mut self, step: &Step) -> std::io::Result<u32> {
        let r = encode_step(&self.key, &self.head, self.seq, step);
        self.append(&r)
    }

    /// Step `of` is done: what its recorded ranges now hold.
    pub fn done(&mut self, of: u32, recorded: &[Vec<u8>]) -> std::io::Result<()> {
        let r = encode_done(&self.key, &self.head, self.seq, of, recorded);
        self.append(&r).map(|_| ())
    }
}

#[cfg(test)]
#[path = "zeroundo_tests.rs"]
mod tests;
