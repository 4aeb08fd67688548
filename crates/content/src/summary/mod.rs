//! Per-file summaries (`gcm` with the `file-summary` feature, FORMAT.md
//! 12): an authenticated XOR-MAC over every nonce entry of a file, so that
//! rolling back some of its blocks, or mixing blocks and nonce pages of two
//! versions of it, is found when the file is opened (its reads then fail
//! with EIO) and by fsck.
//!
//! The summary lives in the 4-byte key-generation field of nonce entries
//! (bytes 12–15, "slots"), so the layout of format 1 is unchanged: the
//! slots of nnode entries 0–7 hold the file's **record** (commit sequence
//! number, plaintext size, tag over the sum), the slots of entries 8–15
//! and of entries 0–7 of every nonce page hold that segment's **dirty
//! marker**. A segment's marker is written and synced before the first
//! change to the segment after a commit and names the segment's sum at
//! that commit, so a crash at any moment leaves a file whose clean
//! segments match the record and whose dirty ones are accounted for by
//! their markers. A commit (fsync, close of the last writable handle,
//! truncate; on a mount, its committer's, soon after) syncs the data,
//! writes a new record and syncs again.

use crate::layout::{block_count, entry_offset, segment_end, NNODE_BLOCKS, PAGE_BLOCKS};
use crate::{ContentError, Mode};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use warpfs_crypto::SummaryKey;

mod marks;
pub use marks::{make_dirty, mark_tail, mark_whole, EAGER, EAGER_BATCH};

/// Marker kinds (FORMAT.md 12.3).
pub const KIND_SEGMENT: u8 = 1;
/// The committed last segment, while the file grows past it: segments
/// after it that carry no marker are new since the commit.
pub const KIND_GROW: u8 = 2;
/// A truncation under way: the marker's sum covers this segment and every
/// later one, which the check then skips.
pub const KIND_TAIL: u8 = 3;

const E: usize = 32;

/// The segment of block `b` (0: the nnode's blocks).
pub fn seg_of(b: u64) -> u64 {
    if b < NNODE_BLOCKS {
        0
    } else {
        1 + (b - NNODE_BLOCKS) / PAGE_BLOCKS
    }
}

/// First block and end block of segment `k`.
pub fn seg_range(k: u64) -> (u64, u64) {
    let s = if k == 0 {
        0
    } else {
        NNODE_BLOCKS + (k - 1) * PAGE_BLOCKS
    };
    (s, segment_end(s))
}

/// The first of the 8 entries whose slots hold segment `k`'s marker.
pub(crate) fn marker_first(k: u64) -> u64 {
    if k == 0 {
        8
    } else {
        seg_range(k).0
    }
}

/// Segments holding blocks of a file of `size` bytes (at least segment 0,
/// which holds the record).
pub fn segments(size: u64) -> u64 {
    let n = block_count(size);
    if n == 0 {
        1
    } else {
        seg_of(n - 1) + 1
    }
}

/// Zero the slots of raw entries, leaving what format 1 readers expect.
pub fn mask(ents: &mut [u8]) {
    for e in ents.chunks_exact_mut(E) {
        e[12..16].fill(0);
    }
}

/// The 8 slots (32 bytes) of 8 raw entries.
pub(crate) fn gather(raw: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (j, e) in raw.chunks_exact(E).take(8).enumerate() {
        out[4 * j..4 * j + 4].copy_from_slice(&e[12..16]);
    }
    out
}

/// Put 32 bytes into the slots of 8 raw entries.
pub fn scatter(bytes: &[u8; 32], raw: &mut [u8]) {
    for (j, e) in raw.chunks_exact_mut(E).take(8).enumerate() {
        e[12..16].copy_from_slice(&bytes[4 * j..4 * j + 4]);
    }
}

/// XOR of the contributions of the written entries among `ents` (masked),
/// the first being block `first`.
pub fn sum_of(key: &SummaryKey, ents: &[u8], first: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    for (i, e) in ents.chunks_exact(E).enumerate() {
        if e.iter().all(|&v| v == 0) {
            continue;
        }
        let nonce: [u8; 12] = e[..12].try_into().expect("12 bytes");
        let c = key.contribution(&nonce, first + i as u64);
        xor(&mut s, &c);
    }
    s
}

fn xor(a: &mut [u8; 16], b: &[u8; 16]) {
    for i in 0..16 {
        a[i] ^= b[i];
    }
}

/// A file's summary record (FORMAT.md 12.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Commit sequence number.
    pub seq: u64,
    /// Plaintext size at that commit.
    pub size: u64,
    /// Tag over file ID, seq, size and the sum.
    pub tag: [u8; 16],
}

