//! `-o` mount options and the mount-helper calling conventions.
//!
//! `warpfs CIPHERDIR MOUNTPOINT -o OPTS` is how `mount.fuse3` runs the file
//! system of an fstab entry of type `fuse.warpfs`; `mount.warpfs CIPHERDIR
//! MOUNTPOINT [-sfnv] [-o OPTS] [-t warpfs]` is how mount(8) runs the helper
//! of type `warpfs`. Both become `warpfs mount -o OPTS -- CIPHERDIR
//! MOUNTPOINT`. In any `-o` list (of `warpfs mount` too):
//! - the kernel's and FUSE's options (`ro`, `allow_other`, `noatime`, ...)
//!   go to the mount;
//! - every long option of `warpfs mount` is an option: `passfile=FILE`,
//!   `idle=10m`, `engine_threads=4`, `no_xattr`, `setuid=USER`,
//!   `uring_enable` (`_` or `-` alike);
//! - what mount(8) and systemd keep for themselves (`nofail`, `_netdev`,
//!   `noauto`, `user`, `users`, `x-systemd.*`, ...) is accepted and ignored,
//!   as other FUSE file systems do;
//! - anything else is one error line and exit 2.

use super::exit::{CliError, USAGE};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// Options handed to the kernel mount as they are (`session::MountOptions`).
const KERNEL: &[&str] = &[
    "ro",
    "rw",
    "allow_other",
    "default_permissions",
    "nosuid",
    "suid",
    "nodev",
    "dev",
    "noexec",
    "exec",
    "noatime",
    "atime",
    "sync",
    "async",
    "dirsync",
];

/// Options for mount(8), systemd or mount.fuse3, not for warpfs: accepted
/// and ignored. `relatime` is the kernel's default for a new mount.
const IGNORED: &[&str] = &[
    "nofail", "_netdev", "noauto", "auto", "user", "users", "nouser", "owner", "group", "defaults", "relatime",
    "noblock",
];

/// Prefixes of ignored options (`x-systemd.automount`, `comment=...`).
/// `setuid=` and `drop_privileges` are `warpfs mount` options.
const IGNORED_PREFIXES: &[&str] = &["x-", "comment=", "subtype="];

/// What one `-o` item is.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    /// For the kernel mount.
    Kernel,
    /// For mount(8)/systemd: ignored.
    Ignored,
    /// A `warpfs mount` option: these arguments.
    Flag(Vec<OsString>),
}

/// The long options of `warpfs mount`: name (and aliases), whether it takes a value.
fn long_options(mount: &clap::Command) -> Vec<(Vec<String>, bool)> {
    mount
        .get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let mut names = vec![long.to_string()];
            names.extend(a.get_all_aliases().unwrap_or_default().iter().map(|s| s.to_string()));
            Some((names, a.get_action().takes_values()))
        })
        .collect()
}

fn classify(item: &str, longs: &[(Vec<String>, bool)]) -> Result<Item, String> {
    if KERNEL.contains(&item) {
        return Ok(Item::Kernel);
    }
    if IGNORED.contains(&item) || IGNORED_PREFIXES.iter().any(|p| item.starts_with(p)) {
        return Ok(Item::Ignored);
    }
    let (name, value) = match item.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (item, None),
    };
    let dashed = name.replace('_', "-");
    let Some((names, takes)) = longs.iter().find(|(names, _)| names.contains(&dashed)) else {
        return Err(format!("unknown mount option '{item}'"));
    };
    let long = format!("--{}", names[0]);
    match (value, *takes) {
        (Some(v), true) => Ok(Item::Flag(vec![long.into(), v.into()])),
        (None, false) => Ok(Item::Flag(vec![long.into()])),
        (None, true) => Err(format!("mount option '{name}' needs a value ({name}=...)")),
        (Some(_), false) => Err(format!("mount option '{name}' takes no value")),
    }
}

fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|o| !o.is_empty())
}

