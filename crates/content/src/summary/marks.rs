//! Dirty markers (FORMAT.md 12.3): written and synced before a segment
//! changes after a commit, each naming the segment's committed sum; a grow
//! marker before the file grows past its committed size, a tail marker
//! before a truncation (and on segment 0, the whole file: shared storage,
//! 12.7); past a few marker syncs per commit cycle, more segments marked
//! ahead of their changes.

use super::*;

/// Write the markers of `marks` into their slots and sync the file.
fn write_markers(file: &File, marks: &[(u64, [u8; 32])]) -> Result<(), ContentError> {
    let mut buf = Vec::new();
    for (k, bytes) in marks {
        let a = marker_first(*k);
        read_raw(file, a, 8, &mut buf)?;
        scatter(bytes, &mut buf);
        crate::sysio::write_all_at(file, &buf, entry_offset(Mode::Gcm, a))?;
    }
    if !marks.is_empty() {
        file.sync_data()?;
    }
    Ok(())
}

/// Make segments `first..=last` dirty before they change (and, with
/// `grow`, mark the committed last segment as growing), in a file of
/// current plaintext `size`: each new marker is written and the file
/// synced before this returns.
pub fn make_dirty(
    file: &File,
    key: &SummaryKey,
    id: &[u8; 16],
    size: u64,
    st: &mut SumState,
    (first, last): (u64, u64),
    grow: bool,
) -> Result<(), ContentError> {
    let lc = st.last_committed();
    let n = block_count(size);
    let mut marks = Vec::new();
    let mut buf = Vec::new();
    let growing = st.growing() || grow;
    // A tail marker stands for its segment and every later one.
    let tail = tail_of(st).unwrap_or(u64::MAX);
    let mut want: Vec<(u64, u8)> = Vec::new();
    if grow && lc < tail {
        want.push((lc, KIND_GROW));
    }
    for k in first..=last {
        if k >= tail {
            break;
        }
        if k > lc && growing {
            continue; // new since the commit: no marker needed
        }
        want.push((k, KIND_SEGMENT));
    }
    for (k, kind) in want {
        let sum = match st.dirty.get(&k) {
            Some(d) if d.kind == kind || d.kind != KIND_SEGMENT => continue,
            Some(d) => d.sum, // a segment marker becomes a grow marker
            // Not dirty: its sum now is its sum at the last commit.
            None => committed_sum(file, key, st, k, n, &mut buf)?,
        };
        marks.push(add_marker(key, id, st, k, kind, sum));
    }
    if !marks.is_empty() {
        st.marks = st.marks.saturating_add(1);
        if st.marks > EAGER {
            mark_more(file, key, id, size, st, last, &mut marks)?;
        }
    }
    write_markers(file, &marks)
}

/// The sum segment `k` (not dirty) had at the last commit: its current
/// one, as the writes kept it or read from its entries.
fn committed_sum(
    file: &File,
    key: &SummaryKey,
    st: &SumState,
    k: u64,
    n: u64,
    buf: &mut Vec<u8>,
) -> Result<[u8; 16], ContentError> {
    match st.known_sum(k) {
        Some(s) => Ok(s),
        None => current_sum(file, key, k, n, buf),
    }
}

/// Make segment `k` dirty in the state with a marker of `kind` naming
/// `sum`; returns the marker to write.
fn add_marker(key: &SummaryKey, id: &[u8; 16], st: &mut SumState, k: u64, kind: u8, sum: [u8; 16]) -> (u64, [u8; 32]) {
    let bytes = key.seal_marker(id, st.rec.seq, k, kind, &sum);
    st.dirty.insert(k, Dirty { kind, sum, bytes });
    st.since.get_or_insert_with(std::time::Instant::now);
    (k, bytes)
}

