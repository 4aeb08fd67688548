//! `--engine` for XTS: which engine a mount or a container asks for
//! (`--engine`, else `WARPFS_ENGINE`, else cpu), and the fused XTS kernels
//! opened on the device that engine runs on, so that `xts` volumes and
//! containers run long requests there (docs/decisions/0093).

use super::exit::{CliError, USAGE};
use warpfs_engine::gpu::{EngineKind, XtsRoute};

/// Environment variable naming the engine when `--engine` is not given
/// (mounts, containers and `warpfs speed`).
pub const ENV_ENGINE: &str = "WARPFS_ENGINE";

/// The engine `arg` (`--engine`) or `WARPFS_ENGINE` asks for (cpu by
/// default; an unparsable variable is a usage error).
pub(crate) fn engine_kind(arg: Option<EngineKind>) -> Result<EngineKind, CliError> {
    if let Some(k) = arg {
        return Ok(k);
    }
    match std::env::var(ENV_ENGINE) {
        Ok(v) if !v.trim().is_empty() => v
            .parse()
            .map_err(|e| CliError::new(USAGE, format!("{ENV_ENGINE}: {e}"))),
        _ => Ok(EngineKind::Cpu),
    }
}

/// The fused XTS kernels on `kind`'s device (`Cpu`: none), self-tested;
/// unavailable: one warning, and XTS stays on the cpu. Opens a driver
/// (threads): call it after the daemon's fork.
pub(crate) fn open(kind: EngineKind) -> Option<XtsRoute> {
    if kind == EngineKind::Cpu {
        return None;
    }
    match XtsRoute::open(kind) {
        Ok(r) => {
            tracing::info!(
                "xts: requests of {} bytes or more run on {}",
                r.min_bytes(),
                warpfs_engine::XtsDevicePort::name(&r)
            );
            Some(r)
        }
        Err(e) => {
            tracing::warn!("--engine {kind}: the XTS kernels are unavailable ({e}); XTS runs on the cpu");
            None
        }
    }
}
