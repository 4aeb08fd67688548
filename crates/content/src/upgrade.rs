//! Giving a cipher file written without a file summary (header version 1)
//! its summary in place, for `warpfs upgrade` (FORMAT.md 12.6).
//!
//! A version 1 file's entry slots are all zero and the blocks' associated
//! data (file ID ‖ block number) does not name the header's version, so
//! no block moves: the file's record (FORMAT.md 12.2) is written into the
//! slots of nnode entries 0–7 and synced, and only then the header's
//! version becomes 2 and is synced. A crash before the second write
//! leaves a version 1 header, whose slots a conversion simply writes
//! again (it never reads them); after it, a file that verifies. Blocks
//! are not decrypted: the summary vouches for the entries as they are.

use crate::header::{self, Header};
use crate::layout::{block_count, entry_offset, plain_size};
use crate::summary::{current_sum, keeping_mtime, read_raw, scatter, segments, Record};
use crate::{sysio, ContentError, Mode};
use std::fs::File;
use warpfs_crypto::SummaryKey;

/// The commit sequence number of the record a conversion writes (a new
/// file's first commit has the same).
pub const FIRST_SEQ: u64 = 1;

/// What [`convert`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converted {
    /// An empty file: no header, no summary (FORMAT.md 12.3).
    Empty,
    /// Its header has version 2 already: left as it is.
    Already,
    /// Given its summary; its plaintext size.
    Now(u64),
}

/// Give `file` (opened read-write) its summary under `key`: see the
/// module. A header that does not parse, or is not of the `gcm` layout,
/// is an error and nothing is written.
pub fn convert(file: &File, key: &SummaryKey) -> Result<Converted, ContentError> {
    convert_with(file, key, || {})
}

