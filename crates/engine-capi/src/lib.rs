//! C ABI of the warpfs keystream engine: the six WAESlib calls
//! (`waes_init`, `waes_setkey`, `waes_ctx`, `waes_encrypt`, `waes_decrypt`,
//! `waes_finish`) plus a few variants; see `include/waes.h` for the C
//! contract. Every call checks its pointers, lengths and ids and answers a
//! negative `WAES_E_*` code on bad input; a panic inside never crosses the
//! boundary (it becomes `WAES_E_INTERNAL`).
//!
//! A context is bound to a key. `waes_ctx` defines it for a nonce and starts
//! its mask in the background at a priority; `waes_encrypt` XORs the mask in
//! when the context already holds that nonce (the speculative path) and
//! otherwise defines it on the spot and makes the mask inline. Encryption
//! and decryption are the same XOR.
//!
//! Mask offsets: the mask of a context starts at its initial counter block
//! (counter 1 for the plain calls, i.e. the warpfs/GCM layout where bytes
//! 0..16 are E(J0) and data starts at offset 16; any counter with the
//! `_ctr` variants). Byte `offset` of the mask is byte `offset % 16` of
//! the keystream block with counter `counter + offset / 16` (mod 2^32).

#![allow(clippy::missing_safety_doc)] // the safety contract of each call is in include/waes.h

use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock};
use warpfs_engine::{Ctx, Defined, Engine, EngineConfig, EngineError, KeyId};

/// Success.
pub const WAES_OK: c_int = 0;
/// A required pointer was NULL.
pub const WAES_E_NULL: c_int = -1;
/// A length is invalid (key not 16/32 bytes, buffer too large).
pub const WAES_E_LEN: c_int = -2;
/// `waes_init` has not been called (or `waes_finish` was).
pub const WAES_E_NOINIT: c_int = -3;
/// Already initialised.
pub const WAES_E_STATE: c_int = -4;
/// Unknown key id.
pub const WAES_E_KEY: c_int = -5;
/// Unknown context id.
pub const WAES_E_CTX: c_int = -6;
/// offset + len reach past the 2^32 counter blocks of one nonce.
pub const WAES_E_RANGE: c_int = -7;
/// Internal failure (worker threads could not start, or a bug).
pub const WAES_E_INTERNAL: c_int = -8;
/// Too many keys or contexts for an `int` id.
pub const WAES_E_LIMIT: c_int = -9;

/// The warpfs layout's initial counter: E(J0) first, data from counter 2.
const DEFAULT_COUNTER: u32 = 1;

struct CCtx {
    ctx: Ctx,
    /// Key and last definition; the lock makes define+apply on one context atomic.
    state: Mutex<(KeyId, Option<Defined>)>,
}

struct State {
    engine: Arc<Engine>,
    keys: RwLock<Vec<KeyId>>,
    ctxs: RwLock<Vec<Arc<CCtx>>>,
}

static STATE: RwLock<Option<Arc<State>>> = RwLock::new(None);

fn guard(f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e,
        Err(_) => WAES_E_INTERNAL,
    }
}

fn state() -> Result<Arc<State>, c_int> {
    STATE
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or(WAES_E_NOINIT)
}

fn engine_err(e: EngineError) -> c_int {
    match e {
        EngineError::KeyLength => WAES_E_LEN,
        EngineError::UnknownKey(_) | EngineError::RetiredKey(_) => WAES_E_KEY,
        EngineError::Redefined => WAES_E_INTERNAL,
        EngineError::OutOfRange => WAES_E_RANGE,
    }
}

impl State {
    fn key(&self, id: c_int) -> Result<KeyId, c_int> {
        let i = usize::try_from(id).map_err(|_| WAES_E_KEY)?;
        self.keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(i)
            .copied()
            .ok_or(WAES_E_KEY)
    }

    fn ctx(&self, id: c_int) -> Result<Arc<CCtx>, c_int> {
        let i = usize::try_from(id).map_err(|_| WAES_E_CTX)?;
        self.ctxs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(i)
            .cloned()
            .ok_or(WAES_E_CTX)
    }
}

/// 12 nonce bytes from a C pointer.
unsafe fn read_nonce(p: *const u8) -> Result<[u8; 12], c_int> {
    if p.is_null() {
        return Err(WAES_E_NULL);
    }
    let mut n = [0u8; 12];
    // SAFETY: the caller promises 12 readable bytes at a non-NULL `p`.
    std::ptr::copy_nonoverlapping(p, n.as_mut_ptr(), 12);
    Ok(n)
}

