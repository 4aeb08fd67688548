//! A ring entry's buffers. They hold plaintext (a WRITE's data, a READ's
//! answer, names): page-aligned, locked in RAM (`mlock`) where
//! RLIMIT_MEMLOCK (or CAP_IPC_LOCK) allows it, else used unlocked after one
//! log line; left out of core dumps; overwritten with zeros when the ring
//! is torn down.

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the one line about unlocked buffers was logged.
static WARNED: AtomicBool = AtomicBool::new(false);

/// A page-aligned, zeroed allocation the kernel reads and writes while an
/// entry is in its hands; only touched here between a completion and the
/// next submission of that entry.
pub(super) struct Buf {
    ptr: *mut u8,
    layout: Layout,
    locked: bool,
}

impl Buf {
    /// `len` zero bytes on pages of their own, locked if allowed.
    pub(super) fn new(len: usize) -> std::io::Result<Buf> {
        let layout = Layout::from_size_align(len.max(1).div_ceil(4096) * 4096, 4096).map_err(std::io::Error::other)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(std::io::ErrorKind::OutOfMemory.into());
        }
        // SAFETY: ptr..ptr+size is our own page-aligned allocation.
        let locked = unsafe { libc::mlock(ptr.cast(), layout.size()) } == 0;
        if !locked && !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "io_uring: cannot lock the ring buffers in RAM ({}): the plaintext they hold may be swapped \
                 out (raise RLIMIT_MEMLOCK)",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: as above; failure only means the pages may be dumped.
        unsafe { libc::madvise(ptr.cast(), layout.size(), libc::MADV_DONTDUMP) };
        Ok(Buf { ptr, layout, locked })
    }

    /// Where the buffer starts (for the iovecs REGISTER hands over).
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether its pages are locked in RAM.
    #[cfg(test)]
    fn is_locked(&self) -> bool {
        self.locked
    }

    /// The whole buffer. Only between a completion of its entry and the
    /// next submission (the kernel does not touch it then).
    #[allow(clippy::mut_from_ref)]
    pub(super) fn bytes(&self) -> &mut [u8] {
        // SAFETY: `ptr` is a live allocation of `layout.size()` bytes; the
        // caller holds the entry, so nothing else reads or writes it now.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // The kernel is done with it (the ring was dropped first).
        zeroize::Zeroize::zeroize(self.bytes());
        #[cfg(test)]
        tests::record_freed(self.bytes());
        // SAFETY: allocated in `new` with this layout; munlock of pages
        // that were not locked is harmless.
        unsafe {
            if self.locked {
                libc::munlock(self.ptr.cast(), self.layout.size());
            }
            std::alloc::dealloc(self.ptr, self.layout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    std::thread_local! {
        static FREED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Called by `Drop` (tests only): a copy of the bytes as they are just
    /// before they are freed.
    pub(super) fn record_freed(b: &[u8]) {
        FREED.with(|f| *f.borrow_mut() = b.to_vec());
    }

    /// This thread's effective capabilities without CAP_IPC_LOCK (the
    /// others' are per thread and stay).
    fn drop_ipc_lock_here() {
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
        // SAFETY: capget/capset on this thread with valid buffers.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
            d[0].effective &= !(1 << 14); // CAP_IPC_LOCK
            assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
        }
    }

    fn vm_locked_kib() -> usize {
        let st = std::fs::read_to_string("/proc/self/status").unwrap();
        let l = st.lines().find(|l| l.starts_with("VmLck:")).unwrap();
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn buffers_are_locked_and_zeroed_when_freed() {
        let b = Buf::new(super::super::PAYLOAD).unwrap();
        assert_eq!(b.len(), 1 << 20);
        assert_eq!(b.ptr() as usize % 4096, 0);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // CAP_IPC_LOCK: no limit applies.
            assert!(b.is_locked(), "a payload buffer is not locked in RAM");
            assert!(vm_locked_kib() >= 1024, "VmLck below the buffer's MiB");
        }
        b.bytes().fill(0xA5);
        drop(b);
        let freed = FREED.with(|f| std::mem::take(&mut *f.borrow_mut()));
        assert_eq!(freed.len(), 1 << 20);
        assert!(freed.iter().all(|&x| x == 0), "plaintext left in a freed ring buffer");
    }

    #[test]
    fn a_lock_refused_by_rlimit_memlock_still_gives_a_buffer() {
        // On a thread of its own: capabilities are per thread.
        std::thread::spawn(|| {
            let mut was = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: valid rlimit buffers.
            unsafe {
                assert_eq!(libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut was), 0);
                drop_ipc_lock_here();
                let low = libc::rlimit {
                    rlim_cur: 4096,
                    rlim_max: was.rlim_max,
                };
                assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &low), 0);
            }
            let r = [Buf::new(1 << 20), Buf::new(1 << 20)];
            // SAFETY: as above (back to the soft limit we found).
            unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &was) };
            for b in r {
                let b = b.expect("an mlock refusal failed the buffer");
                assert!(!b.is_locked());
                b.bytes()[0] = 1;
            }
            assert!(
                WARNED.load(Ordering::Relaxed),
                "no line said the buffers are not locked"
            );
        })
        .join()
        .unwrap();
    }
}