/// The `warpfs mount` arguments that the `-o` lists ask for (empty when
/// they hold only kernel and ignored options).
pub fn flags(lists: &[String], mount: &clap::Command) -> Result<Vec<OsString>, CliError> {
    let longs = long_options(mount);
    let mut out = Vec::new();
    for list in lists {
        for item in items(list) {
            if let Item::Flag(f) = classify(item, &longs).map_err(|e| CliError::new(USAGE, e))? {
                out.extend(f);
            }
        }
    }
    Ok(out)
}

/// The kernel's part of an `-o` list (the rest was checked by [`flags`]).
pub fn kernel_part(list: &str) -> String {
    items(list).filter(|i| KERNEL.contains(i)).collect::<Vec<_>>().join(",")
}

/// `argv` with the `warpfs mount` arguments of its `-o` lists inserted
/// after the subcommand (at index 2: `warpfs mount ...`).
pub fn with_flags(mut argv: Vec<OsString>, flags: Vec<OsString>) -> Vec<OsString> {
    let at = argv.len().min(2);
    argv.splice(at..at, flags);
    argv
}

/// What a mount-helper command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Helper {
    /// Not a helper call: parse `argv` as it is.
    No,
    /// Mount: this `warpfs mount` command line.
    Mount(Vec<OsString>),
    /// `-f` (mount(8)'s fake mode): check the options, mount nothing.
    Fake(Vec<OsString>),
    /// `-o remount,...`: change the kernel options of the mount at this
    /// mountpoint (`fuse::remount`); `true`: fake mode, change nothing.
    Remount(OsString, String, bool),
}

/// Recognise the mount-helper calling conventions: the program is called
/// `mount.*` (`mount.warpfs`, `mount.fuse.warpfs`), or its first argument
/// is neither an option nor a subcommand (`warpfs CIPHERDIR MOUNTPOINT
/// -o ...`, as mount.fuse3 calls it).
pub fn helper(argv: &[OsString], subcommands: &[String]) -> Result<Helper, CliError> {
    let prog = argv
        .first()
        .map(|p| std::path::Path::new(p).file_name().unwrap_or(p).as_bytes().to_vec())
        .unwrap_or_default();
    let named = prog.starts_with(b"mount.");
    let shaped = argv.len() >= 3
        && argv
            .get(1)
            .is_some_and(|a| !a.as_bytes().starts_with(b"-") && !subcommands.iter().any(|s| OsStr::new(s) == a));
    if !named && !shaped {
        return Ok(Helper::No);
    }
    let usage = |m: String| CliError::new(USAGE, m);
    let mut pos: Vec<OsString> = Vec::new();
    let mut opts: Vec<OsString> = Vec::new();
    let (mut fake, mut sloppy) = (false, false);
    let mut it = argv.iter().skip(1);
    let mut only_pos = false;
    while let Some(a) = it.next() {
        let b = a.as_bytes();
        if only_pos || !b.starts_with(b"-") || b == b"-" {
            pos.push(a.clone());
            continue;
        }
        if b == b"--" {
            only_pos = true;
            continue;
        }
        // Short options, possibly grouped (`-sv`), `-o` and `-t` with their
        // value attached or next.
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                c @ (b'o' | b't' | b'N') => {
                    let v = if i + 1 < b.len() {
                        OsStr::from_bytes(&b[i + 1..]).to_os_string()
                    } else {
                        it.next()
                            .cloned()
                            .ok_or_else(|| usage(format!("option -{} needs a value", c as char)))?
                    };
                    match c {
                        b'o' => opts.push(v),
                        b't' => {
                            let t = v.to_string_lossy();
                            if !matches!(t.as_ref(), "warpfs" | "fuse.warpfs") {
                                return Err(usage(format!("file system type '{t}' is not warpfs")));
                            }
                        }
                        _ => return Err(usage("mount namespaces (-N) are not supported".into())),
                    }
                    i = b.len();
                }
                b'f' => fake = true,
                b's' => sloppy = true,
                b'n' | b'v' => {}
                c => return Err(usage(format!("unknown option -{}", c as char))),
            }
            i += 1;
        }
    }
    if !named && pos.len() != 2 {
        // Not the mount.fuse3 shape after all (a mistyped subcommand):
        // clap says what is wrong.
        return Ok(Helper::No);
    }
    let [src, dir] = <[OsString; 2]>::try_from(pos)
        .map_err(|p| usage(format!("expected CIPHERDIR MOUNTPOINT, got {} argument(s)", p.len())))?;
    let mut list: Vec<String> = opts.iter().map(|o| o.to_string_lossy().into_owned()).collect();
    if list.iter().any(|l| items(l).any(|i| i == "remount")) {
        // The daemon's own options cannot change on a live mount: they
        // must still be options, and only the kernel's are applied.
        let rest: Vec<String> = list
            .iter()
            .map(|l| items(l).filter(|i| *i != "remount").collect::<Vec<_>>().join(","))
            .collect();
        flags(&rest, &super::mount_command())?;
        let kernel: Vec<String> = rest.iter().map(|l| kernel_part(l)).filter(|k| !k.is_empty()).collect();
        return Ok(Helper::Remount(dir, kernel.join(","), fake));
    }
    let mut out: Vec<OsString> = vec![argv[0].clone(), "mount".into()];
    if sloppy {
        // `-s`: drop what is not understood (with a warning) instead of failing.
        list = list.iter().map(|l| drop_unknown(l)).collect();
    }
    for l in list.iter().filter(|l| !l.is_empty()) {
        out.push("-o".into());
        out.push(l.into());
    }
    out.push("--".into());
    out.push(src);
    out.push(dir);
    Ok(if fake { Helper::Fake(out) } else { Helper::Mount(out) })
}

