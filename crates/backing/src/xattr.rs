//! The xattr system calls on a backing entry ([`Loc`]), never following a
//! symlink at it: the `*xattrat` calls (Linux 6.13) under the directory's
//! descriptor, or on older kernels (ENOSYS) the `l*xattr` calls on the
//! entry named as /proc/self/fd/N/name (our own descriptor, then one name),
//! which needs /proc.

use crate::dir::Loc;
use crate::errno::{Errno as Error, Result};
use std::ffi::{CStr, CString};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

// The `*xattrat` system call numbers (the same on every architecture with
// the unified table; not yet in the libc crate).
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_GETXATTRAT: libc::c_long = 464;
const SYS_LISTXATTRAT: libc::c_long = 465;
const SYS_REMOVEXATTRAT: libc::c_long = 466;

/// `struct xattr_args` of the `*xattrat` calls.
#[repr(C)]
struct XattrArgs {
    value: u64,
    size: u32,
    flags: u32,
}

/// Set once the kernel has answered ENOSYS to an `*xattrat` call.
static NO_XATTRAT: AtomicBool = AtomicBool::new(false);

/// How a call reaches the entry.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Via {
    /// `*xattrat` under the directory's descriptor where there is one.
    At,
    /// Always a path (/proc/self/fd/N/name under a descriptor).
    Path,
}

fn via() -> Via {
    if NO_XATTRAT.load(Ordering::Relaxed) {
        Via::Path
    } else {
        Via::At
    }
}

fn check_len(rc: libc::c_long) -> Result<usize> {
    crate::errno::check_len(rc as libc::ssize_t)
}

/// `setxattrat` or `getxattrat` (`nr`) of attribute `name` on entry `p`
/// under `dirfd`, with `args` naming the value buffer.
///
/// # Safety
/// `args.value` must point at `args.size` bytes, readable for a set and
/// writable for a get, alive for the call (or be null with size 0).
unsafe fn xattrat_value(nr: libc::c_long, dirfd: RawFd, p: &CStr, name: &CStr, args: &XattrArgs) -> libc::c_long {
    // SAFETY: valid C strings; the caller vouches for `args`.
    unsafe {
        libc::syscall(
            nr,
            dirfd,
            p.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            name.as_ptr(),
            args as *const XattrArgs,
            std::mem::size_of::<XattrArgs>(),
        )
    }
}

/// Runs one xattr call on `l`: `at(dirfd, name)` under the directory's
/// descriptor, or `path(path)` with the entry named under /proc/self/fd
/// when the kernel lacks the `*xattrat` calls (or refuses them, as a
/// seccomp filter may, with EPERM: the path call then gives the real
/// answer).
fn run(
    l: &Loc,
    via: Via,
    at: impl Fn(RawFd, &CStr) -> libc::c_long,
    path: impl Fn(&CStr) -> libc::c_long,
) -> Result<usize> {
    let (fd, name) = l.at()?;
    if via == Via::At {
        match check_len(at(fd, &name)) {
            Err(Error(libc::ENOSYS)) => NO_XATTRAT.store(true, Ordering::Relaxed),
            Err(Error(libc::EPERM)) => {}
            r => return r,
        }
    }
    let mut p = format!("/proc/self/fd/{fd}/").into_bytes();
    p.extend_from_slice(name.as_bytes());
    let p = CString::new(p).map_err(|_| Error::EINVAL)?;
    check_len(path(&p))
}

/// Reads a value whose size is first asked for (`f(null, 0)`), asking again
/// if it grew in between (ERANGE).
fn read_sized(f: impl Fn(*mut u8, usize) -> Result<usize>) -> Result<Vec<u8>> {
    loop {
        let len = f(std::ptr::null_mut(), 0)?;
        let mut buf = vec![0u8; len];
        match f(buf.as_mut_ptr(), len) {
            Ok(n) => {
                buf.truncate(n);
                return Ok(buf);
            }
            Err(Error(libc::ERANGE)) => continue,
            Err(e) => return Err(e),
        }
    }
}

fn attr_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::EINVAL)
}

pub fn lsetxattr(l: &Loc, name: &str, value: &[u8], flags: i32) -> Result<()> {
    set(l, via(), name, value, flags)
}

fn set(l: &Loc, via: Via, name: &str, value: &[u8], flags: i32) -> Result<()> {
    let n = attr_name(name)?;
    let size = u32::try_from(value.len()).map_err(|_| Error(libc::E2BIG))?;
    let args = XattrArgs {
        value: value.as_ptr() as u64,
        size,
        flags: flags as u32,
    };
    run(
        l,
        via,
        // SAFETY: `args` points at `value`, alive for the call.
        |fd, p| unsafe { xattrat_value(SYS_SETXATTRAT, fd, p, &n, &args) },
        // SAFETY: valid C strings and buffer.
        |p| unsafe {
            libc::lsetxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), flags) as libc::c_long
        },
    )
    .map(drop)
}

pub fn lgetxattr(l: &Loc, name: &str) -> Result<Vec<u8>> {
    get(l, via(), name)
}

fn get(l: &Loc, via: Via, name: &str) -> Result<Vec<u8>> {
    let n = attr_name(name)?;
    read_sized(|buf, len| {
        let size = u32::try_from(len).map_err(|_| Error(libc::E2BIG))?;
        let args = XattrArgs {
            value: buf as u64,
            size,
            flags: 0,
        };
        run(
            l,
            via,
            // SAFETY: `args` names `len` writable bytes (or none).
            |fd, p| unsafe { xattrat_value(SYS_GETXATTRAT, fd, p, &n, &args) },
            // SAFETY: valid C strings; `buf` has `len` writable bytes (or none).
            |p| unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.cast(), len) as libc::c_long },
        )
    })
}

