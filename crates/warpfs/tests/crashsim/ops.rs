//! From system calls to operations on the backing directory: every call of
//! a traced process that changes something under CIPHERDIR (or makes it
//! durable) becomes one [`BOp`] on model inodes, resolved against a live
//! [`FsModel`] that the operations keep up to date; the workload's marker
//! calls become [`BOp::Marker`]. A call under CIPHERDIR that the model
//! cannot represent (a shared writable mapping, copy_file_range, xattrs,
//! a `write` at an unknown file position) stops the run with an error.

use super::fsmodel::{FsModel, Ino, Node};
use super::trace::{Call, Fd, Ret};
use std::collections::HashMap;

/// Prefix of the paths the workload touches (with `access`) after each step.
pub const MARKER: &[u8] = b"/crashsim-mark/";

/// One operation on the backing directory.
#[derive(Debug, Clone)]
pub enum BOp {
    /// A new entry for a new inode (file, directory, symlink, FIFO).
    Create {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
        node: Node,
        mode: u32,
    },
    /// A new name for an existing inode.
    Link {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
    },
    /// unlink or rmdir of `parent/name` (inode `ino`).
    Remove {
        parent: Ino,
        name: Vec<u8>,
        ino: Ino,
    },
    Rename {
        sp: Ino,
        sn: Vec<u8>,
        dp: Ino,
        dn: Vec<u8>,
        exchange: bool,
    },
    Write {
        ino: Ino,
        off: u64,
        data: Vec<u8>,
    },
    SetLen {
        ino: Ino,
        len: u64,
    },
    /// A punched hole (size kept).
    Zero {
        ino: Ino,
        off: u64,
        len: u64,
    },
    /// fsync/fdatasync of `ino` (`None`: sync/syncfs of everything),
    /// covering the operations before index `covers`.
    Sync {
        ino: Option<Ino>,
        covers: usize,
    },
    /// The workload finished step N.
    Marker(usize),
}

struct OpenFd {
    ino: Ino,
    pos: Option<u64>,
    append: bool,
}

/// Converts calls into operations.
pub struct Conv<'a> {
    root: Vec<u8>,
    pub model: FsModel,
    /// Thread -> process (fd table owner).
    procs: &'a HashMap<i32, i32>,
    fds: HashMap<(i32, i64), OpenFd>,
    pub ops: Vec<BOp>,
    /// Calls seen so far -> ops emitted by then (for `entered`).
    ops_at_call: Vec<usize>,
}

impl<'a> Conv<'a> {
    pub fn new(root: &[u8], model: FsModel, procs: &'a HashMap<i32, i32>) -> Self {
        Self {
            root: root.to_vec(),
            model,
            procs,
            fds: HashMap::new(),
            ops: Vec::new(),
            ops_at_call: Vec::new(),
        }
    }

    fn proc(&self, tid: i32) -> i32 {
        *self.procs.get(&tid).unwrap_or(&tid)
    }

