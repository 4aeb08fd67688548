//! Where passwords come from: `--passfile F` (first line), `--extpass CMD`
//! (first line of its output), or the terminal; with `--keyfile F` the
//! secret is the password combined with the keyfile's bytes (or the
//! keyfile alone with `--keyfile-only`). The secret says which kind of
//! keyslot it opens, and is kept on locked pages, zeroed on drop.

use super::exit::{CliError, ERROR};
use super::setuid::User;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use warpfs_config::{Input, SlotKind};

/// A password source chosen on the command line.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// Read the first line of this file.
    pub passfile: Option<PathBuf>,
    /// Run this shell command and read the first line it prints.
    pub extpass: Option<String>,
    /// Combine the password with this file's bytes.
    pub keyfile: Option<PathBuf>,
    /// No password: the keyfile alone.
    pub keyfile_only: bool,
}

/// Bytes read on the way to a secret, wiped from memory when dropped.
struct Raw(Vec<u8>);

impl Drop for Raw {
    fn drop(&mut self) {
        // The whole allocation, spare capacity included (a passfile's
        // second line, cut off by `first_line`, stays there otherwise).
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// A secret (a password, a keyfile's combination, or both) on locked
/// pages, zeroed when dropped, and the kind of keyslot it opens.
pub struct Password {
    bytes: warpfs_crypto::LockedBytes,
    kind: SlotKind,
}

impl Password {
    fn new(raw: Raw, kind: SlotKind) -> Self {
        Password {
            bytes: warpfs_crypto::LockedBytes::from_slice(&raw.0),
            kind,
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The kind of keyslot this secret opens.
    pub fn kind(&self) -> SlotKind {
        self.kind
    }

    /// The secret as keyslot input.
    pub fn input(&self) -> Input<'_> {
        Input::Secret {
            bytes: self.bytes(),
            kind: Some(self.kind),
        }
    }
}

fn first_line(mut data: Vec<u8>) -> Vec<u8> {
    if let Some(i) = data.iter().position(|&b| b == b'\n') {
        data.truncate(i);
    }
    if data.last() == Some(&b'\r') {
        data.pop();
    }
    data
}

impl Source {
    /// Get the password; `prompt` is shown on the terminal; `confirm` asks twice.
    pub fn read(&self, prompt: &str, confirm: bool) -> Result<Password, CliError> {
        self.read_as(prompt, confirm, None)
    }

    /// [`Source::read`], with the extpass command run as `user`
    /// (`mount -o setuid=USER`).
    pub fn read_as(&self, prompt: &str, confirm: bool, user: Option<&User>) -> Result<Password, CliError> {
        let pw = if self.keyfile_only {
            Raw(Vec::new())
        } else {
            self.read_password(prompt, confirm, user)?
        };
        let Some(kf) = &self.keyfile else {
            return Ok(Password::new(pw, SlotKind::Password));
        };
        let data = read_keyfile(kf)?;
        let secret = warpfs_crypto::kdf::combine_keyfile(&pw.0, &data.0);
        let kind = if self.keyfile_only {
            SlotKind::Keyfile
        } else {
            SlotKind::PasswordKeyfile
        };
        Ok(Password::new(Raw(secret.to_vec()), kind))
    }

    /// The kind of keyslot the secret read from this source opens.
    pub fn kind(&self) -> SlotKind {
        match (&self.keyfile, self.keyfile_only) {
            (None, _) => SlotKind::Password,
            (Some(_), true) => SlotKind::Keyfile,
            (Some(_), false) => SlotKind::PasswordKeyfile,
        }
    }

    fn read_password(&self, prompt: &str, confirm: bool, user: Option<&User>) -> Result<Raw, CliError> {
        let pw = if let Some(f) = &self.passfile {
            let data = read_passfile(f)
                .map_err(|e| CliError::new(ERROR, format!("cannot read passfile {}: {e}", f.display())))?;
            Raw(first_line(data))
        } else if let Some(cmd) = &self.extpass {
            let mut sh = Command::new("/bin/sh");
            if let Some(u) = user {
                u.apply(&mut sh);
            }
            let out = sh
                .arg("-c")
                .arg(cmd)
                .stdin(Stdio::inherit())
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| CliError::new(ERROR, format!("cannot run extpass command: {e}")))?;
            if !out.status.success() {
                return Err(CliError::new(ERROR, format!("extpass command failed ({})", out.status)));
            }
            let stdout = Raw(out.stdout);
            let mut r = BufReader::new(&stdout.0[..]);
            let mut line = Raw(Vec::new());
            r.read_until(b'\n', &mut line.0)
                .map_err(|e| CliError::new(ERROR, e.to_string()))?;
            Raw(first_line(std::mem::take(&mut line.0)))
        } else {
            let a = zeroize::Zeroizing::new(
                rpassword::prompt_password(prompt)
                    .map_err(|e| CliError::new(ERROR, format!("cannot read password from the terminal: {e}")))?,
            );
            if confirm {
                // The repeated password is wiped like the first.
                let b = zeroize::Zeroizing::new(
                    rpassword::prompt_password("Repeat: ").map_err(|e| CliError::new(ERROR, e.to_string()))?,
                );
                if *a != *b {
                    return Err(CliError::new(ERROR, "passwords do not match"));
                }
            }
            Raw(a.as_bytes().to_vec())
        };
        if pw.0.is_empty() {
            return Err(CliError::new(ERROR, "empty password"));
        }
        Ok(pw)
    }
}

/// The bytes of a passfile. `/dev/stdin`, `/dev/fd/N` and `/proc/self/fd/N`
/// are read from the descriptor itself: a non-dumpable process (every
/// command that handles a key is one) may not open its own /proc/self/fd
/// entries unless it runs as root.
fn read_passfile(f: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd};
    let s = f.to_string_lossy();
    let fd = if s == "/dev/stdin" {
        Some(std::io::stdin().as_raw_fd())
    } else {
        s.strip_prefix("/dev/fd/")
            .or_else(|| s.strip_prefix("/proc/self/fd/"))
            .and_then(|n| n.parse::<i32>().ok())
    };
    let Some(fd) = fd else {
        return warpfs_backing::host::read(f);
    };
    // SAFETY: dup of a descriptor we were given; the File owns the copy.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `dup` is a new descriptor owned by nobody else.
    let mut file = unsafe { std::fs::File::from_raw_fd(dup) };
    let mut data = Vec::new();
    file.read_to_end(&mut data)?;
    Ok(data)
}

/// A keyfile's bytes (wiped on drop): 1 byte to 1 MiB.
fn read_keyfile(path: &std::path::Path) -> Result<Raw, CliError> {
    use std::io::Read;
    let max = warpfs_crypto::kdf::MAX_KEYFILE_LEN;
    let f = warpfs_backing::host::open(path)
        .map_err(|e| CliError::new(ERROR, format!("cannot read keyfile {}: {e}", path.display())))?;
    let mut data = Vec::new();
    f.take(max as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| CliError::new(ERROR, format!("cannot read keyfile {}: {e}", path.display())))?;
    let data = Raw(data);
    if data.0.is_empty() || data.0.len() > max {
        return Err(CliError::new(
            ERROR,
            format!("keyfile {} must hold 1 byte to 1 MiB", path.display()),
        ));
    }
    Ok(data)
}

impl std::ops::Deref for Password {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passfile_first_line_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pw");
        std::fs::write(&p, "secret\r\nsecond line\n").unwrap();
        let s = Source {
            passfile: Some(p),
            extpass: None,
            ..Default::default()
        };
        let pw = s.read("", false).unwrap();
        assert_eq!(pw.bytes(), b"secret");
        assert_eq!(pw.kind(), SlotKind::Password);
    }

