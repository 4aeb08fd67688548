//! Runs of many XTS blocks under one key: handed whole to a device's fused
//! XTS kernels when the cipher has one and the run is long enough
//! (docs/decisions/0093), else spread over the splitter's threads
//! (docs/decisions/0011), else block by block on the caller. Every path
//! gives the same bytes (FORMAT.md 7: tweak file ID ⊕ block number).

use super::Cipher;
use crate::layout::BLOCK_USIZE;
use std::sync::Arc;
use warpfs_keystream::{Splitter, XtsOffload};

/// XTS requests of at least this many bytes are split across the
/// splitter's threads (smaller ones cost less than a cross-CPU wake-up).
pub const XTS_SPLIT_MIN: usize = 64 * 1024;

impl Cipher {
    /// Spread XTS runs of [`XTS_SPLIT_MIN`] bytes or more over `split`'s
    /// threads (the engine's workers), the caller doing a share.
    pub fn with_splitter(mut self, split: Arc<dyn Splitter>) -> Self {
        self.split = split;
        self
    }

    /// Hand the whole 4 KiB blocks of XTS runs of at least
    /// `device.min_bytes()` to `device` (the data crosses to it: plaintext
    /// on writes, ciphertext on reads); a run it declines is done here.
    pub fn with_xts_device(mut self, device: Arc<dyn XtsOffload>) -> Self {
        self.device = Some(device);
        self
    }

    /// The device, when it takes the whole blocks of a run of `len` bytes.
    fn device_for(&self, len: usize) -> Option<&dyn XtsOffload> {
        if cfg!(feature = "bench-nocrypto") || self.xts.is_none() {
            return None;
        }
        let d = self.device.as_deref()?;
        let whole = len / BLOCK_USIZE * BLOCK_USIZE;
        (whole >= d.min_bytes().max(BLOCK_USIZE)).then_some(d)
    }

    /// Blocks per part when `len` bytes of XTS are split: about four parts
    /// per thread (caller included), at least 4 blocks; `None` when the
    /// run is not split.
    fn xts_part_blocks(&self, len: usize) -> Option<usize> {
        let helpers = self.split.helpers();
        if self.xts.is_none() || helpers == 0 || len < XTS_SPLIT_MIN {
            return None;
        }
        let blocks = len.div_ceil(BLOCK_USIZE);
        Some(blocks.div_ceil((helpers + 1) * 4).max(4))
    }

    /// `f(first block, bytes)` over the parts of `buf` (consecutive blocks
    /// from `first`), on the splitter's threads when `buf` is big enough.
    fn xts_parts(&self, first: u64, buf: &mut [u8], f: &(dyn Fn(u64, &mut [u8]) + Sync)) {
        let Some(pb) = self.xts_part_blocks(buf.len()) else {
            return f(first, buf);
        };
        let parts: Vec<std::sync::Mutex<&mut [u8]>> =
            buf.chunks_mut(pb * BLOCK_USIZE).map(std::sync::Mutex::new).collect();
        self.split.run(parts.len(), &|i| {
            let mut p = parts[i].lock().unwrap_or_else(|e| e.into_inner());
            f(first + (i * pb) as u64, &mut p);
        });
    }

    /// Encrypt the blocks of `buf` (block `first` on, each 4096 bytes but a
    /// shorter last one) and write their entries into `ents`; XTS runs go
    /// to the device or the splitter's threads as the module says.
    pub(crate) fn seal_blocks(&self, file_id: &[u8; 16], first: u64, buf: &mut [u8], ents: &mut [u8]) {
        let e = self.mode.entry_len();
        if self.xts.is_some() && e == 0 {
            if let Some(d) = self.device_for(buf.len()) {
                let n = buf.len() / BLOCK_USIZE;
                let (whole, tail) = buf.split_at_mut(n * BLOCK_USIZE);
                if d.crypt(false, BLOCK_USIZE, *file_id, first, whole) {
                    if !tail.is_empty() {
                        self.seal_block(file_id, first + n as u64, tail, &mut []);
                    }
                    return;
                }
            }
            return self.xts_parts(first, buf, &|x0, part| {
                for (i, blk) in part.chunks_mut(BLOCK_USIZE).enumerate() {
                    self.seal_block(file_id, x0 + i as u64, blk, &mut []);
                }
            });
        }
        for (i, blk) in buf.chunks_mut(BLOCK_USIZE).enumerate() {
            self.seal_block(file_id, first + i as u64, blk, &mut ents[i * e..(i + 1) * e]);
        }
    }

