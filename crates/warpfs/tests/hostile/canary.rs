//! The canary tree outside CIPHERDIR (on the same file system, so that
//! hard links into CIPHERDIR work): a regular file (holding whatever the
//! planted link should seem to lead to), a FIFO with a reader of our own,
//! a character device 1:5 (what /dev/zero is, but one whose opens we can
//! see), a directory with a file, and a path that must never come to
//! exist.
//! inotify watches tell, per command, whether anything there was created,
//! opened, opened for writing or written; a stamp of each (type, size,
//! mode, owner, mtime, content) compared at the end tells whether anything
//! changed. A watch on the planted name's directory in CIPHERDIR counts
//! opens of the planted object itself.

use super::notify::Inotify;
use crate::common::mknod_fifo;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const DIR_EVENTS: u32 = libc::IN_OPEN
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE;

/// One path's state: what must be the same afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    kind: u32,
    size: u64,
    mode: u32,
    owner: (u32, u32),
    mtime: (i64, i64),
    content: Option<Vec<u8>>,
    names: Option<Vec<String>>,
}

fn stamp(p: &Path) -> Option<Stamp> {
    let m = fs::symlink_metadata(p).ok()?;
    let content = m.file_type().is_file().then(|| fs::read(p).unwrap_or_default());
    let names = m.is_dir().then(|| {
        let mut v: Vec<String> = fs::read_dir(p)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    });
    Some(Stamp {
        kind: m.mode() & libc::S_IFMT,
        size: if m.is_dir() { 0 } else { m.size() },
        mode: m.mode(),
        owner: (m.uid(), m.gid()),
        mtime: (m.mtime(), m.mtime_nsec()),
        content,
        names,
    })
}

/// What one command did outside (and to the planted object).
#[derive(Debug, Default)]
pub struct Window {
    /// Each thing done outside CIPHERDIR.
    pub outside: Vec<String>,
    /// Opens of the planted object by others than the test.
    pub plant_opens: usize,
}

pub struct Canary {
    pub file: PathBuf,
    pub fifo: PathBuf,
    /// A zero device (char 1:5) outside CIPHERDIR.
    pub zero: PathBuf,
    /// A path nothing may create (a planted symlink may point here).
    pub missing: PathBuf,
    /// The file in the canary directory.
    inner: PathBuf,
    /// The test's own opens of the FIFO (the guard's unblocking).
    pub fifo_own: Arc<AtomicUsize>,
    /// The test's own opens of the planted object.
    pub plant_own: Arc<AtomicUsize>,
    ino: Inotify,
    wd_fifo: i32,
    wd_file: i32,
    plant: Option<(i32, String)>,
    before: Vec<(PathBuf, Option<Stamp>)>,
    stop: Arc<AtomicBool>,
    fifo_bytes: Arc<AtomicUsize>,
    reader: Option<std::thread::JoinHandle<()>>,
    own_at_begin: (usize, usize),
}

