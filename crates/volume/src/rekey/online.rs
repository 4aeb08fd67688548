//! The rekey of a mounted volume (FORMAT.md 10): the daemon moves every
//! file to the new key generation on a thread of its own while reads and
//! writes go on; `warpfs rekey` starts it, follows its progress and ends
//! it through the mount (a virtual extended attribute, see the FUSE layer).

use super::{run_walk, Progress, RekeyOptions, Walk};
use crate::Volume;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// What `warpfs rekey` asks the daemon of a mounted volume (the value it
/// writes to the mount root's `trusted.warpfs.rekey`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `start TARGET JOBS MAX_RATE [REKEY_ID]`: move every file to key
    /// generation `TARGET` with `JOBS` workers, at most `MAX_RATE` bytes/s
    /// (0: no limit), the journal records carrying `REKEY_ID` (32 hex
    /// digits: the config's `rekey_id`).
    Start {
        /// The key generation to move to.
        target: u32,
        /// Files moved at once.
        jobs: usize,
        /// Bytes per second, `None` for no limit.
        max_rate: Option<u64>,
        /// The rekey's ID, when the config has one.
        rekey_id: Option<[u8; 16]>,
    },
    /// `volkey TARGET JOBS MAX_RATE REKEY_ID KEY`: a rekey to a new volume
    /// key (FORMAT.md 10.5): `KEY` is the new volume key sealed under the
    /// mount's control key (hex, `ControlKey::seal_key`); the content
    /// moves to generation `TARGET`, made from it, as with `start`.
    Volkey {
        /// The key generation to move to.
        target: u32,
        /// Files moved at once.
        jobs: usize,
        /// Bytes per second, `None` for no limit.
        max_rate: Option<u64>,
        /// The rekey's ID (the config's `rekey_id`).
        rekey_id: [u8; 16],
        /// The new volume key, sealed.
        key: String,
    },
    /// `names`: the content of a rekey to a new volume key has moved; move
    /// every name while requests wait.
    Names,
    /// `finish`: the config no longer names the old generation; drop it.
    Finish,
    /// `upgrade`: give every file its summary (FORMAT.md 12.6); the config
    /// marks the upgrade under way (`warpfs upgrade` wrote it first).
    Upgrade,
}

impl Request {
    /// The request's text.
    pub fn encode(&self) -> String {
        match self {
            Request::Start {
                target,
                jobs,
                max_rate,
                rekey_id,
            } => {
                let mut s = format!("start {target} {jobs} {}", max_rate.unwrap_or(0));
                if let Some(id) = rekey_id {
                    s.push(' ');
                    s.extend(id.iter().map(|b| format!("{b:02x}")));
                }
                s
            }
            Request::Volkey {
                target,
                jobs,
                max_rate,
                rekey_id,
                key,
            } => {
                let id: String = rekey_id.iter().map(|b| format!("{b:02x}")).collect();
                format!("volkey {target} {jobs} {} {id} {key}", max_rate.unwrap_or(0))
            }
            Request::Names => "names".into(),
            Request::Finish => "finish".into(),
            Request::Upgrade => "upgrade".into(),
        }
    }

    /// Parse a request's text; anything else is an error.
    pub fn parse(b: &[u8]) -> Result<Self, String> {
        let t = std::str::from_utf8(b).map_err(|_| "rekey request is not text".to_string())?;
        let w: Vec<&str> = t.split_ascii_whitespace().collect();
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("bad number in rekey request: {s:?}"))
        };
        let hex = |s: &str| -> Result<[u8; 16], String> {
            let bad = || format!("bad rekey ID in rekey request: {s:?}");
            if s.len() != 32 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            let mut id = [0u8; 16];
            for (i, b) in id.iter_mut().enumerate() {
                *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
            }
            Ok(id)
        };
        match w.as_slice() {
            ["finish"] => Ok(Request::Finish),
            ["upgrade"] => Ok(Request::Upgrade),
            ["names"] => Ok(Request::Names),
            ["volkey", target, jobs, rate, id, key] => Ok(Request::Volkey {
                target: u32::try_from(num(target)?).map_err(|_| "key generation out of range".to_string())?,
                jobs: (num(jobs)?.clamp(1, 256)) as usize,
                max_rate: Some(num(rate)?).filter(|&r| r > 0),
                rekey_id: hex(id)?,
                key: key.to_string(),
            }),
            ["start", target, jobs, rate, id @ ..] if id.len() <= 1 => Ok(Request::Start {
                target: u32::try_from(num(target)?).map_err(|_| "key generation out of range".to_string())?,
                jobs: (num(jobs)?.clamp(1, 256)) as usize,
                max_rate: Some(num(rate)?).filter(|&r| r > 0),
                rekey_id: id.first().map(|s| hex(s)).transpose()?,
            }),
            _ => Err(format!("unknown rekey request {t:?}")),
        }
    }
}

