//! An open handle of a view file: while it is read sequentially, the next
//! requests are read and encrypted ahead on the engine's decrypt-ahead
//! threads ([`warpfs_engine::AheadStream`], the machinery a forward
//! handle's reads use), so the reader only copies what was made meanwhile.
//! The view never changes through the mount: a view file's change count is
//! always 0, and a plaintext file changed behind the view shows as the
//! segment cache lets it show without encrypt-ahead.

use super::content::ViewFile;
use crate::error::{Error, Result};
use crate::handle::{read_through, ReadSink};
use std::ops::Deref;
use std::sync::Arc;
use warpfs_engine::{AheadSource, AheadStream, Engine};

/// A view file is what encrypt-ahead reads.
impl AheadSource for ViewFile {
    type Error = Error;

    fn read_ahead_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_at(off, buf)
    }

    fn read_direct_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.read_at(off, buf)
    }

    fn changes(&self) -> u64 {
        0
    }

    fn size(&self) -> u64 {
        self.len()
    }
}

/// A handle of a view file: the file, and the handle's encrypt-ahead
/// stream when the view has an engine with decrypt-ahead threads.
/// Dereferences to the [`ViewFile`].
pub struct ViewHandle {
    file: Arc<ViewFile>,
    ahead: Option<AheadStream>,
}

impl Deref for ViewHandle {
    type Target = ViewFile;

    fn deref(&self) -> &ViewFile {
        &self.file
    }
}

impl ViewHandle {
    pub(crate) fn new(file: ViewFile, engine: Option<&Arc<Engine>>) -> Self {
        Self {
            file: Arc::new(file),
            ahead: engine.and_then(AheadStream::new),
        }
    }

    /// Whether this handle's sequential reads are encrypted ahead.
    pub fn reads_ahead(&self) -> bool {
        self.ahead.is_some()
    }

    /// Requests planned for this handle that a thread has read in full.
    #[cfg(test)]
    pub(crate) fn read_ahead_done(&self) -> usize {
        self.ahead.as_ref().map_or(0, AheadStream::read_ahead_done)
    }

    /// Read up to `size` bytes of the view file at `off` into `out` (short
    /// only at the end): what was encrypted ahead when the request was
    /// planned, else read here; the requests after a sequential one are
    /// queued for encrypt-ahead.
    pub fn read<S: ReadSink + ?Sized>(&self, off: u64, size: usize, out: &mut S) -> Result<()> {
        read_through(self.ahead.as_ref(), &self.file, off, size, out, |f, off, buf, _| {
            f.read_at(off, buf)
        })
    }
}
