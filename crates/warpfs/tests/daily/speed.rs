//! `warpfs speed`: every content mode and cipher `warpfs init` offers and
//! the cpu keystream backend are measured, each with a positive rate, and
//! exactly one of each is marked as what warpfs picks; the CPU line names
//! this machine's architecture and the AES path the cpu backend takes.
//! (Rates are printed, never compared: timing belongs in bench/.)

use crate::common::*;

#[test]
fn speed_measures_every_mode_and_backend_and_marks_the_default() {
    let o = warpfs(args!["speed", "--json", "--time-ms", "5"]);
    o.expect_ok("speed --json");
    let j: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {o}"));
    eprintln!("{j:#}");
    assert_eq!(j["schema"], 1);
    let modes = j["modes"].as_array().unwrap();
    let mut want = vec![];
    for bits in [128, 256] {
        for m in ["gcm", "ctr", "xts"] {
            want.push((m, "AES", bits));
        }
        want.push(("xts", "Twofish", bits));
    }
    for (m, c, b) in want {
        let hit = modes
            .iter()
            .find(|x| x["mode"] == m && x["cipher"] == c && x["key_bits"] == b)
            .unwrap_or_else(|| panic!("{m} {c}-{b} not measured: {j}"));
        assert!(hit["mb_per_s"].as_f64().unwrap() > 0.0, "{hit}");
    }
    let defaults: Vec<_> = modes.iter().filter(|x| x["default"] == true).collect();
    assert_eq!(defaults.len(), 1, "{j}");
    assert_eq!(
        (&defaults[0]["mode"], &defaults[0]["key_bits"]),
        (&"gcm".into(), &256.into())
    );
    let backs = j["backends"].as_array().unwrap();
    assert!(backs.iter().any(|b| b["engine"] == "cpu" && b["available"] == true));
    for b in backs.iter().filter(|b| b["available"] == true) {
        assert!(b["mb_per_s"].as_f64().unwrap() > 0.0, "{b}");
    }
    for b in backs.iter().filter(|b| b["available"] == false) {
        assert!(!b["why"].as_str().unwrap().is_empty(), "{b}");
    }
    // One backend marked per cipher: the one a mount of that cipher uses.
    let mut ciphers: Vec<&str> = backs.iter().filter_map(|b| b["cipher"].as_str()).collect();
    ciphers.sort();
    ciphers.dedup();
    for c in ["AES", "Twofish", "XChaCha20"] {
        assert!(ciphers.contains(&c), "no {c} backend listed: {j}");
    }
    for c in &ciphers {
        let marked = backs
            .iter()
            .filter(|b| b["cipher"] == *c && b["default"] == true)
            .count();
        assert_eq!(marked, 1, "{c}: {j}");
    }
    // The CPU: this architecture, and the AES path the cpu backend's name
    // agrees with (ARMv8 AES on arm64, never an x86 instruction there).
    let cpu = &j["cpu"];
    assert_eq!(cpu["arch"], std::env::consts::ARCH, "{j}");
    let aes = cpu["aes"].as_str().unwrap();
    assert!(!cpu["ghash"].as_str().unwrap().is_empty(), "{j}");
    assert!(cpu["features"].is_array(), "{j}");
    let hw = &backs
        .iter()
        .find(|b| b["engine"] == "cpu" && b["available"] == true && !b["name"].as_str().unwrap().contains("forced"))
        .unwrap_or_else(|| panic!("no cpu backend on the aes 0.9 path: {j}"))["name"];
    let hw = hw.as_str().unwrap();
    if aes.starts_with("software") {
        assert!(hw.starts_with("software"), "{hw} / {aes}");
    } else if cfg!(target_arch = "aarch64") {
        assert!(aes.contains("ARMv8") && hw.contains("armv8"), "{hw} / {aes}");
    }
    if !cfg!(target_arch = "x86_64") {
        assert!(!hw.contains("aes-ni") && !aes.contains("AES-NI"), "{hw} / {aes}");
    }
    // The text form marks the same choices.
    let t = warpfs(args!["speed", "--time-ms", "5"]);
    t.expect_ok("speed");
    assert_eq!(t.stdout.matches("<- warpfs init's default").count(), 1, "{t}");
    assert_eq!(
        t.stdout.matches("<- warpfs mount's default").count(),
        ciphers.len(),
        "{t}"
    );
    assert!(
        t.stdout.starts_with(&format!("CPU: {} (", std::env::consts::ARCH)),
        "{t}"
    );
}

/// `warpfs speed | head -n 1`: the command ends when its reader goes away,
/// by SIGPIPE like any Unix tool, and never with a panic ("failed printing
/// to stdout: Broken pipe").
#[test]
fn speed_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(BIN)
        .args(["speed", "--time-ms", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closing the only read end before anything is printed: every write
    // the command makes meets a pipe without a reader.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}: {err}", out.status);
}
