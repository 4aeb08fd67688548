//! Parser of `strace -f -xx -y` output: one [`Call`] per finished system
//! call, in the order strace saw them finish, with the arguments as text
//! and helpers to read descriptors (with the path `-y` printed), strings
//! (`-xx`: every byte hex-escaped), iovecs and integers out of them.
//! Anything the parser does not understand is an error, never a guess.

use std::collections::HashMap;

/// One finished system call.
#[derive(Debug, Clone)]
pub struct Call {
    /// Thread that made it.
    pub tid: i32,
    pub name: String,
    /// The top-level arguments as strace printed them.
    pub args: Vec<String>,
    pub ret: Ret,
    /// How many calls had finished when this one was entered: a call that
    /// blocked (`<unfinished ...>`) covers only what finished before it.
    pub entered: usize,
    /// The line (for error messages).
    pub line: usize,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ret {
    /// A value, with the path of a returned descriptor.
    Ok(i64, Option<Vec<u8>>),
    /// `-1 ERRNO (...)`.
    Err(String),
    /// `?` (the process left during the call).
    Unknown,
}

/// A descriptor argument: its number and, when strace could name it, the
/// path it refers to (`deleted` when that path was unlinked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fd {
    pub num: i64,
    pub path: Option<Vec<u8>>,
    pub deleted: bool,
}

pub const AT_FDCWD: i64 = -100;

/// Parse a whole trace file.
pub fn parse(text: &str) -> Result<Vec<Call>, String> {
    let mut out = Vec::new();
    // tid -> (name, args text so far, entered, line)
    let mut pending: HashMap<i32, (String, String, usize, usize)> = HashMap::new();
    for (no, raw) in text.lines().enumerate() {
        let no = no + 1;
        let err = |m: &str| format!("trace line {no}: {m}: {}", clip(raw));
        let line = raw.trim_end();
        if line.is_empty() {
            continue;
        }
        let (tid, rest) = line.split_once(' ').ok_or_else(|| err("no thread id"))?;
        let tid: i32 = tid.parse().map_err(|_| err("bad thread id"))?;
        let rest = rest.trim_start();
        if rest.starts_with("+++") || rest.starts_with("---") {
            continue;
        }
        if let Some(r) = rest.strip_prefix("<... ") {
            let (name, tail) = r.split_once(" resumed>").ok_or_else(|| err("bad resumption"))?;
            let (pname, mut text, entered, first) = pending.remove(&tid).ok_or_else(|| err("resumes nothing"))?;
            if pname != name {
                return Err(err(&format!("resumes {name}, {pname} was pending")));
            }
            text.push_str(tail);
            let text = detached(&text).unwrap_or(text);
            let call = finish(tid, name, &text, entered, first).map_err(|m| err(&m))?;
            out.push(call);
            continue;
        }
        let open = rest.find('(').ok_or_else(|| err("no call"))?;
        let name = &rest[..open];
        if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            let text = head[open + 1..].trim_end().to_string();
            pending.insert(tid, (name.to_string(), text, out.len(), no));
            continue;
        }
        let text = detached(&rest[open + 1..]).unwrap_or_else(|| rest[open + 1..].to_string());
        let call = finish(tid, name, &text, out.len(), no).map_err(|m| err(&m))?;
        out.push(call);
    }
    Ok(out)
}

/// A call still running when strace detached (the recording ends with a
/// SIGINT to strace: a /dev/fuse thread can be inside its `writev`) is
/// printed with `<detached ...>` instead of `) = RET`: its arguments closed
/// with an unknown return (`?`), which no operation is made of. Had it
/// changed CIPHERDIR, the recording's replay would not match the real one.
fn detached(text: &str) -> Option<String> {
    let head = text.trim_end().strip_suffix("<detached ...>")?;
    Some(format!("{}) = ?", head.trim_end()))
}

fn clip(s: &str) -> String {
    if s.len() > 300 {
        format!("{}...", s.chars().take(300).collect::<String>())
    } else {
        s.to_string()
    }
}

