//! The man pages and shell completions are made from the clap definitions
//! (`warpfs gen-man`, `warpfs gen-completions`): every subcommand and
//! every option that `--help` lists appears in them.

use crate::common::*;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The subcommands listed under "Commands:" in `warpfs [SUB...] --help`.
fn subcommands(path: &[&str]) -> Vec<String> {
    let mut a: Vec<&str> = path.to_vec();
    a.push("--help");
    let o = warpfs(a);
    o.expect_ok("--help");
    let mut in_cmds = false;
    let mut out = Vec::new();
    for l in o.stdout.lines() {
        if l.starts_with("Commands:") {
            in_cmds = true;
            continue;
        }
        if in_cmds {
            let Some(name) = l.strip_prefix("  ").and_then(|r| r.split_whitespace().next()) else {
                break;
            };
            if name != "help" {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// The long options (`--name`) that `warpfs [SUB...] --help` lists.
fn long_options(path: &[&str]) -> BTreeSet<String> {
    let mut a: Vec<&str> = path.to_vec();
    a.push("--help");
    let o = warpfs(a);
    o.expect_ok("--help");
    o.stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == ',' || c == '='))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()).to_string())
        .collect()
}

/// A man page's text with roff's escaped hyphens made plain.
fn page(dir: &Path, name: &str) -> String {
    let p = dir.join(name);
    fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .replace("\\-", "-")
}

#[test]
fn every_subcommand_and_option_is_in_the_man_pages() {
    let dir = tempfile::tempdir().unwrap();
    warpfs(args!["gen-man", dir.path()]).expect_ok("gen-man");
    let top = page(dir.path(), "warpfs.1");
    assert!(
        top.starts_with(".ie") || top.contains(".TH warpfs 1"),
        "not a man page:\n{top}"
    );
    let mut checked = 0;
    let mut todo: Vec<Vec<String>> = subcommands(&[]).into_iter().map(|s| vec![s]).collect();
    assert!(todo.len() >= 8, "too few subcommands: {todo:?}");
    while let Some(path) = todo.pop() {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let name = format!("warpfs-{}", path.join("-"));
        let parent = if path.len() == 1 {
            top.clone()
        } else {
            page(dir.path(), &format!("warpfs-{}.1", path[..path.len() - 1].join("-")))
        };
        assert!(parent.contains(&name), "{name} is not listed in its parent's page");
        let text = page(dir.path(), &format!("{name}.1"));
        for opt in long_options(&p) {
            assert!(
                text.contains(&opt),
                "{opt} of `warpfs {}` is not in {name}.1",
                p.join(" ")
            );
            checked += 1;
        }
        for sub in subcommands(&p) {
            let mut q = path.clone();
            q.push(sub);
            todo.push(q);
        }
    }
    assert!(checked > 60, "only {checked} options checked");
    // The mount helper's page, with the fstab options.
    let helper = page(dir.path(), "mount.warpfs.8");
    for w in [
        "passfile=",
        "idle=",
        "nofail",
        "x-systemd",
        "fuse.warpfs",
        "allow_other",
        "tpm2",
        "tpm2-tcti=",
        "fido2",
    ] {
        assert!(helper.contains(w), "mount.warpfs.8 does not mention {w}");
    }
    // The exit codes are in warpfs(1).
    for code in [
        "10 wrong password",
        "13 the mount failed",
        "14 a rekey to a new volume key is unfinished",
        "22 fsck refused",
    ] {
        assert!(top.replace('\n', " ").contains(code), "warpfs.1 lacks '{code}'");
    }
}

#[test]
fn completions_know_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    warpfs(args!["gen-completions", dir.path()]).expect_ok("gen-completions");
    let subs = subcommands(&[]);
    for file in ["warpfs.bash", "_warpfs", "warpfs.fish"] {
        let text = fs::read_to_string(dir.path().join(file)).unwrap();
        for s in &subs {
            assert!(text.contains(s.as_str()), "{file} does not complete {s}");
        }
        assert!(text.contains("force-owner"), "{file} does not complete --force-owner");
        for w in [
            "new-volume-key",
            "new-recovery",
            "unlock-keyfile",
            "tpm2-tcti",
            "tpm2-pcrs",
            "fido2-device",
            "unlock-fido2",
            "unlock-tpm2",
        ] {
            assert!(text.contains(w), "{file} does not complete --{w}");
        }
    }
    // bash can load it.
    let mut c = std::process::Command::new("bash");
    c.arg("-c").arg(format!(
        ". {} && complete -p warpfs",
        dir.path().join("warpfs.bash").display()
    ));
    run_cmd(c, std::time::Duration::from_secs(30)).expect_ok("bash loads the completion");
}
