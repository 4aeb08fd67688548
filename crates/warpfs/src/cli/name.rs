//! `warpfs name decrypt|encrypt`: translate paths between CIPHERDIR and the
//! plaintext view, to find a file in a sync tool's version history or trash
//! (decrypt a backing path) or the backing file of a plaintext one
//! (encrypt). With the password or keyfile the volume's keys do it; without
//! one, a live mount of the volume does it by inode numbers (the mount's
//! node ids are backing inode numbers), with no key at all.

use super::exit::{CliError, ERROR};
use super::PassArgs;
use clap::{Args, Subcommand};
use std::ffi::OsString;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use warpfs_volume::{Options, Volume};

/// Arguments of `warpfs name`.
#[derive(Args, Debug)]
pub struct NameArgs {
    #[command(subcommand)]
    cmd: NameCmd,
}

#[derive(Subcommand, Debug)]
enum NameCmd {
    /// Print the plaintext path of each backing path (absolute, or
    /// relative to CIPHERDIR; a leading `.stversions/` is skipped). The
    /// last name need not exist any more.
    Decrypt(PathsArgs),
    /// Print the backing path of each plaintext path (from the volume
    /// root). The last name need not exist (then: where it would go).
    Encrypt(PathsArgs),
}

#[derive(Args, Debug)]
struct PathsArgs {
    /// Password source (without one, a live mount of CIPHERDIR is used
    /// when there is one).
    #[command(flatten)]
    pass: PassArgs,
    #[command(flatten)]
    config: super::ConfigArg,
    /// The volume's cipher directory.
    cipherdir: PathBuf,
    /// The paths to translate.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

impl PathsArgs {
    fn has_secret(&self) -> bool {
        self.pass.passfile.is_some() || self.pass.extpass.is_some() || self.pass.keyfile.is_some()
    }
}

/// One path in, its translation out.
type Translate = dyn Fn(&Path) -> Result<PathBuf, String>;

pub fn run(a: NameArgs) -> Result<(), CliError> {
    let (decrypt, p) = match a.cmd {
        NameCmd::Decrypt(p) => (true, p),
        NameCmd::Encrypt(p) => (false, p),
    };
    let root = warpfs_backing::host::canonicalize(&p.cipherdir)
        .map_err(|e| CliError::new(ERROR, format!("{}: {e}", p.cipherdir.display())))?;
    let mount = if p.has_secret() {
        None
    } else {
        super::mounted::mounted_at(&root).map(PathBuf::from)
    };
    let translate: Box<Translate> = match mount {
        Some(mnt) => {
            let root = root.clone();
            Box::new(move |path: &Path| via_mount(&root, &mnt, path, decrypt))
        }
        None => {
            let cfg = super::unlock::load_main(&root, &p.config)?;
            super::unlock::usable(&cfg, &root)?;
            let pw = p.pass.source().read("Password: ", false)?;
            let (cfg, opened) = super::unlock::unlock(&root, &p.config, cfg, &pw.input())?;
            let master = opened.key;
            drop(pw);
            let vol = Volume::open(&root, &cfg, &master, Options { read_only: true })
                .map_err(|e| CliError::new(super::exit::BAD_CONFIG, e))?;
            drop(master);
            let root = root.clone();
            Box::new(move |path: &Path| {
                if decrypt {
                    vol.decrypt_path(&relative(&root, path)?)
                } else {
                    vol.encrypt_path(path).map(|r| root.join(r))
                }
            })
        }
    };
    let mut failed = 0;
    for path in &p.paths {
        match translate(path) {
            Ok(out) => println!("{}", out.display()),
            Err(e) => {
                eprintln!("warpfs: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        return Err(CliError::new(
            ERROR,
            format!("{failed} of {} path(s) not translated", p.paths.len()),
        ));
    }
    Ok(())
}

/// `path` relative to CIPHERDIR `root` (it may be given absolute).
fn relative(root: &Path, path: &Path) -> Result<PathBuf, String> {
    if path.is_relative() {
        return Ok(path.to_path_buf());
    }
    path.strip_prefix(root)
        .map(Path::to_path_buf)
        .map_err(|_| format!("{}: not inside {}", path.display(), root.display()))
}

/// Translate through the live mount `mnt` of `root`: a backing entry and
/// its plaintext entry have the same inode number (the backing root's
/// number and 1 swapped; FUSE node ids). CIPHERDIR is walked through the
/// backing-store door (no symlink followed), the mount by path.
fn via_mount(root: &Path, mnt: &Path, path: &Path, decrypt: bool) -> Result<PathBuf, String> {
    let door = warpfs_backing::Root::open(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let root_ino = door.top().stat().map_err(|e| e.to_string())?.st_ino;
    let swap = |ino: u64| {
        if ino == root_ino {
            1
        } else if ino == 1 {
            root_ino
        } else {
            ino
        }
    };
    let comps: Vec<OsString> = if decrypt {
        relative(root, path)?.iter().map(OsString::from).collect()
    } else {
        path.strip_prefix("/")
            .unwrap_or(path)
            .iter()
            .map(OsString::from)
            .collect()
    };
    let mut cdir = door.top().share();
    let (mut mpath, mut out) = (mnt.to_path_buf(), PathBuf::new());
    let gone = |p: &Path, e: &dyn std::fmt::Display| {
        format!(
            "{}: {e} (through the mount only existing entries translate; give the password for others)",
            p.display()
        )
    };
    for (i, c) in comps.iter().enumerate() {
        let cname = if decrypt {
            let ino = warpfs_backing::lstat(&cdir.entry(c))
                .map_err(|e| gone(&cdir.path().join(c), &e))?
                .st_ino;
            let want = swap(ino);
            let hit = warpfs_backing::host::read_dir(&mpath)
                .map_err(|e| format!("{}: {e}", mpath.display()))?
                .filter_map(|e| e.ok())
                .find(|e| e.ino() == want)
                .ok_or_else(|| {
                    format!(
                        "{}: no entry with inode {want} in {}",
                        c.to_string_lossy(),
                        mpath.display()
                    )
                })?;
            mpath.push(hit.file_name());
            out.push(hit.file_name());
            c.clone()
        } else {
            mpath.push(c);
            let ino = warpfs_backing::host::symlink_metadata(&mpath)
                .map_err(|e| gone(&mpath, &e))?
                .ino();
            let want = swap(ino);
            let hit = cdir
                .list()
                .map_err(|e| format!("{}: {e}", cdir.path().display()))?
                .into_iter()
                .find(|e| e.ino == want)
                .ok_or_else(|| {
                    format!(
                        "{}: no entry with inode {want} in {}",
                        mpath.display(),
                        cdir.path().display()
                    )
                })?;
            out.push(&hit.name);
            hit.name
        };
        if i + 1 < comps.len() {
            cdir = cdir
                .child(&cname)
                .map_err(|e| format!("{}: {e}", cdir.path().join(&cname).display()))?;
        }
    }
    Ok(if decrypt {
        Path::new("/").join(out)
    } else {
        root.join(out)
    })
}
