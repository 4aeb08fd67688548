//! Revocation on a mounted volume: `key remove --rekey` while files are
//! open and another process keeps writing, renaming and listing; every
//! open file, directory handle and held directory keeps working through
//! it, the tree is the same after, and a config copy from before, opened
//! with the removed password, decrypts nothing (through the library). A
//! mount killed in either part, and a `warpfs` killed while its mount
//! works, leave a rekey that `warpfs rekey` finishes.

use super::revoke::{ivs_of, nothing_decrypts, remove_rekey, revocable};
use super::*;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The files a busy writer left (name → bytes) and what went wrong.
type Left = (BTreeMap<String, Vec<u8>>, Vec<String>);

/// Writes, reads back, renames and lists files under `busy/` until told
/// to stop; returns every file it left and what went wrong.
fn busy(dir: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Left> {
    std::thread::spawn(move || {
        let (mut left, mut errors) = (BTreeMap::new(), Vec::new());
        let mut i = 0u32;
        while !stop.load(Ordering::Relaxed) || i < 20 {
            let body: Vec<u8> = (0..5000 + i * 37).map(|b| (b as u8) ^ (i as u8)).collect();
            let (a, b) = (dir.join(format!("n{i}")), format!("m{i}"));
            let r = fs::write(&a, &body)
                .and_then(|()| fs::read(&a))
                .and_then(|got| {
                    if got == body {
                        Ok(())
                    } else {
                        Err(std::io::Error::other("read back other bytes"))
                    }
                })
                .and_then(|()| fs::rename(&a, dir.join(&b)))
                .and_then(|()| fs::read_dir(&dir).map(|d| d.count()));
            match r {
                Ok(_) => {
                    left.insert(b, body);
                }
                Err(e) => errors.push(format!("file {i}: {e}")),
            }
            i += 1;
        }
        (left, errors)
    })
}

#[test]
fn key_remove_rekey_on_a_mount_moves_every_key_while_files_stay_open_and_busy() {
    require_fuse!();
    let (mut v, gone, want) = revocable();
    let old_conf = v.root().join("old.conf");
    fs::copy(v.cipher.join("warpfs.conf"), &old_conf).unwrap();
    let old_ivs = ivs_of(&v.cipher);
    v.mount();
    // A directory read over several requests, a file being read, one
    // being written, a directory held open, and a writer that does not
    // stop.
    fs::create_dir(v.p("many")).unwrap();
    for i in 0..2000 {
        fs::write(v.p(format!("many/entry-with-a-longish-name-{i:04}")), b"x").unwrap();
    }
    fs::create_dir(v.p("busy")).unwrap();
    let big = fs::read(v.p("d/e/b.bin")).unwrap();
    let mut reader = fs::File::open(v.p("d/e/b.bin")).unwrap();
    let mut head = vec![0u8; 4096];
    reader.read_exact(&mut head).unwrap();
    let mut writer = fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(v.p("d/w.bin"))
        .unwrap();
    writer.write_all(&[1u8; 10000]).unwrap();
    let mut listing = fs::read_dir(v.p("many")).unwrap();
    let first = listing.next().unwrap().unwrap().file_name();
    let held = fs::File::open(v.p("d/e")).unwrap();
    // Symlinks the kernel holds: each is made anew under the new keys.
    let links: Vec<u64> = ["link", "d/up"]
        .iter()
        .map(|l| std::os::unix::fs::MetadataExt::ino(&fs::symlink_metadata(v.p(l)).unwrap()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = busy(v.p("busy"), stop.clone());
    std::thread::sleep(Duration::from_millis(200));
    let o = remove_rekey(&v, "2", &[]);
    o.expect_ok("key remove --rekey on a mount");
    assert!(o.stdout.contains("online"), "{o}");
    assert!(o.stderr.contains("stays mounted"), "{o}");
    assert!(o.stderr.contains("every backing name changes"), "{o}");
    assert!(
        !Config::load(&v.cipher).unwrap().volume_rekey_under_way(),
        "the config records the end"
    );
    stop.store(true, Ordering::Relaxed);
    let (left, errors) = worker.join().unwrap();
    assert!(errors.is_empty(), "the busy writer failed: {errors:?}");
    // Every backing name changed under the open handles.
    let now_ivs = ivs_of(&v.cipher);
    assert!(
        old_ivs.iter().all(|iv| !now_ivs.contains(iv)),
        "a directory kept its IV"
    );
    // The open files go on.
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(
        head == big[..4096] && rest == big[4096..],
        "the file being read changed"
    );
    writer.write_all(&[2u8; 5000]).unwrap();
    writer.sync_all().unwrap();
    writer.seek(SeekFrom::Start(0)).unwrap();
    let mut w = Vec::new();
    writer.read_to_end(&mut w).unwrap();
    assert!(w.len() == 15000 && w[..10000].iter().all(|&b| b == 1) && w[10000..].iter().all(|&b| b == 2));
    // The directory read before goes on where it was, every name once
    // (a lookup in it first, so that the kernel reads on with
    // READDIRPLUS, which looks every entry up by its backing name).
    fs::metadata(v.p("many/entry-with-a-longish-name-1999")).unwrap();
    let mut names: Vec<_> = std::iter::once(first)
        .chain(listing.map(|e| e.unwrap().file_name()))
        .collect();
    names.sort();
    let wanted: Vec<_> = (0..2000)
        .map(|i| OsString::from(format!("entry-with-a-longish-name-{i:04}")))
        .collect();
    assert_eq!(names, wanted);
    // The held directory still finds its entries by name.
    let c = std::ffi::CString::new("b.bin").unwrap();
    // SAFETY: a valid directory descriptor and C string.
    let fd = unsafe { libc::openat(std::os::fd::AsRawFd::as_raw_fd(&held), c.as_ptr(), libc::O_RDONLY) };
    assert!(
        fd >= 0,
        "openat in the held directory: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: fd was just opened and is owned here.
    let mut f = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut got = Vec::new();
    f.read_to_end(&mut got).unwrap();
    assert_eq!(got, big);
    // The symlinks keep their inodes and targets, also beside new ones
    // that may get the numbers their old backing symlinks had.
    for i in 0..32 {
        std::os::unix::fs::symlink(format!("new-{i}"), v.p(format!("busy/s{i}"))).unwrap();
    }
    for (l, (ino, target)) in ["link", "d/up"].iter().zip(links.iter().zip(["a.txt", "../a.txt"])) {
        let m = fs::symlink_metadata(v.p(l)).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&m), *ino, "{l} is the same inode");
        assert_eq!(fs::read_link(v.p(l)).unwrap(), Path::new(target), "{l}");
    }
    for i in 0..32 {
        assert_eq!(
            fs::read_link(v.p(format!("busy/s{i}"))).unwrap(),
            Path::new(&format!("new-{i}"))
        );
        fs::remove_file(v.p(format!("busy/s{i}"))).unwrap();
    }
    drop((reader, writer, held, f));
    let check = |v: &Volume, ctx: &str| {
        for (n, body) in &left {
            assert_eq!(&fs::read(v.p(format!("busy/{n}"))).unwrap(), body, "{ctx}: busy/{n}");
        }
        assert_eq!(fs::read_dir(v.p("busy")).unwrap().count(), left.len(), "{ctx}");
        assert_eq!(fs::read_dir(v.p("many")).unwrap().count(), 2000, "{ctx}");
        let mut got = snapshot(&v.mnt);
        got.retain(|p, _| {
            let first = p.iter().next().map(|c| c.as_bytes().to_vec());
            !matches!(first.as_deref(), Some(b"busy" | b"many")) && p != Path::new("d/w.bin")
        });
        assert_snapshots_eq(&got, &want, ctx);
    };
    check(&v, "on the mount, after");
    v.unmount();
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_ok("fsck after");
    v.mount();
    check(&v, "remounted");
    v.unmount();
    let o = mount_with(&v, &["--passfile", gone.to_str().unwrap()]);
    assert!(!o.ok() && !is_mounted(&v.mnt), "the removed password mounts\n{o}");
    // The library: the old config with the removed password gives a key
    // under which nothing of the volume decrypts.
    let pw = fs::read_to_string(&gone).unwrap();
    let k = Config::load_file(&old_conf)
        .unwrap()
        .open(&Input::Secret {
            bytes: pw.trim_end().as_bytes(),
            kind: None,
        })
        .unwrap()
        .key;
    let (blocks, names) = nothing_decrypts(&v.cipher, &k, &old_ivs);
    assert!(blocks >= 7 && names >= 2000, "{blocks} blocks, {names} names checked");
    let now = Config::load(&v.cipher).unwrap().unlock(PASSWORD.as_bytes()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nothing_decrypts(&v.cipher, &now, &[])));
    assert!(r.is_err(), "the check finds the new key's names");
}

/// `key remove --rekey` of `v`'s slot 2 with `env` (for the mount, which
/// does the work, it was given at mount time).
fn remove_slot_2(v: &Volume) -> Out {
    remove_rekey(v, "2", &["--jobs", "1"])
}

#[test]
fn a_mount_killed_in_an_online_volume_key_rekey_leaves_it_for_warpfs_rekey() {
    require_fuse!();
    for kill in ["data:2", "name:3", "dir:2"] {
        let (mut v, gone, want) = revocable();
        let o = v.try_mount_env(&[], &[("WARPFS_REKEY_KILL", kill)]);
        assert!(o.ok(), "{o}");
        let o = remove_slot_2(&v);
        o.expect_code(E_UNFINISHED, &format!("{kill}: the mount died under the rekey"));
        assert!(o.stderr.contains("warpfs rekey"), "{o}");
        v.unmount();
        assert!(Config::load(&v.cipher).unwrap().volume_rekey_under_way(), "{kill}");
        v.try_mount(&[]).expect_code(E_UNFINISHED, kill);
        warpfs(args!["rekey", "--passfile", &gone, &v.cipher]).expect_code(E_WRONG, kill);
        warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]).expect_ok(&format!("{kill}: finished"));
        v.mount();
        assert_snapshots_eq(&snapshot(&v.mnt), &want, kill);
        v.unmount();
        warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_ok(kill);
    }
}

