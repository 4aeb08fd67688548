//! `warpfs fsck`: files are written through a real mount,
//! the volume is unmounted, the cipher dir is damaged at the FORMAT.md
//! offsets, and fsck must name the plaintext path and block, exit 20 (problems),
//! 21 (all repaired), 22 (mounted), 10/11 (password/config), and repair only
//! what it is asked to without losing readable data.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mode_tests!(clean_volume_is_clean, bad_header_is_reported);

// xts files have no nonce entries, and every backing length past the header
// is a valid size (FORMAT.md 7), so nonces and torn tails are gcm/ctr only.
mode_tests!(
    nonce: repeated_nonce_within_a_file_is_reported,
    repeated_nonce_across_files_is_reported,
    torn_tail_is_reported_and_cut_without_data_loss,
);

fn fsck(v: &Volume, extra: &[&str]) -> Out {
    let mut a = args!["fsck", "--passfile", &v.passfile];
    a.extend(extra.iter().map(std::ffi::OsString::from));
    a.push(v.cipher.clone().into());
    warpfs(&a)
}

fn data(seed: u64, len: usize) -> Vec<u8> {
    Rng::new(seed).bytes(len)
}

/// The backing files (not dirs, not reserved names) directly in `dir`.
fn backing_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            !n.starts_with("warpfs.") && fs::symlink_metadata(p).unwrap().is_file()
        })
        .collect();
    v.sort();
    v
}

/// A mounted volume with `/d/f.bin` (`blocks` full blocks) written, then
/// unmounted; returns the volume, the plaintext and the backing file.
fn one_file(mode: Mode, blocks: usize) -> (Volume, Vec<u8>, PathBuf) {
    one_file_in(Volume::init_with(mode, &["--file-summary", "off"]), blocks)
}

/// [`one_file`] in the volume `v` (initialised, not mounted).
fn one_file_in(mut v: Volume, blocks: usize) -> (Volume, Vec<u8>, PathBuf) {
    v.mount();
    fs::create_dir(v.p("d")).unwrap();
    let want = data(7, blocks * BLOCK as usize);
    write_file(&v.p("d/f.bin"), &want);
    v.unmount();
    let dirs: Vec<PathBuf> = v.root_backing_entries().into_iter().filter(|p| p.is_dir()).collect();
    assert_eq!(dirs.len(), 1);
    let files = backing_files(&dirs[0]);
    assert_eq!(files.len(), 1);
    (v, want, files[0].clone())
}

fn flip(p: &Path, off: u64) {
    let f = OpenOptions::new().read(true).write(true).open(p).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    f.write_all_at(&[b[0] ^ 0x04], off).unwrap();
}

fn copy_entry(p: &Path, mode: Mode, from_block: u64, to: &Path, to_block: u64) {
    let e = mode.entry_size() as usize;
    let src = fs::read(p).unwrap();
    let off = mode.block_entry_offset(from_block) as usize;
    let ent = src[off..off + e].to_vec();
    let f = OpenOptions::new().write(true).open(to).unwrap();
    f.write_all_at(&ent, mode.block_entry_offset(to_block)).unwrap();
}

fn clean_volume_is_clean(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    fs::create_dir_all(v.p("a/b")).unwrap();
    write_file(&v.p("a/b/big"), &data(1, 300 * BLOCK as usize + 123));
    write_file(&v.p("small"), b"hello");
    write_file(&v.p("empty"), b"");
    write_file(&v.p("L".repeat(200)), b"long name");
    fs::hard_link(v.p("small"), v.p("a/hard")).unwrap();
    std::os::unix::fs::symlink("small", v.p("link")).unwrap();
    let f = fs::File::create(v.p("sparse")).unwrap();
    f.write_all_at(b"end", 40 * BLOCK).unwrap();
    drop(f);
    v.unmount();
    let o = fsck(&v, &[]);
    o.expect_ok("fsck of a clean volume");
    assert!(o.stdout.contains("fsck: clean"), "{o}");
    assert!(o.stdout.contains("0 problems"), "{o}");
    // Every file once (the hard link is not scanned twice), the symlink checked.
    assert!(o.stdout.contains(" 5 files, 1 symlinks"), "{o}");
}

#[test]
fn example_volumes_are_clean() {
    for name in ["v1-gcm", "v1-ctr"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/volumes").join(name);
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&src.join("cipher"), &tmp.path().join("cipher"));
        let o = warpfs(args![
            "fsck",
            "--passfile",
            src.join("password.txt"),
            tmp.path().join("cipher")
        ]);
        o.expect_ok(name);
        assert!(o.stdout.contains("fsck: clean"), "{o}");
    }
}

