//! Versions seen (FORMAT.md 16, docs/decisions/0099): what this host's
//! mounts saw of a volume, kept outside CIPHERDIR, so that a config or a
//! whole file put back after the host saw it replaced is refused. A
//! version the host never saw is taken as new: another host's changes and
//! a sync tool's conflict winners never raise an alarm.

mod retire;
mod store;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use store::{State, Unreadable, MAX_CONFIGS, MAX_VERSIONS};
use warpfs_backing::host;
use warpfs_config::KeyState;
use warpfs_content::summary::Record;
use warpfs_crypto::keys::MasterKey;
use warpfs_crypto::SeenKey;

/// How often, at most, a mount writes the state while versions change.
const FLUSH_EVERY: Duration = Duration::from_secs(10);

/// The state directory used with `--versions-seen on`:
/// `$WARPFS_STATE_DIR`, else (root) `/var/lib/warpfs/seen`, else
/// `$XDG_STATE_HOME/warpfs/seen`, else `~/.local/state/warpfs/seen`.
pub fn default_dir() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("WARPFS_STATE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if warpfs_backing::euid() == 0 {
        return Ok(PathBuf::from("/var/lib/warpfs/seen"));
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| Path::new(d).is_absolute()) {
        return Ok(Path::new(&d).join("warpfs").join("seen"));
    }
    match std::env::var_os("HOME").filter(|d| Path::new(d).is_absolute()) {
        Some(h) => Ok(Path::new(&h).join(".local/state/warpfs/seen")),
        None => Err("no state directory: set WARPFS_STATE_DIR or HOME, or name one with --versions-seen DIR".into()),
    }
}

/// The state file of the volume at (canonical) `cipherdir` in `dir`.
pub fn state_path(dir: &Path, cipherdir: &Path) -> PathBuf {
    use sha2::Digest;
    let h = sha2::Sha256::digest(cipherdir.as_os_str().as_encoded_bytes());
    let name: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{name}.state"))
}

/// SHA-256 of a config's bytes, as the state names it.
pub fn config_digest(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

struct Inner {
    st: State,
    dirty: bool,
    last_flush: Instant,
}

/// The versions seen of one volume on this host, shared by every open
/// file of a mount (as its [`warpfs_content::Witness`]).
pub struct Seen {
    key: SeenKey,
    path: PathBuf,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seen").field("path", &self.path).finish_non_exhaustive()
    }
}

fn tag8(rec: &Record) -> [u8; 8] {
    rec.tag[..8].try_into().expect("8 of 16 bytes")
}

