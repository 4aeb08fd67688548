//! Key material in the engine's memory (SECURITY.md "Keys in memory"): the
//! raw keys and Twofish device tables an engine key holds are on locked,
//! non-dumped pages, and no key byte is left in memory the engine frees.
//!
//! This binary's global allocator looks at the blocks key material lives
//! in as they are freed, while a test has armed it: every page-aligned
//! block (all `Locked` and `LockedBuf` allocations, where the engine's and
//! warpfs-crypto's key types keep their keys) and the blocks whose
//! addresses the test saw holding a key (an engine key's raw bytes and
//! device tables, whatever type holds them). It counts those that still
//! hold one of the patterns the test registered (halves of the raw keys,
//! words of their expansions). A key type that stops zeroizing (a plain
//! `Vec` for the raw key, a `Locked` that no longer wipes) leaves its bytes
//! in a freed block and fails the test.
//!
//! Other blocks are not looked at: a struct built on a stack where an AES
//! call had spilled round keys, then moved to the heap whole, carries them
//! in its padding (SECURITY.md: short-lived copies on the stack).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use warpfs_crypto::twofish::Twofish;
use warpfs_crypto::{ContentCipher, ContentKey, XtsCipher, XtsKey, TAG_MASK_LEN};
use warpfs_engine::{Engine, EngineConfig, WritePool};
use warpfs_keystream::Keystream;

/// Patterns looked for, 16 bytes each.
const MAX_PATTERNS: usize = 16;
static PATTERNS: Mutex<[[u8; 16]; MAX_PATTERNS]> = Mutex::new([[0; 16]; MAX_PATTERNS]);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);
/// Freed blocks that held a pattern.
static HITS: AtomicUsize = AtomicUsize::new(0);
/// Blocks seen holding a key (start addresses; 0: free slot).
static BLOCKS: Mutex<[usize; 16]> = Mutex::new([0; 16]);
/// One test at a time: the allocator is the whole binary's.
static SERIAL: Mutex<()> = Mutex::new(());

struct Scanning;

// SAFETY: every call is passed to `System` unchanged; `dealloc` only reads
// the block it is about to free (still allocated, `layout.size()` bytes).
unsafe impl GlobalAlloc for Scanning {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as the caller's contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(Ordering::Acquire) && (forget_block(ptr as usize) || layout.align() >= 4096) {
            // SAFETY: the block is still allocated and `layout.size()` long.
            let block = unsafe { std::slice::from_raw_parts(ptr, layout.size()) };
            if holds_a_pattern(block) {
                HITS.fetch_add(1, Ordering::Relaxed);
            }
        }
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Scanning = Scanning;

/// Whether `addr` starts a block the test saw holding a key; forgets it
/// (the address may be handed out again).
fn forget_block(addr: usize) -> bool {
    let mut b = BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    match b.iter().position(|&a| a == addr) {
        Some(i) => {
            b[i] = 0;
            true
        }
        None => false,
    }
}

/// Look at the block starting at `p` when it is freed.
fn watch_block(p: *const u8) {
    let mut b = BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    let i = b.iter().position(|&a| a == 0);
    // Index outside the lock's scope: a panic must not format (and so
    // free) while it is held.
    let i = i.map(|i| b[i] = p as usize);
    drop(b);
    assert!(i.is_some(), "no free slot");
}

/// Whether `block` contains a registered pattern (no allocation here).
fn holds_a_pattern(block: &[u8]) -> bool {
    let n = COUNT.load(Ordering::Acquire).min(MAX_PATTERNS);
    let pats = *PATTERNS.lock().unwrap_or_else(|e| e.into_inner());
    block.windows(16).any(|w| pats[..n].iter().any(|p| p == w))
}

/// Look for `p` in freed blocks from now on.
fn watch(p: &[u8]) {
    let i = COUNT.load(Ordering::Acquire);
    assert!(i < MAX_PATTERNS);
    PATTERNS.lock().unwrap_or_else(|e| e.into_inner())[i].copy_from_slice(&p[..16]);
    COUNT.store(i + 1, Ordering::Release);
}

