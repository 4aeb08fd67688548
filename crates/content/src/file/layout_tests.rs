//! Unit tests of how writes lay a cipher file out on the backing file
//! system: the extents (FIEMAP) of a small file, and the nonce page
//! written ahead of a new segment's data.
use super::*;
use crate::layout::{self, entry_offset, header_len, page_len, BLOCK};
use warpfs_crypto::{ContentKey, GcmTagger};
use warpfs_keystream::Direct;

/// A cipher file over a new file in `dir` (the test's backing FS).
fn cf_in(dir: &std::path::Path, mode: Mode) -> CipherFile {
    let key = ContentKey::new(&[1u8; 32]).unwrap();
    let c = Arc::new(Cipher::new(
        mode,
        Arc::new(Direct::new(key.clone())),
        GcmTagger::new(&key),
    ));
    CipherFile::open(tempfile::tempfile_in(dir).unwrap(), c, "unit".into()).unwrap()
}

/// The extents of `f` after a sync (FS_IOC_FIEMAP with no extent array:
/// the count only); `None` where the file system has no FIEMAP.
fn extents(f: &std::fs::File) -> Option<u32> {
    use std::os::fd::AsRawFd;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    // struct fiemap without extents: start, length, flags, mapped, count, reserved.
    #[repr(C)]
    struct Fiemap {
        start: u64,
        length: u64,
        flags: u32,
        mapped: u32,
        count: u32,
        reserved: u32,
    }
    let mut m = Fiemap {
        start: 0,
        length: u64::MAX,
        flags: FIEMAP_FLAG_SYNC,
        mapped: 0,
        count: 0,
        reserved: 0,
    };
    // SAFETY: a valid fd and a struct fiemap with room for zero extents.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP as _, &mut m as *mut Fiemap) };
    (r == 0).then_some(m.mapped)
}

#[test]
fn the_zero_page_covers_every_mode() {
    for m in [Mode::Ctr, Mode::Gcm, Mode::Xts] {
        assert!(page_len(m) as usize <= super::write::ZERO_PAGE.len(), "{m:?}");
    }
}

#[test]
fn an_append_writes_the_nonce_page_before_the_data_after_it() {
    let dir = tempfile::tempdir().unwrap();
    for mode in [Mode::Ctr, Mode::Gcm] {
        let f = cf_in(dir.path(), mode);
        // Blocks 0-15 and all of segment 0, then one byte into segment 1.
        let seg1 = (layout::NNODE_BLOCKS + layout::PAGE_BLOCKS) * BLOCK;
        f.write_at(0, &vec![7u8; seg1 as usize]).unwrap();
        let page1 = entry_offset(mode, layout::NNODE_BLOCKS + layout::PAGE_BLOCKS);
        assert_eq!(
            f.backing().metadata().unwrap().len(),
            page1,
            "{mode:?}: ends at segment 1's page"
        );
        f.write_at(seg1, b"x").unwrap();
        // The page is all there: one entry, then zeros (no hole left for
        // a later entry of this segment to allocate).
        let mut page = vec![1u8; page_len(mode) as usize];
        sysio::read_exact_at(&f.file, &mut page, page1).unwrap();
        let e = mode.entry_len();
        assert!(page[..e].iter().any(|&b| b != 0), "{mode:?}: the entry was written");
        assert!(page[e..].iter().all(|&b| b == 0), "{mode:?}: the rest is zeros");
        assert_eq!(f.size(), seg1 + 1);
        let mut back = vec![0u8; 2];
        f.read_at(seg1 - 1, &mut back).unwrap();
        assert_eq!(back, [7, b'x'], "{mode:?}");
        assert!(header_len(mode) < page1);
    }
}

#[test]
fn a_small_file_lies_in_one_extent() {
    let dir = tempfile::tempdir_in(std::env::var_os("WARPFS_EXTENT_DIR").unwrap_or_else(|| "/var/tmp".into()))
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    for mode in [Mode::Ctr, Mode::Gcm] {
        let small = cf_in(dir.path(), mode);
        small.write_at(0, &[3u8; 12_000]).unwrap();
        let Some(n) = extents(&small.file) else {
            warpfs_testkit::skip(format!("{}: no FIEMAP on this file system", dir.path().display()));
            return;
        };
        if n == 0 {
            warpfs_testkit::skip(format!("{}: FIEMAP maps no extents here", dir.path().display()));
            return;
        }
        // A reservation of the nnode's entries allocated its page apart
        // from the data written beside it: 2 extents.
        assert_eq!(n, 1, "{mode:?}: a 12 kB file in {n} extents");
    }
}
