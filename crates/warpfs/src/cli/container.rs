//! `warpfs container create|open|resize`: an encrypted container image
//! (FORMAT.md 9) exposed as one plaintext file, MOUNTPOINT/volume.

use super::exit::{CliError, ERROR, USAGE};
use super::PassArgs;
use crate::container::fs::ContainerFs;
use crate::container::image::{self, Image, HEADER, SECTOR};
use crate::fuse::{MountConfig, MountOption, Transport};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use warpfs_config::KdfParams;
use warpfs_crypto::keys::Subkeys;
use warpfs_crypto::XtsCipher;
use warpfs_engine::gpu::EngineKind;
use warpfs_engine::XtsDevicePort;

/// `warpfs container ...`.
#[derive(Args, Debug)]
pub struct ContainerArgs {
    #[command(subcommand)]
    cmd: ContainerCmd,
}

#[derive(Subcommand, Debug)]
enum ContainerCmd {
    /// Create a sparse container image of --size bytes (XTS-AES-256 sectors).
    Create {
        #[command(flatten)]
        pass: PassArgs,
        /// Size of the exposed file: bytes, or with K, M, G, T (multiple of 4096).
        #[arg(long, value_parser = image::parse_size)]
        size: u64,
        /// Argon2id memory in KiB (at least 32768).
        #[arg(long, value_name = "KIB")]
        kdf_memory: Option<u32>,
        /// Argon2id iterations (at least 2).
        #[arg(long, value_name = "N")]
        kdf_iterations: Option<u32>,
        /// The image file to create (must not exist).
        file: PathBuf,
    },
    /// Mount the container: MOUNTPOINT/volume is the plaintext (daemonizes).
    Open {
        #[command(flatten)]
        pass: PassArgs,
        /// The image file.
        file: PathBuf,
        /// An empty directory.
        mountpoint: PathBuf,
        /// How requests reach the daemon: auto, uring or dev (as for
        /// `warpfs mount`) [default: $WARPFS_TRANSPORT, else auto].
        #[arg(long, value_name = "auto|uring|dev", value_parser = parse_transport)]
        transport: Option<Transport>,
        /// Where requests of 128 KiB or more are encrypted and decrypted:
        /// cpu, or the XTS kernels of opencl, cuda, or auto (cuda if present,
        /// else an OpenCL GPU, else cpu); the data crosses to the device. An
        /// unavailable device falls back to cpu with a warning [default:
        /// $WARPFS_ENGINE, else cpu].
        #[arg(long, value_name = "cpu|opencl|cuda|auto", value_parser = parse_engine)]
        engine: Option<EngineKind>,
    },
    /// Grow or shrink a closed container to --size (shrinking drops the end).
    Resize {
        /// New size: bytes, or with K, M, G, T (multiple of 4096).
        #[arg(long, value_parser = image::parse_size)]
        size: u64,
        /// The image file.
        file: PathBuf,
    },
}

fn err(e: impl std::fmt::Display) -> CliError {
    CliError::new(ERROR, e.to_string())
}

pub fn run(a: ContainerArgs) -> Result<(), CliError> {
    match a.cmd {
        ContainerCmd::Create {
            pass,
            size,
            kdf_memory,
            kdf_iterations,
            file,
        } => {
            let mut kdf = KdfParams::DEFAULT;
            if let Some(m) = kdf_memory {
                kdf.memory_kib = m;
            }
            if let Some(t) = kdf_iterations {
                kdf.iterations = t;
            }
            kdf.validate().map_err(|e| CliError::new(USAGE, e.to_string()))?;
            if warpfs_backing::host::symlink_metadata(&file).is_ok() {
                return Err(CliError::new(
                    super::exit::NOT_EMPTY,
                    format!("{} exists", file.display()),
                ));
            }
            let pw = pass.source().read("New password: ", true)?;
            let master = image::create(&file, pw.bytes(), size, kdf).map_err(err)?;
            println!(
                "Created warpfs container {} ({size} bytes, XTS-AES-256).",
                file.display()
            );
            println!();
            println!("Your master key is:");
            println!();
            println!("    {}", master.recovery_text());
            println!();
            println!("Keep it somewhere safe and offline; it is not shown again.");
            Ok(())
        }
        ContainerCmd::Resize { size, file } => {
            let f = warpfs_backing::host::open_with(&file, std::fs::OpenOptions::new().read(true).write(true))
                .map_err(|e| err(format!("{}: {e}", file.display())))?;
            image::read_header(&f).map_err(|e| CliError::new(super::exit::BAD_CONFIG, e))?;
            debug_assert!(size.is_multiple_of(SECTOR));
            f.set_len(HEADER + size).map_err(err)?;
            f.sync_all().map_err(err)?;
            println!("Resized {} to {size} bytes.", file.display());
            Ok(())
        }
        ContainerCmd::Open {
            pass,
            file,
            mountpoint,
            transport,
            engine,
        } => open(pass, file, mountpoint, transport, engine),
    }
}

