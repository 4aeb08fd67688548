//! The control ioctls of the mount root: how `warpfs stats` and `warpfs
//! rekey` reach a live mount's virtual attributes (`trusted.warpfs.stats`,
//! `trusted.warpfs.rekey`) without extended attributes, so they also work
//! under `--no-xattr` (docs/decisions/0050). Two restricted
//! ioctls on a descriptor of the mount root: [`GET`] sends a name and gets
//! the value back (the ioctl's result is its length), [`SET`] sends a name
//! and a value. The daemon serves reads to root and to the user it runs as;
//! sets (an online rekey) to root, and to that user when the request
//! carries a tag that proves the password: `warpfs rekey` unlocks the config
//! and tags the request with the master key's control key
//! (`warpfs_crypto::ControlKey`). The request layout is defined here once,
//! for both sides: [`MAGIC`], the name's length (one byte), the name, the
//! value's length (u32, little endian), the value, the tag's length (one
//! byte: 0, none, or [`TAG_LEN`]), the tag, zeros up to [`SIZE`].

/// Length of a request's tag.
pub use warpfs_crypto::CONTROL_TAG_LEN as TAG_LEN;

/// Bytes each ioctl carries in and out: the largest size an ioctl number
/// can encode (14 bits).
pub const SIZE: usize = (1 << 14) - 1;

/// First bytes of every request (a stray ioctl with the same number is
/// refused, not read as a request).
pub const MAGIC: &[u8; 4] = b"WFC1";

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;
/// The ioctl "type" byte of warpfs's control requests.
const IOC_TYPE: u32 = b'W' as u32;

const fn ioc(dir: u32, nr: u32) -> u32 {
    (dir << 30) | ((SIZE as u32) << 16) | (IOC_TYPE << 8) | nr
}

/// Read a virtual attribute: `_IOWR('W', 0xf0, [u8; SIZE])`.
pub const GET: u32 = ioc(IOC_READ | IOC_WRITE, 0xf0);
/// Set a virtual attribute: `_IOW('W', 0xf1, [u8; SIZE])`.
pub const SET: u32 = ioc(IOC_WRITE, 0xf1);

/// A request, parsed.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub name: &'a str,
    pub value: &'a [u8],
    /// The proof of the password, when the request carries one.
    pub tag: Option<&'a [u8]>,
}

/// The request bytes for `name`, `value` and `tag`; `None` when they do not
/// fit.
pub fn encode(name: &str, value: &[u8], tag: Option<&[u8; TAG_LEN]>) -> Option<Vec<u8>> {
    let name_len = u8::try_from(name.len()).ok()?;
    let value_len = u32::try_from(value.len()).ok()?;
    let mut b = Vec::with_capacity(SIZE);
    b.extend_from_slice(MAGIC);
    b.push(name_len);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&value_len.to_le_bytes());
    b.extend_from_slice(value);
    match tag {
        Some(t) => {
            b.push(TAG_LEN as u8);
            b.extend_from_slice(t);
        }
        None => b.push(0),
    }
    if b.len() > SIZE {
        return None;
    }
    b.resize(SIZE, 0);
    Some(b)
}

/// Parse request bytes (anything a local process sent: never panics).
pub fn parse(b: &[u8]) -> Option<Request<'_>> {
    let rest = b.strip_prefix(MAGIC.as_slice())?;
    let (&name_len, rest) = rest.split_first()?;
    let (name, rest) = rest.split_at_checked(usize::from(name_len))?;
    let name = std::str::from_utf8(name).ok()?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let value_len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    let (value, rest) = rest.split_at_checked(value_len)?;
    // A request of an older `warpfs` ends here: its padding reads as "no tag".
    let (&tag_len, rest) = rest.split_first().unwrap_or((&0, rest));
    let tag = match usize::from(tag_len) {
        0 => None,
        TAG_LEN => Some(rest.get(..TAG_LEN)?),
        _ => return None,
    };
    Some(Request { name, value, tag })
}