#[test]
fn flipped_bit_is_reported_by_path_and_block_and_nothing_changes() {
    require_fuse!();
    let (v, _, back) = one_file(Mode::Gcm, 10);
    flip(&back, Mode::Gcm.block_data_offset(5) + 100);
    let before = fs::read(&back).unwrap();
    let o = fsck(&v, &[]);
    o.expect_code(20, "flipped bit");
    assert!(
        o.stdout.contains("problem: /d/f.bin: block 5: GCM tag does not verify"),
        "{o}"
    );
    assert!(o.stdout.contains("[repairable with --zero-bad-blocks]"), "{o}");
    assert_eq!(o.stdout.matches("problem:").count(), 1, "{o}");
    // --repair is only the repairs that lose nothing: the block stays.
    fsck(&v, &["--repair"]).expect_code(20, "--repair does not zero blocks");
    assert_eq!(
        fs::read(&back).unwrap(),
        before,
        "fsck without --zero-bad-blocks changed the file"
    );
}

mod zero_bad_blocks_makes_the_block_read_as_zeros {
    #[test]
    fn without_summaries() {
        super::zero_bad_blocks_makes_the_block_read_as_zeros(&["--file-summary", "off"])
    }
    /// The file's summary is sealed again over the zeroed entry (it
    /// verified before), so the file stays readable.
    #[test]
    fn with_summaries() {
        super::zero_bad_blocks_makes_the_block_read_as_zeros(&["--file-summary", "on"])
    }
}

fn zero_bad_blocks_makes_the_block_read_as_zeros(init: &[&str]) {
    require_fuse!();
    let (mut v, want, back) = one_file_in(Volume::init_with(Mode::Gcm, init), 10);
    flip(&back, Mode::Gcm.block_data_offset(3) + 7);
    let o = fsck(&v, &["--zero-bad-blocks"]);
    o.expect_code(21, "zero bad blocks");
    assert!(o.stdout.contains("/d/f.bin: block 3:"), "{o}");
    assert!(o.stdout.contains("[repaired: block made a hole"), "{o}");
    fsck(&v, &[]).expect_ok("after zeroing");
    v.mount();
    let got = fs::read(v.p("d/f.bin")).unwrap();
    let b = BLOCK as usize;
    assert_eq!(got.len(), want.len());
    assert_bytes_eq(&got[..3 * b], &want[..3 * b], "blocks before");
    assert!(got[3 * b..4 * b].iter().all(|&x| x == 0), "block 3 reads as zeros");
    assert_bytes_eq(&got[4 * b..], &want[4 * b..], "blocks after");
}

fn repeated_nonce_within_a_file_is_reported(mode: Mode) {
    require_fuse!();
    let (v, _, back) = one_file(mode, 6);
    copy_entry(&back, mode, 1, &back, 4);
    let o = fsck(&v, &[]);
    o.expect_code(20, "repeated nonce");
    assert!(
        o.stdout
            .contains("/d/f.bin: block 4: nonce repeats the one of block 1 of this file"),
        "{o}"
    );
}

fn repeated_nonce_across_files_is_reported(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    write_file(&v.p("a"), &data(1, 3 * BLOCK as usize));
    write_file(&v.p("b"), &data(2, 3 * BLOCK as usize));
    v.unmount();
    let files = backing_files(&v.cipher);
    assert_eq!(files.len(), 2);
    // Which backing file is which plaintext name is unknown: copy each way
    // would double the finding; copy file 0's block 2 entry over file 1's block 1.
    copy_entry(&files[0], mode, 2, &files[1], 1);
    let o = fsck(&v, &[]);
    o.expect_code(20, "nonce across files");
    let re = ["/a", "/b"].iter().any(|other| {
        o.stdout
            .contains(&format!("block 1: nonce repeats the one of {other} block 2"))
    });
    assert!(re, "{o}");
}

#[test]
fn orphan_sidecar_is_reported_and_removed_when_asked() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("x".repeat(220)), b"long");
    write_file(&v.p("keep"), b"short");
    v.unmount();
    let long: Vec<PathBuf> = v
        .root_backing_entries()
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("warpfs.long.") && !n.ends_with(".name")
        })
        .collect();
    assert_eq!(long.len(), 1);
    fs::remove_file(&long[0]).unwrap();
    let o = fsck(&v, &[]);
    o.expect_code(20, "orphan sidecar");
    assert!(o.stdout.contains("orphan long-name sidecar"), "{o}");
    assert!(o.stdout.contains("[repairable with --remove-orphan-sidecars]"), "{o}");
    let o = fsck(&v, &["--remove-orphan-sidecars"]);
    o.expect_code(21, "remove orphan");
    let side = PathBuf::from(format!("{}.name", long[0].display()));
    assert!(!side.exists());
    fsck(&v, &[]).expect_ok("after removal");
}