impl Record {
    pub(crate) fn parse(b: &[u8; 32]) -> Self {
        Self {
            seq: u64::from_le_bytes(b[..8].try_into().expect("8")),
            size: u64::from_le_bytes(b[8..16].try_into().expect("8")),
            tag: b[16..].try_into().expect("16"),
        }
    }

    /// The record's 32 bytes, as the slots of nnode entries 0–7 hold them.
    pub fn to_bytes(self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..].copy_from_slice(&self.tag);
        b
    }

    /// The record of a commit of a file with `sum`.
    pub fn sealed(key: &SummaryKey, id: &[u8; 16], seq: u64, size: u64, sum: &[u8; 16]) -> Self {
        Self {
            seq,
            size,
            tag: key.record_tag(id, seq, size, sum),
        }
    }
}

/// A dirty segment: its marker's kind, the segment's sum at the last
/// commit (for `KIND_TAIL`, of it and every later segment) and the
/// marker's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Dirty {
    /// `KIND_*`.
    pub kind: u8,
    /// The sum the marker names.
    pub sum: [u8; 16],
    bytes: [u8; 32],
}

/// The summary state of an open file.
#[derive(Debug, Clone)]
pub struct SumState {
    /// The record on disk.
    pub rec: Record,
    /// Segments changed since the record, by their markers.
    pub dirty: BTreeMap<u64, Dirty>,
    /// Why the file failed its check (its reads and writes then fail).
    pub poisoned: Option<String>,
    /// The sums of every current entry, per segment and in all, kept up
    /// to date by the writes (`None` after a failed write or a truncation:
    /// recomputed at commit).
    pub sums: Option<Sums>,
    /// Counts every change of the file's entries, markers or size, so that
    /// a commit made in steps ([`seal_record`] after a sync the caller
    /// made) can tell the file did not change since that sync.
    pub changes: u64,
    /// Since when the file has had segments changed since its record (set
    /// by the first marker after a commit, cleared by the commit), so that
    /// a commit left for later is not left for ever.
    pub since: Option<std::time::Instant>,
    /// Marker syncs since the record (see [`EAGER`]).
    pub marks: u32,
}

/// The sums of a file's current entries: per segment, so that a segment
/// made dirty names its committed sum without reading its entries back,
/// and in all, which a commit seals.
#[derive(Debug, Clone, Default)]
pub struct Sums {
    /// XOR of every segment's sum.
    pub all: [u8; 16],
    seg: Vec<[u8; 16]>,
}

/// Equal when every segment's sum is (a segment never written sums to
/// zero, listed or not).
impl PartialEq for Sums {
    fn eq(&self, o: &Sums) -> bool {
        let n = self.seg.len().max(o.seg.len()) as u64;
        self.all == o.all && (0..n).all(|k| self.seg(k) == o.seg(k))
    }
}

impl Eq for Sums {}

impl Sums {
    /// Segment `k`'s sum.
    pub fn seg(&self, k: u64) -> [u8; 16] {
        usize::try_from(k)
            .ok()
            .and_then(|k| self.seg.get(k))
            .copied()
            .unwrap_or([0u8; 16])
    }

    /// Segment `k`'s sum changes by `d`.
    fn add(&mut self, k: u64, d: &[u8; 16]) {
        let Ok(i) = usize::try_from(k) else { return };
        if self.seg.len() <= i {
            self.seg.resize(i + 1, [0u8; 16]);
        }
        xor(&mut self.seg[i], d);
        xor(&mut self.all, d);
    }
}

impl SumState {
    /// The state of a file whose header (and record) is being created.
    pub fn fresh(key: &SummaryKey, id: &[u8; 16]) -> Self {
        let rec = Record::sealed(key, id, 0, 0, &[0u8; 16]);
        let bytes = key.seal_marker(id, 0, 0, KIND_GROW, &[0u8; 16]);
        let mut dirty = BTreeMap::new();
        dirty.insert(
            0,
            Dirty {
                kind: KIND_GROW,
                sum: [0u8; 16],
                bytes,
            },
        );
        Self {
            rec,
            dirty,
            poisoned: None,
            sums: Some(Sums::default()),
            changes: 0,
            since: Some(std::time::Instant::now()),
            marks: 0,
        }
    }

