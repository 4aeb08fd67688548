//! Content modes and the FORMAT.md section 3 layout arithmetic.

use super::{BLOCK, NNODE_DATA, SEGMENT};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Gcm,
    Ctr,
    /// XTS: no nonce entries (E = 0), data right after the 32-byte header.
    Xts,
    /// The same three layouts over Twofish (FORMAT.md 11).
    GcmTwofish,
    CtrTwofish,
    XtsTwofish,
    /// The gcm and ctr layouts over XChaCha20 (FORMAT.md 15).
    XChaCha20Poly1305,
    CtrXChaCha20,
}

impl Mode {
    /// The `content_mode` of the config (`warpfs info` shows it).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Gcm => "gcm",
            Mode::Ctr => "ctr",
            Mode::Xts => "xts",
            Mode::GcmTwofish => "gcm-twofish",
            Mode::CtrTwofish => "ctr-twofish",
            Mode::XtsTwofish => "xts-twofish",
            Mode::XChaCha20Poly1305 => "xchacha20-poly1305",
            Mode::CtrXChaCha20 => "ctr-xchacha20",
        }
    }
    /// The block mode alone (the layout): `Gcm`, `Ctr` or `Xts`.
    pub fn base(self) -> Mode {
        match self {
            Mode::Gcm | Mode::GcmTwofish | Mode::XChaCha20Poly1305 => Mode::Gcm,
            Mode::Ctr | Mode::CtrTwofish | Mode::CtrXChaCha20 => Mode::Ctr,
            Mode::Xts | Mode::XtsTwofish => Mode::Xts,
        }
    }
    /// The `warpfs init` flags that make this mode.
    pub fn init_args(self) -> Vec<&'static str> {
        let mut a = vec!["--mode", self.base().name()];
        if self != self.base() {
            a.extend(["--cipher", self.cipher()]);
        }
        a
    }
    /// The `--cipher` of `warpfs init`: `aes`, `twofish` or `xchacha20`.
    pub fn cipher(self) -> &'static str {
        match self {
            Mode::GcmTwofish | Mode::CtrTwofish | Mode::XtsTwofish => "twofish",
            Mode::XChaCha20Poly1305 | Mode::CtrXChaCha20 => "xchacha20",
            _ => "aes",
        }
    }
    /// The content-mode byte at header offset 6.
    pub fn mode_byte(self) -> u8 {
        match self.base() {
            Mode::Ctr => 1,
            Mode::Gcm => 2,
            _ => 3,
        }
    }
    /// Nonce entry size E.
    pub fn entry_size(self) -> u64 {
        match self.base() {
            Mode::Ctr => 16,
            Mode::Gcm => 32,
            _ => 0,
        }
    }
    /// A raw nonce entry with the file-summary slot (bytes 12..16 of a
    /// gcm entry, FORMAT.md 12) cleared: what format 1 stores there (a
    /// written entry never has an all-zero nonce; a hole's entry is zero).
    pub fn entry_view(self, raw: &[u8]) -> Vec<u8> {
        let mut v = raw.to_vec();
        if self.base() == Mode::Gcm && v.len() == 32 {
            v[12..16].fill(0);
        }
        v
    }
    /// H = 32 + 16·E.
    pub fn header_size(self) -> u64 {
        32 + 16 * self.entry_size()
    }
    /// P = 256·E.
    pub fn page_size(self) -> u64 {
        256 * self.entry_size()
    }
    /// Backing offset of the data of block `b`.
    pub fn block_data_offset(self, b: u64) -> u64 {
        let h = self.header_size();
        if b < 16 {
            h + BLOCK * b
        } else {
            let (k, i) = ((b - 16) / 256, (b - 16) % 256);
            h + NNODE_DATA + k * (self.page_size() + SEGMENT) + self.page_size() + BLOCK * i
        }
    }
    /// Backing offset of the nonce entry of block `b`.
    pub fn block_entry_offset(self, b: u64) -> u64 {
        let h = self.header_size();
        if b < 16 {
            32 + b * self.entry_size()
        } else {
            let (k, i) = ((b - 16) / 256, (b - 16) % 256);
            h + NNODE_DATA + k * (self.page_size() + SEGMENT) + i * self.entry_size()
        }
    }
    /// The plaintext size of a cipher file of backing length `len`
    /// (FORMAT.md 3.4); `None` when corrupt (`0 < len < H`).
    pub fn plain_size(self, len: u64) -> Option<u64> {
        let h = self.header_size();
        if len == 0 {
            return Some(0);
        }
        let r = len.checked_sub(h)?;
        if r <= NNODE_DATA {
            return Some(r);
        }
        let r2 = r - NNODE_DATA;
        let seg = self.page_size() + SEGMENT;
        let (k, q) = (r2 / seg, r2 % seg);
        Some(NNODE_DATA + k * SEGMENT + q.saturating_sub(self.page_size()))
    }
    /// The backing length of a plaintext of `size` bytes (FORMAT.md 3.4).
    pub fn backing_len(self, size: u64) -> u64 {
        let h = self.header_size();
        if size == 0 {
            0
        } else if size <= NNODE_DATA {
            h + size
        } else {
            let rest = size - NNODE_DATA;
            let (k, q) = (rest / SEGMENT, rest % SEGMENT);
            let base = h + NNODE_DATA + k * (self.page_size() + SEGMENT);
            if q == 0 {
                base
            } else {
                base + self.page_size() + q
            }
        }
    }
}
