//! Requests in wire form, as the kernel lays them out, through
//! [`serve_wire`] into a file system that records each call: every
//! opcode reaches its method with the fields the kernel wrote, and a
//! malformed request is an error, never a panic.

use super::prelude::*;
use super::wire::{InHeader, Wire};
use super::*;
use proptest::prelude::*;
use std::sync::Mutex;
use std::time::Duration;

/// A file system that records every call, owned by 7:8, one node (2).
#[derive(Default)]
pub(crate) struct Rec {
    pub calls: Mutex<Vec<String>>,
    /// Opens fail with EACCES.
    pub refuse_open: bool,
}

impl Rec {
    fn note(&self, s: String) {
        self.calls.lock().unwrap().push(s);
    }
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

pub(crate) fn attr(ino: u64) -> Attr {
    let mut a = Entry::negative(Duration::ZERO).attr;
    a.ino = ino;
    a.perm = 0o644;
    a.nlink = 1;
    a.uid = 7;
    a.gid = 8;
    a
}

fn entry(ino: u64) -> Entry {
    Entry {
        attr: attr(ino),
        generation: 0,
        entry_ttl: Duration::ZERO,
        attr_ttl: Duration::ZERO,
    }
}

fn s(n: &OsStr) -> String {
    n.to_string_lossy().into_owned()
}

impl MountOps for Rec {
    fn serving(&self, op: u32, ino: u64, name: Option<&OsStr>) -> Option<std::sync::RwLockReadGuard<'_, ()>> {
        self.note(format!("serving({op},{ino},{:?})", name.map(s)));
        None
    }
    fn statfs(&self, _: &Ctx, ino: u64) -> OpResult<Statfs> {
        self.note(format!("statfs({ino})"));
        Ok(Statfs::default())
    }
}

