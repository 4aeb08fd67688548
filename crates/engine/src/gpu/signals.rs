//! Keep the process's signal handlers across driver loading: pocl's LLVM
//! installs its own SIGINT/SIGTERM handlers when the platform loads, which
//! would break the daemon's unmount-on-signal.

/// The handlers of the signals a mount relies on, saved.
pub struct SavedHandlers {
    saved: Vec<(libc::c_int, libc::sigaction)>,
}

const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

impl SavedHandlers {
    /// Save the current handlers.
    pub fn save() -> Self {
        let mut saved = Vec::new();
        for sig in SIGNALS {
            // SAFETY: sigaction with a null new action only reads the current one.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 {
                    saved.push((sig, old));
                }
            }
        }
        Self { saved }
    }
}

impl Drop for SavedHandlers {
    fn drop(&mut self) {
        for (sig, old) in &self.saved {
            // SAFETY: restores a handler read by `save` in this process.
            unsafe {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
        }
    }
}
