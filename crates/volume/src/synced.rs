//! Names that sync tools and other systems put into a backing directory
//! (FORMAT.md 13): conflict copies of our entries (a suffix or prefix added
//! to an encrypted name), copies of our own files (`warpfs.diriv`,
//! `warpfs.conf`, long names), and foreign files that are never user data
//! (`.stfolder`, `.syncthing.*.tmp`, `.nfs*`, `.DS_Store`, ...). Pure
//! functions of the backing name; every input is hostile.

use warpfs_crypto::names::{DIRIV_FILE, LONG_PREFIX, SIDECAR_SUFFIX};

/// Marker shown after the backing name of an entry whose name does not
/// decrypt (FORMAT.md 13.4).
pub const UNDECRYPTABLE: &str = ".warpfs-undecryptable";

/// What a backing name that is not one of ours is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Copy {
    /// A copy of the entry named `original`, shown as its plaintext name
    /// with `tail` appended (`prefix` before it, for Unison's backups).
    Of {
        /// The backing name the tool copied.
        original: String,
        /// Text added to the plaintext name when shown.
        tail: String,
        /// Text put before the plaintext name when shown.
        prefix: String,
    },
    /// A file a sync tool or operating system keeps for itself, or an
    /// unfinished transfer: never shown as a user file.
    Foreign,
    /// A long name with text added that no sync tool warpfs knows writes:
    /// shown as an undecryptable name, never under its original's name.
    Unknown,
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

/// Length of the 43-character hash in `warpfs.long.<hash>`.
const HASH_LEN: usize = 43;

fn is_hash(s: &str) -> bool {
    s.len() == HASH_LEN && s.bytes().all(is_b64)
}

/// The name of a long-name entry (`warpfs.long.<hash>`, no sidecar).
fn long_name(hash: &str) -> String {
    format!("{LONG_PREFIX}{hash}")
}

/// Foreign files (FORMAT.md 13.3): sync tools' metadata and temporary
/// files, network file system leftovers, desktop metadata.
pub fn is_foreign(name: &[u8]) -> bool {
    const EXACT: &[&[u8]] = &[
        b".stfolder",
        b".stignore",
        b".stversions",
        b".stfolder.removed-marker",
        b"desktop.ini",
        b"Desktop.ini",
        b"Thumbs.db",
        b".DS_Store",
        b".dropbox",
        b".dropbox.attr",
        b".dropbox.cache",
        b".owncloudsync.log",
        b".nextcloudsync.log",
        b".unison",
        b".sync",
        b"lost+found",
    ];
    const PREFIX: &[&[u8]] = &[
        b".syncthing.",
        b"~syncthing~",
        b".nfs",
        b"._",
        b".unison.",
        b".sync_",
        b"._sync_",
        b".~lock.",
        b".fuse_hidden",
    ];
    if EXACT.contains(&name) || PREFIX.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    // rsync's temporary file `.NAME.XXXXXX` and the Nextcloud/ownCloud
    // partial download `.NAME.~XXXX`, of an encrypted name (no dot).
    if let Some(rest) = name.strip_prefix(b".") {
        if let Some(dot) = rest.iter().rposition(|&c| c == b'.') {
            let (stem, end) = (&rest[..dot], &rest[dot + 1..]);
            let stem_ok = !stem.is_empty() && stem.iter().all(|&c| is_b64(c) || c == b'.');
            let rsync = end.len() == 6 && end.iter().all(u8::is_ascii_alphanumeric);
            let partial = end.len() > 1 && end[0] == b'~' && end[1..].iter().all(u8::is_ascii_hexdigit);
            return stem_ok && (rsync || partial);
        }
    }
    false
}

/// Whether `s` has the shape `pat`: `#` a digit, `@` a character of
/// Syncthing's short device ID (base32: `A-Z`, `2-7`), anything else itself.
fn shape(s: &[u8], pat: &[u8]) -> bool {
    s.len() == pat.len()
        && s.iter().zip(pat).all(|(&c, &p)| match p {
            b'#' => c.is_ascii_digit(),
            b'@' => c.is_ascii_uppercase() || (b'2'..=b'7').contains(&c),
            _ => c == p,
        })
}

/// A host name or other free text inside a tool's parentheses: not empty,
/// no parentheses, no control characters.
fn free_text(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&c| c >= 0x20 && c != 0x7f && c != b'(' && c != b')')
}

