//! What a mount adds around each request of its file system, taken once
//! per request by the transport that carried it ([`Served::begin`]): the
//! file system's request gate ([`MountOps::serving`]), the count of
//! requests in flight, the time of the last one and the open files and
//! directories (for `--idle`, [`super::idle`]). With `--force-owner`
//! ([`Served::owner`]) the transports report every file as owned by one
//! user and group (as gocryptfs's `-force_owner`) when they encode
//! attributes.

use super::idle::{self, Activity};
use super::ops::wire::Wire;
use super::ops::{op, serve_wire, MountOps, OpResult, Operations};
use std::ffi::OsStr;
use std::sync::{Arc, RwLockReadGuard};

/// A file system as a mount serves it.
pub struct Served<T> {
    fs: T,
    /// Counted only for an idle watcher (`None`: nothing to count).
    act: Option<Arc<Activity>>,
    owner: Option<(u32, u32)>,
}

/// One request being served: its count and its gate, until dropped.
pub struct Begun<'a> {
    _req: Option<idle::Request<'a>>,
    _gate: Option<RwLockReadGuard<'a, ()>>,
}

impl<T> std::ops::Deref for Served<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.fs
    }
}

impl<T: Operations> Served<T> {
    /// Serve `fs`, counting into `act` if given; `owner`: the (uid, gid)
    /// every file is reported with, or `None` for the real owners.
    pub fn new(fs: T, act: Option<Arc<Activity>>, owner: Option<(u32, u32)>) -> Self {
        Self { fs, act, owner }
    }

    /// The file system, to negotiate INIT (before it is shared).
    pub fn fs_mut(&mut self) -> &mut T {
        &mut self.fs
    }

    /// `--force-owner`'s (uid, gid), for the transports' attribute
    /// encoding.
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    /// Request `op` on node `ino` (`name`: the attribute a getxattr or
    /// setxattr names) begins; it ends when the value is dropped. FORGET is
    /// not a request here: the kernel forgets on its own (memory pressure,
    /// unmount), which is no sign of use.
    pub fn begin(&self, op: u32, ino: u64, name: Option<&OsStr>) -> Begun<'_> {
        Begun {
            _req: self.act.as_deref().map(Activity::request),
            _gate: MountOps::serving(&self.fs, op, ino, name),
        }
    }

    /// Request `op` ended, `ok` or not: an open file or directory is
    /// counted from a successful open or create to its release.
    fn ended(&self, op: u32, ok: bool) {
        let Some(a) = &self.act else { return };
        match op {
            op::OPEN | op::OPENDIR | op::CREATE if ok => a.opened(),
            op::RELEASE | op::RELEASEDIR => a.closed(),
            _ => {}
        }
    }

    /// One request, `op` on node `ino` (`name`: the attribute it names),
    /// served by `f`: begun, answered, ended.
    pub fn call<R>(&self, op: u32, ino: u64, name: Option<&OsStr>, f: impl FnOnce(&T) -> OpResult<R>) -> OpResult<R> {
        let b = self.begin(op, ino, name);
        self.end(op, b, f(&self.fs))
    }

    /// Serve one request in wire form (the ring's), as [`Served::call`]
    /// does.
    pub fn serve_wire(&self, w: &mut Wire<'_>) -> OpResult<usize> {
        let op = w.opcode;
        w.set_owner(self.owner);
        let b = self.begin(op, w.ino, w.xattr_name());
        self.end(op, b, serve_wire(&self.fs, w))
    }

    /// The request begun as `b` answered `r`.
    fn end<R>(&self, op: u32, b: Begun<'_>, r: OpResult<R>) -> OpResult<R> {
        drop(b);
        self.ended(op, r.is_ok());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::tests::{Ask, Rec};
    use crate::ops::Errno;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    /// `fuse_attr.uid` and `.gid` in a `fuse_entry_out`.
    const ENTRY_UID: usize = 40 + 68;

    #[test]
    fn force_owner_replaces_every_reported_owner() {
        let f = Served::new(Rec::default(), None, Some((1000, 100)));
        let send = |a: Ask| a.send_with(|w| f.serve_wire(w)).unwrap();
        let e = send(Ask::new(op::LOOKUP).body(b"x\0"));
        assert_eq!((u32_at(&e, ENTRY_UID), u32_at(&e, ENTRY_UID + 4)), (1000, 100));
        // fuse_attr_out: valid, valid_nsec, dummy, then fuse_attr.
        let a = send(Ask::new(op::GETATTR));
        assert_eq!((u32_at(&a, 16 + 68), u32_at(&a, 16 + 72)), (1000, 100));
        // A negative entry (node 0) carries no owner.
        let n = send(Ask::new(op::LOOKUP).body(b"none\0"));
        assert_eq!(u32_at(&n, ENTRY_UID), 0);
        // fuse_direntplus: a fuse_entry_out first.
        let d = send(Ask::new(op::READDIRPLUS).put(16, &4096u32.to_le_bytes()));
        assert_eq!((u32_at(&d, ENTRY_UID), u32_at(&d, ENTRY_UID + 4)), (1000, 100));
        // Without it the real owners show.
        let plain = Served::new(Rec::default(), None, None);
        let a = Ask::new(op::GETATTR).send_with(|w| plain.serve_wire(w)).unwrap();
        assert_eq!((u32_at(&a, 16 + 68), u32_at(&a, 16 + 72)), (7, 8));
    }

    #[test]
    fn counts_open_handles_and_requests() {
        let act = Arc::new(Activity::new());
        let f = Served::new(Rec::default(), Some(act.clone()), None);
        let send = |a: Ask| a.send_with(|w| f.serve_wire(w));
        send(Ask::new(op::OPEN)).unwrap();
        send(Ask::new(op::OPENDIR)).unwrap();
        send(Ask::new(op::CREATE).body(b"c\0")).unwrap();
        assert_eq!(act.open(), 3);
        send(Ask::new(op::RELEASE)).unwrap();
        assert_eq!(act.open(), 2);
        send(Ask::new(op::RELEASEDIR)).unwrap();
        send(Ask::new(op::RELEASE)).unwrap();
        assert_eq!(act.open(), 0);
        assert_eq!(act.in_flight(), 0);
        // A request in progress is in flight.
        let b = f.begin(op::READ, 2, None);
        assert_eq!(act.in_flight(), 1);
        drop(b);
        assert_eq!(act.in_flight(), 0);
        // A failed open is not an open file.
        let r = Served::new(
            Rec {
                refuse_open: true,
                ..Rec::default()
            },
            Some(act.clone()),
            None,
        );
        assert_eq!(Ask::new(op::OPEN).send_with(|w| r.serve_wire(w)), Err(Errno::EACCES));
        assert_eq!(act.open(), 0);
    }

    #[test]
    fn the_gate_is_asked_once_per_request_with_what_it_names() {
        let f = Served::new(Rec::default(), None, None);
        let send = |a: Ask| a.send_with(|w| f.serve_wire(w)).unwrap();
        send(Ask::new(op::WRITE).put(16, &1u32.to_le_bytes()).body(b"z"));
        assert_eq!(f.take(), ["serving(16,1,None)", "write(1,0,0,z,0)"]);
        send(
            Ask::new(op::GETXATTR)
                .put(0, &8u32.to_le_bytes())
                .body(b"trusted.warpfs.stats\0"),
        );
        assert_eq!(
            f.take(),
            [
                "serving(22,1,Some(\"trusted.warpfs.stats\"))",
                "getxattr(1,trusted.warpfs.stats,8)"
            ]
        );
    }
}
