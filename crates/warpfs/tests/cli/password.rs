//! Passwords: a wrong one is refused with nothing written, and `passwd`
//! changes it while the data stays readable.

use super::*;

#[test]
fn wrong_password_refused_and_nothing_written() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("file"), b"secret");
    fs::create_dir(v.p("dir")).unwrap();
    v.unmount();
    let wrong = v.root().join("wrong.txt");
    fs::write(&wrong, "not the password\n").unwrap();
    let before = dir_state(&v.cipher);
    std::thread::sleep(Duration::from_millis(20)); // make any mtime change visible
    let o = warpfs(args![
        "mount",
        "--passfile",
        &wrong,
        "--log-file",
        &v.logfile,
        &v.cipher,
        &v.mnt
    ]);
    o.expect_code(E_PASSWORD, "mount with a wrong password");
    assert!(!is_mounted(&v.mnt), "mounted with a wrong password");
    assert!(sorted_names(&v.mnt).is_empty());
    assert_eq!(
        dir_state(&v.cipher),
        before,
        "mount with a wrong password changed the cipher dir"
    );
    let cmd = "echo also-wrong";
    let o = warpfs(args!["mount", "--extpass", cmd, &v.cipher, &v.mnt]);
    o.expect_code(E_PASSWORD, "mount with a wrong --extpass password");
    let newp = v.root().join("new.txt");
    fs::write(&newp, "new password\n").unwrap();
    warpfs(args![
        "passwd",
        "--passfile",
        &wrong,
        "--new-passfile",
        &newp,
        &v.cipher
    ])
    .expect_code(E_PASSWORD, "passwd with a wrong old password");
    assert_eq!(dir_state(&v.cipher), before, "refused commands changed the cipher dir");
    // The right password still works.
    v.mount();
    assert_eq!(fs::read(v.p("file")).unwrap(), b"secret");
}

#[test]
fn passwd_changes_password() {
    require_fuse!();
    let mut v = Volume::new(Mode::Gcm);
    write_file(&v.p("file"), b"data survives passwd");
    v.unmount();
    let names_before = sorted_names(&v.cipher);
    let diriv = fs::read(v.cipher.join("warpfs.diriv")).unwrap();
    let conf_before = fs::read(v.cipher.join("warpfs.conf")).unwrap();
    let old = v.passfile.clone();
    let newp = v.root().join("new.txt");
    fs::write(&newp, "a brand new password\n").unwrap();
    warpfs(args!["passwd", "--passfile", &old, "--new-passfile", &newp, &v.cipher]).expect_ok("passwd");
    assert_eq!(
        sorted_names(&v.cipher),
        names_before,
        "passwd left extra files in the cipher dir"
    );
    assert_eq!(fs::read(v.cipher.join("warpfs.diriv")).unwrap(), diriv);
    assert_ne!(
        fs::read(v.cipher.join("warpfs.conf")).unwrap(),
        conf_before,
        "passwd did not rewrite warpfs.conf"
    );
    let o = v.try_mount(&[]);
    o.expect_code(E_PASSWORD, "mount with the old password after passwd");
    v.passfile = newp;
    v.mount();
    assert_eq!(fs::read(v.p("file")).unwrap(), b"data survives passwd");
}
