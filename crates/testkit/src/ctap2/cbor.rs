//! Just enough CBOR (RFC 8949) for CTAP2 messages: unsigned and negative
//! integers, byte and text strings, arrays, maps, booleans and null, each
//! of definite length. Decoding refuses anything else, never panics.

/// A CBOR data item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum V {
    /// An integer (major type 0 or 1).
    I(i64),
    /// A byte string.
    B(Vec<u8>),
    /// A text string.
    T(String),
    /// An array.
    A(Vec<V>),
    /// A map, in the order written.
    M(Vec<(V, V)>),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
}

impl V {
    /// A text string.
    pub fn t(s: &str) -> V {
        V::T(s.to_owned())
    }

    /// The value under `key` of a map.
    pub fn get(&self, key: &V) -> Option<&V> {
        match self {
            V::M(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value under integer `key`.
    pub fn at(&self, key: i64) -> Option<&V> {
        self.get(&V::I(key))
    }

    /// The value under text `key`.
    pub fn field(&self, key: &str) -> Option<&V> {
        self.get(&V::t(key))
    }

    /// Its bytes, when a byte string.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            V::B(b) => Some(b),
            _ => None,
        }
    }

    /// Its text, when a text string.
    pub fn text(&self) -> Option<&str> {
        match self {
            V::T(t) => Some(t),
            _ => None,
        }
    }

    /// Its value, when a boolean.
    pub fn boolean(&self) -> Option<bool> {
        match self {
            V::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Its value, when an integer.
    pub fn int(&self) -> Option<i64> {
        match self {
            V::I(i) => Some(*i),
            _ => None,
        }
    }

    /// Encoded.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            V::I(i) if *i >= 0 => head(out, 0, *i as u64),
            V::I(i) => head(out, 1, (-1 - *i) as u64),
            V::B(b) => {
                head(out, 2, b.len() as u64);
                out.extend_from_slice(b);
            }
            V::T(t) => {
                head(out, 3, t.len() as u64);
                out.extend_from_slice(t.as_bytes());
            }
            V::A(a) => {
                head(out, 4, a.len() as u64);
                a.iter().for_each(|v| v.write(out));
            }
            V::M(m) => {
                head(out, 5, m.len() as u64);
                for (k, v) in m {
                    k.write(out);
                    v.write(out);
                }
            }
            V::Bool(false) => out.push(0xf4),
            V::Bool(true) => out.push(0xf5),
            V::Null => out.push(0xf6),
        }
    }

    /// Decode one item that fills `b` exactly.
    pub fn decode(b: &[u8]) -> Option<V> {
        let mut pos = 0;
        let v = item(b, &mut pos, 0)?;
        (pos == b.len()).then_some(v)
    }
}

fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, n as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn take<'a>(b: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let s = b.get(*pos..pos.checked_add(n)?)?;
    *pos += n;
    Some(s)
}

fn item(b: &[u8], pos: &mut usize, depth: u32) -> Option<V> {
    if depth > 16 {
        return None;
    }
    let first = *take(b, pos, 1)?.first()?;
    let (major, info) = (first >> 5, first & 0x1f);
    if major == 7 {
        return match info {
            20 => Some(V::Bool(false)),
            21 => Some(V::Bool(true)),
            22 => Some(V::Null),
            _ => None,
        };
    }
    let n = match info {
        0..=23 => u64::from(info),
        24 => u64::from(take(b, pos, 1)?[0]),
        25 => u64::from(u16::from_be_bytes(take(b, pos, 2)?.try_into().ok()?)),
        26 => u64::from(u32::from_be_bytes(take(b, pos, 4)?.try_into().ok()?)),
        27 => u64::from_be_bytes(take(b, pos, 8)?.try_into().ok()?),
        _ => return None,
    };
    let len = usize::try_from(n).ok();
    Some(match major {
        0 => V::I(i64::try_from(n).ok()?),
        1 => V::I(-1 - i64::try_from(n).ok()?),
        2 => V::B(take(b, pos, len?)?.to_vec()),
        3 => V::T(String::from_utf8(take(b, pos, len?)?.to_vec()).ok()?),
        4 => {
            let n = len.filter(|&n| n <= b.len())?;
            V::A((0..n).map(|_| item(b, pos, depth + 1)).collect::<Option<_>>()?)
        }
        5 => {
            let n = len.filter(|&n| n <= b.len())?;
            let mut m = Vec::with_capacity(n);
            for _ in 0..n {
                let k = item(b, pos, depth + 1)?;
                let v = item(b, pos, depth + 1)?;
                m.push((k, v));
            }
            V::M(m)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let v = V::M(vec![
            (V::I(1), V::t("none")),
            (V::I(-25), V::B(vec![1; 300])),
            (V::t("up"), V::Bool(true)),
            (V::I(70000), V::A(vec![V::Null, V::I(-1), V::I(1 << 40)])),
        ]);
        let e = v.encode();
        assert_eq!(V::decode(&e), Some(v));
        // Known encodings (RFC 8949 appendix A).
        assert_eq!(V::I(-25).encode(), [0x38, 0x18]);
        assert_eq!(V::I(500).encode(), [0x19, 0x01, 0xf4]);
        for bad in [
            &[0xff][..],
            &[0x5a, 0xff, 0xff, 0xff, 0xff],
            &[0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ] {
            assert_eq!(V::decode(bad), None);
        }
        assert_eq!(V::decode(&e[..e.len() - 1]), None);
    }
}
