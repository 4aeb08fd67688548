//! The decision records' index is made from the records: every record has
//! a title, a `Status:` line and an `In one line:` line; an amendment or a
//! supersession is marked on both records; and the table in
//! docs/decisions/README.md is exactly what the records give
//! (`WARPFS_BLESS=1 cargo test -p warpfs --test decisions` writes it).
//! Measurements live in bench/results/ and are linked from the records:
//! no record holds a table of numbers or names a commit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const BEGIN: &str = "<!-- index: made from the records by `WARPFS_BLESS=1 cargo test -p warpfs --test decisions`; edit the records, not this table -->";
const END: &str = "<!-- end of index -->";

/// One record as the index sees it.
#[derive(Debug, Clone)]
struct Record {
    number: String,
    file: String,
    title: String,
    /// The Status text, links reduced to their numbers, lines joined.
    status: String,
    one_line: String,
}

fn decisions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/decisions")
}

/// `[0079](0079-x.md)` → `0079`.
fn unlink(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find("](").and_then(|j| after[j..].find(')').map(|k| (j, j + k))) {
            Some((j, k)) => {
                out.push_str(&after[..j]);
                rest = &after[k + 1..];
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Parse one record file; every problem is a message naming the file.
fn parse(file: &str, text: &str) -> Result<Record, String> {
    let number = file.get(..4).filter(|n| n.bytes().all(|b| b.is_ascii_digit()));
    let number = number.ok_or(format!("{file}: the name does not start with NNNN"))?;
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("");
    let title = first
        .strip_prefix(&format!("# {number}"))
        .and_then(|t| t.strip_prefix(':').or_else(|| t.strip_prefix(" —")))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(format!("{file}: the first line is not `# {number}: Title`"))?;
    let head: Vec<&str> = text.lines().take_while(|l| !l.starts_with("## ")).collect();
    let at = head
        .iter()
        .position(|l| l.starts_with("Status:"))
        .ok_or(format!("{file}: no `Status:` line before the first section"))?;
    let mut status = head[at]["Status:".len()..].trim().to_string();
    let mut one_line = None;
    for l in &head[at + 1..] {
        if let Some(o) = l.strip_prefix("In one line:") {
            one_line = Some(o.trim().to_string());
            break;
        }
        if l.trim().is_empty() {
            break;
        }
        status.push(' ');
        status.push_str(l.trim());
    }
    let status = unlink(&status);
    let known = ["accepted", "superseded by ", "proposed", "rejected"];
    if !known.iter().any(|k| status.starts_with(k)) {
        return Err(format!("{file}: Status `{status}` starts with none of {known:?}"));
    }
    let one_line = one_line
        .filter(|o| !o.is_empty())
        .ok_or(format!("{file}: no `In one line:` right after the Status"))?;
    Ok(Record {
        number: number.to_string(),
        file: file.to_string(),
        title: title.to_string(),
        status,
        one_line,
    })
}

/// The record numbers a status names after `word` (`amends 0035`, ...).
fn named_after(status: &str, word: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = status;
    while let Some(i) = rest.find(word) {
        rest = &rest[i + word.len()..];
        let n: String = rest.trim_start().chars().take(4).collect();
        if n.len() == 4 && n.bytes().all(|b| b.is_ascii_digit()) {
            out.push(n);
        }
    }
    out
}

/// Both sides of every amendment and supersession.
fn check_links(records: &BTreeMap<String, Record>) -> Vec<String> {
    let mut problems = Vec::new();
    for r in records.values() {
        let pairs = [
            ("supersedes ", "superseded by "),
            ("superseded by ", "supersedes "),
            ("amends ", "amended by "),
            ("amended by ", "amends "),
        ];
        for (word, back) in pairs {
            for n in named_after(&r.status, word) {
                match records.get(&n) {
                    None => problems.push(format!("{}: `{word}{n}`, but there is no record {n}", r.file)),
                    Some(o) if !named_after(&o.status, back).contains(&r.number) => problems.push(format!(
                        "{}: `{word}{n}`, but {}'s Status does not say `{back}{}`",
                        r.file, o.file, r.number
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    problems
}

/// The status as the index shows it: no parentheses, `;` as `,`.
fn short_status(status: &str) -> String {
    let mut out = String::new();
    let mut depth = 0u32;
    for c in status.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let out = out.replace(';', ",");
    let words: Vec<&str> = out.split_whitespace().collect();
    words
        .join(" ")
        .replace(" ,", ",")
        .trim_end_matches([',', ':'])
        .to_string()
}

fn table(records: &BTreeMap<String, Record>) -> String {
    let mut t = String::from("| # | decision | status | in one line |\n|---|---|---|---|\n");
    for r in records.values() {
        t.push_str(&format!(
            "| [{}]({}) | {} | {} | {} |\n",
            r.number,
            r.file,
            r.title.replace('|', "\\|"),
            short_status(&r.status),
            r.one_line.replace('|', "\\|")
        ));
    }
    t
}

fn read_records(dir: &Path) -> (BTreeMap<String, Record>, Vec<String>) {
    let mut records = BTreeMap::new();
    let mut problems = Vec::new();
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("docs/decisions")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".md") && f != "README.md")
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(dir.join(&f)).expect("a record");
        match parse(&f, &text) {
            Ok(r) => {
                if let Some(o) = records.insert(r.number.clone(), r.clone()) {
                    problems.push(format!("{} and {} share the number {}", o.file, r.file, r.number));
                }
            }
            Err(e) => problems.push(e),
        }
    }
    (records, problems)
}

/// Whether a table cell is a measurement: digits, with at most a short
/// unit beside them (`134.6`, `0.48x`, `1.65 (60.5%)`, `28 µs`).
fn is_number(cell: &str) -> bool {
    let cell = cell.trim().trim_matches('*');
    let digits = cell.chars().filter(char::is_ascii_digit).count();
    let letters = cell.chars().filter(|c| c.is_alphabetic() && *c != 'x').count();
    digits > 0 && letters <= 3 && !cell.contains('`')
}

/// The first line (1-based) of each Markdown table in `text` whose body
/// cells are at least half numbers.
fn measurement_tables(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with('|') {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].trim_start().starts_with('|') {
            i += 1;
        }
        let rule = |l: &str| l.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '));
        let rows = &lines[start..i];
        let body = match rows.get(1) {
            Some(r) if rule(r) => &rows[2..],
            _ => rows,
        };
        let cells: Vec<&str> = body
            .iter()
            .flat_map(|r| r.trim().trim_matches('|').split('|'))
            .filter(|c| !c.trim().is_empty())
            .collect();
        let numbers = cells.iter().filter(|c| is_number(c)).count();
        if body.len() >= 2 && numbers * 2 >= cells.len() {
            found.push(start + 1);
        }
    }
    found
}

/// Commit ids named in `text` outside link targets (`](...)`): words of 7
/// to 40 hex digits with both a digit and a letter.
fn commit_ids(text: &str) -> Vec<String> {
    let mut prose = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        prose.push_str(&rest[..i]);
        rest = &rest[i + 2..];
        rest = &rest[rest.find(')').map_or(rest.len(), |j| j + 1)..];
    }
    prose.push_str(rest);
    prose
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| (7..=40).contains(&w.len()))
        .filter(|w| w.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .filter(|w| w.bytes().any(|b| b.is_ascii_digit()) && w.bytes().any(|b| b.is_ascii_alphabetic()))
        .map(str::to_string)
        .collect()
}

/// What a record may not hold: measurement tables and commit ids.
fn measurements_in(file: &str, text: &str) -> Vec<String> {
    let mut problems: Vec<String> = measurement_tables(text)
        .into_iter()
        .map(|l| format!("{file}:{l}: a table of measurements (move it to bench/results/ and link it)"))
        .collect();
    for c in commit_ids(text) {
        problems.push(format!(
            "{file}: names commit {c} (the results folder names what it measured)"
        ));
    }
    problems
}

/// README.md with its index replaced by `index`.
fn with_index(readme: &str, index: &str) -> Result<String, String> {
    let b = readme.find(BEGIN).ok_or("README.md has no index marker")?;
    let e = readme.find(END).ok_or("README.md has no end-of-index marker")?;
    if e < b {
        return Err("README.md's index markers are out of order".into());
    }
    Ok(format!("{}{BEGIN}\n\n{index}\n{}", &readme[..b], &readme[e..]))
}

#[test]
fn every_record_has_a_title_a_status_and_one_line_and_both_sides_of_each_link() {
    let (records, mut problems) = read_records(&decisions_dir());
    problems.extend(check_links(&records));
    assert!(records.len() > 60, "only {} records read", records.len());
    assert!(problems.is_empty(), "decision records:\n{}", problems.join("\n"));
}

#[test]
fn no_record_holds_a_measurement_table_or_a_commit() {
    let dir = decisions_dir();
    let mut problems = Vec::new();
    let (records, _) = read_records(&dir);
    for r in records.values() {
        let text = std::fs::read_to_string(dir.join(&r.file)).expect("a record");
        problems.extend(measurements_in(&r.file, &text));
    }
    assert!(problems.is_empty(), "decision records:\n{}", problems.join("\n"));
}

#[test]
fn the_index_is_made_from_the_records() {
    let dir = decisions_dir();
    let (records, _) = read_records(&dir);
    let readme_path = dir.join("README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("README.md");
    let want = with_index(&readme, &table(&records)).unwrap();
    if std::env::var_os("WARPFS_BLESS").is_some() {
        std::fs::write(&readme_path, &want).expect("write README.md");
        return;
    }
    if want != readme {
        let missing: Vec<&str> = records
            .values()
            .filter(|r| !readme.contains(&format!("[{}]({})", r.number, r.file)))
            .map(|r| r.file.as_str())
            .collect();
        panic!(
            "docs/decisions/README.md differs from what the records give (rows missing: {missing:?}); \
             run `WARPFS_BLESS=1 cargo test -p warpfs --test decisions`"
        );
    }
}

// The checks themselves, on records made up here: each must refuse.

fn rec(file: &str, text: &str) -> Record {
    parse(file, text).unwrap()
}

#[test]
fn a_record_without_status_or_one_line_is_refused() {
    assert!(parse("0001-a.md", "# 0001: A\n\n## Context\n")
        .unwrap_err()
        .contains("Status"));
    assert!(parse("0001-a.md", "# 0001: A\n\nStatus: accepted\n\n## Context\n")
        .unwrap_err()
        .contains("In one line"));
    assert!(parse("0001-a.md", "# 0001: A\n\nStatus: maybe\nIn one line: x\n").is_err());
    assert!(parse("0001-a.md", "# 0002: A\n\nStatus: accepted\nIn one line: x\n").is_err());
    let r = rec(
        "0001-a.md",
        "# 0001 — A\n\nStatus: accepted (amends\n[0002](0002-b.md))\nIn one line: x\n",
    );
    assert_eq!(r.status, "accepted (amends 0002)");
    assert_eq!(short_status(&r.status), "accepted");
}

#[test]
fn a_supersession_or_amendment_marked_on_one_side_only_is_refused() {
    let mut m = BTreeMap::new();
    m.insert(
        "0001".into(),
        rec("0001-a.md", "# 0001: A\n\nStatus: accepted\nIn one line: x\n"),
    );
    m.insert(
        "0002".into(),
        rec(
            "0002-b.md",
            "# 0002: B\n\nStatus: accepted (supersedes 0001)\nIn one line: y\n",
        ),
    );
    assert_eq!(check_links(&m).len(), 1, "{:?}", check_links(&m));
    m.insert(
        "0001".into(),
        rec(
            "0001-a.md",
            "# 0001: A\n\nStatus: superseded by [0002](0002-b.md)\nIn one line: x\n",
        ),
    );
    assert!(check_links(&m).is_empty(), "{:?}", check_links(&m));
    m.insert(
        "0003".into(),
        rec(
            "0003-c.md",
            "# 0003: C\n\nStatus: accepted; amended by 0004\nIn one line: z\n",
        ),
    );
    assert_eq!(check_links(&m).len(), 1, "{:?}", check_links(&m));
}

#[test]
fn a_missing_row_makes_the_index_differ() {
    let mut m = BTreeMap::new();
    m.insert(
        "0001".into(),
        rec("0001-a.md", "# 0001: A\n\nStatus: accepted\nIn one line: x\n"),
    );
    let readme = format!("# D\n\n{BEGIN}\n\n{}\n{END}\n", table(&m));
    assert_eq!(with_index(&readme, &table(&m)).unwrap(), readme);
    m.insert(
        "0002".into(),
        rec("0002-b.md", "# 0002: B\n\nStatus: accepted\nIn one line: y\n"),
    );
    assert_ne!(with_index(&readme, &table(&m)).unwrap(), readme);
}

#[test]
fn a_table_of_numbers_or_a_commit_in_a_record_is_refused() {
    let numbers = "# 0001: A\n\n| volume | job | off | on |\n|---|---|---:|---:|\n\
                   | gcm | read | 236.7 | 1.65 (60.5%) |\n| xts | write | 0.48x | 28 µs |\n";
    assert_eq!(measurement_tables(numbers), vec![3]);
    let words = "| flag | what it adds |\n|---|---|\n| `file-summary` | a per-file record |\n\
                 | `names` | encrypted names, 255 bytes |\n";
    assert!(measurement_tables(words).is_empty());
    assert!(measurements_in("0001-a.md", words).is_empty());
    let commit = "Measured at 3eedd56, linked as [run](../../bench/results/x/before-c0f61f9.md).";
    assert_eq!(commit_ids(commit), vec!["3eedd56".to_string()]);
    assert!(commit_ids("decrypt-ahead of 1000000 bytes, a deadbeef-free text").is_empty());
    assert_eq!(measurements_in("0001-a.md", numbers).len(), 1);
}