const RUNNING: u8 = 0;
const DONE: u8 = 1;
const FAILED: u8 = 2;
const STOPPED: u8 = 3;

struct Job {
    target: u32,
    progress: Arc<Progress>,
    state: Arc<AtomicU8>,
    error: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    started: Instant,
    handle: Option<JoinHandle<()>>,
}

/// The online rekey's state: none, or one job (running or ended); and the
/// ID of the rekey under way.
#[derive(Default)]
pub struct Online {
    job: Mutex<Option<Job>>,
    /// The last refused request, for `warpfs rekey` to show.
    refused: Mutex<Option<String>>,
    /// The rekey under way's ID (FORMAT.md 10.1): the config's when the
    /// volume was opened, or the one a start request carried.
    rekey_id: Mutex<Option<[u8; 16]>>,
    /// An upgrade to file summaries while mounted (`upgrade_online.rs`).
    pub(crate) upgrade: crate::upgrade_online::Slot,
}

impl Online {
    /// The state of a volume whose config names rekey ID `id`.
    pub(crate) fn new(id: Option<[u8; 16]>) -> Self {
        Self {
            job: Mutex::new(None),
            refused: Mutex::new(None),
            rekey_id: Mutex::new(id),
            upgrade: Default::default(),
        }
    }

    fn job(&self) -> std::sync::MutexGuard<'_, Option<Job>> {
        self.job.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn id(&self) -> std::sync::MutexGuard<'_, Option<[u8; 16]>> {
        self.rekey_id.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ID of the rekey under way, if it has one.
    pub(crate) fn rekey_id(&self) -> Option<[u8; 16]> {
        *self.id()
    }
}

impl Volume {
    /// The rekey under way has ID `id` now (the config was given one, e.g.
    /// to a rekey an earlier warpfs started): its journal records carry it,
    /// and only records with it are applied.
    pub fn set_rekey_id(&self, id: Option<[u8; 16]>) {
        *self.online.id() = id;
    }

    /// Start moving every file to key generation `target` in the
    /// background: the write generation plus one (the config then records
    /// it as `rekey_target`, which `warpfs rekey` writes first), or the
    /// write generation itself when the volume was mounted mid-rekey.
    /// Starting a job that runs or ran for `target` changes nothing, except
    /// that a failed or stopped one is started again.
    pub fn rekey_start(&self, target: u32, opts: RekeyOptions) -> Result<(), String> {
        let r = self.rekey_start_inner(target, opts);
        if let Err(m) = &r {
            *self.online.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(m.clone());
        }
        r
    }