pub fn llistxattr(l: &Loc) -> Result<Vec<u8>> {
    list(l, via())
}

fn list(l: &Loc, via: Via) -> Result<Vec<u8>> {
    read_sized(|buf, len| {
        run(
            l,
            via,
            // SAFETY: valid C string; `buf` has `len` writable bytes (or none).
            |fd, p| unsafe { libc::syscall(SYS_LISTXATTRAT, fd, p.as_ptr(), libc::AT_SYMLINK_NOFOLLOW, buf, len) },
            // SAFETY: as above.
            |p| unsafe { libc::llistxattr(p.as_ptr(), buf.cast(), len) as libc::c_long },
        )
    })
}

pub fn lremovexattr(l: &Loc, name: &str) -> Result<()> {
    remove(l, via(), name)
}

fn remove(l: &Loc, via: Via, name: &str) -> Result<()> {
    let n = attr_name(name)?;
    run(
        l,
        via,
        // SAFETY: valid C strings.
        |fd, p| unsafe { libc::syscall(SYS_REMOVEXATTRAT, fd, p.as_ptr(), libc::AT_SYMLINK_NOFOLLOW, n.as_ptr()) },
        // SAFETY: valid C strings.
        |p| unsafe { libc::lremovexattr(p.as_ptr(), n.as_ptr()) as libc::c_long },
    )
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{deep_root, new_file};
    use std::ffi::OsStr;

    /// Every call, both ways, on a file in a directory past PATH_MAX.
    #[test]
    fn xattrs_past_path_max_both_ways() {
        let (_t, root, deep) = deep_root();
        let d = root.dir(&deep).unwrap();
        let f = d.entry(OsStr::new("f"));
        new_file(&f);
        for via in [Via::At, Via::Path] {
            set(&f, via, "user.a", b"one", 0).unwrap();
            set(&f, via, "user.b", &[7u8; 3000], libc::XATTR_CREATE).unwrap();
            assert_eq!(
                set(&f, via, "user.b", b"x", libc::XATTR_CREATE),
                Err(Error(libc::EEXIST))
            );
            assert_eq!(get(&f, via, "user.a").unwrap(), b"one");
            assert_eq!(get(&f, via, "user.b").unwrap(), vec![7u8; 3000]);
            let mut names: Vec<_> = list(&f, via)
                .unwrap()
                .split(|&b| b == 0)
                .filter(|s| !s.is_empty())
                .map(<[u8]>::to_vec)
                .collect();
            names.sort();
            assert_eq!(names, [b"user.a".to_vec(), b"user.b".to_vec()]);
            remove(&f, via, "user.a").unwrap();
            remove(&f, via, "user.b").unwrap();
            assert_eq!(get(&f, via, "user.a"), Err(Error(libc::ENODATA)));
            assert_eq!(remove(&f, via, "user.b"), Err(Error(libc::ENODATA)));
            assert!(list(&f, via).unwrap().is_empty());
        }
    }

    /// Neither way follows a symlink at the entry: the attribute lands on
    /// the link (or is refused), never on its target.
    #[test]
    fn xattrs_never_reach_a_symlink_target() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("outside");
        std::fs::write(&out, b"x").unwrap();
        std::fs::create_dir(t.path().join("root")).unwrap();
        std::os::unix::fs::symlink(&out, t.path().join("root/l")).unwrap();
        let root = crate::Root::open(&t.path().join("root")).unwrap();
        let l = root.top().entry(OsStr::new("l"));
        for via in [Via::At, Via::Path] {
            // user.* attributes are not allowed on symlinks: EPERM.
            assert!(set(&l, via, "user.a", b"one", 0).is_err());
            assert_eq!(get(&l, via, "user.a"), Err(Error(libc::ENODATA)));
        }
        let mut buf = [0u8; 64];
        let c = CString::new(out.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: valid C strings and buffer.
        let n = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        assert!(
            n <= 0 || !buf[..n as usize].starts_with(b"user.a"),
            "the target got no attribute"
        );
    }

    /// On a kernel with `*xattrat` (6.13+) the descriptor is used, not
    /// /proc: the call succeeds straight through the system call.
    #[test]
    fn xattrat_is_used_where_the_kernel_has_it() {
        let (_t, root, deep) = deep_root();
        let d = root.dir(&deep).unwrap();
        let f = d.entry(OsStr::new("g"));
        new_file(&f);
        let (fd, name) = (d.fd(), CString::new("g").unwrap());
        // SAFETY: valid C strings and an empty list buffer.
        let rc = unsafe {
            libc::syscall(
                SYS_LISTXATTRAT,
                fd,
                name.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
                std::ptr::null_mut::<u8>(),
                0usize,
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error().raw_os_error();
            assert!(matches!(e, Some(libc::ENOSYS) | Some(libc::EPERM)), "{e:?}");
            warpfs_testkit::skip("this kernel has no listxattrat (Linux < 6.13)");
            return;
        }
        assert_eq!(rc, 0);
        lsetxattr(&f, "user.k", b"v", 0).unwrap();
        assert_eq!(lgetxattr(&f, "user.k").unwrap(), b"v");
        assert!(!NO_XATTRAT.load(Ordering::Relaxed));
    }

    /// A name longer than the kernel allows is refused, not truncated.
    #[test]
    fn bad_names_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = crate::Root::open(t.path()).unwrap();
        let f = root.top().entry(OsStr::new("f"));
        new_file(&f);
        assert_eq!(lsetxattr(&f, "user.a\0b", b"", 0), Err(Error::EINVAL));
        assert_eq!(
            lsetxattr(&f, &format!("user.{}", "n".repeat(300)), b"", 0),
            Err(Error(libc::ERANGE))
        );
    }
}
