//! Which transport carries a mount's requests: `--transport auto|uring|dev`
//! (default `$WARPFS_TRANSPORT`, else auto). FUSE over io_uring is offered
//! by the kernel only while the module parameter `enable_uring` is on;
//! warpfs turns it on only for `--transport uring` run as root, and says so.

use std::path::Path;

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
        "as root: echo Y > {ENABLE_URING} (or boot with fuse.enable_uring=1), or mount with --transport uring as root"
    )
}

/// Before mounting: whether to ask the kernel for io_uring. `Err` for
/// `--transport uring` when it cannot be had. The returned note (if any) is
/// the one line logged about the choice.
pub fn plan(t: Transport, param: &Path) -> Result<(bool, Option<String>), String> {
    if t == Transport::Dev {
        return Ok((false, None));
    }
    let usable = super::uring::usable();
    match (t, kernel_offers(param), usable) {
        (Transport::Uring, None, _) => Err(format!(
            "--transport uring: this kernel has no FUSE over io_uring ({} is missing; needs Linux 6.14+ with CONFIG_FUSE_IO_URING)",
            param.display()
        )),
        (Transport::Uring, _, Err(e)) => Err(format!("--transport uring: {e}")),
        (Transport::Uring, Some(true), Ok(())) => Ok((true, None)),
        (Transport::Uring, Some(false), Ok(())) => match warpfs_backing::host::write(param, "Y") {
            Ok(()) => Ok((
                true,
                Some(format!("--transport uring: set {} to Y (it was N)", param.display())),
            )),
            Err(e) => Err(format!(
                "--transport uring: FUSE over io_uring is off ({} is N) and cannot be turned on: {e}; {}",
                param.display(),
                how_to_enable()
            )),
        },
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
    fn plan_follows_the_parameter() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("enable_uring");
        // No parameter: auto falls back with a note, uring fails.
        let (want, note) = plan(Transport::Auto, &p).unwrap();
        assert!(!want && note.unwrap().contains("no FUSE over io_uring"));
        assert!(plan(Transport::Uring, &p).is_err());
        assert_eq!(plan(Transport::Dev, &p).unwrap(), (false, None));
        // Off: auto says how to enable it and leaves it alone.
        std::fs::write(&p, "N\n").unwrap();
        let (want, note) = plan(Transport::Auto, &p).unwrap();
        assert!(!want && note.unwrap().contains("echo Y"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "N\n", "auto never changes it");
        if crate::fuse::uring::usable().is_ok() {
            // uring turns it on and says so.
            let (want, note) = plan(Transport::Uring, &p).unwrap();
            assert!(want && note.unwrap().contains("set"));
            assert_eq!(std::fs::read_to_string(&p).unwrap(), "Y");
            assert_eq!(plan(Transport::Auto, &p).unwrap(), (true, None));
        }
    }
}