#[test]
fn undecodable_names_and_missing_dir_iv_are_reported() {
    require_fuse!();
    let mut v = Volume::new(Mode::Ctr);
    fs::create_dir(v.p("sub")).unwrap();
    write_file(&v.p("sub/f"), b"x");
    v.unmount();
    fs::write(v.cipher.join("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), b"").unwrap();
    let sub = v.root_backing_entries().into_iter().find(|p| p.is_dir()).unwrap();
    fs::remove_file(sub.join("warpfs.diriv")).unwrap();
    let o = fsck(&v, &[]);
    o.expect_code(20, "bad names");
    assert!(
        o.stdout
            .contains("problem: /AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.warpfs-undecryptable: undecodable name"),
        "{o}"
    );
    assert!(o.stdout.contains("problem: /sub: directory IV: warpfs.diriv"), "{o}");
}

fn torn_tail_is_reported_and_cut_without_data_loss(mode: Mode) {
    require_fuse!();
    // (With file summaries, cutting a committed file is also a truncation
    // behind warpfs's back; a real crash while extending leaves a grow
    // marker: tests/power_loss.rs.)
    let (mut v, want, back) = one_file(mode, 20);
    // A crash while extending past the nnode: the file ends half-way into
    // the first nonce page (FORMAT.md 3.4).
    let good = mode.backing_len(16 * BLOCK);
    let torn = good + mode.page_size() / 2;
    OpenOptions::new()
        .write(true)
        .open(&back)
        .unwrap()
        .set_len(torn)
        .unwrap();
    let o = fsck(&v, &[]);
    o.expect_code(20, "torn tail");
    assert!(o.stdout.contains("/d/f.bin: torn tail"), "{o}");
    assert!(o.stdout.contains("[repairable with --fix-torn-tails]"), "{o}");
    fsck(&v, &["--fix-torn-tails"]).expect_code(21, "fix torn tail");
    assert_eq!(fs::metadata(&back).unwrap().len(), good);
    fsck(&v, &[]).expect_ok("after the fix");
    v.mount();
    let got = fs::read(v.p("d/f.bin")).unwrap();
    assert_bytes_eq(&got, &want[..16 * BLOCK as usize], "readable data kept");
}

fn bad_header_is_reported(mode: Mode) {
    require_fuse!();
    let (v, _, back) = one_file(mode, 2);
    flip(&back, 7); // flags byte
    let o = fsck(&v, &[]);
    o.expect_code(20, "bad header");
    assert!(o.stdout.contains("/d/f.bin: bad header: unknown header flags"), "{o}");
}

#[test]
fn wrong_password_and_bad_config_use_the_usual_codes() {
    let v = Volume::init(Mode::Gcm);
    fs::write(&v.passfile, "not the password\n").unwrap();
    fsck(&v, &[]).expect_code(10, "wrong password");
    let conf = v.cipher.join("warpfs.conf");
    let mut perm = fs::metadata(&conf).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o600);
    fs::set_permissions(&conf, perm).unwrap();
    fs::write(&conf, b"{ not json").unwrap();
    fsck(&v, &[]).expect_code(11, "bad config");
}

#[test]
fn a_mounted_volume_is_refused_unless_forced() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    write_file(&v.p("f"), b"data");
    let o = fsck(&v, &["--repair"]);
    o.expect_code(22, "mounted");
    assert!(o.stderr.contains("is mounted at"), "{o}");
    let o = fsck(&v, &["--force"]);
    assert!(matches!(o.code, Some(0) | Some(20)), "{o}");
    assert!(o.stderr.contains("checking anyway"), "{o}");
}