    /// Decrypt an XTS run (blocks `first` on, each 4096 bytes but a shorter
    /// last one) in place, as [`seal_blocks`](Self::seal_blocks) would
    /// encrypt it; an all-zero stored 4 KiB block stays zeros (a hole).
    /// Only for `xts` (no entries, nothing to fail).
    pub(crate) fn open_xts_blocks(&self, file_id: &[u8; 16], first: u64, buf: &mut [u8]) {
        debug_assert!(self.xts.is_some());
        let on_demand = self.on_demand();
        if let Some(d) = self.device_for(buf.len()) {
            let n = buf.len() / BLOCK_USIZE;
            let (whole, tail) = buf.split_at_mut(n * BLOCK_USIZE);
            // The kernels decrypt every unit: remember the holes first.
            let holes: Vec<bool> = whole.chunks(BLOCK_USIZE).map(|b| b.iter().all(|&v| v == 0)).collect();
            if holes.contains(&false) && d.crypt(true, BLOCK_USIZE, *file_id, first, whole) {
                for (blk, _) in whole.chunks_mut(BLOCK_USIZE).zip(&holes).filter(|(_, &h)| h) {
                    blk.fill(0);
                }
                if !tail.is_empty() {
                    let _ = self.open_block_quiet(on_demand, file_id, first + n as u64, &[], tail);
                }
                return;
            }
        }
        self.xts_parts(first, buf, &|x0, part| {
            for (i, blk) in part.chunks_mut(BLOCK_USIZE).enumerate() {
                let _ = self.open_block_quiet(on_demand, file_id, x0 + i as u64, &[], blk);
            }
        });
    }

    /// Whether an XTS run of `len` bytes goes as one run (to the device or
    /// split across threads) rather than block by block.
    pub(crate) fn takes_xts_run(&self, len: usize) -> bool {
        self.device_for(len).is_some() || self.xts_part_blocks(len).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use warpfs_crypto::{file_block_tweak, ContentKey, GcmTagger, XtsCipher, XtsKey};
    use warpfs_keystream::Direct;

    fn xts(cipher: XtsCipher) -> (Cipher, XtsKey) {
        let key = ContentKey::new(&[5u8; 32]).unwrap();
        let tagger = GcmTagger::new(&key);
        let x = XtsKey::new(cipher, &[6u8; 64]).unwrap();
        (Cipher::new_xts(x.clone(), Arc::new(Direct::new(key)), tagger), x)
    }

    /// Block-by-block XTS of `buf` (blocks `first` on).
    fn cpu(x: &XtsKey, id: &[u8; 16], first: u64, buf: &mut [u8], dec: bool) {
        for (i, blk) in buf.chunks_mut(BLOCK_USIZE).enumerate() {
            let t = file_block_tweak(id, first + i as u64);
            if dec {
                x.decrypt_unit(&t, blk);
            } else {
                x.encrypt_unit(&t, blk);
            }
        }
    }

    /// A splitter that runs parts on fresh threads (in reverse, so parts
    /// finish out of order) and counts the requests it got.
    struct Threads(AtomicUsize);

    impl Splitter for Threads {
        fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
            self.0.fetch_add(1, Relaxed);
            std::thread::scope(|s| {
                for i in (0..parts).rev() {
                    s.spawn(move || f(i));
                }
            });
        }
        fn helpers(&self) -> usize {
            2
        }
    }

