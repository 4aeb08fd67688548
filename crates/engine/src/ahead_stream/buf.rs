//! A decrypt-ahead request's buffer: written in disjoint chunks by the
//! threads that claimed them, read whole once every chunk is done.

use super::CHUNK;

/// A request's buffer (of `cap` bytes, at least the request's length),
/// written in disjoint chunks by the thread that owns each chunk (its claim
/// is made under the stream's lock).
pub(super) struct Buf {
    pub(super) ptr: *mut u8,
    pub(super) cap: usize,
}

// SAFETY: `Buf` owns its allocation; threads write only the chunks they
// claimed under the stream lock (disjoint), and the whole buffer is read
// only after every chunk is done (see `AheadStream::read`).
unsafe impl Send for Buf {}
// SAFETY: as above.
unsafe impl Sync for Buf {}

impl Buf {
    pub(super) fn new(cap: usize) -> Self {
        let b: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
        Self {
            cap,
            ptr: Box::into_raw(b).cast::<u8>(),
        }
    }

    /// Chunk `i` of a request of `len` bytes (the last one may be shorter).
    ///
    /// # Safety
    /// The caller owns chunk `i`: it claimed it under the stream lock and no
    /// other reference to it exists until it marks it done.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn chunk(&self, i: usize, len: usize) -> &mut [u8] {
        let len = len.min(self.cap);
        let s = (i * CHUNK).min(len);
        let e = (s + CHUNK).min(len);
        std::slice::from_raw_parts_mut(self.ptr.add(s), e - s)
    }

    /// The first `n` bytes.
    ///
    /// # Safety
    /// Every chunk is done: no thread writes the buffer.
    pub(super) unsafe fn head(&self, n: usize) -> &[u8] {
        std::slice::from_raw_parts(self.ptr, n.min(self.cap))
    }

    /// The first `n` bytes, writable.
    ///
    /// # Safety
    /// The caller owns the whole buffer: no slot holds it and no job
    /// writes it.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn head_mut(&self, n: usize) -> &mut [u8] {
        std::slice::from_raw_parts_mut(self.ptr, n.min(self.cap))
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `Box::into_raw` of a `len`-byte slice.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.cap)));
        }
    }
}
