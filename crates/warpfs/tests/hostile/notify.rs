//! A small inotify(7) wrapper: watches on paths, events drained with the
//! watched path and the name of the child they concern.

use crate::common::cstr;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One inotify instance and its watches.
pub struct Inotify {
    fd: OwnedFd,
    wds: HashMap<i32, PathBuf>,
}

/// One event: the watch it came from, the child's name (for a watched
/// directory) and the event bits.
#[derive(Debug, Clone)]
pub struct Event {
    pub wd: i32,
    pub watched: PathBuf,
    pub name: Option<String>,
    pub mask: u32,
}

impl Inotify {
    /// A new instance. Root's instances are shared by every test on the
    /// machine (`fs.inotify.max_user_instances`): retried for a few
    /// seconds, then a harness failure (never a silent pass).
    pub fn new() -> Inotify {
        let mut last = None;
        for _ in 0..50 {
            // SAFETY: plain system call.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if fd >= 0 {
                return Inotify {
                    // SAFETY: a new descriptor owned by nobody else.
                    fd: unsafe { OwnedFd::from_raw_fd(fd) },
                    wds: HashMap::new(),
                };
            }
            last = Some(io::Error::last_os_error());
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("harness: cannot create an inotify instance: {last:?} (fs.inotify.max_user_instances)");
    }

    /// Watch `p` for `mask`; returns the watch descriptor.
    pub fn watch(&mut self, p: &Path, mask: u32) -> i32 {
        let c = cstr(p);
        // SAFETY: valid descriptor and C string.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
        assert!(
            wd >= 0,
            "harness: inotify_add_watch {}: {}",
            p.display(),
            io::Error::last_os_error()
        );
        self.wds.insert(wd, p.to_path_buf());
        wd
    }

    /// Every event queued so far (the kernel queues them synchronously
    /// with the system call that causes them).
    pub fn drain(&self) -> Vec<Event> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: valid descriptor and buffer.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            let n = n as usize;
            let mut i = 0;
            while i + 16 <= n {
                let wd = i32::from_ne_bytes(buf[i..i + 4].try_into().unwrap());
                let mask = u32::from_ne_bytes(buf[i + 4..i + 8].try_into().unwrap());
                let len = u32::from_ne_bytes(buf[i + 12..i + 16].try_into().unwrap()) as usize;
                let raw = &buf[i + 16..(i + 16 + len).min(n)];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                let name = (end > 0).then(|| String::from_utf8_lossy(&raw[..end]).into_owned());
                let watched = self.wds.get(&wd).cloned().unwrap_or_default();
                out.push(Event {
                    wd,
                    watched,
                    name,
                    mask,
                });
                i += 16 + len;
            }
        }
        out
    }
}