/// `text` is everything after `name(`: the arguments, `)`, ` = RET`.
fn finish(tid: i32, name: &str, text: &str, entered: usize, line: usize) -> Result<Call, String> {
    let (args, after) = split_args(text)?;
    let ret = after.trim_start();
    let ret = ret.strip_prefix('=').ok_or("no return value")?.trim_start();
    Ok(Call {
        tid,
        name: name.to_string(),
        args,
        ret: parse_ret(ret)?,
        entered,
        line,
    })
}

/// Split the argument list at top-level commas up to the closing `)`;
/// returns the arguments and what follows the `)`.
fn split_args(text: &str) -> Result<(Vec<String>, &str), String> {
    let b = text.as_bytes();
    let mut args = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'<' if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'>') => {
                i = decoration_end(b, i)?;
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b']' | b'}' => depth -= 1,
            b')' if depth > 0 => depth -= 1,
            b')' => {
                let last = text[start..i].trim();
                if !last.is_empty() || !args.is_empty() {
                    args.push(last.to_string());
                }
                return Ok((args, &text[i + 1..]));
            }
            b',' if depth == 0 => {
                args.push(text[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    Err("unterminated argument list".into())
}

/// Index just past the `>` closing the decoration opened at `b[i] == '<'`.
fn decoration_end(b: &[u8], mut i: usize) -> Result<usize, String> {
    let mut depth = 0;
    while i < b.len() {
        match b[i] {
            b'<' => depth += 1,
            b'>' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    Err("unterminated <...>".into())
}

fn parse_ret(s: &str) -> Result<Ret, String> {
    if s.starts_with('?') {
        return Ok(Ret::Unknown);
    }
    if let Some(e) = s.strip_prefix("-1 ") {
        if e.starts_with('E') {
            return Ok(Ret::Err(e.split_whitespace().next().unwrap_or("").to_string()));
        }
    }
    let fd = parse_fd(s.split_whitespace().next().unwrap_or(""))?;
    Ok(Ret::Ok(fd.num, fd.path))
}

/// Decode a `-xx` string body (`\xHH` escapes; other characters as is).
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 4);
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            match b.get(i + 1) {
                Some(b'x') => {
                    let h =
                        std::str::from_utf8(b.get(i + 2..i + 4).ok_or("short escape")?).map_err(|e| e.to_string())?;
                    out.push(u8::from_str_radix(h, 16).map_err(|e| e.to_string())?);
                    i += 4;
                }
                Some(&c) => {
                    out.push(match c {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'0' => 0,
                        c => c,
                    });
                    i += 2;
                }
                None => return Err("trailing backslash".into()),
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// `N`, `0xN`, `AT_FDCWD`, each optionally followed by `<path>` and
/// `(deleted)`.
pub fn parse_fd(s: &str) -> Result<Fd, String> {
    let s = s.trim();
    let (head, deco) = match s.find('<') {
        Some(k) => (&s[..k], Some(&s[k..])),
        None => (s, None),
    };
    let num = if head == "AT_FDCWD" { AT_FDCWD } else { parse_int(head)? };
    let (path, deleted) = match deco {
        None => (None, false),
        Some(d) => {
            let end = decoration_end(d.as_bytes(), 0)?;
            let inner = &d[1..end - 1];
            let deleted = d[end..].trim_start().starts_with("(deleted)");
            // Devices, sockets and pipes carry a nested `<...>` or a
            // `type:[...]` form: not paths.
            if inner.contains('<') || (!inner.starts_with("\\x2f") && !inner.starts_with('/')) {
                (None, deleted)
            } else {
                (Some(unhex(inner)?), deleted)
            }
        }
    };
    Ok(Fd { num, path, deleted })
}

pub fn parse_int(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x") {
        i64::from_str_radix(h, 16)
    } else if s.len() > 1 && s.starts_with('0') && s.bytes().all(|c| c.is_ascii_digit()) {
        i64::from_str_radix(&s[1..], 8)
    } else {
        s.parse()
    };
    r.map_err(|_| format!("not an integer: {}", clip(s)))
}

/// The bytes of a `"..."` argument; a string strace cut short (`"..."...`)
/// is an error: the trace must carry whole buffers.
pub fn parse_str(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let body = s
        .strip_prefix('"')
        .ok_or_else(|| format!("not a string: {}", clip(s)))?;
    let end = body.rfind('"').ok_or("unterminated string")?;
    if body[end + 1..].starts_with("...") {
        return Err("string cut short by strace -s".into());
    }
    unhex(&body[..end])
}

impl Call {
    pub fn arg(&self, i: usize) -> Result<&str, String> {
        self.args
            .get(i)
            .map(|s| s.as_str())
            .ok_or_else(|| format!("line {}: {} has no argument {i}", self.line, self.name))
    }
    pub fn fd(&self, i: usize) -> Result<Fd, String> {
        parse_fd(self.arg(i)?)
    }
    pub fn bytes(&self, i: usize) -> Result<Vec<u8>, String> {
        parse_str(self.arg(i)?)
    }
    pub fn int(&self, i: usize) -> Result<i64, String> {
        parse_int(self.arg(i)?)
    }
    /// Every `iov_base` of an iovec array argument, in order.
    pub fn iovs(&self, i: usize) -> Result<Vec<Vec<u8>>, String> {
        let a = self.arg(i)?;
        let mut out = Vec::new();
        let mut rest = a;
        while let Some(k) = rest.find("iov_base=") {
            let tail = &rest[k + 9..];
            let (s, _) = split_args(&format!("{tail})"))?;
            let first = s.first().ok_or("empty iov")?;
            out.push(parse_str(first)?);
            rest = &tail[first.len()..];
        }
        Ok(out)
    }
    /// The returned value (`None` on error).
    pub fn ok(&self) -> Option<i64> {
        match self.ret {
            Ret::Ok(v, _) => Some(v),
            _ => None,
        }
    }
    /// The path of a returned descriptor.
    pub fn ret_path(&self) -> Option<&[u8]> {
        match &self.ret {
            Ret::Ok(_, Some(p)) => Some(p),
            _ => None,
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn parses_calls_resumptions_and_decorations() {
        let t = "15020 openat(AT_FDCWD<\\x2f\\x74>, \"\\x2f\\x74\\x2f\\x66\", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3<\\x2f\\x74\\x2f\\x66>\n\
15020 pwritev2(3<\\x2f\\x74\\x2f\\x66>, [{iov_base=\"\\x61\\x62\", iov_len=2}, {iov_base=\"\\x63\", iov_len=1}], 2, 3, 0) = 3\n\
15136 fdatasync(3<\\x2f\\x74\\x2f\\x66>(deleted) <unfinished ...>\n\
15020 writev(7<\\x2f\\x64\\x65\\x76<char 10:229>>, [{iov_base=\"\\x10\", iov_len=1}], 1) = 1\n\
15136 <... fdatasync resumed>)          = 0\n\
15020 unlink(\"\\x2f\\x78\") = -1 ENOENT (No such file or directory)\n\
15020 +++ exited with 0 +++\n";
        let c = parse(t).unwrap();
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].ret_path(), Some(&b"/t/f"[..]));
        assert_eq!(c[0].int(3).unwrap(), 0o644);
        assert_eq!(c[1].iovs(1).unwrap(), vec![b"ab".to_vec(), b"c".to_vec()]);
        assert_eq!(c[1].int(3).unwrap(), 3);
        assert_eq!(c[2].name, "writev");
        assert_eq!(c[2].fd(0).unwrap().path, None);
        assert_eq!((c[3].name.as_str(), c[3].entered), ("fdatasync", 2));
        assert!(c[3].fd(0).unwrap().deleted);
        assert_eq!(c[4].ret, Ret::Err("ENOENT".into()));
        assert!(parse_str("\"\\x61\"...").is_err());
    }

    #[test]
    fn a_call_cut_by_the_detach_has_an_unknown_return() {
        let t = "28875 writev(7<\\x2f\\x64\\x65\\x76>, [{iov_base=\"\\x10\", iov_len=1}], 1 <detached ...>\n\
28876 read(8<\\x2f\\x64\\x65\\x76>,  <unfinished ...>\n\
28876 <... read resumed> <detached ...>\n";
        let c = parse(t).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].name.as_str(), &c[0].ret), ("writev", &Ret::Unknown));
        assert_eq!(c[0].iovs(1).unwrap(), vec![b"\x10".to_vec()]);
        assert_eq!((c[1].name.as_str(), &c[1].ret), ("read", &Ret::Unknown));
        assert_eq!(c[1].fd(0).unwrap().num, 8);
    }
}
