//! The container image (FORMAT.md 9): a 64 KiB header holding the config
//! (wrapped master key), then 4 KiB XTS-AES sectors with the sector number
//! as tweak. An all-zero stored sector reads as zeros (sparse, TRIM).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::{Arc, RwLock};
use warpfs_config::{Config, ContentMode, KdfParams};
use warpfs_crypto::keys::Subkeys;
use warpfs_crypto::{MasterKey, XtsCipher, XtsKey};
use warpfs_keystream::XtsOffload;

/// Header magic.
pub const MAGIC: &[u8; 8] = b"WRPFCTNR";
/// Container header version.
pub const VERSION: u32 = 1;
/// Header length: sector 0 starts here.
pub const HEADER: u64 = 65536;
/// Sector size.
pub const SECTOR: u64 = 4096;
const SECTOR_USIZE: usize = SECTOR as usize;

/// An unlocked container image.
pub struct Image {
    file: File,
    key: XtsKey,
    /// Where requests of many sectors run whole (`--engine opencl|cuda`:
    /// a GPU's fused XTS kernels), if anywhere.
    device: Option<Arc<dyn XtsOffload>>,
    /// Serialises read–modify–write of partial sectors against readers.
    lock: RwLock<()>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image").finish_non_exhaustive()
    }
}

fn tweak(sector: u64) -> [u8; 16] {
    (sector as u128).to_le_bytes()
}

/// Parse a size like `64M`, `10G`, `512K` or `1048576` (bytes; binary
/// units); it must be a positive multiple of 4096.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("bad size '{s}' (use a number with K, M, G or T)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    let size = n.checked_mul(mul).ok_or_else(|| format!("size '{s}' is too large"))?;
    if size == 0 || !size.is_multiple_of(SECTOR) || size > (1 << 60) {
        return Err(format!("size '{s}' must be a positive multiple of 4096 bytes"));
    }
    Ok(size)
}

/// Read and check the header; returns the config.
pub fn read_header(file: &File) -> Result<Config, String> {
    let mut h = vec![0u8; 16];
    file.read_exact_at(&mut h, 0)
        .map_err(|e| format!("not a warpfs container (cannot read the header: {e})"))?;
    if &h[..8] != MAGIC {
        return Err("not a warpfs container (bad magic)".into());
    }
    let version = u32::from_le_bytes(h[8..12].try_into().unwrap());
    if version != VERSION {
        return Err(format!(
            "container version {version} is not supported (this warpfs reads {VERSION})"
        ));
    }
    let n = u32::from_le_bytes(h[12..16].try_into().unwrap()) as u64;
    if n == 0 || n > HEADER - 16 {
        return Err("corrupt container header (config length)".into());
    }
    let mut json = vec![0u8; n as usize];
    file.read_exact_at(&mut json, 16)
        .map_err(|e| format!("corrupt container header: {e}"))?;
    let cfg = Config::from_json(&json).map_err(|e| e.to_string())?;
    if cfg.content_mode() != ContentMode::Xts {
        return Err("corrupt container header (content mode is not xts)".into());
    }
    Ok(cfg)
}

/// Create a new image of `size` bytes (sparse) at `path` (must not exist).
pub fn create(path: &Path, password: &[u8], size: u64, kdf: KdfParams) -> Result<MasterKey, String> {
    let (cfg, master) = Config::new_detached(password, ContentMode::Xts, 256, kdf).map_err(|e| e.to_string())?;
    let json = cfg.to_json();
    let mut h = vec![0u8; HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(json.len() as u32).to_le_bytes());
    h[16..16 + json.len()].copy_from_slice(json.as_bytes());
    let f = warpfs_backing::host::open_with(path, std::fs::OpenOptions::new().write(true).create_new(true))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let r = (|| {
        f.write_all_at(&h, 0)?;
        f.set_len(HEADER + size)?;
        f.sync_all()
    })();
    if let Err(e) = r {
        let _ = warpfs_backing::host::remove_file(path);
        return Err(format!("{}: {e}", path.display()));
    }
    Ok(master)
}

