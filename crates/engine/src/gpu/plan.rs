//! How the device backend packs a batch of mask jobs into launches: runs of
//! one block cipher within the context, block and key limits, each key
//! table staged on the lane's locked pages right before its launch, and the
//! launch's output scattered back into the jobs.

use super::device::{Launch, BLOCKS_PER_ITEM, DESC_WORDS, MAX_BLOCKS, MAX_CONTEXTS, MAX_KEYS, TF_WORDS};
use super::tables::{expand_into, RK_WORDS};
use crate::backend::MaskJob;
use crate::MaskCipher;
use warpfs_crypto::LockedWords;

/// Copy a launch's output into its jobs (in launch order, each job's
/// blocks consecutive).
pub(super) fn scatter(jobs: &mut [MaskJob<'_>], bytes: &[u8]) {
    let mut at = 0usize;
    for j in jobs {
        let n = j.out.len();
        j.out.copy_from_slice(&bytes[at..at + n]);
        at += n.div_ceil(16) * 16;
    }
}

/// Whether a job can go to the device at all.
pub(super) fn eligible(j: &MaskJob<'_>) -> bool {
    j.cipher.raw_key().is_some() && j.out.len().div_ceil(16) <= MAX_BLOCKS
}

/// Whether a job's key runs on the Twofish kernel.
fn is_twofish(j: &MaskJob<'_>) -> bool {
    j.cipher.twofish_device_words().is_some()
}

/// One launch before its keys are staged: the jobs it serves, the keys it
/// carries (in slot order) and its descriptors.
pub(super) struct Planned<'k> {
    pub(super) range: std::ops::Range<usize>,
    keys: Vec<&'k MaskCipher>,
    twofish: bool,
    desc: Vec<u32>,
    items: u32,
    blocks: usize,
}

impl Planned<'_> {
    /// Words of this launch's key table.
    fn key_words(&self) -> usize {
        self.keys.len() * if self.twofish { TF_WORDS } else { RK_WORDS }
    }

    /// Write the key table into `staging` (grown when too small: a fresh
    /// locked buffer, the old one zeroed as it is dropped) and describe
    /// the launch. AES keys are expanded in place there, Twofish tables
    /// copied from the key's own locked ones: no copy of the table is made
    /// anywhere else.
    pub(super) fn launch<'s>(&'s self, staging: &'s mut LockedWords) -> Launch<'s> {
        let words = self.key_words();
        if staging.len() < words {
            *staging = LockedWords::zeroed(words.max(TF_WORDS));
        }
        let per = if self.twofish { TF_WORDS } else { RK_WORDS };
        for (k, slot) in self.keys.iter().zip(staging.chunks_exact_mut(per)) {
            match k.twofish_device_words() {
                Some(w) => slot.copy_from_slice(w),
                None => {
                    expand_into(k.raw_key().expect("eligible"), slot).expect("16 or 32 bytes");
                }
            }
        }
        Launch {
            twofish: self.twofish,
            rk: &staging[..words],
            desc: &self.desc,
            ndesc: (self.range.len()) as u32,
            items: self.items,
            blocks: self.blocks,
        }
    }
}

