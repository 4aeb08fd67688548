//! `-o setuid=USER` (`--setuid USER`): a mount made by root whose daemon,
//! and whose `--extpass` program, run as USER. The mount is made as USER
//! with root's capabilities kept (so the kernel records USER as the
//! mount's owner and lets USER in), then the daemon becomes USER for good
//! (USER's groups, gid and uid; every capability gone), as mount.fuse3's
//! `drop_privileges` does (docs/decisions/0075-setuid-mount-option.md).

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// A user from the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the group database's, as `initgroups`).
    pub groups: Vec<libc::gid_t>,
    pub home: PathBuf,
}

/// One entry of the password database by name, or by number when no name
/// matches and `s` is one.
fn getpw(s: &str) -> Result<Option<(String, u32, u32, PathBuf)>, String> {
    let name = CString::new(s).map_err(|_| format!("'{s}' is not a user name"))?;
    let mut buf = vec![0 as libc::c_char; 4096];
    loop {
        // SAFETY: zero is a valid passwd; the result points into `pw`/`buf`.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: valid buffers of the sizes given.
        let r = unsafe {
            match s.parse::<u32>() {
                Ok(uid) if s.bytes().all(|b| b.is_ascii_digit()) => {
                    let r = libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut res);
                    if r == 0 && res.is_null() {
                        libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut res)
                    } else {
                        r
                    }
                }
                _ => libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut res),
            }
        };
        if r == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if r != 0 {
            return Err(format!(
                "cannot look up user '{s}': {}",
                io::Error::from_raw_os_error(r)
            ));
        }
        if res.is_null() {
            return Ok(None);
        }
        // SAFETY: getpwnam_r filled `pw` with NUL-terminated strings in `buf`.
        let (n, home) = unsafe { (CStr::from_ptr(pw.pw_name), CStr::from_ptr(pw.pw_dir)) };
        return Ok(Some((
            n.to_string_lossy().into_owned(),
            pw.pw_uid,
            pw.pw_gid,
            PathBuf::from(home.to_string_lossy().into_owned()),
        )));
    }
}

/// The groups `name` is in (its primary group `gid` first).
fn groups_of(name: &str, gid: u32) -> Result<Vec<libc::gid_t>, String> {
    let c = CString::new(name).map_err(|_| format!("'{name}' is not a user name"))?;
    let mut n: libc::c_int = 32;
    loop {
        let mut v = vec![0 as libc::gid_t; n as usize];
        let want = n;
        // SAFETY: `v` holds `n` entries; getgrouplist writes at most that many.
        let r = unsafe { libc::getgrouplist(c.as_ptr(), gid, v.as_mut_ptr(), &mut n) };
        if r >= 0 {
            v.truncate(n.max(0) as usize);
            return Ok(v);
        }
        if n <= want {
            n = want * 2;
        }
        if n > 65536 {
            return Err(format!("user '{name}' is in too many groups"));
        }
    }
}

/// `--setuid USER`: a user name (or a number the password database knows);
/// an unknown user is a usage error.
pub fn parse_user(s: &str) -> Result<User, String> {
    let Some((name, uid, gid, home)) = getpw(s)? else {
        return Err(format!("no user '{s}' in the password database"));
    };
    let groups = groups_of(&name, gid)?;
    Ok(User {
        name,
        uid,
        gid,
        groups,
        home,
    })
}