    /// `abs` relative to CIPHERDIR (`None`: outside).
    fn rel<'p>(&self, abs: &'p [u8]) -> Option<&'p [u8]> {
        let r = abs.strip_prefix(self.root.as_slice())?;
        if r.is_empty() {
            Some(r)
        } else {
            r.strip_prefix(b"/")
        }
    }

    /// The absolute path named by (dirfd argument, path argument).
    fn at_path(c: &Call, dirfd: Option<usize>, path: usize) -> Result<Vec<u8>, String> {
        let p = c.bytes(path)?;
        if p.starts_with(b"/") {
            return Ok(p);
        }
        let base = match dirfd {
            Some(i) => c.fd(i)?.path,
            None => None,
        }
        .ok_or_else(|| format!("line {}: relative path without a known directory", c.line))?;
        let mut v = base;
        if !v.ends_with(b"/") {
            v.push(b'/');
        }
        v.extend_from_slice(&p);
        Ok(v)
    }

    /// The inode a descriptor argument refers to, if under CIPHERDIR.
    fn fd_ino(&self, c: &Call, fd: &Fd) -> Result<Option<Ino>, String> {
        if let (Some(p), false) = (&fd.path, fd.deleted) {
            let Some(rel) = self.rel(p) else {
                return Ok(None);
            };
            return self
                .model
                .lookup(rel)
                .map(Some)
                .ok_or_else(|| format!("line {}: {} not in the model", c.line, String::from_utf8_lossy(p)));
        }
        match self.fds.get(&(self.proc(c.tid), fd.num)) {
            Some(o) => Ok(Some(o.ino)),
            None if fd.deleted => Err(format!("line {}: a deleted file opened before the trace", c.line)),
            None => Ok(None),
        }
    }

    /// (parent inode, name) of a path under CIPHERDIR that must have a parent.
    fn split(&self, c: &Call, rel: &[u8]) -> Result<(Ino, Vec<u8>), String> {
        let (dir, name) = match rel.iter().rposition(|&b| b == b'/') {
            Some(k) => (&rel[..k], &rel[k + 1..]),
            None => (&b""[..], rel),
        };
        let parent = self
            .model
            .lookup(dir)
            .ok_or_else(|| format!("line {}: no directory {}", c.line, String::from_utf8_lossy(dir)))?;
        Ok((parent, name.to_vec()))
    }

    fn emit(&mut self, op: BOp) {
        apply(&mut self.model, &op);
        self.ops.push(op);
    }

    /// Feed the calls in order.
    pub fn feed(&mut self, calls: &[Call]) -> Result<(), String> {
        for c in calls {
            self.ops_at_call.push(self.ops.len());
            // A marker's access(2) fails (ENOENT): that is the point.
            if matches!(c.ret, Ret::Ok(..)) || c.name.contains("access") {
                self.call(c)
                    .map_err(|e| format!("{e}\n  in call: {} {:?} = {:?}", c.name, c.args, c.ret))?;
            }
        }
        Ok(())
    }

    fn call(&mut self, c: &Call) -> Result<(), String> {
        let n = c.name.as_str();
        match n {
            "open" | "openat" | "openat2" | "creat" => self.open(c),
            "mkdir" | "mkdirat" => {
                let abs = if n == "mkdir" {
                    Self::at_path(c, None, 0)?
                } else {
                    Self::at_path(c, Some(0), 1)?
                };
                let mode = c.int(if n == "mkdir" { 1 } else { 2 })? as u32;
                self.create(c, &abs, Node::Dir(Default::default()), mode)
            }
            "symlink" | "symlinkat" => {
                let target = c.bytes(0)?;
                let abs = if n == "symlink" {
                    Self::at_path(c, None, 1)?
                } else {
                    Self::at_path(c, Some(1), 2)?
                };
                self.create(c, &abs, Node::Symlink(target), 0o777)
            }
            "mknod" | "mknodat" => {
                let k = if n == "mknod" { 0 } else { 1 };
                let abs = if n == "mknod" {
                    Self::at_path(c, None, 0)?
                } else {
                    Self::at_path(c, Some(0), 1)?
                };
                if self.rel(&abs).is_none() {
                    return Ok(());
                }
                let m = c.arg(k + 1)?;
                if !m.starts_with("S_IFIFO") {
                    return Err(format!("mknod of {m} is not modelled"));
                }
                let mode = m
                    .rsplit('|')
                    .next()
                    .map(super::trace::parse_int)
                    .transpose()?
                    .unwrap_or(0o644) as u32;
                self.create(c, &abs, Node::Fifo, mode)
            }
            "link" | "linkat" => {
                let (from, to) = if n == "link" {
                    (Self::at_path(c, None, 0)?, Self::at_path(c, None, 1)?)
                } else {
                    (Self::at_path(c, Some(0), 1)?, Self::at_path(c, Some(2), 3)?)
                };
                let (Some(rf), Some(rt)) = (self.rel(&from), self.rel(&to)) else {
                    return Ok(());
                };
                let ino = self.model.lookup(rf).ok_or("link of a missing file")?;
                let (parent, name) = self.split(c, rt)?;
                self.emit(BOp::Link { parent, name, ino });
                Ok(())
            }
            "unlink" | "unlinkat" | "rmdir" => {
                let abs = if n == "unlinkat" {
                    Self::at_path(c, Some(0), 1)?
                } else {
                    Self::at_path(c, None, 0)?
                };
                let Some(rel) = self.rel(&abs) else {
                    return Ok(());
                };
                let ino = self.model.lookup(rel).ok_or("removal of a missing entry")?;
                let (parent, name) = self.split(c, rel)?;
                self.emit(BOp::Remove { parent, name, ino });
                Ok(())
            }
            "rename" | "renameat" | "renameat2" => {
                let (from, to) = if n == "rename" {
                    (Self::at_path(c, None, 0)?, Self::at_path(c, None, 1)?)
                } else {
                    (Self::at_path(c, Some(0), 1)?, Self::at_path(c, Some(2), 3)?)
                };
                let flags = if n == "renameat2" {
                    c.arg(4)?.to_string()
                } else {
                    "0".into()
                };
                if flags.contains("WHITEOUT") {
                    return Err("RENAME_WHITEOUT is not modelled".into());
                }
                match (self.rel(&from), self.rel(&to)) {
                    (None, None) => Ok(()),
                    (Some(rf), Some(rt)) => {
                        let (sp, sn) = self.split(c, rf)?;
                        let (dp, dn) = self.split(c, rt)?;
                        let exchange = flags.contains("RENAME_EXCHANGE");
                        self.emit(BOp::Rename {
                            sp,
                            sn,
                            dp,
                            dn,
                            exchange,
                        });
                        Ok(())
                    }
                    _ => Err("rename across CIPHERDIR's boundary is not modelled".into()),
                }
            }
            "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" => self.write(c),
            "ftruncate" | "truncate" => {
                let ino = if n == "truncate" {
                    let abs = Self::at_path(c, None, 0)?;
                    match self.rel(&abs) {
                        Some(r) => Some(self.model.lookup(r).ok_or("truncate of a missing file")?),
                        None => None,
                    }
                } else {
                    let fd = c.fd(0)?;
                    self.fd_ino(c, &fd)?
                };
                if let Some(ino) = ino {
                    let len = c.int(1)? as u64;
                    self.emit(BOp::SetLen { ino, len });
                }
                Ok(())
            }
            "fallocate" => {
                let fd = c.fd(0)?;
                let Some(ino) = self.fd_ino(c, &fd)? else {
                    return Ok(());
                };
                let (mode, off, len) = (c.arg(1)?.to_string(), c.int(2)? as u64, c.int(3)? as u64);
                if mode.contains("PUNCH_HOLE") {
                    self.emit(BOp::Zero { ino, off, len });
                } else if mode == "0" && off + len > self.model.size(ino) {
                    self.emit(BOp::SetLen { ino, len: off + len });
                } else if mode != "FALLOC_FL_KEEP_SIZE" && mode != "0" {
                    return Err(format!("fallocate mode {mode} is not modelled"));
                }
                Ok(())
            }
            "fsync" | "fdatasync" | "syncfs" => {
                let fd = c.fd(0)?;
                // A syncfs through a file deleted since it was opened syncs
                // the file system all the same.
                let whole = n == "syncfs" && fd.deleted && fd.path.as_deref().is_some_and(|p| self.rel(p).is_some());
                if whole {
                    let covers = self.ops_at_call[c.entered.min(self.ops_at_call.len() - 1)];
                    self.ops.push(BOp::Sync { ino: None, covers });
                    return Ok(());
                }
                let Some(ino) = self.fd_ino(c, &fd)? else {
                    return Ok(());
                };
                let covers = self.ops_at_call[c.entered.min(self.ops_at_call.len() - 1)];
                let ino = (n != "syncfs").then_some(ino);
                self.ops.push(BOp::Sync { ino, covers });
                Ok(())
            }
            "sync" => {
                let covers = self.ops_at_call[c.entered.min(self.ops_at_call.len() - 1)];
                self.ops.push(BOp::Sync { ino: None, covers });
                Ok(())
            }
            "lseek" => {
                let key = (self.proc(c.tid), c.fd(0)?.num);
                if let Some(o) = self.fds.get_mut(&key) {
                    o.pos = c.ok().map(|v| v as u64);
                }
                Ok(())
            }
            "dup" | "dup2" | "dup3" | "fcntl" => {
                if n == "fcntl" && !c.arg(1)?.starts_with("F_DUPFD") {
                    return Ok(());
                }
                let p = self.proc(c.tid);
                let (old, new) = (c.fd(0)?.num, c.ok().unwrap_or(-1));
                if let Some(o) = self.fds.get(&(p, old)) {
                    let copy = OpenFd {
                        ino: o.ino,
                        pos: None,
                        append: o.append,
                    };
                    self.fds.insert((p, new), copy);
                }
                Ok(())
            }
            "access" | "faccessat" | "faccessat2" => {
                let p = c.bytes(if n == "access" { 0 } else { 1 })?;
                if let Some(m) = p.strip_prefix(MARKER) {
                    let step = std::str::from_utf8(m)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or("bad marker")?;
                    self.ops.push(BOp::Marker(step));
                }
                Ok(())
            }
            "mmap" => {
                let (prot, flags) = (c.arg(2)?, c.arg(3)?);
                let fd = c.fd(4)?;
                if prot.contains("PROT_WRITE") && flags.contains("MAP_SHARED") && self.fd_ino(c, &fd)?.is_some() {
                    return Err("a shared writable mapping of a backing file is not modelled".into());
                }
                Ok(())
            }
            "copy_file_range" | "sendfile" | "splice" => {
                // The descriptor written to: copy_file_range(in, off, OUT, ..),
                // splice(in, off, OUT, ..), sendfile(OUT, in, ..).
                let i = if n == "sendfile" { 0 } else { 2 };
                let fd = c.fd(i)?;
                if self.fd_ino(c, &fd)?.is_some() {
                    return Err(format!("{n} into a backing file is not modelled"));
                }
                Ok(())
            }
            "setxattr" | "lsetxattr" | "removexattr" | "lremovexattr" => {
                let abs = Self::at_path(c, None, 0)?;
                match self.rel(&abs) {
                    Some(_) => Err("xattrs of backing files are not modelled".into()),
                    None => Ok(()),
                }
            }
            "fsetxattr" | "fremovexattr" => {
                let fd = c.fd(0)?;
                match self.fd_ino(c, &fd)? {
                    Some(_) => Err("xattrs of backing files are not modelled".into()),
                    None => Ok(()),
                }
            }
            "clone" | "clone3" | "fork" | "vfork" | "close" | "execve" => Ok(()),
            other => Err(format!("call {other} is traced but not handled")),
        }
    }

    fn create(&mut self, c: &Call, abs: &[u8], node: Node, mode: u32) -> Result<(), String> {
        let Some(rel) = self.rel(abs) else {
            return Ok(());
        };
        let (parent, name) = self.split(c, rel)?;
        let ino = self.model.fresh();
        self.emit(BOp::Create {
            parent,
            name,
            ino,
            node,
            mode: mode & 0o7777,
        });
        Ok(())
    }

    fn open(&mut self, c: &Call) -> Result<(), String> {
        let Some(abs) = c.ret_path().map(|p| p.to_vec()) else {
            return Ok(());
        };
        let Some(rel) = self.rel(&abs).map(|r| r.to_vec()) else {
            return Ok(());
        };
        let (flags, mode) = match c.name.as_str() {
            "creat" => ("O_WRONLY|O_CREAT|O_TRUNC".to_string(), c.int(1)?),
            "open" => (c.arg(1)?.to_string(), c.int(2).unwrap_or(0)),
            "openat" => (c.arg(2)?.to_string(), c.int(3).unwrap_or(0)),
            _ => {
                // openat2(dirfd, path, {flags=..., mode=..., resolve=...}, size)
                let how = c.arg(2)?;
                let field = |k: &str| {
                    how.split([',', '{', '}'])
                        .map(str::trim)
                        .find_map(|f| f.strip_prefix(k))
                        .map(str::to_string)
                };
                let mode = field("mode=")
                    .map(|m| super::trace::parse_int(&m))
                    .transpose()?
                    .unwrap_or(0);
                (field("flags=").unwrap_or_default(), mode)
            }
        };
        let has = |f: &str| flags.split('|').any(|x| x == f);
        let existed = self.model.lookup(&rel);
        let ino = match existed {
            Some(i) => {
                if has("O_TRUNC") && self.model.size(i) > 0 {
                    self.emit(BOp::SetLen { ino: i, len: 0 });
                }
                i
            }
            None if has("O_CREAT") => {
                self.create(c, &abs, Node::File(Vec::new()), mode as u32)?;
                self.model.lookup(&rel).unwrap()
            }
            None => {
                return Err(format!(
                    "opened {} which is not in the model",
                    String::from_utf8_lossy(&abs)
                ))
            }
        };
        let fdnum = c.ok().unwrap();
        let writable = has("O_WRONLY") || has("O_RDWR");
        let o = OpenFd {
            ino,
            // Reads are not traced: a position is known only where the
            // descriptor cannot read.
            pos: (has("O_WRONLY") || !writable).then_some(0),
            append: has("O_APPEND"),
        };
        self.fds.insert((self.proc(c.tid), fdnum), o);
        Ok(())
    }

    fn write(&mut self, c: &Call) -> Result<(), String> {
        let fd = c.fd(0)?;
        let Some(ino) = self.fd_ino(c, &fd)? else {
            return Ok(());
        };
        let n = c.ok().unwrap() as usize;
        let mut data = match c.name.as_str() {
            "write" | "pwrite64" => c.bytes(1)?,
            _ => c.iovs(1)?.concat(),
        };
        if data.len() < n {
            return Err("fewer bytes traced than written".into());
        }
        data.truncate(n);
        let key = (self.proc(c.tid), fd.num);
        let off = match c.name.as_str() {
            "pwrite64" => c.int(3)? as u64,
            "pwritev" | "pwritev2" => c.int(3)? as u64,
            _ => {
                let o = self
                    .fds
                    .get_mut(&key)
                    .ok_or("write() on a descriptor opened before the trace")?;
                let off = if o.append {
                    self.model.size(ino)
                } else {
                    o.pos
                        .ok_or("write() at an unknown position (a read-write descriptor)")?
                };
                o.pos = Some(off + n as u64);
                off
            }
        };
        if n > 0 {
            self.emit(BOp::Write { ino, off, data });
        }
        Ok(())
    }
}