/// With file summaries (FORMAT.md 12) a block rolled back together with its
/// nonce entry is reported (and reads as EIO), and a whole-file rollback
/// is not.
#[test]
fn rolled_back_block_is_reported_with_summaries() {
    require_fuse!();
    let mode = Mode::Gcm;
    let (mut v, want, back) = one_file_in(Volume::init_with(mode, &["--file-summary", "on"]), 20);
    let old = fs::read(&back).unwrap();
    v.mount();
    let f = OpenOptions::new().write(true).open(v.p("d/f.bin")).unwrap();
    f.write_all_at(&[0x55; 4096], 5 * BLOCK).unwrap();
    f.sync_all().unwrap();
    drop(f);
    v.unmount();
    let (e, d) = (mode.block_entry_offset(5), mode.block_data_offset(5));
    let f = OpenOptions::new().write(true).open(&back).unwrap();
    f.write_all_at(&old[e as usize..(e + 32) as usize], e).unwrap();
    f.write_all_at(&old[d as usize..(d + BLOCK) as usize], d).unwrap();
    drop(f);
    let o = fsck(&v, &[]);
    o.expect_code(20, "rolled back block");
    assert!(o.stdout.contains("/d/f.bin: file summary does not verify"), "{o}");
    v.mount();
    assert_errno(fs::read(v.p("d/f.bin")), libc::EIO, "rolled back block");
    v.unmount();
    fs::write(&back, &old).unwrap();
    fsck(&v, &[]).expect_ok("a whole-file rollback is not detected");
    v.mount();
    assert_bytes_eq(&fs::read(v.p("d/f.bin")).unwrap(), &want, "old version");
}

/// `--zero-bad-blocks` saves what it changes to `CIPHERDIR/warpfs.fsck.undo-1`
/// first; `fsck --undo` puts the file back byte for byte and removes it; an
/// altered undo file is refused and changes nothing.
#[test]
fn zeroed_blocks_go_to_an_undo_file_that_fsck_undo_puts_back() {
    require_fuse!();
    let (v, _, back) = one_file(Mode::Gcm, 10);
    flip(&back, Mode::Gcm.block_data_offset(3) + 7);
    let damaged = fs::read(&back).unwrap();
    fsck(&v, &["--undo"]).expect_code(1, "no undo file yet");
    let o = fsck(&v, &["--zero-bad-blocks"]);
    o.expect_code(21, "zero bad blocks");
    let undo = v.cipher.join("warpfs.fsck.undo-1");
    assert!(
        o.stdout.contains(&format!("saved in {}", undo.display())) && o.stdout.contains("--undo="),
        "{o}"
    );
    let zeroed = fs::read(&back).unwrap();
    assert!(zeroed != damaged);
    // An undo file of another run is noted, not a problem.
    let o = fsck(&v, &[]);
    o.expect_ok("after zeroing");
    assert!(
        o.stdout.contains("note: ") && o.stdout.contains("warpfs.fsck.undo-1"),
        "{o}"
    );
    // Altered: refused, nothing written, kept.
    let good = fs::read(&undo).unwrap();
    let mut bad = good.clone();
    let at = bad.len() - 2000;
    bad[at] ^= 1;
    fs::write(&undo, &bad).unwrap();
    let o = fsck(&v, &["--undo"]);
    o.expect_code(20, "altered undo file");
    assert!(
        o.stderr.contains("refused") && o.stderr.contains("MAC does not verify"),
        "{o}"
    );
    assert!(fs::read(&back).unwrap() == zeroed);
    // Genuine: the block is back as it was.
    fs::write(&undo, &good).unwrap();
    let o = fsck(&v, &[&format!("--undo={}", undo.display())]);
    o.expect_ok("fsck --undo");
    assert!(o.stdout.contains("1 block(s) put back"), "{o}");
    assert!(fs::read(&back).unwrap() == damaged, "not put back exactly");
    assert!(!undo.exists(), "a spent undo file is removed");
    fsck(&v, &[]).expect_code(20, "the bad block is back");
}

/// After a rekey, a file put back from a backup (blocks of the old key
/// generation) whose header was changed to name the new one: its blocks
/// read as errors, but fsck tries both generations and never zeroes them.
#[test]
fn zero_bad_blocks_never_wipes_blocks_of_the_other_key_generation() {
    require_fuse!();
    let (v, _, back) = one_file(Mode::Gcm, 40);
    let old = fs::read(&back).unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("rekey").arg("--passfile").arg(&v.passfile).arg(&v.cipher);
    run_cmd(cmd, std::time::Duration::from_secs(300)).expect_ok("rekey");
    // The old copy, its header saying generation 1.
    let mut put_back = old.clone();
    put_back[24..28].copy_from_slice(&1u32.to_le_bytes());
    fs::write(&back, &put_back).unwrap();
    let o = fsck(&v, &["--zero-bad-blocks"]);
    o.expect_code(20, "blocks of the other generation");
    assert!(
        o.stdout
            .contains("/d/f.bin: blocks 0..39: verify under key generation 0, not the one the header names"),
        "{o}"
    );
    assert!(!o.stdout.contains("repaired: block made a hole"), "{o}");
    assert!(fs::read(&back).unwrap() == put_back, "fsck wiped readable blocks");
    assert!(!v.cipher.join("warpfs.fsck.undo-1").exists());
}