/// Split `jobs` (all eligible) into launches: consecutive ranges of one
/// block cipher within the context, block and key limits.
pub(super) fn plan<'k>(jobs: &[MaskJob<'k>]) -> Vec<Planned<'k>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < jobs.len() {
        let twofish = is_twofish(&jobs[start]);
        let mut keys: Vec<&'k MaskCipher> = Vec::new();
        let mut desc = Vec::new();
        let (mut blocks, mut items) = (0usize, 0usize);
        let mut end = start;
        while end < jobs.len() && end - start < MAX_CONTEXTS {
            let j = &jobs[end];
            let nblk = j.out.len().div_ceil(16);
            let known = keys.iter().position(|&k| std::ptr::eq(k, j.cipher));
            if blocks + nblk > MAX_BLOCKS || (known.is_none() && keys.len() == MAX_KEYS) || is_twofish(j) != twofish {
                break;
            }
            let ki = match known {
                Some(i) => i,
                None => {
                    keys.push(j.cipher);
                    keys.len() - 1
                }
            };
            let rounds = match (twofish, j.cipher.bits()) {
                (true, _) => 16u32,
                (false, 128) => 10,
                (false, _) => 14,
            };
            let n = &j.nonce;
            desc.extend_from_slice(&[
                u32::from_be_bytes([n[0], n[1], n[2], n[3]]),
                u32::from_be_bytes([n[4], n[5], n[6], n[7]]),
                u32::from_be_bytes([n[8], n[9], n[10], n[11]]),
                j.counter,
                nblk as u32,
                blocks as u32,
                (ki as u32) << 8 | rounds,
                items as u32,
            ]);
            blocks += nblk;
            items += nblk.div_ceil(BLOCKS_PER_ITEM);
            end += 1;
        }
        debug_assert_eq!(desc.len(), (end - start) * DESC_WORDS);
        out.push(Planned {
            range: start..end,
            keys,
            twofish,
            desc,
            items: items as u32,
            blocks,
        });
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_respects_context_block_and_key_limits() {
        let keys: Vec<MaskCipher> = (0..MAX_KEYS as u8 + 3)
            .map(|i| MaskCipher::new(&[i; 16], false).unwrap())
            .collect();
        let mut outs: Vec<Vec<u8>> = (0..MAX_KEYS + 3).map(|_| vec![0u8; 33]).collect();
        let jobs: Vec<MaskJob<'_>> = outs
            .iter_mut()
            .zip(&keys)
            .map(|(o, k)| MaskJob {
                cipher: k,
                nonce: [0; 12],
                counter: 0,
                out: &mut o[..],
            })
            .collect();
        let p = plan(&jobs);
        assert_eq!(p.len(), 2, "a new launch once MAX_KEYS keys are in one");
        assert_eq!(p[0].range, 0..MAX_KEYS);
        assert_eq!(p[0].blocks, MAX_KEYS * 3);
        assert_eq!(p[0].items, MAX_KEYS as u32);
        assert_eq!(&p[1].desc[..DESC_WORDS], &[0, 0, 0, 0, 3, 0, 10, 0]);
        let mut staging = LockedWords::zeroed(0);
        let l = p[0].launch(&mut staging);
        assert_eq!((l.rk.len(), l.ndesc), (MAX_KEYS * RK_WORDS, MAX_KEYS as u32));
        for (i, k) in keys[..MAX_KEYS].iter().enumerate() {
            let (w, _) = super::super::tables::expand(k.raw_key().unwrap()).unwrap();
            assert_eq!(&l.rk[i * RK_WORDS..(i + 1) * RK_WORDS], &w[..], "key {i}");
        }
    }

    #[test]
    fn plan_keeps_one_block_cipher_per_launch() {
        let keys = [
            MaskCipher::new(&[1; 16], false).unwrap(),
            MaskCipher::with_cipher(warpfs_crypto::XtsCipher::Twofish, &[1; 16], false).unwrap(),
        ];
        let mut outs: Vec<Vec<u8>> = (0..5).map(|_| vec![0u8; 40]).collect();
        let jobs: Vec<MaskJob<'_>> = outs
            .iter_mut()
            .enumerate()
            .map(|(i, o)| MaskJob {
                cipher: &keys[usize::from(i % 4 >= 2)],
                nonce: [0; 12],
                counter: 0,
                out: &mut o[..],
            })
            .collect();
        let p = plan(&jobs);
        let got: Vec<_> = p.iter().map(|p| (p.range.clone(), p.twofish, p.key_words())).collect();
        assert_eq!(
            got,
            [(0..2, false, RK_WORDS), (2..4, true, TF_WORDS), (4..5, false, RK_WORDS)]
        );
        assert_eq!(&p[1].desc[..DESC_WORDS], &[0, 0, 0, 0, 3, 0, 16, 0]);
        let mut staging = LockedWords::zeroed(0);
        assert_eq!(p[1].launch(&mut staging).rk, keys[1].twofish_device_words().unwrap());
    }
}
