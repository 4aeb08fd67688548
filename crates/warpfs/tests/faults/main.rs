//! Backing file system faults through real mounts: a full disk (a small
//! tmpfs under the cipher dir), a backing FS remounted read-only, permission
//! denied on backing files and directories (the daemon runs without
//! CAP_DAC_OVERRIDE), a backing file deleted under an open handle, and
//! rename/unlink races with I/O on open handles; with
//! `--no-writeback-cache` a full disk fails the buffered `write(2)` itself.
//!
//! Each fault must give the caller a clear errno (ENOSPC, EROFS, EACCES),
//! a rate-limited `backing fault:` line in the daemon log, no panic, and
//! must not lose anything already stored: old contents are checked after
//! the fault, after a remount.
//!
//! One test binary (`cargo test -p warpfs --test faults`): the tmpfs
//! fixture and shared checks here, one module per kind of fault.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod backing;
mod enospc;
mod handles;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A tmpfs mounted at a directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let opts = std::ffi::CString::new(format!("size={size},mode=0755")).unwrap();
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                cstr(dir).as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs on {}: {}", dir.display(), io::Error::last_os_error());
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, read_only: bool) -> io::Result<()> {
        let flags = libc::MS_REMOUNT | if read_only { libc::MS_RDONLY } else { 0 };
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                cstr(&self.0).as_ptr(),
                c"tmpfs".as_ptr(),
                flags,
                std::ptr::null(),
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let c = cstr(&self.0);
        if unsafe { libc::umount2(c.as_ptr(), 0) } != 0 {
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// An initialised volume whose cipher dir is a tmpfs of `size`.
fn volume_on_tmpfs(mode: Mode, size: &str) -> (Volume, Tmpfs) {
    let v = Volume::init(mode);
    let saved = v.root().join("saved");
    copy_tree(&v.cipher, &saved);
    let t = Tmpfs::mount(&v.cipher, size);
    copy_tree(&saved, &v.cipher);
    (v, t)
}

fn open_direct(p: &Path, create: bool) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_DIRECT)
        .open(p)
}

/// Log lines of the daemon that report a backing fault with `what`.
fn fault_lines(v: &Volume, what: &str) -> usize {
    v.log()
        .lines()
        .filter(|l| l.contains("backing fault") && l.contains(what))
        .count()
}

#[track_caller]
fn assert_file(p: &Path, want: &[u8], ctx: &str) {
    let got = fs::read(p).unwrap_or_else(|e| panic!("{ctx}: read {}: {e}", p.display()));
    assert_bytes_eq(&got, want, ctx);
}