    /// Account for entries of blocks `first..` changing from `old` to
    /// `new` (both masked); old entries of blocks at or past `n` (the
    /// file's block count) were not counted.
    pub fn account(&mut self, key: &SummaryKey, first: u64, n: u64, old: &[u8], new: &[u8]) {
        let Some(sums) = &mut self.sums else { return };
        let counted = (n.saturating_sub(first) as usize).min(old.len() / E) * E;
        let end = first + (new.len() / E) as u64;
        let mut b = first;
        while b < end {
            let k = seg_of(b);
            let stop = seg_range(k).1.min(end);
            let (i, j) = ((b - first) as usize * E, (stop - first) as usize * E);
            let mut d = sum_of(key, &new[i..j], b);
            if i < counted {
                xor(&mut d, &sum_of(key, &old[i..j.min(counted)], b));
            }
            sums.add(k, &d);
            b = stop;
        }
    }

    /// The running sums are no longer known (a write failed, the file was
    /// cut): the next commit reads them back.
    pub fn unknown(&mut self) {
        self.sums = None;
    }

    /// Segment `k`'s sum as the writes kept it, if known.
    fn known_sum(&self, k: u64) -> Option<[u8; 16]> {
        self.sums.as_ref().map(|s| s.seg(k))
    }

    /// The slot bytes that belong in block `x`'s entry.
    fn slot(&self, x: u64) -> [u8; 4] {
        let pick = |b: &[u8; 32], j: u64| -> [u8; 4] { b[4 * j as usize..4 * j as usize + 4].try_into().expect("4") };
        if x < 8 {
            return pick(&self.rec.to_bytes(), x);
        }
        let k = seg_of(x);
        let j = x - marker_first(k);
        if j < 8 {
            if let Some(d) = self.dirty.get(&k) {
                return pick(&d.bytes, j);
            }
        }
        [0u8; 4]
    }

    /// Fill the slots of masked entries (the first being block `first`)
    /// before they are written.
    pub fn patch(&self, first: u64, ents: &mut [u8]) {
        for (i, e) in ents.chunks_exact_mut(E).enumerate() {
            let x = first + i as u64;
            if x < NNODE_BLOCKS || (x - NNODE_BLOCKS) % PAGE_BLOCKS < 8 {
                e[12..16].copy_from_slice(&self.slot(x));
            }
        }
    }

    /// The last segment of the committed size.
    fn last_committed(&self) -> u64 {
        segments(self.rec.size) - 1
    }

    /// Whether segments after the committed last one are new (it carries
    /// a grow marker).
    fn growing(&self) -> bool {
        self.dirty
            .get(&self.last_committed())
            .is_some_and(|d| d.kind == KIND_GROW)
    }
}

/// Raw entries of blocks `[a, a + n)`; past the end of the backing file
/// they read as zeros.
pub(crate) fn read_raw(file: &File, a: u64, n: u64, out: &mut Vec<u8>) -> Result<(), ContentError> {
    out.clear();
    out.resize(n as usize * E, 0);
    let off = entry_offset(Mode::Gcm, a);
    let mut done = 0;
    while done < out.len() {
        match file.read_at(&mut out[done..], off + done as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ContentError::Io(e)),
        }
    }
    Ok(())
}

/// Segment `k`'s current sum over the blocks below `n` (masked entries).
pub(crate) fn current_sum(
    file: &File,
    key: &SummaryKey,
    k: u64,
    n: u64,
    buf: &mut Vec<u8>,
) -> Result<[u8; 16], ContentError> {
    let (s, e) = seg_range(k);
    let e = e.min(n);
    if e <= s {
        return Ok([0u8; 16]);
    }
    read_raw(file, s, e - s, buf)?;
    mask(buf);
    Ok(sum_of(key, buf, s))
}

/// A cipher file's ID and summary record as they are on disk, without
/// checking them; `None` for an empty file or one without a summary
/// (what the versions seen retire when the file is removed).
pub fn peek(file: &File) -> Option<([u8; 16], Record)> {
    let mut h = [0u8; crate::header::LEN];
    file.read_exact_at(&mut h, 0).ok()?;
    let hdr = crate::header::Header::parse(&h).ok()?;
    if !hdr.summary {
        return None;
    }
    let mut buf = Vec::new();
    read_raw(file, 0, 8, &mut buf).ok()?;
    Some((hdr.file_id, Record::parse(&gather(&buf))))
}

/// What the check of a file found.
pub struct Checked {
    /// The state to continue from (poisoned when the check failed).
    pub state: SumState,
    /// Segments that carry a valid dirty marker (not checked block by
    /// block: changed since the last commit, e.g. before a crash).
    pub unverified: Vec<u64>,
}