impl EntryOps for Rec {
    fn lookup(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<Entry> {
        self.note(format!("lookup({parent},{})", s(name)));
        if name == "none" {
            return Ok(Entry::negative(Duration::ZERO));
        }
        Ok(entry(2))
    }
    fn getattr(&self, _: &Ctx, ino: u64, fh: Option<u64>) -> OpResult<AttrOut> {
        self.note(format!("getattr({ino},{fh:?})"));
        Ok(AttrOut {
            attr: attr(ino),
            ttl: Duration::ZERO,
        })
    }
    fn setattr(&self, _: &Ctx, ino: u64, set: &SetAttr) -> OpResult<AttrOut> {
        self.note(format!("setattr({ino},{set:?})"));
        Ok(AttrOut {
            attr: attr(ino),
            ttl: Duration::ZERO,
        })
    }
    fn readlink(&self, _: &Ctx, ino: u64) -> OpResult<Vec<u8>> {
        self.note(format!("readlink({ino})"));
        Ok(b"target".to_vec())
    }
    fn access(&self, _: &Ctx, ino: u64, mask: i32) -> OpResult<()> {
        self.note(format!("access({ino},{mask})"));
        Ok(())
    }
}

impl NameOps for Rec {
    fn mknod(&self, _: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32, rdev: u32) -> OpResult<Entry> {
        self.note(format!("mknod({parent},{},{mode:o},{umask:o},{rdev})", s(name)));
        Ok(entry(2))
    }
    fn mkdir(&self, _: &Ctx, parent: u64, name: &OsStr, mode: u32, umask: u32) -> OpResult<Entry> {
        self.note(format!("mkdir({parent},{},{mode:o},{umask:o})", s(name)));
        Ok(entry(2))
    }
    fn symlink(&self, _: &Ctx, parent: u64, name: &OsStr, target: &OsStr) -> OpResult<Entry> {
        self.note(format!("symlink({parent},{},{})", s(name), s(target)));
        Ok(entry(2))
    }
    fn link(&self, _: &Ctx, ino: u64, newparent: u64, newname: &OsStr) -> OpResult<Entry> {
        self.note(format!("link({ino},{newparent},{})", s(newname)));
        Ok(entry(2))
    }
    fn unlink(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        self.note(format!("unlink({parent},{})", s(name)));
        Ok(())
    }
    fn rmdir(&self, _: &Ctx, parent: u64, name: &OsStr) -> OpResult<()> {
        self.note(format!("rmdir({parent},{})", s(name)));
        Ok(())
    }
    fn rename(&self, _: &Ctx, parent: u64, name: &OsStr, newparent: u64, newname: &OsStr, flags: u32) -> OpResult<()> {
        self.note(format!(
            "rename({parent},{},{newparent},{},{flags})",
            s(name),
            s(newname)
        ));
        Ok(())
    }
}

impl FileOps for Rec {
    fn open(&self, _: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        self.note(format!("open({ino},{flags})"));
        if self.refuse_open {
            return Err(Errno::EACCES);
        }
        Ok(Opened { fh: 5, flags: 0 })
    }
    fn create(
        &self,
        _: &Ctx,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> OpResult<(Entry, Opened)> {
        self.note(format!("create({parent},{},{mode:o},{umask:o},{flags})", s(name)));
        Ok((entry(2), Opened { fh: 5, flags: 0 }))
    }
    fn read(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, size: u32, out: &mut dyn ReadOut) -> OpResult<()> {
        self.note(format!("read({ino},{fh},{offset},{size})"));
        out.bytes(b"data");
        Ok(())
    }
    fn write(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, data: &[u8], write_flags: u32) -> OpResult<u32> {
        self.note(format!(
            "write({ino},{fh},{offset},{},{write_flags})",
            String::from_utf8_lossy(data)
        ));
        Ok(data.len() as u32)
    }
    fn flush(&self, _: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        self.note(format!("flush({ino},{fh})"));
        Ok(())
    }
    fn release(&self, _: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        self.note(format!("release({ino},{fh})"));
        Ok(())
    }
    fn fsync(&self, _: &Ctx, ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        self.note(format!("fsync({ino},{fh},{datasync})"));
        Ok(())
    }
    fn fallocate(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, length: u64, mode: i32) -> OpResult<()> {
        self.note(format!("fallocate({ino},{fh},{offset},{length},{mode})"));
        Ok(())
    }
    fn lseek(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, whence: i32) -> OpResult<u64> {
        self.note(format!("lseek({ino},{fh},{offset},{whence})"));
        Ok(12288)
    }
}

impl DirOps for Rec {
    fn opendir(&self, _: &Ctx, ino: u64, flags: i32) -> OpResult<Opened> {
        self.note(format!("opendir({ino},{flags})"));
        Ok(Opened { fh: 6, flags: 0 })
    }
    fn readdir(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirAdd<'_>) -> OpResult<()> {
        self.note(format!("readdir({ino},{fh},{offset})"));
        add(2, 1, FileKind::RegularFile, OsStr::new("x"));
        Ok(())
    }
    fn readdirplus(&self, _: &Ctx, ino: u64, fh: u64, offset: u64, add: &mut DirPlusAdd<'_>) -> OpResult<()> {
        self.note(format!("readdirplus({ino},{fh},{offset})"));
        add(&entry(2), 1, OsStr::new("x"));
        Ok(())
    }
    fn releasedir(&self, _: &Ctx, ino: u64, fh: u64) -> OpResult<()> {
        self.note(format!("releasedir({ino},{fh})"));
        Ok(())
    }
    fn fsyncdir(&self, _: &Ctx, ino: u64, fh: u64, datasync: bool) -> OpResult<()> {
        self.note(format!("fsyncdir({ino},{fh},{datasync})"));
        Ok(())
    }
}

impl XattrOps for Rec {
    fn setxattr(&self, _: &Ctx, ino: u64, name: &OsStr, value: &[u8], flags: i32) -> OpResult<()> {
        self.note(format!(
            "setxattr({ino},{},{},{flags})",
            s(name),
            String::from_utf8_lossy(value)
        ));
        Ok(())
    }
    fn getxattr(&self, _: &Ctx, ino: u64, name: &OsStr, size: u32) -> OpResult<Xattr> {
        self.note(format!("getxattr({ino},{},{size})", s(name)));
        Xattr::fit(b"v".to_vec(), size)
    }
    fn listxattr(&self, _: &Ctx, ino: u64, size: u32) -> OpResult<Xattr> {
        self.note(format!("listxattr({ino},{size})"));
        Xattr::fit(b"user.a\0".to_vec(), size)
    }
    fn removexattr(&self, _: &Ctx, ino: u64, name: &OsStr) -> OpResult<()> {
        self.note(format!("removexattr({ino},{})", s(name)));
        Ok(())
    }
    fn ioctl(&self, _: &Ctx, ino: u64, fh: u64, cmd: u32, input: &[u8], out_size: u32) -> OpResult<(i32, Vec<u8>)> {
        self.note(format!(
            "ioctl({ino},{fh},{cmd},{},{out_size})",
            String::from_utf8_lossy(input)
        ));
        Ok((0, b"out".to_vec()))
    }
}

/// A request: its per-op struct and payload, on node 1.
pub(crate) struct Ask {
    pub hdr: InHeader,
    pub op_in: [u8; 128],
    pub payload: Vec<u8>,
}

impl Ask {
    pub fn new(opcode: u32) -> Ask {
        Ask {
            hdr: InHeader {
                opcode,
                unique: 9,
                nodeid: 1,
                uid: 0,
                gid: 0,
                pid: 1,
                total_extlen: 0,
            },
            op_in: [0; 128],
            payload: Vec::new(),
        }
    }
    pub fn put(mut self, at: usize, v: &[u8]) -> Ask {
        self.op_in[at..at + v.len()].copy_from_slice(v);
        self
    }
    pub fn body(mut self, b: &[u8]) -> Ask {
        self.payload = b.to_vec();
        self
    }
    /// Serve it with `f`; the reply's bytes.
    pub fn send_with(&self, f: impl FnOnce(&mut Wire<'_>) -> OpResult<usize>) -> OpResult<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        buf[..self.payload.len()].copy_from_slice(&self.payload);
        let n = f(&mut Wire::new(&self.hdr, &self.op_in, &mut buf, self.payload.len())?)?;
        buf.truncate(n);
        Ok(buf)
    }
    /// Serve it on `fs`; the reply's bytes.
    pub fn send(&self, fs: &Rec) -> OpResult<Vec<u8>> {
        self.send_with(|w| serve_wire(fs, w))
    }
}

fn le32(v: u32) -> [u8; 4] {
    v.to_le_bytes()
}
fn le64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Every opcode the ring serves reaches its method, with the fields the
/// kernel wrote: a group that forgot an opcode would answer ENOSYS.
#[test]
fn every_opcode_reaches_its_method_with_its_fields() {
    let fs = Rec::default();
    let cases: Vec<(Ask, &str)> = vec![
        (Ask::new(op::LOOKUP).body(b"abc\0"), "lookup(1,abc)"),
        (
            Ask::new(op::GETATTR).put(0, &le32(1)).put(8, &le64(11)),
            "getattr(1,Some(11))",
        ),
        (Ask::new(op::GETATTR).put(8, &le64(11)), "getattr(1,None)"),
        (Ask::new(op::READLINK), "readlink(1)"),
        (Ask::new(op::ACCESS).put(0, &le32(4)), "access(1,4)"),
        (Ask::new(op::SYMLINK).body(b"l\0/t/x\0"), "symlink(1,l,/t/x)"),
        (
            Ask::new(op::MKNOD)
                .put(0, &le32(0o10644))
                .put(4, &le32(3))
                .put(8, &le32(0o22))
                .body(b"p\0"),
            "mknod(1,p,10644,22,3)",
        ),
        (
            Ask::new(op::MKDIR)
                .put(0, &le32(0o755))
                .put(4, &le32(0o22))
                .body(b"d\0"),
            "mkdir(1,d,755,22)",
        ),
        (Ask::new(op::UNLINK).body(b"u\0"), "unlink(1,u)"),
        (Ask::new(op::RMDIR).body(b"r\0"), "rmdir(1,r)"),
        (
            Ask::new(op::RENAME).put(0, &le64(5)).body(b"a\0b\0"),
            "rename(1,a,5,b,0)",
        ),
        (
            Ask::new(op::RENAME2).put(0, &le64(5)).put(8, &le32(2)).body(b"a\0b\0"),
            "rename(1,a,5,b,2)",
        ),
        (Ask::new(op::LINK).put(0, &le64(9)).body(b"h\0"), "link(9,1,h)"),
        (Ask::new(op::OPEN).put(0, &le32(2)), "open(1,2)"),
        (
            Ask::new(op::CREATE)
                .put(0, &le32(2))
                .put(4, &le32(0o100644))
                .put(8, &le32(0o22))
                .body(b"c\0"),
            "create(1,c,100644,22,2)",
        ),
        (
            Ask::new(op::READ)
                .put(0, &le64(7))
                .put(8, &le64(4096))
                .put(16, &le32(100)),
            "read(1,7,4096,100)",
        ),
        (
            Ask::new(op::WRITE)
                .put(0, &le64(7))
                .put(8, &le64(4096))
                .put(16, &le32(3))
                .put(20, &le32(4))
                .body(b"xyzTRAILING"),
            "write(1,7,4096,xyz,4)",
        ),
        (Ask::new(op::FLUSH).put(0, &le64(7)), "flush(1,7)"),
        (Ask::new(op::RELEASE).put(0, &le64(7)), "release(1,7)"),
        (Ask::new(op::FSYNC).put(0, &le64(7)).put(8, &le32(1)), "fsync(1,7,true)"),
        (
            Ask::new(op::FALLOCATE)
                .put(0, &le64(7))
                .put(8, &le64(10))
                .put(16, &le64(20))
                .put(24, &le32(1)),
            "fallocate(1,7,10,20,1)",
        ),
        (
            // struct fuse_lseek_in: fh, offset (a negative loff_t), whence,
            // padding.
            Ask::new(op::LSEEK)
                .put(0, &le64(7))
                .put(8, &(-1i64).to_le_bytes())
                .put(16, &libc::SEEK_HOLE.to_le_bytes())
                .put(20, &le32(0xff)),
            "lseek(1,7,18446744073709551615,4)",
        ),
        (Ask::new(op::OPENDIR).put(0, &le32(0)), "opendir(1,0)"),
        (
            Ask::new(op::READDIR)
                .put(0, &le64(6))
                .put(8, &le64(2))
                .put(16, &le32(4096)),
            "readdir(1,6,2)",
        ),
        (
            Ask::new(op::READDIRPLUS).put(0, &le64(6)).put(16, &le32(4096)),
            "readdirplus(1,6,0)",
        ),
        (Ask::new(op::RELEASEDIR).put(0, &le64(6)), "releasedir(1,6)"),
        (Ask::new(op::FSYNCDIR).put(0, &le64(6)), "fsyncdir(1,6,false)"),
        (Ask::new(op::STATFS), "statfs(1)"),
        (
            Ask::new(op::SETXATTR)
                .put(0, &le32(2))
                .put(4, &le32(1))
                .body(b"user.k\0vvTAIL"),
            "setxattr(1,user.k,vv,1)",
        ),
        (
            Ask::new(op::GETXATTR).put(0, &le32(10)).body(b"user.k\0"),
            "getxattr(1,user.k,10)",
        ),
        (Ask::new(op::LISTXATTR).put(0, &le32(0)), "listxattr(1,0)"),
        (Ask::new(op::REMOVEXATTR).body(b"user.k\0"), "removexattr(1,user.k)"),
        (
            Ask::new(op::IOCTL)
                .put(0, &le64(7))
                .put(12, &le32(0x1234))
                .put(24, &le32(2))
                .put(28, &le32(64))
                .body(b"inXX"),
            "ioctl(1,7,4660,in,64)",
        ),
    ];
    for (ask, want) in cases {
        let r = ask.send(&fs);
        assert!(r.is_ok(), "opcode {} answered {r:?}", ask.hdr.opcode);
        assert_eq!(fs.take(), [want], "opcode {}", ask.hdr.opcode);
    }
}

#[test]
fn replies_are_laid_out_as_the_kernel_reads_them() {
    let fs = Rec::default();
    // fuse_lseek_out: the offset.
    let r = Ask::new(op::LSEEK).send(&fs).unwrap();
    assert_eq!(r, 12288u64.to_le_bytes());
    // fuse_write_out: size, padding.
    let w = Ask::new(op::WRITE).put(16, &le32(3)).body(b"abc").send(&fs).unwrap();
    assert_eq!(w, [3, 0, 0, 0, 0, 0, 0, 0]);
    // A read's bytes, no larger than asked.
    let r = Ask::new(op::READ).put(16, &le32(100)).send(&fs).unwrap();
    assert_eq!(r, b"data");
    assert_eq!(
        Ask::new(op::READ).put(16, &le32(2)).send(&fs).unwrap_err(),
        Errno::EIO,
        "more than the size asked for"
    );
    // getxattr of size 0: fuse_getxattr_out with the size; then the value.
    let g = Ask::new(op::GETXATTR).body(b"user.k\0").send(&fs).unwrap();
    assert_eq!(g, [1, 0, 0, 0, 0, 0, 0, 0]);
    let g = Ask::new(op::GETXATTR)
        .put(0, &le32(8))
        .body(b"user.k\0")
        .send(&fs)
        .unwrap();
    assert_eq!(g, b"v");
    // fuse_entry_out then fuse_open_out.
    let c = Ask::new(op::CREATE).body(b"c\0").send(&fs).unwrap();
    assert_eq!(c.len(), wire::encode::ENTRY_OUT + 16);
    assert_eq!(&c[..8], 2u64.to_le_bytes());
    assert_eq!(&c[wire::encode::ENTRY_OUT..][..8], 5u64.to_le_bytes());
    // fuse_ioctl_out then the bytes.
    let i = Ask::new(op::IOCTL).send(&fs).unwrap();
    assert_eq!(&i[16..], b"out");
}

#[test]
fn setattr_reads_only_the_fields_its_valid_bits_name() {
    use wire::fattr;
    let fs = Rec::default();
    Ask::new(op::SETATTR)
        .put(0, &le32(fattr::MODE | fattr::SIZE | fattr::MTIME_NOW | fattr::FH))
        .put(8, &le64(11))
        .put(16, &le64(100))
        .put(68, &le32(0o100644))
        .put(76, &le32(55))
        .send(&fs)
        .unwrap();
    let want = SetAttr {
        mode: Some(0o100644),
        uid: None,
        gid: None,
        size: Some(100),
        atime: None,
        mtime: Some(SetTime::Now),
        fh: Some(11),
    };
    assert_eq!(fs.take(), [format!("setattr(1,{want:?})")]);
}

#[test]
fn malformed_requests_are_eio_and_unknown_ones_enosys() {
    let fs = Rec::default();
    // No NUL.
    assert_eq!(Ask::new(op::LOOKUP).body(b"abc").send(&fs), Err(Errno::EIO));
    assert_eq!(Ask::new(op::SYMLINK).body(b"only\0").send(&fs), Err(Errno::EIO));
    assert_eq!(Ask::new(op::RENAME).body(b"a\0b").send(&fs), Err(Errno::EIO));
    // Data shorter than the size field says.
    let w = Ask::new(op::WRITE).put(16, &le32(10)).body(b"short");
    assert_eq!(w.send(&fs), Err(Errno::EIO));
    let x = Ask::new(op::SETXATTR).put(0, &le32(9)).body(b"user.a\0v");
    assert_eq!(x.send(&fs), Err(Errno::EIO));
    // Extension headers longer than the payload.
    let mut e = Ask::new(op::LOOKUP).body(b"abc\0");
    e.hdr.total_extlen = 1;
    assert_eq!(e.send(&fs), Err(Errno::EIO));
    // The per-op area is smaller than the struct.
    let a = Ask::new(op::LSEEK);
    let short = |w: &mut Wire<'_>| serve_wire(&fs, w);
    let mut buf = [0u8; 64];
    let mut w = Wire::new(&a.hdr, &a.op_in[..23], &mut buf, 0).unwrap();
    assert_eq!(short(&mut w), Err(Errno::EIO));
    assert_eq!(fs.take(), Vec::<String>::new(), "no method ran");
    // Unknown opcodes are answered ENOSYS.
    assert_eq!(Ask::new(4242).send(&fs), Err(Errno::ENOSYS));
}

proptest! {
    #[test]
    fn any_buffer_is_served_or_refused_without_panic(
        opcode in 0u32..60,
        extlen in 0u16..4,
        op_area in proptest::collection::vec(any::<u8>(), 0..=128),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let fs = Rec::default();
        let mut h = Ask::new(opcode).hdr;
        h.total_extlen = extlen;
        let mut buf = payload.clone();
        buf.resize(4096, 0);
        if let Ok(mut w) = Wire::new(&h, &op_area, &mut buf, payload.len()) {
            let _ = serve_wire(&fs, &mut w);
        }
    }

    #[test]
    fn names_arrive_as_written(n in "[a-zA-Z0-9._-]{1,64}") {
        let fs = Rec::default();
        let mut p = n.as_bytes().to_vec();
        p.push(0);
        Ask::new(op::UNLINK).body(&p).send(&fs).unwrap();
        prop_assert_eq!(fs.take(), [format!("unlink(1,{n})")]);
    }
}
