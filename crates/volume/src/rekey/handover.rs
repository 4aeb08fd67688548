//! A rekey to a new volume key on a mounted volume (FORMAT.md 10.5,
//! decision records 0083 and 0092): `warpfs` hands the mount the new key
//! (sealed under the old key's control key); the content moves to the
//! new key's generation on the online rekey's thread while reads and
//! writes go on; then, with every request through the mount held off,
//! the file summaries are sealed again, every name, directory IV, symlink
//! target and xattr moves (`renames.rs`, the walk the offline rekey
//! uses), the mount switches to the new name, seal and summary keys, and
//! the FUSE layer renames its own table of backing names.

use super::renames::{migrate, NameKeys};
use super::{Progress, RekeyOptions};
use crate::volume::Naming;
use crate::Volume;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use warpfs_crypto::keys::{MasterKey, Subkeys};
use warpfs_crypto::{ControlKey, SummaryKey};

/// The keys of a rekey to a new volume key under way on a mount.
pub struct Handover {
    /// The volume key the mount was opened with (names and summaries stay
    /// under it until they move).
    old: MasterKey,
    /// The new volume key (content moves to its generation).
    new: MasterKey,
    /// The names have moved and the mount uses the new keys.
    names_moved: bool,
    /// The name part's counters (for the status).
    pub(crate) progress: Arc<Progress>,
}

impl Handover {
    /// The old key's control key (the start request is proved with it).
    pub(crate) fn old_control(&self) -> ControlKey {
        ControlKey::derive(&self.old)
    }
}

impl Volume {
    fn handover(&self) -> std::sync::MutexGuard<'_, Option<Handover>> {
        self.handover.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start a rekey to the new volume key `sealed` carries (sealed under
    /// this mount's control key, [`ControlKey::seal_key`]): content ciphers
    /// and the journal, undo and control keys come from the new key from
    /// now on, and every file moves to key generation `target` (made from
    /// it) in the background, as [`Volume::rekey_start`] does. Asked again
    /// with the same key (a `warpfs rekey` that finishes it), the
    /// rekey goes on where it is.
    pub fn volkey_start(&self, sealed: &str, target: u32, opts: RekeyOptions) -> Result<(), String> {
        // Lock order: the handover, then the online job (in
        // `rekey_start`); nothing takes them the other way round.
        let mut h = self.handover();
        let ks = self.keysource();
        let control = match h.as_ref() {
            Some(x) => x.old_control(),
            None => ks.control_key(),
        };
        let new = control
            .open_key(sealed)
            .ok_or("the new volume key does not open under this mount's key")?;
        match h.as_ref() {
            Some(x) if x.new.as_bytes() != new.as_bytes() => {
                return Err("another rekey to a new volume key is under way on this mount".into());
            }
            Some(_) => {
                drop(h);
                return self.rekey_start(target, opts);
            }
            None => {}
        }
        if self.keys.rekeying() {
            return Err("a rekey is under way on this mount: finish it first".into());
        }
        let old = ks.master().clone();
        self.set_keysource(ks.with_master(&new));
        if let Err(e) = self.rekey_start(target, opts) {
            // Nothing moved: the mount keeps the old key.
            self.set_keysource(ks.with_master(&old));
            return Err(e);
        }
        *h = Some(Handover {
            old,
            new,
            names_moved: false,
            progress: Arc::default(),
        });
        tracing::info!("rekey to a new volume key: new files and moved blocks use key generation {target}");
        Ok(())
    }

    /// The name part of the rekey to a new volume key on this mount, once
    /// its content moved: every request through the mount is held off;
    /// each file summary is sealed again under the new key, every name
    /// moves (`on_event` is told of each), the mount switches to the new
    /// name, seal and summary keys, and `relink` runs (still holding
    /// requests off) to rename what the FUSE layer keeps of backing names.
    /// Done once; asked again, does nothing.
    pub fn volkey_names(&self, opts: &RekeyOptions, relink: impl FnOnce(&Volume)) -> Result<(), String> {
        let (old, new, progress) = match self.handover().as_ref() {
            Some(h) if h.names_moved => return Ok(()),
            Some(h) => (h.old.clone(), h.new.clone(), h.progress.clone()),
            None => return Err("no rekey to a new volume key was started on this mount".into()),
        };
        if !self.rekey_done() {
            return Err("the content has not moved to the new key yet".into());
        }
        let hold = self.hold_requests();
        tracing::info!("rekey to a new volume key: moving every name (requests wait)");
        // Open files with uncommitted summaries commit now, under the
        // key their summary is under; none changes again while held.
        let open = self.files.all();
        for f in &open {
            if let Err(e) = f.commit_summary() {
                tracing::warn!("{}: file summary not committed: {e}", f.label());
            }
        }
        let summaries = self.keys.summary().is_some();
        if summaries {
            super::volkey::reseal_summaries(self, &SummaryKey::derive(&old), &SummaryKey::derive(&new), &progress)?;
        }
        let bits = self.keysource().key_bits();
        let (o, n) = (Subkeys::derive(&old, bits), Subkeys::derive(&new, bits));
        let k = NameKeys {
            old_names: o.names,
            old_seal: o.seal,
            new_names: n.names,
            new_seal: n.seal,
            bound: self.bound_seals,
        };
        let never = AtomicBool::new(false);
        match migrate(&self.root, &k, opts.on_event.as_ref(), &progress, &never) {
            Ok(_) => {}
            Err(e) => {
                // Some directories moved: the names stay under two keys
                // until `warpfs rekey` (offline) finishes; nothing under
                // the old key is served wrong meanwhile, but names in
                // moved directories do not open here.
                tracing::error!("rekey to a new volume key: moving the names failed: {e}");
                return Err(format!(
                    "{e}; unmount and run warpfs rekey to finish (names already moved do not open on this mount)"
                ));
            }
        }
        let n = Subkeys::derive(&new, bits);
        self.set_naming(Naming {
            names: n.names,
            sealer: n.seal,
        });
        if summaries {
            let key = Arc::new(SummaryKey::derive(&new));
            self.keys.set_summary(key.clone());
            for f in &open {
                if let Err(e) = f.rekey_summary(&key) {
                    tracing::error!("{}: file summary under the new key: {e}", f.label());
                }
            }
        }
        self.ivs.clear();
        self.dirfds.clear();
        relink(self);
        if let Some(h) = self.handover().as_mut() {
            h.names_moved = true;
        }
        drop(hold);
        tracing::info!(
            "rekey to a new volume key: {} names and {} directories moved",
            progress.names_done.load(Ordering::Relaxed),
            progress.dirs_done.load(Ordering::Relaxed)
        );
        Ok(())
    }

    /// The backing name of the entry shown as `name` in the backing
    /// directory `dir` (relative to CIPHERDIR), if it exists.
    pub fn backing_name_in(&self, dir: &std::path::Path, name: &std::ffi::OsStr) -> Option<String> {
        self.resolve(dir, name).ok().filter(|r| r.exists).map(|r| r.file)
    }

    /// Whether a rekey to a new volume key on this mount moved its names
    /// (`None`: none is under way).
    pub(crate) fn volkey_names_moved(&self) -> Option<bool> {
        self.handover().as_ref().map(|h| h.names_moved)
    }

    /// The rekey to a new volume key ended (the config names only the new
    /// key): the old key is dropped.
    pub(crate) fn volkey_end(&self) {
        *self.handover() = None;
    }

    /// The name part's counters, when a rekey to a new volume key is under
    /// way.
    pub(crate) fn volkey_progress(&self) -> Option<Arc<Progress>> {
        self.handover().as_ref().map(|h| h.progress.clone())
    }
}
