//! `warpfs container`: an XTS-encrypted image exposed as MOUNTPOINT/volume,
//! with ext4 (mkfs.ext4, debugfs, e2fsck) on it, no plaintext in the image,
//! sparse images, TRIM (punch hole), resize and a wrong password.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADER: u64 = 65536;

struct Ct {
    _tmp: tempfile::TempDir,
    img: PathBuf,
    mnt: PathBuf,
    pass: PathBuf,
}

impl Ct {
    fn create(size: &str) -> Ct {
        let tmp = tempfile::Builder::new().prefix("warpfs-ct-").tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (img, mnt, pass) = (root.join("img"), root.join("mnt"), root.join("pw"));
        fs::create_dir(&mnt).unwrap();
        fs::write(&pass, format!("{PASSWORD}\n")).unwrap();
        let o = warpfs(args![
            "container",
            "create",
            "--passfile",
            &pass,
            "--kdf-memory",
            "32768",
            "--kdf-iterations",
            "2",
            "--size",
            size,
            &img
        ]);
        o.expect_ok("container create");
        assert!(o.stdout.contains("master key"), "{o}");
        Ct {
            _tmp: tmp,
            img,
            mnt,
            pass,
        }
    }
    fn open(&self) {
        warpfs(args![
            "container",
            "open",
            "--passfile",
            &self.pass,
            &self.img,
            &self.mnt
        ])
        .expect_ok("container open");
        assert!(is_mounted(&self.mnt));
    }
    fn close(&self) {
        unmount_path(&self.mnt).unwrap();
    }
    fn vol(&self) -> PathBuf {
        self.mnt.join("volume")
    }
}

impl Drop for Ct {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = unmount_path(&self.mnt);
        }
    }
}

fn tool(name: &str, args: &[&str]) -> (i32, String) {
    let o = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name} (install e2fsprogs): {e}"));
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn ext4_on_the_container_survives_close_and_reopen() {
    require_fuse!();
    let ct = Ct::create("64M");
    ct.open();
    let v = ct.vol();
    assert_eq!(fs::metadata(&v).unwrap().len(), 64 << 20);
    let vs = v.to_str().unwrap();
    let (rc, out) = tool("mkfs.ext4", &["-q", "-F", vs]);
    assert_eq!(rc, 0, "mkfs.ext4: {out}");
    let marker = "PlaintextMarker-warpfs-container-Zx81".repeat(200);
    let src = ct.mnt.parent().unwrap().join("src.txt");
    fs::write(&src, &marker).unwrap();
    let (rc, out) = tool("debugfs", &["-w", "-R", &format!("write {} f.txt", src.display()), vs]);
    assert_eq!(rc, 0, "debugfs write: {out}");
    let (rc, out) = tool("debugfs", &["-w", "-R", "mkdir d", vs]);
    assert_eq!(rc, 0, "debugfs mkdir: {out}");
    ct.close();
    ct.open();
    let (rc, out) = tool("e2fsck", &["-fn", ct.vol().to_str().unwrap()]);
    assert_eq!(rc, 0, "e2fsck -fn not clean after reopen:\n{out}");
    let (rc, out) = tool("debugfs", &["-R", "cat f.txt", ct.vol().to_str().unwrap()]);
    assert_eq!(rc, 0);
    assert!(
        out.contains(&marker),
        "file not read back:\n{}",
        &out[..out.len().min(500)]
    );
    ct.close();
    // The image holds no plaintext: not the file, not ext4's magic at its
    // superblock offset, not the marker anywhere.
    let raw = fs::read(&ct.img).unwrap();
    assert!(!contains(&raw, b"PlaintextMarker-warpfs"), "plaintext in the image");
    assert_ne!(
        &raw[(HEADER + 1024 + 56) as usize..][..2],
        &[0x53, 0xef],
        "ext4 magic in the clear"
    );
    assert!(contains(&raw[..4096], b"WRPFCTNR"));
    // Sparse: mkfs and one file touch a few MiB of the 64.
    let m = fs::metadata(&ct.img).unwrap();
    assert_eq!(m.len(), HEADER + (64 << 20));
    assert!(
        m.blocks() * 512 < 32 << 20,
        "image not sparse: {} KiB allocated",
        m.blocks() / 2
    );
}