    #[test]
    fn split_xts_runs_equal_block_by_block_xts() {
        for cipher in [XtsCipher::Aes, XtsCipher::Twofish] {
            let (c, x) = xts(cipher);
            let t = Arc::new(Threads(Default::default()));
            let c = c.with_splitter(t.clone());
            let id = [9u8; 16];
            // Below the threshold, exactly at it, many parts, a short last block.
            for (len, split) in [
                (60 * 1024, false),
                (64 * 1024, true),
                (1 << 20, true),
                (300 * 1024 + 123, true),
            ] {
                assert_eq!(c.takes_xts_run(len), split, "{len}");
                let before = t.0.load(Relaxed);
                let pt: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut buf = pt.clone();
                c.seal_blocks(&id, 3, &mut buf, &mut []);
                let mut want = pt.clone();
                cpu(&x, &id, 3, &mut want, false);
                assert!(buf == want, "{cipher:?} {len}: split encryption differs");
                c.open_xts_blocks(&id, 3, &mut buf);
                assert!(buf == pt, "{cipher:?} {len}: split decryption differs");
                let after = t.0.load(Relaxed);
                assert_eq!(after - before, if split { 2 } else { 0 }, "{len}");
            }
        }
    }

    /// A stand-in device: XTS on the CPU under its own copy of the key, by
    /// the offload contract (tweak `base` XOR unit number); it counts the
    /// runs and bytes it took, and declines every run when `decline` is
    /// set, scribbling over nothing.
    struct FakeDevice {
        key: XtsKey,
        decline: bool,
        runs: AtomicUsize,
        bytes: AtomicUsize,
    }

    impl XtsOffload for FakeDevice {
        fn min_bytes(&self) -> usize {
            128 * 1024
        }
        fn crypt(&self, decrypt: bool, unit: usize, base: [u8; 16], first: u64, data: &mut [u8]) -> bool {
            assert_eq!(unit, BLOCK_USIZE);
            assert_eq!(data.len() % unit, 0, "only whole units reach the device");
            if self.decline {
                return false;
            }
            self.runs.fetch_add(1, Relaxed);
            self.bytes.fetch_add(data.len(), Relaxed);
            for (k, u) in data.chunks_mut(unit).enumerate() {
                let t = (u128::from_le_bytes(base) ^ u128::from(first + k as u64)).to_le_bytes();
                if decrypt {
                    self.key.decrypt_unit(&t, u);
                } else {
                    self.key.encrypt_unit(&t, u);
                }
            }
            true
        }
    }

    #[test]
    fn long_runs_go_to_the_device_whole_and_equal_the_cpu() {
        for cipher in [XtsCipher::Aes, XtsCipher::Twofish] {
            for decline in [false, true] {
                let (c, x) = xts(cipher);
                let dev = Arc::new(FakeDevice {
                    key: x.clone(),
                    decline,
                    runs: AtomicUsize::new(0),
                    bytes: AtomicUsize::new(0),
                });
                let c = c.with_xts_device(dev.clone());
                let id = [0xa7u8; 16];
                // Below the threshold; at it; a short last block (on the
                // CPU); whole blocks at the threshold with a short tail.
                for (len, device) in [
                    (128 * 1024 - 4096, false),
                    (128 * 1024, true),
                    (1 << 20, true),
                    (128 * 1024 + 100, true),
                    (128 * 1024 - 1, false),
                ] {
                    assert_eq!(c.takes_xts_run(len), device, "{len}");
                    let (runs, bytes) = (dev.runs.load(Relaxed), dev.bytes.load(Relaxed));
                    let pt: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
                    let mut buf = pt.clone();
                    c.seal_blocks(&id, 5, &mut buf, &mut []);
                    let mut want = pt.clone();
                    cpu(&x, &id, 5, &mut want, false);
                    assert!(buf == want, "{cipher:?} {len}: encryption differs from the cpu");
                    // A hole (an all-zero stored block) in the run.
                    buf[4096..8192].fill(0);
                    c.open_xts_blocks(&id, 5, &mut buf);
                    let mut want = pt.clone();
                    want[4096..8192].fill(0);
                    assert!(
                        buf == want,
                        "{cipher:?} {len}: decryption differs (or a hole did not read as zeros)"
                    );
                    let took = device && !decline;
                    let whole = len / BLOCK_USIZE * BLOCK_USIZE;
                    assert_eq!(dev.runs.load(Relaxed) - runs, if took { 2 } else { 0 }, "{len}");
                    assert_eq!(
                        dev.bytes.load(Relaxed) - bytes,
                        if took { 2 * whole } else { 0 },
                        "{len}"
                    );
                }
            }
        }
    }
}