fn parse_transport(s: &str) -> Result<Transport, String> {
    s.parse()
}

fn parse_engine(s: &str) -> Result<EngineKind, String> {
    s.parse()
}

fn open(
    pass: PassArgs,
    file: PathBuf,
    mountpoint: PathBuf,
    transport: Option<Transport>,
    engine: Option<EngineKind>,
) -> Result<(), CliError> {
    let transport = Transport::resolve(transport).map_err(|e| CliError::new(USAGE, e))?;
    let engine = super::xts_device::engine_kind(engine)?;
    let f = warpfs_backing::host::open_with(&file, std::fs::OpenOptions::new().read(true).write(true))
        .map_err(|e| err(format!("{}: {e}", file.display())))?;
    let cfg = image::read_header(&f).map_err(|e| CliError::new(super::exit::BAD_CONFIG, e))?;
    let pw = pass.source().read("Password: ", false)?;
    let master = cfg.unlock(pw.bytes())?;
    drop(pw);
    let mut img = Image::new(f, &cfg, &master).map_err(|e| CliError::new(super::exit::BAD_CONFIG, e))?;
    // The device gets the raw XTS key after the fork (drivers start
    // threads); only a device engine keeps it that long.
    let raw = (engine != EngineKind::Cpu).then(|| Subkeys::xts_key_bytes_gen(&master, cfg.key_bits(), 0));
    drop(master);
    let mut config = MountConfig::default();
    let name = warpfs_backing::host::canonicalize(&file).unwrap_or(file.clone());
    config.mount_options = vec![
        MountOption::FSName(name.to_string_lossy().replace(',', "_")),
        MountOption::Subtype("warpfs-container".into()),
        MountOption::DefaultPermissions,
        MountOption::RW,
    ];
    config.n_threads = Some(2);

    let Some(ready) = super::daemon::daemonize("container")? else {
        return Ok(());
    };
    // The XTS device's notes and warnings go to the system log.
    if let Err(e) = super::logging::init(super::logging::Target::Syslog) {
        ready.fail(&e);
    }
    // Memory locks are not inherited across fork (non-dumpability is).
    if let Err(e) = warpfs_crypto::locked::lock_all() {
        eprintln!("warpfs: warning: cannot lock key memory in RAM ({e}); keys may be swapped out");
    }
    let mut counted = None;
    if let Some(raw) = &raw {
        if let Some(route) = super::xts_device::open(engine) {
            match route.key(XtsCipher::Aes, raw) {
                Ok(d) => {
                    img.use_xts_device(d);
                    counted = Some(route);
                }
                Err(e) => tracing::warn!("XTS device: {e}; XTS runs on the cpu"),
            }
        }
    }
    drop(raw);
    let mut fs = ContainerFs::new(img);
    if let Some(route) = counted {
        fs = fs.with_xts_device(Box::new(route));
    }
    let ring = crate::fuse::transport::uring::RingOptions::default();
    let mut mounting = match crate::fuse::serve(
        crate::fuse::Served::new(fs, None, None),
        &mountpoint,
        &config,
        transport,
        ring,
    ) {
        Ok(s) => s,
        Err(e) => ready.fail(&e),
    };
    // SIGTERM unmounts; while a loop device or a program still holds the
    // image open the mount is detached and served until it lets go.
    if let Err(e) = crate::fuse::stop_on_signals(&mountpoint, mounting.unmount_callable()) {
        ready.fail(&format!("cannot take SIGINT/SIGTERM: {e}"));
    }
    let session = match mounting.start() {
        Ok(s) => s,
        Err(e) => ready.fail(&e),
    };
    ready.live();
    std::process::exit(match session.run() {
        Ok(()) => 0,
        Err(_) => 1,
    });
}
