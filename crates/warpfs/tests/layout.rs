//! The house rules the tree itself can check (CONTRIBUTING.md): every Rust
//! source file starts with a `//!` line saying what it is for, and none
//! passes 800 lines (a file is split where its concerns part, never by
//! length alone, so the cap only catches a file that grew past any seam).

use std::path::{Path, PathBuf};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const MOST_LINES: usize = 800;

/// Every `.rs` file under `dir`, build outputs left out.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

/// The files of the tree that break a rule, with why.
fn breaches(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for d in ["crates", "fuzz", "bench", "scripts"] {
        rust_files(&root.join(d), &mut files);
    }
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let shown = f.strip_prefix(root).unwrap_or(f).display();
        let lines = text.lines().count();
        if lines > MOST_LINES {
            bad.push(format!(
                "{shown}: {lines} lines (at most {MOST_LINES}: split it at a seam)"
            ));
        }
        if !text.starts_with("//!") {
            bad.push(format!(
                "{shown}: does not start with a `//!` line saying what it is for"
            ));
        }
    }
    assert!(files.len() > 300, "only {} Rust files found under {ROOT}", files.len());
    bad
}

#[test]
fn every_rust_file_says_what_it_is_for_and_stays_under_the_cap() {
    let bad = breaches(Path::new(ROOT));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_check_finds_a_long_file_and_one_without_its_line() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("crates/x/src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..301 {
        std::fs::write(src.join(format!("ok{i}.rs")), "//! Fine.\n").unwrap();
    }
    std::fs::write(
        src.join("long.rs"),
        format!("//! Long.\n{}", "fn f() {}\n".repeat(MOST_LINES)),
    )
    .unwrap();
    std::fs::write(src.join("bare.rs"), "fn main() {}\n").unwrap();
    let bad = breaches(d.path());
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(
        bad.iter().any(|b| b.contains("long.rs") && b.contains("801 lines")),
        "{bad:?}"
    );
    assert!(
        bad.iter().any(|b| b.contains("bare.rs") && b.contains("//!")),
        "{bad:?}"
    );
}

/// Scheduler calls that place a thread: only the engine's placement
/// module makes them (ARCHITECTURE.md, warpfs-engine).
const PLACEMENT_CALLS: [&str; 7] = [
    "sched_setaffinity",
    "sched_getaffinity",
    "sched_setscheduler",
    "sched_getscheduler",
    "sched_getcpu",
    "setpriority",
    "CPU_SET(",
];

/// Product source files (a crate's `src/`, its unit tests left out) that
/// make a placement call outside `crates/engine/src/placement/`.
fn placement_outside(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root.join("crates"), &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f).to_string_lossy().into_owned();
        let product = rel.contains("/src/") && !rel.ends_with("tests.rs") && !rel.contains("/tests/");
        if !product || rel.starts_with("crates/engine/src/placement/") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests sit at a file's end, after `#[cfg(test)]`.
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or("");
        for l in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            if let Some(c) = PLACEMENT_CALLS.iter().find(|c| l.contains(*c)) {
                bad.push(format!("{rel}: {c} outside the placement module: {}", l.trim()));
            }
        }
    }
    bad
}

#[test]
fn only_the_placement_module_places_threads() {
    let bad = placement_outside(Path::new(ROOT));
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_placement_check_finds_a_call_outside_its_module() {
    let d = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let call = "//! X.\nfn f() { unsafe { libc::sched_setaffinity(0, 0, std::ptr::null()) }; }\n";
    write("crates/fuse/src/roam.rs", call);
    write("crates/engine/src/placement/set.rs", call);
    write("crates/fuse/src/x_tests.rs", call);
    write(
        "crates/fuse/src/quiet.rs",
        "//! Q.\n// sched_setaffinity in a comment\n#[cfg(test)]\nmod tests {\n    fn t() { libc::setpriority(0, 0, 0); }\n}\n",
    );
    let bad = placement_outside(d.path());
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with("crates/fuse/src/roam.rs"), "{bad:?}");
}
