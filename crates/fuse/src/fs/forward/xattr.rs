//! Extended attributes ([`XattrOps`]), the mount root's virtual
//! attributes (engine stats, online rekey) and the control ioctls that
//! reach them ([`crate::ctl`]).

use super::{errno, WarpFs, CAPS, CAPS_XATTR, REKEY_XATTR, STATS_XATTR};
use crate::ctl;
use crate::nodes::ROOT;
use crate::ops::{Ctx, Errno, OpResult, Xattr, XattrOps};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;
use warpfs_volume::rekey;

impl WarpFs {
    /// ENOSYS for an xattr request under `--no-xattr`.
    fn xattrs_off(&self) -> OpResult<()> {
        if self.xattrs {
            return Ok(());
        }
        self.xattrs_refused.fetch_add(1, Ordering::Relaxed);
        Err(Errno::from_i32(libc::ENOSYS))
    }

    /// A `warpfs rekey` request written to [`REKEY_XATTR`]; a refused one
    /// is logged and its reason shows in the status.
    fn rekey_request(&self, value: &[u8]) -> OpResult<()> {
        let r = rekey::Request::parse(value).and_then(|req| match req {
            rekey::Request::Start {
                target,
                jobs,
                max_rate,
                rekey_id,
            } => self.vol.rekey_start(
                target,
                rekey::RekeyOptions {
                    jobs,
                    max_rate,
                    on_event: self.rekey_hook.clone(),
                    rekey_id,
                },
            ),
            rekey::Request::Volkey {
                target,
                jobs,
                max_rate,
                rekey_id,
                key,
            } => self.vol.volkey_start(
                &key,
                target,
                rekey::RekeyOptions {
                    jobs,
                    max_rate,
                    on_event: self.rekey_hook.clone(),
                    rekey_id: Some(rekey_id),
                },
            ),
            rekey::Request::Names => {
                let opts = rekey::RekeyOptions {
                    on_event: self.rekey_hook.clone(),
                    ..Default::default()
                };
                self.vol.volkey_names(&opts, |vol| self.relink(vol))
            }
            rekey::Request::Finish => self.vol.rekey_finish(),
            rekey::Request::Upgrade => self.vol.upgrade_start(),
        });
        r.map_err(|m| {
            tracing::warn!("rekey request refused: {m}");
            Errno::from_i32(libc::EINVAL)
        })
    }

    /// Every backing name changed under the mount (a rekey to a new
    /// volume key, while every request waits): the node table and the
    /// open directories' listings take the new names, and an entry made
    /// anew (a symlink, its target sealed for its new name) keeps its node.
    fn relink(&self, vol: &warpfs_volume::Volume) {
        self.nodes.relink(|dir, name| vol.backing_name_in(dir, name));
        self.handles.relink(|node, name| {
            let l = self.nodes.locate(node)?;
            vol.backing_name_in(&l.backing, name)
        });
        let at: Vec<_> = self
            .nodes
            .known()
            .into_iter()
            .filter_map(|n| Some((n, self.nodes.locate(n)?.backing)))
            .collect();
        self.keep_nodes(vol, &at);
    }

    /// The engine stats as JSON, with the transport serving the mount.
    fn stats_json(&self) -> Option<Vec<u8>> {
        let json = self.vol.engine_stats()?.to_json();
        let Some((t, why)) = self.transport.get() else {
            return Some(json.into_bytes());
        };
        let mut v: serde_json::Value = serde_json::from_str(&json).ok()?;
        let o = v.as_object_mut()?;
        o.insert("transport".into(), (*t).into());
        o.insert("transport_why".into(), why.clone().into());
        Some(v.to_string().into_bytes())
    }

    /// The value of the mount root's virtual attribute `name` (through a
    /// getxattr or the [`ctl::GET`] ioctl); `None` when `name` is not one.
    fn virtual_get(&self, name: &[u8]) -> Option<OpResult<Vec<u8>>> {
        let nodata = || Errno::from_i32(libc::ENODATA);
        if name == STATS_XATTR.as_bytes() {
            return Some(self.stats_json().ok_or_else(nodata));
        }
        if name == REKEY_XATTR.as_bytes() {
            return Some(self.vol.rekey_status().map(String::into_bytes).ok_or_else(nodata));
        }
        if name == CAPS_XATTR.as_bytes() {
            return Some(Ok(CAPS.as_bytes().to_vec()));
        }
        None
    }

