//! An online `warpfs rekey` under real load: several writers, each with an
//! exact model of its own files, race a slow rekey of the mounted volume
//! (writes at random offsets, truncates, unlink and recreate, renames in
//! and out of a subdirectory, fsyncs), a full backing file system in the
//! middle of a rekey, and files replaced by renames while the rekey looks
//! at them. Whatever the interleaving, every file reads back
//! as its model, every backing file ends at the new key generation, no
//! journal is left, the config is final, a remount reads it all again
//! and `warpfs fsck` finds nothing.
//!
//! One test binary (`cargo test -p warpfs --test rekey_storm`): shared
//! checks here, `storm` (the writers), `enospc` (the full disk) and
//! `replaced` (files swapped by renames while the rekey looks at them).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod enospc;
mod replaced;
mod storm;

use common::*;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Plaintext path (relative to the mount) → contents.
type Model = BTreeMap<String, Vec<u8>>;

/// Backing content files (reserved `warpfs.*` names excluded), recursively
/// (one renamed away while they are listed is left out).
fn content_files(v: &Volume) -> Vec<PathBuf> {
    v.backing_paths()
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            !n.starts_with("warpfs.") && fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
        })
        .collect()
}

/// Rekey journals and their empty files.
fn leftovers(v: &Volume) -> Vec<PathBuf> {
    v.backing_paths()
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("warpfs.rekey"))
        .collect()
}

/// Key generation and rekey watermark (header bytes 24..28, 28..32) of a
/// cipher file; `None` if empty.
fn header_gen_mark(p: &Path) -> Option<(u32, u32)> {
    let b = fs::read(p).unwrap();
    if b.is_empty() {
        return None;
    }
    assert_eq!(&b[..4], b"WRPF", "{}", p.display());
    Some((
        u32::from_le_bytes(b[24..28].try_into().unwrap()),
        u32::from_le_bytes(b[28..32].try_into().unwrap()),
    ))
}

/// Every non-empty backing content file is at key generation `gen` with
/// no watermark left set.
#[track_caller]
fn assert_all_at_generation(v: &Volume, gen: u32, ctx: &str) {
    let behind: Vec<(PathBuf, (u32, u32))> = content_files(v)
        .into_iter()
        .filter_map(|p| header_gen_mark(&p).map(|g| (p, g)))
        .filter(|(_, g)| *g != (gen, 0))
        .collect();
    assert!(
        behind.is_empty(),
        "{ctx}: backing files not at generation {gen} (generation, watermark): {behind:?}"
    );
}

/// `warpfs rekey` of the volume (mounted or not) with `extra` arguments.
fn rekey_with(v: &Volume, extra: &[&str]) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.arg("rekey")
        .arg("--passfile")
        .arg(&v.passfile)
        .args(extra)
        .arg(&v.cipher);
    run_cmd(cmd, Duration::from_secs(300))
}

/// `warpfs rekey` started in the background (stdout, stderr piped).
fn spawn_rekey(v: &Volume, extra: &[&str]) -> std::process::Child {
    Command::new(BIN)
        .arg("rekey")
        .arg("--passfile")
        .arg(&v.passfile)
        .args(extra)
        .arg(&v.cipher)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for a background rekey: (exit code, stdout, stderr).
fn wait_rekey(child: std::process::Child) -> (Option<i32>, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The online rekey has listed the volume and begun moving: some backing
/// file carries generation `gen` or a watermark (files may be renamed
/// meanwhile: one gone is skipped).
fn rekey_moving(v: &Volume, gen: u32) -> bool {
    content_files(v)
        .iter()
        .any(|p| fs::read(p).is_ok_and(|b| b.len() >= 32 && (b[24..28] == gen.to_le_bytes() || b[28..32] != [0; 4])))
}

fn fsck(v: &Volume) -> Out {
    warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher])
}

fn config_text(v: &Volume) -> String {
    fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap()
}

/// The config names generation `gen` and no rekey under way.
#[track_caller]
fn assert_config_final(v: &Volume, gen: u32) {
    let cfg = config_text(v);
    assert!(
        cfg.contains(&format!("\"key_generation\": {gen}")) && !cfg.contains("rekey_target"),
        "config not final at generation {gen}:\n{cfg}"
    );
}

/// Every regular file under the mount, relative paths, recursively.
fn mounted_files(v: &Volume) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(root, &e.path(), out);
            } else {
                out.push(e.path().strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(&v.mnt, &v.mnt, &mut out);
    out.sort();
    out
}

/// The mount shows exactly the files of `m`, each with its contents.
#[track_caller]
fn assert_model(v: &Volume, m: &Model, ctx: &str) {
    assert_eq!(
        mounted_files(v),
        m.keys().cloned().collect::<Vec<_>>(),
        "{ctx}: the files in the mount"
    );
    for (k, want) in m {
        let got = fs::read(v.p(k)).unwrap_or_else(|e| panic!("{ctx}: read {k}: {e}"));
        assert_bytes_eq(&got, want, &format!("{ctx}: {k}"));
    }
}

/// A tmpfs mounted at a directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let opts = std::ffi::CString::new(format!("size={size},mode=0755")).unwrap();
        // SAFETY: mount(2) with NUL-terminated strings that outlive the call.
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                cstr(dir).as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs on {}: {}", dir.display(), io::Error::last_os_error());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let c = cstr(&self.0);
        // SAFETY: umount2(2) of the directory this fixture mounted.
        if unsafe { libc::umount2(c.as_ptr(), 0) } != 0 {
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// An initialised, unmounted volume whose cipher dir is a tmpfs of `size`.
fn volume_on_tmpfs(mode: Mode, size: &str) -> (Volume, Tmpfs) {
    let v = Volume::init(mode);
    let saved = v.root().join("saved");
    copy_tree(&v.cipher, &saved);
    let t = Tmpfs::mount(&v.cipher, size);
    copy_tree(&saved, &v.cipher);
    (v, t)
}