fn init(cfg: EngineConfig) -> Result<c_int, c_int> {
    let mut g = STATE.write().unwrap_or_else(|e| e.into_inner());
    if g.is_some() {
        return Err(WAES_E_STATE);
    }
    let engine = Engine::new(cfg).map_err(|_| WAES_E_INTERNAL)?;
    *g = Some(Arc::new(State {
        engine,
        keys: RwLock::new(Vec::new()),
        ctxs: RwLock::new(Vec::new()),
    }));
    Ok(WAES_OK)
}

/// Start the engine with `threads` worker threads (<= 0: one per core).
#[no_mangle]
pub extern "C" fn waes_init(threads: c_int) -> c_int {
    guard(|| {
        init(EngineConfig {
            threads: usize::try_from(threads).unwrap_or(0),
            ..EngineConfig::default()
        })
    })
}

/// `waes_init` with the mask length (0: 16 + 4096), speculation on/off and
/// forced software AES.
#[no_mangle]
pub extern "C" fn waes_init_ex(threads: c_int, mask_len: usize, speculation: c_int, software_aes: c_int) -> c_int {
    guard(|| {
        let mut cfg = EngineConfig {
            threads: usize::try_from(threads).unwrap_or(0),
            speculation: speculation != 0,
            software_aes: software_aes != 0,
            ..EngineConfig::default()
        };
        if mask_len > 0 {
            cfg.mask_len = mask_len;
        }
        init(cfg)
    })
}

/// Register a 16- or 32-byte AES key; returns its id (>= 0).
#[no_mangle]
pub unsafe extern "C" fn waes_setkey(key: *const u8, keylen: usize) -> c_int {
    guard(|| {
        if key.is_null() {
            return Err(WAES_E_NULL);
        }
        if keylen != 16 && keylen != 32 {
            return Err(WAES_E_LEN);
        }
        let st = state()?;
        // SAFETY: non-NULL, and the caller promises `keylen` readable bytes.
        let raw = std::slice::from_raw_parts(key, keylen);
        let mut keys = st.keys.write().unwrap_or_else(|e| e.into_inner());
        let id = c_int::try_from(keys.len()).map_err(|_| WAES_E_LIMIT)?;
        keys.push(st.engine.add_raw_key(raw).map_err(engine_err)?);
        Ok(id)
    })
}

fn define(ctx: c_int, key_id: c_int, nonce: Option<[u8; 12]>, counter: u32, priority: c_int) -> Result<c_int, c_int> {
    let st = state()?;
    let key = st.key(key_id)?;
    let (id, c) = if ctx < 0 {
        let c = Arc::new(CCtx {
            ctx: st.engine.context(),
            state: Mutex::new((key, None)),
        });
        let mut ctxs = st.ctxs.write().unwrap_or_else(|e| e.into_inner());
        let id = c_int::try_from(ctxs.len()).map_err(|_| WAES_E_LIMIT)?;
        ctxs.push(c.clone());
        (id, c)
    } else {
        (ctx, st.ctx(ctx)?)
    };
    let mut s = c.state.lock().unwrap_or_else(|e| e.into_inner());
    s.0 = key;
    if let Some(n) = nonce {
        s.1 = Some(
            st.engine
                .define_at(&c.ctx, key, &n, counter, Some(priority))
                .map_err(engine_err)?,
        );
    }
    Ok(id)
}

/// Define a context (create one when `ctx < 0`) for `key_id` and `nonce`
/// (counter 1) and start its mask at `priority` (higher = sooner); a NULL
/// nonce only creates/binds. Returns the context id.
#[no_mangle]
pub unsafe extern "C" fn waes_ctx(ctx: c_int, key_id: c_int, nonce: *const u8, priority: c_int) -> c_int {
    guard(|| {
        let n = if nonce.is_null() {
            None
        } else {
            Some(read_nonce(nonce)?)
        };
        define(ctx, key_id, n, DEFAULT_COUNTER, priority)
    })
}

/// `waes_ctx` with an explicit initial counter (mask offset 0 = that block).
#[no_mangle]
pub unsafe extern "C" fn waes_ctx_ctr(
    ctx: c_int,
    key_id: c_int,
    nonce: *const u8,
    counter: u32,
    priority: c_int,
) -> c_int {
    guard(|| {
        let n = if nonce.is_null() {
            None
        } else {
            Some(read_nonce(nonce)?)
        };
        define(ctx, key_id, n, counter, priority)
    })
}