/// Check a file of plaintext `size` against its record and markers
/// (FORMAT.md 12.4).
pub fn check(file: &File, key: &SummaryKey, id: &[u8; 16], size: u64) -> Result<Checked, ContentError> {
    let mut buf = Vec::new();
    read_raw(file, 0, NNODE_BLOCKS, &mut buf)?;
    let rec = Record::parse(&gather(&buf));
    let nseg = segments(size);
    let n = block_count(size);
    let mut dirty = BTreeMap::new();
    // Markers valid under the record's seq.
    for k in 0..nseg {
        read_raw(file, marker_first(k), 8, &mut buf)?;
        let bytes = gather(&buf);
        if let Some((kind, sum)) = key.open_marker(id, rec.seq, k, &bytes) {
            if matches!(kind, KIND_SEGMENT | KIND_GROW | KIND_TAIL) {
                dirty.insert(k, Dirty { kind, sum, bytes });
            }
        }
    }
    let since = (!dirty.is_empty()).then(std::time::Instant::now);
    let mut st = SumState {
        rec,
        dirty,
        poisoned: None,
        sums: None,
        changes: 0,
        since,
        marks: 0,
    };
    let (last, growing) = (st.last_committed(), st.growing());
    let mut sum = [0u8; 16];
    let mut sums = Sums::default();
    let mut tail = false;
    for k in 0..nseg {
        let cur = current_sum(file, key, k, n, &mut buf)?;
        sums.add(k, &cur);
        if tail {
            continue;
        }
        match st.dirty.get(&k) {
            Some(d) => {
                xor(&mut sum, &d.sum);
                tail = d.kind == KIND_TAIL;
            }
            None if growing && k > last => {}
            None => xor(&mut sum, &cur),
        }
    }
    st.sums = Some(sums);
    let want = key.record_tag(id, rec.seq, rec.size, &sum);
    let tag_ok = bool::from(subtle::ConstantTimeEq::ct_eq(&want[..], &rec.tag[..]));
    if !tag_ok {
        st.poisoned = Some(
            "file summary does not verify: blocks or nonce pages were rolled back or mixed from another version of the file (or the summary was damaged)"
                .into(),
        );
    } else if st.dirty.is_empty() && size != rec.size {
        st.poisoned = Some(format!(
            "file summary records size {} but the file has {size} bytes: it was truncated or extended behind warpfs's back",
            rec.size
        ));
    }
    let unverified = st.dirty.keys().copied().collect();
    Ok(Checked { state: st, unverified })
}

/// Commit: sync, write a new record for the file as it is (plaintext
/// `size`), sync again. Nothing is committed for a poisoned file.
pub fn commit(file: &File, key: &SummaryKey, id: &[u8; 16], size: u64, st: &mut SumState) -> Result<(), ContentError> {
    commit_then(file, size, st, LastSync::Data, |st| {
        seal_record(file, key, id, size, st)
    })
    .map(|_| ())
}

/// How a commit's last sync (the one after the record) is made: an
/// fsync's commit makes it the fsync the caller asked for, so that fsync
/// needs no sync of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LastSync {
    /// `fdatasync`: data, entries and the record.
    Data,
    /// `fsync`: the same and the file's metadata.
    All,
}

/// [`commit`] with the last sync as `last` asks and the record written by
/// `seal` ([`seal_record`], or a caller's that also tells someone);
/// `Ok(true)` when a commit ran (and so that sync), `Ok(false)` for a
/// poisoned file.
pub fn commit_then(
    file: &File,
    size: u64,
    st: &mut SumState,
    last: LastSync,
    seal: impl FnOnce(&mut SumState) -> Result<Vec<u64>, ContentError>,
) -> Result<bool, ContentError> {
    if st.poisoned.is_some() {
        return Ok(false);
    }
    file.sync_data()?;
    let old = seal(st)?;
    match last {
        LastSync::Data => file.sync_data()?,
        LastSync::All => file.sync_all()?,
    }
    erase_markers(file, size, &old, st)?;
    Ok(true)
}