/// Fixed-shape tails (FORMAT.md 13.1): Syncthing's conflict copy and
/// version, Nextcloud's conflict copy, ownCloud's (and early Nextcloud's).
const FIXED_TAILS: &[&[u8]] = &[
    b".sync-conflict-########-######-@@@@@@@",
    b"~########-######",
    b" (conflicted copy ####-##-## ######)",
    b"_conflict-########-######",
];

/// Dropbox's ` (HOST's conflicted copy YYYY-MM-DD)` without the host.
const DROPBOX: &[u8] = b"'s conflicted copy ####-##-##)";
/// Unison's `copyonconflict` copy: ` (conflict on HOST ...)`.
const UNISON: &[u8] = b" (conflict on ";

/// `t` without one sync tool's tail at its end (FORMAT.md 13.1), if it
/// ends with one.
fn strip_tool_tail(t: &[u8]) -> Option<&[u8]> {
    for pat in FIXED_TAILS {
        if t.len() >= pat.len() && shape(&t[t.len() - pat.len()..], pat) {
            return Some(&t[..t.len() - pat.len()]);
        }
    }
    let open = |t: &[u8], close: usize| t[..close].windows(2).rposition(|w| w == b" (");
    let body = t.strip_suffix(b")")?;
    // Dropbox's ` (N)` after its copy marker, when a name is taken again.
    let main = match open(t, t.len()) {
        Some(i) if i + 2 < body.len() && body[i + 2..].iter().all(u8::is_ascii_digit) => &t[..i],
        _ => t,
    };
    if main.len() > DROPBOX.len() && shape(&main[main.len() - DROPBOX.len()..], DROPBOX) {
        let host_end = main.len() - DROPBOX.len();
        let i = open(main, host_end)?;
        return free_text(&main[i + 2..host_end]).then_some(&main[..i]);
    }
    let i = open(t, t.len())?;
    let host = t[i..].strip_prefix(UNISON)?.strip_suffix(b")")?;
    free_text(host).then_some(&t[..i])
}

/// Whether `t` is text a sync tool warpfs knows adds to a name it copies
/// (FORMAT.md 13.1): Syncthing's `.sync-conflict-YYYYMMDD-HHMMSS-DEVICE`
/// and `~YYYYMMDD-HHMMSS`, Dropbox's ` (HOST's conflicted copy
/// YYYY-MM-DD)` maybe followed by ` (N)`, Nextcloud's ` (conflicted copy
/// YYYY-MM-DD HHMMSS)`, Unison's ` (conflict on HOST ...)`, ownCloud's
/// `_conflict-YYYYMMDD-HHMMSS`, or several of them (a copy of a copy).
/// Any other text is not a tool's: a name carrying it is not a copy.
pub fn is_tool_tail(t: &str) -> bool {
    let mut t = t.as_bytes();
    if t.is_empty() {
        return false;
    }
    while !t.is_empty() {
        match strip_tool_tail(t) {
            Some(rest) => t = rest,
            None => return false,
        }
    }
    true
}

/// Unison's backup prefix `.bak.N.` (its default `backupprefix`).
fn unison_backup(s: &str) -> Option<(String, String)> {
    let rest = s.strip_prefix(".bak.")?;
    let dot = rest.find('.')?;
    let (n, original) = (&rest[..dot], &rest[dot + 1..]);
    (!n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) && !original.is_empty())
        .then(|| (original.to_string(), format!(".bak.{n}.")))
}

/// If `name` is a sync tool's copy of an entry of ours, or a foreign file:
/// which. `None`: neither (an undecryptable name, or one of ours).
///
/// A copy of an encrypted name `E` (base64url, no dot) is `E` followed by
/// a tool's tail ([`is_tool_tail`]: Syncthing's `.sync-conflict-…`,
/// Dropbox's and Nextcloud's ` (… conflicted copy …)`, Unison's
/// ` (conflict on …)`, ownCloud's `_conflict-…`), or Unison's `.bak.N.E`.
/// A copy of a long name `warpfs.long.H` has the tail before `.H` (tools
/// that keep the "extension") or after it. `E` followed by any other text
/// is no copy (the whole name does not decrypt: an undecryptable name).
pub fn classify(name: &[u8]) -> Option<Copy> {
    let s = std::str::from_utf8(name).ok()?;
    if let Some(rest) = s.strip_prefix("warpfs.long") {
        return long_copy(rest);
    }
    if s.starts_with("warpfs.") || s == DIRIV_FILE {
        return None;
    }
    if let Some((original, prefix)) = unison_backup(s) {
        return Some(Copy::Of {
            original,
            tail: String::new(),
            prefix,
        });
    }
    if is_foreign(name) {
        return Some(Copy::Foreign);
    }
    // The original is the longest base64url prefix, or shorter where the
    // tail itself starts with base64url characters (ownCloud's
    // `_conflict-…`): every split whose tail is a tool's is tried, longest
    // original first.
    let b64 = s.bytes().take_while(|&c| is_b64(c)).count();
    (1..=b64.min(s.len().saturating_sub(1))).rev().find_map(|i| {
        is_tool_tail(&s[i..]).then(|| Copy::Of {
            original: s[..i].to_string(),
            tail: s[i..].to_string(),
            prefix: String::new(),
        })
    })
}

