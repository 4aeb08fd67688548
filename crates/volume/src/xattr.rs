//! Extended attributes: only the `user.` namespace. Names are encrypted
//! deterministically (`user.warpfs.<encrypted>`), values sealed with a random
//! nonce. Other namespaces are refused (EOPNOTSUPP) or reported absent.

use crate::error::{Error, Result};
use crate::volume::Volume;
use std::path::Path;

const USER: &str = "user.";
const BACKING_PREFIX: &str = "user.warpfs.";

impl Volume {
    fn xattr_backing_name(&self, name: &[u8]) -> Result<String> {
        if !name.starts_with(USER.as_bytes()) {
            return Err(Error::ENOTSUP);
        }
        if name.len() > 255 {
            return Err(Error(libc::ERANGE));
        }
        let enc = self
            .naming()
            .names
            .encrypt_xattr_name(name)
            .map_err(|_| Error::EINVAL)?;
        let full = format!("{BACKING_PREFIX}{enc}");
        if full.len() > 255 {
            return Err(Error(libc::ERANGE));
        }
        Ok(full)
    }

    /// setxattr (flags: XATTR_CREATE / XATTR_REPLACE).
    pub fn setxattr(&self, path: &Path, name: &[u8], value: &[u8], flags: i32) -> Result<()> {
        self.writable()?;
        let n = self.xattr_backing_name(name)?;
        let (d, f) = self.at(path)?;
        let p = d.entry(&f);
        let sealed = self.naming().sealer.seal(&self.value_ad(&p, name, true)?, value);
        warpfs_backing::lsetxattr(&p, &n, &sealed, flags)
    }

    /// getxattr.
    pub fn getxattr(&self, path: &Path, name: &[u8]) -> Result<Vec<u8>> {
        let n = match self.xattr_backing_name(name) {
            Ok(n) => n,
            Err(Error(libc::EOPNOTSUPP)) => return Err(Error(libc::ENODATA)),
            Err(e) => return Err(e),
        };
        let (d, f) = self.at(path)?;
        let p = d.entry(&f);
        let sealed = warpfs_backing::lgetxattr(&p, &n)?;
        self.value_ad(&p, name, false)
            .and_then(|ad| self.naming().sealer.open(&ad, &sealed).map_err(|_| Error::EIO))
            .inspect_err(|_| {
                tracing::error!(
                    "corrupt xattr value {} on {} (tampered, or moved from another entry or attribute)",
                    String::from_utf8_lossy(name),
                    path.display()
                );
            })
    }

    /// listxattr: plaintext names, NUL-separated.
    pub fn listxattr(&self, path: &Path) -> Result<Vec<u8>> {
        let (d, f) = self.at(path)?;
        let raw = warpfs_backing::llistxattr(&d.entry(&f))?;
        let mut out = Vec::new();
        for n in raw.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let Some(enc) = n.strip_prefix(BACKING_PREFIX.as_bytes()) else {
                continue;
            };
            let Ok(enc) = std::str::from_utf8(enc) else { continue };
            if let Ok(plain) = self.naming().names.decrypt_xattr_name(enc) {
                out.extend_from_slice(&plain);
                out.push(0);
            }
        }
        Ok(out)
    }

    /// removexattr.
    pub fn removexattr(&self, path: &Path, name: &[u8]) -> Result<()> {
        self.writable()?;
        let n = match self.xattr_backing_name(name) {
            Ok(n) => n,
            Err(Error(libc::EOPNOTSUPP)) => return Err(Error(libc::ENODATA)),
            Err(e) => return Err(e),
        };
        let (d, f) = self.at(path)?;
        warpfs_backing::lremovexattr(&d.entry(&f), &n)
    }
}
