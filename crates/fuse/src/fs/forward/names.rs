//! Names ([`NameOps`]): mknod, mkdir, symlink, link, unlink, rmdir,
//! rename.

use super::{errno, WarpFs};
use crate::ops::{Ctx, Entry, Errno, NameOps, OpResult};
use std::ffi::OsStr;

/// `RENAME_EXCHANGE` of renameat2(2).
const RENAME_EXCHANGE: u32 = 1 << 1;

impl NameOps for WarpFs {
    fn mknod(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        let mode = (mode & libc::S_IFMT) | (mode & 0o7777 & !umask);
        let (cname, attr) = self
            .vol
            .mknod(&p.backing, name, mode, rdev as u64, Self::caller(ctx))
            .map_err(errno)?;
        Ok(self.entry(parent, &cname, name, &attr, true))
    }

    fn mkdir(&self, ctx: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        let (cname, attr) = self
            .vol
            .mkdir(&p.backing, name, mode & 0o7777 & !umask, Self::caller(ctx))
            .map_err(errno)?;
        Ok(self.entry(parent, &cname, name, &attr, true))
    }

    fn symlink(&self, ctx: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        let p = self.loc(parent)?;
        let (cname, attr) = self
            .vol
            .symlink(&p.backing, name, target, Self::caller(ctx))
            .map_err(errno)?;
        Ok(self.entry(parent, &cname, name, &attr, true))
    }

    fn link(&self, _: &Ctx, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        let (l, np) = match (self.loc(ino), self.loc(newparent)) {
            (Ok(l), Ok(np)) => (l, np),
            _ => return Err(Errno::ENOENT),
        };
        let (cname, attr) = self.vol.link(&l.backing, &np.backing, newname).map_err(errno)?;
        // A link to a symlink with a bound target is a copy (a new inode).
        let copied = self.nodes.node_id(attr.dev, attr.ino) != ino;
        Ok(self.entry(newparent, &cname, newname, &attr, copied))
    }

    fn unlink(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        let p = self.loc(parent)?;
        let cname = self.vol.unlink(&p.backing, name).map_err(errno)?;
        self.nodes.unlinked(parent, &cname);
        Ok(())
    }

    fn rmdir(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        let p = self.loc(parent)?;
        let cname = self.vol.rmdir(&p.backing, name).map_err(errno)?;
        self.nodes.unlinked(parent, &cname);
        Ok(())
    }

    fn rename(&self, _: &Ctx, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32) -> OpResult<()> {
        let (p, np) = match (self.loc(parent), self.loc(newparent)) {
            (Ok(p), Ok(np)) => (p, np),
            _ => return Err(Errno::ENOENT),
        };
        let exchange = flags & RENAME_EXCHANGE != 0;
        let (from, to) = self
            .vol
            .rename(&p.backing, name, &np.backing, newname, flags)
            .map_err(errno)?;
        let (moved, displaced) = self
            .nodes
            .renamed((parent, &from, name), (newparent, &to, newname), exchange);
        // A symlink with a bound target moves as a new backing symlink: it
        // keeps its node id, now standing for the new inode (FORMAT.md 5.1).
        let mut at = vec![(moved, np.backing.join(&to))];
        if exchange {
            at.push((displaced, p.backing.join(&from)));
        }
        let mut known = Vec::new();
        for (node, b) in at {
            match node {
                Some(node) => known.push((node, b)),
                // Not known here: a symlink made anew retires a stale node
                // with its new number; the next lookup finds it anew.
                None => {
                    if let Some(a) = self
                        .vol
                        .getattr(&b)
                        .ok()
                        .filter(|a| a.kind == warpfs_volume::Kind::Symlink)
                    {
                        self.nodes.renew(self.nodes.node_id(a.dev, a.ino));
                    }
                }
            }
        }
        self.keep_nodes(&self.vol, &known);
        Ok(())
    }
}

impl WarpFs {
    /// Each (node, backing path) whose backing inode is not the node's any
    /// more was made anew (a moved bound symlink): the node keeps its id
    /// for the new inode ([`crate::nodes::Nodes::rebacked`]).
    pub(super) fn keep_nodes(&self, vol: &warpfs_volume::Volume, at: &[(u64, std::path::PathBuf)]) {
        let mut moves = Vec::new();
        for (node, b) in at {
            let Ok(a) = vol.getattr(b) else { continue };
            if self.nodes.backing(*node) != Some((a.dev, a.ino)) {
                moves.push((*node, a.dev, a.ino));
            }
        }
        self.nodes.rebacked(&moves);
    }
}
