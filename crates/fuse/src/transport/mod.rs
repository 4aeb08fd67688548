//! The transports that carry a mount's requests ([`dev`]: fuser over
//! /dev/fuse; [`uring`]: FUSE over io_uring), and which one serves:
//! `--transport auto|uring|dev` (default `$WARPFS_TRANSPORT`, else auto). FUSE over io_uring is offered
//! by the kernel only while the module parameter `enable_uring` is on.
//! warpfs writes it only when the mount says `-o uring_enable`
//! (`--uring-enable`), and then puts back the value it found when the
//! daemon ends ([`ParamGuard`]), also after a signal; otherwise both `auto`
//! and `uring` take the parameter as they find it
//! (docs/decisions/0007-fuse-over-io-uring.md).

pub mod dev;
pub mod uring;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

/// The module parameter that makes the kernel offer FUSE over io_uring.
pub const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";
/// Environment variable naming the transport when `--transport` is not given.
pub const ENV_TRANSPORT: &str = "WARPFS_TRANSPORT";

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// io_uring when the kernel offers it, else /dev/fuse.
    #[default]
    Auto,
    /// io_uring or fail.
    Uring,
    /// /dev/fuse only.
    Dev,
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(Transport::Auto),
            "uring" | "io_uring" => Ok(Transport::Uring),
            "dev" | "devfuse" => Ok(Transport::Dev),
            o => Err(format!("'{o}' is not a transport (auto, uring, dev)")),
        }
    }
}

impl Transport {
    /// `--transport` if given, else `$WARPFS_TRANSPORT`, else auto.
    pub fn resolve(given: Option<Transport>) -> Result<Transport, String> {
        if let Some(t) = given {
            return Ok(t);
        }
        match std::env::var(ENV_TRANSPORT) {
            Ok(v) if !v.trim().is_empty() => v.parse().map_err(|e| format!("{ENV_TRANSPORT}: {e}")),
            _ => Ok(Transport::Auto),
        }
    }
}

/// The name of a running transport, as logs and `warpfs stats` show it.
pub const URING: &str = "uring";
pub const DEV: &str = "dev";

/// The state of `enable_uring`: `None` when the kernel has no FUSE over
/// io_uring at all.
pub fn kernel_offers(param: &Path) -> Option<bool> {
    let s = warpfs_backing::host::read_to_string(param).ok()?;
    Some(matches!(s.trim(), "Y" | "y" | "1"))
}

/// How to turn it on, for messages.
pub fn how_to_enable() -> String {
    format!(
        "mount with -o uring_enable (--uring-enable, as root: on for this mount, put back at unmount), \
         or as root: echo Y > {ENABLE_URING} (or boot with fuse.enable_uring=1)"
    )
}

/// The parameter's file, opened when it was turned on, and the value found
/// there: put back by [`restore`].
static FOUND: Mutex<Option<(File, String)>> = Mutex::new(None);

/// While alive, `enable_uring` is on for this mount; dropping it puts back
/// the value found (nothing when it was on already).
#[derive(Debug)]
pub struct ParamGuard(());

impl Drop for ParamGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// `-o uring_enable`: turn `param` on for this mount. `Ok(None)` when the
/// kernel has no such parameter (no FUSE over io_uring: [`plan`] says
/// what then). The file stays open, so the value found can be put back
/// after the daemon has given up root (`-o setuid=`).
pub fn enable(param: &Path) -> Result<Option<ParamGuard>, String> {
    if warpfs_backing::host::metadata(param).is_err() {
        return Ok(None);
    }
    let cannot = |e: std::io::Error| {
        format!(
            "--uring-enable: cannot turn FUSE over io_uring on ({}: {e}; it needs root)",
            param.display()
        )
    };
    let f = warpfs_backing::host::open_with(param, File::options().read(true).write(true)).map_err(cannot)?;
    let mut buf = [0u8; 8];
    let n = f.read_at(&mut buf, 0).map_err(cannot)?;
    let was = String::from_utf8_lossy(&buf[..n]).trim().to_string();
    if matches!(was.as_str(), "Y" | "y" | "1") {
        tracing::info!("--uring-enable: {} is on already", param.display());
        return Ok(Some(ParamGuard(())));
    }
    f.write_at(b"Y", 0).map_err(cannot)?;
    tracing::info!(
        "--uring-enable: set {} to Y (it was {was}); it is put back when the mount ends",
        param.display()
    );
    *FOUND.lock().unwrap_or_else(|e| e.into_inner()) = Some((f, was));
    Ok(Some(ParamGuard(())))
}

