//! Workloads: what exists before the recording (made through the mount and
//! taken as durable), then the steps the recorded process runs one after
//! another, each followed by a marker. Data is random per write, so every
//! version of every block is distinct.

use crate::common::Rng;

/// Most descriptors a workload keeps open at once.
pub const SLOTS: usize = 8;

#[derive(Debug, Clone)]
pub enum Step {
    /// `open(path, O_RDWR [| O_CREAT] [| O_APPEND])` into `slot`.
    Open {
        slot: usize,
        path: String,
        create: bool,
        append: bool,
    },
    Close {
        slot: usize,
    },
    Pwrite {
        slot: usize,
        off: u64,
        data: Vec<u8>,
    },
    /// `write` on an `O_APPEND` descriptor.
    Append {
        slot: usize,
        data: Vec<u8>,
    },
    Truncate {
        slot: usize,
        len: u64,
    },
    Fsync {
        slot: usize,
    },
    Fdatasync {
        slot: usize,
    },
    /// open the directory, fsync it, close it.
    FsyncDir {
        path: String,
    },
    Rename {
        from: String,
        to: String,
    },
    Unlink {
        path: String,
    },
    Mkdir {
        path: String,
    },
    /// `warpfs rekey` of the mounted volume, in the background.
    RekeyStart,
    /// Wait for it; it must succeed.
    RekeyWait,
}

