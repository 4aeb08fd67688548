//! One cipher dir on GlusterFS, mounted by two live hosts (a real replica-2
//! volume with two bricks and two client mounts on this machine, started
//! and stopped here; tests/synced/gluster.rs). Each host runs its own
//! `warpfs mount --shared-storage` of the same CIPHERDIR.
//!
//! - `glusterfs_two_live_hosts_write_and_read_each_other`: both hosts write their own
//!   files and their own half of one shared file at the same time, each
//!   reading the other's finished files as it goes: right bytes every time;
//!   afterwards each host reads everything; `warpfs fsck` (every name,
//!   header, tag and file summary, and the volume-wide repeated-nonce
//!   check) is clean from either client, the shared file committed.
//! - `glusterfs_a_brick_killed_mid_write_heals_and_keeps_fsynced_data`: one brick
//!   process is SIGKILLed while a writer runs (file after fsynced file), writes
//!   go on, the brick is restarted (`gluster volume start … force`) and the
//!   self-heal awaited: both bricks hold the same files, fsck is clean from
//!   either client and every fsynced file reads back from either host.
//! - `glusterfs_an_offline_rekey_on_one_host_keeps_out_a_mount_on_the_other`: while
//!   `warpfs rekey` runs through one client, the other client sees its lock
//!   (`warpfs.lock`; GlusterFS passes the lock between clients) and `warpfs
//!   mount` there refuses; after the rekey it mounts and reads right.

#[macro_use]
mod common;
mod synced;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use synced::gluster::Cluster;

/// Skip (counted; a failure under WARPFS_NO_SKIP=1) without FUSE or GlusterFS.
macro_rules! require_gluster {
    () => {
        require_fuse!();
        if warpfs_testkit::skip_if(
            synced::missing("glusterd", "glusterfs-server")
                .or_else(|| synced::missing("ip", "iproute2"))
                .or_else(|| synced::missing("nsenter", "util-linux"))
                .or_else(|| synced::missing("mount.glusterfs", "glusterfs-client")),
        ) {
            return;
        }
    };
}

/// A volume initialised on client 0 of `c` (`warpfs init` with `extra`).
fn cipher_on(c: &Cluster, extra: &[&str]) -> PathBuf {
    let template = Volume::init_with(Mode::Gcm, extra);
    let cipher = c.clients[0].join("cipher");
    fs::create_dir(&cipher).unwrap();
    copy_tree(&template.cipher, &cipher);
    cipher
}

/// Host `i`: the cipher dir seen through client `i`, mounted with
/// `--shared-storage` when mounted.
fn host(c: &Cluster, i: usize) -> Volume {
    let mut v = Volume::blank(Mode::Gcm);
    v.cipher = c.clients[i].join("cipher");
    v.mount_args.push("--shared-storage".into());
    v
}

fn content_of(name: &str, len: usize) -> Vec<u8> {
    // The same bytes every time for a name (FNV-1a of it as the seed).
    let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ c as u64).wrapping_mul(0x100_0000_01b3)
    });
    Rng::new(seed).bytes(len)
}

fn write_synced(p: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = File::create(p)?;
    f.write_all(data)?;
    f.sync_all()
}

/// Block `b` of the shared file as written by `tag` in `round`.
fn block_of(tag: u8, round: u32, b: u64) -> Vec<u8> {
    let mut v = vec![tag; BLOCK as usize];
    v[..4].copy_from_slice(&round.to_le_bytes());
    v[4..12].copy_from_slice(&b.to_le_bytes());
    v
}

const FILES: usize = 12;
const ROUNDS: u32 = 6;

