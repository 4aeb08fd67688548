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
                        work.keys.end_summary_upgrade();
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

/// Convert every content file; `Ok(false)` when stopped. A file whose
/// header does not parse is left as it is and logged (it read as an error
/// before and still does); hard links from outside CIPHERDIR stop the run
/// before it converts anything, an I/O error where it is.
fn run(w: &Work, progress: &Progress, stop: &AtomicBool) -> Result<bool, String> {
    let root = &w.root;
    let files = content_files(root).map_err(|e| format!("{}: {e}", root.path().display()))?;
    let links = Links::count(root, &files);
    for rel in &files {
        let Ok(st) = root.lstat(rel) else { continue };
        if let Some(why) = links.outside(root, &st) {
            return Err(format!("{}: {why}", root.shown(rel).display()));
        }
    }
    progress.files_total.store(files.len() as u64, Ordering::Relaxed);
    for rel in &files {
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
            Err(e) => tracing::warn!("{}: left without a file summary: {e}", shown.display()),
        }
        progress.files_done.fetch_add(1, Ordering::Relaxed);
        if let Some(h) = &w.hook {
            h(Event::File);
        }
    }
    Ok(true)
}
