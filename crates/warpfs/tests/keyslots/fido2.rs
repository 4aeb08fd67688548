//! FIDO2 slots through the real libfido2, its custom transport hook wired
//! to the test CTAP2 authenticator (`warpfs_testkit::ctap2`, on a socket
//! that `WARPFS_FIDO2_TEST_AUTHENTICATOR` names to the warpfs process):
//! `key add --fido2` makes a credential and a slot, `mount`, `fsck` and
//! `rekey` open it with `--fido2` (and `-o fido2`) and a touch (no
//! password), another
//! authenticator is refused, a missing one is reported; `--fido2-device`
//! names the one key used (a path with none behind it is exit 15); a
//! slot made on a key with a PIN needs the PIN (a wrong one is exit 10).

use super::*;
use warpfs_testkit::ctap2::Authenticator;

pub(crate) const E_DEVICE: i32 = 15;
pub(crate) const TEST_ENV: &str = "WARPFS_FIDO2_TEST_AUTHENTICATOR";

/// warpfs with `args`, the authenticators at `socks` as the only FIDO2
/// devices.
pub(crate) fn with_keys(args: Vec<OsString>, socks: &[&Path]) -> Out {
    let mut c = Command::new(BIN);
    c.args(&args).env(TEST_ENV, std::env::join_paths(socks).unwrap());
    run_cmd(c, std::time::Duration::from_secs(60))
}

/// `key add --fido2` with the authenticator `a`, opened by the password.
pub(crate) fn add_fido2(v: &Volume, a: &Authenticator, label: &str) -> Out {
    let args = args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--fido2",
        "--label",
        label,
        &v.cipher
    ];
    with_keys(args, &[a.path()])
}

fn mount_args(v: &Volume, extra: &[&str]) -> Vec<OsString> {
    let mut a = args!["mount", "--log-file", &v.logfile];
    a.extend(extra.iter().map(OsString::from));
    a.extend([v.cipher.clone().into(), v.mnt.clone().into()]);
    a
}

#[test]
fn a_fido2_slot_opens_with_its_key_and_a_touch_and_no_other() {
    require_fuse!();
    let dir = tempfile::tempdir().unwrap();
    let a = Authenticator::start(&dir.path().join("a"));
    let b = Authenticator::start(&dir.path().join("b"));
    let (mut v, _) = fresh(&[]);
    let o = add_fido2(&v, &a, "yubi");
    o.expect_ok("key add --fido2");
    assert!(o.stdout.contains("Added keyslot 2 (fido2)"), "{o}");
    assert!(
        a.touches() >= 2,
        "a credential and its first output need touches: {}",
        a.touches()
    );
    let l = key_list(&v);
    assert_eq!(l["keyslots"][2]["kind"], "fido2", "{l}");
    let info = warpfs(args!["info", &v.cipher]);
    assert!(info.stdout.contains("slot 2: fido2 \"yubi\" (hmac-secret of"), "{info}");

    // Mount with the key: a touch asked for on the terminal, no password.
    let before = a.touches();
    let o = with_keys(mount_args(&v, &["--fido2"]), &[a.path()]);
    o.expect_ok("mount --fido2");
    assert!(o.stderr.contains("touch your security key"), "{o}");
    assert_eq!(a.touches(), before + 1, "one touch");
    write_file(&v.p("f"), b"opened by a security key");
    unmount_path(&v.mnt).unwrap();
    with_keys(args!["fsck", "--fido2", &v.cipher], &[a.path()]).expect_ok("fsck --fido2");
    with_keys(args!["rekey", "--fido2", &v.cipher], &[a.path()]).expect_ok("rekey --fido2");
    // The mount helper's form (fstab, mount.fuse3): -o fido2.
    let helper = args![&v.cipher, &v.mnt, "-o", "fido2"];
    with_keys(helper, &[a.path()]).expect_ok("warpfs CIPHERDIR MNT -o fido2");
    assert_eq!(fs::read(v.p("f")).unwrap(), b"opened by a security key");
    unmount_path(&v.mnt).unwrap();
    // Both keys plugged in: the one holding the credential is used.
    with_keys(mount_args(&v, &["--fido2"]), &[b.path(), a.path()]).expect_ok("mount, two keys");
    assert_eq!(fs::read(v.p("f")).unwrap(), b"opened by a security key");
    unmount_path(&v.mnt).unwrap();

    // Another authenticator: refused, nothing asked of it.
    let o = with_keys(mount_args(&v, &["--fido2"]), &[b.path()]);
    o.expect_code(E_WRONG, "another security key");
    assert!(o.stderr.contains("not hold the credential"), "{o}");
    assert_eq!(b.touches(), 0, "the wrong key is never asked for a touch");
    assert!(!is_mounted(&v.mnt));
    // No key at all, or one that does not answer.
    let gone = dir.path().join("gone");
    let o = with_keys(mount_args(&v, &["--fido2"]), &[&gone]);
    o.expect_code(E_DEVICE, "a key that is not there");
    assert!(o.stderr.contains("FIDO2"), "{o}");
    let o = with_keys(mount_args(&v, &["--fido2"]), &[]);
    o.expect_code(E_DEVICE, "no key plugged in");
    assert!(o.stderr.contains("no FIDO2 security key found"), "{o}");
    // Both hardware kinds (-o tpm2,fido2): the TPM first (here none, and
    // no tpm2 slot), then the security key.
    let both = args![&v.cipher, &v.mnt, "-o", "tpm2,tpm2-tcti=device:/dev/tpmrm97,fido2"];
    let o = with_keys(both, &[a.path()]);
    o.expect_ok("-o tpm2,fido2");
    assert!(o.stderr.contains("trying a FIDO2 security key"), "{o}");
    unmount_path(&v.mnt).unwrap();
    // The password still opens it.
    v.mount();
    assert_eq!(fs::read(v.p("f")).unwrap(), b"opened by a security key");
    v.unmount();
}