/// Whether a request `cmd` from user `uid` may be served: [`GET`] for root
/// and the user the daemon runs as (who could stop it anyway); [`SET`] for
/// root, and for that user when `proven()` (the request's tag proves the
/// password; asked only then).
pub fn allowed(uid: u32, cmd: u32, proven: impl FnOnce() -> bool) -> bool {
    // SAFETY: geteuid has no preconditions.
    uid == 0 || (uid == unsafe { libc::geteuid() } && (cmd == GET || proven()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_the_c_macros() {
        // _IOWR('W', 0xf0, char[16383]) and _IOW('W', 0xf1, char[16383]) as
        // <asm-generic/ioctl.h> computes them.
        assert_eq!(GET, 0xffff_57f0);
        assert_eq!(SET, 0x7fff_57f1);
    }

    #[test]
    fn round_trip_and_padding() {
        let b = encode("trusted.warpfs.rekey", b"start 3 2 0", None).unwrap();
        assert_eq!(b.len(), SIZE);
        assert_eq!(
            parse(&b),
            Some(Request {
                name: "trusted.warpfs.rekey",
                value: b"start 3 2 0",
                tag: None,
            })
        );
        let b = encode("trusted.warpfs.stats", b"", None).unwrap();
        assert_eq!(parse(&b).unwrap().value, b"");
        // With a tag.
        let t = [0xa5u8; TAG_LEN];
        let b = encode("trusted.warpfs.rekey", b"finish", Some(&t)).unwrap();
        let r = parse(&b).unwrap();
        assert_eq!(
            (r.name, r.value, r.tag),
            ("trusted.warpfs.rekey", &b"finish"[..], Some(&t[..]))
        );
        // The largest value that fits, and one byte more.
        let room = SIZE - MAGIC.len() - 1 - 1 - 4 - 1;
        assert!(encode("n", &vec![7u8; room], None).is_some());
        assert!(encode("n", &vec![7u8; room + 1], None).is_none());
        assert!(encode("n", &vec![7u8; room - TAG_LEN], Some(&t)).is_some());
        assert!(encode("n", &vec![7u8; room - TAG_LEN + 1], Some(&t)).is_none());
        assert!(
            encode(&"x".repeat(256), b"", None).is_none(),
            "a name longer than 255 bytes"
        );
    }

    #[test]
    fn requests_of_the_tagless_layout_still_parse() {
        // An older `warpfs` wrote no tag length: zeros followed the value,
        // or nothing when the value filled the buffer.
        let mut old = MAGIC.to_vec();
        old.push(1);
        old.push(b'n');
        old.extend_from_slice(&3u32.to_le_bytes());
        old.extend_from_slice(b"abc");
        let end = old.len();
        old.resize(SIZE, 0);
        assert_eq!(parse(&old).map(|r| r.tag), Some(None));
        assert_eq!(
            parse(&old[..end]),
            Some(Request {
                name: "n",
                value: b"abc",
                tag: None
            })
        );
    }

    #[test]
    fn hostile_requests_are_refused() {
        let good = encode("name", b"value", None).unwrap();
        // Every truncation of the meaningful part fails.
        for n in 0..MAGIC.len() + 1 + 4 + 4 + 5 {
            assert_eq!(parse(&good[..n]), None, "truncated to {n} bytes");
        }
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(parse(&bad), None, "wrong magic");
        let mut bad = good.clone();
        bad[MAGIC.len()] = 255;
        assert_eq!(parse(&bad[..200]), None, "name running past the end");
        let mut bad = good.clone();
        bad[MAGIC.len() + 5..MAGIC.len() + 9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&bad), None, "value length past the end");
        let mut bad = good.clone();
        bad[MAGIC.len() + 1] = 0xff;
        assert_eq!(parse(&bad), None, "a name that is not UTF-8");
        // Tag lengths other than 0 and TAG_LEN, and a tag cut short.
        let at = MAGIC.len() + 1 + 4 + 4 + 5;
        for len in [1u8, 16, 31, 33, 255] {
            let mut bad = good.clone();
            bad[at] = len;
            assert_eq!(parse(&bad), None, "tag length {len}");
        }
        let tagged = encode("name", b"value", Some(&[1; TAG_LEN])).unwrap();
        for n in at + 1..at + 1 + TAG_LEN {
            assert_eq!(parse(&tagged[..n]), None, "tag cut to {} bytes", n - at - 1);
        }
        assert!(parse(&tagged[..at + 1 + TAG_LEN]).is_some());
        assert_eq!(parse(&[]), None);
    }

    #[test]
    fn reads_for_root_and_the_daemons_user_sets_for_root_and_a_proven_user() {
        let never = || -> bool { panic!("a proof asked for where none is needed") };
        assert!(allowed(0, GET, never) && allowed(0, SET, never));
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert!(allowed(me, GET, never));
        assert!(allowed(me, SET, || true));
        assert_eq!(allowed(me, SET, || false), me == 0);
        if me != 65534 {
            // Another user: refused, proof or not.
            for cmd in [GET, SET] {
                assert!(!allowed(65534, cmd, || true));
            }
        }
    }
}
