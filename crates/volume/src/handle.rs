//! An open handle of a regular file: the cipher file it shares with every
//! handle of the inode, and its own decrypt-ahead stream (when the engine
//! has decrypt-ahead threads), so that its reads are served from what the engine's decrypt-ahead
//! threads read and decrypted while the handle is read sequentially.

use std::ops::Deref;
use std::sync::Arc;
use warpfs_content::{CipherFile, ContentError};
use warpfs_engine::ahead_stream::Found;
use warpfs_engine::{AheadSource, AheadStream, Engine};

/// Where [`OpenFile::read`] puts a read's bytes: into a buffer it offers,
/// or, for bytes decrypted ahead, from where they are.
pub trait ReadSink {
    /// A buffer of `size` bytes to read into.
    fn buf(&mut self, size: usize) -> &mut [u8];
    /// The first `n` bytes of [`ReadSink::buf`] are the bytes read.
    fn filled(&mut self, n: usize);
    /// `b` are the bytes read.
    fn bytes(&mut self, b: &[u8]);
}

/// A handle's view of an open regular file. Dereferences to the
/// [`CipherFile`] shared by every handle of the inode (writes, size,
/// attributes); [`OpenFile::read`] reads through the handle's
/// decrypt-ahead stream. Clones share the handle (and its stream).
pub struct OpenFile {
    file: Arc<CipherFile>,
    ahead: Option<Arc<AheadStream>>,
    /// Where the file's summary is committed when its last handle closes
    /// (a mount's; `None`: inline, as the file drops).
    committer: Option<Arc<crate::committer::Committer>>,
    /// A handle (counted on the file), not a view ([`OpenFile::shared`]).
    handle: bool,
}

impl Clone for OpenFile {
    fn clone(&self) -> Self {
        if self.handle {
            self.file.handle_opened();
        }
        Self {
            file: self.file.clone(),
            ahead: self.ahead.clone(),
            committer: self.committer.clone(),
            handle: self.handle,
        }
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        if !self.handle || !self.file.handle_closed() {
            return;
        }
        // The last handle of the file: hand its commit to the committer,
        // which keeps it parked for it (a reopen checks that the file did
        // not change behind the mount's back).
        if let Some(c) = &self.committer {
            c.defer_closed(&self.file);
        }
    }
}

impl Deref for OpenFile {
    type Target = CipherFile;

    fn deref(&self) -> &CipherFile {
        &self.file
    }
}

impl OpenFile {
    /// A new handle of `file`, with a decrypt-ahead stream of its own when
    /// `engine` has decrypt-ahead threads.
    pub(crate) fn new(
        file: Arc<CipherFile>,
        engine: Option<&Arc<Engine>>,
        committer: Option<&Arc<crate::committer::Committer>>,
    ) -> Self {
        file.handle_opened();
        Self {
            ahead: engine.and_then(AheadStream::new).map(Arc::new),
            file,
            committer: committer.cloned(),
            handle: true,
        }
    }

    /// A view of `file` that is no handle's (no decrypt-ahead: its reads
    /// go straight to the file).
    pub(crate) fn shared(file: Arc<CipherFile>) -> Self {
        Self {
            file,
            ahead: None,
            committer: None,
            handle: false,
        }
    }

    /// Flush the file's data and entries to stable storage (fsync). With a
    /// committer, a summary commit the sync leaves pending is the
    /// committer's (with the commits of other files, once the file stops
    /// changing): an fsync then costs the sync of a volume without
    /// summaries, not three.
    pub fn sync(&self, datasync: bool) -> Result<(), ContentError> {
        match &self.committer {
            Some(c) => {
                if self.file.sync_uncommitted(datasync)? && !c.defer(&self.file) {
                    self.file.commit_summary()?;
                }
                Ok(())
            }
            None => self.file.sync(datasync),
        }
    }

    /// Whether this handle's sequential reads are decrypted ahead.
    pub fn reads_ahead(&self) -> bool {
        self.ahead.is_some()
    }

    /// Read up to `size` bytes at `off` into `out` (short only at end of
    /// file): from what was decrypted ahead when the request was planned
    /// and the file did not change since, else read here (without the read
    /// window's look-ahead when the handle reads sequentially: its next
    /// requests are being decrypted ahead). The requests after a
    /// sequential one are queued for decrypt-ahead.
    pub fn read<S: ReadSink + ?Sized>(&self, off: u64, size: usize, out: &mut S) -> Result<(), ContentError> {
        read_through(
            self.ahead.as_deref(),
            &self.file,
            off,
            size,
            out,
            |f, off, buf, direct| {
                if direct {
                    f.read_direct_at(off, buf)
                } else {
                    f.read_at(off, buf)
                }
            },
        )
    }
}

/// A read of up to `size` bytes at `off` of `file` through a handle's
/// decrypt-ahead stream `ahead` (if any) into `out`: the planned request's
/// bytes when they could be used, else read here by `inline(file, off,
/// buf, direct)` (`direct`: the handle reads sequentially, its next
/// requests are being read ahead).
pub(crate) fn read_through<F: AheadSource, S: ReadSink + ?Sized>(
    ahead: Option<&AheadStream>,
    file: &Arc<F>,
    off: u64,
    size: usize,
    out: &mut S,
    inline: impl FnOnce(&F, u64, &mut [u8], bool) -> Result<usize, F::Error>,
) -> Result<(), F::Error> {
    let mut direct = false;
    if let Some(a) = ahead {
        match a.read(file, off, size) {
            Found::Ready(r) => {
                out.bytes(r.bytes());
                a.recycle(r);
                return Ok(());
            }
            Found::Failed(e) => return Err(e),
            Found::Inline { direct: d } => direct = d,
        }
    }
    let buf = out.buf(size);
    let n = inline(file, off, buf, direct)?;
    out.filled(n);
    if let (true, Some(a)) = (direct, ahead) {
        a.count_inline(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
