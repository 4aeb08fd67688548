//! Unit tests of the decrypt-ahead state: buffer reuse, the wake-up of a
//! waiting read, and, on a real volume (no mount), a planned request served
//! from what a thread read ahead, a stale result never served, and a chunk
//! taken over from a stalled thread. Each waits for states, never for time.

use super::*;
use std::ffi::OsStr;
use std::path::Path;
use warpfs_config::{Config, ContentMode, KdfParams};
use warpfs_engine::EngineConfig;
use warpfs_volume::{Caller, Options, Volume};

fn caps(st: &State) -> Vec<usize> {
    let mut v: Vec<usize> = st.free.iter().map(|b| b.cap).collect();
    v.sort_unstable();
    v
}

#[test]
fn buffers_are_reused_by_capacity_and_the_largest_are_kept() {
    const K: usize = 1024;
    let mut st = State::default();
    // The kernel's read-ahead ramps up: 128 KiB, 256 KiB, 512 KiB, then 1 MiB.
    for len in [128 * K, 256 * K, 512 * K] {
        let b = st.buffer(len);
        assert_eq!(b.cap, len, "nothing free: a new buffer of the request's length");
        st.give_back(b, 2);
    }
    assert_eq!(
        caps(&st),
        vec![256 * K, 512 * K],
        "a full list keeps the larger buffers"
    );
    let big = st.buffer(1024 * K);
    assert_eq!(big.cap, 1024 * K);
    st.give_back(big, 2);
    assert_eq!(caps(&st), vec![512 * K, 1024 * K], "1 MiB replaces the smallest");
    // Every later 1 MiB request reuses the same buffer (no new, zeroed one).
    for _ in 0..10 {
        let b = st.buffer(1024 * K);
        let p = b.ptr;
        st.give_back(b, 2);
        assert!(st.free.iter().any(|x| x.ptr == p));
        assert_eq!(caps(&st), vec![512 * K, 1024 * K]);
    }
    // A smaller request takes the smallest buffer that fits.
    let b = st.buffer(300 * K);
    assert_eq!(b.cap, 512 * K);
    // SAFETY: `b` is this test's alone.
    unsafe {
        assert_eq!(
            b.chunk(2, 300 * K).len(),
            300 * K - 2 * CHUNK,
            "chunks end at the request"
        );
        assert!(b.chunk(3, 300 * K).is_empty());
        assert_eq!(b.head_mut(300 * K).len(), 300 * K);
    }
    // A buffer smaller than everything kept is dropped.
    st.give_back(Arc::new(Buf::new(64 * K)), 1);
    assert_eq!(caps(&st), vec![1024 * K]);
}

#[test]
fn a_chunk_that_ends_wakes_the_counted_waiting_read() {
    let stream = Stream::default();
    let slot = |id, chunks| Slot {
        id,
        off: 0,
        len: 2 * CHUNK,
        buf: Arc::new(Buf::new(2 * CHUNK)),
        chunks,
        claimed: true,
    };
    let done = Chunk::Done {
        n: CHUNK,
        changes: 0,
        ok: true,
    };
    {
        let mut st = stream.lock();
        st.slots.push_back(slot(1, vec![done, Chunk::Running]));
        // Another slot's chunk: no wait.
        st.slots.push_back(slot(2, vec![done, done]));
    }
    const LONG: Duration = Duration::from_secs(20);
    let (st, waited, stolen, timeouts) = wait_running(&stream, 2, LONG);
    assert!(waited.is_none() && stolen.is_empty() && timeouts == 0 && st.waiters == 0);
    drop(st);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            // Once the read is counted as waiting, end its chunk.
            let t0 = Instant::now();
            while stream.lock().waiters == 0 && t0.elapsed() < LONG {
                std::thread::yield_now();
            }
            end_chunk(&stream, 1, 1, done);
        });
        // Woken by the end of the chunk: no steal (that takes LONG).
        let (mut st, waited, stolen, timeouts) = wait_running(&stream, 1, LONG);
        assert!(stolen.is_empty(), "gave up waiting: {stolen:?}");
        assert!(waited.is_some());
        assert_eq!(timeouts, 0, "the wait ended by the clock, not by a wake-up");
        assert_eq!(st.waiters, 0, "the wait is no longer counted");
        assert!(st.slot(1).unwrap().chunks[1] == done);
    });
}

/// Request size of the volume tests: two chunks.
const REQ: usize = 2 * CHUNK;

/// A gcm volume in `dir` with file `f` of `len` patterned bytes; masks made
/// on the calling thread (the engine below only runs decrypt-ahead jobs).
fn volume_with_file(dir: &Path, len: usize) -> (Volume, OpenFile, Vec<u8>) {
    let (cfg, master) = Config::create(dir, b"pw", ContentMode::Gcm, 256, KdfParams::MIN).unwrap();
    Volume::init_root(&warpfs_backing::Root::open(dir).unwrap()).unwrap();
    let v = Volume::open(dir, &cfg, &master, Options::default()).unwrap();
    let who = Caller { uid: 0, gid: 0 };
    let (_, _, f, _) = v
        .create(Path::new(""), OsStr::new("f"), 0o644, libc::O_RDWR, who, "/f".into())
        .unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
    f.write_at(0, &data).unwrap();
    (v, f, data)
}

