//! Revocation: `key remove --rekey` leaves a config copy from before
//! nothing to decrypt (checked through the library), a killed rekey is
//! finished by `warpfs rekey`, `rekey --new-volume-key` keeps the slots
//! whose secrets are given.

use super::*;
use warpfs_crypto::slotkeys::SlotKey;

/// Every key the volume key `k` gives for content (generations 0 to 3)
/// and names: none may decrypt a block or a name of the volume at `dir`.
pub(crate) fn nothing_decrypts(dir: &Path, k: &warpfs_crypto::MasterKey, old_ivs: &[[u8; 16]]) -> (u64, u64) {
    use std::os::unix::fs::FileExt;
    let names = Subkeys::derive(k, 256).names;
    let content: Vec<_> = (0..4).map(|g| Subkeys::derive_gen(k, 256, g).content).collect();
    let mut ivs = old_ivs.to_vec();
    let (mut blocks, mut checked_names) = (0, 0);
    let mut all = Vec::new();
    walk(dir, &mut all);
    for p in &all {
        if p.file_name().unwrap() == "warpfs.diriv" {
            ivs.push(fs::read(p).unwrap().try_into().unwrap());
        }
    }
    for p in &all {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let enc = if name.starts_with("warpfs.long.") && name.ends_with(".name") {
            fs::read_to_string(p).unwrap()
        } else if name.starts_with("warpfs.") {
            String::new()
        } else {
            name.clone()
        };
        if !enc.is_empty() {
            checked_names += 1;
            for iv in &ivs {
                assert!(
                    names.decrypt_name(iv, &enc).is_err(),
                    "{name} decrypts with the old key"
                );
            }
        }
        let md = p.symlink_metadata().unwrap();
        let content_file = !name.starts_with("warpfs.") || !name.ends_with(".name") && name.starts_with("warpfs.long.");
        if !md.is_file() || md.len() < 544 || !content_file {
            continue;
        }
        let f = fs::File::open(p).unwrap();
        let mut h = [0u8; 32];
        f.read_exact_at(&mut h, 0).unwrap();
        let id = &h[8..24];
        let body = md.len() - 544;
        // Blocks of the nnode (the volumes here keep files under 64 KiB).
        for b in 0..body.div_ceil(4096).min(16) {
            let mut e = [0u8; 32];
            f.read_exact_at(&mut e, 32 + 32 * b).unwrap();
            if e[..12] == [0; 12] {
                continue;
            }
            let len = (body - 4096 * b).min(4096) as usize;
            let mut data = vec![0u8; len];
            f.read_exact_at(&mut data, 544 + 4096 * b).unwrap();
            let mut aad = id.to_vec();
            aad.extend_from_slice(&b.to_be_bytes());
            let nonce: [u8; 12] = e[..12].try_into().unwrap();
            let tag: [u8; 16] = e[16..].try_into().unwrap();
            for c in &content {
                let ej0 = warpfs_crypto::gcm::tag_mask(c, &nonce);
                assert!(
                    !warpfs_crypto::GcmTagger::new(c).verify(&aad, &data, &ej0, &tag),
                    "{name} block {b} decrypts with the old key"
                );
            }
            blocks += 1;
        }
    }
    (blocks, checked_names)
}

pub(crate) fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.symlink_metadata().unwrap().is_dir() {
            walk(&p, out);
        }
        out.push(p);
    }
}

pub(crate) fn ivs_of(dir: &Path) -> Vec<[u8; 16]> {
    let mut all = Vec::new();
    walk(dir, &mut all);
    all.iter()
        .filter(|p| p.file_name().unwrap() == "warpfs.diriv")
        .map(|p| fs::read(p).unwrap().try_into().unwrap())
        .collect()
}

/// The secret of the slot that `key remove --rekey` takes away.
pub(crate) enum Removed {
    /// A second password (its passfile).
    Password(PathBuf),
    /// A TPM2 slot sealed by this software TPM.
    Tpm2(warpfs_testkit::swtpm::Swtpm),
    /// A FIDO2 slot of this test authenticator (and its socket's directory).
    Fido2(warpfs_testkit::ctap2::Authenticator, tempfile::TempDir),
}