#[test]
fn a_named_fido2_device_is_the_only_one_used() {
    require_fuse!();
    let dir = tempfile::tempdir().unwrap();
    let a = Authenticator::start(&dir.path().join("a"));
    let b = Authenticator::start(&dir.path().join("b"));
    let both = [a.path(), b.path()];
    let (v, _) = fresh(&[]);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let add = |extra: &[&str]| {
        let mut x = args!["key", "add", "--passfile", &v.passfile, "--fido2", "--label", "named"];
        x.extend(extra.iter().map(OsString::from));
        x.push(v.cipher.clone().into());
        with_keys(x, &both)
    };
    // Two keys plugged in: `key add` does not pick one itself.
    let o = add(&[]);
    o.expect_code(2, "two keys, none named");
    assert!(o.stderr.contains("name one with --fido2-device"), "{o}");
    // Named, the credential is made on that key and no other.
    add(&["--fido2-device", &s(b.path())]).expect_ok("key add --fido2-device B");
    assert!(b.touches() >= 2, "B made the credential: {} touches", b.touches());
    assert_eq!(a.touches(), 0, "A is never asked");
    assert_eq!(kinds(&v)[2], (2, "fido2".to_string()));

    // `mount --fido2-device A`: only A is tried, which does not hold the
    // credential, although B (which does) is plugged in too.
    let before = b.touches();
    let o = with_keys(mount_args(&v, &["--fido2", "--fido2-device", &s(a.path())]), &both);
    o.expect_code(E_WRONG, "the named key lacks the credential");
    assert!(o.stderr.contains("does not hold the credential"), "{o}");
    assert!(!is_mounted(&v.mnt));
    assert_eq!((a.touches(), b.touches()), (0, before), "no touch asked of either");
    // `--fido2-device B` opens it, with B's touch.
    let o = with_keys(mount_args(&v, &["--fido2", "--fido2-device", &s(b.path())]), &both);
    o.expect_ok("mount --fido2-device B");
    assert!(
        o.stderr
            .contains(&format!("touch your security key {}", b.path().display())),
        "{o}"
    );
    assert_eq!(b.touches(), before + 1, "one touch of B");
    unmount_path(&v.mnt).unwrap();
    // So does `key add --unlock-fido2 --fido2-device B`.
    let o = with_keys(
        args![
            "key",
            "add",
            "--unlock-fido2",
            "--fido2-device",
            b.path(),
            "--recovery",
            &v.cipher
        ],
        &both,
    );
    o.expect_ok("key add --unlock-fido2 --fido2-device B");
    assert_eq!(a.touches(), 0, "A is never asked");

    // A path with no device behind it: one clear error, exit 15, from
    // each command, whichever keys are plugged in; nothing changes.
    let conf = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let nowhere = "/dev/hidraw97";
    let o = with_keys(mount_args(&v, &["--fido2", "--fido2-device", nowhere]), &both);
    o.expect_code(E_DEVICE, "mount, no device at the path");
    assert!(o.stderr.contains("cannot open the FIDO2 device /dev/hidraw97"), "{o}");
    assert!(!is_mounted(&v.mnt));
    let o = add(&["--fido2-device", nowhere]);
    o.expect_code(E_DEVICE, "key add, no device at the path");
    assert!(o.stderr.contains("cannot open the FIDO2 device /dev/hidraw97"), "{o}");
    assert_eq!(fs::read(v.cipher.join("warpfs.conf")).unwrap(), conf, "nothing added");
    assert_eq!(a.touches(), 0, "A is never asked");
    // --fido2-device without --fido2 is a usage error.
    let o = with_keys(mount_args(&v, &["--fido2-device", &s(b.path())]), &both);
    o.expect_code(2, "--fido2-device alone");
    assert!(o.stderr.contains("--fido2-device goes with --fido2"), "{o}");
}

