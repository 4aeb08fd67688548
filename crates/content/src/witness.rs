//! What a volume remembers of the file versions its mounts saw (FORMAT.md
//! 16, docs/decisions/0099): a witness is shown each file's summary record
//! when the file is opened, and told the version a commit replaced, so
//! that an older copy of a whole file put back is refused at open.

use crate::summary::Record;

/// Keeps the versions of files seen on this host (outside CIPHERDIR).
pub trait Witness: Send + Sync {
    /// File `id` is opened with record `rec` (which verified against its
    /// blocks): `Err(why)` when `rec` is a version this host saw replaced.
    fn opened(&self, id: &[u8; 16], rec: &Record) -> Result<(), String>;
    /// File `id`'s version `old` is gone: a commit replaced it with `new`,
    /// or (`None`) the file was emptied, removed or renamed over.
    fn replaced(&self, id: &[u8; 16], old: &Record, new: Option<&Record>);
}
