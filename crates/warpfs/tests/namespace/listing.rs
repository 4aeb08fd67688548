//! Directory streams: rewinddir(3) lists the directory as it is now.

use super::*;
use std::ffi::{CStr, CString};

mode_tests!(all: rewinddir_lists_the_directory_again);

/// Every name one pass of the stream `d` returns, `.` and `..` left out.
fn pass(d: *mut libc::DIR) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        // SAFETY: `d` is an open stream; the entry is valid until the next call.
        let e = unsafe { libc::readdir(d) };
        if e.is_null() {
            break;
        }
        let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if name != "." && name != ".." {
            out.push(name);
        }
    }
    out.sort();
    out
}

/// POSIX: after rewinddir a stream reflects the directory's current
/// contents. One stream stays open while names are made and removed; each
/// pass after a rewind shows each name there exactly once, also the first
/// pass, after names made between opendir and it (generic/471 checks that
/// with 10,000 names).
fn rewinddir_lists_the_directory_again(mode: Mode) {
    require_fuse!();
    let v = Volume::new(mode);
    fs::create_dir(v.p("d")).unwrap();
    let made = |range: std::ops::Range<u32>| {
        for i in range {
            write_file(&v.p(format!("d/f{i:04}")), b"x");
        }
    };
    let want = |range: std::ops::Range<u32>| range.map(|i| format!("f{i:04}")).collect::<Vec<_>>();
    let c = CString::new(v.p("d").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path; the stream is closed below.
    let d = unsafe { libc::opendir(c.as_ptr()) };
    assert!(!d.is_null(), "opendir: {}", std::io::Error::last_os_error());
    // Names made between opendir and the stream's first read, and a
    // rewind before it (generic/471).
    made(0..50);
    unsafe { libc::rewinddir(d) };
    assert_eq!(pass(d), want(0..50), "first pass, names made after opendir");
    made(50..300);
    unsafe { libc::rewinddir(d) };
    assert_eq!(pass(d), want(0..300), "after names were made and a rewind");
    for i in 0..100 {
        fs::remove_file(v.p(format!("d/f{i:04}"))).unwrap();
    }
    unsafe { libc::rewinddir(d) };
    assert_eq!(pass(d), want(100..300), "after names were removed and a rewind");
    unsafe { libc::rewinddir(d) };
    assert_eq!(pass(d), want(100..300), "a rewind with nothing changed");
    unsafe { libc::closedir(d) };
}
