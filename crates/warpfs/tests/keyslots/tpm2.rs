//! TPM2 slots against a software TPM (swtpm, started by each test on
//! loopback ports): `key add --tpm2` seals a slot (to a PCR), `mount`,
//! `fsck` and `rekey` open it with `--tpm2` and no prompt (`key add` with
//! `--unlock-tpm2`), a new volume key keeps it, `key list` and
//! `info` show it without a secret, and each way it cannot open has its
//! own message and exit code: the PCR changed (16), another TPM (17), no
//! TPM (15), no tpm2 slot, `--tpm2` beside a password.

use super::*;
use warpfs_testkit::swtpm::{self, Swtpm};

pub(crate) const E_UNREACHABLE: i32 = 15;
pub(crate) const E_REFUSED: i32 = 16;
pub(crate) const E_FOREIGN: i32 = 17;

/// `key add --tpm2` on the swtpm `tpm` (its TCTI kept in the slot),
/// opened by the volume's password; `extra`: more `key add` arguments.
pub(crate) fn add_tpm2(v: &Volume, tpm: &Swtpm, extra: &[&str]) -> Out {
    let mut a = args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--tpm2",
        "--tpm2-tcti",
        tpm.tcti_short()
    ];
    a.extend(extra.iter().map(OsString::from));
    a.push(v.cipher.clone().into());
    warpfs(a)
}

fn extend(tpm: &Swtpm, pcr: u32) {
    let t = warpfs_tpm2::Tcti::parse(&tpm.tcti()).unwrap();
    warpfs_tpm2::extend_pcr(&t, pcr, b"a new boot loader").unwrap();
}

#[test]
fn a_tpm2_slot_opens_without_a_prompt_until_its_pcr_changes() {
    require_fuse!();
    let Some(tpm) = swtpm::for_test() else { return };
    let (mut v, _) = fresh(&[]);
    let o = add_tpm2(&v, &tpm, &["--tpm2-pcrs", "16", "--label", "this machine"]);
    o.expect_ok("key add --tpm2");
    assert!(o.stdout.contains("Added keyslot 2 (tpm2)"), "{o}");
    let conf = fs::read_to_string(v.cipher.join("warpfs.conf")).unwrap();
    let j: serde_json::Value = serde_json::from_str(&conf).unwrap();
    let private = j["keyslots"][2]["tpm2"]["private"].as_str().unwrap().to_string();
    assert!(private.len() > 40, "{conf}");
    // Listed with its policy and TCTI; nothing of the sealed object shown.
    let l = key_list(&v);
    let s = &l["keyslots"][2];
    assert_eq!(s["kind"], "tpm2");
    assert_eq!(s["label"], "this machine");
    assert_eq!(s["tpm2"]["pcrs"], serde_json::json!([16]));
    assert_eq!(s["tpm2"]["tcti"], tpm.tcti_short().as_str());
    let info = warpfs(args!["info", &v.cipher]);
    info.expect_ok("info");
    assert!(
        info.stdout
            .contains("slot 2: tpm2 \"this machine\" (sealed by a TPM2, PCRs 16 of sha256"),
        "{info}"
    );
    let list = warpfs(args!["key", "list", &v.cipher]);
    for out in [&info.stdout, &list.stdout, &l.to_string()] {
        assert!(!out.contains(&private[..24]), "the sealed object is shown:\n{out}");
    }

    // No prompt: standard input is /dev/null, and --tpm2 alone mounts
    // (the TCTI comes from the slot).
    mount_with(&v, &["--tpm2"]).expect_ok("mount --tpm2");
    write_file(&v.p("a"), b"sealed by the TPM");
    unmount_path(&v.mnt).unwrap();
    warpfs(args!["fsck", "--tpm2", &v.cipher]).expect_ok("fsck --tpm2");
    let o = warpfs(args!["rekey", "--tpm2", "--tpm2-tcti", tpm.tcti(), &v.cipher]);
    o.expect_ok("rekey --tpm2");
    assert_eq!(
        key_list(&v)["keyslots"].as_array().unwrap().len(),
        3,
        "rekey kept the slots"
    );
    mount_with(&v, &["--tpm2"]).expect_ok("mount --tpm2 after the rekey");
    assert_eq!(fs::read(v.p("a")).unwrap(), b"sealed by the TPM");
    unmount_path(&v.mnt).unwrap();
    // The TPM opens the volume for `key add` too, and a volume-key rekey
    // keeps the TPM2 slot when told to (it reseals nothing: the slot's
    // key wraps the new volume key).
    let o = warpfs(args!["key", "add", "--unlock-tpm2", "--recovery", &v.cipher]);
    o.expect_ok("key add --unlock-tpm2");
    let o = warpfs(args![
        "rekey",
        "--passfile",
        &v.passfile,
        "--new-volume-key",
        "--yes",
        "--keep",
        "2=tpm2",
        &v.cipher
    ]);
    o.expect_ok("rekey --new-volume-key --keep 2=tpm2");
    let k: Vec<(u64, String)> = kinds(&v);
    assert_eq!(k, [(0, "password".into()), (2, "tpm2".into())], "{o}");
    mount_with(&v, &["--tpm2"]).expect_ok("mount --tpm2 after a new volume key");
    assert_eq!(fs::read(v.p("a")).unwrap(), b"sealed by the TPM");
    unmount_path(&v.mnt).unwrap();
    // --tpm2 is not given beside a password source.
    let o = mount_with(&v, &["--tpm2", "--passfile", v.passfile.to_str().unwrap()]);
    o.expect_code(2, "--tpm2 with --passfile");
    assert!(o.stderr.contains("--tpm2"), "{o}");

    // Another PCR changing does not matter; PCR 16 changing does.
    extend(&tpm, 15);
    mount_with(&v, &["--tpm2"]).expect_ok("after PCR 15 changed");
    unmount_path(&v.mnt).unwrap();
    extend(&tpm, 16);
    let o = mount_with(&v, &["--tpm2"]);
    o.expect_code(E_REFUSED, "after PCR 16 changed");
    assert!(o.stderr.contains("PCR 16 changed since the slot was made"), "{o}");
    assert_eq!(o.stderr.trim().lines().count(), 1, "one line, no library log:\n{o}");
    assert!(!is_mounted(&v.mnt));
    warpfs(args!["fsck", "--tpm2", &v.cipher]).expect_code(E_REFUSED, "fsck after PCR 16 changed");
    // The password slot still opens it.
    v.mount();
    assert_eq!(fs::read(v.p("a")).unwrap(), b"sealed by the TPM");
    v.unmount();
}

