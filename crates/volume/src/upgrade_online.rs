//! `warpfs upgrade` of a mounted volume (FORMAT.md 12.6): the daemon gives
//! every content file its summary on a thread of its own. From the start,
//! new files get summaries and files without one still open; each file is
//! converted through the mount's open file for it (opened for the purpose
//! if no handle has it), holding the whole file, so requests see it wholly
//! before or wholly after. Its status shows in the rekey status attribute,
//! which `warpfs upgrade` follows before it marks the config done.

use crate::files::FileTable;
use crate::rekey::{content_files, Links};
use crate::upgrade::{Event, Hook, Progress};
use crate::Volume;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;
use warpfs_backing::{Expect, Root};
use warpfs_content::{ContentError, Keyring};
use warpfs_crypto::SummaryKey;

const RUNNING: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;
const STOPPED: u8 = 3;

struct Job {
    progress: Arc<Progress>,
    state: Arc<AtomicU8>,
    error: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    started: Instant,
    handle: Option<JoinHandle<()>>,
}

/// The upgrade of a mount: none, or one job (running or ended), and the
/// hook crash tests stop it with.
#[derive(Default)]
pub(crate) struct Slot {
    job: Mutex<Option<Job>>,
    hook: Mutex<Option<Hook>>,
}

impl Slot {
    fn job(&self) -> std::sync::MutexGuard<'_, Option<Job>> {
        self.job.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stop a running job between two files and wait for it.
    fn stop(&self) {
        if let Some(j) = self.job().as_mut() {
            j.stop.store(true, Ordering::Relaxed);
            if let Some(h) = j.handle.take() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the job's thread works with.
struct Work {
    root: Root,
    files: Arc<FileTable>,
    keys: Arc<Keyring>,
    key: Arc<SummaryKey>,
    hook: Option<Hook>,
    /// The volume's rename lock, held while the last look finds no file
    /// left without a summary.
    renames: Arc<std::sync::RwLock<()>>,
}

impl Volume {
    /// Crash tests: `hook` is told of every file the upgrade converts.
    pub fn set_upgrade_hook(&self, hook: Option<Hook>) {
        *self.online.upgrade.hook.lock().unwrap_or_else(|e| e.into_inner()) = hook;
    }

    /// Start giving every file its summary in the background (the config
    /// already marks the upgrade under way). Starting while a job runs or
    /// after one finished changes nothing; a failed or stopped one starts
    /// again.
    pub fn upgrade_start(&self) -> Result<(), String> {
        let r = self.upgrade_start_inner();
        if let Err(m) = &r {
            tracing::warn!("upgrade to file summaries refused: {m}");
        }
        r
    }

    fn upgrade_start_inner(&self) -> Result<(), String> {
        self.writable()
            .map_err(|_| "the volume is mounted read-only".to_string())?;
        let ks = self.keysource();
        if !ks.has_summaries() {
            return Err("this volume's mode has no tags to summarise".into());
        }
        if self.keys.summary().is_some() && !self.keys.summaries_upgrading() {
            return Err("this volume has file summaries already".into());
        }
        if self.keys.rekeying() {
            return Err("a rekey is under way on this mount".into());
        }
        let mut job = self.online.upgrade.job();
        if let Some(j) = job.as_mut() {
            if matches!(j.state.load(Ordering::Relaxed), RUNNING | DONE) {
                return Ok(());
            }
            if let Some(h) = j.handle.take() {
                let _ = h.join();
            }
        }
        let key = Arc::new(SummaryKey::derive(ks.master()));
        self.keys.begin_summary_upgrade(key.clone());
        tracing::info!("upgrade: new files get file summaries; giving every file its summary");
        let work = Work {
            root: self.root.clone(),
            files: self.files.clone(),
            keys: self.keys.clone(),
            key,
            hook: self
                .online
                .upgrade
                .hook
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            renames: self.renames.clone(),
        };
        let (progress, state) = (Arc::new(Progress::default()), Arc::new(AtomicU8::new(RUNNING)));
        let (error, stop) = (Arc::new(Mutex::new(None)), Arc::new(AtomicBool::new(false)));
        let t = (progress.clone(), state.clone(), error.clone(), stop.clone());
        let started = Instant::now();
        let handle = std::thread::Builder::new()
            .name("warpfs-upgrade".into())
            .spawn(move || {
                let (progress, state, error, stop) = t;
                match run(&work, &progress, &stop) {
                    Ok(true) => {
                        tracing::info!(
                            "upgrade: every file has its summary ({} converted in {:.1} s)",
                            progress.files_converted.load(Ordering::Relaxed),
                            started.elapsed().as_secs_f64()
                        );
                        state.store(DONE, Ordering::Relaxed);
                    }
                    Ok(false) => state.store(STOPPED, Ordering::Relaxed),
                    Err(m) => {
                        tracing::error!("upgrade stopped: {m}");
                        *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
                        state.store(FAILED, Ordering::Relaxed);
                    }
                }
            })
            .map_err(|e| format!("cannot start the upgrade thread: {e}"))?;
        *job = Some(Job {
            progress,
            state,
            error,
            stop,
            started,
            handle: Some(handle),
        });
        Ok(())
    }

    /// Stop a running upgrade between two files and wait for it (at
    /// unmount); a later `warpfs upgrade` finishes.
    pub(crate) fn upgrade_stop(&self) {
        self.online.upgrade.stop();
    }

    /// The upgrade's state as one JSON object, `None` if none was asked
    /// for on this mount: `kind` ("upgrade"), `state` (running, done,
    /// failed, stopped), `files`, `files_total`, `files_converted`,
    /// `bytes` and `bytes_total` (the files again, for a progress bar),
    /// `seconds`, `error`.
    pub(crate) fn upgrade_status(&self) -> Option<String> {
        let job = self.online.upgrade.job();
        let j = job.as_ref()?;
        let state = match j.state.load(Ordering::Relaxed) {
            RUNNING => "running",
            DONE => "done",
            FAILED => "failed",
            _ => "stopped",
        };
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let p = &j.progress;
        Some(
            serde_json::json!({
                "kind": "upgrade",
                "state": state,
                "files": l(&p.files_done),
                "files_total": l(&p.files_total),
                "files_converted": l(&p.files_converted),
                "bytes": l(&p.files_done),
                "bytes_total": l(&p.files_total),
                "seconds": j.started.elapsed().as_secs_f64(),
                "error": j.error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            })
            .to_string(),
        )
    }
}

/// Give every content file its summary; `Ok(false)` when stopped. A
/// listing made while names move can miss a file (renamed from a place not
/// listed yet to one listed already), so the files still without one are
/// looked for again until none is left, the last look with renames through
/// the mount held off; then files without a summary are refused again. A
/// file whose header does not parse is left as it is and logged (it read
/// as an error before and still does); hard links from outside CIPHERDIR
/// stop the run before it converts anything, an I/O error where it is.
fn run(w: &Work, progress: &Progress, stop: &AtomicBool) -> Result<bool, String> {
    let root = &w.root;
    let listed = |e: std::io::Error| format!("{}: {e}", root.path().display());
    let files = content_files(root).map_err(listed)?;
    let links = Links::count(root, &files);
    for rel in &files {
        let Ok(st) = root.lstat(rel) else { continue };
        if let Some(why) = links.outside(root, &st) {
            return Err(format!("{}: {why}", root.shown(rel).display()));
        }
    }
    progress.files_total.store(files.len() as u64, Ordering::Relaxed);
    // Files left as they are (their header does not open): not looked for.
    let mut left = std::collections::HashSet::new();
    if !convert_all(w, &files, &links, progress, stop, &mut left)? {
        return Ok(false);
    }
    let still = |left: &std::collections::HashSet<PathBuf>| {
        without_summary(root)
            .map(|(all, b)| (all, b.into_iter().filter(|r| !left.contains(r)).collect::<Vec<_>>()))
            .map_err(listed)
    };
    for _ in 0..LOOKS {
        let (all, behind) = still(&left)?;
        if behind.is_empty() {
            let _held = w.renames.write().unwrap_or_else(|e| e.into_inner());
            if still(&left)?.1.is_empty() {
                w.keys.end_summary_upgrade();
                return Ok(true);
            }
            continue;
        }
        progress.files_total.fetch_add(behind.len() as u64, Ordering::Relaxed);
        if !convert_all(w, &behind, &Links::count(root, &all), progress, stop, &mut left)? {
            return Ok(false);
        }
    }
    Err("files kept moving while the upgrade looked for the last ones: run warpfs upgrade again".into())
}

/// Looks for files left without a summary after the first pass.
const LOOKS: usize = 8;

/// Every content file, and those whose header parses and has no summary.
fn without_summary(root: &Root) -> std::io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let all = content_files(root)?;
    let mut behind = Vec::new();
    for rel in &all {
        let f = match root.open_file(rel, libc::O_RDONLY, 0, Expect::File) {
            Ok(f) => f,
            Err(e) if e.0 == libc::ENOENT => continue,
            Err(e) if e.0 == libc::ESTALE => {
                behind.push(rel.clone());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut h = [0u8; warpfs_content::header::LEN];
        // Empty, or shorter than a header (left, as the first pass left it).
        if std::os::unix::fs::FileExt::read_exact_at(&f, &mut h, 0).is_err() {
            continue;
        }
        if warpfs_content::header::Header::parse(&h).is_ok_and(|h| !h.summary) {
            behind.push(rel.clone());
        }
    }
    Ok((all, behind))
}

/// Convert `files` one by one, adding those left as they are to `left`;
/// `Ok(false)` when stopped.
fn convert_all(
    w: &Work,
    files: &[PathBuf],
    links: &Links,
    progress: &Progress,
    stop: &AtomicBool,
    left: &mut std::collections::HashSet<PathBuf>,
) -> Result<bool, String> {
    let root = &w.root;
    for rel in files {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let shown = root.shown(rel);
        let err = |e: &dyn std::fmt::Display| format!("{}: {e}", shown.display());
        // Gone since the listing (removed through the mount): nothing to do.
        let f = match root.open_file(rel, libc::O_RDWR, 0, Expect::File) {
            Ok(f) => f,
            Err(e) if e.0 == libc::ENOENT => {
                progress.files_done.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => return Err(err(&e)),
        };
        let st = warpfs_backing::fstat(&f).map_err(|e| err(&e))?;
        if let Some(why) = links.outside(root, &st) {
            return Err(err(&why));
        }
        let label = shown.display().to_string();
        let r = w
            .files
            .open_keep_label(f, &w.keys, label)
            .map_err(|e| ContentError::Corrupt { what: e.to_string() })
            .and_then(|cf| cf.take_summary(&w.key));
        match r {
            Ok(true) => {
                progress.files_converted.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(ContentError::Io(e)) => return Err(err(&e)),
            Err(e) => {
                tracing::warn!("{}: left without a file summary: {e}", shown.display());
                left.insert(rel.clone());
            }
        }
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = &w.hook {
            h(Event::File);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Caller, Options};
    use std::ffi::OsStr;
    use std::path::Path;
    use warpfs_config::{Config, ContentMode, KdfParams};

    /// Every file is renamed through the volume while the first pass runs
    /// (from its first file on): the names the pass listed are gone, so
    /// only the later looks find those files. The upgrade still gives each
    /// its summary before it ends, and a file without one is refused again.
    #[test]
    fn files_renamed_during_the_upgrade_still_get_their_summary() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let (cfg, master) =
            Config::create_with_features(dir, b"pw", ContentMode::Gcm, 256, KdfParams::MIN, &[]).unwrap();
        Volume::init_root(&Root::open(dir).unwrap()).unwrap();
        let v = Arc::new(Volume::open(dir, &cfg, &master, Options::default()).unwrap());
        let who = Caller { uid: 0, gid: 0 };
        let names: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
        for n in &names {
            let (_, _, f, _) = v
                .create(Path::new(""), OsStr::new(n), 0o644, libc::O_RDWR, who, n.clone())
                .unwrap();
            f.write_at(0, &vec![7u8; 10_000]).unwrap();
        }
        let moved = Arc::new(AtomicBool::new(false));
        let (vh, mh) = (Arc::downgrade(&v), moved.clone());
        let names2 = names.clone();
        v.set_upgrade_hook(Some(Arc::new(move |e| {
            if e != Event::File || mh.swap(true, Ordering::SeqCst) {
                return;
            }
            let v = vh.upgrade().unwrap();
            for n in &names2 {
                v.rename(
                    Path::new(""),
                    OsStr::new(n),
                    Path::new(""),
                    OsStr::new(&format!("{n}-moved")),
                    0,
                )
                .unwrap();
            }
        })));
        v.upgrade_start().unwrap();
        let status = loop {
            let s: serde_json::Value = serde_json::from_str(&v.upgrade_status().unwrap()).unwrap();
            if s["state"] != "running" {
                break s;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(status["state"], "done", "{status}");
        assert!(moved.load(Ordering::SeqCst), "the hook renamed the files");
        let (all, behind) = without_summary(&v.root).unwrap();
        assert_eq!(all.len(), names.len());
        assert!(behind.is_empty(), "left without a summary: {behind:?}");
        assert!(!v.keys.summaries_upgrading(), "files without one are refused again");
        v.set_upgrade_hook(None);
    }
}
