//! What a reverse view leaves out (`--exclude`, `--exclude-wildcard`,
//! `--exclude-from`), as plaintext paths relative to PLAINDIR:
//!
//! - an exact path (`--exclude a/b`): that entry and everything below it;
//! - a wildcard pattern in the gitignore style: `*` and `?` match within
//!   one name, `[abc]`, `[a-z]`, `[!a]` one byte, `**` any number of
//!   names; a pattern with a `/` before its end is anchored at PLAINDIR
//!   (a leading `/` only anchors), one without matches the name at any
//!   depth; a trailing `/` matches directories only; a leading `!`
//!   includes again what an earlier pattern excluded. The last pattern
//!   that matches decides.
//!
//! An excluded directory hides its whole subtree (nothing below it is
//! looked at).

/// One wildcard pattern.
#[derive(Debug, Clone)]
struct Pattern {
    glob: Vec<u8>,
    anchored: bool,
    dir_only: bool,
    negate: bool,
}

/// The exclusion rules of one view.
#[derive(Debug, Clone, Default)]
pub struct Excludes {
    paths: Vec<Vec<u8>>,
    patterns: Vec<Pattern>,
}

fn trim_slashes(mut p: &[u8]) -> &[u8] {
    while let [b'/', rest @ ..] = p {
        p = rest;
    }
    while let [rest @ .., b'/'] = p {
        p = rest;
    }
    p
}

impl Excludes {
    /// Exclude the entry at plaintext path `path` (relative to PLAINDIR).
    pub fn add_path(&mut self, path: &[u8]) -> Result<(), String> {
        let p = trim_slashes(path);
        if p.is_empty() {
            return Err("--exclude: the root of PLAINDIR cannot be excluded".into());
        }
        self.paths.push(p.to_vec());
        Ok(())
    }

    /// Add a wildcard pattern (blank patterns and `#` comments are skipped).
    pub fn add_pattern(&mut self, pattern: &[u8]) -> Result<(), String> {
        let mut p = pattern;
        while let [rest @ .., b'\r' | b' '] = p {
            p = rest;
        }
        if p.is_empty() || p[0] == b'#' {
            return Ok(());
        }
        let negate = p[0] == b'!';
        if negate {
            p = &p[1..];
        }
        let dir_only = p.ends_with(b"/");
        let body = {
            let mut b = p;
            while let [rest @ .., b'/'] = b {
                b = rest;
            }
            b
        };
        let anchored = body.contains(&b'/');
        let glob = body.strip_prefix(b"/").unwrap_or(body);
        if glob.is_empty() {
            return Err(format!(
                "--exclude-wildcard: empty pattern {:?}",
                String::from_utf8_lossy(pattern)
            ));
        }
        self.patterns.push(Pattern {
            glob: glob.to_vec(),
            anchored,
            dir_only,
            negate,
        });
        Ok(())
    }

    /// Add every pattern of an `--exclude-from` file (one per line).
    pub fn add_file(&mut self, text: &[u8]) -> Result<(), String> {
        for line in text.split(|&b| b == b'\n') {
            self.add_pattern(line)?;
        }
        Ok(())
    }

    /// Whether there is any rule.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.patterns.is_empty()
    }

    /// Whether the entry at `rel` (never empty) is left out.
    pub fn excluded(&self, rel: &[u8], is_dir: bool) -> bool {
        if self.paths.iter().any(|p| p == rel) {
            return true;
        }
        let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        let mut out = false;
        for p in &self.patterns {
            if p.dir_only && !is_dir {
                continue;
            }
            let hit = if p.anchored {
                glob(&p.glob, rel)
            } else {
                glob(&p.glob, name)
            };
            if hit {
                out = !p.negate;
            }
        }
        out
    }
}

