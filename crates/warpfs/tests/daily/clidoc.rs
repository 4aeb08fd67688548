//! docs/CLI.md is a contract: every exit code it documents is the one the
//! program gives in that case, the table lists exactly the codes the
//! program defines (src/cli/exit.rs), and a front-end's password path
//! (`--passfile /dev/stdin`) works.

use crate::common::*;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const DOC: &str = include_str!("../../../../docs/CLI.md");
const EXIT_RS: &str = include_str!("../../src/cli/exit.rs");

/// code → meaning, from the table under "## Exit codes".
fn documented() -> BTreeMap<i32, String> {
    let section = DOC
        .split("## Exit codes")
        .nth(1)
        .expect("docs/CLI.md has an Exit codes section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split('|').map(str::trim).collect();
            Some((cells.first()?.parse().ok()?, cells.get(1)?.to_string()))
        })
        .collect()
}

/// The `pub const NAME: i32 = N;` codes of exit.rs.
fn defined() -> BTreeMap<i32, String> {
    EXIT_RS
        .lines()
        .filter_map(|l| {
            let r = l.trim().strip_prefix("pub const ")?;
            let (name, v) = r.split_once(": i32 = ")?;
            Some((v.trim_end_matches(';').parse().ok()?, name.to_string()))
        })
        .collect()
}

#[test]
fn the_documented_exit_codes_are_the_real_ones() {
    require_fuse!();
    let doc = documented();
    let def = defined();
    assert_eq!(
        doc.keys().collect::<Vec<_>>(),
        def.keys().collect::<Vec<_>>(),
        "docs/CLI.md documents {doc:?}, src/cli/exit.rs defines {def:?}"
    );
    // Without file summaries: `warpfs upgrade` below has something to do.
    let mut v = Volume::init_with(Mode::Gcm, &["--file-summary", "off"]);
    let c = v.cipher.clone();
    let pw = v.passfile.clone();
    let wrong = v.root().join("wrong");
    fs::write(&wrong, "not the password\n").unwrap();
    let empty = tempfile::tempdir().unwrap();
    let full = tempfile::tempdir().unwrap();
    fs::write(full.path().join("x"), b"x").unwrap();
    let mut seen: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut check = |code: i32, o: Out| {
        assert_eq!(o.code, Some(code), "documented as {code} ({:?}):\n{o}", doc.get(&code));
        if code != 0 {
            assert!(
                o.stderr.starts_with("warpfs: ") || o.stderr.starts_with("error:"),
                "{o}"
            );
        }
        seen.entry(code).or_default().push(o.what.clone());
    };
    check(0, warpfs(args!["info", &c]));
    check(1, warpfs(args!["fsck", "--passfile", v.root().join("missing"), &c]));
    check(1, warpfs(args!["mount", "--extpass", "exit 3", &c, &v.mnt]));
    check(2, warpfs(args!["info", "--no-such-option", &c]));
    check(2, warpfs(args!["mount", "-o", "bogus", &c, &v.mnt]));
    check(2, warpfs(args![&c, &v.mnt, "-o", "bogus"]));
    check(10, warpfs(args!["fsck", "--passfile", &wrong, &c]));
    check(10, warpfs(args!["mount", "--passfile", &wrong, &c, &v.mnt]));
    check(11, warpfs(args!["info", empty.path()]));
    check(11, warpfs(args!["info", "--config", v.root().join("none.conf"), &c]));
    check(12, warpfs(args!["init", "--passfile", &pw, full.path()]));
    check(
        13,
        warpfs(args!["mount", "--passfile", &pw, &c, v.root().join("no-such-dir")]),
    );
    check(13, warpfs(args!["mount", "--passfile", &pw, &c, full.path()]));
    let sidecar = c.join(format!("warpfs.long.{}.name", "A".repeat(43)));
    fs::write(&sidecar, b"orphan").unwrap();
    check(20, warpfs(args!["fsck", "--passfile", &pw, &c]));
    check(21, warpfs(args!["fsck", "--passfile", &pw, "--repair", &c]));
    check(0, warpfs(args!["fsck", "--passfile", &pw, &c]));
    v.mount();
    check(22, warpfs(args!["fsck", "--passfile", &pw, &c]));
    v.unmount();
    // A rekey to a new volume key stopped right after it wrote the config.
    let mut k = Command::new(BIN);
    k.args(["rekey", "--new-volume-key", "--yes", "--passfile"])
        .arg(&pw)
        .arg(&c)
        .env("WARPFS_REKEY_KILL", "config:0");
    assert_eq!(run_cmd(k, std::time::Duration::from_secs(60)).code, None, "not killed");
    check(14, warpfs(args!["mount", "--passfile", &pw, &c, &v.mnt]));
    check(14, warpfs(args!["fsck", "--passfile", &pw, &c]));
    check(0, warpfs(args!["rekey", "--passfile", &pw, &c]));
    // An upgrade to file summaries stopped right after it wrote the config.
    let mut u = Command::new(BIN);
    u.args(["upgrade", "--passfile"])
        .arg(&pw)
        .arg(&c)
        .env("WARPFS_UPGRADE_KILL", "config:0");
    assert_eq!(run_cmd(u, std::time::Duration::from_secs(60)).code, None, "not killed");
    check(18, warpfs(args!["mount", "--passfile", &pw, &c, &v.mnt]));
    check(18, warpfs(args!["fsck", "--passfile", &pw, &c]));
    check(18, warpfs(args!["rekey", "--passfile", &pw, &c]));
    check(0, warpfs(args!["upgrade", "--passfile", &pw, &c]));
    check(1, warpfs(args!["upgrade", "--passfile", &pw, &c]));
    // TPM2 slots: a frozen volume with one (sealed by a TPM long gone).
    let t = Volume::blank(Mode::Gcm);
    let frozen = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/volumes/v3-tpm2-gcm");
    copy_tree(&frozen.join("cipher"), &t.cipher);
    let (tc, tp) = (t.cipher.clone(), frozen.join("password.txt"));
    let no_dev = args!["mount", "--tpm2", "--tpm2-tcti", "device:/dev/tpmrm97", &tc, &t.mnt];
    check(15, warpfs(no_dev));
    // Without swtpm (a counted skip) nothing refuses or fails to know a slot.
    let tpm = warpfs_testkit::swtpm::for_test();
    if let Some(tpm) = &tpm {
        check(17, warpfs(args!["fsck", "--tpm2", "--tpm2-tcti", tpm.tcti(), &tc]));
        let add = args![
            "key",
            "add",
            "--passfile",
            &tp,
            "--tpm2",
            "--tpm2-tcti",
            tpm.tcti(),
            "--tpm2-pcrs",
            "9",
            &tc
        ];
        check(0, warpfs(add));
        let tcti = warpfs_tpm2::Tcti::parse(&tpm.tcti()).unwrap();
        warpfs_tpm2::extend_pcr(&tcti, 9, b"x").unwrap();
        check(
            16,
            warpfs(args!["mount", "--tpm2", "--tpm2-tcti", tpm.tcti(), &tc, &t.mnt]),
        );
    }
    let unproduced = |k: &&i32| !seen.contains_key(k) && (tpm.is_some() || ![16, 17].contains(*k));
    let missing: Vec<_> = doc.keys().filter(unproduced).collect();
    assert!(missing.is_empty(), "documented codes never produced: {missing:?}");
}

