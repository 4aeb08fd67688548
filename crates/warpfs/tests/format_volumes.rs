//! Frozen example volumes (FORMAT.md: one per released format version) must
//! keep mounting and show exactly their `expected/` tree.
//!
//! Layout: `tests/volumes/<name>/{cipher/, password.txt, expected/}`, made by
//! `tests/volumes/make.sh` (keyslot volumes, format 3, also keep the
//! `recovery.txt` their `init` printed). `<name>` ends in `-gcm`, `-ctr`
//! (or another mode name), which `warpfs info` must report; `-aes128-` in
//! the name marks 128-bit content keys (`--key-bits 128`), the others have
//! the 256-bit default.

#[macro_use]
mod common;

use common::*;
use std::fs;
use std::path::{Path, PathBuf};

fn volumes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("volumes")
}

fn example_volumes() -> Vec<PathBuf> {
    let dir = volumes_dir();
    let mut v: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| rd.map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    v.sort();
    assert!(
        !v.is_empty(),
        "no example volumes under {}: run `bash {}/make.sh` (as root, with the release binary) \
         to freeze the current format",
        dir.display(),
        dir.display()
    );
    for vol in &v {
        for part in ["cipher", "password.txt", "expected"] {
            assert!(vol.join(part).exists(), "example volume {} lacks {part}", vol.display());
        }
        assert!(
            vol.join("cipher").join("warpfs.conf").is_file(),
            "{}/cipher has no warpfs.conf",
            vol.display()
        );
    }
    v
}

#[test]
fn example_volumes_present() {
    let vols = example_volumes();
    // Every format version has its example; the keyslot one its recovery key.
    for v in ["v1-gcm", "v2-gcm", "v3-gcm"] {
        assert!(vols.iter().any(|p| p.ends_with(v)), "no example volume {v}");
    }
    // 128-bit content keys (`--key-bits 128`) in the nonce modes.
    for v in ["v3-aes128-gcm", "v3-aes128-ctr"] {
        let conf = fs::read_to_string(volumes_dir().join(v).join("cipher/warpfs.conf"))
            .unwrap_or_else(|e| panic!("no example volume {v}: {e}"));
        let j: serde_json::Value = serde_json::from_str(&conf).unwrap();
        assert_eq!(j["key_bits"], 128, "{v}: {conf}");
    }
    let v3 = volumes_dir().join("v3-gcm");
    assert!(v3.join("recovery.txt").is_file());
    let conf = fs::read_to_string(v3.join("cipher/warpfs.conf")).unwrap();
    assert!(
        conf.contains("\"keyslots\"") && conf.contains("\"version\": 3"),
        "{conf}"
    );
    // A tpm2 slot's fields are frozen too (the volume opens by its password).
    let t = volumes_dir().join("v3-tpm2-gcm/cipher/warpfs.conf");
    let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(&t).unwrap()).unwrap();
    let slot = &j["keyslots"][2];
    assert_eq!(slot["kind"], "tpm2", "{j}");
    assert_eq!(slot["tpm2"]["pcrs"], serde_json::json!([7]), "{j}");
}

#[test]
fn example_volumes_info() {
    for vol in example_volumes() {
        let o = warpfs(args!["info", vol.join("cipher")]);
        o.expect_ok(&format!("info of {}", vol.display()));
        let name = vol.file_name().unwrap().to_string_lossy().into_owned();
        if let Some((_, mode)) = name.rsplit_once('-') {
            assert!(
                o.stdout.to_lowercase().contains(&mode.to_lowercase()),
                "info of {name} does not mention mode {mode}\n{o}"
            );
        }
        // `-aes128-` volumes have 128-bit keys; the others the 256-bit default.
        let bits = if name.contains("-aes128-") { "128" } else { "256" };
        let size = o
            .stdout
            .lines()
            .find(|l| l.starts_with("key size:"))
            .unwrap_or_default();
        assert!(
            size.contains(&format!("-{bits}")),
            "info of {name} does not give {bits}-bit keys\n{o}"
        );
    }
}