#[test]
fn a_tpm2_slot_elsewhere_or_without_a_tpm_is_reported() {
    require_fuse!();
    let Some(mut tpm) = swtpm::for_test() else { return };
    let Some(other) = swtpm::for_test() else { return };
    let (v, _) = fresh(&[]);
    // No tpm2 slot yet.
    let o = mount_with(&v, &["--tpm2", "--tpm2-tcti", &tpm.tcti_short()]);
    assert!(!o.ok() && o.stderr.contains("tpm2"), "{o}");
    add_tpm2(&v, &tpm, &[]).expect_ok("key add --tpm2");
    // Another TPM: the object does not load there.
    let o = mount_with(&v, &["--tpm2", "--tpm2-tcti", &other.tcti_short()]);
    o.expect_code(E_FOREIGN, "another TPM");
    assert!(o.stderr.contains("another TPM"), "{o}");
    // A TPM device that is not there.
    let o = mount_with(&v, &["--tpm2", "--tpm2-tcti", "device:/dev/tpmrm97"]);
    o.expect_code(E_UNREACHABLE, "no such device");
    assert!(o.stderr.contains("/dev/tpmrm97 does not exist"), "{o}");
    // A TCTI warpfs does not use is a usage error.
    mount_with(&v, &["--tpm2", "--tpm2-tcti", "cmd:tpm2_send"]).expect_code(2, "cmd TCTI");
    // The slot's TPM gone.
    tpm.stop();
    let o = mount_with(&v, &["--tpm2"]);
    o.expect_code(E_UNREACHABLE, "the TPM stopped");
    assert!(o.stderr.contains("no TPM"), "{o}");
    assert!(!is_mounted(&v.mnt));
    // `key add` reports it the same way.
    add_tpm2(&v, &tpm, &[]).expect_code(E_UNREACHABLE, "key add without the TPM");
    assert_eq!(kinds(&v).len(), 3, "nothing added");
}