#[test]
fn a_front_end_passes_the_password_on_stdin() {
    require_fuse!();
    let mut v = Volume::init(Mode::Gcm);
    let mut child = Command::new(BIN)
        .args(["mount", "--passfile", "/dev/stdin"])
        .arg(&v.cipher)
        .arg(&v.mnt)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{PASSWORD}\n").as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(is_mounted(&v.mnt));
    write_file(&v.p("f"), b"x");
    unmount_path(&v.mnt).unwrap();
    v.daemon_stopped();
}

/// The backticked names of a section of docs/CLI.md.
fn section_names(title: &str) -> std::collections::BTreeSet<String> {
    let sec = DOC.split(title).nth(1).unwrap_or_else(|| panic!("no section {title}"));
    let sec = sec.split("\n## ").next().unwrap();
    sec.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_json_field_is_documented() {
    require_fuse!();
    let v = Volume::new(Mode::Gcm);
    let o = warpfs(args!["stats", "--json", &v.mnt]);
    o.expect_ok("stats --json");
    let j: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {o}"));
    let keys: std::collections::BTreeSet<String> = j.as_object().unwrap().keys().cloned().collect();
    let doc = section_names("## `warpfs stats --json MOUNTPOINT`");
    let undocumented: Vec<_> = keys.difference(&doc).collect();
    assert!(
        undocumented.is_empty(),
        "stats --json fields missing from docs/CLI.md: {undocumented:?}"
    );
    for k in [
        "backend",
        "applies",
        "ready_hits",
        "transport",
        "ahead_served",
        "worker_cpus",
    ] {
        assert!(keys.contains(k), "documented field {k} missing: {j}");
    }
    warpfs(args!["stats", "--json", v.root()]).expect_code(1, "not a mount");
    // info --json and speed --json, nested objects included.
    fn keys_of(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    out.insert(k.clone());
                    keys_of(x, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| keys_of(x, out)),
            _ => {}
        }
    }
    for (args, title) in [
        (args!["info", "--json", &v.cipher], "## `warpfs info --json`"),
        (args!["speed", "--json", "--time-ms", "1"], "## `warpfs speed --json`"),
    ] {
        let o = warpfs(args);
        o.expect_ok(title);
        let mut keys = std::collections::BTreeSet::new();
        keys_of(&serde_json::from_str(o.stdout.trim()).unwrap(), &mut keys);
        let doc = section_names(title);
        let undocumented: Vec<_> = keys.difference(&doc).collect();
        assert!(
            undocumented.is_empty(),
            "{title}: fields missing from docs/CLI.md: {undocumented:?}"
        );
    }
}