/// An `-o` list without the items no rule knows (sloppy mode).
fn drop_unknown(list: &str) -> String {
    let cmd = super::mount_command();
    let longs = long_options(&cmd);
    items(list)
        .filter(|i| {
            let ok = classify(i, &longs).is_ok();
            if !ok {
                eprintln!("warpfs: ignoring mount option '{i}' (sloppy mode)");
            }
            ok
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn subs() -> Vec<String> {
        vec!["mount".into(), "init".into(), "help".into()]
    }

    #[test]
    fn classifies_kernel_ignored_and_warpfs_options() {
        let cmd = super::super::mount_command();
        let f = flags(
            &["ro,nofail,_netdev,x-systemd.automount,passfile=/k,idle=1s,no_xattr,engine-threads=2".into()],
            &cmd,
        )
        .unwrap();
        assert_eq!(
            f,
            os(&[
                "--passfile",
                "/k",
                "--idle",
                "1s",
                "--no-xattr",
                "--engine-threads",
                "2"
            ])
        );
        assert_eq!(kernel_part("ro,nofail,passfile=/k,noatime"), "ro,noatime");
        // An alias is an option too.
        assert_eq!(flags(&["noxattr".into()], &cmd).unwrap(), os(&["--no-xattr"]));
        // mount.fuse3's own setuid= and drop_privileges are warpfs's
        // options, never ignored.
        assert_eq!(
            flags(&["setuid=root,drop_privileges,uring_enable".into()], &cmd).unwrap(),
            os(&["--setuid", "root", "--drop-privileges", "--uring-enable"])
        );
    }

    #[test]
    fn remount_keeps_the_kernel_options_and_checks_the_rest() {
        let r = helper(
            &os(&["/sbin/mount.warpfs", "/c", "/m", "-o", "remount,ro,passfile=/k,nofail"]),
            &subs(),
        )
        .unwrap();
        assert_eq!(r, Helper::Remount("/m".into(), "ro".into(), false));
        let r = helper(
            &os(&[
                "mount.fuse.warpfs",
                "src",
                "/m",
                "-f",
                "-o",
                "rw",
                "-o",
                "remount,nosuid",
            ]),
            &subs(),
        )
        .unwrap();
        assert_eq!(r, Helper::Remount("/m".into(), "rw,nosuid".into(), true));
        assert!(helper(&os(&["mount.warpfs", "/c", "/m", "-o", "remount,bogus"]), &subs()).is_err());
    }

    #[test]
    fn unknown_or_malformed_options_are_usage_errors() {
        let cmd = super::super::mount_command();
        for bad in ["bogus", "passfile", "no_xattr=1", "ro,frobnicate=3"] {
            let e = flags(&[bad.into()], &cmd).unwrap_err();
            assert_eq!(e.code, USAGE, "{bad}");
            assert!(!e.msg.contains('\n'), "one line: {}", e.msg);
        }
        assert!(flags(&["bogus".into()], &cmd).unwrap_err().msg.contains("'bogus'"));
    }

    #[test]
    fn mount_fuse3_convention_becomes_warpfs_mount() {
        let h = helper(&os(&["warpfs", "/c", "/m", "-o", "rw,passfile=/k"]), &subs()).unwrap();
        assert_eq!(
            h,
            Helper::Mount(os(&["warpfs", "mount", "-o", "rw,passfile=/k", "--", "/c", "/m"]))
        );
        // A subcommand or an option first: not a helper call.
        assert_eq!(
            helper(&os(&["warpfs", "mount", "/c", "/m"]), &subs()).unwrap(),
            Helper::No
        );
        assert_eq!(helper(&os(&["warpfs", "--version"]), &subs()).unwrap(), Helper::No);
        assert_eq!(helper(&os(&["warpfs", "init"]), &subs()).unwrap(), Helper::No);
        // A mistyped subcommand is left to clap.
        assert_eq!(
            helper(&os(&["warpfs", "mout", "/c", "/m"]), &subs()).unwrap(),
            Helper::No
        );
    }

    #[test]
    fn mount_helper_convention_with_short_flags() {
        let h = helper(
            &os(&["/sbin/mount.warpfs", "/c", "/m", "-sn", "-oro", "-t", "warpfs", "-v"]),
            &subs(),
        )
        .unwrap();
        assert_eq!(
            h,
            Helper::Mount(os(&["/sbin/mount.warpfs", "mount", "-o", "ro", "--", "/c", "/m"]))
        );
        let h = helper(&os(&["mount.warpfs", "/c", "/m", "-f", "-o", "ro"]), &subs()).unwrap();
        assert!(matches!(h, Helper::Fake(_)));
        for bad in [
            &["mount.warpfs", "/c"][..],
            &["mount.warpfs", "/c", "/m", "-t", "ext4"],
            &["mount.warpfs", "/c", "/m", "-N", "1"],
            &["mount.warpfs", "/c", "/m", "-o"],
            &["mount.warpfs", "/c", "/m", "-x"],
        ] {
            assert_eq!(helper(&os(bad), &subs()).unwrap_err().code, USAGE, "{bad:?}");
        }
    }

    #[test]
    fn sloppy_mode_drops_unknown_options() {
        let h = helper(
            &os(&["mount.warpfs", "/c", "/m", "-s", "-o", "ro,bogus,idle=5m"]),
            &subs(),
        )
        .unwrap();
        assert_eq!(
            h,
            Helper::Mount(os(&["mount.warpfs", "mount", "-o", "ro,idle=5m", "--", "/c", "/m"]))
        );
    }

    #[test]
    fn flags_go_after_the_subcommand() {
        let argv = os(&["warpfs", "mount", "-o", "idle=1s", "--", "/c", "/m"]);
        assert_eq!(
            with_flags(argv, os(&["--idle", "1s"])),
            os(&["warpfs", "mount", "--idle", "1s", "-o", "idle=1s", "--", "/c", "/m"])
        );
    }
}