impl Removed {
    /// Its kind, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Removed::Password(_) => "password",
            Removed::Tpm2(_) => "tpm2",
            Removed::Fido2(..) => "fido2",
        }
    }

    /// How `warpfs mount` is given it.
    fn mount_args(&self) -> Vec<String> {
        match self {
            Removed::Password(p) => vec!["--passfile".into(), p.to_str().unwrap().into()],
            Removed::Tpm2(t) => vec!["--tpm2".into(), "--tpm2-tcti".into(), t.tcti_short()],
            Removed::Fido2(..) => vec!["--fido2".into()],
        }
    }

    /// `warpfs mount` of `v` with it and `extra` arguments.
    pub(crate) fn mount(&self, v: &Volume, extra: &[&str]) -> Out {
        let mut a: Vec<OsString> = args!["mount", "--log-file", &v.logfile];
        a.extend(self.mount_args().into_iter().map(OsString::from));
        a.extend(extra.iter().map(OsString::from));
        a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
        match self {
            Removed::Fido2(k, _) => super::fido2::with_keys(a, &[k.path()]),
            _ => warpfs(a),
        }
    }

    /// The volume key that `cfg` gives for it, through the library.
    pub(crate) fn open(&self, cfg: &Config) -> warpfs_crypto::MasterKey {
        match self {
            Removed::Password(p) => {
                let pw = fs::read_to_string(p).unwrap();
                let input = Input::Secret {
                    bytes: pw.trim_end().as_bytes(),
                    kind: None,
                };
                cfg.open(&input).unwrap().key
            }
            Removed::Tpm2(t) => {
                let tpm = TestTpm(warpfs_tpm2::Tcti::parse(&t.tcti()).unwrap());
                cfg.open(&Input::Tpm2(&tpm)).unwrap().key
            }
            Removed::Fido2(k, _) => {
                // The security key's answer for the slot, straight from the
                // authenticator (the secret as its holder has it).
                let f = cfg.slots().iter().find_map(|s| s.fido2()).unwrap();
                let out = k.output(&f.credential, &f.salt).unwrap();
                let input = Input::Fido2 {
                    credential: &f.credential,
                    output: &out,
                };
                cfg.open(&input).unwrap().key
            }
        }
    }
}

/// Unseals `tpm2` slots on one TPM, straight through `warpfs-tpm2`.
struct TestTpm(warpfs_tpm2::Tcti);

impl warpfs_config::Unseal for TestTpm {
    fn unseal(&self, o: &warpfs_config::Tpm2Object) -> Result<SlotKey, warpfs_config::DeviceError> {
        let sealed = warpfs_tpm2::Sealed {
            pcrs: o.pcrs.clone(),
            public: o.public.clone(),
            private: o.private.clone(),
        };
        warpfs_tpm2::unseal(&self.0, &sealed)
            .map(|s| SlotKey::from_bytes(&s))
            .map_err(|e| warpfs_config::DeviceError {
                failure: warpfs_config::DeviceFailure::Other,
                msg: e.msg,
            })
    }
}

/// A volume with summaries, a second password (to revoke) and a tree.
pub(crate) fn revocable() -> (Volume, PathBuf, std::collections::BTreeMap<PathBuf, Node>) {
    let (v, gone, want) = revocable_by(Removed::Password(PathBuf::new()));
    let Removed::Password(p) = gone else { unreachable!() };
    (v, p, want)
}

/// A volume with summaries, slot 2 of the kind of `gone` (to revoke;
/// a password's file is made here) and a tree.
fn revocable_by(gone: Removed) -> (Volume, Removed, std::collections::BTreeMap<PathBuf, Node>) {
    let (mut v, _) = fresh(&["--file-summary", "on"]);
    let gone = match gone {
        Removed::Password(_) => {
            let p = file(&v, "gone", "the password to revoke\n");
            warpfs(args![
                "key",
                "add",
                "--passfile",
                &v.passfile,
                "--password",
                "--new-passfile",
                &p,
                "--label",
                "old laptop",
                &v.cipher
            ])
            .expect_ok("add");
            Removed::Password(p)
        }
        Removed::Tpm2(t) => {
            super::tpm2::add_tpm2(&v, &t, &["--label", "old laptop"]).expect_ok("add tpm2");
            Removed::Tpm2(t)
        }
        Removed::Fido2(k, d) => {
            super::fido2::add_fido2(&v, &k, "old laptop").expect_ok("add fido2");
            Removed::Fido2(k, d)
        }
    };
    let want = write_tree(&mut v);
    (v, gone, want)
}

