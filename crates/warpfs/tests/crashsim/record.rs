//! The recorder: `strace -f` attached to the mount daemon (all its
//! threads) and to the workload process (and what it starts, such as
//! `warpfs rekey`), with every write's bytes (`-xx -s`), descriptors named
//! by path (`-y`). The calls under CIPHERDIR become operations on a model
//! of the snapshot taken before the workload; replaying them all must give
//! the real CIPHERDIR byte for byte, or the recording missed something.

use super::exec::{self, Prepared};
use super::fsmodel::FsModel;
use super::ops::{self, Conv};
use super::persist::Model;
use super::trace;
use super::workload::Step;
use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Calls the recorder traces: every way to change or sync a file, a
/// directory entry or a descriptor's position, the process tree, the
/// markers, and the calls it refuses to model.
pub const TRACED: &str = "open,openat,openat2,creat,write,pwrite64,writev,pwritev,pwritev2,\
ftruncate,truncate,fallocate,fsync,fdatasync,syncfs,sync,sync_file_range,\
rename,renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,\
symlink,symlinkat,mknod,mknodat,lseek,dup,dup2,dup3,fcntl,clone,clone3,fork,vfork,\
access,faccessat,faccessat2,copy_file_range,sendfile,splice,mmap,\
setxattr,lsetxattr,fsetxattr,removexattr,lremovexattr,fremovexattr";

/// Largest buffer the recorder must see whole (a rekey segment or its undo
/// record is about 1 MiB).
pub const STRING_LIMIT: &str = "8388608";

/// Why recording cannot run here (no strace), or `None`.
pub fn unavailable() -> Option<String> {
    match Command::new("strace").arg("-V").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("strace -V failed: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => Some(format!("strace is not installed ({e}); apt-get install strace")),
    }
}

pub struct Recording {
    pub snapshot: FsModel,
    pub model: Model,
    pub calls: usize,
}

fn tasks(pid: i32) -> Vec<(i32, i32)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .map(|t| (t, pid))
                .collect()
        })
        .unwrap_or_default()
}

/// Run `steps` on the mount of `cipher` at `mnt` (served by `daemon`)
/// under strace; `rekey` is the `warpfs rekey` command line for the
/// workload's rekey steps; `work` holds the trace.
pub fn record(cipher: &Path, mnt: &Path, daemon: i32, steps: &[Step], rekey: &[CString], work: &Path) -> Recording {
    let snapshot = FsModel::load(cipher);
    let prep = Prepared::new(mnt, steps, rekey, &work.join("rekey.log"));
    let (child, go) = exec::spawn(&prep);
    let mut seeds = tasks(daemon);
    seeds.push((child, child));
    let out = work.join("trace.txt");
    let mut st = Command::new("strace")
        // `-y`, not `-yy`: naming a device makes strace stat the path,
        // and a stat on the mount waits for the daemon strace holds.
        .args([
            "-f",
            "-xx",
            "-y",
            "-s",
            STRING_LIMIT,
            "-e",
            &format!("trace={TRACED}"),
            "-o",
        ])
        .arg(&out)
        .args(["-p", &daemon.to_string(), "-p", &child.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start strace");
    // Wait until strace says it holds both processes.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stderr = st.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut log = Vec::new();
    let (mut got_child, mut got_daemon) = (false, false);
    let start = Instant::now();
    while !(got_child && got_daemon) {
        let left = Duration::from_secs(60).checked_sub(start.elapsed()).unwrap_or_default();
        let l = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("strace did not attach within 60 s: {log:?}"));
        got_child |= l.contains(&format!("Process {child} attached"));
        got_daemon |= l.contains(&format!("Process {daemon} attached"));
        log.push(l);
    }
    assert_eq!(unsafe { libc::write(go, b"g".as_ptr().cast(), 1) }, 1);
    unsafe { libc::close(go) };
    let mut status = 0;
    let start = Instant::now();
    while unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == 0 {
        if start.elapsed() > Duration::from_secs(300) {
            // A hung mount: killing the daemon ends every request on it.
            unsafe {
                libc::kill(daemon, libc::SIGKILL);
                libc::kill(child, libc::SIGKILL);
            }
            panic!("the workload did not finish within 300 s under strace");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The kernel sends RELEASE after close() has returned; the daemon's
    // last writes to a file (its summary commit, FORMAT.md 12) follow it.
    // Stop tracing only once the daemon holds no cipher file open.
    let start = Instant::now();
    while open_cipher_files(daemon, cipher) > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the daemon still holds cipher files open 60 s after the workload"
        );
        std::thread::yield_now();
    }
    unsafe { libc::kill(st.id() as i32, libc::SIGINT) };
    let _ = st.wait();
    let _ = reader.join();
    log.extend(rx.try_iter());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    assert_eq!(
        code,
        0,
        "the workload failed (100 + step: {code:?}); rekey log:\n{}\nstrace:\n{}",
        std::fs::read_to_string(work.join("rekey.log")).unwrap_or_default(),
        log.join("\n")
    );
    seeds.extend(tasks(daemon));
    let text = std::fs::read_to_string(&out).expect("read the trace");
    let calls = trace::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let procs = ops::processes(&calls, &seeds);
    let root = cipher.as_os_str().as_bytes();
    let mut conv = Conv::new(root, snapshot.clone(), &procs);
    conv.feed(&calls).unwrap_or_else(|e| panic!("recording: {e}"));
    if let Some(d) = FsModel::load(cipher).diff(&conv.model) {
        panic!("replaying the recorded operations does not give the real CIPHERDIR: {d}");
    }
    let nops = conv.ops.len();
    let model = Model::build(&snapshot, conv.ops);
    eprintln!(
        "recorded {} calls ({} MiB of trace), {nops} operations under CIPHERDIR, {} units, {} barriers",
        calls.len(),
        text.len() >> 20,
        model.units.len(),
        model.barriers.len()
    );
    Recording {
        snapshot,
        model,
        calls: calls.len(),
    }
}

/// Regular files under `cipher` that process `pid` has open.
fn open_cipher_files(pid: i32, cipher: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.starts_with(cipher))
                && std::fs::metadata(e.path()).is_ok_and(|m| m.is_file())
        })
        .count()
}
