//! The FIDO2 client through the real libfido2, its custom transport hook
//! wired to the test CTAP2 authenticator (`warpfs_testkit::ctap2`): a
//! credential made and its hmac-secret got (libfido2's key agreement and
//! salt encryption against the authenticator's), the same output for the
//! same salt, another for another salt or credential, a silent check
//! without a touch, a wrong authenticator refused, a missing one reported.

use warpfs_fido2::{devices, testdev::TEST_ENV, Device, Error};
use warpfs_testkit::ctap2::Authenticator;

const RP: &str = "warpfs";

#[test]
fn a_credential_made_and_used_and_the_wrong_or_missing_key_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb, gone) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("gone"));
    let a = Authenticator::start(&pa);
    let b = Authenticator::start(&pb);
    let list = std::env::join_paths([&pa, &pb, &gone]).unwrap();
    // The only test in this binary: nothing else reads the environment.
    std::env::set_var(TEST_ENV, &list);
    let found: Vec<String> = devices().unwrap().into_iter().map(|d| d.path).collect();
    assert_eq!(found.len(), 3, "{found:?}");

    let da = Device::open(pa.to_str().unwrap()).unwrap();
    let info = da.info().unwrap();
    assert!(info.hmac_secret, "{info:?}");
    let cred = da.make_credential(RP, b"volume", "warpfs volume", None).unwrap();
    assert_eq!(a.touches(), 1, "making a credential asks for a touch");
    let salt = [7u8; 32];
    let o1 = da.hmac_secret(RP, &cred, &salt, None).unwrap();
    let o2 = da.hmac_secret(RP, &cred, &salt, None).unwrap();
    assert_eq!(*o1, *o2, "the same salt gives the same output");
    assert_ne!(*o1, [0u8; 32]);
    assert_ne!(*o1, salt);
    assert_eq!(a.touches(), 3, "each output asks for a touch");
    let other_salt = da.hmac_secret(RP, &cred, &[8u8; 32], None).unwrap();
    assert_ne!(*other_salt, *o1);
    let cred2 = da.make_credential(RP, b"volume", "warpfs volume", None).unwrap();
    assert_ne!(cred2, cred);
    assert_ne!(*da.hmac_secret(RP, &cred2, &salt, None).unwrap(), *o1);
    // The silent check needs no touch.
    let before = a.touches();
    assert!(da.has_credential(RP, &cred).unwrap());
    assert!(!da.has_credential("another.example", &cred).unwrap());
    assert_eq!(a.touches(), before, "a silent check asks for no touch");

    // Another authenticator does not hold the credential.
    let db = Device::open(pb.to_str().unwrap()).unwrap();
    assert!(!db.has_credential(RP, &cred).unwrap());
    assert_eq!(db.hmac_secret(RP, &cred, &salt, None).err(), Some(Error::NoCredential));
    assert_eq!(b.touches(), 0);

    // A key that is not there.
    assert_eq!(
        Device::open(gone.to_str().unwrap()).err().unwrap(),
        Error::Open(gone.to_str().unwrap().to_owned())
    );
    drop(da);
    drop(a);
    assert!(
        Device::open(pa.to_str().unwrap()).is_err(),
        "a stopped authenticator opens"
    );
}