    fn rekey_start_inner(&self, target: u32, opts: RekeyOptions) -> Result<(), String> {
        self.writable()
            .map_err(|_| "the volume is mounted read-only".to_string())?;
        let mut job = self.online.job();
        if let Some(j) = job.as_ref() {
            if j.target != target {
                return Err(format!("a rekey to key generation {} is under way", j.target));
            }
            if matches!(j.state.load(Ordering::Relaxed), RUNNING | DONE) {
                return Ok(());
            }
        }
        let write = self.keys.write_generation();
        let fresh = write.checked_add(1) == Some(target) && !self.keys.rekeying();
        // The records carry the config's rekey ID: the request's (which
        // `warpfs rekey` read from the config it unlocked), never another
        // than the one this volume knows for a rekey already under way.
        let id = match (fresh, self.online.rekey_id(), opts.rekey_id) {
            (false, Some(a), Some(b)) if a != b => {
                return Err(
                    "the config names another rekey ID than the rekey under way on this mount: unmount and run warpfs rekey again".into(),
                )
            }
            (true, _, asked) => asked,
            (false, known, asked) => asked.or(known),
        };
        if fresh {
            self.keys.begin_rekey(self.make_cipher(target)?)?;
            tracing::info!("rekey: new files and moved blocks use key generation {target}");
        } else if !(write == target && self.keys.rekeying()) {
            return Err(format!(
                "cannot rekey to key generation {target}: the volume uses generation {write}{}",
                if self.keys.rekeying() { " (mid-rekey)" } else { "" }
            ));
        }
        if let Some(mut old) = job.take() {
            if let Some(h) = old.handle.take() {
                let _ = h.join();
            }
        }
        *self.online.id() = id;
        let (progress, state) = (Arc::new(Progress::default()), Arc::new(AtomicU8::new(RUNNING)));
        let (error, stop) = (Arc::new(Mutex::new(None)), Arc::new(AtomicBool::new(false)));
        let walk = Walk::of(self);
        let t = (progress.clone(), state.clone(), error.clone(), stop.clone());
        let started = Instant::now();
        let handle = std::thread::Builder::new()
            .name("warpfs-rekey".into())
            .spawn(move || {
                let (progress, state, error, stop) = t;
                let r = run_walk(&walk, &opts, &progress, &stop);
                let secs = started.elapsed().as_secs_f64();
                let done = progress.bytes_done.load(Ordering::Relaxed);
                match r {
                    Ok(true) => {
                        tracing::info!(
                            "rekey: every file uses key generation {target} ({} files moved, {:.1} MiB in {secs:.1} s)",
                            progress.files_moved.load(Ordering::Relaxed),
                            done as f64 / 1048576.0
                        );
                        state.store(DONE, Ordering::Relaxed);
                    }
                    Ok(false) => state.store(STOPPED, Ordering::Relaxed),
                    Err(m) => {
                        tracing::error!("rekey stopped: {m}");
                        *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(m);
                        state.store(FAILED, Ordering::Relaxed);
                    }
                }
            })
            .map_err(|e| format!("cannot start the rekey thread: {e}"))?;
        *job = Some(Job {
            target,
            progress,
            state,
            error,
            stop,
            started,
            handle: Some(handle),
        });
        *self.online.refused.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// End a finished rekey: the previous key generation is dropped (the
    /// config no longer names it; `warpfs rekey` rewrote it first).
    pub fn rekey_finish(&self) -> Result<(), String> {
        // The handover's lock is never taken while the job's is held
        // (`volkey_start` takes them the other way round).
        if self.volkey_names_moved() == Some(false) {
            return Err("the names of the rekey to a new volume key have not moved yet".into());
        }
        let mut job = self.online.job();
        match job.as_ref() {
            Some(j) if j.state.load(Ordering::Relaxed) == DONE => {}
            Some(_) => return Err("the rekey has not finished".into()),
            None => return Err("no rekey was started on this mount".into()),
        }
        if let Some(mut j) = job.take() {
            if let Some(h) = j.handle.take() {
                let _ = h.join();
            }
        }
        self.keys.end_rekey();
        *self.online.id() = None;
        drop(job);
        self.volkey_end();
        Ok(())
    }

    /// Whether the rekey started on this mount has moved every file.
    pub(crate) fn rekey_done(&self) -> bool {
        self.online
            .job()
            .as_ref()
            .is_some_and(|j| j.state.load(Ordering::Relaxed) == DONE)
    }

    /// Stop a running rekey between two segments and wait for it (at
    /// unmount). Files stay wholly old, wholly new or half moved with
    /// their watermark; a later `warpfs rekey` finishes.
    pub fn rekey_stop(&self) {
        // An upgrade to summaries too: a later `warpfs upgrade` finishes.
        self.upgrade_stop();
        let mut job = self.online.job();
        if let Some(j) = job.as_mut() {
            j.stop.store(true, Ordering::Relaxed);
            if let Some(h) = j.handle.take() {
                let _ = h.join();
            }
        }
    }

    /// The online rekey's state as one JSON object, `None` if none was
    /// requested on this mount: `state` (running, done, failed, stopped,
    /// refused), `target`, `files`, `files_total`, `files_moved`, `bytes`,
    /// `bytes_total`, `unreadable_blocks`, `seconds`, `error`.
    pub fn rekey_status(&self) -> Option<String> {
        // Before the job's lock: see `rekey_finish`.
        let names = self.volkey_progress();
        let names_moved = self.volkey_names_moved().unwrap_or(false);
        let job = self.online.job();
        let refused = self.online.refused.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(j) = job.as_ref() else {
            if let Some(s) = self.upgrade_status() {
                return Some(s);
            }
            return refused.map(|m| serde_json::json!({ "state": "refused", "error": m }).to_string());
        };
        let state = match j.state.load(Ordering::Relaxed) {
            RUNNING => "running",
            DONE => "done",
            FAILED => "failed",
            _ => "stopped",
        };
        let p = &j.progress;
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let error = j.error.lock().unwrap_or_else(|e| e.into_inner()).clone().or(refused);
        let n = |f: fn(&Progress) -> &std::sync::atomic::AtomicU64| names.as_ref().map_or(0, |p| l(f(p)));
        Some(
            serde_json::json!({
                "state": state,
                "target": j.target,
                "files": l(&p.files_done),
                "files_total": l(&p.files_total),
                "files_moved": l(&p.files_moved),
                "bytes": l(&p.bytes_done),
                "bytes_total": l(&p.bytes_total),
                "unreadable_blocks": l(&p.unreadable),
                "seconds": j.started.elapsed().as_secs_f64(),
                "error": error,
                "volume_key": names.is_some(),
                "names_moved": names_moved,
                "names": n(|p| &p.names_done),
                "dirs": n(|p| &p.dirs_done),
                "summaries": n(|p| &p.summaries),
            })
            .to_string(),
        )
    }
}

impl Drop for Online {
    fn drop(&mut self) {
        if let Some(j) = self.job.get_mut().unwrap_or_else(|e| e.into_inner()).as_mut() {
            j.stop.store(true, Ordering::Relaxed);
            if let Some(h) = j.handle.take() {
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_garbage_is_refused() {
        for r in [
            Request::Finish,
            Request::Upgrade,
            Request::Start {
                target: 3,
                jobs: 2,
                max_rate: None,
                rekey_id: None,
            },
            Request::Start {
                target: u32::MAX,
                jobs: 256,
                max_rate: Some(1 << 20),
                rekey_id: Some([0xa7; 16]),
            },
            Request::Names,
            Request::Volkey {
                target: 4,
                jobs: 1,
                max_rate: None,
                rekey_id: [3; 16],
                key: "ab01".into(),
            },
        ] {
            assert_eq!(Request::parse(r.encode().as_bytes()).unwrap(), r);
        }
        assert_eq!(
            Request::parse(b"start 1 2 0 000102030405060708090a0b0c0d0e0f").unwrap(),
            Request::Start {
                target: 1,
                jobs: 2,
                max_rate: None,
                rekey_id: Some(std::array::from_fn(|i| i as u8)),
            }
        );
        for bad in [
            &b""[..],
            b"start",
            b"start 1 2",
            b"start x 1 0",
            b"start 4294967296 1 0",
            b"start 1 1 0 00",
            b"start 1 1 0 000102030405060708090a0b0c0d0e0g",
            b"start 1 1 0 000102030405060708090a0b0c0d0e0f 00",
            b"start 1 1 0 +00102030405060708090a0b0c0d0e0f",
            b"stop",
            b"volkey 1 1 0 000102030405060708090a0b0c0d0e0f",
            b"volkey 1 1 0 00 ab",
            b"names 1",
            b"upgrade now",
            b"\xff",
        ] {
            assert!(Request::parse(bad).is_err(), "{bad:?}");
        }
    }
}