#[test]
fn warpfs_rekey_on_the_mount_finishes_what_a_killed_warpfs_started() {
    require_fuse!();
    let (mut v, _gone, want) = revocable();
    v.mount();
    // Enough content that a slow rekey is still moving it when killed.
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7) as u8).collect();
    write_file(&v.p("slow.bin"), &body);
    let mut c = Command::new(BIN);
    c.args(["rekey", "--passfile"])
        .arg(&v.passfile)
        .args(["--new-volume-key", "--yes", "--jobs", "1", "--max-rate", "0.3"])
        .arg(&v.cipher);
    let mut child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut started = false;
    for _ in 0..200 {
        if Config::load(&v.cipher).unwrap().volume_rekey_under_way() {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(started, "the rekey never started");
    // The mount serves on, mid-rekey.
    assert_eq!(fs::read(v.p("slow.bin")).unwrap(), body);
    write_file(&v.p("during.txt"), b"written mid-rekey");
    let o = warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]);
    o.expect_ok("warpfs rekey on the mount finishes it");
    assert!(o.stderr.contains("finishing"), "{o}");
    assert!(o.stdout.contains("online"), "{o}");
    assert!(!Config::load(&v.cipher).unwrap().volume_rekey_under_way());
    assert_eq!(fs::read(v.p("slow.bin")).unwrap(), body);
    assert_eq!(fs::read(v.p("during.txt")).unwrap(), b"written mid-rekey");
    v.unmount();
    v.mount();
    let mut got = snapshot(&v.mnt);
    got.retain(|p, _| p != Path::new("slow.bin") && p != Path::new("during.txt"));
    assert_snapshots_eq(&got, &want, "remounted");
    assert_eq!(fs::read(v.p("slow.bin")).unwrap(), body);
    v.unmount();
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_ok("fsck");
}

/// A read-only mount refuses a revocation before anything changes: the
/// config and every backing name stay, the slot stays, and the volume
/// still opens with the password that was to be removed.
#[test]
fn key_remove_rekey_on_a_read_only_mount_is_refused_and_changes_nothing() {
    require_fuse!();
    let (mut v, gone, _) = revocable();
    v.mount_with(&["-o", "ro"]);
    let conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let ivs = ivs_of(&v.cipher);
    let o = remove_slot_2(&v);
    o.expect_code(1, "key remove --rekey on a read-only mount");
    assert!(o.stderr.contains("read-only"), "{o}");
    assert_eq!(
        fs::read(v.cipher.join("warpfs.conf")).unwrap(),
        conf,
        "config untouched"
    );
    assert_eq!(ivs_of(&v.cipher), ivs);
    v.unmount();
    let o = mount_with(&v, &["--passfile", gone.to_str().unwrap()]);
    assert!(o.ok(), "the password to remove still mounts\n{o}");
    v.unmount();
}