/// Mount `v`, write the tree every revocation test checks (a file, a
/// directory two deep, a long name, two symlinks), unmount; its snapshot.
pub(crate) fn write_tree(v: &mut Volume) -> std::collections::BTreeMap<PathBuf, Node> {
    v.mount();
    write_file(&v.p("a.txt"), b"alpha");
    fs::create_dir_all(v.p("d/e")).unwrap();
    write_file(&v.p("d/e/b.bin"), &vec![7u8; 20000]);
    write_file(&v.p(format!("d/{}", "n".repeat(200))), b"long name");
    std::os::unix::fs::symlink("a.txt", v.p("link")).unwrap();
    std::os::unix::fs::symlink("../a.txt", v.p("d/up")).unwrap();
    let want = snapshot(&v.mnt);
    v.unmount();
    want
}

/// `warpfs key remove --rekey --yes` of `slot` of `v`, with `extra`
/// arguments (the password file opens it).
pub(crate) fn remove_rekey(v: &Volume, slot: &str, extra: &[&str]) -> Out {
    let mut a = args!["key", "remove", "--passfile", &v.passfile, "--rekey", "--yes"];
    a.extend(extra.iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    a.push(slot.into());
    warpfs(a)
}

#[test]
fn key_remove_rekey_leaves_an_old_config_nothing_to_decrypt() {
    require_fuse!();
    let mut kinds = vec![Removed::Password(PathBuf::new())];
    if let Some(t) = warpfs_testkit::swtpm::for_test() {
        kinds.push(Removed::Tpm2(t));
    }
    let d = tempfile::tempdir().unwrap();
    kinds.push(Removed::Fido2(
        warpfs_testkit::ctap2::Authenticator::start(&d.path().join("key")),
        d,
    ));
    for gone in kinds {
        let (v, gone, want) = revocable_by(gone);
        revoke_and_check(v, &gone, &want);
    }
}

/// `key remove 2 --rekey` on `v`; then neither the CLI nor the library
/// opens anything with `gone` (its slot 2's secret), in the config now or
/// in a copy from before.
fn revoke_and_check(mut v: Volume, gone: &Removed, want: &std::collections::BTreeMap<PathBuf, Node>) {
    let kind = gone.kind();
    let old_conf = v.root().join("old.conf");
    fs::copy(v.cipher.join("warpfs.conf"), &old_conf).unwrap();
    let old_ivs = ivs_of(&v.cipher);
    // The removed secret opens the volume before.
    let before = Config::load_file(&old_conf).unwrap();
    let k = gone.open(&before);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nothing_decrypts(&v.cipher, &k, &[])));
    assert!(
        r.is_err(),
        "{kind}: the check finds the old key's names before the rekey"
    );
    // Off a terminal it needs --yes; then it says what it does.
    warpfs(args![
        "key",
        "remove",
        "--passfile",
        &v.passfile,
        "--rekey",
        &v.cipher,
        "2"
    ])
    .expect_code(2, "no --yes");
    let o = remove_rekey(&v, "2", &[]);
    o.expect_ok("key remove --rekey");
    assert!(o.stderr.contains("every backing name changes"), "{o}");
    assert!(o.stderr.contains("dropped: keyslot 1 (recovery)"), "{o}");
    assert!(o.stderr.contains("no recovery slot is left"), "{o}");
    v.mount();
    assert_snapshots_eq(&snapshot(&v.mnt), want, "after the rekey");
    v.unmount();
    let o = gone.mount(&v, &[]);
    assert!(!o.ok() && !is_mounted(&v.mnt), "{kind}: the removed secret mounts\n{o}");
    // The CLI refuses the old config as older...
    let o = gone.mount(&v, &["--config", old_conf.to_str().unwrap()]);
    o.expect_code(E_CONFIG, "the old config");
    assert!(o.stderr.contains("older"), "{o}");
    // ...and the library shows why that is not what protects the volume:
    // the old config, opened with the removed secret, gives a volume key
    // under which no block and no name of the volume decrypts.
    let old = Config::load_file(&old_conf).unwrap();
    let k = gone.open(&old);
    let (blocks, names) = nothing_decrypts(&v.cipher, &k, &old_ivs);
    assert!(
        blocks >= 7 && names >= 7,
        "{kind}: {blocks} blocks, {names} names checked"
    );
    // The new key does decrypt them (the check above can fail).
    let now = Config::load(&v.cipher).unwrap().unlock(PASSWORD.as_bytes()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| nothing_decrypts(&v.cipher, &now, &[])));
    assert!(r.is_err(), "the check finds the new key's names");
}

