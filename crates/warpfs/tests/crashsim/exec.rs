//! The workload process: forked from the test, it waits until strace has
//! attached, then runs the steps with plain system calls on data prepared
//! before the fork (a child of a multithreaded process may not allocate),
//! touching `/crashsim-mark/N` with access(2) after step N so the trace
//! shows where each step ended. Exit status 0, or 100 + the failed step.

use super::ops::MARKER;
use super::workload::{Step, SLOTS};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

enum P {
    Open { slot: usize, path: CString, flags: i32 },
    Close { slot: usize },
    Pwrite { slot: usize, off: u64, data: Vec<u8> },
    Write { slot: usize, data: Vec<u8> },
    Truncate { slot: usize, len: u64 },
    Fsync { slot: usize, data_only: bool },
    FsyncDir { path: CString },
    Rename { from: CString, to: CString },
    Unlink { path: CString },
    Mkdir { path: CString },
    RekeyStart,
    RekeyWait,
}

/// Everything the child needs, made before the fork.
pub struct Prepared {
    steps: Vec<P>,
    markers: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    rekey_log: CString,
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

impl Prepared {
    /// `rekey` is the command line of `warpfs rekey` (program first).
    pub fn new(mnt: &Path, steps: &[Step], rekey: &[CString], rekey_log: &Path) -> Self {
        let at = |s: &str| c(&mnt.join(s));
        let steps: Vec<P> = steps
            .iter()
            .map(|s| match s {
                Step::Open {
                    slot,
                    path,
                    create,
                    append,
                } => P::Open {
                    slot: *slot,
                    path: at(path),
                    flags: libc::O_RDWR
                        | if *create { libc::O_CREAT } else { 0 }
                        | if *append { libc::O_APPEND } else { 0 },
                },
                Step::Close { slot } => P::Close { slot: *slot },
                Step::Pwrite { slot, off, data } => P::Pwrite {
                    slot: *slot,
                    off: *off,
                    data: data.clone(),
                },
                Step::Append { slot, data } => P::Write {
                    slot: *slot,
                    data: data.clone(),
                },
                Step::Truncate { slot, len } => P::Truncate { slot: *slot, len: *len },
                Step::Fsync { slot } => P::Fsync {
                    slot: *slot,
                    data_only: false,
                },
                Step::Fdatasync { slot } => P::Fsync {
                    slot: *slot,
                    data_only: true,
                },
                Step::FsyncDir { path } => P::FsyncDir { path: at(path) },
                Step::Rename { from, to } => P::Rename {
                    from: at(from),
                    to: at(to),
                },
                Step::Unlink { path } => P::Unlink { path: at(path) },
                Step::Mkdir { path } => P::Mkdir { path: at(path) },
                Step::RekeyStart => P::RekeyStart,
                Step::RekeyWait => P::RekeyWait,
            })
            .collect();
        let mut marker = MARKER.to_vec();
        let markers = (0..steps.len())
            .map(|i| {
                marker.truncate(MARKER.len());
                marker.extend_from_slice(i.to_string().as_bytes());
                CString::new(marker.clone()).unwrap()
            })
            .collect();
        let envp = std::env::vars_os()
            .filter(|(k, _)| k != "WARPFS_REKEY_KILL")
            .map(|(k, v)| {
                let mut e = k.as_bytes().to_vec();
                e.push(b'=');
                e.extend_from_slice(v.as_bytes());
                CString::new(e).unwrap()
            })
            .collect();
        Prepared {
            steps,
            markers,
            argv: rekey.to_vec(),
            envp,
            rekey_log: c(rekey_log),
        }
    }
}

/// Fork the workload process; it blocks until a byte arrives on the
/// returned descriptor. Returns (pid, descriptor).
pub fn spawn(p: &Prepared) -> (i32, i32) {
    let mut fds = [0i32; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // Pointer arrays for execve, made before the fork.
    let argv: Vec<*const libc::c_char> = p.argv.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    let envp: Vec<*const libc::c_char> = p.envp.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
    // SAFETY: the child makes only system calls on memory prepared above
    // and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        unsafe {
            libc::close(fds[1]);
            let mut b = 0u8;
            if libc::read(fds[0], (&mut b as *mut u8).cast(), 1) != 1 {
                libc::_exit(99);
            }
            libc::_exit(run(p, &argv, &envp));
        }
    }
    unsafe { libc::close(fds[0]) };
    (pid, fds[1])
}

/// The child's work; returns its exit status.
unsafe fn run(p: &Prepared, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> i32 {
    let mut fd = [-1i32; SLOTS];
    let mut rekey = -1;
    for (i, s) in p.steps.iter().enumerate() {
        let ok = match s {
            P::Open { slot, path, flags } => {
                fd[*slot] = libc::open(path.as_ptr(), *flags | libc::O_CLOEXEC, 0o644);
                fd[*slot] >= 0
            }
            P::Close { slot } => libc::close(fd[*slot]) == 0,
            P::Pwrite { slot, off, data } => {
                libc::pwrite(fd[*slot], data.as_ptr().cast(), data.len(), *off as libc::off_t) == data.len() as isize
            }
            P::Write { slot, data } => libc::write(fd[*slot], data.as_ptr().cast(), data.len()) == data.len() as isize,
            P::Truncate { slot, len } => libc::ftruncate(fd[*slot], *len as libc::off_t) == 0,
            P::Fsync { slot, data_only } => {
                (if *data_only {
                    libc::fdatasync(fd[*slot])
                } else {
                    libc::fsync(fd[*slot])
                }) == 0
            }
            P::FsyncDir { path } => {
                let d = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
                let r = d >= 0 && libc::fsync(d) == 0;
                libc::close(d);
                r
            }
            P::Rename { from, to } => libc::rename(from.as_ptr(), to.as_ptr()) == 0,
            P::Unlink { path } => libc::unlink(path.as_ptr()) == 0,
            P::Mkdir { path } => libc::mkdir(path.as_ptr(), 0o755) == 0,
            P::RekeyStart => {
                rekey = libc::fork();
                if rekey == 0 {
                    let log = libc::open(
                        p.rekey_log.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                        0o644,
                    );
                    libc::dup2(log, 1);
                    libc::dup2(log, 2);
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                    libc::dup2(null, 0);
                    libc::execve(argv[0], argv.as_ptr(), envp.as_ptr());
                    libc::_exit(98);
                }
                rekey > 0
            }
            P::RekeyWait => {
                let mut st = 0;
                libc::waitpid(rekey, &mut st, 0) == rekey && libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0
            }
        };
        if !ok {
            return 100 + i as i32;
        }
        libc::access(p.markers[i].as_ptr(), libc::F_OK);
    }
    0
}
