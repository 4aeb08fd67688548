//! Attributes of a plaintext entry: the backing entry's stat with the
//! plaintext size (regular files: from the cipher layout; symlinks: the
//! decrypted target's length).

/// Kind of entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Unix socket.
    Socket,
    /// Character device.
    CharDev,
    /// Block device.
    BlockDev,
}

impl Kind {
    /// From the S_IFMT bits of a mode.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDev,
            libc::S_IFBLK => Kind::BlockDev,
            _ => return None,
        })
    }
}

/// Plaintext attributes of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    /// Backing inode number.
    pub ino: u64,
    /// Backing device.
    pub dev: u64,
    /// Plaintext size.
    pub size: u64,
    /// Allocated 512-byte blocks (of the backing entry).
    pub blocks: u64,
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, u32),
    /// Modification time.
    pub mtime: (i64, u32),
    /// Status change time.
    pub ctime: (i64, u32),
    /// Kind of entry.
    pub kind: Kind,
    /// Permission bits (07777).
    pub perm: u16,
    /// Hard links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number for device nodes.
    pub rdev: u64,
}

impl Attr {
    /// From a backing stat; `size` is filled in by the caller for files and symlinks.
    pub(crate) fn from_stat(st: &libc::stat) -> Option<Attr> {
        Some(Attr {
            ino: st.st_ino,
            dev: st.st_dev,
            size: st.st_size as u64,
            blocks: st.st_blocks as u64,
            atime: (st.st_atime, st.st_atime_nsec as u32),
            mtime: (st.st_mtime, st.st_mtime_nsec as u32),
            ctime: (st.st_ctime, st.st_ctime_nsec as u32),
            kind: Kind::from_mode(st.st_mode)?,
            perm: (st.st_mode & 0o7777) as u16,
            nlink: st.st_nlink as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev,
        })
    }
}
