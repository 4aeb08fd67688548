//! `warpfs name decrypt|encrypt` (FORMAT.md 13.6): backing paths to
//! plaintext paths and back, with the password, with a keyfile, and with no
//! secret through a live mount; names from a sync tool's version history
//! (`.stversions/…~DATE`), deleted files' names, conflict copies and long
//! names.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};

const ST: &str = ".sync-conflict-20261125-141403-ABCDEFG";

fn name(v: &Volume, what: &str, secret: &[&str], paths: &[&Path]) -> Out {
    let mut a: Vec<std::ffi::OsString> = vec!["name".into(), what.into()];
    a.extend(secret.iter().map(Into::into));
    a.push(v.cipher.clone().into());
    a.extend(paths.iter().map(|p| p.as_os_str().to_owned()));
    warpfs(a)
}

fn lines(o: &Out) -> Vec<String> {
    o.stdout.lines().map(str::to_string).collect()
}

#[test]
fn names_translate_both_ways_with_the_password_and_through_a_mount() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    let long = "n".repeat(200);
    fs::create_dir_all(v.p("a/b")).unwrap();
    write_file(&v.p("a/b/report.txt"), b"report");
    write_file(&v.p(format!("a/{long}")), b"long");
    write_file(&v.p("a/b/gone.txt"), b"soon deleted");
    let pass = ["--passfile".to_string(), v.passfile.display().to_string()];
    let pass: Vec<&str> = pass.iter().map(String::as_str).collect();
    // Through the live mount, no secret: plaintext → backing paths.
    let plain = [
        Path::new("/a/b/report.txt"),
        Path::new(&format!("/a/{long}")),
        Path::new("/a/b/gone.txt"),
    ]
    .map(Path::to_path_buf);
    let refs: Vec<&Path> = plain.iter().map(PathBuf::as_path).collect();
    let o = name(&v, "encrypt", &[], &refs);
    o.expect_ok("encrypt through the mount");
    let backing: Vec<PathBuf> = lines(&o).into_iter().map(PathBuf::from).collect();
    assert_eq!(backing.len(), 3, "{o}");
    for b in &backing {
        assert!(
            b.starts_with(&v.cipher) && b.exists(),
            "{} is not a backing file\n{o}",
            b.display()
        );
    }
    assert!(backing[1]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("warpfs.long."));
    // ... and back, through the mount.
    let rel: Vec<PathBuf> = backing
        .iter()
        .map(|b| b.strip_prefix(&v.cipher).unwrap().to_path_buf())
        .collect();
    let refs: Vec<&Path> = rel.iter().map(PathBuf::as_path).collect();
    let o = name(&v, "decrypt", &[], &refs);
    o.expect_ok("decrypt through the mount");
    assert_eq!(
        lines(&o),
        plain.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "{o}"
    );
    // The same with the password, the volume unmounted: absolute and
    // relative backing paths.
    fs::remove_file(v.p("a/b/gone.txt")).unwrap();
    v.unmount();
    let o = name(
        &v,
        "encrypt",
        &pass,
        &plain.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
    );
    o.expect_ok("encrypt with the password");
    assert_eq!(
        lines(&o),
        backing.iter().map(|b| b.display().to_string()).collect::<Vec<_>>()
    );
    let abs: Vec<&Path> = vec![&backing[0], &rel[1]];
    let o = name(&v, "decrypt", &pass, &abs);
    o.expect_ok("decrypt with the password");
    assert_eq!(lines(&o), vec!["/a/b/report.txt".to_string(), format!("/a/{long}")]);
    // A deleted file's name (from a version history or a trash), under
    // Syncthing's .stversions with its version suffix, and a conflict copy.
    let version = Path::new(".stversions").join(format!("{}~20261125-141403", rel[2].display()));
    let copy = PathBuf::from(format!("{}{ST}", rel[0].display()));
    fs::copy(&backing[0], v.cipher.join(&copy)).unwrap();
    let o = name(&v, "decrypt", &pass, &[&rel[2], &version, &copy]);
    o.expect_ok("decrypt names that are gone, versions and copies");
    assert_eq!(
        lines(&o),
        vec![
            "/a/b/gone.txt".to_string(),
            "/a/b/gone.txt~20261125-141403".to_string(),
            format!("/a/b/report.txt{ST}")
        ]
    );
    // Something that is not an entry fails, the rest still print.
    let o = name(&v, "decrypt", &pass, &[Path::new("warpfs.conf"), &rel[0]]);
    assert!(!o.ok(), "{o}");
    assert_eq!(lines(&o), vec!["/a/b/report.txt".to_string()]);
    assert!(o.stderr.contains("warpfs.conf"), "{o}");
    // A wrong password is refused.
    let bad = v.root().join("bad");
    fs::write(&bad, "wrong\n").unwrap();
    let o = name(&v, "decrypt", &["--passfile", bad.to_str().unwrap()], &[&rel[0]]);
    assert!(!o.ok() && o.stdout.is_empty(), "{o}");
}

#[test]
fn names_translate_with_a_keyfile() {
    require_fuse!();
    let mut v = Volume::blank(Mode::Gcm);
    let kf = v.root().join("key.bin");
    fs::write(&kf, [7u8; 32]).unwrap();
    let (pf, kfs) = (v.passfile.display().to_string(), kf.display().to_string());
    warpfs(args!["init", "--passfile", &pf, "--keyfile", &kfs, &v.cipher]).expect_ok("init --keyfile");
    let mut a: Vec<std::ffi::OsString> = vec!["--keyfile".into(), kf.clone().into()];
    v.mount_args.append(&mut a);
    v.mount();
    write_file(&v.p("secret.txt"), b"x");
    v.unmount();
    let o = name(
        &v,
        "encrypt",
        &["--passfile", &pf, "--keyfile", &kfs],
        &[Path::new("/secret.txt")],
    );
    o.expect_ok("encrypt with a keyfile");
    let b = PathBuf::from(o.stdout.trim());
    assert!(b.exists(), "{o}");
    let o = name(&v, "decrypt", &["--passfile", &pf, "--keyfile", &kfs], &[&b]);
    o.expect_ok("decrypt with a keyfile");
    assert_eq!(o.stdout.trim(), "/secret.txt");
    // Without the keyfile the password alone does not unlock.
    assert!(!name(&v, "decrypt", &["--passfile", &pf], &[&b]).ok());
}
