//! Mount a file system of the operations layer and serve it on the chosen
//! transport: the INIT handshake on /dev/fuse (fuser), then the ring queues
//! when the kernel took FUSE over io_uring; at the end, both transports
//! stopped, the file system's `destroy`. Used by `warpfs mount` and
//! `warpfs container open`.

use super::ops::{Notify, Operations};
use super::transport::dev::{DevFuse, RingOffer};
use super::transport::uring::{Acl, Ring, RingOptions};
use super::transport::{self, ParamGuard, Transport, DEV, ENABLE_URING, URING};
use super::Served;
use fuser::{INodeNo, Notifier, Session, SessionACL, SessionUnmounter};
use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

/// A mount whose INIT handshake is done; requests wait in the kernel until
/// [`Mounting::start`].
pub struct Mounting<T: Operations> {
    session: Session<DevFuse<T>>,
    ops: Arc<Served<T>>,
    offer: Arc<RingOffer>,
    t: Transport,
    acl: Acl,
    ring_options: RingOptions,
    want: bool,
    /// Why `auto` would serve through /dev/fuse, from [`transport::plan`].
    note: Option<String>,
    param: Option<ParamGuard>,
}

/// A live mount.
pub struct Mounted<T: Operations> {
    session: Session<DevFuse<T>>,
    ops: Arc<Served<T>>,
    ring: Option<Ring>,
    /// `enable_uring` as `-o uring_enable` set it, put back at the end.
    param: Option<ParamGuard>,
}

/// Mount `ops` at `mountpoint` for the transport `t` asks for (see
/// [`transport::plan`]; with `ring_options.enable_param`, `enable_uring`
/// is turned on first, and put back when the mount ends) and do the INIT
/// handshake. Set up what must be there before the first request is
/// answered (signal handling), then [`Mounting::start`].
pub fn serve<T: Operations>(
    ops: Served<T>,
    mountpoint: &Path,
    config: &fuser::Config,
    t: Transport,
    ring_options: RingOptions,
) -> Result<Mounting<T>, String> {
    let param = match (ring_options.enable_param, t) {
        (true, Transport::Auto | Transport::Uring) => transport::enable(Path::new(ENABLE_URING))?,
        _ => None,
    };
    let (want, note) = transport::plan(t, Path::new(ENABLE_URING))?;
    if let Some(n) = &note {
        tracing::info!("{n}");
    }
    let offer = Arc::new(RingOffer {
        want,
        ..RingOffer::default()
    });
    let slot = Arc::new(OnceLock::new());
    let mut cfg = config.clone();
    if want {
        // /dev/fuse then carries only FORGET and INTERRUPT (and everything
        // if the ring fails to start).
        cfg.n_threads = Some(cfg.n_threads.unwrap_or(1).clamp(1, 2));
    }
    let fs = DevFuse::new(Arc::new(ops), offer.clone(), slot.clone());
    let session = Session::new(fs, mountpoint, &cfg).map_err(|e| format!("mount failed: {e}"))?;
    let ops: Arc<Served<T>> = slot
        .get()
        .cloned()
        .ok_or_else(|| "mount failed: no INIT handshake".to_string())?;
    let acl = match config.acl {
        SessionACL::All => Acl::All,
        // SAFETY: geteuid has no preconditions.
        _ => Acl::Owner(unsafe { libc::geteuid() }),
    };
    Ok(Mounting {
        session,
        ops,
        offer,
        t,
        acl,
        ring_options,
        want,
        note,
        param,
    })
}

/// Invalidations through fuser's notifier on /dev/fuse.
impl Notify for Notifier {
    fn inval_inode(&self, ino: u64, off: i64, len: i64) -> std::io::Result<()> {
        Notifier::inval_inode(self, INodeNo(ino), off, len)
    }
    fn inval_entry(&self, parent: u64, name: &OsStr) -> std::io::Result<()> {
        Notifier::inval_entry(self, INodeNo(parent), name)
    }
}

impl<T: Operations> Mounting<T> {
    /// Sends invalidations to the kernel (always over /dev/fuse).
    pub fn notifier(&self) -> Box<dyn Notify> {
        Box::new(self.session.notifier())
    }

    /// Unmounts from another thread (the signal handler).
    pub fn unmount_callable(&mut self) -> SessionUnmounter {
        self.session.unmount_callable()
    }

    /// Start the ring queues when the kernel took FUSE over io_uring (the
    /// first requests are answered from here on); /dev/fuse is served by
    /// [`Mounted::run`].
    pub fn start(self) -> Result<Mounted<T>, String> {
        let Mounting {
            session,
            ops,
            offer,
            t,
            acl,
            ring_options,
            want,
            note,
            param,
        } = self;
        let mut ring = None;
        // Why /dev/fuse serves the mount, when it does.
        let mut dev_why = match t {
            Transport::Dev => "--transport dev".to_string(),
            _ => format!(
                "auto: {}",
                note.as_deref()
                    .map(|n| n.trim_start_matches("serving through /dev/fuse: "))
                    .unwrap_or("FUSE over io_uring was not taken")
            ),
        };
        if offer.taken.load(Ordering::Relaxed) {
            match Ring::start(session.as_fd(), ops.clone(), acl, ring_options) {
                Ok(r) => ring = Some(r),
                // Unmounted already: the session ends at once, as on /dev/fuse.
                Err(e) if e == super::transport::uring::GONE => tracing::info!("{e}"),
                Err(e) if t == Transport::Uring => {
                    return Err(format!("--transport uring: the ring did not start: {e}"))
                }
                Err(e) => {
                    tracing::warn!("FUSE over io_uring did not start ({e}): serving through /dev/fuse");
                    dev_why = format!("auto: FUSE over io_uring did not start ({e})");
                }
            }
        } else if want {
            let why = "the kernel did not offer FUSE over io_uring at INIT";
            if t == Transport::Uring {
                return Err(format!("--transport uring: {why}"));
            }
            tracing::info!("serving through /dev/fuse: {why}");
            dev_why = format!("auto: {why}");
        }
        match (&ring, t) {
            (Some(_), Transport::Uring) => ops.transport_started(URING, "--transport uring"),
            (Some(_), _) => ops.transport_started(URING, "auto: the kernel offers FUSE over io_uring"),
            (None, _) => ops.transport_started(DEV, &dev_why),
        }
        Ok(Mounted {
            session,
            ops,
            ring,
            param,
        })
    }
}

impl<T: Operations> Mounted<T> {
    /// The transport for the mount log: "io_uring (2 queue(s) x ...)".
    pub fn describe(&self) -> String {
        match &self.ring {
            Some(r) => format!("io_uring, {}", r.describe()),
            None => "/dev/fuse".into(),
        }
    }

    /// Serve until the mount is gone (unmounted, or detached and its last
    /// file closed); then stop the ring, end the file system and put
    /// `enable_uring` back if `-o uring_enable` changed it.
    pub fn run(self) -> std::io::Result<()> {
        let Mounted {
            session,
            ops,
            ring,
            param,
        } = self;
        let r = session.run();
        if let Some(ring) = ring {
            ring.stop();
        }
        ops.destroy();
        drop(param);
        r
    }
}
