//! `--engine cpu|opencl|cuda|auto`: open the asked-for backend, or fall
//! back to the cpu with one clear line saying why.

use super::DeviceBackend;
use crate::backend::{Backend, CpuBackend};

/// Which mask backend a mount asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// AES on the CPU (AES-NI when present).
    #[default]
    Cpu,
    /// Any OpenCL device (pocl on a CPU included).
    OpenCl,
    /// CUDA device 0.
    Cuda,
    /// cuda if present, else an OpenCL GPU (not pocl, not a CPU device), else cpu.
    Auto,
}

impl std::str::FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "opencl" | "cl" => Ok(Self::OpenCl),
            "cuda" => Ok(Self::Cuda),
            "auto" => Ok(Self::Auto),
            _ => Err(format!("'{s}' is not an engine (cpu, opencl, cuda, auto)")),
        }
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::OpenCl => "opencl",
            Self::Cuda => "cuda",
            Self::Auto => "auto",
        })
    }
}

/// The backend picked and what to say about it.
pub struct Selected {
    /// The backend to hand to `Engine::with_backend`.
    pub backend: Box<dyn Backend>,
    /// Whether it is a device backend (speculation defaults to on).
    pub device: bool,
    /// The engine running: `Cpu`, `OpenCl` or `Cuda` (never `Auto`); an
    /// `xts` volume or a container opens its XTS kernels on the same kind.
    pub kind: EngineKind,
    /// One line for the info log: which backend and why.
    pub note: String,
    /// One line for a warning when the asked-for engine is unavailable.
    pub warning: Option<String>,
}

fn cpu(note: String, warning: Option<String>) -> Selected {
    Selected {
        backend: Box::new(CpuBackend),
        device: false,
        kind: EngineKind::Cpu,
        note,
        warning,
    }
}

fn device(b: DeviceBackend, note: String) -> Selected {
    let kind = if Backend::name(&b).starts_with("cuda") {
        EngineKind::Cuda
    } else {
        EngineKind::OpenCl
    };
    Selected {
        backend: Box::new(b),
        device: true,
        kind,
        note,
        warning: None,
    }
}

/// Open the backend `kind` asks for; never fails (cpu is the fallback).
pub fn select_backend(kind: EngineKind) -> Selected {
    match kind {
        EngineKind::Cpu => cpu("engine cpu: asked for".into(), None),
        EngineKind::OpenCl => match DeviceBackend::opencl(true) {
            Ok(b) => {
                let n = Backend::name(&b);
                device(b, format!("engine opencl: asked for; {n}"))
            }
            Err(e) => cpu(
                "engine cpu: opencl unavailable".into(),
                Some(format!("--engine opencl unavailable ({e}); using the cpu backend")),
            ),
        },
        EngineKind::Cuda => match DeviceBackend::cuda() {
            Ok(b) => {
                let n = Backend::name(&b);
                device(b, format!("engine cuda: asked for; {n}"))
            }
            Err(e) => cpu(
                "engine cpu: cuda unavailable".into(),
                Some(format!("--engine cuda unavailable ({e}); using the cpu backend")),
            ),
        },
        EngineKind::Auto => {
            let cuda_why = if DeviceBackend::cuda_present() {
                match DeviceBackend::cuda() {
                    Ok(b) => {
                        let n = Backend::name(&b);
                        return device(b, format!("engine auto: cuda, a CUDA device is present; {n}"));
                    }
                    Err(e) => e,
                }
            } else {
                "no libcuda".to_string()
            };
            match DeviceBackend::opencl(false) {
                Ok(b) => {
                    let n = Backend::name(&b);
                    device(
                        b,
                        format!("engine auto: opencl, no cuda ({cuda_why}) but an OpenCL GPU; {n}"),
                    )
                }
                Err(e) => cpu(
                    format!("engine auto: cpu; no cuda ({cuda_why}), no OpenCL GPU ({e})"),
                    None,
                ),
            }
        }
    }
}