unsafe fn crypt(
    ctx: c_int,
    nonce: *const u8,
    counter: u32,
    buf: *mut u8,
    len: usize,
    offset: usize,
) -> Result<c_int, c_int> {
    let n = read_nonce(nonce)?;
    if buf.is_null() && len > 0 {
        return Err(WAES_E_NULL);
    }
    if len > isize::MAX as usize {
        return Err(WAES_E_LEN);
    }
    let st = state()?;
    let c = st.ctx(ctx)?;
    let mut s = c.state.lock().unwrap_or_else(|e| e.into_inner());
    if len == 0 {
        return Ok(WAES_OK);
    }
    // SAFETY: non-NULL, len <= isize::MAX, and the caller promises `len`
    // writable bytes that nothing else touches during the call.
    let data = std::slice::from_raw_parts_mut(buf, len);
    let current =
        s.1.filter(|d| d.key() == s.0 && d.nonce() == &n && d.counter() == counter);
    if let Some(d) = current {
        match st.engine.apply(&c.ctx, &d, data, offset) {
            Ok(()) => return Ok(WAES_OK),
            Err(EngineError::Redefined) => {}
            Err(e) => return Err(engine_err(e)),
        }
    }
    let d = st
        .engine
        .define_at(&c.ctx, s.0, &n, counter, None)
        .map_err(engine_err)?;
    s.1 = Some(d);
    st.engine.apply(&c.ctx, &d, data, offset).map_err(engine_err)?;
    Ok(WAES_OK)
}

/// XOR mask bytes `[offset, offset + len)` of (`ctx`'s key, `nonce`,
/// counter 1) into `buf`.
#[no_mangle]
pub unsafe extern "C" fn waes_encrypt(ctx: c_int, nonce: *const u8, buf: *mut u8, len: usize, offset: usize) -> c_int {
    guard(|| crypt(ctx, nonce, DEFAULT_COUNTER, buf, len, offset))
}

/// Same as `waes_encrypt` (CTR is symmetric).
#[no_mangle]
pub unsafe extern "C" fn waes_decrypt(ctx: c_int, nonce: *const u8, buf: *mut u8, len: usize, offset: usize) -> c_int {
    guard(|| crypt(ctx, nonce, DEFAULT_COUNTER, buf, len, offset))
}

/// `waes_encrypt` from initial counter `counter`.
#[no_mangle]
pub unsafe extern "C" fn waes_encrypt_ctr(
    ctx: c_int,
    nonce: *const u8,
    counter: u32,
    buf: *mut u8,
    len: usize,
    offset: usize,
) -> c_int {
    guard(|| crypt(ctx, nonce, counter, buf, len, offset))
}

/// `waes_decrypt` from initial counter `counter`.
#[no_mangle]
pub unsafe extern "C" fn waes_decrypt_ctr(
    ctx: c_int,
    nonce: *const u8,
    counter: u32,
    buf: *mut u8,
    len: usize,
    offset: usize,
) -> c_int {
    guard(|| crypt(ctx, nonce, counter, buf, len, offset))
}

/// Stop the engine: worker threads are joined, keys and contexts freed.
#[no_mangle]
pub extern "C" fn waes_finish() -> c_int {
    guard(|| {
        let st = STATE
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or(WAES_E_NOINIT)?;
        // Calls still running hold their own reference; the workers stop
        // when the last one returns.
        drop(st);
        Ok(WAES_OK)
    })
}

