//! `Locked<T>`: key material on its own page-aligned heap pages, locked in
//! RAM (`mlock`, so it is never swapped out), left out of core dumps
//! (`MADV_DONTDUMP`) and overwritten with zeros on drop (after `T`'s own
//! drop, which for the `aes` types also zeroizes). [`LockedBuf`] is the
//! same for a run-time number of bytes or words (raw keys of either
//! length, key tables a device uploads, keystream masks). When `mlock` is
//! not allowed (RLIMIT_MEMLOCK) a warning is logged once and the key is
//! used unlocked. Memory locks are not inherited across `fork`: a daemon
//! calls [`lock_all`] in the child. `T` must keep its secrets inline
//! (arrays, expanded AES keys), not behind pointers of its own.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static WARNED: AtomicBool = AtomicBool::new(false);
/// Every live `Locked` region: (address, length).
static REGIONS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Lock every live `Locked` region in RAM again (after `fork`, whose child
/// inherits no memory locks). Returns the bytes locked, or the first error
/// (e.g. EPERM/ENOMEM under a small RLIMIT_MEMLOCK).
pub fn lock_all() -> std::io::Result<usize> {
    let regions = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
    let mut n = 0;
    for &(addr, len) in regions.iter() {
        // SAFETY: a live allocation of a Locked (removed before it is freed).
        if unsafe { libc::mlock(addr as *const libc::c_void, len) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        n += len;
    }
    Ok(n)
}

/// A `T` on locked, non-dumped pages, zeroed on drop.
pub struct Locked<T> {
    ptr: NonNull<T>,
    layout: Layout,
    locked: bool,
}

// SAFETY: Locked<T> owns its T like a Box<T>.
unsafe impl<T: Send> Send for Locked<T> {}
// SAFETY: shared access only hands out &T.
unsafe impl<T: Sync> Sync for Locked<T> {}

impl<T> Locked<T> {
    /// Move `value` onto fresh locked pages. The caller should zeroize its
    /// own copy of the source bytes.
    pub fn new(value: T) -> Self {
        let (raw, layout, locked) = alloc_locked(std::mem::size_of::<T>(), std::mem::align_of::<T>());
        let ptr = raw.cast::<T>();
        // SAFETY: fresh allocation, aligned for T and at least its size.
        unsafe { ptr.as_ptr().write(value) };
        Self { ptr, layout, locked }
    }

    /// Whether the pages are locked in RAM.
    pub fn is_locked(&self) -> bool {
        self.locked
    }
}

impl<T> std::ops::Deref for Locked<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: ptr holds an initialised T for our lifetime.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> std::ops::DerefMut for Locked<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: unique access through &mut self.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T: Clone> Clone for Locked<T> {
    fn clone(&self) -> Self {
        Locked::new((**self).clone())
    }
}

impl<T> Drop for Locked<T> {
    fn drop(&mut self) {
        // SAFETY: the T is initialised and dropped exactly once here; then
        // the whole allocation is ours to overwrite, unlock and free.
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            free_locked(self.ptr.cast(), self.layout);
        }
    }
}

/// Zeroed pages for `size` bytes aligned to `align` (at least a page),
/// locked in RAM when allowed and left out of core dumps; recorded for
/// [`lock_all`].
fn alloc_locked(size: usize, align: usize) -> (NonNull<u8>, Layout, bool) {
    let page = page_size();
    let size = size.max(1).div_ceil(page) * page;
    let layout = Layout::from_size_align(size, page.max(align)).expect("page layout");
    // SAFETY: size > 0.
    let raw = unsafe { alloc_zeroed(layout) };
    let Some(ptr) = NonNull::new(raw) else {
        handle_alloc_error(layout);
    };
    // SAFETY: raw..raw+size is our own page-aligned allocation.
    let locked = unsafe { libc::mlock(raw.cast(), size) } == 0;
    if !locked && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "cannot lock key memory in RAM ({}); keys may be swapped out (raise RLIMIT_MEMLOCK)",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: as above; failure only means the pages may be dumped.
    unsafe { libc::madvise(raw.cast(), size, libc::MADV_DONTDUMP) };
    REGIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((raw as usize, size));
    (ptr, layout, locked)
}

/// Overwrite an allocation of [`alloc_locked`] with zeros, unlock and
/// free it.
///
/// # Safety
/// `ptr` and `layout` come from one `alloc_locked` call, and nothing uses
/// the allocation any more (nothing in it needs dropping).
unsafe fn free_locked(ptr: NonNull<u8>, layout: Layout) {
    let raw = ptr.as_ptr();
    // SAFETY: per the caller, the allocation is ours to overwrite.
    unsafe { wipe(raw, layout.size()) };
    #[cfg(test)]
    // SAFETY: as above; still allocated.
    unsafe {
        tests::record_freed(raw, layout.size())
    };
    {
        let mut r = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = r.iter().position(|&(a, _)| a == raw as usize) {
            r.swap_remove(i);
        }
    }
    // SAFETY: our own allocation; harmless when not locked (or locked
    // again by lock_all); freed exactly once.
    unsafe {
        libc::munlock(raw.cast(), layout.size());
        dealloc(raw, layout);
    }
}

/// Element types of a [`LockedBuf`]: plain integers, whose all-zero bytes
/// are a value and which hold no pointers.
pub trait Plain: Copy + plain::Sealed {}

mod plain {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

impl Plain for u8 {}
impl Plain for u32 {}
impl Plain for u64 {}

/// A buffer of a length chosen at run time on locked, non-dumped pages,
/// zeroed on drop: raw keys, key tables a device uploads, keystream masks
/// made ahead of need (what they XOR decides plaintext).
pub struct LockedBuf<T: Plain> {
    ptr: NonNull<T>,
    len: usize,
    layout: Layout,
    locked: bool,
}

/// Bytes on locked pages (masks, raw keys).
pub type LockedBytes = LockedBuf<u8>;
/// 32-bit words on locked pages (key tables as a device kernel takes them).
pub type LockedWords = LockedBuf<u32>;

// SAFETY: LockedBuf owns its elements like a Box<[T]>, and T is a plain integer.
unsafe impl<T: Plain> Send for LockedBuf<T> {}
// SAFETY: shared access only hands out &[T].
unsafe impl<T: Plain> Sync for LockedBuf<T> {}

impl<T: Plain> LockedBuf<T> {
    /// `len` zero elements on fresh locked pages.
    pub fn zeroed(len: usize) -> Self {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("buffer size");
        let (raw, layout, locked) = alloc_locked(bytes, std::mem::align_of::<T>());
        Self {
            ptr: raw.cast(),
            len,
            layout,
            locked,
        }
    }

    /// A copy of `src` on fresh locked pages (the caller wipes `src`).
    pub fn from_slice(src: &[T]) -> Self {
        let mut b = Self::zeroed(src.len());
        b.copy_from_slice(src);
        b
    }

    /// Whether the pages are locked in RAM.
    pub fn is_locked(&self) -> bool {
        self.locked
    }
}

impl<T: Plain> std::ops::Deref for LockedBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr..ptr+len is initialised (zeroed at allocation, and
        // all-zero bytes are a T) and aligned for T.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Plain> std::ops::DerefMut for LockedBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: unique access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// A clone copies page to page.
impl<T: Plain> Clone for LockedBuf<T> {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl<T: Plain> std::fmt::Debug for LockedBuf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LockedBuf({} x {} bytes)", self.len, std::mem::size_of::<T>())
    }
}

impl<T: Plain> Drop for LockedBuf<T> {
    fn drop(&mut self) {
        // SAFETY: plain integers need no drop; the allocation is ours.
        unsafe { free_locked(self.ptr.cast(), self.layout) }
    }
}

/// Overwrite `len` bytes at `p` with zeros in a way the compiler keeps.
///
/// # Safety
/// `p..p+len` must be valid for writes.
unsafe fn wipe(p: *mut u8, len: usize) {
    for i in 0..len {
        // SAFETY: in bounds per the caller.
        unsafe { std::ptr::write_volatile(p.add(i), 0) };
    }
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// Make this process non-dumpable (no core dumps, no ptrace attach or
/// /proc/PID/mem by other unprivileged processes). Returns whether it
/// worked.
pub fn make_non_dumpable() -> bool {
    // SAFETY: plain prctl.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_is_on_its_own_aligned_pages_and_cloned_apart() {
        let a = Locked::new([7u8; 32]);
        assert_eq!(*a, [7u8; 32]);
        assert_eq!(&*a as *const _ as usize % page_size(), 0);
        let b = a.clone();
        assert_eq!(*b, *a);
        assert_ne!(&*a as *const _ as usize, &*b as *const _ as usize);
    }

    #[test]
    fn pages_are_locked_when_allowed() {
        let k = Locked::new([1u64; 600]); // 4800 bytes: two pages
        if k.is_locked() {
            let st = std::fs::read_to_string("/proc/self/status").unwrap();
            let vmlck = st.lines().find(|l| l.starts_with("VmLck:")).unwrap();
            let kb: usize = vmlck.split_whitespace().nth(1).unwrap().parse().unwrap();
            assert!(kb >= 8, "{vmlck}");
            assert!(lock_all().unwrap() >= 2 * page_size());
        }
        drop(k);
    }

    std::thread_local! {
        static FREED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Called by `Drop` (tests only): keep a copy of the pages as they are
    /// just before they are freed.
    pub(super) unsafe fn record_freed(p: *const u8, len: usize) {
        // SAFETY: per the caller, p..p+len is readable.
        let v = unsafe { std::slice::from_raw_parts(p, len) }.to_vec();
        FREED.with(|f| *f.borrow_mut() = v);
    }

    #[test]
    fn locked_bytes_are_locked_and_zeroed_on_drop() {
        let mut b = LockedBytes::zeroed(4096 + 16);
        assert_eq!(b.len(), 4112);
        assert!(b.iter().all(|&x| x == 0));
        b.fill(0xCD);
        assert_eq!(&*b as *const [u8] as *const u8 as usize % page_size(), 0);
        if b.is_locked() {
            assert!(REGIONS
                .lock()
                .unwrap()
                .iter()
                .any(|&(a, n)| a == b.as_ptr() as usize && n == 2 * page_size()));
        }
        drop(b);
        let freed = FREED.with(|f| f.borrow().clone());
        assert_eq!(freed.len(), 2 * page_size());
        assert!(freed.iter().all(|&x| x == 0), "mask bytes left in freed pages");
    }

    #[test]
    fn locked_words_are_aligned_cloned_apart_and_zeroed_on_drop() {
        let src = [0xdead_beefu32; 1100]; // 4400 bytes: two pages
        let w = LockedWords::from_slice(&src);
        assert_eq!(&w[..], &src[..]);
        assert_eq!(w.as_ptr() as usize % page_size(), 0);
        let c = w.clone();
        assert_eq!(&c[..], &w[..]);
        assert_ne!(c.as_ptr(), w.as_ptr());
        if w.is_locked() {
            assert!(REGIONS
                .lock()
                .unwrap()
                .iter()
                .any(|&(a, n)| a == w.as_ptr() as usize && n == 2 * page_size()));
        }
        drop(c);
        drop(w);
        let freed = FREED.with(|f| f.borrow().clone());
        assert_eq!(freed.len(), 2 * page_size());
        assert!(freed.iter().all(|&x| x == 0), "key words left in freed pages");
        assert!(LockedWords::zeroed(0).is_empty());
    }

    #[test]
    fn drop_zeroes_the_pages() {
        drop(Locked::new([0xABu8; 5000]));
        let freed = FREED.with(|f| f.borrow().clone());
        assert_eq!(freed.len(), 2 * page_size());
        assert!(freed.iter().all(|&b| b == 0), "key bytes left in freed pages");
        // And Drop runs T's drop before the wipe.
        struct Flag<'a>(&'a AtomicBool);
        impl Drop for Flag<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let dropped = AtomicBool::new(false);
        drop(Locked::new(Flag(&dropped)));
        assert!(dropped.load(Ordering::Relaxed));
    }
}