    /// Set the mount root's virtual attribute `name` (through a setxattr
    /// or the [`ctl::SET`] ioctl); `None` when `name` is not a writable one.
    fn virtual_set(&self, name: &[u8], value: &[u8]) -> Option<OpResult<()>> {
        (name == REKEY_XATTR.as_bytes()).then(|| self.rekey_request(value))
    }

    /// A control ioctl ([`ctl`]) on the mount root.
    fn control(&self, uid: u32, cmd: u32, input: &[u8], out_size: u32) -> OpResult<Vec<u8>> {
        let req = ctl::parse(input);
        let proven = || {
            req.as_ref().is_some_and(|r| {
                r.tag
                    .is_some_and(|t| self.vol.control_proof_ok(r.name.as_bytes(), r.value, t))
            })
        };
        if !ctl::allowed(uid, cmd, proven) {
            if cmd == ctl::SET {
                tracing::warn!(
                    "control request of uid {uid} refused: only root, or the mount's user with proof of the password"
                );
            }
            return Err(Errno::from_i32(libc::EPERM));
        }
        let req = req.ok_or(Errno::from_i32(libc::EINVAL))?;
        let unknown = || Errno::from_i32(libc::EINVAL);
        if cmd == ctl::SET {
            return self
                .virtual_set(req.name.as_bytes(), req.value)
                .ok_or_else(unknown)?
                .map(|()| Vec::new());
        }
        let v = self.virtual_get(req.name.as_bytes()).ok_or_else(unknown)??;
        if v.len() > out_size as usize {
            return Err(Errno::from_i32(libc::ERANGE));
        }
        Ok(v)
    }
}

impl XattrOps for WarpFs {
    fn ioctl(&self, ctx: &Ctx, ino: u64, _fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        if ino != ROOT || (cmd != ctl::GET && cmd != ctl::SET) {
            // Not a terminal, no other ioctls (isatty() asks on every open).
            return Err(Errno::from_i32(libc::ENOTTY));
        }
        // The value fits in an ioctl (at most ctl::SIZE bytes).
        let v = self.control(ctx.uid, cmd, input, out_size)?;
        Ok((v.len() as i32, v))
    }

    fn setxattr(&self, _: &Ctx, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> OpResult<()> {
        self.xattrs_off()?;
        if ino == ROOT {
            if let Some(r) = self.virtual_set(name.as_bytes(), value) {
                return r;
            }
        }
        let l = self.loc(ino)?;
        self.vol
            .setxattr(&l.backing, name.as_bytes(), value, flags)
            .map_err(errno)
    }

    fn getxattr(&self, _: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        self.xattrs_off()?;
        if ino == ROOT {
            if let Some(res) = self.virtual_get(name.as_bytes()) {
                return Xattr::fit(res?, size);
            }
        }
        // The kernel asks for security.capability before writes: answer
        // without touching the backing file.
        if !name.as_bytes().starts_with(b"user.") {
            self.xattr_probes.fetch_add(1, Ordering::Relaxed);
            return Err(Errno::from_i32(libc::ENODATA));
        }
        let l = self.loc(ino)?;
        let v = self.vol.getxattr(&l.backing, name.as_bytes()).map_err(errno)?;
        Xattr::fit(v, size)
    }

    fn listxattr(&self, _: &Ctx, ino: u64, size: u32) -> OpResult<Xattr> {
        self.xattrs_off()?;
        let l = self.loc(ino)?;
        Xattr::fit(self.vol.listxattr(&l.backing).map_err(errno)?, size)
    }

    fn removexattr(&self, _: &Ctx, ino: u64, name: &OsStr) -> OpResult<()> {
        self.xattrs_off()?;
        let l = self.loc(ino)?;
        self.vol.removexattr(&l.backing, name.as_bytes()).map_err(errno)
    }
}
