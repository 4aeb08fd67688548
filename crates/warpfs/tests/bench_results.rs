//! Benchmark results stay findable: bench/results/ holds only run folders
//! named `YYYY-MM-DD-TOPIC`, each listed in the index of
//! bench/results/README.md (`bash bench/index.sh` writes it), and every
//! relative link of the repository's Markdown resolves, so moving a result
//! cannot leave a decision record or a README pointing at nothing.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

const BEGIN: &str =
    "<!-- index: made from the run folders by `bash bench/index.sh`; edit the folders, not this table -->";
const END: &str = "<!-- end of index -->";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `YYYY-MM-DD-topic` with a real month and day and a topic of lower-case
/// letters, digits and `-`.
fn is_run_folder(name: &str) -> bool {
    let b = name.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let dashes = [4, 7, 10].iter().all(|&i| b.get(i) == Some(&b'-'));
    if !(dashes && digits(0..4) && digits(5..7) && digits(8..10)) {
        return false;
    }
    let month: u32 = name[5..7].parse().unwrap_or(0);
    let day: u32 = name[8..10].parse().unwrap_or(0);
    let topic = &name[11..];
    (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && topic.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && topic
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// The entries of bench/results/ that break the scheme: anything but
/// README.md and run folders. `entries` are (name, is a directory).
fn off_scheme(entries: &[(String, bool)]) -> Vec<String> {
    entries
        .iter()
        .filter(|(name, dir)| {
            let readme = name == "README.md" && !dir;
            let run = *dir && is_run_folder(name);
            !(readme || run)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// The index section of README.md, between its markers.
fn index_of(readme: &str) -> Result<&str, String> {
    let b = readme
        .find(BEGIN)
        .ok_or("bench/results/README.md has no index marker")?;
    let e = readme
        .find(END)
        .ok_or("bench/results/README.md has no end-of-index marker")?;
    readme
        .get(b + BEGIN.len()..e)
        .ok_or_else(|| "bench/results/README.md's index markers are out of order".into())
}

/// Run folders the index does not link, and folders it links that are not there.
fn index_problems(folders: &[String], index: &str) -> Vec<String> {
    let mut problems: Vec<String> = folders
        .iter()
        .filter(|f| !index.contains(&format!("]({f}/)")))
        .map(|f| format!("{f}/ is not in the index of bench/results/README.md"))
        .collect();
    for (target, _) in links(index) {
        let name = target.trim_end_matches('/');
        if !folders.iter().any(|f| f == name) {
            problems.push(format!("the index links {target}, which is no run folder"));
        }
    }
    problems
}

/// The `](target)` links of Markdown text outside fenced code, with their
/// line numbers; no URLs, no in-page anchors.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split('#').next().unwrap_or("");
            let url = target
                .split_once(':')
                .is_some_and(|(scheme, _)| !scheme.is_empty() && scheme.bytes().all(|c| c.is_ascii_alphabetic()));
            if !target.is_empty() && !url && !target.contains(char::is_whitespace) {
                out.push((target.to_string(), n + 1));
            }
            rest = &rest[end..];
        }
    }
    out
}

/// The relative links of one Markdown file that name no existing path.
fn broken_links(file: &Path, text: &str, exists: impl Fn(&Path) -> bool) -> Vec<String> {
    let dir = file.parent().unwrap_or(Path::new(""));
    links(text)
        .into_iter()
        .filter(|(target, _)| {
            let mut p = dir.to_path_buf();
            for c in Path::new(target).components() {
                match c {
                    Component::ParentDir => {
                        p.pop();
                    }
                    Component::Normal(s) => p.push(s),
                    _ => {}
                }
            }
            !exists(&p)
        })
        .map(|(target, line)| format!("{}:{line}: {target}", file.display()))
        .collect()
}

/// Every Markdown file of the repository, build output and hidden folders left out.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("a repository folder") {
        let e = e.expect("an entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let ty = e.file_type().expect("a file type");
        if ty.is_dir() && !name.starts_with('.') && name != "target" {
            markdown_files(&e.path(), out);
        } else if ty.is_file() && name.ends_with(".md") {
            out.push(e.path());
        }
    }
}

fn results_entries() -> Vec<(String, bool)> {
    let mut entries: Vec<(String, bool)> = std::fs::read_dir(repo().join("bench/results"))
        .expect("bench/results")
        .map(|e| {
            let e = e.expect("an entry");
            let dir = e.file_type().expect("a file type").is_dir();
            (e.file_name().to_string_lossy().into_owned(), dir)
        })
        .collect();
    entries.sort();
    entries
}

#[test]
fn bench_results_holds_only_dated_run_folders() {
    let bad = off_scheme(&results_entries());
    assert!(
        bad.is_empty(),
        "bench/results/ entries that are no YYYY-MM-DD-TOPIC folder: {bad:?} (bench/results/README.md)"
    );
}

#[test]
fn every_run_folder_is_in_the_index() {
    let folders: Vec<String> = results_entries()
        .into_iter()
        .filter(|(name, dir)| *dir && is_run_folder(name))
        .map(|(name, _)| name)
        .collect();
    assert!(folders.len() > 40, "only {} run folders", folders.len());
    let readme = std::fs::read_to_string(repo().join("bench/results/README.md")).expect("README.md");
    let problems = index_problems(&folders, index_of(&readme).unwrap());
    assert!(
        problems.is_empty(),
        "{}\nrun `bash bench/index.sh`",
        problems.join("\n")
    );
}

#[test]
fn the_index_is_what_bench_index_sh_makes() {
    let out = Command::new("bash")
        .arg(repo().join("bench/index.sh"))
        .arg("--check")
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_relative_markdown_link_resolves() {
    let root = repo();
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(files.len() > 100, "only {} Markdown files", files.len());
    let mut broken = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("a Markdown file");
        let rel = f.strip_prefix(&root).unwrap_or(f);
        broken.extend(broken_links(rel, &text, |p| root.join(p).exists()));
    }
    assert!(broken.is_empty(), "links to nothing:\n{}", broken.join("\n"));
}

// The checks themselves, on inputs made up here: each must refuse.

#[test]
fn an_undated_or_misnamed_entry_is_refused() {
    let e = |n: &str, d: bool| (n.to_string(), d);
    assert!(off_scheme(&[e("README.md", false), e("2026-11-28-transport", true)]).is_empty());
    for bad in [
        e("transport", true),
        e("transport.json", false),
        e("2026-11-28-transport", false),
        e("2026-13-01-x", true),
        e("2026-11-00-x", true),
        e("2026-11-28-", true),
        e("2026-11-28-Transport", true),
        e("2026-11-28_transport", true),
        e("26-11-28-transport", true),
        e("README.md", true),
    ] {
        assert_eq!(off_scheme(std::slice::from_ref(&bad)), vec![bad.0.clone()], "{bad:?}");
    }
}

#[test]
fn a_folder_missing_from_the_index_or_linked_but_absent_is_found() {
    let folders = vec!["2026-11-28-a".to_string(), "2026-11-29-b".to_string()];
    let both = "| [2026-11-28-a](2026-11-28-a/) | x |\n| [2026-11-29-b](2026-11-29-b/) | y |\n";
    assert!(index_problems(&folders, both).is_empty());
    let one = "| [2026-11-28-a](2026-11-28-a/) | x |\n";
    assert_eq!(index_problems(&folders, one).len(), 1);
    let extra = format!("{both}| [2026-11-30-c](2026-11-30-c/) | z |\n");
    assert_eq!(index_problems(&folders, &extra).len(), 1);
    let readme = format!("# R\n\n{BEGIN}\n\n{one}\n{END}\n[2026-11-29-b](2026-11-29-b/)\n");
    assert_eq!(
        index_problems(&folders, index_of(&readme).unwrap()).len(),
        1,
        "a link below the index is not in the index"
    );
}

#[test]
fn a_link_to_nothing_is_found_and_urls_anchors_and_code_are_not_links() {
    let there = |p: &Path| p == Path::new("bench/results/2026-11-28-a/a.md") || p == Path::new("docs/x.md");
    let text = "see [a](../bench/results/2026-11-28-a/a.md#top) and [x](x.md)\n\
                [web](https://example.com/none) [here](#none) [mail](mailto:a@b)\n\
                ```\n[code](nowhere.md)\n```\n";
    assert!(broken_links(Path::new("docs/d.md"), text, there).is_empty());
    let moved = "[a](../bench/results/a.md) and [b](x.md)\n";
    assert_eq!(
        broken_links(Path::new("docs/d.md"), moved, there),
        vec!["docs/d.md:1: ../bench/results/a.md".to_string()]
    );
}