#[test]
fn example_volumes_mount_and_match_expected() {
    let vols = example_volumes();
    require_fuse!();
    for vol in vols {
        let name = vol.file_name().unwrap().to_string_lossy().into_owned();
        // Work on a copy: mounting must not be able to change the repo.
        let mut v = Volume::blank(Mode::Gcm);
        copy_tree(&vol.join("cipher"), &v.cipher);
        fs::copy(vol.join("password.txt"), &v.passfile).unwrap();
        let before = dir_state(&v.cipher);
        let o = v.try_mount(&[]);
        if name.contains("-midupgrade") {
            // Its files are of both versions until the upgrade finishes
            // (midupgrade_volumes_finish_their_upgrade): refused, untouched.
            o.expect_code(18, &name);
            assert!(o.stderr.contains("run `warpfs upgrade` again"), "{name}\n{o}");
            assert_eq!(dir_state(&v.cipher), before, "{name}: a refused mount changed it");
            continue;
        }
        assert!(o.ok(), "example volume {name} no longer mounts\n{o}\nlog:\n{}", v.log());
        let want = snapshot(&vol.join("expected"));
        assert!(!want.is_empty(), "{name}/expected is empty");
        assert_snapshots_eq(&snapshot(&v.mnt), &want, &format!("example volume {name}"));
        v.unmount();
        // A keyslot volume opens with its recovery key too.
        if let Ok(rk) = fs::read_to_string(vol.join("recovery.txt")) {
            assert!(!rk.trim().is_empty());
            let o = std::process::Command::new(BIN)
                .args(["mount", "--masterkey", "stdin"])
                .arg(&v.cipher)
                .arg(&v.mnt)
                .stdin(fs::File::open(vol.join("recovery.txt")).unwrap())
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{name}: mount by recovery key: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert_snapshots_eq(
                &snapshot(&v.mnt),
                &want,
                &format!("example volume {name}, recovery key"),
            );
            unmount_path(&v.mnt).unwrap();
        }
        // Reading a volume writes nothing.
        let after = dir_state(&v.cipher);
        let changed: Vec<String> = after
            .iter()
            .filter(|(p, st)| before.get(*p).map(|b| b.0 != st.0 || b.1 != st.1 || b.3 != st.3) != Some(false))
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert!(
            changed.is_empty() && after.len() == before.len(),
            "mounting and reading {name} changed the cipher dir: {changed:?}"
        );
    }
}

/// A volume frozen mid-rekey finishes its rekey with this warpfs. One an
/// earlier warpfs left (its config without a rekey ID) is given an ID
/// first, so that its undo records carry one (record version 3).
#[test]
fn midrekey_volumes_finish_their_rekey() {
    let vols: Vec<PathBuf> = example_volumes()
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains("-midrekey"))
        .collect();
    assert!(vols.len() >= 2, "{vols:?}");
    require_fuse!();
    for vol in vols {
        let name = vol.file_name().unwrap().to_string_lossy().into_owned();
        let mut v = Volume::blank(Mode::Gcm);
        copy_tree(&vol.join("cipher"), &v.cipher);
        fs::copy(vol.join("password.txt"), &v.passfile).unwrap();
        let conf = || fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
        let rekey = |kill: Option<&str>| {
            let mut cmd = std::process::Command::new(BIN);
            cmd.args(["rekey", "--jobs", "1", "--passfile"])
                .arg(&v.passfile)
                .arg(&v.cipher);
            if let Some(k) = kill {
                cmd.env("WARPFS_REKEY_KILL", k);
            }
            run_cmd(cmd, std::time::Duration::from_secs(300))
        };
        let id = |c: &str| c.lines().find(|l| l.contains("\"rekey_id\"")).map(str::to_string);
        let before = id(&conf());
        assert!(conf().contains("\"rekey_target\""), "{name}");
        let o = rekey(Some("saved:1"));
        assert_eq!(o.code, None, "{name}: not killed\n{o}");
        let j = fs::read(v.cipher.join("warpfs.rekey.undo-0")).unwrap();
        assert_eq!(&j[8..10], &3u16.to_le_bytes(), "{name}: record version");
        let now = id(&conf());
        assert!(now.is_some() && conf().contains("\"rekey-id\""), "{name}: {}", conf());
        if before.is_some() {
            assert_eq!(now, before, "{name}: the rekey kept its ID");
        }
        rekey(None).expect_ok(&format!("{name}: the rekey finishes"));
        assert!(!conf().contains("rekey"), "{name}: {}", conf());
        let o = v.try_mount(&[]);
        assert!(o.ok(), "{name}\n{o}");
        assert_snapshots_eq(&snapshot(&v.mnt), &snapshot(&vol.join("expected")), &name);
        v.unmount();
    }
}

/// A volume frozen mid-upgrade to file summaries (a file converted, one
/// with its record but its old header, others untouched) finishes its
/// upgrade with this warpfs, then mounts with summaries and checks clean.
#[test]
fn midupgrade_volumes_finish_their_upgrade() {
    let vols: Vec<PathBuf> = example_volumes()
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains("-midupgrade"))
        .collect();
    assert!(!vols.is_empty(), "no example volume mid-upgrade");
    require_fuse!();
    for vol in vols {
        let name = vol.file_name().unwrap().to_string_lossy().into_owned();
        let mut v = Volume::blank(Mode::Gcm);
        copy_tree(&vol.join("cipher"), &v.cipher);
        fs::copy(vol.join("password.txt"), &v.passfile).unwrap();
        let conf = || fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
        assert!(conf().contains("\"summary-upgrade\""), "{name}");
        let o = warpfs(args!["upgrade", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok(&name);
        assert!(o.stderr.contains("resuming"), "{name}\n{o}");
        assert!(
            conf().contains("\"file-summary\"") && !conf().contains("summary-upgrade"),
            "{name}"
        );
        let o = v.try_mount(&[]);
        assert!(o.ok(), "{name}\n{o}");
        assert_snapshots_eq(&snapshot(&v.mnt), &snapshot(&vol.join("expected")), &name);
        v.unmount();
        let o = warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok(&name);
        assert!(o.stdout.contains("fsck: clean"), "{name}\n{o}");
    }
}