/// `rest` follows `warpfs.long` in a backing name.
fn long_copy(rest: &str) -> Option<Copy> {
    let of = |hash: &str, tail: &str| {
        Some(Copy::Of {
            original: long_name(hash),
            tail: tail.to_string(),
            prefix: String::new(),
        })
    };
    if rest.ends_with(SIDECAR_SUFFIX) {
        return None; // a sidecar or a copy of one: never shown
    }
    // Tools that keep the extension: `warpfs.long<TAIL>.H`.
    if let Some(dot) = rest.rfind('.') {
        let (before, hash) = (&rest[..dot], &rest[dot + 1..]);
        if is_hash(hash) && !before.is_empty() {
            return if is_tool_tail(before) {
                of(hash, before)
            } else {
                Some(Copy::Unknown)
            };
        }
    }
    // Tools that append: `warpfs.long.H<TAIL>`.
    let h = rest.strip_prefix('.')?;
    if h.len() > HASH_LEN && h.is_char_boundary(HASH_LEN) && is_hash(&h[..HASH_LEN]) {
        let tail = &h[HASH_LEN..];
        return if is_tool_tail(tail) {
            of(&h[..HASH_LEN], tail)
        } else {
            Some(Copy::Unknown)
        };
    }
    None
}

/// If `name` has the shape of a copy of `warpfs.diriv` (FORMAT.md 13.2,
/// `warpfs ‖ M ‖ .diriv` or `warpfs.diriv ‖ M`): the text `M` the tool
/// added. It is used as a copy only where `M` is a tool's tail
/// ([`is_tool_tail`]); it is then the marker of every entry only that IV
/// decrypts.
pub fn diriv_copy(name: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(name).ok()?;
    if s == DIRIV_FILE {
        return None;
    }
    if let Some(t) = s.strip_prefix(DIRIV_FILE) {
        return Some(t.to_string());
    }
    let mid = s.strip_prefix("warpfs")?.strip_suffix(".diriv")?;
    (!mid.is_empty() && !mid.starts_with(".long")).then(|| mid.to_string())
}

/// If `name` is a copy of `warpfs.conf` made by a sync tool (not our own
/// `warpfs.conf.tmp-*` temporary file).
pub fn is_config_copy(name: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(name) else {
        return false;
    };
    if s == warpfs_config::CONFIG_FILE || s.starts_with("warpfs.conf.tmp-") || is_own_backup(s) {
        return false;
    }
    s.strip_prefix("warpfs.conf").is_some_and(|t| !t.is_empty())
        || s.strip_prefix("warpfs")
            .and_then(|t| t.strip_suffix(".conf"))
            .is_some_and(|m| !m.is_empty())
}

