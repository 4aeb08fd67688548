//! Test authenticators on Unix sockets, reached through libfido2's own
//! custom transport hook (`fido_dev_set_transport_functions`, with
//! `fido_dev_set_io_functions` for opening and closing): libfido2 does
//! all of CTAP2 as for a USB key (CTAPHID INIT, getInfo, the PIN
//! protocol's key agreement, make-credential, get-assertion) and hands
//! each CTAPHID message whole to [`TRANSPORT`], which sends it on a stream
//! socket as one frame: the command byte, the payload length (u32, big
//! endian), the payload; answers come back the same way. Used only when
//! the environment variable [`TEST_ENV`] names the sockets (a
//! colon-separated list), the process is not running set-user-ID or
//! set-group-ID (`AT_SECURE`), and the process at the other end runs as
//! this user or as root; then those sockets are the only FIDO2 devices,
//! and the caller says so on the terminal. The test suite's software
//! authenticator (`warpfs-testkit`'s `ctap2`) listens there
//! (docs/decisions/0085-fido2-slots.md).

use crate::sys;
use libc::{c_char, c_int, c_uchar, c_void, size_t};
use std::ffi::CStr;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// The environment variable naming test authenticators' sockets.
pub const TEST_ENV: &str = "WARPFS_FIDO2_TEST_AUTHENTICATOR";
/// The longest message either way (libfido2's own limit is lower).
const MAX_MESSAGE: usize = 1 << 16;

/// The sockets [`TEST_ENV`] names, when it is set and honoured.
pub fn sockets() -> Option<Vec<PathBuf>> {
    let v = std::env::var_os(TEST_ENV)?;
    // SAFETY: getauxval has no preconditions.
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        return None;
    }
    Some(
        std::env::split_paths(&v)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
    )
}

/// Whether `path` is one of the test sockets (then it is opened through
/// [`IO`], not as a HID device).
pub fn is_test_socket(path: &str) -> bool {
    sockets().is_some_and(|s| s.iter().any(|p| p.as_os_str() == path))
}

/// The open and close functions of a test socket (libfido2 wants all
/// four; reading and writing reports go through [`TRANSPORT`] instead).
pub static IO: sys::fido_dev_io_t = sys::fido_dev_io_t {
    open: sock_open,
    close: sock_close,
    read: no_read,
    write: no_write,
};

/// The transport functions of a test socket: whole messages.
pub static TRANSPORT: sys::fido_dev_transport_t = sys::fido_dev_transport_t {
    rx: sock_rx,
    tx: sock_tx,
};

/// Whether the peer of `s` runs as this process's user or as root.
fn peer_is_trusted(s: &UnixStream) -> bool {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills a ucred of the length given.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: getuid has no preconditions.
    r == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::getuid() })
}

unsafe extern "C" fn sock_open(path: *const c_char) -> *mut c_void {
    if path.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: libfido2 passes the NUL-terminated path given to fido_dev_open.
    let path = unsafe { CStr::from_ptr(path) };
    let Ok(path) = path.to_str() else {
        return std::ptr::null_mut();
    };
    if !is_test_socket(path) {
        return std::ptr::null_mut();
    }
    match UnixStream::connect(path) {
        Ok(s) if peer_is_trusted(&s) => Box::into_raw(Box::new(s)).cast(),
        _ => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn sock_close(h: *mut c_void) {
    if !h.is_null() {
        // SAFETY: `h` came from Box::into_raw in sock_open and is closed once.
        drop(unsafe { Box::from_raw(h.cast::<UnixStream>()) });
    }
}

unsafe extern "C" fn no_read(_: *mut c_void, _: *mut c_uchar, _: size_t, _: c_int) -> c_int {
    -1
}

unsafe extern "C" fn no_write(_: *mut c_void, _: *const c_uchar, _: size_t) -> c_int {
    -1
}

/// The socket of an open test device.
///
/// # Safety
/// `dev` is a device opened through [`IO`].
unsafe fn socket<'a>(dev: *mut sys::fido_dev_t) -> Option<&'a UnixStream> {
    if dev.is_null() {
        return None;
    }
    // SAFETY: the handle is the UnixStream sock_open boxed, live until close.
    let h = unsafe { sys::fido_dev_io_handle(dev) };
    (!h.is_null()).then(|| unsafe { &*h.cast::<UnixStream>() })
}

unsafe extern "C" fn sock_tx(dev: *mut sys::fido_dev_t, cmd: u8, buf: *const c_uchar, len: size_t) -> c_int {
    // SAFETY: libfido2 passes its open device.
    let Some(s) = (unsafe { socket(dev) }) else { return -1 };
    if len > MAX_MESSAGE || (buf.is_null() && len != 0) {
        return -1;
    }
    let data: &[u8] = if len == 0 {
        &[]
    } else {
        // SAFETY: libfido2 gives `len` readable bytes.
        unsafe { std::slice::from_raw_parts(buf, len) }
    };
    let mut frame = Vec::with_capacity(5 + len);
    frame.push(cmd);
    frame.extend_from_slice(&(len as u32).to_be_bytes());
    frame.extend_from_slice(data);
    let mut w: &UnixStream = s;
    let r = w.write_all(&frame);
    zeroize::Zeroize::zeroize(&mut frame);
    match r {
        Ok(()) => len as c_int,
        Err(_) => -1,
    }
}

unsafe extern "C" fn sock_rx(dev: *mut sys::fido_dev_t, cmd: u8, buf: *mut c_uchar, len: size_t, ms: c_int) -> c_int {
    // SAFETY: libfido2 passes its open device.
    let Some(s) = (unsafe { socket(dev) }) else { return -1 };
    if buf.is_null() {
        return -1;
    }
    let timeout = (ms >= 0).then(|| Duration::from_millis(ms.max(1) as u64));
    if s.set_read_timeout(timeout).is_err() {
        return -1;
    }
    let mut r: &UnixStream = s;
    let mut head = [0u8; 5];
    if r.read_exact(&mut head).is_err() || head[0] != cmd {
        return -1;
    }
    let n = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if n > len || n > MAX_MESSAGE {
        return -1;
    }
    let mut body = vec![0u8; n];
    if r.read_exact(&mut body).is_err() {
        return -1;
    }
    // SAFETY: libfido2 gives a buffer of `len` >= n bytes.
    unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), buf, n) };
    zeroize::Zeroize::zeroize(&mut body);
    n as c_int
}