/// The middle of a commit, for a caller that synced the file's data and
/// entries before (and syncs again after): write a new record for the file
/// as it is (plaintext `size`) and make it the state's. Returns the
/// segments whose markers the commit ended, for [`erase_markers`] once the
/// record is synced.
pub fn seal_record(
    file: &File,
    key: &SummaryKey,
    id: &[u8; 16],
    size: u64,
    st: &mut SumState,
) -> Result<Vec<u64>, ContentError> {
    let n = block_count(size);
    let mut buf = Vec::new();
    if st.sums.is_none() {
        let mut sums = Sums::default();
        for k in 0..segments(size) {
            sums.add(k, &current_sum(file, key, k, n, &mut buf)?);
        }
        st.sums = Some(sums);
    }
    let sum = st.sums.as_ref().map_or([0u8; 16], |s| s.all);
    let rec = Record::sealed(key, id, st.rec.seq.wrapping_add(1), size, &sum);
    read_raw(file, 0, 8, &mut buf)?;
    scatter(&rec.to_bytes(), &mut buf);
    keeping_mtime(file, || {
        crate::sysio::write_all_at(file, &buf, entry_offset(Mode::Gcm, 0))
    })?;
    st.rec = rec;
    st.changes = st.changes.wrapping_add(1);
    st.since = None;
    st.marks = 0;
    Ok(std::mem::take(&mut st.dirty).into_keys().collect())
}

/// The end of a commit, once its record is synced: the markers of the
/// cycle it closed (`old`, from [`seal_record`]) would be valid again
/// under the previous record, so they are erased, so that putting that
/// record back makes those segments fail instead of pass unchecked; a
/// segment marked again since (under the new record, in the same slots)
/// keeps its new marker. Not synced: until they are gone they are only
/// stale under the new record.
pub fn erase_markers(file: &File, size: u64, old: &[u64], st: &SumState) -> Result<(), ContentError> {
    let nseg = segments(size);
    let mut buf = Vec::new();
    keeping_mtime(file, || {
        for &k in old.iter().filter(|&&k| k < nseg && !st.dirty.contains_key(&k)) {
            read_raw(file, marker_first(k), 8, &mut buf)?;
            scatter(&[0u8; 32], &mut buf);
            crate::sysio::write_all_at(file, &buf, entry_offset(Mode::Gcm, marker_first(k)))?;
        }
        Ok(())
    })
}

/// Run `write`, which puts summary bytes (a record, erased markers) into
/// `file`, keeping the file's modification time: they are not the file's
/// content, and a commit made after `touch -d`, `cp -p` or `tar x` set the
/// time must not move it (a crash between the write and the reset does).
pub(crate) fn keeping_mtime<R>(
    file: &File,
    write: impl FnOnce() -> Result<R, ContentError>,
) -> Result<R, ContentError> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let md = file.metadata()?;
    let r = write()?;
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: md.mtime() as _,
            tv_nsec: md.mtime_nsec() as _,
        },
    ];
    // SAFETY: futimens on an owned descriptor with two valid timespecs.
    if unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) } != 0 {
        tracing::warn!(
            "the modification time of a cipher file moved with its summary: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(r)
}

/// The segments a change of blocks `[a, b)` touches.
pub fn segs(a: u64, b: u64) -> (u64, u64) {
    (seg_of(a), seg_of(b.max(a + 1) - 1))
}

/// Whether the state has changes not yet committed.
pub fn needs_commit(st: &SumState) -> bool {
    !st.dirty.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_marker_slots() {
        assert_eq!(seg_of(0), 0);
        assert_eq!(seg_of(15), 0);
        assert_eq!(seg_of(16), 1);
        assert_eq!(seg_of(271), 1);
        assert_eq!(seg_of(272), 2);
        assert_eq!(seg_range(0), (0, 16));
        assert_eq!(seg_range(2), (272, 528));
        assert_eq!(marker_first(0), 8);
        assert_eq!(marker_first(1), 16);
        assert_eq!(segments(0), 1);
        assert_eq!(segments(1), 1);
        assert_eq!(segments(65536), 1);
        assert_eq!(segments(65537), 2);
    }

    #[test]
    fn patch_puts_record_and_markers_in_their_slots_only() {
        let key = SummaryKey::derive(&warpfs_crypto::MasterKey::from_bytes(&[1; 32]).unwrap());
        let id = [2u8; 16];
        let st = SumState::fresh(&key, &id);
        let mut ents = vec![0u8; 16 * E];
        st.patch(0, &mut ents);
        assert_eq!(gather(&ents[..8 * E]), st.rec.to_bytes());
        assert_eq!(gather(&ents[8 * E..]), st.dirty[&0].bytes);
        let mut m = ents.clone();
        mask(&mut m);
        assert!(m.iter().all(|&v| v == 0));
        // In a page only entries 0-7 carry slots.
        let mut ents = vec![0u8; 20 * E];
        st.patch(16, &mut ents);
        assert!(ents.iter().all(|&v| v == 0), "segment 1 is clean: zeros");
    }
}
