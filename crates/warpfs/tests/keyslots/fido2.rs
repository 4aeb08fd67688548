//! FIDO2 slots through the real libfido2, its custom transport hook wired
//! to the test CTAP2 authenticator (`warpfs_testkit::ctap2`, on a socket
//! that `WARPFS_FIDO2_TEST_AUTHENTICATOR` names to the warpfs process):
//! `key add --fido2` makes a credential and a slot, `mount`, `fsck` and
//! `rekey` open it with `--fido2` (and `-o fido2`) and a touch (no
//! password), another
//! authenticator is refused, a missing one is reported.

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