impl Image {
    /// Open `file` (read-write) with the master key unwrapped from `cfg`.
    pub fn new(file: File, cfg: &Config, master: &MasterKey) -> Result<Image, String> {
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        if len < HEADER || !(len - HEADER).is_multiple_of(SECTOR) {
            return Err(format!(
                "corrupt container: length {len} is not 64 KiB + a multiple of 4096"
            ));
        }
        Ok(Image {
            file,
            key: Subkeys::xts_key(master, cfg.key_bits(), XtsCipher::Aes),
            device: None,
            lock: RwLock::new(()),
        })
    }

    /// Plaintext size in bytes.
    pub fn size(&self) -> u64 {
        self.file
            .metadata()
            .map(|m| m.len().saturating_sub(HEADER))
            .unwrap_or(0)
    }

    /// Run requests of at least `device.min_bytes()` on `device` (its
    /// handle for this image's XTS key); one it declines runs on the CPU.
    pub fn use_xts_device(&mut self, device: Arc<dyn XtsOffload>) {
        self.device = Some(device);
    }

    /// The device, when it takes a request of `len` bytes.
    fn device_for(&self, len: usize) -> Option<&dyn XtsOffload> {
        self.device.as_deref().filter(|d| len >= d.min_bytes())
    }

    /// Read sectors `[first, first + buf.len()/4096)` into `buf` and decrypt.
    fn read_sectors(&self, first: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.read_exact_at(buf, HEADER + first * SECTOR)?;
        if let Some(d) = self.device_for(buf.len()) {
            // The kernels decrypt every sector: remember the zero ones.
            let zero: Vec<bool> = buf.chunks(SECTOR_USIZE).map(|s| s.iter().all(|&b| b == 0)).collect();
            if zero.contains(&false) && d.crypt(true, SECTOR_USIZE, [0; 16], first, buf) {
                for (s, _) in buf.chunks_mut(SECTOR_USIZE).zip(&zero).filter(|(_, &z)| z) {
                    s.fill(0);
                }
                return Ok(());
            }
        }
        for (i, s) in buf.chunks_mut(SECTOR_USIZE).enumerate() {
            if s.iter().any(|&b| b != 0) {
                self.key.decrypt_unit(&tweak(first + i as u64), s);
            }
        }
        Ok(())
    }

