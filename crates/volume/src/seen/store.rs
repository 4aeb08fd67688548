//! The state file of versions seen (FORMAT.md 16): what it holds, and its
//! bytes under an HMAC from the volume key. Read from a place the user
//! owns, but parsed as any bytes from disk are: every error is returned.

use std::collections::{HashMap, VecDeque};
use warpfs_config::KeyState;
use warpfs_crypto::SeenKey;

/// The file's first bytes: name and format version.
pub(crate) const MAGIC: &[u8; 12] = b"WARPFS-SEEN\x01";
/// Configs remembered (the latest last); older ones are forgotten first.
pub(crate) const MAX_CONFIGS: usize = 256;
/// Replaced versions remembered per file; older ones are forgotten first.
pub(crate) const MAX_VERSIONS: usize = 4096;
/// A state file larger than this is refused.
pub(crate) const MAX_LEN: usize = 256 << 20;
const TAG: usize = 32;

/// What a host saw of one volume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct State {
    /// The highest key state of a config seen.
    pub floor: Option<KeyState>,
    /// SHA-256 of each config a command on this host replaced, oldest
    /// first.
    pub configs: VecDeque<[u8; 32]>,
    /// Per file ID: the first 8 bytes of the record tag of each version
    /// a commit on this host replaced, oldest first.
    pub files: HashMap<[u8; 16], VecDeque<[u8; 8]>>,
}

/// Why a state file was not taken whole.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// Not a state file of this format, or cut short: nothing is used.
    Malformed(String),
    /// Well formed but its tag does not verify under this volume key
    /// (the key changed, or the file was edited): only its key state is
    /// kept, as a floor.
    Unauthenticated(Option<KeyState>),
}

fn put_state(out: &mut Vec<u8>, k: Option<KeyState>) {
    match k {
        None => out.extend_from_slice(&[0u8; 10]),
        Some(k) => {
            out.push(1);
            out.extend_from_slice(&k.generation.to_le_bytes());
            out.push(u8::from(k.rekey_under_way));
            out.extend_from_slice(&k.revision.to_le_bytes());
        }
    }
}

