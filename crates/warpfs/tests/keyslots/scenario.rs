//! Every kind of slot on one volume, through the command line: a
//! password, a TPM2 slot (swtpm), a FIDO2 slot (the test authenticator),
//! a second password and a recovery key each mount it and read the tree
//! written by the first mount; `key remove --rekey` of the second
//! password keeps every other slot (their secrets given with `--keep`,
//! the hardware ones unsealed or touched again), which all still mount,
//! while the removed password opens nothing, not even a config copy from
//! before (checked through the library).

use super::fido2::with_keys;
use super::revoke::{ivs_of, nothing_decrypts, Removed};
use super::*;
use std::collections::BTreeMap;
use warpfs_testkit::{ctap2::Authenticator, swtpm};

/// One way to open the volume on the command line.
enum Opener<'a> {
    Passfile(&'a Path),
    /// A recovery key's text, given on standard input.
    Recovery(&'a str),
    /// The TPM2 slot, standard input /dev/null (no prompt possible).
    Tpm2,
    Fido2(&'a Authenticator),
}

impl Opener<'_> {
    fn mount(&self, v: &Volume) -> Out {
        match self {
            Opener::Passfile(p) => mount_with(v, &["--passfile", p.to_str().unwrap()]),
            Opener::Recovery(rk) => {
                let mut a = args!["mount", "--log-file", &v.logfile, "--masterkey", "stdin"];
                a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
                with_stdin(a, rk)
            }
            Opener::Tpm2 => mount_with(v, &["--tpm2"]),
            Opener::Fido2(k) => {
                let mut a = args!["mount", "--log-file", &v.logfile, "--fido2"];
                a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
                with_keys(a, &[k.path()])
            }
        }
    }

    /// It mounts `v`, whose tree is `want`.
    fn mounts_and_reads(&self, v: &Volume, want: &BTreeMap<PathBuf, Node>, what: &str) {
        let o = self.mount(v);
        o.expect_ok(&format!("mount by {what}"));
        assert!(!o.stderr.contains("Password"), "{what}: a password was asked for\n{o}");
        let got = snapshot(&v.mnt);
        unmount_path(&v.mnt).unwrap();
        assert_snapshots_eq(&got, want, what);
    }
}

fn recovery_key_in(o: &Out) -> String {
    o.stdout
        .split_whitespace()
        .find(|w| w.len() == 71 && w.matches('-').count() == 7)
        .unwrap_or_else(|| panic!("no recovery key printed:\n{o}"))
        .to_string()
}

/// `(id, kind, label)` of each slot, from `key list --json`.
fn listed(v: &Volume) -> Vec<(u64, String, String)> {
    key_list(v)["keyslots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_u64().unwrap(),
                s["kind"].as_str().unwrap().to_string(),
                s["label"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn slots(want: &[(u64, &str, &str)]) -> Vec<(u64, String, String)> {
    want.iter()
        .map(|(i, k, l)| (*i, k.to_string(), l.to_string()))
        .collect()
}

#[test]
fn every_slot_kind_mounts_then_one_is_revoked() {
    require_fuse!();
    let Some(tpm) = swtpm::for_test() else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = Authenticator::start(&dir.path().join("key"));
    let (mut v, rk) = fresh(&["--file-summary", "on"]);
    let pw2 = file(&v, "pw2", "the second password\n");
    super::tpm2::add_tpm2(&v, &tpm, &["--label", "this machine"]).expect_ok("key add --tpm2");
    super::fido2::add_fido2(&v, &key, "yubi").expect_ok("key add --fido2");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--password",
        "--new-passfile",
        &pw2,
        "--label",
        "old laptop",
        &v.cipher
    ])
    .expect_ok("key add --password");
    let o = warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--recovery",
        "--label",
        "safe",
        &v.cipher
    ]);
    o.expect_ok("key add --recovery");
    let rk2 = recovery_key_in(&o);
    assert_ne!(rk2, rk);
    let all = [
        (0, "password", ""),
        (1, "recovery", ""),
        (2, "tpm2", "this machine"),
        (3, "fido2", "yubi"),
        (4, "password", "old laptop"),
        (5, "recovery", "safe"),
    ];
    assert_eq!(listed(&v), slots(&all));

    // The first mount (the password) writes the tree.
    let want = super::revoke::write_tree(&mut v);

    // Each slot mounts it and reads that tree.
    let kept = [
        (Opener::Passfile(&v.passfile), "the password"),
        (Opener::Recovery(&rk), "the first recovery key"),
        (Opener::Tpm2, "the TPM2 slot"),
        (Opener::Fido2(&key), "the FIDO2 slot"),
        (Opener::Recovery(&rk2), "the added recovery key"),
    ];
    for (o, what) in &kept {
        o.mounts_and_reads(&v, &want, what);
    }
    Opener::Passfile(&pw2).mounts_and_reads(&v, &want, "the second password");

    // Before the removal: a copy of the config, and the removed password
    // opens it to a key that does decrypt the volume (the check can fail).
    let gone = Removed::Password(pw2.clone());
    let old_conf = v.root().join("old.conf");
    fs::copy(v.cipher.join("warpfs.conf"), &old_conf).unwrap();
    let old_ivs = ivs_of(&v.cipher);
    let k = gone.open(&Config::load_file(&old_conf).unwrap());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nothing_decrypts(&v.cipher, &k, &[])));
    assert!(r.is_err(), "the check finds the old key's names before the rekey");

    // Remove slot 4 with a new volume key, giving every other slot's
    // secret: the TPM unseals slot 2 again, the security key is touched
    // for slot 3.
    let (rkf, rk2f) = (file(&v, "rk", &rk), file(&v, "rk2", &rk2));
    let touches = key.touches();
    let o = with_keys(
        args![
            "key",
            "remove",
            "--passfile",
            &v.passfile,
            "--rekey",
            "--yes",
            "--keep",
            format!("1=recovery:{}", rkf.display()),
            "--keep",
            "2=tpm2",
            "--keep",
            "3=fido2",
            "--keep",
            format!("5=recovery:{}", rk2f.display()),
            &v.cipher,
            "4"
        ],
        &[key.path()],
    );
    o.expect_ok("key remove 4 --rekey");
    assert!(
        o.stderr.contains(
            "keyslots kept: keyslot 0 (password), keyslot 1 (recovery), keyslot 2 (tpm2, \"this machine\"), \
             keyslot 3 (fido2, \"yubi\"), keyslot 5 (recovery, \"safe\")\n"
        ),
        "{o}"
    );
    assert!(
        o.stderr
            .contains("keyslots dropped: keyslot 4 (password, \"old laptop\")\n"),
        "{o}"
    );
    assert!(!o.stderr.contains("no recovery slot is left"), "{o}");
    assert_eq!(
        key.touches(),
        touches + 1,
        "the security key is touched once to keep slot 3"
    );
    let left: Vec<_> = all.iter().copied().filter(|s| s.0 != 4).collect();
    assert_eq!(listed(&v), slots(&left), "every slot but 4 kept, labels too");

    // Every slot kept mounts and reads the same tree...
    for (o, what) in &kept {
        o.mounts_and_reads(&v, &want, &format!("{what}, after the rekey"));
    }
    // ...the removed password does not, in the config now or the old one.
    let o = gone.mount(&v, &[]);
    o.expect_code(E_WRONG, "the removed password");
    assert!(!is_mounted(&v.mnt), "{o}");
    let o = gone.mount(&v, &["--config", old_conf.to_str().unwrap()]);
    o.expect_code(E_CONFIG, "the old config");
    assert!(o.stderr.contains("older"), "{o}");
    assert!(!is_mounted(&v.mnt), "{o}");
    // Through the library: the old config, opened with the removed
    // password, gives a volume key under which no block and no name of
    // the volume decrypts...
    let k = gone.open(&Config::load_file(&old_conf).unwrap());
    let (blocks, names) = nothing_decrypts(&v.cipher, &k, &old_ivs);
    assert!(blocks >= 7 && names >= 7, "{blocks} blocks, {names} names checked");
    // ...while the current key does decrypt them.
    let now = Config::load(&v.cipher).unwrap().unlock(PASSWORD.as_bytes()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nothing_decrypts(&v.cipher, &now, &[])));
    assert!(r.is_err(), "the check finds the new key's names");
}