    #[test]
    fn a_keyfile_makes_another_kind_of_secret() {
        let d = tempfile::tempdir().unwrap();
        let (p, k) = (d.path().join("pw"), d.path().join("key"));
        std::fs::write(&p, "secret\n").unwrap();
        std::fs::write(&k, [7u8; 32]).unwrap();
        let both = Source {
            passfile: Some(p),
            keyfile: Some(k.clone()),
            ..Default::default()
        };
        let only = Source {
            keyfile: Some(k),
            keyfile_only: true,
            ..Default::default()
        };
        let (b, o) = (both.read("", false).unwrap(), only.read("", false).unwrap());
        assert_eq!((b.kind(), o.kind()), (SlotKind::PasswordKeyfile, SlotKind::Keyfile));
        assert_eq!((both.kind(), only.kind()), (b.kind(), o.kind()));
        assert_eq!(&b[..], &warpfs_crypto::kdf::combine_keyfile(b"secret", &[7; 32])[..]);
        assert_eq!(&o[..], &warpfs_crypto::kdf::combine_keyfile(b"", &[7; 32])[..]);
    }

    #[test]
    fn extpass_output_is_used_and_failure_reported() {
        let s = Source {
            passfile: None,
            extpass: Some("echo hunter2".into()),
            ..Default::default()
        };
        assert_eq!(s.read("", false).unwrap().bytes(), b"hunter2");
        let bad = Source {
            passfile: None,
            extpass: Some("exit 3".into()),
            ..Default::default()
        };
        assert!(bad.read("", false).is_err());
    }

    #[test]
    fn empty_password_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pw");
        std::fs::write(&p, "\n").unwrap();
        assert!(Source {
            passfile: Some(p),
            extpass: None,
            ..Default::default()
        }
        .read("", false)
        .is_err());
    }
}