/// `warpfs.conf.bak` or `warpfs.conf.bak.N`: the old config a password
/// reset keeps (FORMAT.md 2.5), which must not unlock the volume again.
fn is_own_backup(s: &str) -> bool {
    match s.strip_prefix("warpfs.conf.bak") {
        Some("") => true,
        Some(t) => t
            .strip_prefix('.')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// Whether a plaintext name asked for may be a name shown for a copy, an
/// entry of another IV or an undecryptable entry (so a lookup that misses
/// looks further): it ends with `.warpfs-undecryptable` or a tool's tail,
/// or starts with Unison's `.bak.`.
pub fn may_be_marked(name: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(name) else {
        return false;
    };
    // Every tool's tail starts with one of these characters.
    let starts = |i: usize| matches!(s.as_bytes()[i], b'.' | b'~' | b' ' | b'_');
    s.ends_with(UNDECRYPTABLE) || s.starts_with(".bak.") || (1..s.len()).any(|i| starts(i) && is_tool_tail(&s[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const E: &str = "AbCdEfGhIjKlMnOpQrStUvWxYz0123-_";
    const H: &str = "0123456789abcdefghijABCDEFGHIJ-_0123456789";

    fn of(original: &str, tail: &str) -> Option<Copy> {
        Some(Copy::Of {
            original: original.into(),
            tail: tail.into(),
            prefix: String::new(),
        })
    }

    #[test]
    fn syncthing_dropbox_nextcloud_unison_owncloud_copies() {
        let h = format!("{H}a");
        assert_eq!(h.len(), 43);
        let st = ".sync-conflict-20261125-141403-ABCDEFG";
        assert_eq!(classify(format!("{E}{st}").as_bytes()), of(E, st));
        let db = " (vm's conflicted copy 2026-11-25)";
        assert_eq!(classify(format!("{E}{db}").as_bytes()), of(E, db));
        let nc = " (conflicted copy 2026-11-25 141403)";
        assert_eq!(classify(format!("{E}{nc}").as_bytes()), of(E, nc));
        let un = " (conflict on vm 2026-11-25)";
        assert_eq!(classify(format!("{E}{un}").as_bytes()), of(E, un));
        let oc = "_conflict-20261125-141403";
        assert_eq!(classify(format!("{E}{oc}").as_bytes()), of(E, oc));
        assert_eq!(
            classify(format!(".bak.3.{E}").as_bytes()),
            Some(Copy::Of {
                original: E.into(),
                tail: String::new(),
                prefix: ".bak.3.".into()
            })
        );
        // Long names: the tool puts its text before the "extension" (the
        // hash), or after the whole name.
        let long = format!("warpfs.long.{h}");
        assert_eq!(classify(format!("warpfs.long{st}.{h}").as_bytes()), of(&long, st));
        assert_eq!(classify(format!("warpfs.long.{h}{un}").as_bytes()), of(&long, un));
        assert_eq!(classify(long.as_bytes()), None);
        assert_eq!(classify(format!("{long}.name").as_bytes()), None);
        assert_eq!(classify(format!("warpfs.long.{h}{st}.name").as_bytes()), None);
    }

    #[test]
    fn foreign_files_and_ours() {
        for f in [
            ".stfolder",
            ".stignore",
            ".syncthing.abc.tmp",
            "~syncthing~abc.tmp",
            ".nfs000000000123",
            "desktop.ini",
            ".DS_Store",
            "._AbC",
            ".AbCd-_.x1Y2z3",
            ".AbCd.~1a2b",
            ".unison.AbC.123.unison.tmp",
        ] {
            assert_eq!(classify(f.as_bytes()), Some(Copy::Foreign), "{f}");
        }
        for ours in [
            "warpfs.conf",
            "warpfs.diriv",
            "warpfs.conf.tmp-1",
            "warpfs.rekey.undo-0",
            E,
        ] {
            assert_eq!(classify(ours.as_bytes()), None, "{ours}");
        }
        // Only text a known tool adds makes a copy: " world" is none.
        assert_eq!(classify(b"hello world"), None);
        assert_eq!(classify(b".hidden"), None);
        assert_eq!(classify(&[0xff, b'.', b'x']), None);
    }

    #[test]
    fn copies_of_our_files() {
        let st = ".sync-conflict-20261125-141403-ABCDEFG";
        assert_eq!(diriv_copy(format!("warpfs{st}.diriv").as_bytes()), Some(st.into()));
        assert_eq!(
            diriv_copy(b"warpfs.diriv (conflict on vm)"),
            Some(" (conflict on vm)".into())
        );
        assert_eq!(diriv_copy(b"warpfs.diriv"), None);
        assert_eq!(diriv_copy(b"warpfs.conf"), None);
        assert!(is_config_copy(format!("warpfs{st}.conf").as_bytes()));
        assert!(is_config_copy(b"warpfs (vm's conflicted copy 2026-11-25).conf"));
        assert!(!is_config_copy(b"warpfs.conf"));
        assert!(!is_config_copy(b"warpfs.conf.tmp-12"));
        // A password reset's own backups are not copies to unlock with.
        assert!(!is_config_copy(b"warpfs.conf.bak"));
        assert!(!is_config_copy(b"warpfs.conf.bak.3"));
        assert!(is_config_copy(b"warpfs.conf.bak.sync-conflict-20261125-141403-ABCDEFG"));
        assert!(!is_config_copy(b"warpfs.diriv"));
    }

    #[test]
    fn marked_names() {
        assert!(may_be_marked(b"report.txt.sync-conflict-20261125-141403-ABCDEFG"));
        assert!(may_be_marked(format!("xyz{UNDECRYPTABLE}").as_bytes()));
        assert!(may_be_marked(b"a (conflicted copy 2026-11-25 141403)"));
        assert!(may_be_marked(b"a~20261125-141403"));
        assert!(!may_be_marked(b"report.txt"));
        assert!(!may_be_marked(b"a (conflicted copy 2026-11-25)"));
    }

    #[test]
    fn only_the_tails_of_known_tools_make_a_copy() {
        let h = format!("{H}a");
        for t in [
            ".sync-conflict-20261125-141403-ABCDEFG",
            ".sync-conflict-20261125-141403-Z2345A7",
            "~20261125-141403",
            " (vm's conflicted copy 2026-11-25)",
            " (John's MacBook Pro's conflicted copy 2026-11-25)",
            " (vm's conflicted copy 2026-11-25) (2)",
            " (conflicted copy 2026-11-25 141403)",
            " (conflict on vm 2026-11-25 at 14:14)",
            "_conflict-20261125-141403",
            // A copy of a copy: one tail after the other.
            ".sync-conflict-20261125-141403-ABCDEFG.sync-conflict-20261124-101010-QQQQQQQ",
            " (conflicted copy 2026-11-25 141403)~20261125-141403",
        ] {
            assert!(is_tool_tail(t), "{t:?}");
            assert_eq!(classify(format!("{E}{t}").as_bytes()), of(E, t), "{t:?}");
            let long = format!("warpfs.long.{h}");
            assert_eq!(classify(format!("{long}{t}").as_bytes()), of(&long, t), "{t:?}");
        }
        for t in [
            "",
            ".orig",
            " world",
            ".pdf",
            " (1)",
            ".sync-conflict-20261125-141403",
            ".sync-conflict-20261125-141403-abcdefg",
            ".sync-conflict-20261125-141403-ABCDEF1",
            ".sync-conflict-2026112-141403-ABCDEFG",
            ".sync-conflict-20261125-141403-ABCDEFG.txt",
            "~20261125-14140",
            " (vm's conflicted copy 2026-11-25",
            " ('s conflicted copy 2026-11-25)",
            " (v(m)'s conflicted copy 2026-11-25)",
            " (vm's conflicted copy 2026-11-25) (x)",
            " (conflicted copy 2026-11-25)",
            " (conflict on )",
            " (conflict on vm",
            "_conflict-20261125-141403x",
            "x_conflict-20261125-141403",
        ] {
            assert!(!is_tool_tail(t), "{t:?}");
            // (`E` followed by base64url characters is another original:
            // it does not decrypt, the view shows it undecryptable.)
            if !t.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                assert_eq!(classify(format!("{E}{t}").as_bytes()), None, "{t:?}");
            }
        }
        // A long name with text no tool adds is no copy of it: shown as
        // an undecryptable name.
        assert_eq!(
            classify(format!("warpfs.long.{h}.orig").as_bytes()),
            Some(Copy::Unknown)
        );
        assert_eq!(classify(format!("warpfs.long.x.{h}").as_bytes()), Some(Copy::Unknown));
        // Copies of warpfs.diriv: the shape is recognised, and the view
        // uses one only when its marker is a tool's tail.
        assert_eq!(diriv_copy(b"warpfs.pdf.diriv"), Some(".pdf".into()));
        assert!(!is_tool_tail(".pdf"));
    }

    #[test]
    fn hostile_names_never_panic() {
        let mut rng = 0x1234_5678_9abc_def0u64;
        let alphabet = b"warpfs.long.diriv conf()-_~.aZ09'\xc3\xa9\x7f\xff";
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = (rng % 80) as usize;
            let name: Vec<u8> = (0..len)
                .map(|i| alphabet[((rng >> (i % 50)) as usize + i) % alphabet.len()])
                .collect();
            let _ = (
                classify(&name),
                diriv_copy(&name),
                is_config_copy(&name),
                is_foreign(&name),
                may_be_marked(&name),
            );
        }
    }
}