#[test]
fn punch_hole_zeros_sectors_and_frees_them() {
    require_fuse!();
    let ct = Ct::create("4M");
    ct.open();
    let f = fs::OpenOptions::new().read(true).write(true).open(ct.vol()).unwrap();
    f.write_all_at(&vec![0xabu8; 1 << 20], 0).unwrap();
    f.sync_all().unwrap();
    fallocate(
        &f,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
        8192 + 100,
        3 * 4096,
    )
    .unwrap();
    f.sync_all().unwrap();
    let mut b = vec![0u8; 5 * 4096];
    f.read_exact_at(&mut b, 4096).unwrap();
    drop(f);
    ct.close();
    // [8292, 20580) reads as zeros; around it the data stays.
    let z = (8192 + 100 - 4096)..(8192 + 100 + 3 * 4096 - 4096);
    for (i, &x) in b.iter().enumerate() {
        assert_eq!(x, if z.contains(&i) { 0 } else { 0xab }, "byte {}", i + 4096);
    }
    // The fully covered sectors 3 and 4 are zero (a hole) in the image.
    let img = fs::File::open(&ct.img).unwrap();
    let mut s = vec![1u8; 2 * 4096];
    img.read_exact_at(&mut s, HEADER + 3 * 4096).unwrap();
    assert!(s.iter().all(|&x| x == 0), "punched sectors not zero in the image");
    let mut s2 = vec![0u8; 4096];
    img.read_exact_at(&mut s2, HEADER + 2 * 4096).unwrap();
    assert!(s2.iter().any(|&x| x != 0), "partial sector should stay encrypted data");
    ct.open();
    let mut again = vec![0u8; 5 * 4096];
    fs::File::open(ct.vol())
        .unwrap()
        .read_exact_at(&mut again, 4096)
        .unwrap();
    assert_eq!(again, b);
    ct.close();
}

/// SIGTERM (a shutdown) does not leave the container's mount dead under a
/// program that holds the image open: the mount is detached and served
/// until the image is closed, then the daemon exits and nothing is lost.
#[test]
fn sigterm_with_the_image_open_detaches_and_loses_nothing() {
    require_fuse!();
    use std::time::Duration;
    let ct = Ct::create("1M");
    ct.open();
    let pids = warpfs_pids(b"container", &ct.mnt);
    assert!(!pids.is_empty(), "no container daemon found");
    let f = fs::OpenOptions::new().read(true).write(true).open(ct.vol()).unwrap();
    f.write_all_at(&[0x5a; 8192], 4096).unwrap();
    for p in &pids {
        unsafe { libc::kill(*p, libc::SIGTERM) };
    }
    assert!(
        wait_unmounted(&ct.mnt, Duration::from_secs(15)),
        "still mounted 15 s after SIGTERM"
    );
    assert!(
        pids.iter().any(|p| !pid_gone(*p)),
        "the daemon left while the image was open"
    );
    f.write_all_at(&[0xa5; 4096], 65536).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let alive = wait_pids_gone(&pids, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "daemon {alive:?} still running after the image was closed"
    );
    ct.open();
    assert_eq!(read_vol(&ct.vol(), 4096, 8192), vec![0x5a; 8192]);
    assert_eq!(read_vol(&ct.vol(), 65536, 4096), vec![0xa5; 4096]);
    ct.close();
}

fn read_vol(p: &Path, off: u64, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    fs::File::open(p).unwrap().read_exact_at(&mut b, off).unwrap();
    b
}

