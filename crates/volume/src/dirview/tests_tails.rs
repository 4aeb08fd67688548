//! Names with text after an encrypted name (FORMAT.md 13.1): shown as a
//! copy, under the decrypted name and that text, only where the text is a
//! sync tool's documented tail; any other text makes an undecryptable
//! name, never a decrypted one. The tails are checked here against an
//! oracle of their own, written apart from `synced`.

use super::tests::*;
use super::How;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::fs;
use std::path::Path;

/// One piece of a documented tail.
#[derive(Clone, Copy)]
enum Piece {
    Lit(&'static str),
    /// `n` ASCII digits.
    Digits(usize),
    /// One or more ASCII digits.
    SomeDigits,
    /// `n` characters of Syncthing's short device ID (`A-Z`, `2-7`).
    Device(usize),
    /// A host name: one or more characters, no parentheses, no controls.
    Host,
}

use Piece::*;

/// The tails of FORMAT.md 13.1's table, one template each.
const TAILS: &[&[Piece]] = &[
    &[
        Lit(".sync-conflict-"),
        Digits(8),
        Lit("-"),
        Digits(6),
        Lit("-"),
        Device(7),
    ],
    &[Lit("~"), Digits(8), Lit("-"), Digits(6)],
    &[
        Lit(" ("),
        Host,
        Lit("'s conflicted copy "),
        Digits(4),
        Lit("-"),
        Digits(2),
        Lit("-"),
        Digits(2),
        Lit(")"),
    ],
    &[
        Lit(" ("),
        Host,
        Lit("'s conflicted copy "),
        Digits(4),
        Lit("-"),
        Digits(2),
        Lit("-"),
        Digits(2),
        Lit(") ("),
        SomeDigits,
        Lit(")"),
    ],
    &[
        Lit(" (conflicted copy "),
        Digits(4),
        Lit("-"),
        Digits(2),
        Lit("-"),
        Digits(2),
        Lit(" "),
        Digits(6),
        Lit(")"),
    ],
    &[Lit(" (conflict on "), Host, Lit(")")],
    &[Lit("_conflict-"), Digits(8), Lit("-"), Digits(6)],
];

/// Whether all of `t` matches `pieces` (backtracking over the free ones).
fn matches(t: &[char], pieces: &[Piece]) -> bool {
    let Some((first, rest)) = pieces.split_first() else {
        return t.is_empty();
    };
    let class =
        |n: usize, ok: fn(char) -> bool| t.len() >= n && t[..n].iter().all(|&c| ok(c)) && matches(&t[n..], rest);
    match *first {
        Lit(l) => {
            let l: Vec<char> = l.chars().collect();
            t.starts_with(&l) && matches(&t[l.len()..], rest)
        }
        Digits(n) => class(n, |c| c.is_ascii_digit()),
        Device(n) => class(n, |c| c.is_ascii_uppercase() || ('2'..='7').contains(&c)),
        SomeDigits => (1..=t.len()).any(|n| t[..n].iter().all(char::is_ascii_digit) && matches(&t[n..], rest)),
        Host => (1..=t.len())
            .any(|n| t[..n].iter().all(|&c| !c.is_control() && c != '(' && c != ')') && matches(&t[n..], rest)),
    }
}

/// A documented tail, or several one after the other (a copy of a copy).
fn documented(t: &[char]) -> bool {
    !t.is_empty() && (0..t.len()).any(|i| TAILS.iter().any(|p| matches(&t[i..], p)) && (i == 0 || documented(&t[..i])))
}

/// Tails: documented ones, documented ones with one character changed,
/// added or removed, and arbitrary text.
fn tails() -> impl Strategy<Value = String> {
    let samples = vec![
        ".sync-conflict-20261125-141403-ABCDEFG",
        "~20261125-141403",
        " (vm's conflicted copy 2026-11-25)",
        " (vm's conflicted copy 2026-11-25) (3)",
        " (conflicted copy 2026-11-25 141403)",
        " (conflict on vm 2026-11-25)",
        "_conflict-20261125-141403",
    ];
    let text = "[ -.0-~\u{e9}\u{7f}]{1,40}";
    prop_oneof![
        proptest::sample::select(samples.clone()).prop_map(String::from),
        (
            proptest::sample::select(samples),
            any::<prop::sample::Index>(),
            0..3u8,
            text
        )
            .prop_map(|(t, at, how, with)| {
                let mut c: Vec<char> = t.chars().collect();
                let i = at.index(c.len());
                let w = with.chars().next().unwrap_or('x');
                match how {
                    0 => c[i] = w,
                    1 => c.insert(i, w),
                    _ => {
                        c.remove(i);
                    }
                }
                c.into_iter().collect()
            }),
        text,
        (text, proptest::sample::select(vec![")", ".orig", " (1)", "~1", ".pdf"])).prop_map(|(a, b)| a + b),
    ]
}

#[test]
fn a_name_with_text_no_tool_adds_never_shows_as_a_decrypted_name() {
    let t = tempfile::tempdir().unwrap();
    let v = volume(t.path());
    let short = write(&v, "", "secret", b"s");
    let long_plain = "q".repeat(190);
    let long = write(&v, "", &long_plain, b"l");
    let hash = long.strip_prefix("warpfs.long.").unwrap().to_string();
    let dir = v.dir(Path::new("")).unwrap();
    let mut runner = TestRunner::new(Config {
        cases: warpfs_testkit::cases(400),
        failure_persistence: None,
        ..Config::default()
    });
    let (copies, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    runner
        .run(&tails(), |tail| {
            let doc = documented(&tail.chars().collect::<Vec<_>>());
            // The tail after a short name, after a long one, and before a
            // long name's hash (tools that keep the "extension").
            for (orig, plain, named) in [
                (&short, "secret", format!("{short}{tail}")),
                (&long, long_plain.as_str(), format!("{long}{tail}")),
                (&long, long_plain.as_str(), format!("warpfs.long{tail}.{hash}")),
            ] {
                fs::rename(backing(&v, orig), backing(&v, &named)).unwrap();
                let view = v.view(&dir);
                fs::rename(backing(&v, &named), backing(&v, orig)).unwrap();
                let view = view.unwrap();
                let e = view.shown.iter().find(|e| e.backing == *named.as_str());
                let Some(e) = e else {
                    // Not shown at all: only a reserved-looking name (a
                    // copy of a long name's sidecar, FORMAT.md 4.4).
                    prop_assert!(named.starts_with("warpfs.") && !doc, "{named:?} hidden");
                    continue;
                };
                let name = e.name.to_string_lossy();
                if doc {
                    prop_assert_eq!(&e.how, &How::Copy, "{:?}", named);
                    prop_assert_eq!(name, format!("{plain}{tail}"));
                    copies.set(copies.get() + 1);
                } else {
                    prop_assert!(matches!(e.how, How::Undecryptable(_)), "{named:?} shown as {e:?}");
                    prop_assert_eq!(name, format!("{named}.warpfs-undecryptable"));
                    refused.set(refused.get() + 1);
                }
            }
            Ok::<(), TestCaseError>(())
        })
        .unwrap();
    let (copies, refused) = (copies.get(), refused.get());
    eprintln!("tails: {copies} shown as copies, {refused} as undecryptable names");
    assert!(copies > 0 && refused > 0);
}