/// Whether `text` matches the glob `pat` (see the module documentation).
fn glob(pat: &[u8], text: &[u8]) -> bool {
    match pat {
        [] => text.is_empty(),
        [b'*', b'*', rest @ ..] => {
            // `**/` also matches no directory at all.
            let rest_after_slash = rest.strip_prefix(b"/");
            if let Some(r) = rest_after_slash {
                if glob(r, text) {
                    return true;
                }
            }
            (0..=text.len()).any(|i| glob(rest, &text[i..]))
        }
        [b'*', rest @ ..] => {
            for i in 0..=text.len() {
                if glob(rest, &text[i..]) {
                    return true;
                }
                if i < text.len() && text[i] == b'/' {
                    break;
                }
            }
            false
        }
        [b'?', rest @ ..] => matches!(text, [c, t @ ..] if *c != b'/' && glob(rest, t)),
        [b'[', rest @ ..] => match (class(rest), text) {
            (Some((set, after)), [c, t @ ..]) => *c != b'/' && set(*c) && glob(after, t),
            (None, [b'[', t @ ..]) => glob(rest, t),
            _ => false,
        },
        [b'\\', c, rest @ ..] => matches!(text, [t0, t @ ..] if t0 == c && glob(rest, t)),
        [c, rest @ ..] => matches!(text, [t0, t @ ..] if t0 == c && glob(rest, t)),
    }
}

/// A bracket expression after its `[`: the test and what follows its `]`.
#[allow(clippy::type_complexity)]
fn class(p: &[u8]) -> Option<(Box<dyn Fn(u8) -> bool + '_>, &[u8])> {
    let (neg, body) = match p {
        [b'!' | b'^', r @ ..] => (true, r),
        r => (false, r),
    };
    // A `]` first is a member.
    let end = body.iter().skip(1).position(|&b| b == b']')? + 1;
    let set = &body[..end];
    let after = &body[end + 1..];
    let test = move |c: u8| {
        let mut i = 0;
        let mut hit = false;
        while i < set.len() {
            if i + 2 < set.len() && set[i + 1] == b'-' {
                hit |= set[i] <= c && c <= set[i + 2];
                i += 3;
            } else {
                hit |= set[i] == c;
                i += 1;
            }
        }
        hit != neg
    };
    Some((Box::new(test), after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(patterns: &[&str]) -> Excludes {
        let mut e = Excludes::default();
        for p in patterns {
            e.add_pattern(p.as_bytes()).unwrap();
        }
        e
    }

    #[test]
    fn exact_paths() {
        let mut e = Excludes::default();
        e.add_path(b"/a/b/").unwrap();
        assert!(e.excluded(b"a/b", false));
        assert!(!e.excluded(b"a/bc", false));
        assert!(!e.excluded(b"a", true));
        assert!(e.add_path(b"/").is_err());
    }

    #[test]
    fn wildcards_in_the_gitignore_style() {
        let e = ex(&["*.tmp", "/top", "cache/", "a/**/z", "!keep.tmp", "# comment", ""]);
        assert!(e.excluded(b"x.tmp", false));
        assert!(e.excluded(b"d/e/x.tmp", false));
        assert!(!e.excluded(b"d/keep.tmp", false));
        assert!(e.excluded(b"top", true));
        assert!(!e.excluded(b"d/top", true));
        assert!(e.excluded(b"d/cache", true));
        assert!(!e.excluded(b"d/cache", false));
        assert!(e.excluded(b"a/z", false));
        assert!(e.excluded(b"a/b/c/z", false));
        assert!(!e.excluded(b"b/z", false));
        assert!(!e.excluded(b"x.tmpx", false));
        let e = ex(&["file?[0-9]", "[!a]b", "d/*.c"]);
        assert!(e.excluded(b"fileA7", false));
        assert!(!e.excluded(b"fileA", false));
        assert!(e.excluded(b"xb", false));
        assert!(!e.excluded(b"ab", false));
        assert!(e.excluded(b"d/m.c", false));
        assert!(!e.excluded(b"d/e/m.c", false));
    }

    #[test]
    fn hostile_patterns_never_panic() {
        for p in ["[", "[]", "[!", "\\", "**", "***", "/", "!", "a[z-a]"] {
            let mut e = Excludes::default();
            let _ = e.add_pattern(p.as_bytes());
            for t in ["", "a", "[", "a/b", "]"] {
                let _ = e.excluded(t.as_bytes(), true);
            }
        }
    }
}