/// Apply one operation to a model (the full effect, as on a file system
/// that never crashes).
pub fn apply(m: &mut FsModel, op: &BOp) {
    match op {
        BOp::Create {
            parent,
            name,
            ino,
            node,
            mode,
        } => {
            if m.get(*ino).is_none() {
                m.put(*ino, node.clone(), *mode);
            }
            let old = m.link(*parent, name, *ino);
            assert!(old.is_none(), "model: create over an existing entry");
        }
        BOp::Link { parent, name, ino } => {
            let old = m.link(*parent, name, *ino);
            assert!(old.is_none(), "model: link over an existing entry");
        }
        BOp::Remove { parent, name, ino } => {
            let old = m.unlink(*parent, name);
            assert_eq!(old, Some(*ino), "model: removal of another entry");
        }
        BOp::Rename {
            sp,
            sn,
            dp,
            dn,
            exchange,
        } => {
            let a = m.unlink(*sp, sn).expect("model: rename of a missing entry");
            if *exchange {
                let b = m.unlink(*dp, dn).expect("model: exchange with a missing entry");
                m.link(*sp, sn, b);
            }
            m.link(*dp, dn, a);
        }
        BOp::Write { ino, off, data } => m.write(*ino, *off, data),
        BOp::SetLen { ino, len } => m.set_len(*ino, *len),
        BOp::Zero { ino, off, len } => m.zero(*ino, *off, *len),
        BOp::Sync { .. } | BOp::Marker(_) => {}
    }
}

/// Thread -> process map from the clone calls of a trace, seeded with the
/// threads known to belong to `seeds`' processes.
pub fn processes(calls: &[Call], seeds: &[(i32, i32)]) -> HashMap<i32, i32> {
    let mut m: HashMap<i32, i32> = seeds.iter().copied().collect();
    for c in calls {
        if !matches!(c.name.as_str(), "clone" | "clone3") {
            continue;
        }
        let Some(child) = c.ok() else { continue };
        let flags = c.args.join(",");
        if flags.contains("CLONE_THREAD") {
            let owner = *m.get(&c.tid).unwrap_or(&c.tid);
            m.insert(child as i32, owner);
        }
    }
    m
}
