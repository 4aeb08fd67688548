//! The kernel caches a mount asks for (docs/decisions/0054):
//! long entry and attribute timeouts, negative entries, cached symlink
//! targets, no FLUSH round trip, and a page cache kept across opens of a
//! file whose backing file did not change (`FOPEN_KEEP_CACHE`). A file
//! changed in CIPHERDIR behind the mount's back is seen at its next open
//! (contents) and after at most the timeout (names, attributes);
//! `--shared-storage` turns every one of them off, for two mounts of one
//! CIPHERDIR.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use warpfs_volume::Attr;

/// Entry and attribute timeout with the caches on (`--cache-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The timeout with the caches off: two mounts of one CIPHERDIR see each
/// other's changes within a second.
pub const SHARED_TIMEOUT: Duration = Duration::from_secs(1);

/// Which caches are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caches {
    /// Entries and attributes are valid this long (with `entries`).
    pub timeout: Duration,
    /// Long entry and attribute timeouts (else [`SHARED_TIMEOUT`]).
    pub entries: bool,
    /// "No such name" cached as long as entries.
    pub negative: bool,
    /// Keep the page cache across opens of an unchanged file.
    pub keep: bool,
    /// FUSE_CACHE_SYMLINKS.
    pub symlinks: bool,
    /// Answer FLUSH ENOSYS once, so the kernel stops sending it.
    pub noflush: bool,
}

impl Caches {
    /// Every cache off: the behaviour for shared storage.
    pub const NONE: Caches = Caches {
        timeout: SHARED_TIMEOUT,
        entries: false,
        negative: false,
        keep: false,
        symlinks: false,
        noflush: false,
    };

    /// Every cache on, entries valid for `timeout`.
    pub fn all(timeout: Duration) -> Caches {
        Caches {
            timeout,
            entries: true,
            negative: true,
            keep: true,
            symlinks: true,
            noflush: true,
        }
    }

    /// `all`, `none`, or a comma-separated list of `entries`, `negative`,
    /// `keep`, `symlinks`, `noflush`.
    pub fn parse(list: &str, timeout: Duration) -> Result<Caches, String> {
        match list.trim() {
            "all" => return Ok(Caches::all(timeout)),
            "none" => return Ok(Caches::NONE),
            _ => {}
        }
        let mut c = Caches {
            timeout,
            ..Caches::NONE
        };
        for w in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match w {
                "entries" => c.entries = true,
                "negative" => c.negative = true,
                "keep" => c.keep = true,
                "symlinks" => c.symlinks = true,
                "noflush" => c.noflush = true,
                o => {
                    return Err(format!(
                        "unknown cache '{o}' (entries, negative, keep, symlinks, noflush, all, none)"
                    ))
                }
            }
        }
        Ok(c)
    }

    /// How long names and attributes are valid.
    pub fn entry_ttl(&self) -> Duration {
        if self.entries {
            self.timeout
        } else {
            SHARED_TIMEOUT
        }
    }

    /// How long "no such name" is valid (zero: not cached).
    pub fn negative_ttl(&self) -> Duration {
        if self.negative {
            self.entry_ttl()
        } else {
            Duration::ZERO
        }
    }
}

/// The state of a backing file that says whether its contents changed:
/// inode, plaintext size, mtime and ctime (ctime moves on every change,
/// and on file systems with multigrain timestamps a change right after a
/// stat gets a fine-grained one).
type Stamp = (u64, u64, (i64, u32), (i64, u32));

fn stamp(a: &Attr) -> Stamp {
    (a.ino, a.size, a.mtime, a.ctime)
}

/// More nodes than this and the table starts over (the kernel then drops
/// the page caches of the files opened next, once).
const MAX_STAMPS: usize = 1 << 16;

/// Per node: the backing file's state when the kernel's page cache of it
/// was last known to match it.
#[derive(Default)]
pub struct Seen {
    map: Mutex<HashMap<u64, Stamp>>,
}

impl Seen {
    /// At an open of `node` whose backing file now looks like `a`: whether
    /// it is as at the last open (the kernel may keep its pages), and
    /// whether it was known and changed since (its cached attributes are
    /// stale too). Remembers `a` either way.
    pub fn check(&self, node: u64, a: &Attr) -> (bool, bool) {
        let s = stamp(a);
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let before = m.get(&node).copied();
        if before.is_none() && m.len() >= MAX_STAMPS {
            m.clear();
        }
        m.insert(node, s);
        (before == Some(s), before.is_some_and(|b| b != s))
    }

    /// `node` is being changed through the mount: its next open starts
    /// over (the kernel drops its pages once).
    pub fn changed(&self, node: u64) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if !m.is_empty() {
            m.remove(&node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(size: u64, ctime: i64) -> Attr {
        let mut a: Attr = base_attr();
        a.ino = 7;
        a.size = size;
        a.ctime = (ctime, 0);
        a
    }

    fn base_attr() -> Attr {
        Attr {
            ino: 0,
            dev: 0,
            size: 0,
            blocks: 0,
            atime: (0, 0),
            mtime: (0, 0),
            ctime: (0, 0),
            kind: warpfs_volume::Kind::File,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
        }
    }

    #[test]
    fn keeps_only_what_did_not_change() {
        let s = Seen::default();
        assert_eq!(s.check(1, &attr(10, 5)), (false, false), "first open: nothing to keep");
        assert_eq!(s.check(1, &attr(10, 5)), (true, false), "unchanged: keep");
        assert_eq!(
            s.check(1, &attr(10, 6)),
            (false, true),
            "ctime moved: drop, attributes stale"
        );
        assert_eq!(s.check(1, &attr(11, 6)), (false, true), "size moved");
        assert_eq!(s.check(1, &attr(11, 6)), (true, false));
        s.changed(1);
        assert_eq!(
            s.check(1, &attr(11, 6)),
            (false, false),
            "written through the mount: start over"
        );
    }

    #[test]
    fn parses_lists() {
        let t = Duration::from_secs(9);
        assert_eq!(Caches::parse("all", t).unwrap(), Caches::all(t));
        assert_eq!(Caches::parse("none", t).unwrap(), Caches::NONE);
        let c = Caches::parse("keep,negative", t).unwrap();
        assert!(c.keep && c.negative && !c.entries && !c.symlinks && !c.noflush);
        assert_eq!(c.entry_ttl(), SHARED_TIMEOUT);
        assert_eq!(c.negative_ttl(), SHARED_TIMEOUT);
        assert_eq!(Caches::NONE.negative_ttl(), Duration::ZERO);
        assert!(Caches::parse("bogus", t).is_err());
    }
}