/// Write the engine's counters as NUL-terminated JSON into `out` (`cap`
/// bytes); returns the JSON length without the NUL, so a result >= `cap`
/// means it did not fit (nothing is written then). `out` may be NULL when
/// `cap` is 0.
#[no_mangle]
pub unsafe extern "C" fn waes_stats_json(out: *mut c_char, cap: usize) -> c_int {
    guard(|| {
        if out.is_null() && cap > 0 {
            return Err(WAES_E_NULL);
        }
        let json = state()?.engine.stats().to_json();
        let n = c_int::try_from(json.len()).map_err(|_| WAES_E_LIMIT)?;
        if json.len() < cap {
            // SAFETY: non-NULL with `cap` > len writable bytes (caller's promise).
            std::ptr::copy_nonoverlapping(json.as_ptr(), out.cast::<u8>(), json.len());
            *out.add(json.len()) = 0;
        }
        Ok(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    const K128: &str = "2b7e151628aed2a6abf7158809cf4f3c";
    const NONCE: &str = "f0f1f2f3f4f5f6f7f8f9fafb";
    const PT: &str = "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
    const CT: &str = "874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee";

    // One test: the ABI has process-wide state.
    #[test]
    fn the_six_calls_in_sequence() {
        let key = hex::decode(K128).unwrap();
        let nonce = hex::decode(NONCE).unwrap();
        // SAFETY: every pointer passed is null on purpose or points into a
        // live buffer of the length passed with it.
        unsafe {
            assert_eq!(waes_setkey(key.as_ptr(), 16), WAES_E_NOINIT);
            assert_eq!(waes_finish(), WAES_E_NOINIT);
            assert_eq!(waes_init(2), WAES_OK);
            assert_eq!(waes_init(2), WAES_E_STATE);
            assert_eq!(waes_setkey(null(), 16), WAES_E_NULL);
            assert_eq!(waes_setkey(key.as_ptr(), 24), WAES_E_LEN);
            let k = waes_setkey(key.as_ptr(), 16);
            assert_eq!(k, 0);
            assert_eq!(waes_ctx(-1, 7, nonce.as_ptr(), 0), WAES_E_KEY);
            let c = waes_ctx(-1, k, null(), 0);
            assert_eq!(c, 0);

            // NIST SP 800-38A F.5.1: counter fcfdfeff at offset 0.
            let mut buf = hex::decode(PT).unwrap();
            assert_eq!(
                waes_encrypt_ctr(c, nonce.as_ptr(), 0xfcfd_feff, buf.as_mut_ptr(), 64, 0),
                WAES_OK
            );
            assert_eq!(hex::encode(&buf), CT);
            // Speculative path: define first, then decrypt in two pieces by offset.
            assert_eq!(waes_ctx_ctr(c, k, nonce.as_ptr(), 0xfcfd_feff, 5), c);
            let (a, b) = buf.split_at_mut(20);
            assert_eq!(
                waes_decrypt_ctr(c, nonce.as_ptr(), 0xfcfd_feff, a.as_mut_ptr(), 20, 0),
                WAES_OK
            );
            assert_eq!(
                waes_decrypt_ctr(c, nonce.as_ptr(), 0xfcfd_feff, b.as_mut_ptr(), 44, 20),
                WAES_OK
            );
            assert_eq!(hex::encode(&buf), PT);
            // Counter 1 layout: offset 16 * i is counter 1 + i, so counter
            // fcfdfeff is offset 16 * (0xfcfdfefe).
            let mut far = hex::decode(PT).unwrap();
            assert_eq!(
                waes_encrypt(c, nonce.as_ptr(), far.as_mut_ptr(), 64, 16 * 0xfcfd_fefe),
                WAES_OK
            );
            assert_eq!(hex::encode(&far), CT);
            assert_eq!(
                waes_encrypt(c, nonce.as_ptr(), far.as_mut_ptr(), 64, 16 * 0xffff_fffe),
                WAES_E_RANGE
            );

            // Bad input.
            assert_eq!(waes_encrypt(c, null(), buf.as_mut_ptr(), 4, 0), WAES_E_NULL);
            assert_eq!(waes_encrypt(c, nonce.as_ptr(), null_mut(), 4, 0), WAES_E_NULL);
            assert_eq!(waes_encrypt(c, nonce.as_ptr(), null_mut(), 0, 0), WAES_OK);
            assert_eq!(waes_encrypt(99, nonce.as_ptr(), buf.as_mut_ptr(), 4, 0), WAES_E_CTX);
            assert_eq!(waes_encrypt(-3, nonce.as_ptr(), buf.as_mut_ptr(), 4, 0), WAES_E_CTX);
            assert_eq!(
                waes_encrypt(c, nonce.as_ptr(), buf.as_mut_ptr(), usize::MAX, 0),
                WAES_E_LEN
            );

            let need = waes_stats_json(null_mut(), 0);
            assert!(need > 0);
            let mut out = vec![0 as c_char; need as usize + 1];
            assert_eq!(waes_stats_json(out.as_mut_ptr(), out.len()), need);
            let s = std::ffi::CStr::from_ptr(out.as_ptr()).to_str().unwrap();
            assert!(s.contains("\"applies\""), "{s}");

            assert_eq!(waes_finish(), WAES_OK);
            assert_eq!(waes_encrypt(c, nonce.as_ptr(), buf.as_mut_ptr(), 4, 0), WAES_E_NOINIT);
            // Software AES gives the same answer.
            assert_eq!(waes_init_ex(1, 0, 1, 1), WAES_OK);
            let k = waes_setkey(key.as_ptr(), 16);
            let c = waes_ctx(-1, k, null(), 0);
            let mut buf = hex::decode(PT).unwrap();
            assert_eq!(
                waes_encrypt_ctr(c, nonce.as_ptr(), 0xfcfd_feff, buf.as_mut_ptr(), 64, 0),
                WAES_OK
            );
            assert_eq!(hex::encode(&buf), CT);
            assert_eq!(waes_finish(), WAES_OK);
        }
    }
}