/// An engine with one decrypt-ahead thread and depth 2.
fn ahead_engine() -> Arc<Engine> {
    Engine::new(EngineConfig {
        threads: 1,
        speculation: true,
        read_ahead: 2,
        ..EngineConfig::default()
    })
    .unwrap()
}

/// Wait until handle `fh` has `n` planned requests and the threads have
/// read every chunk of them (a state the jobs reach whatever the timing).
fn wait_read_ahead(a: &Ahead, fh: u64, n: usize) {
    let stream = a.stream(fh);
    let t0 = Instant::now();
    loop {
        {
            let st = stream.lock();
            let done = |s: &Slot| s.chunks.iter().all(|c| matches!(c, Chunk::Done { ok: true, .. }));
            if st.slots.len() == n && st.slots.iter().all(done) {
                return;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the decrypt-ahead jobs never finished"
        );
        std::thread::yield_now();
    }
}

fn ready(found: Found) -> Ready {
    match found {
        Found::Ready(r) => r,
        Found::Inline { direct } => panic!("not planned (Inline, direct {direct})"),
        Found::Failed(e) => panic!("failed: errno {e}"),
    }
}

#[test]
fn a_planned_request_is_served_from_what_a_thread_read_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let (_v, f, data) = volume_with_file(dir.path(), 6 * REQ);
    let engine = ahead_engine();
    let a = Ahead::new(engine.clone()).expect("decrypt-ahead threads");
    // The first request is read inline and plans the next two.
    assert!(matches!(a.read(1, &f, 0, REQ), Found::Inline { direct: true }));
    wait_read_ahead(&a, 1, 2);
    let r = ready(a.read(1, &f, REQ as u64, REQ));
    assert!(r.bytes() == &data[REQ..2 * REQ], "served bytes differ");
    let s = engine.stats();
    let blocks = (REQ / 4096) as u64;
    assert_eq!((s.ahead_served, s.ahead_inline, s.ahead_stolen), (blocks, 0, 0), "{s}");
    a.recycle(1, r);
    a.forget(1);
}

#[test]
fn a_result_read_before_a_write_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let (_v, f, mut data) = volume_with_file(dir.path(), 6 * REQ);
    let engine = ahead_engine();
    let a = Ahead::new(engine.clone()).expect("decrypt-ahead threads");
    assert!(matches!(a.read(7, &f, 0, REQ), Found::Inline { direct: true }));
    wait_read_ahead(&a, 7, 2);
    // Another handle overwrites part of the request read ahead.
    let new = vec![0xeeu8; 5000];
    f.write_at((REQ + 3000) as u64, &new).unwrap();
    data[REQ + 3000..REQ + 8000].copy_from_slice(&new);
    let r = ready(a.read(7, &f, REQ as u64, REQ));
    assert!(r.bytes() == &data[REQ..2 * REQ], "stale bytes served after a write");
    let s = engine.stats();
    assert_eq!(s.ahead_served, 0, "a stale result counted as served: {s}");
    assert!(s.ahead_wasted >= (REQ / 4096) as u64, "{s}");
    a.recycle(7, r);
}

#[test]
fn a_read_takes_over_a_chunk_from_a_stalled_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (_v, f, data) = volume_with_file(dir.path(), 4 * REQ);
    // No decrypt-ahead threads (speculation off): only the slot planted
    // below exists, its first chunk held by a "thread" that never ends it.
    let engine = Engine::new(EngineConfig {
        speculation: false,
        read_ahead: 0,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(engine.ahead_threads(), 0);
    let a = Ahead {
        engine: engine.clone(),
        depth: 2,
        steal_after: Duration::ZERO,
        streams: Mutex::new(HashMap::new()),
    };
    let stream = a.stream(3);
    let held = {
        let mut st = stream.lock();
        st.next = Some(REQ as u64);
        let buf = st.buffer(REQ);
        st.slots.push_back(Slot {
            id: 99,
            off: REQ as u64,
            len: REQ,
            buf: buf.clone(),
            chunks: vec![Chunk::Running, Chunk::Queued],
            claimed: false,
        });
        buf
    };
    let r = ready(a.read(3, &f, REQ as u64, REQ));
    assert!(r.bytes() == &data[REQ..2 * REQ], "bytes of a taken-over request differ");
    let s = engine.stats();
    let blocks = (REQ / 4096) as u64;
    assert_eq!((s.ahead_served, s.ahead_inline, s.ahead_stolen), (0, blocks, 1), "{s}");
    assert!(
        !Arc::ptr_eq(&held, &r.buf),
        "the stalled thread's buffer was handed out"
    );
    // The stalled thread ends late: its slot is gone, nothing changes.
    end_chunk(
        &stream,
        99,
        0,
        Chunk::Done {
            n: CHUNK,
            changes: 0,
            ok: true,
        },
    );
    assert!(stream.lock().slots.is_empty());
    a.recycle(3, r);
}