#[test]
fn a_killed_volume_key_rekey_is_finished_by_warpfs_rekey() {
    require_fuse!();
    for kill in ["config:0", "data:2", "name:3", "dir:2"] {
        let (mut v, gone, want) = revocable();
        let mut c = Command::new(BIN);
        c.args(["key", "remove", "--passfile"])
            .arg(&v.passfile)
            .args(["--rekey", "--yes", "--jobs", "1"])
            .arg(&v.cipher)
            .arg("2")
            .env("WARPFS_REKEY_KILL", kill);
        let o = run_cmd(c, std::time::Duration::from_secs(120));
        assert_eq!(o.code, None, "{kill}: not killed\n{o}");
        let cfg = Config::load(&v.cipher).unwrap();
        assert!(cfg.volume_rekey_under_way(), "{kill}");
        // Until it is finished nothing else opens the volume.
        let o = v.try_mount(&[]);
        o.expect_code(E_UNFINISHED, kill);
        assert!(o.stderr.contains("warpfs rekey"), "{o}");
        warpfs(args!["fsck", "--passfile", &v.passfile, &v.cipher]).expect_code(E_UNFINISHED, kill);
        // The removed password is already gone from the config.
        warpfs(args!["rekey", "--passfile", &gone, &v.cipher]).expect_code(E_WRONG, kill);
        let o = warpfs(args!["rekey", "--passfile", &v.passfile, &v.cipher]);
        o.expect_ok(&format!("{kill}: warpfs rekey finishes it"));
        assert!(o.stderr.contains("finishing"), "{o}");
        assert!(!Config::load(&v.cipher).unwrap().volume_rekey_under_way());
        v.mount();
        assert_snapshots_eq(&snapshot(&v.mnt), &want, kill);
        v.unmount();
        let mut all = Vec::new();
        walk(&v.cipher, &mut all);
        assert!(
            all.iter().all(|p| !p.to_string_lossy().contains("warpfs.rekey")),
            "{kill}: {all:?}"
        );
    }
}

#[test]
fn rekey_new_volume_key_keeps_the_slots_whose_secrets_are_given() {
    require_fuse!();
    let (mut v, rk) = fresh(&[]);
    let rkf = file(&v, "rk", &rk);
    let kf = file(&v, "kf", "key bytes");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--keyfile",
        &kf,
        &v.cipher
    ])
    .expect_ok("add keyfile");
    v.mount();
    write_file(&v.p("x"), b"kept");
    v.unmount();
    let keep_rk = format!("1=recovery:{}", rkf.display());
    let keep_kf = format!("2=keyfile:{}", kf.display());
    let bad = format!("2=keyfile:{}", rkf.display());
    warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        "--keep",
        &bad,
        &v.cipher
    ])
    .expect_code(E_WRONG, "a --keep secret that does not open its slot");
    warpfs(args!["rekey", "--passfile", &v.passfile, "--keep", &keep_rk, &v.cipher]).expect_code(2, "--keep alone");
    let o = warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        "--keep",
        &keep_rk,
        "--keep",
        &keep_kf,
        &v.cipher
    ]);
    o.expect_ok("rekey --new-volume-key");
    let ids: Vec<u64> = kinds(&v).into_iter().map(|(i, _)| i).collect();
    assert_eq!(ids, [0, 1, 2], "every slot kept");
    mount_with(&v, &["--keyfile", kf.to_str().unwrap(), "--keyfile-only"]).expect_ok("keyfile");
    assert_eq!(fs::read(v.p("x")).unwrap(), b"kept");
    unmount_path(&v.mnt).unwrap();
    let mut a = args!["mount", "--masterkey", "stdin"];
    a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
    with_stdin(a, &rk).expect_ok("recovery key");
    unmount_path(&v.mnt).unwrap();
    // Without --keep, only the slot that unlocked stays.
    warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        &v.cipher
    ])
    .expect_ok("rekey");
    assert_eq!(kinds(&v), [(0, "password".to_string())]);
}
