//! Names: mknod, mkdir, symlink, link, unlink, rmdir, rename.

use super::{errno, WarpFs};
use crate::fuse::ops::{Ctx, Entry, OpResult};
use fuser::Errno;
use std::ffi::OsStr;

/// `RENAME_EXCHANGE` of renameat2(2).
const RENAME_EXCHANGE: u32 = 1 << 1;

impl WarpFs {
    pub(super) fn mknod(
        &self,
        ctx: &Ctx,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        let mode = (mode & libc::S_IFMT) | (mode & 0o7777 & !umask);
        let (cname, attr) = self
            .vol
            .mknod(&p.backing, name, mode, rdev as u64, Self::caller(ctx))
            .map_err(errno)?;
        Ok(self.entry(parent, &cname, name, &attr, true))
    }

    pub(super) fn mkdir(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        let (cname, attr) = self
            .vol
            .mkdir(&p.backing, name, mode & 0o7777 & !umask, Self::caller(ctx))
            .map_err(errno)?;
        Ok(self.entry(parent, &cname, name, &attr, true))
    }

    pub(super) fn symlink(&self, ctx: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        let (cname, attr) = self
            .vol
            .symlink(&p.backing, name, target, Self::caller(ctx))
            .map_err(errno)?;
        Ok(self.entry(parent, &cname, name, &attr, true))
    }

    pub(super) fn link(&self, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        let (l, np) = match (self.loc(ino), self.loc(newparent)) {
            (Ok(l), Ok(np)) => (l, np),
            _ => return Err(Errno::ENOENT),
        };
        let (cname, attr) = self.vol.link(&l.backing, &np.backing, newname).map_err(errno)?;
        // A link to a symlink with a bound target is a copy (a new inode).
        let copied = self.nodes.node_id(attr.dev, attr.ino) != ino;
        Ok(self.entry(newparent, &cname, newname, &attr, copied))
    }

    pub(super) fn unlink(&self, parent: u64, name: &OsStr) -> OpResult<()> {
        let p = self.loc(parent)?;
        let cname = self.vol.unlink(&p.backing, name).map_err(errno)?;
        self.nodes.unlinked(parent, &cname);
        Ok(())
    }

    pub(super) fn rmdir(&self, parent: u64, name: &OsStr) -> OpResult<()> {
        let p = self.loc(parent)?;
        let cname = self.vol.rmdir(&p.backing, name).map_err(errno)?;
        self.nodes.unlinked(parent, &cname);
        Ok(())
    }

    pub(super) fn rename(
        &self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
    ) -> OpResult<()> {
        let (p, np) = match (self.loc(parent), self.loc(newparent)) {
            (Ok(p), Ok(np)) => (p, np),
            _ => return Err(Errno::ENOENT),
        };
        let exchange = flags & RENAME_EXCHANGE != 0;
        // A symlink with a bound target moves as a new backing symlink: its
        // old node must not stand for the new inode (FORMAT.md 5.1).
        let recreated =
            self.vol.moves_recreate(&p.backing, name) || (exchange && self.vol.moves_recreate(&np.backing, newname));
        let (from, to) = self
            .vol
            .rename(&p.backing, name, &np.backing, newname, flags)
            .map_err(errno)?;
        self.nodes
            .renamed((parent, &from, name), (newparent, &to, newname), exchange);
        if recreated {
            // The new backing symlinks' numbers may be those of entries
            // removed earlier that the kernel still holds.
            let mut made = vec![np.backing.join(&to)];
            if exchange {
                made.push(p.backing.join(&from));
            }
            for b in made {
                if let Ok(a) = self.vol.getattr(&b) {
                    self.nodes.renew(self.nodes.node_id(a.dev, a.ino));
                }
            }
            let mut stale = vec![(newparent, newname.to_os_string())];
            if exchange {
                stale.push((parent, name.to_os_string()));
            }
            self.inval_entries_later(stale);
        }
        Ok(())
    }
}