#[derive(Debug, Clone)]
pub enum Setup {
    Dir(String),
    File(String, Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub setup: Vec<Setup>,
    pub steps: Vec<Step>,
}

pub fn make(name: &str, rng: &mut Rng) -> Workload {
    match name {
        "writes" => writes(rng),
        "rename" => rename(rng),
        "rekey" => rekey(rng),
        _ => panic!("no workload {name}"),
    }
}

const B: u64 = 4096;

/// Sequential writes and appends with fsync and fdatasync, random
/// overwrites (partial blocks, across the first nonce page), a shrink into
/// a block, an extension with a hole, and unsynced writes at the end.
fn writes(rng: &mut Rng) -> Workload {
    let mut s = vec![
        Step::Open {
            slot: 0,
            path: "seq".into(),
            create: true,
            append: false,
        },
        Step::Pwrite {
            slot: 0,
            off: 0,
            data: rng.bytes(64 * 1024),
        },
        Step::Fsync { slot: 0 },
        Step::Pwrite {
            slot: 0,
            off: 64 * 1024,
            data: rng.bytes(40 * 1024 + 123),
        },
        Step::Fdatasync { slot: 0 },
        Step::Open {
            slot: 1,
            path: "seq".into(),
            create: false,
            append: true,
        },
        Step::Append {
            slot: 1,
            data: rng.bytes(3000),
        },
        Step::Append {
            slot: 1,
            data: rng.bytes(500),
        },
        Step::Fsync { slot: 1 },
        Step::Open {
            slot: 2,
            path: "rand".into(),
            create: false,
            append: false,
        },
    ];
    for k in 0..6 {
        let off = rng.below(90 * B);
        let len = if rng.chance(50) { B } else { 1 + rng.below(3 * B) };
        let off = if rng.chance(50) { off / B * B } else { off };
        s.push(Step::Pwrite {
            slot: 2,
            off,
            data: rng.bytes(len as usize),
        });
        if k == 2 {
            s.push(Step::Fsync { slot: 2 });
        }
    }
    s.extend([
        Step::Fdatasync { slot: 2 },
        Step::Truncate {
            slot: 2,
            len: 30 * B + 777,
        },
        Step::Pwrite {
            slot: 2,
            off: 40 * B + 5,
            data: rng.bytes(2000),
        },
        Step::Fsync { slot: 2 },
        Step::Truncate {
            slot: 2,
            len: 50 * B + 1,
        },
        Step::Pwrite {
            slot: 0,
            off: 7 * B + 100,
            data: rng.bytes(300),
        },
        Step::Append {
            slot: 1,
            data: rng.bytes(5000),
        },
        Step::Close { slot: 0 },
        Step::Close { slot: 1 },
        Step::Close { slot: 2 },
    ]);
    Workload {
        setup: vec![Setup::File("rand".into(), rng.bytes(80 * B as usize + 1000))],
        steps: s,
    }
}

/// The atomic-save pattern (write a temporary file, fsync, rename over the
/// old one, fsync the directory), also for a long name in a subdirectory;
/// a new directory with a file, made durable; an unlink.
fn rename(rng: &mut Rng) -> Workload {
    let long = "L".repeat(200);
    let mut s = Vec::new();
    let save = |s: &mut Vec<Step>, rng: &mut Rng, dir: &str, name: &str, len: usize| {
        let tmp = format!("{dir}{name}.tmp");
        s.extend([
            Step::Open {
                slot: 0,
                path: tmp.clone(),
                create: true,
                append: false,
            },
            Step::Pwrite {
                slot: 0,
                off: 0,
                data: rng.bytes(len),
            },
            Step::Fsync { slot: 0 },
            Step::Close { slot: 0 },
            Step::Rename {
                from: tmp,
                to: format!("{dir}{name}"),
            },
            Step::FsyncDir {
                path: if dir.is_empty() {
                    ".".into()
                } else {
                    dir.trim_end_matches('/').into()
                },
            },
        ]);
    };
    save(&mut s, rng, "", "doc", 9000);
    save(&mut s, rng, "d/", &long, 5000);
    s.extend([
        Step::Mkdir { path: "e".into() },
        Step::FsyncDir { path: ".".into() },
        Step::Open {
            slot: 1,
            path: "e/x".into(),
            create: true,
            append: false,
        },
        Step::Pwrite {
            slot: 1,
            off: 0,
            data: rng.bytes(6000),
        },
        Step::Fsync { slot: 1 },
        Step::FsyncDir { path: "e".into() },
        Step::Close { slot: 1 },
        Step::Unlink { path: "old".into() },
        Step::FsyncDir { path: ".".into() },
        // A new long name, made durable the POSIX way.
        Step::Open {
            slot: 2,
            path: format!("d/{}", "M".repeat(220)),
            create: true,
            append: false,
        },
        Step::Pwrite {
            slot: 2,
            off: 0,
            data: rng.bytes(100),
        },
        Step::Fsync { slot: 2 },
        Step::FsyncDir { path: "d".into() },
        Step::Close { slot: 2 },
    ]);
    save(&mut s, rng, "", "doc", 3000);
    s.push(Step::Mkdir { path: "f".into() });
    Workload {
        setup: vec![
            Setup::File("doc".into(), rng.bytes(20_000)),
            Setup::Dir("d".into()),
            Setup::File(format!("d/{long}"), rng.bytes(7000)),
            Setup::File("old".into(), rng.bytes(4096)),
        ],
        steps: s,
    }
}

/// An online rekey with writes to the files it is moving (a file with
/// two segments, a small one), fsynced and not.
fn rekey(rng: &mut Rng) -> Workload {
    let big = 16 + 256 + 40;
    let s = vec![
        Step::Open {
            slot: 0,
            path: "big".into(),
            create: false,
            append: false,
        },
        Step::Open {
            slot: 1,
            path: "small".into(),
            create: false,
            append: false,
        },
        Step::RekeyStart,
        Step::Pwrite {
            slot: 0,
            off: 300 * B + 10,
            data: rng.bytes(5000),
        },
        Step::Fsync { slot: 0 },
        Step::Pwrite {
            slot: 1,
            off: 100,
            data: rng.bytes(3 * B as usize),
        },
        Step::Pwrite {
            slot: 0,
            off: 20 * B,
            data: rng.bytes(2 * B as usize),
        },
        Step::Fdatasync { slot: 0 },
        Step::RekeyWait,
        Step::Pwrite {
            slot: 0,
            off: big * B,
            data: rng.bytes(3000),
        },
        Step::Fsync { slot: 0 },
        Step::Pwrite {
            slot: 1,
            off: 0,
            data: rng.bytes(700),
        },
        Step::Close { slot: 0 },
        Step::Close { slot: 1 },
    ];
    Workload {
        setup: vec![
            Setup::File("big".into(), rng.bytes((big * B) as usize)),
            Setup::File("small".into(), rng.bytes(20_000)),
        ],
        steps: s,
    }
}