/// [`convert`], calling `between` once the record is durable and before
/// the header changes (crash tests stop there).
pub fn convert_with(file: &File, key: &SummaryKey, between: impl FnOnce()) -> Result<Converted, ContentError> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Converted::Empty);
    }
    let mut h = [0u8; header::LEN];
    sysio::read_exact_at(file, &mut h, 0)?;
    let mut hdr = Header::parse(&h)?;
    if hdr.mode != Mode::Gcm {
        return Err(ContentError::corrupt(format!(
            "cipher file mode {:?} has no nonce entries to hold a summary",
            hdr.mode
        )));
    }
    if hdr.summary {
        return Ok(Converted::Already);
    }
    let size = plain_size(Mode::Gcm, len)?;
    let n = block_count(size);
    let mut buf = Vec::new();
    let mut sum = [0u8; 16];
    for k in 0..segments(size) {
        let s = current_sum(file, key, k, n, &mut buf)?;
        for (a, b) in sum.iter_mut().zip(s) {
            *a ^= b;
        }
    }
    let rec = Record::sealed(key, &hdr.file_id, FIRST_SEQ, size, &sum);
    read_raw(file, 0, 8, &mut buf)?;
    scatter(&rec.to_bytes(), &mut buf);
    // The file's modification time stays: its content does not change.
    keeping_mtime(file, || sysio::write_all_at(file, &buf, entry_offset(Mode::Gcm, 0)))?;
    file.sync_data()?;
    between();
    hdr.summary = true;
    keeping_mtime(file, || sysio::write_all_at(file, &hdr.to_bytes(), 0))?;
    file.sync_data()?;
    Ok(Converted::Now(size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::BLOCK;
    use crate::{Cipher, CipherFile, Keyring};
    use std::os::unix::fs::FileExt;
    use std::sync::Arc;
    use warpfs_crypto::{ContentKey, GcmTagger, MasterKey};
    use warpfs_keystream::Direct;

    fn ring(summary: bool) -> Arc<Keyring> {
        let key = ContentKey::new(&[1u8; 32]).unwrap();
        let tagger = GcmTagger::new(&key);
        let cipher = Arc::new(Cipher::new(Mode::Gcm, Arc::new(Direct::new(key)), tagger));
        let sk = summary.then(|| Arc::new(SummaryKey::derive(&MasterKey::from_bytes(&[3; 32]).unwrap())));
        Arc::new(Keyring::new(cipher, None).with_summary(sk))
    }

    fn skey() -> SummaryKey {
        SummaryKey::derive(&MasterKey::from_bytes(&[3; 32]).unwrap())
    }

    /// Plaintext of `len` bytes that differs block by block.
    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i / 7 % 251) as u8).collect()
    }

    /// A version 1 file (no summary) holding `data`, with a hole: the
    /// backing file.
    fn v1_file(data: &[u8]) -> File {
        let f = tempfile::tempfile().unwrap();
        let cf = CipherFile::open(f.try_clone().unwrap(), ring(false), "unit".into()).unwrap();
        cf.write_at(0, data).unwrap();
        cf.sync(false).unwrap();
        f
    }

    /// Read the whole file through a volume with summaries (a file whose
    /// summary fails reads as EIO).
    fn read_v2(f: &File) -> Result<Vec<u8>, ContentError> {
        let cf = CipherFile::open(f.try_clone()?, ring(true), "unit".into())?;
        let mut out = vec![0u8; cf.size() as usize];
        let mut done = 0;
        while done < out.len() {
            let k = cf.read_at(done as u64, &mut out[done..])?;
            assert!(k > 0);
            done += k;
        }
        Ok(out)
    }

    fn version(f: &File) -> u16 {
        let mut h = [0u8; 2];
        f.read_exact_at(&mut h, 4).unwrap();
        u16::from_le_bytes(h)
    }

    #[test]
    fn a_converted_file_reads_back_and_verifies() {
        // The nnode, one whole nonce page and a block of the next, with a
        // hole (never-written blocks) between.
        let mut d = data(70_000);
        d.extend(vec![0u8; 20 * BLOCK as usize]);
        d.extend(data(1_200_000 - d.len()));
        let f = v1_file(&d);
        CipherFile::open(f.try_clone().unwrap(), ring(false), "unit".into()).unwrap();
        assert!(read_v2(&f).is_err(), "a version 1 file is refused with summaries");
        assert_eq!(convert(&f, &skey()).unwrap(), Converted::Now(d.len() as u64));
        assert_eq!(version(&f), 2);
        assert_eq!(read_v2(&f).unwrap(), d);
        // Converted once only.
        assert_eq!(convert(&f, &skey()).unwrap(), Converted::Already);
        // Without summaries it is refused now.
        assert!(CipherFile::open(f.try_clone().unwrap(), ring(false), "unit".into()).is_err());
        assert_eq!(
            convert(&tempfile::tempfile().unwrap(), &skey()).unwrap(),
            Converted::Empty
        );
    }

    #[test]
    fn a_half_converted_file_is_converted_again() {
        let d = data(300_000);
        let f = v1_file(&d);
        let stopped = std::cell::Cell::new(false);
        convert_with(&f, &skey(), || stopped.set(true)).unwrap();
        assert!(stopped.get());
        // A crash between the record and the header: version 1 with a
        // record in its slots, a stale one here (another size and seq).
        f.write_all_at(&1u16.to_le_bytes(), 4).unwrap();
        let mut e = [0u8; 4];
        for j in 0..8u64 {
            e.copy_from_slice(&[0x5a ^ j as u8; 4]);
            f.write_all_at(&e, entry_offset(Mode::Gcm, j) + 12).unwrap();
        }
        assert!(read_v2(&f).is_err());
        assert_eq!(convert(&f, &skey()).unwrap(), Converted::Now(d.len() as u64));
        assert_eq!(read_v2(&f).unwrap(), d);
    }

    #[test]
    fn a_conversion_stopped_between_its_writes_is_done_again() {
        let d = data(200_000);
        let f = v1_file(&d);
        let stop = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            convert_with(&f, &skey(), || std::panic::resume_unwind(Box::new("stopped")))
        }));
        assert!(stop.is_err());
        assert_eq!(version(&f), 1, "the header changes last");
        assert_eq!(convert(&f, &skey()).unwrap(), Converted::Now(d.len() as u64));
        assert_eq!(read_v2(&f).unwrap(), d);
    }

    #[test]
    fn after_conversion_a_rolled_back_block_is_found() {
        let d = data(100_000);
        let f = v1_file(&d);
        // Block 3 and its entry as they are now...
        let (eo, dof) = (entry_offset(Mode::Gcm, 3), crate::layout::data_offset(Mode::Gcm, 3));
        let mut old_e = [0u8; 32];
        let mut old_d = vec![0u8; BLOCK as usize];
        f.read_exact_at(&mut old_e, eo).unwrap();
        f.read_exact_at(&mut old_d, dof).unwrap();
        // ...then rewritten, and the volume upgraded.
        let cf = CipherFile::open(f.try_clone().unwrap(), ring(false), "unit".into()).unwrap();
        cf.write_at(3 * BLOCK, &[9u8; 100]).unwrap();
        cf.sync(false).unwrap();
        drop(cf);
        convert(&f, &skey()).unwrap();
        let mut now = d.clone();
        now[3 * BLOCK as usize..3 * BLOCK as usize + 100].fill(9);
        assert_eq!(read_v2(&f).unwrap(), now);
        // The old block put back verifies by its tag, but not the summary.
        let mut e = old_e;
        let mut cur = [0u8; 32];
        f.read_exact_at(&mut cur, eo).unwrap();
        e[12..16].copy_from_slice(&cur[12..16]);
        f.write_all_at(&e, eo).unwrap();
        f.write_all_at(&old_d, dof).unwrap();
        let cf = CipherFile::open(f.try_clone().unwrap(), ring(true), "unit".into()).unwrap();
        let why = cf.summary_failure().expect("the rollback is found");
        assert!(why.contains("does not verify"), "{why}");
        assert_eq!(read_v2(&f).unwrap_err().errno(), libc::EIO);
    }

    #[test]
    fn a_header_that_does_not_parse_is_left_alone() {
        let f = v1_file(&data(5000));
        f.write_all_at(b"XXXX", 0).unwrap();
        let before = std::fs::read(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f))).unwrap();
        assert!(convert(&f, &skey()).is_err());
        let after = std::fs::read(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&f))).unwrap();
        assert_eq!(before, after);
    }
}