#[test]
fn resize_grow_and_shrink() {
    require_fuse!();
    let ct = Ct::create("1M");
    ct.open();
    let f = fs::OpenOptions::new().write(true).open(ct.vol()).unwrap();
    f.write_all_at(b"start", 0).unwrap();
    f.write_all_at(b"end!", (1 << 20) - 4).unwrap();
    f.sync_all().unwrap();
    drop(f);
    ct.close();
    warpfs(args!["container", "resize", "--size", "2M", &ct.img]).expect_ok("grow");
    ct.open();
    assert_eq!(fs::metadata(ct.vol()).unwrap().len(), 2 << 20);
    assert_eq!(read_vol(&ct.vol(), 0, 5), b"start");
    assert_eq!(read_vol(&ct.vol(), (1 << 20) - 4, 4), b"end!");
    assert!(read_vol(&ct.vol(), 1 << 20, 1 << 20).iter().all(|&x| x == 0));
    ct.close();
    warpfs(args!["container", "resize", "--size", "512K", &ct.img]).expect_ok("shrink");
    assert_eq!(fs::metadata(&ct.img).unwrap().len(), HEADER + (512 << 10));
    ct.open();
    assert_eq!(fs::metadata(ct.vol()).unwrap().len(), 512 << 10);
    assert_eq!(read_vol(&ct.vol(), 0, 5), b"start");
    // Writing past the end fails.
    let f = fs::OpenOptions::new().write(true).open(ct.vol()).unwrap();
    assert!(f.write_all_at(b"x", 512 << 10).is_err());
    drop(f);
    ct.close();
    warpfs(args!["container", "resize", "--size", "1000", &ct.img]).expect_code(2, "size not a multiple of 4096");
    let notct = ct.mnt.parent().unwrap().join("plain");
    fs::write(&notct, vec![0u8; 100_000]).unwrap();
    warpfs(args!["container", "resize", "--size", "1M", &notct]).expect_code(11, "resize of a non-container");
    assert_eq!(fs::metadata(&notct).unwrap().len(), 100_000);
}

#[test]
fn wrong_password_is_refused() {
    require_fuse!();
    let ct = Ct::create("1M");
    let bad = ct.mnt.parent().unwrap().join("bad");
    fs::write(&bad, "not the password\n").unwrap();
    warpfs(args!["container", "open", "--passfile", &bad, &ct.img, &ct.mnt]).expect_code(10, "wrong password");
    assert!(!is_mounted(&ct.mnt));
    // create refuses an existing file.
    warpfs(args![
        "container",
        "create",
        "--passfile",
        &ct.pass,
        "--size",
        "1M",
        &ct.img
    ])
    .expect_code(12, "create over an existing file");
}

/// The `container open` daemon keeps its XTS keys on locked pages: memory
/// locks are not inherited across the daemon's fork, so it locks them
/// again there (its `VmLck` would be 0 otherwise).
#[test]
fn the_container_daemon_keeps_its_keys_on_locked_pages() {
    require_fuse!();
    let c = Ct::create("4M");
    c.open();
    let pids = warpfs_pids(b"open", &c.mnt);
    assert_eq!(pids.len(), 1, "the container daemon: {pids:?}");
    let status = fs::read_to_string(format!("/proc/{}/status", pids[0])).unwrap();
    let locked_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmLck:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        locked_kb > 0,
        "the container daemon holds no locked memory, so its XTS keys are swappable"
    );
    // Still serving after the check.
    let f = fs::OpenOptions::new().read(true).write(true).open(c.vol()).unwrap();
    f.write_all_at(b"x", 0).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"x");
    drop(f);
    c.close();
}

/// A container image frozen by an earlier warpfs (`tests/ctkit/freeze.sh`)
/// keeps opening to the same content: the pattern in two runs, zeros in
/// the hole between them and after them (format changes that would make
/// existing images unreadable fail here).
#[test]
fn a_frozen_container_image_opens_to_its_content() {
    require_fuse!();
    let frozen = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ctkit/v1");
    let tmp = tempfile::Builder::new().prefix("warpfs-ct-").tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let ct = Ct {
        img: root.join("image"),
        mnt: root.join("mnt"),
        pass: frozen.join("password.txt"),
        _tmp: tmp,
    };
    fs::copy(frozen.join("image"), &ct.img).unwrap();
    fs::create_dir(&ct.mnt).unwrap();
    ct.open();
    let got = fs::read(ct.vol()).unwrap();
    ct.close();
    // `seq 1 7 ...`: each number and a newline.
    let pattern: Vec<u8> = (0..)
        .map(|i| format!("{}\n", 1 + 7 * i))
        .flat_map(String::into_bytes)
        .take(200_000)
        .collect();
    let mut want = vec![0u8; 256 * 1024];
    want[..40_000].copy_from_slice(&pattern[..40_000]);
    want[131_072..200_000].copy_from_slice(&pattern[131_072..200_000]);
    assert_eq!(got.len(), want.len(), "size of the frozen container's volume");
    let first_bad = got.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(
        first_bad, None,
        "the frozen container reads differently from its first differing byte"
    );
}