    /// Read up to `buf.len()` bytes at `off`; short at the end.
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let _g = self.lock.read().unwrap_or_else(|e| e.into_inner());
        let size = self.size();
        if off >= size {
            return Ok(0);
        }
        let end = (off + buf.len() as u64).min(size);
        let (first, last) = (off / SECTOR, end.div_ceil(SECTOR));
        let mut tmp = vec![0u8; ((last - first) * SECTOR) as usize];
        self.read_sectors(first, &mut tmp)?;
        let s = (off - first * SECTOR) as usize;
        let n = (end - off) as usize;
        buf[..n].copy_from_slice(&tmp[s..s + n]);
        Ok(n)
    }

    /// Write `data` at `off` (must lie inside the size).
    pub fn write_at(&self, off: u64, data: &[u8]) -> std::io::Result<()> {
        let _g = self.lock.write().unwrap_or_else(|e| e.into_inner());
        let end = off + data.len() as u64;
        if end > self.size() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let (first, last) = (off / SECTOR, end.div_ceil(SECTOR));
        let mut tmp = vec![0u8; ((last - first) * SECTOR) as usize];
        let s = (off - first * SECTOR) as usize;
        // Old content of partially written first and last sectors.
        if s != 0 {
            self.read_sectors(first, &mut tmp[..SECTOR_USIZE])?;
        }
        if !end.is_multiple_of(SECTOR) && (last - 1 != first || s == 0) {
            let t = tmp.len() - SECTOR_USIZE;
            self.read_sectors(last - 1, &mut tmp[t..])?;
        }
        tmp[s..s + data.len()].copy_from_slice(data);
        let on_device = self
            .device_for(tmp.len())
            .is_some_and(|d| d.crypt(false, SECTOR_USIZE, [0; 16], first, &mut tmp));
        if !on_device {
            for (i, sec) in tmp.chunks_mut(SECTOR_USIZE).enumerate() {
                self.key.encrypt_unit(&tweak(first + i as u64), sec);
            }
        }
        self.file.write_all_at(&tmp, HEADER + first * SECTOR)
    }

    /// Zero `[off, off + len)`: whole sectors are punched out of the image
    /// (they read as zeros), partial ones rewritten.
    pub fn punch(&self, off: u64, len: u64) -> std::io::Result<()> {
        let size = self.size();
        let end = off.saturating_add(len).min(size);
        if off >= end {
            return Ok(());
        }
        let full_first = off.div_ceil(SECTOR);
        let full_end = end / SECTOR;
        if full_first < full_end {
            let _g = self.lock.write().unwrap_or_else(|e| e.into_inner());
            // SAFETY: plain fallocate on an owned fd.
            let r = unsafe {
                libc::fallocate(
                    self.file.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    (HEADER + full_first * SECTOR) as libc::off_t,
                    ((full_end - full_first) * SECTOR) as libc::off_t,
                )
            };
            if r != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        let zeros = |a: u64, b: u64| -> std::io::Result<()> {
            if a < b {
                self.write_at(a, &vec![0u8; (b - a) as usize])?;
            }
            Ok(())
        };
        if full_first >= full_end {
            return zeros(off, end);
        }
        zeros(off, full_first * SECTOR)?;
        zeros(full_end * SECTOR, end)
    }

    /// Flush to stable storage.
    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> KdfParams {
        KdfParams {
            memory_kib: 32768,
            iterations: 2,
            parallelism: 1,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("10G").unwrap(), 10 << 30);
        assert_eq!(parse_size("8k").unwrap(), 8192);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        for bad in ["", "0", "100", "5X", "-4K", "99999999999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn round_trip_sectors_tweaks_and_punch() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("img");
        let master = create(&p, b"pw", 64 * 4096, fast()).unwrap();
        let f = std::fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();
        let cfg = read_header(&f).unwrap();
        assert_eq!(cfg.unlock(b"pw").unwrap(), master);
        let img = Image::new(f, &cfg, &master).unwrap();
        assert_eq!(img.size(), 64 * 4096);
        let mut b = vec![1u8; 10000];
        assert_eq!(img.read_at(100, &mut b).unwrap(), 10000);
        assert!(b.iter().all(|&x| x == 0));
        let data: Vec<u8> = (0..10000u32).map(|i| (i % 251) as u8).collect();
        img.write_at(4000, &data).unwrap();
        img.write_at(5, b"xy").unwrap();
        let mut back = vec![0u8; 10000];
        img.read_at(4000, &mut back).unwrap();
        assert_eq!(back, data);
        // The stored sector 1 is XTS-AES-256 with tweak 1 (u128 LE).
        let raw_f = std::fs::File::open(&p).unwrap();
        let mut raw = vec![0u8; 4096];
        raw_f.read_exact_at(&mut raw, HEADER + 4096).unwrap();
        img.key.decrypt_unit(&tweak(1), &mut raw);
        assert_eq!(&raw[..], &data[96..96 + 4096]);
        // Punch: full sectors become zero on disk, partial ones rewritten.
        img.punch(4000, 10000).unwrap();
        let mut z = vec![1u8; 20000];
        img.read_at(0, &mut z).unwrap();
        assert_eq!(&z[5..7], b"xy");
        assert!(z[4000..14000].iter().all(|&x| x == 0));
        raw_f.read_exact_at(&mut raw, HEADER + 4096).unwrap();
        assert!(raw.iter().all(|&x| x == 0));
        // Writing past the end is ENOSPC.
        assert!(img.write_at(64 * 4096 - 1, b"ab").is_err());
    }

    #[test]
    fn bad_headers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, vec![0u8; 70000]).unwrap();
        assert!(read_header(&std::fs::File::open(&p).unwrap())
            .unwrap_err()
            .contains("magic"));
        std::fs::write(&p, b"WRPF").unwrap();
        assert!(read_header(&std::fs::File::open(&p).unwrap()).is_err());
        let mut h = vec![0u8; 70000];
        h[..8].copy_from_slice(MAGIC);
        h[8] = 1;
        h[12..16].copy_from_slice(&60000u32.to_le_bytes());
        std::fs::write(&p, &h).unwrap();
        assert!(read_header(&std::fs::File::open(&p).unwrap()).is_err());
    }
}
