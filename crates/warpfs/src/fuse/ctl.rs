//! The control ioctls of the mount root: how `warpfs stats` and `warpfs
//! rekey` reach a live mount's virtual attributes (`trusted.warpfs.stats`,
//! `trusted.warpfs.rekey`) without extended attributes, so they also work
//! under `--no-xattr` (ARCHITECTURE.md, "Control channel"). Two restricted
//! ioctls on a descriptor of the mount root: [`GET`] sends a name and gets
//! the value back (the ioctl's result is its length), [`SET`] sends a name
//! and a value. The daemon serves reads to root and to the user it runs as,
//! and sets (an online rekey) to root only, as the `trusted.*` attributes
//! did: starting a rekey is for `warpfs rekey`, which proves the password
//! first. The request layout is defined here once, for both sides:
//! [`MAGIC`], the name's length (one byte), the name, the value's length
//! (u32, little endian), the value, zeros up to [`SIZE`].

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
}

/// The request bytes for `name` and `value`; `None` when they do not fit.
pub fn encode(name: &str, value: &[u8]) -> Option<Vec<u8>> {
    let name_len = u8::try_from(name.len()).ok()?;
    let value_len = u32::try_from(value.len()).ok()?;
    let mut b = Vec::with_capacity(SIZE);
    b.extend_from_slice(MAGIC);
    b.push(name_len);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&value_len.to_le_bytes());
    b.extend_from_slice(value);
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
    let value = rest.get(..value_len)?;
    Some(Request { name, value })
}

/// Whether a request `cmd` from user `uid` may be served: [`GET`] for root
/// and the user the daemon runs as (who could stop it anyway), [`SET`] for
/// root only.
pub fn allowed(uid: u32, cmd: u32) -> bool {
    // SAFETY: geteuid has no preconditions.
    uid == 0 || (cmd == GET && uid == unsafe { libc::geteuid() })
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
        let b = encode("trusted.warpfs.rekey", b"start 3 2 0").unwrap();
        assert_eq!(b.len(), SIZE);
        assert_eq!(
            parse(&b),
            Some(Request {
                name: "trusted.warpfs.rekey",
                value: b"start 3 2 0"
            })
        );
        let b = encode("trusted.warpfs.stats", b"").unwrap();
        assert_eq!(parse(&b).unwrap().value, b"");
        // The largest value that fits, and one byte more.
        let room = SIZE - MAGIC.len() - 1 - 1 - 4;
        assert!(encode("n", &vec![7u8; room]).is_some());
        assert!(encode("n", &vec![7u8; room + 1]).is_none());
        assert!(encode(&"x".repeat(256), b"").is_none(), "a name longer than 255 bytes");
    }

    #[test]
    fn hostile_requests_are_refused() {
        let good = encode("name", b"value").unwrap();
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
        let mut bad = good;
        bad[MAGIC.len() + 1] = 0xff;
        assert_eq!(parse(&bad), None, "a name that is not UTF-8");
        assert_eq!(parse(&[]), None);
    }

    #[test]
    fn reads_for_root_and_the_daemons_user_sets_for_root() {
        assert!(allowed(0, GET) && allowed(0, SET));
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert!(allowed(me, GET));
        assert_eq!(allowed(me, SET), me == 0);
        if me != 65534 {
            assert!(!allowed(65534, GET) && !allowed(65534, SET));
        }
    }
}
