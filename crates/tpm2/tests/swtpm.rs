//! The TPM2 client against a software TPM (swtpm, started by each test on
//! loopback ports): a secret sealed and unsealed, a PCR-bound object
//! refused after its PCR is extended, an object of another TPM not
//! loadable, a TPM that is not there reported as unreachable.

use warpfs_testkit::swtpm::Swtpm;
use warpfs_tpm2::{extend_pcr, seal, unseal, Failure, Tcti};

fn swtpm() -> Option<(Swtpm, Tcti)> {
    let s = warpfs_testkit::swtpm::for_test()?;
    let t = Tcti::parse(&s.tcti()).unwrap();
    Some((s, t))
}

#[test]
fn a_sealed_secret_unseals_to_itself() {
    let Some((_tpm, tcti)) = swtpm() else { return };
    let (sealed, secret) = seal(&tcti, &[]).unwrap();
    assert!(sealed.pcrs.is_empty());
    assert_ne!(*secret, [0u8; 32]);
    // Nothing of the secret is in what a slot stores.
    for blob in [&sealed.public, &sealed.private] {
        assert!(!blob.windows(8).any(|w| secret.windows(8).any(|s| s == w)));
    }
    assert_eq!(*unseal(&tcti, &sealed).unwrap(), *secret);
    // A second seal draws another secret.
    let (_, other) = seal(&tcti, &[]).unwrap();
    assert_ne!(*other, *secret);
}

#[test]
fn a_pcr_bound_secret_is_refused_once_the_pcr_changes() {
    let Some((_tpm, tcti)) = swtpm() else { return };
    let (sealed, secret) = seal(&tcti, &[7, 16]).unwrap();
    assert_eq!(sealed.pcrs, vec![7, 16]);
    assert_eq!(*unseal(&tcti, &sealed).unwrap(), *secret);
    // Another PCR changing does not matter.
    extend_pcr(&tcti, 15, b"something else").unwrap();
    assert_eq!(*unseal(&tcti, &sealed).unwrap(), *secret);
    extend_pcr(&tcti, 16, b"a new kernel").unwrap();
    let e = unseal(&tcti, &sealed).unwrap_err();
    assert_eq!(e.failure, Failure::PolicyRefused, "{}", e.msg);
    assert!(e.msg.contains("PCR 7,16 changed"), "{}", e.msg);
    // Listing other PCRs in the slot does not open it either.
    let mut edited = sealed.clone();
    edited.pcrs = vec![7];
    assert_eq!(unseal(&tcti, &edited).unwrap_err().failure, Failure::PolicyRefused);
}

#[test]
fn an_object_of_another_tpm_does_not_load() {
    let Some((_a, ta)) = swtpm() else { return };
    let Some((_b, tb)) = swtpm() else { return };
    let (sealed, _) = seal(&ta, &[]).unwrap();
    let e = unseal(&tb, &sealed).unwrap_err();
    assert_eq!(e.failure, Failure::NotLoadable, "{}", e.msg);
    assert!(e.msg.contains("another TPM"), "{}", e.msg);
    // A damaged blob is not loadable either, and never a panic.
    let mut bad = sealed.clone();
    let n = bad.private.len();
    bad.private[n - 1] ^= 1;
    assert_eq!(unseal(&ta, &bad).unwrap_err().failure, Failure::NotLoadable);
    let mut short = sealed.clone();
    short.public.truncate(5);
    assert_eq!(unseal(&ta, &short).unwrap_err().failure, Failure::NotLoadable);
}

#[test]
fn no_tpm_is_reported_as_unreachable() {
    let Some((mut tpm, tcti)) = swtpm() else { return };
    let (sealed, _) = seal(&tcti, &[]).unwrap();
    tpm.stop();
    let e = unseal(&tcti, &sealed).unwrap_err();
    assert_eq!(e.failure, Failure::Unreachable, "{}", e.msg);
    let dev = Tcti::parse("device:/dev/tpmrm99").unwrap();
    let e = seal(&dev, &[]).unwrap_err();
    assert_eq!(e.failure, Failure::Unreachable, "{}", e.msg);
}