#[test]
fn a_fido2_slot_made_with_the_keys_pin_needs_it() {
    require_fuse!();
    let dir = tempfile::tempdir().unwrap();
    let a = Authenticator::start_with_pin(&dir.path().join("a"), "4711");
    let (mut v, _) = fresh(&[]);
    let (pin, wrong) = (file(&v, "pin", "4711\n"), file(&v, "wrong", "1234\n"));
    let add = |new_pin: &Path| {
        let x = args![
            "key",
            "add",
            "--passfile",
            &v.passfile,
            "--fido2",
            "--new-passfile",
            new_pin,
            &v.cipher
        ];
        with_keys(x, &[a.path()])
    };
    // The key has a PIN: making the slot needs it.
    let o = add(&wrong);
    o.expect_code(E_WRONG, "key add, a wrong PIN");
    assert!(o.stderr.contains("wrong PIN"), "{o}");
    assert_eq!(kinds(&v).len(), 2, "nothing added");
    add(&pin).expect_ok("key add --fido2 with the PIN");
    assert_eq!(key_list(&v)["keyslots"][2]["fido2"]["user_verification"], true);

    // Mounting needs it too (read like a password: --passfile here).
    let o = with_keys(
        mount_args(&v, &["--fido2", "--passfile", pin.to_str().unwrap()]),
        &[a.path()],
    );
    o.expect_ok("mount --fido2 with the PIN");
    write_file(&v.p("f"), b"behind a PIN");
    unmount_path(&v.mnt).unwrap();
    let touches = a.touches();
    let o = with_keys(
        mount_args(&v, &["--fido2", "--passfile", wrong.to_str().unwrap()]),
        &[a.path()],
    );
    o.expect_code(E_WRONG, "mount, a wrong PIN");
    assert!(o.stderr.contains("wrong PIN"), "{o}");
    assert!(!is_mounted(&v.mnt));
    // No PIN (standard input is /dev/null): not mounted, no touch asked.
    let o = with_keys(mount_args(&v, &["--fido2"]), &[a.path()]);
    assert!(!o.ok() && !is_mounted(&v.mnt), "{o}");
    assert_eq!(a.touches(), touches, "no touch without the right PIN");

    // The slot's key is the key's answer under the PIN: its answer
    // without the PIN (what the key alone gives) does not open the slot.
    let cfg = Config::load(&v.cipher).unwrap();
    let f = cfg.slots().iter().find_map(|s| s.fido2()).unwrap();
    let out = a.output(&f.credential, &f.salt).unwrap();
    let input = Input::Fido2 {
        credential: &f.credential,
        output: &out,
    };
    assert!(cfg.open(&input).is_err(), "the answer without the PIN opens the slot");
    v.mount();
    assert_eq!(fs::read(v.p("f")).unwrap(), b"behind a PIN");
    v.unmount();
}