#[test]
fn glusterfs_two_live_hosts_write_and_read_each_other() {
    require_gluster!();
    let root = tempfile::Builder::new().prefix("warpfs-gluster-").tempdir().unwrap();
    let c = Cluster::start(root.path()).unwrap();
    // With file summaries: each host's writes into the shared file are
    // coordinated with the other's, so neither breaks the summary.
    cipher_on(&c, &["--file-summary", "on"]);
    let (mut a, mut b) = (host(&c, 0), host(&c, 1));
    a.mount();
    b.mount();
    // The shared file: 16 blocks; host A owns blocks 0-7, host B 8-15.
    write_synced(&a.p("same.bin"), &vec![0; 16 * BLOCK as usize]).unwrap();
    let done: [Mutex<Vec<String>>; 2] = [Mutex::default(), Mutex::default()];
    let reads = Mutex::new((0usize, 0usize, 0usize));
    std::thread::scope(|s| {
        for (me, v, tag) in [(0usize, &a, b'A'), (1, &b, b'B')] {
            let (done, reads) = (&done, &reads);
            s.spawn(move || {
                let other = 1 - me;
                let same = OpenOptions::new().read(true).write(true).open(v.p("same.bin")).unwrap();
                for i in 0..FILES {
                    let name = format!("{}{i}", tag as char);
                    write_synced(&v.p(&name), &content_of(&name, 5_000 + 25_000 * i)).unwrap();
                    done[me].lock().unwrap().push(name);
                    let round = (i as u32) % ROUNDS;
                    for blk in 0..8 {
                        let b = blk + 8 * me as u64;
                        same.write_all_at(&block_of(tag, round, b), b * BLOCK).unwrap();
                    }
                    same.sync_all().unwrap();
                    // The other host's finished files: right bytes.
                    let theirs = done[other].lock().unwrap().clone();
                    for n in &theirs {
                        let got = fs::read(v.p(n)).unwrap_or_else(|e| panic!("host {me} reads {n}: {e}"));
                        let want = content_of(n, 5_000 + 25_000 * n[1..].parse::<usize>().unwrap());
                        assert_bytes_eq(&got, &want, &format!("host {me} reads {n} while writing"));
                    }
                    // The shared file: each block one writer's block of some
                    // round, or EIO (read between the other host's data and
                    // nonce entry writes: its tag does not verify).
                    let mut eio = 0;
                    for k in 0..16u64 {
                        let mut blk = vec![0u8; BLOCK as usize];
                        match same.read_exact_at(&mut blk, k * BLOCK) {
                            Ok(()) => {
                                let owner = if k < 8 { b'A' } else { b'B' };
                                let ok =
                                    blk.iter().all(|&x| x == 0) || (0..ROUNDS).any(|r| blk == block_of(owner, r, k));
                                assert!(
                                    ok,
                                    "host {me}: same.bin block {k} is neither zeros nor a block {owner} wrote"
                                );
                            }
                            Err(e) if e.raw_os_error() == Some(libc::EIO) => eio += 1,
                            Err(e) => panic!("host {me}: same.bin block {k}: {e}"),
                        }
                    }
                    let mut r = reads.lock().unwrap();
                    r.0 += theirs.len();
                    r.1 += 16;
                    r.2 += eio;
                }
            });
        }
    });
    let (file_reads, block_reads, eio) = *reads.lock().unwrap();
    eprintln!(
        "live: {file_reads} reads of the other host's files, all right; {block_reads} shared-file block reads, \
         {eio} of them EIO (torn by the other host's write in flight), the rest right"
    );
    // Afterwards each host reads everything.
    let last = (FILES as u32 - 1) % ROUNDS;
    for v in [&a, &b] {
        for tag in ['A', 'B'] {
            for i in 0..FILES {
                let n = format!("{tag}{i}");
                assert_bytes_eq(&fs::read(v.p(&n)).unwrap(), &content_of(&n, 5_000 + 25_000 * i), &n);
            }
        }
        let got = fs::read(v.p("same.bin")).unwrap();
        let want: Vec<u8> = (0..16)
            .flat_map(|b| block_of(if b < 8 { b'A' } else { b'B' }, last, b))
            .collect();
        assert_bytes_eq(&got, &want, "same.bin after both hosts wrote their halves");
    }
    a.unmount();
    b.unmount();
    for v in [&a, &b] {
        let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok(&format!("fsck through {}", v.cipher.display()));
        assert!(o.stdout.contains("fsck: clean"), "{o}");
        // The last host to let go of the shared file committed it for
        // both: its summary vouches for every block again.
        assert!(!o.stdout.contains("changed since the file's last commit"), "{o}");
    }
}

