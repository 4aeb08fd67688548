//! A handle read sequentially on a volume with decrypt-ahead threads (no
//! mount): its requests are served from what the threads decrypted, the
//! bytes are the file's, and a write between two reads is seen (a result
//! read before it is never served). Waits for states, never for time.

use super::*;
use crate::{Caller, Options, Volume};
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};
use warpfs_config::{Config, ContentMode, KdfParams};
use warpfs_engine::EngineConfig;

/// Request size: two decrypt-ahead chunks.
const REQ: usize = 2 * warpfs_engine::ahead_stream::CHUNK;
/// Blocks of one request.
const REQ_BLOCKS: u64 = (REQ / 4096) as u64;

/// A read's bytes, and whether they came from a decrypt-ahead buffer.
#[derive(Default)]
struct Collect {
    data: Vec<u8>,
    ahead: bool,
}

impl ReadSink for Collect {
    fn buf(&mut self, size: usize) -> &mut [u8] {
        self.data.resize(size, 0);
        &mut self.data
    }
    fn filled(&mut self, n: usize) {
        self.data.truncate(n);
        self.ahead = false;
    }
    fn bytes(&mut self, b: &[u8]) {
        self.data = b.to_vec();
        self.ahead = true;
    }
}

fn read(f: &OpenFile, off: usize) -> Collect {
    let mut c = Collect::default();
    f.read(off as u64, REQ, &mut c).unwrap();
    c
}

/// Wait until `f` has `n` requests read ahead in full (the decrypt-ahead
/// thread reaches that state whatever the timing).
fn wait_read_ahead(f: &OpenFile, n: usize) {
    let a = f.ahead.as_ref().expect("the handle reads ahead");
    let t0 = Instant::now();
    while a.read_ahead_done() < n {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the decrypt-ahead jobs never finished"
        );
        std::thread::yield_now();
    }
}

#[test]
fn a_sequential_reader_is_served_ahead_and_sees_a_write_between_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, master) = Config::create(dir.path(), b"pw", ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir.path()).unwrap()).unwrap();
    let mut v = Volume::open(dir.path(), &cfg, &master, Options::default()).unwrap();
    let engine = Engine::new(EngineConfig {
        threads: 1,
        speculation: true,
        read_ahead: 2,
        ..EngineConfig::default()
    })
    .unwrap();
    v.use_engine(engine.clone()).unwrap();
    let who = Caller { uid: 0, gid: 0 };
    let (cname, attr, w, _) = v
        .create(Path::new(""), OsStr::new("f"), 0o644, libc::O_RDWR, who, "/f".into())
        .unwrap();
    let len = 6 * REQ + 1000;
    let mut data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
    w.write_at(0, &data).unwrap();
    let r = v.open_file(Path::new(&cname), libc::O_RDONLY, "/f".into()).unwrap();
    assert!(r.reads_ahead() && w.reads_ahead(), "every handle has its own stream");
    let view = v.open_file_of(attr.dev, attr.ino).expect("the file is open");
    assert!(!view.reads_ahead(), "a view that is no handle's reads ahead");

    // The first request is read inline and plans the next two.
    let c = read(&r, 0);
    assert!(!c.ahead && c.data == data[..REQ], "first request");
    wait_read_ahead(&r, 2);
    let c = read(&r, REQ);
    assert!(c.ahead, "a planned request read ahead in full was read again");
    assert!(c.data == data[REQ..2 * REQ], "bytes served ahead differ");
    let s = engine.stats();
    assert_eq!((s.ahead_served, s.ahead_stolen), (REQ_BLOCKS, 0), "{s}");

    // Another handle writes into the next request once it is read ahead.
    wait_read_ahead(&r, 2);
    let new = vec![0xeeu8; 5000];
    w.write_at((2 * REQ + 3000) as u64, &new).unwrap();
    data[2 * REQ + 3000..2 * REQ + 8000].copy_from_slice(&new);
    let c = read(&r, 2 * REQ);
    assert!(c.data == data[2 * REQ..3 * REQ], "stale bytes served after a write");
    let s = engine.stats();
    assert_eq!(s.ahead_served, REQ_BLOCKS, "a stale result counted as served: {s}");
    assert!(s.ahead_wasted >= REQ_BLOCKS, "{s}");

    // The rest, to the end of the file, reads right.
    for off in (3 * REQ..len).step_by(REQ) {
        let c = read(&r, off);
        assert!(c.data == data[off..(off + REQ).min(len)], "request at {off}");
    }
    assert!(read(&r, len).data.is_empty(), "past the end");
    drop((r, w));
}