/// Wait (up to 10 s) until nothing holds `p` open for writing: the
/// kernel refuses a read lease while any writer is open. When the test
/// writes a canary file, a child that another test thread forks meanwhile
/// holds a copy of the write descriptor until its exec; that close, late
/// on a loaded machine, must not land in a command's window as "opened
/// for writing". Where leases are not offered, nothing is waited for.
fn wait_unwritten(p: &Path) {
    use std::os::fd::AsRawFd;
    let Ok(f) = fs::File::open(p) else { return };
    for _ in 0..500 {
        // SAFETY: fcntl on a descriptor owned here.
        if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) } == 0 {
            // SAFETY: as above.
            unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
            return;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Canary {
    /// Make the tree in `root/outside`; the regular file holds `bytes`.
    pub fn new(root: &Path, bytes: &[u8]) -> Canary {
        let dir = root.join("outside");
        fs::create_dir(&dir).unwrap();
        let file = dir.join("file");
        fs::write(&file, bytes).unwrap();
        let fifo = dir.join("fifo");
        mknod_fifo(&fifo, 0o666).unwrap();
        let sub = dir.join("dir");
        fs::create_dir(&sub).unwrap();
        let inner = sub.join("inner");
        fs::write(&inner, b"inner canary").unwrap();
        let zero = dir.join("zero");
        let c = crate::common::cstr(&zero);
        // SAFETY: valid C string.
        let r = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) };
        assert_eq!(r, 0, "mknod {}: {}", zero.display(), std::io::Error::last_os_error());
        let missing = dir.join("missing");
        // Our reader: a writer that opens the FIFO finds it and whatever it
        // writes arrives here. Opened before the watches (not counted).
        let mut rd = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let fifo_bytes = Arc::new(AtomicUsize::new(0));
        let (st, fb) = (stop.clone(), fifo_bytes.clone());
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !st.load(Ordering::Relaxed) {
                if let Ok(n) = rd.read(&mut buf) {
                    fb.fetch_add(n, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let mut ino = Inotify::new();
        ino.watch(&dir, DIR_EVENTS);
        ino.watch(&sub, DIR_EVENTS);
        let wd_file = ino.watch(&file, libc::IN_OPEN | libc::IN_MODIFY | libc::IN_CLOSE_WRITE);
        let wd_fifo = ino.watch(&fifo, libc::IN_OPEN | libc::IN_MODIFY);
        let before = [&dir, &file, &fifo, &zero, &sub, &inner, &missing]
            .iter()
            .map(|p| (p.to_path_buf(), stamp(p)))
            .collect();
        Canary {
            file,
            fifo,
            zero,
            missing,
            inner,
            fifo_own: Arc::new(AtomicUsize::new(0)),
            plant_own: Arc::new(AtomicUsize::new(0)),
            ino,
            wd_fifo,
            wd_file,
            plant: None,
            before,
            stop,
            fifo_bytes,
            reader: Some(reader),
            own_at_begin: (0, 0),
        }
    }

    /// Count opens of `plant` (a name in CIPHERDIR) from now on.
    pub fn watch_plant(&mut self, plant: &Path) {
        let wd = self.ino.watch(plant.parent().unwrap(), libc::IN_OPEN);
        self.plant = Some((wd, plant.file_name().unwrap().to_string_lossy().into_owned()));
    }

    /// Start a command's window: what happened before is forgotten,
    /// including the late close of a descriptor the test's own writes of
    /// the canary files left in another thread's child ([`wait_unwritten`]).
    pub fn begin(&mut self) {
        wait_unwritten(&self.file);
        wait_unwritten(&self.inner);
        self.ino.drain();
        self.own_at_begin = (
            self.fifo_own.load(Ordering::SeqCst),
            self.plant_own.load(Ordering::SeqCst),
        );
    }

    /// End the window: what was done outside, and opens of the plant.
    ///
    /// Events are merged per path first. A close after writing counts only
    /// with an open in the same window: the last close of a file the test
    /// itself just wrote may come late, from a child another thread was
    /// starting (it inherits the descriptor until its exec).
    pub fn end(&mut self) -> Window {
        let events = self.ino.drain();
        let own_fifo = self.fifo_own.load(Ordering::SeqCst) - self.own_at_begin.0;
        let own_plant = self.plant_own.load(Ordering::SeqCst) - self.own_at_begin.1;
        let mut w = Window::default();
        let (mut fifo_opens, mut plant_opens) = (0usize, 0usize);
        let mut masks: std::collections::BTreeMap<PathBuf, u32> = Default::default();
        for e in &events {
            if e.mask & libc::IN_Q_OVERFLOW != 0 {
                w.outside
                    .push("harness: inotify queue overflowed; events were lost".into());
                continue;
            }
            let is_open = e.mask & libc::IN_OPEN != 0;
            if let Some((wd, name)) = &self.plant {
                if e.wd == *wd {
                    if e.name.as_deref() == Some(name.as_str()) && is_open {
                        plant_opens += 1;
                    }
                    continue;
                }
            }
            if e.wd == self.wd_fifo {
                fifo_opens += usize::from(is_open);
                *masks.entry(self.fifo.clone()).or_default() |= e.mask & !libc::IN_OPEN;
                continue;
            }
            let p = if e.wd == self.wd_file {
                // The file's own watch: opens through any name, a hard
                // link in CIPHERDIR included.
                PathBuf::from(format!("{} (through any of its links)", self.file.display()))
            } else {
                let p = e.watched.join(e.name.clone().unwrap_or_default());
                if p == self.fifo {
                    continue; // counted on the FIFO's own watch
                }
                p
            };
            *masks.entry(p).or_default() |= e.mask;
        }
        for (p, m) in masks {
            let via_file_watch = p.to_string_lossy().ends_with("(through any of its links)");
            let mut what = Vec::new();
            if m & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
                what.push("created");
            }
            if m & (libc::IN_DELETE | libc::IN_MOVED_FROM) != 0 {
                what.push("removed or renamed");
            }
            if m & libc::IN_MODIFY != 0 {
                what.push("written");
            } else if m & libc::IN_CLOSE_WRITE != 0 && m & libc::IN_OPEN != 0 {
                what.push("opened for writing");
            } else if m & libc::IN_OPEN != 0 && !via_file_watch {
                what.push("opened (a planted link was followed out of CIPHERDIR)");
            }
            if !what.is_empty() {
                w.outside
                    .push(format!("{} outside CIPHERDIR was {}", p.display(), what.join(", ")));
            }
        }
        if fifo_opens > own_fifo {
            w.outside.push(format!(
                "the FIFO outside CIPHERDIR ({}) was opened {} time(s) by warpfs",
                self.fifo.display(),
                fifo_opens - own_fifo
            ));
        }
        let bytes = self.fifo_bytes.swap(0, Ordering::SeqCst);
        if bytes > 0 {
            w.outside
                .push(format!("{bytes} byte(s) were written into the FIFO outside CIPHERDIR"));
        }
        w.plant_opens = plant_opens.saturating_sub(own_plant);
        w
    }

    /// Each path of the tree whose stamp differs from the start.
    pub fn changed(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (p, was) in &self.before {
            let now = stamp(p);
            if &now != was {
                let what = match (was, &now) {
                    (None, Some(_)) => "came to exist".to_string(),
                    (Some(_), None) => "was removed".to_string(),
                    (Some(a), Some(b)) => {
                        let mut d = Vec::new();
                        if a.kind != b.kind {
                            d.push("type");
                        }
                        if a.size != b.size {
                            d.push("size");
                        }
                        if a.mode != b.mode {
                            d.push("mode");
                        }
                        if a.owner != b.owner {
                            d.push("owner");
                        }
                        if a.mtime != b.mtime {
                            d.push("mtime");
                        }
                        if a.content != b.content {
                            d.push("content");
                        }
                        if a.names != b.names {
                            d.push("entries");
                        }
                        format!("changed ({})", d.join(", "))
                    }
                    (None, None) => unreachable!(),
                };
                v.push(format!("{} outside CIPHERDIR {what}", p.display()));
            }
        }
        v
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
    }
}

/// The harness itself: a writer descriptor of the canary file that a
/// child still holds when a command's window opens (the test's own write,
/// copied into a child another thread forked) is not reported as the
/// command opening it for writing; a real writable open in the window is.
pub fn a_late_close_of_the_tests_own_writer_is_not_counted() {
    use std::os::fd::AsRawFd;
    let root = tempfile::tempdir().unwrap();
    let mut c = Canary::new(root.path(), b"canary bytes");
    // A hard link outside the watched directory, as a planted one in
    // CIPHERDIR is.
    let link = root.path().join("link");
    fs::hard_link(&c.file, &link).unwrap();
    // A writer the child inherits (no close-on-exec) and keeps until it
    // exits; ours is closed at once.
    let w = fs::OpenOptions::new().write(true).open(&c.file).unwrap();
    // SAFETY: clearing FD_CLOEXEC on a descriptor owned here.
    unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFD, 0) };
    let mut child = std::process::Command::new("sleep").arg("1").spawn().unwrap();
    drop(w);
    c.begin();
    // The command reads the file through the link (an open, not for
    // writing).
    fs::read(&link).unwrap();
    child.wait().unwrap();
    let win = c.end();
    assert!(
        win.outside.is_empty(),
        "the child's late close was counted: {:?}",
        win.outside
    );
    // A writable open in the window is still found.
    c.begin();
    drop(fs::OpenOptions::new().write(true).open(&link).unwrap());
    let win = c.end();
    assert!(
        win.outside.iter().any(|o| o.contains("opened for writing")),
        "{:?}",
        win.outside
    );
}