#[test]
fn glusterfs_a_brick_killed_mid_write_heals_and_keeps_fsynced_data() {
    require_gluster!();
    let root = tempfile::Builder::new().prefix("warpfs-gluster-").tempdir().unwrap();
    let c = Cluster::start(root.path()).unwrap();
    cipher_on(&c, &[]);
    let (mut a, mut b) = (host(&c, 0), host(&c, 1));
    a.mount();
    // A writer writes and fsyncs files one after another (each 64 KiB and
    // more, in 4 KiB writes) while the brick is killed and restarted under
    // it: the kill and the restart land in the middle of its writes.
    let n = 30;
    let progress = std::sync::atomic::AtomicUsize::new(0);
    let wait_files = |k: usize| {
        synced::poll(&format!("{k} files written"), Duration::from_secs(120), || {
            Ok((progress.load(std::sync::atomic::Ordering::SeqCst) >= k).then_some(()))
        })
        .unwrap()
    };
    let mut killed = None;
    let (synced, failed) = std::thread::scope(|s| {
        let w = s.spawn(|| {
            let (mut synced, mut failed) = (Vec::new(), Vec::new());
            for i in 0..n {
                let name = format!("f{i:02}");
                let len = 64 * 1024 + 4_099 * i;
                let data = content_of(&name, len);
                let r = File::create(a.p(&name)).and_then(|mut f| {
                    for chunk in data.chunks(4096) {
                        f.write_all(chunk)?;
                    }
                    f.sync_all()
                });
                match r {
                    Ok(()) => synced.push((name, len)),
                    Err(e) => failed.push(format!("{name}: {e}")),
                }
                progress.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            (synced, failed)
        });
        wait_files(10);
        killed = Some(c.kill_brick(1).unwrap());
        wait_files(20);
        c.restart_brick(1, killed.unwrap()).unwrap();
        w.join().unwrap()
    });
    let pending = c.heal_pending().unwrap_or(None);
    // The mount goes first: its last releases (and what they write) are
    // done before the bricks are compared, so no write is in flight then.
    a.unmount();
    c.wait_healed(Duration::from_secs(180)).unwrap();
    // Both bricks come to hold the same cipher dir (heal info can read 0
    // while the self-heal daemon still copies its last entry).
    let b1 = synced::poll("both bricks alike after the heal", Duration::from_secs(60), || {
        let (b1, b2) = (brick_files(&c.bricks[0]), brick_files(&c.bricks[1]));
        let names = |b: &[(PathBuf, Vec<u8>)]| b.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
        if names(&b1) != names(&b2) {
            let _ = synced::gluster::gluster(&["volume", "heal", &c.volume]);
            return Err(format!(
                "files per brick differ: {:?} against {:?}",
                names(&b1),
                names(&b2)
            ));
        }
        if let Some(((p, _), _)) = b1.iter().zip(&b2).find(|((_, d1), (_, d2))| d1 != d2) {
            let _ = synced::gluster::gluster(&["volume", "heal", &c.volume]);
            return Err(format!("{} differs between the bricks", p.display()));
        }
        Ok(Some(b1))
    })
    .unwrap();
    for v in [&a, &b] {
        let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok(&format!("fsck through {} after the heal", v.cipher.display()));
    }
    for v in [&mut a, &mut b] {
        v.mount();
        for (name, len) in &synced {
            assert_bytes_eq(&fs::read(v.p(name)).unwrap(), &content_of(name, *len), name);
        }
        v.unmount();
    }
    eprintln!(
        "brick kill: brick 2 (pid {killed:?}) killed once 10 of {n} files were fsynced, restarted once 20 were, the writer running throughout; \
         {} files fsynced, {} writes failed {failed:?}; heal entries pending after the writes: {pending:?}; \
         after the heal both bricks hold {} identical files, fsck clean from both clients, all {} fsynced files read back from both hosts",
        synced.len(),
        failed.len(),
        b1.len(),
        synced.len()
    );
    assert!(
        synced.len() >= 28,
        "writes should go on while one brick is down: {failed:?}"
    );
}

/// Regular files of a brick (relative path, bytes), GlusterFS's own
/// `.glusterfs` directory excluded.
fn brick_files(brick: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in fs::read_dir(brick.join(&rel)).unwrap().flatten() {
            let r = rel.join(e.file_name());
            if r == Path::new(".glusterfs") {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(r);
            } else if t.is_file() {
                out.push((r.clone(), fs::read(brick.join(&r)).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn glusterfs_an_offline_rekey_on_one_host_keeps_out_a_mount_on_the_other() {
    require_gluster!();
    let root = tempfile::Builder::new().prefix("warpfs-gluster-").tempdir().unwrap();
    let c = Cluster::start(root.path()).unwrap();
    cipher_on(&c, &[]);
    let (mut a, mut b) = (host(&c, 0), host(&c, 1));
    a.mount();
    let data = content_of("big", 24 << 20);
    write_synced(&a.p("big"), &data).unwrap();
    a.unmount();
    // Host A rekeys offline at 4 MB/s: about 6 s.
    let mut rekey = std::process::Command::new(BIN)
        .args(["rekey", "--max-rate", "4", "--passfile"])
        .arg(&a.passfile)
        .arg(&a.cipher)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Host B sees the lock through its own client.
    let lock = b.cipher.join("warpfs.lock");
    let seen = synced::poll("host B sees the rekey's lock", Duration::from_secs(60), || {
        let Ok(f) = File::open(&lock) else { return Ok(None) };
        // SAFETY: flock on a descriptor this test owns.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
        Ok((r != 0).then_some(()))
    });
    let refused = b.try_mount(&[]);
    let still_running = rekey.try_wait().unwrap().is_none();
    let st = rekey.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(rekey.stderr.as_mut().unwrap(), &mut err).unwrap();
    seen.unwrap();
    assert!(
        still_running,
        "the rekey ended before host B tried to mount; stderr: {err}"
    );
    assert!(!refused.ok(), "host B mounted during host A's offline rekey\n{refused}");
    assert!(refused.stderr.contains("warpfs rekey is running"), "{refused}");
    assert!(st.success(), "rekey failed: {err}");
    assert!(!lock.exists(), "the lock file outlived the rekey");
    b.mount();
    assert_bytes_eq(
        &fs::read(b.p("big")).unwrap(),
        &data,
        "big after the rekey, from host B",
    );
    b.unmount();
    eprintln!(
        "rekey lock: seen from the other client, mount there refused: {}",
        refused.stderr.trim()
    );
}