fn last_err(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// Whether this process may become `u` (it is root, or already `u`).
pub fn check_allowed(u: &User) -> Result<(), String> {
    // SAFETY: geteuid/getuid have no preconditions.
    let (euid, uid) = unsafe { (libc::geteuid(), libc::getuid()) };
    if euid == 0 || (euid == u.uid && uid == u.uid) {
        Ok(())
    } else {
        Err(format!("setuid={}: only root can run a mount as another user", u.name))
    }
}

impl User {
    /// Whether this thread has an id that is not this user's (real,
    /// effective or saved uid or gid): then it must change.
    fn differs(&self) -> bool {
        let (mut r, mut e, mut s) = (0, 0, 0);
        let (mut gr, mut ge, mut gs) = (0, 0, 0);
        // SAFETY: valid pointers to fill.
        let ok =
            unsafe { libc::getresuid(&mut r, &mut e, &mut s) == 0 && libc::getresgid(&mut gr, &mut ge, &mut gs) == 0 };
        !ok || [r, e, s] != [self.uid; 3] || [gr, ge, gs] != [self.gid; 3]
    }

    /// Make `cmd` run as this user: its groups, gid and uid (set in the
    /// child before exec), and HOME, USER and LOGNAME.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env("HOME", &self.home)
            .env("USER", &self.name)
            .env("LOGNAME", &self.name);
        if !self.differs() {
            return;
        }
        let (uid, gid, groups) = (self.uid, self.gid, self.groups.clone());
        // SAFETY: the closure only makes system calls on data prepared
        // before the fork (no allocation, no locks).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setresgid(gid, gid, gid) != 0
                    || libc::setresuid(uid, uid, uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// Before the mount, on the thread that makes it: real and effective uid
/// and gid become `u`'s (the kernel takes the mount's owner, `user_id=`,
/// from them, and so does the daemon's own check of callers), the saved
/// ones stay root's, and this thread keeps its capabilities
/// (SECBIT_NO_SETUID_FIXUP) to mount. Raw system calls, so the other
/// threads (the keystream workers) stay root until [`become_user`].
pub fn mount_as(u: &User) -> Result<(), String> {
    if !u.differs() {
        return Ok(());
    }
    // SAFETY: prctl and raw set*id system calls on this thread only.
    unsafe {
        let bits = libc::prctl(libc::PR_GET_SECUREBITS);
        if bits < 0 || libc::prctl(libc::PR_SET_SECUREBITS, bits | libc::SECBIT_NO_SETUID_FIXUP) != 0 {
            return Err(last_err("setuid: cannot keep the capabilities to mount"));
        }
        let keep = libc::c_long::from(-1i32);
        if libc::syscall(
            libc::SYS_setresgid,
            libc::c_long::from(u.gid),
            libc::c_long::from(u.gid),
            keep,
        ) != 0
        {
            return Err(last_err("setuid: setresgid"));
        }
        if libc::syscall(
            libc::SYS_setresuid,
            libc::c_long::from(u.uid),
            libc::c_long::from(u.uid),
            keep,
        ) != 0
        {
            return Err(last_err("setuid: setresuid"));
        }
    }
    Ok(())
}

/// This thread's permitted capabilities (both 32-bit halves).
fn permitted_caps() -> Result<u64, String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget with a valid header and two data entries.
    if unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) } != 0 {
        return Err(last_err("capget"));
    }
    Ok(u64::from(d[0].permitted) | u64::from(d[1].permitted) << 32)
}

/// Once the mount is made (and before any thread that serves it starts):
/// the whole process becomes `u`: its supplementary groups, gid and uid,
/// real, effective and saved, on every thread (glibc's set*id calls reach
/// them all), which clears every capability. Checked afterwards; the
/// process is made non-dumpable again (a uid change resets that).
pub fn become_user(u: &User) -> Result<(), String> {
    if !u.differs() {
        return Ok(());
    }
    // SAFETY: prctl and glibc's process-wide set*id calls with valid data.
    unsafe {
        let bits = libc::prctl(libc::PR_GET_SECUREBITS);
        if bits < 0 || libc::prctl(libc::PR_SET_SECUREBITS, bits & !libc::SECBIT_NO_SETUID_FIXUP) != 0 {
            return Err(last_err("setuid: cannot give up the capabilities"));
        }
        if libc::setgroups(u.groups.len(), u.groups.as_ptr()) != 0 {
            return Err(last_err("setuid: setgroups"));
        }
        if libc::setresgid(u.gid, u.gid, u.gid) != 0 {
            return Err(last_err("setuid: setresgid"));
        }
        if libc::setresuid(u.uid, u.uid, u.uid) != 0 {
            return Err(last_err("setuid: setresuid"));
        }
        let (mut r, mut e, mut s) = (0, 0, 0);
        libc::getresuid(&mut r, &mut e, &mut s);
        if (r, e, s) != (u.uid, u.uid, u.uid) {
            return Err(format!("setuid: uids {r}/{e}/{s} after becoming {}", u.name));
        }
    }
    if u.uid != 0 && permitted_caps()? != 0 {
        return Err(format!("setuid: capabilities left after becoming {}", u.name));
    }
    if !warpfs_crypto::make_non_dumpable() {
        tracing::warn!("cannot make the process non-dumpable");
    }
    tracing::info!(
        "running as {} (uid {}, gid {}) from now on (setuid=)",
        u.name,
        u.uid,
        u.gid
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_by_name_or_number() {
        let root = parse_user("root").unwrap();
        assert_eq!((root.uid, root.gid, root.name.as_str()), (0, 0, "root"));
        assert!(root.groups.contains(&0));
        assert_eq!(parse_user("0").unwrap().name, "root");
        for bad in ["no-such-user-warpfs", "", "a\0b", "4294967000"] {
            assert!(parse_user(bad).is_err(), "{bad:?}");
        }
    }
}
