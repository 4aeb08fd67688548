//! What `ctr` (no integrity) lets someone who can write CIPHERDIR do,
//! shown through a mount (SECURITY.md "Not protected"): whole blocks cut
//! and pasted between positions and files, and old blocks put back, read
//! as the plaintext they were written with, without an error.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

fn backing_by_len(v: &Volume, len: u64) -> PathBuf {
    let found: Vec<PathBuf> = v
        .backing_paths()
        .into_iter()
        .filter(|p| p.is_file() && fs::metadata(p).unwrap().len() == len)
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

fn copy_block(from: &Path, fb: u64, to: &Path, tb: u64, mode: Mode) {
    let (src, dst) = (
        File::open(from).unwrap(),
        OpenOptions::new().write(true).open(to).unwrap(),
    );
    let mut d = vec![0u8; BLOCK as usize];
    let mut e = vec![0u8; mode.entry_size() as usize];
    src.read_exact_at(&mut d, mode.block_data_offset(fb)).unwrap();
    src.read_exact_at(&mut e, mode.block_entry_offset(fb)).unwrap();
    dst.write_all_at(&d, mode.block_data_offset(tb)).unwrap();
    dst.write_all_at(&e, mode.block_entry_offset(tb)).unwrap();
}

#[test]
fn ctr_blocks_cut_and_pasted_read_as_the_original() {
    require_fuse!();
    let mode = Mode::Ctr;
    let mut v = Volume::new(mode);
    let mut rng = Rng::for_test("malleable");
    let (a, b) = (rng.bytes(3 * BLOCK as usize), rng.bytes(4 * BLOCK as usize));
    write_file(&v.p("a"), &a);
    write_file(&v.p("b"), &b);
    v.unmount();
    let (pa, pb) = (
        backing_by_len(&v, mode.backing_len(3 * BLOCK)),
        backing_by_len(&v, mode.backing_len(4 * BLOCK)),
    );
    let old_b = fs::read(&pb).unwrap();
    v.mount();
    let newb = rng.bytes(BLOCK as usize);
    let f = open_rw(&v.p("b"));
    write_at(&f, 0, &newb).unwrap();
    f.sync_all().unwrap();
    drop(f);
    v.unmount();
    // a's block 1 pasted into b's block 2 and into a's block 0; b's block 0
    // put back as it was before the rewrite.
    copy_block(&pa, 1, &pb, 2, mode);
    copy_block(&pa, 1, &pa, 0, mode);
    let tmp = v.root().join("old-b");
    fs::write(&tmp, &old_b).unwrap();
    copy_block(&tmp, 0, &pb, 0, mode);
    v.mount();
    let (ga, gb) = (fs::read(v.p("a")).unwrap(), fs::read(v.p("b")).unwrap());
    let blk = |x: &[u8], i: usize| x[i * BLOCK as usize..(i + 1) * BLOCK as usize].to_vec();
    assert_bytes_eq(&blk(&gb, 2), &blk(&a, 1), "a's block 1 pasted into b reads as itself");
    assert_bytes_eq(
        &blk(&ga, 0),
        &blk(&a, 1),
        "a's block 1 pasted to block 0 reads as itself",
    );
    assert_bytes_eq(
        &blk(&gb, 0),
        &blk(&b, 0),
        "b's old block 0 put back reads as the old plaintext",
    );
    assert!(!v.log().contains("ERROR"), "ctr reports nothing; log:\n{}", v.log());
}