/// Marker syncs in one commit cycle after which each further one marks
/// more of the file ([`EAGER_BATCH`] committed segments), so that a file
/// changing all over (random writes, a database) pays a handful of marker
/// syncs per cycle instead of one per segment. A segment marked before it
/// changes is checked by its tags alone until the commit, as one that
/// changed is.
pub const EAGER: u32 = 8;
/// How many more segments each marker sync past [`EAGER`] marks.
pub const EAGER_BATCH: u64 = 256;

/// Add segment markers to `marks` for up to [`EAGER_BATCH`] committed,
/// unmarked segments of the file (of plaintext `size`), the first after
/// segment `from`, wrapping.
fn mark_more(
    file: &File,
    key: &SummaryKey,
    id: &[u8; 16],
    size: u64,
    st: &mut SumState,
    from: u64,
    marks: &mut Vec<(u64, [u8; 32])>,
) -> Result<(), ContentError> {
    let tail = tail_of(st);
    let end = segments(size)
        .min(st.last_committed() + 1)
        .min(tail.map_or(u64::MAX, |t| t));
    if end == 0 {
        return Ok(());
    }
    let n = block_count(size);
    let mut buf = Vec::new();
    let mut added = 0;
    let start = (from + 1) % end;
    let mut k = start;
    loop {
        if !st.dirty.contains_key(&k) {
            let sum = committed_sum(file, key, st, k, n, &mut buf)?;
            marks.push(add_marker(key, id, st, k, KIND_SEGMENT, sum));
            added += 1;
            if added >= EAGER_BATCH {
                break;
            }
        }
        k = (k + 1) % end;
        if k == start {
            break;
        }
    }
    Ok(())
}

/// Before a truncation to `new_size` (> 0) of a file of `size`: a tail
/// marker on the new last segment naming the committed sum of it and of
/// every later segment, written and synced.
pub fn mark_tail(
    file: &File,
    key: &SummaryKey,
    id: &[u8; 16],
    size: u64,
    new_size: u64,
    st: &mut SumState,
) -> Result<(), ContentError> {
    let t = seg_of(block_count(new_size) - 1);
    let sum = tail_sum(file, key, st, t, size)?;
    let mark = add_marker(key, id, st, t, KIND_TAIL, sum);
    write_markers(file, &[mark])
}

/// Mark the whole file, a file of plaintext `size`, dirty: a tail marker
/// on segment 0, written and synced (unless it has one), so that the
/// file's record vouches for nothing until the next commit, whoever
/// changes it (hosts sharing the file, FORMAT.md 12.7).
pub fn mark_whole(
    file: &File,
    key: &SummaryKey,
    id: &[u8; 16],
    size: u64,
    st: &mut SumState,
) -> Result<(), ContentError> {
    if tail_of(st) == Some(0) {
        return Ok(());
    }
    let sum = tail_sum(file, key, st, 0, size)?;
    let mark = add_marker(key, id, st, 0, KIND_TAIL, sum);
    write_markers(file, &[mark])
}

/// The segment with a tail marker, if one has.
fn tail_of(st: &SumState) -> Option<u64> {
    st.dirty.iter().find(|(_, d)| d.kind == KIND_TAIL).map(|(&k, _)| k)
}

/// The sum a tail marker on segment `t` names in a file of plaintext
/// `size`: the committed sum of `t` and of every later segment, walked as
/// the check walks them (12.4).
fn tail_sum(file: &File, key: &SummaryKey, st: &SumState, t: u64, size: u64) -> Result<[u8; 16], ContentError> {
    let (lc, growing) = (st.last_committed(), st.growing());
    let n = block_count(size);
    let mut buf = Vec::new();
    let mut sum = [0u8; 16];
    for k in t..segments(size) {
        match st.dirty.get(&k) {
            Some(d) => {
                xor(&mut sum, &d.sum);
                if d.kind == KIND_TAIL {
                    break;
                }
            }
            None if growing && k > lc => {}
            None => xor(&mut sum, &committed_sum(file, key, st, k, n, &mut buf)?),
        }
    }
    Ok(sum)
}