/// Watch both halves of a 32-byte key.
fn watch_key(k: &[u8; 32]) {
    watch(&k[..16]);
    watch(&k[16..]);
}

/// Four words as they lie in memory.
fn word_bytes(words: &[u32]) -> [u8; 16] {
    let mut b = [0u8; 16];
    for (d, w) in b.chunks_exact_mut(4).zip(words) {
        d.copy_from_slice(&w.to_ne_bytes());
    }
    b
}

/// Run `f` with the scanner armed (disarmed again even if `f` panics);
/// the freed blocks that held a pattern.
fn armed(f: impl FnOnce()) -> usize {
    struct Disarm;
    impl Drop for Disarm {
        fn drop(&mut self) {
            ARMED.store(false, Ordering::Release);
        }
    }
    HITS.store(0, Ordering::Relaxed);
    ARMED.store(true, Ordering::Release);
    let d = Disarm;
    f();
    drop(d);
    HITS.load(Ordering::Relaxed)
}

/// Reset the patterns (each test registers its own).
fn reset() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    COUNT.store(0, Ordering::Release);
    *BLOCKS.lock().unwrap_or_else(|e| e.into_inner()) = [0; 16];
    g
}

// Keys of the tests: statics, so that no copy of them is freed by the
// test itself.
static AES: [u8; 32] = *b"\x91aes-256 key of the engine test!";
static SOFT: [u8; 32] = *b"\x92software aes key of the test!!!";
static TWOFISH: [u8; 32] = *b"\x93twofish key of the engine test!";
static XCHACHA: [u8; 32] = *b"\x96xchacha20 key of the engine tst";
static XTS: [u8; 64] = *b"\x94xts key: k1 of the gpu tables..\x95xts key: k2, the tweak tables.!";

#[test]
fn the_scanner_sees_key_bytes_left_in_a_freed_block() {
    // The controls: a plain Vec the test saw holding a key, and a
    // page-aligned block, freed unwiped; a Vec nobody registered is not
    // looked at.
    let _g = reset();
    watch_key(&AES);
    let hits = armed(|| {
        let v = std::hint::black_box(AES.to_vec());
        watch_block(v.as_ptr());
        drop(v);
        let layout = Layout::from_size_align(4096, 4096).unwrap();
        // SAFETY: a non-zero size; the block is written within bounds and
        // freed with its own layout.
        unsafe {
            let p = std::alloc::alloc(layout);
            assert!(!p.is_null());
            p.add(100).copy_from_nonoverlapping(AES.as_ptr(), 32);
            // The bytes escape: the copy is not dropped as a dead store.
            std::alloc::dealloc(std::hint::black_box(p), layout);
        }
        drop(std::hint::black_box(AES.to_vec()));
    });
    assert_eq!(hits, 2);
}