/// Put `enable_uring` back as [`enable`] found it, once (the daemon's end,
/// or a second signal before `exit`); nothing if it was not changed.
pub fn restore() {
    let found = FOUND.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some((f, was)) = found {
        match f.write_at(was.as_bytes(), 0) {
            Ok(_) => tracing::info!("--uring-enable: put {ENABLE_URING} back to {was}"),
            Err(e) => tracing::error!("--uring-enable: cannot put {ENABLE_URING} back to {was}: {e}"),
        }
    }
}

/// Before mounting: whether to ask the kernel for io_uring. `Err` for
/// `--transport uring` when it cannot be had. The returned note (if any) is
/// the one line logged about the choice. Never changes the parameter.
pub fn plan(t: Transport, param: &Path) -> Result<(bool, Option<String>), String> {
    if t == Transport::Dev {
        return Ok((false, None));
    }
    let usable = self::uring::usable();
    match (t, kernel_offers(param), usable) {
        (Transport::Uring, None, _) => Err(format!(
            "--transport uring: this kernel has no FUSE over io_uring ({} is missing; needs Linux 6.14+ with CONFIG_FUSE_IO_URING)",
            param.display()
        )),
        (Transport::Uring, Some(false), _) => Err(format!(
            "--transport uring: FUSE over io_uring is off ({} is N); to use it, {}",
            param.display(),
            how_to_enable()
        )),
        (Transport::Uring, Some(true), Err(e)) => Err(format!("--transport uring: {e}")),
        (_, None, _) => Ok((
            false,
            Some("serving through /dev/fuse: this kernel has no FUSE over io_uring (Linux 6.14+)".into()),
        )),
        (_, Some(false), _) => Ok((
            false,
            Some(format!(
                "serving through /dev/fuse: FUSE over io_uring is off ({} is N); to use it, {}",
                param.display(),
                how_to_enable()
            )),
        )),
        (_, Some(true), Err(e)) => Ok((false, Some(format!("serving through /dev/fuse: {e}")))),
        (_, Some(true), Ok(())) => Ok((true, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names() {
        assert_eq!("auto".parse::<Transport>().unwrap(), Transport::Auto);
        assert_eq!("uring".parse::<Transport>().unwrap(), Transport::Uring);
        assert_eq!("dev".parse::<Transport>().unwrap(), Transport::Dev);
        assert!("tcp".parse::<Transport>().is_err());
    }

    #[test]
    fn plan_follows_the_parameter_and_never_changes_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("enable_uring");
        // No parameter: auto falls back with a note, uring fails.
        let (want, note) = plan(Transport::Auto, &p).unwrap();
        assert!(!want && note.unwrap().contains("no FUSE over io_uring"));
        assert!(plan(Transport::Uring, &p).is_err());
        assert_eq!(plan(Transport::Dev, &p).unwrap(), (false, None));
        // Off: auto says how to turn it on, uring fails saying the same,
        // and neither touches it.
        std::fs::write(&p, "N\n").unwrap();
        let (want, note) = plan(Transport::Auto, &p).unwrap();
        let note = note.unwrap();
        assert!(
            !want && note.contains("uring_enable") && note.contains("echo Y"),
            "{note}"
        );
        let e = plan(Transport::Uring, &p).unwrap_err();
        assert!(e.contains("is off") && e.contains("-o uring_enable"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "N\n",
            "plan changed the parameter"
        );
        // On: both take it (where this process can make a ring).
        std::fs::write(&p, "Y\n").unwrap();
        if crate::transport::uring::usable().is_ok() {
            assert_eq!(plan(Transport::Auto, &p).unwrap(), (true, None));
            assert_eq!(plan(Transport::Uring, &p).unwrap(), (true, None));
        }
    }

    #[test]
    fn enable_turns_it_on_and_the_guard_puts_back_what_it_found() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("enable_uring");
        assert!(enable(&p).unwrap().is_none(), "no parameter, nothing to turn on");
        std::fs::write(&p, "N\n").unwrap();
        let g = enable(&p).unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap().trim(), "Y");
        drop(g);
        assert_eq!(std::fs::read_to_string(&p).unwrap().trim(), "N");
        // Found on: left on.
        std::fs::write(&p, "Y").unwrap();
        drop(enable(&p).unwrap().unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "Y");
    }
}