impl State {
    /// The state's bytes, tagged under `key`.
    pub(crate) fn encode(&self, key: &SeenKey) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.configs.len() * 32 + self.files.len() * 40);
        out.extend_from_slice(MAGIC);
        put_state(&mut out, self.floor);
        out.extend_from_slice(&(self.configs.len() as u32).to_le_bytes());
        for c in &self.configs {
            out.extend_from_slice(c);
        }
        let mut ids: Vec<_> = self.files.keys().collect();
        ids.sort();
        out.extend_from_slice(&(ids.len() as u64).to_le_bytes());
        for id in ids {
            let v = &self.files[id];
            out.extend_from_slice(id);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            for t in v {
                out.extend_from_slice(t);
            }
        }
        let tag = key.tag(&[&out]);
        out.extend_from_slice(&tag);
        out
    }

    /// Parse and authenticate a state file's bytes.
    pub(crate) fn decode(b: &[u8], key: &SeenKey) -> Result<State, Unreadable> {
        let bad = |w: &str| Unreadable::Malformed(w.to_string());
        if b.len() > MAX_LEN {
            return Err(bad("larger than 256 MiB"));
        }
        if b.len() < MAGIC.len() + 10 + TAG || &b[..MAGIC.len()] != MAGIC {
            return Err(bad("not a warpfs state file of version 1"));
        }
        let (body, tag) = b.split_at(b.len() - TAG);
        let mut r = Reader {
            b: body,
            at: MAGIC.len(),
        };
        let floor = r.key_state()?;
        if !key.verify(&[body], tag) {
            return Err(Unreadable::Unauthenticated(floor));
        }
        let n = r.u32()? as usize;
        if n > MAX_CONFIGS {
            return Err(bad("too many configs"));
        }
        let mut configs = VecDeque::with_capacity(n);
        for _ in 0..n {
            configs.push_back(r.take::<32>()?);
        }
        let nf = r.u64()?;
        // Each file takes at least 20 bytes: the count cannot pass the rest.
        if nf > (r.left() / 20) as u64 {
            return Err(bad("file count past the end"));
        }
        let mut files = HashMap::with_capacity(nf as usize);
        for _ in 0..nf {
            let id = r.take::<16>()?;
            let k = r.u32()? as usize;
            if k > MAX_VERSIONS {
                return Err(bad("too many versions of one file"));
            }
            let mut v = VecDeque::with_capacity(k);
            for _ in 0..k {
                v.push_back(r.take::<8>()?);
            }
            if files.insert(id, v).is_some() {
                return Err(bad("a file listed twice"));
            }
        }
        if r.left() != 0 {
            return Err(bad("bytes after the last file"));
        }
        Ok(State { floor, configs, files })
    }

    /// Add what `o` holds (another mount's state of the same volume):
    /// the higher floor, every config and version either holds.
    pub(crate) fn merge(&mut self, o: &State) {
        self.floor = self.floor.max(o.floor);
        for c in &o.configs {
            if !self.configs.contains(c) {
                self.configs.push_front(*c);
            }
        }
        while self.configs.len() > MAX_CONFIGS {
            self.configs.pop_front();
        }
        for (id, v) in &o.files {
            let mine = self.files.entry(*id).or_default();
            for t in v.iter().rev() {
                if !mine.contains(t) {
                    mine.push_front(*t);
                }
            }
            while mine.len() > MAX_VERSIONS {
                mine.pop_front();
            }
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], Unreadable> {
        let s = self
            .b
            .get(self.at..self.at + N)
            .ok_or_else(|| Unreadable::Malformed("cut short".into()))?;
        self.at += N;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, Unreadable> {
        Ok(u32::from_le_bytes(self.take::<4>()?))
    }

    fn u64(&mut self) -> Result<u64, Unreadable> {
        Ok(u64::from_le_bytes(self.take::<8>()?))
    }

    fn key_state(&mut self) -> Result<Option<KeyState>, Unreadable> {
        let [present] = self.take::<1>()?;
        let generation = self.u32()?;
        let [rekey] = self.take::<1>()?;
        let revision = self.u32()?;
        match (present, rekey) {
            (0, 0) if generation == 0 && revision == 0 => Ok(None),
            (1, 0 | 1) => Ok(Some(KeyState {
                generation,
                rekey_under_way: rekey == 1,
                revision,
            })),
            _ => Err(Unreadable::Malformed("bad key state".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> SeenKey {
        SeenKey::derive(&warpfs_crypto::MasterKey::from_bytes(&[b; 32]).unwrap())
    }

    fn sample() -> State {
        let mut s = State {
            floor: Some(KeyState {
                generation: 2,
                rekey_under_way: true,
                revision: 7,
            }),
            ..State::default()
        };
        s.configs.push_back([1; 32]);
        s.configs.push_back([2; 32]);
        s.files.insert([9; 16], VecDeque::from(vec![[1; 8], [2; 8]]));
        s.files.insert([3; 16], VecDeque::new());
        s
    }

    #[test]
    fn a_state_reads_back_under_its_key_only() {
        let s = sample();
        let b = s.encode(&key(1));
        assert_eq!(State::decode(&b, &key(1)), Ok(s.clone()));
        assert_eq!(State::decode(&b, &key(2)), Err(Unreadable::Unauthenticated(s.floor)));
        assert_eq!(
            State::decode(&State::default().encode(&key(1)), &key(1)),
            Ok(State::default())
        );
    }

    #[test]
    fn every_changed_byte_is_refused() {
        let b = sample().encode(&key(1));
        for i in 0..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x40;
            assert!(State::decode(&c, &key(1)).is_err(), "byte {i} changed was accepted");
        }
    }

    #[test]
    fn a_merge_keeps_the_higher_floor_and_every_config_and_version() {
        let mut a = sample();
        let mut b = State {
            floor: Some(KeyState {
                generation: 3,
                rekey_under_way: false,
                revision: 0,
            }),
            ..State::default()
        };
        b.configs.push_back([5; 32]);
        b.configs.push_back([2; 32]);
        b.files.insert([9; 16], VecDeque::from(vec![[7; 8], [2; 8]]));
        a.merge(&b);
        assert_eq!(a.floor, b.floor);
        assert_eq!(a.configs, VecDeque::from(vec![[5; 32], [1; 32], [2; 32]]));
        let v = &a.files[&[9; 16]];
        assert_eq!(v.len(), 3);
        assert!(v.contains(&[7; 8]) && v.contains(&[1; 8]) && v.contains(&[2; 8]));
    }

    proptest! {
        #[test]
        fn any_bytes_parse_to_an_error_or_a_state_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = State::decode(&b, &key(1));
            let mut m = MAGIC.to_vec();
            m.extend_from_slice(&b);
            let _ = State::decode(&m, &key(1));
        }

        #[test]
        fn every_cut_is_refused(cut in 0usize..200) {
            let b = sample().encode(&key(1));
            let cut = cut.min(b.len() - 1);
            prop_assert!(State::decode(&b[..cut], &key(1)).is_err());
        }
    }
}