#[test]
fn engine_keys_leave_no_key_bytes_in_freed_memory() {
    let _g = reset();
    watch_key(&AES);
    watch_key(&SOFT);
    watch_key(&TWOFISH);
    watch_key(&XCHACHA);
    // Twofish's expanded key: its first table words and its subkeys, as
    // the key schedule and the device tables hold them.
    let dw = Twofish::new(&TWOFISH).unwrap().device_words();
    watch(&word_bytes(&dw[..4]));
    watch(&word_bytes(&dw[4 * 256..4 * 256 + 4]));
    drop(dw);
    // The GPU XTS key table: AES round keys as big-endian words.
    let mut be = [0u32; 4];
    for (w, c) in be.iter_mut().zip(XTS.chunks_exact(4)) {
        *w = u32::from_be_bytes(c.try_into().unwrap());
    }
    watch(&word_bytes(&be));
    let hits = armed(|| {
        for software in [false, true] {
            let e = Engine::new(EngineConfig {
                threads: 1,
                speculation: true,
                pool_size: 64,
                software_aes: software,
                ..EngineConfig::default()
            })
            .unwrap();
            let keys = [
                e.add_raw_key(if software { &SOFT } else { &AES }).unwrap(),
                e.add_raw_key_cipher(XtsCipher::Twofish, &TWOFISH).unwrap(),
                e.add_raw_key_cipher(ContentCipher::XChaCha20, &XCHACHA).unwrap(),
            ];
            for k in keys {
                let c = e.cipher(k).unwrap();
                // XChaCha20 keeps no raw copy (its key is on locked pages).
                if let Some(raw) = c.raw_key() {
                    watch_block(raw.as_ptr());
                }
                if let Some(w) = c.twofish_device_words() {
                    watch_block(w.as_ptr().cast());
                }
                drop(c);
                // An owning pool retires its key once it and its windows
                // are gone: the key is dropped before the engine is.
                let pool = Arc::new(WritePool::owning(e.clone(), k).unwrap());
                let mut b = [7u8; 4096];
                let (n, _) = pool.seal(&mut b);
                let r = pool.clone().reader();
                r.prefetch(&[(0, n)]);
                assert_eq!(r.open(0, &n, &mut b).len(), TAG_MASK_LEN);
                assert_eq!(b, [7u8; 4096]);
                drop(r);
                drop(pool);
            }
            let s = e.stats();
            assert_eq!((s.keys_retired, s.keys_released), (3, 3), "{s}");
            drop(e);
        }
        // The crypto key types an engine is built from.
        drop(ContentKey::new(&AES).unwrap());
        drop(ContentKey::with_cipher(XtsCipher::Twofish, &TWOFISH).unwrap());
        drop(XtsKey::new(XtsCipher::Aes, &XTS).unwrap());
        #[cfg(feature = "gpu")]
        {
            drop(warpfs_engine::gpu::XtsKeys::new(&XTS).unwrap());
            drop(warpfs_engine::gpu::XtsKeys::with_cipher(XtsCipher::Twofish, &XTS).unwrap());
        }
    });
    assert_eq!(hits, 0, "{hits} freed block(s) still held key bytes");
    let left = *BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    assert_eq!(left, [0; 16], "a key's block was never freed");
}

/// Whether the mapping holding `addr` is locked in RAM (`lo`) and left
/// out of core dumps (`dd`), from /proc/self/smaps.
fn locked_and_not_dumped(addr: usize) -> (bool, bool) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                inside = (a..b).contains(&addr);
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                let f: Vec<&str> = flags.split_whitespace().collect();
                return (f.contains(&"lo"), f.contains(&"dd"));
            }
        }
    }
    panic!("no mapping holds {addr:#x}");
}

#[test]
fn raw_keys_and_device_tables_are_on_locked_pages() {
    let _g = reset();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit into a local.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 && lim.rlim_cur < 1 << 20 {
        warpfs_testkit::skip("RLIMIT_MEMLOCK below 1 MiB and not root: mlock is not allowed");
        return;
    }
    let e = Engine::new(EngineConfig {
        speculation: false,
        ..EngineConfig::default()
    })
    .unwrap();
    let aes = e.cipher(e.add_raw_key(&AES).unwrap()).unwrap();
    let tf = e
        .cipher(e.add_raw_key_cipher(XtsCipher::Twofish, &TWOFISH).unwrap())
        .unwrap();
    let places = [
        ("AES raw key", aes.raw_key().unwrap().as_ptr() as usize),
        ("Twofish raw key", tf.raw_key().unwrap().as_ptr() as usize),
        (
            "Twofish device tables",
            tf.twofish_device_words().unwrap().as_ptr() as usize,
        ),
    ];
    for (what, addr) in places {
        assert_eq!(locked_and_not_dumped(addr), (true, true), "{what}");
    }
    // The check itself tells locked pages from others.
    let plain = std::hint::black_box(Box::new([0u8; 64]));
    assert!(!locked_and_not_dumped(plain.as_ptr() as usize).0);
}