impl Seen {
    /// Load (or start) the state of the volume at canonical `cipherdir`,
    /// whose volume key is `master`, in `dir` (created 0700 if missing).
    pub fn open(dir: &Path, cipherdir: &Path, master: &MasterKey) -> Result<Seen, String> {
        let key = SeenKey::derive(master);
        host::create_private_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = state_path(dir, cipherdir);
        let st = load(&path, &key)?;
        Ok(Seen {
            key,
            path,
            inner: Mutex::new(Inner {
                st,
                dirty: false,
                last_flush: Instant::now(),
            }),
        })
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Check the config a mount is about to use (its key state, authenticated
    /// by its unlock, and the digest of its bytes; `None` for a config the
    /// user named with `--config`) against what this host saw: a key state
    /// below the highest seen, or a config a command on this host replaced
    /// ([`Seen::config_replaced`]), is refused. Then the highest key state
    /// is raised and the state written. A config merely seen replaced (a
    /// sync tool may show one version, then another, then the first while
    /// it settles a conflict) is never refused.
    pub fn check_config(&self, ks: KeyState, digest: Option<[u8; 32]>) -> Result<(), String> {
        let mut g = self.inner();
        if let Some(f) = g.st.floor {
            if (ks.generation, ks.rekey_under_way) < (f.generation, f.rekey_under_way) {
                return Err(format!(
                    "the config is older than the one this host last used: its {ks}, \
                     where this host saw {f}: an older copy was put back"
                ));
            }
        }
        if digest.is_some_and(|d| g.st.configs.contains(&d)) {
            return Err(format!(
                "warpfs.conf ({ks}) is a config a command on this host replaced (passwd, key add, \
                 key remove): an older copy was put back"
            ));
        }
        g.st.floor = g.st.floor.max(Some(ks));
        self.write_now(g)
    }

    /// A command on this host replaced config `old` by `new` (each its key
    /// state and digest): `old` put back is refused from now on, and the
    /// state is written.
    pub fn config_replaced(&self, old: (KeyState, [u8; 32]), new: (KeyState, [u8; 32])) -> Result<(), String> {
        let mut g = self.inner();
        g.st.floor = g.st.floor.max(Some(old.0)).max(Some(new.0));
        g.st.configs.retain(|c| *c != old.1 && *c != new.1);
        g.st.configs.push_back(old.1);
        while g.st.configs.len() > MAX_CONFIGS {
            g.st.configs.pop_front();
        }
        self.write_now(g)
    }

    /// The state `g` holds changed and is written now.
    fn write_now(&self, mut g: std::sync::MutexGuard<'_, Inner>) -> Result<(), String> {
        g.dirty = true;
        drop(g);
        self.flush()
    }

    /// Write the state (merged with what another mount wrote since) if
    /// anything changed.
    pub fn flush(&self) -> Result<(), String> {
        let mut g = self.inner();
        if !g.dirty {
            return Ok(());
        }
        let r = write_merged(&self.path, &self.key, &mut g.st);
        g.last_flush = Instant::now();
        if r.is_ok() {
            g.dirty = false;
        }
        r
    }

    fn changed(&self, mut g: std::sync::MutexGuard<'_, Inner>) {
        g.dirty = true;
        if g.last_flush.elapsed() >= FLUSH_EVERY {
            drop(g);
            if let Err(e) = self.flush() {
                tracing::warn!("versions seen not written: {e}");
            }
        }
    }
}

impl warpfs_content::Witness for Seen {
    fn opened(&self, id: &[u8; 16], rec: &Record) -> Result<(), String> {
        let g = self.inner();
        match g.st.files.get(id) {
            Some(v) if v.contains(&tag8(rec)) => Err(format!(
                "the whole file was put back to an older version (commit {}, {} bytes) \
                 that this host saw replaced by a newer one",
                rec.seq, rec.size
            )),
            _ => Ok(()),
        }
    }

    fn replaced(&self, id: &[u8; 16], old: &Record, new: Option<&Record>) {
        let mut g = self.inner();
        let v = g.st.files.entry(*id).or_default();
        let o = tag8(old);
        if let Some(n) = new {
            let n = tag8(n);
            v.retain(|t| *t != n);
        }
        if !v.contains(&o) {
            v.push_back(o);
            while v.len() > MAX_VERSIONS {
                v.pop_front();
            }
        }
        self.changed(g);
    }
}

impl Drop for Seen {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            tracing::warn!("versions seen not written at unmount: {e}");
        }
    }
}

/// The state at `path`: empty when there is none; only its key state
/// (as a floor) when it does not verify under `key`.
fn load(path: &Path, key: &SeenKey) -> Result<State, String> {
    let b = match host::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    match State::decode(&b, key) {
        Ok(s) => Ok(s),
        Err(Unreadable::Unauthenticated(floor)) => {
            tracing::warn!(
                "{}: versions seen under another volume key (or edited): only its key state is kept",
                path.display()
            );
            Ok(State {
                floor,
                ..State::default()
            })
        }
        Err(Unreadable::Malformed(w)) => Err(format!(
            "{}: not a state of versions seen ({w}); remove it to start anew",
            path.display()
        )),
    }
}

/// Under an exclusive lock on `path.lock`: merge what is at `path` into
/// `st`, then replace it (temporary file, fsync, rename, directory fsync).
fn write_merged(path: &Path, key: &SeenKey, st: &mut State) -> Result<(), String> {
    let ctx = |e: std::io::Error| format!("{}: {e}", path.display());
    let lock_path = path.with_extension("lock");
    // Read-only is enough for flock, and lets a daemon that gave up root
    // (--setuid) lock a file root created.
    if host::symlink_metadata(&lock_path).is_err() {
        host::create(&lock_path).map_err(ctx)?;
    }
    let lock = host::open(&lock_path).map_err(ctx)?;
    // SAFETY: flock on a descriptor we own; it is released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(ctx(std::io::Error::last_os_error()));
    }
    if let Ok(b) = host::read(path) {
        if let Ok(o) = State::decode(&b, key) {
            st.merge(&o);
        }
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let mut f = host::create(&tmp).map_err(ctx)?;
    f.write_all(&st.encode(key)).map_err(ctx)?;
    f.sync_all().map_err(ctx)?;
    drop(f);
    host::rename(&tmp, path).map_err(ctx)?;
    if let Some(d) = path.parent() {
        if let Ok(d) = host::open(d) {
            let _ = d.sync_all();
        }
    }
    drop(lock);
    Ok(())
}

#[cfg(test)]
mod tests;
