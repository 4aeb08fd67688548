//! Unit tests of the decrypt-ahead state: buffer reuse, the wake-up of a
//! waiting read, and, on a file in memory with a change counter, a planned
//! request served from what a thread read ahead, a stale result never
//! served, and a chunk taken over from a stalled thread (the cipher file
//! behind a volume's handle is tested in `warpfs-volume`). Each waits for
//! states, never for time.

use super::*;
use crate::EngineConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

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

/// A file in memory whose change counter moves with every write that
/// finished, as a cipher file's does.
struct MemFile {
    data: RwLock<Vec<u8>>,
    changes: AtomicU64,
}

impl MemFile {
    fn write_at(&self, off: usize, b: &[u8]) {
        let mut d = self.data.write().unwrap();
        d[off..off + b.len()].copy_from_slice(b);
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<usize, i32> {
        let d = self.data.read().unwrap();
        let s = (off as usize).min(d.len());
        let n = buf.len().min(d.len() - s);
        buf[..n].copy_from_slice(&d[s..s + n]);
        Ok(n)
    }
}

impl AheadSource for MemFile {
    type Error = i32;
    fn read_ahead_at(&self, off: u64, buf: &mut [u8]) -> Result<usize, i32> {
        self.read(off, buf)
    }
    fn read_direct_at(&self, off: u64, buf: &mut [u8]) -> Result<usize, i32> {
        self.read(off, buf)
    }
    fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }
    fn size(&self) -> u64 {
        self.data.read().unwrap().len() as u64
    }
}

/// File `f` of `len` patterned bytes.
fn file(len: usize) -> (Arc<MemFile>, Vec<u8>) {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
    let f = MemFile {
        data: RwLock::new(data.clone()),
        changes: AtomicU64::new(0),
    };
    (Arc::new(f), data)
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

/// Wait until stream `a` has `n` planned requests and the threads have
/// read every chunk of them (a state the jobs reach whatever the timing).
fn wait_read_ahead(a: &AheadStream, n: usize) {
    let stream = &a.stream;
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

fn ready(found: Found<i32>) -> Ready {
    match found {
        Found::Ready(r) => r,
        Found::Inline { direct } => panic!("not planned (Inline, direct {direct})"),
        Found::Failed(e) => panic!("failed: errno {e}"),
    }
}

#[test]
fn a_planned_request_is_served_from_what_a_thread_read_ahead() {
    let (f, data) = file(6 * REQ);
    let engine = ahead_engine();
    let a = AheadStream::new(&engine).expect("decrypt-ahead threads");
    // The first request is read inline and plans the next two.
    assert!(matches!(a.read(&f, 0, REQ), Found::Inline { direct: true }));
    wait_read_ahead(&a, 2);
    let r = ready(a.read(&f, REQ as u64, REQ));
    assert!(r.bytes() == &data[REQ..2 * REQ], "served bytes differ");
    let s = engine.stats();
    let blocks = (REQ / 4096) as u64;
    assert_eq!((s.ahead_served, s.ahead_inline, s.ahead_stolen), (blocks, 0, 0), "{s}");
    a.recycle(r);
    // The handle goes with two requests read ahead for it: both wasted.
    wait_read_ahead(&a, 2);
    drop(a);
    let wasted = engine.stats().ahead_wasted;
    assert_eq!(
        wasted,
        2 * blocks,
        "what was read ahead for a dropped handle is not counted wasted"
    );
}

#[test]
fn a_result_read_before_a_write_is_never_served() {
    let (f, mut data) = file(6 * REQ);
    let engine = ahead_engine();
    let a = AheadStream::new(&engine).expect("decrypt-ahead threads");
    assert!(matches!(a.read(&f, 0, REQ), Found::Inline { direct: true }));
    wait_read_ahead(&a, 2);
    // Another handle overwrites part of the request read ahead.
    let new = vec![0xeeu8; 5000];
    f.write_at(REQ + 3000, &new);
    data[REQ + 3000..REQ + 8000].copy_from_slice(&new);
    let r = ready(a.read(&f, REQ as u64, REQ));
    assert!(r.bytes() == &data[REQ..2 * REQ], "stale bytes served after a write");
    let s = engine.stats();
    assert_eq!(s.ahead_served, 0, "a stale result counted as served: {s}");
    assert!(s.ahead_wasted >= (REQ / 4096) as u64, "{s}");
    a.recycle(r);
}

#[test]
fn a_read_takes_over_a_chunk_from_a_stalled_thread() {
    let (f, data) = file(4 * REQ);
    // No decrypt-ahead threads (speculation off): only the slot planted
    // below exists, its first chunk held by a "thread" that never ends it.
    let engine = Engine::new(EngineConfig {
        speculation: false,
        read_ahead: 0,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(engine.ahead_threads(), 0);
    let a = AheadStream {
        engine: engine.clone(),
        depth: 2,
        steal_after: Duration::ZERO,
        stream: Arc::default(),
    };
    let stream = a.stream.clone();
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
    let r = ready(a.read(&f, REQ as u64, REQ));
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
    a.recycle(r);
}
