//! Ring requests, as the kernel lays them out, through `handle` into the
//! forward file system over a volume in a temporary directory (no ring,
//! no mount, no root): the answers are checked as the kernel reads them.

use super::*;
use crate::nodes::ROOT;
use crate::testvol::{me, TestFs};

/// A request buffer: the per-op struct (`op_in`) and the payload.
struct Ask {
    hdr: InHeader,
    op_in: [u8; 128],
    payload: Vec<u8>,
}

impl Ask {
    fn new(opcode: u32, nodeid: u64) -> Ask {
        let c = me();
        Ask {
            hdr: InHeader {
                opcode,
                unique: 1,
                nodeid,
                uid: c.uid,
                gid: c.gid,
                pid: c.pid,
                total_extlen: 0,
            },
            op_in: [0; 128],
            payload: Vec::new(),
        }
    }
    fn put(mut self, at: usize, v: &[u8]) -> Ask {
        self.op_in[at..at + v.len()].copy_from_slice(v);
        self
    }
    fn body(mut self, b: &[u8]) -> Ask {
        self.payload = b.to_vec();
        self
    }
    /// Serve it under `acl`; the answer's bytes.
    fn send_as(&self, t: &TestFs, acl: Acl) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; 1 << 20];
        buf[..self.payload.len()].copy_from_slice(&self.payload);
        let n = handle(&t.fs, acl, &self.hdr, &self.op_in, &mut buf, self.payload.len())?;
        buf.truncate(n);
        Ok(buf)
    }
    fn send(&self, t: &TestFs) -> Result<Vec<u8>, Errno> {
        self.send_as(t, Acl::Owner(me().uid))
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// `struct fuse_entry_out`: node id first; `fuse_attr.size` at 48.
const ENTRY_OUT: usize = 128;

#[test]
fn create_write_read_list_rename_and_unlink_go_through_the_ring_layout() {
    let t = TestFs::new();
    // CREATE: fuse_create_in {flags, mode, umask, open_flags}, then the name.
    let r = Ask::new(op::CREATE, ROOT)
        .put(0, &libc::O_RDWR.to_le_bytes())
        .put(4, &0o100644u32.to_le_bytes())
        .body(b"ring.bin\0")
        .send(&t)
        .unwrap();
    assert_eq!(r.len(), ENTRY_OUT + 16, "entry_out then open_out");
    let (ino, fh) = (u64_at(&r, 0), u64_at(&r, ENTRY_OUT));
    assert!(ino > ROOT);
    // WRITE: fuse_write_in {fh, offset, size, write_flags, ...}, then data.
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
    let w = Ask::new(op::WRITE, ino)
        .put(0, &fh.to_le_bytes())
        .put(16, &(data.len() as u32).to_le_bytes())
        .body(&data)
        .send(&t)
        .unwrap();
    assert_eq!(u32::from_le_bytes(w[..4].try_into().unwrap()), data.len() as u32);
    // READ: fuse_read_in {fh, offset, size, ...}: the answer is the bytes.
    let r = Ask::new(op::READ, ino)
        .put(0, &fh.to_le_bytes())
        .put(8, &100u64.to_le_bytes())
        .put(16, &5000u32.to_le_bytes())
        .send(&t)
        .unwrap();
    assert_eq!(r, data[100..5100]);
    Ask::new(op::RELEASE, ino).put(0, &fh.to_le_bytes()).send(&t).unwrap();
    // LOOKUP answers the same node, with the size written.
    let l = Ask::new(op::LOOKUP, ROOT).body(b"ring.bin\0").send(&t).unwrap();
    assert_eq!((u64_at(&l, 0), u64_at(&l, 48)), (ino, data.len() as u64));
    // READDIR: fuse_dirent {ino, off, namelen, type, name, padding}.
    let o = Ask::new(op::OPENDIR, ROOT).send(&t).unwrap();
    let dfh = u64_at(&o, 0);
    let d = Ask::new(op::READDIR, ROOT)
        .put(0, &dfh.to_le_bytes())
        .put(16, &4096u32.to_le_bytes())
        .send(&t)
        .unwrap();
    let mut names = Vec::new();
    let mut at = 0;
    while at < d.len() {
        let len = u32::from_le_bytes(d[at + 16..at + 20].try_into().unwrap()) as usize;
        names.push((
            u64_at(&d, at),
            String::from_utf8(d[at + 24..at + 24 + len].to_vec()).unwrap(),
        ));
        at += (24 + len).next_multiple_of(8);
    }
    assert!(names.contains(&(ino, "ring.bin".to_string())), "{names:?}");
    Ask::new(op::RELEASEDIR, ROOT)
        .put(0, &dfh.to_le_bytes())
        .send(&t)
        .unwrap();
    // RENAME2: fuse_rename2_in {newdir, flags, padding}, then both names.
    Ask::new(op::RENAME2, ROOT)
        .put(0, &ROOT.to_le_bytes())
        .body(b"ring.bin\0moved.bin\0")
        .send(&t)
        .unwrap();
    let l = Ask::new(op::LOOKUP, ROOT).body(b"moved.bin\0").send(&t).unwrap();
    assert_eq!(u64_at(&l, 0), ino);
    Ask::new(op::UNLINK, ROOT).body(b"moved.bin\0").send(&t).unwrap();
    assert_eq!(
        Ask::new(op::LOOKUP, ROOT).body(b"moved.bin\0").send(&t).unwrap_err(),
        Errno::ENOENT
    );
}

#[test]
fn another_users_request_is_refused_unless_the_mount_allows_others() {
    let t = TestFs::new();
    let mut a = Ask::new(op::MKDIR, ROOT).put(0, &0o755u32.to_le_bytes()).body(b"d\0");
    a.hdr.uid = me().uid.wrapping_add(1);
    assert_eq!(a.send(&t).unwrap_err(), Errno::EACCES);
    assert_eq!(
        Ask::new(op::LOOKUP, ROOT).body(b"d\0").send(&t).unwrap_err(),
        Errno::ENOENT,
        "the refused request did nothing"
    );
    // Under allow_other the same request is served (as the caller named).
    a.hdr.uid = me().uid;
    assert!(a.send_as(&t, Acl::All).is_ok());
}

#[test]
fn malformed_and_unknown_requests_are_errors_not_panics() {
    let t = TestFs::new();
    // A name without its NUL, a payload size past the buffer, an opcode
    // the ring does not serve.
    assert_eq!(
        Ask::new(op::LOOKUP, ROOT).body(b"abc").send(&t).unwrap_err(),
        Errno::EIO
    );
    let a = Ask::new(op::LOOKUP, ROOT);
    let mut buf = vec![0u8; 64];
    assert_eq!(
        handle(&t.fs, Acl::All, &a.hdr, &a.op_in, &mut buf, 65).unwrap_err(),
        Errno::EIO
    );
    assert_eq!(Ask::new(9999, ROOT).send(&t).unwrap_err(), Errno::ENOSYS);
    // A WRITE whose size runs past its data.
    let w = Ask::new(op::WRITE, ROOT).put(16, &100u32.to_le_bytes()).body(b"short");
    assert_eq!(w.send(&t).unwrap_err(), Errno::EIO);
}
