//! A config's place in the volume's key history (FORMAT.md 10.1, 13.5):
//! its key generation, whether a rekey to the next one is under way, and
//! (format 3) the revision of its keyslot table, ordered, so that an older
//! copy of a config can be told from a newer one.

use super::Config;
use std::fmt;

/// Where a config stands in the volume's key history. Ordered by key
/// generation, then a rekey under way after none (its target is always
/// the next generation): `0 < 0 → 1 < 1 < 1 → 2 < …`, then by the
/// revision of the keyslot table (a copy from before a slot was removed
/// is older).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyState {
    /// The generation every file uses (`key_generation`, absent = 0).
    pub generation: u32,
    /// Whether `rekey_target` is set (a rekey to `generation + 1`).
    pub rekey_under_way: bool,
    /// The keyslot table's revision (0 without keyslots).
    pub revision: u32,
}

impl Config {
    /// This config's key state. Authenticated only once [`Config::unlock`]
    /// has succeeded on it; before that it is what the file says.
    pub fn key_state(&self) -> KeyState {
        KeyState {
            generation: self.key_generation,
            rekey_under_way: self.rekey_target.is_some(),
            revision: self.revision(),
        }
    }
}

impl fmt::Display for KeyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key generation {}", self.generation)?;
        if self.rekey_under_way {
            // The target is generation + 1 (checked when the file is read).
            write!(f, ", rekey to {} under way", u64::from(self.generation) + 1)?;
        }
        if self.revision > 0 {
            write!(f, ", keyslot revision {}", self.revision)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(generation: u32, rekey_under_way: bool) -> KeyState {
        KeyState {
            generation,
            rekey_under_way,
            revision: 0,
        }
    }

    #[test]
    fn a_later_keyslot_revision_is_newer_only_within_a_key_state() {
        let r = |g, u, revision| KeyState {
            generation: g,
            rekey_under_way: u,
            revision,
        };
        assert!(r(0, false, 1) < r(0, false, 2));
        assert!(r(0, false, 9) < r(0, true, 1));
        assert!(r(0, true, 9) < r(1, false, 0));
        assert_eq!(r(1, false, 3).to_string(), "key generation 1, keyslot revision 3");
    }

    #[test]
    fn states_are_ordered_along_the_key_history() {
        let history = [
            st(0, false),
            st(0, true),
            st(1, false),
            st(1, true),
            st(2, false),
            st(u32::MAX, false),
            st(u32::MAX, true),
        ];
        for (i, a) in history.iter().enumerate() {
            for (j, b) in history.iter().enumerate() {
                assert_eq!(a.cmp(b), i.cmp(&j), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn a_config_reports_its_fields() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.conf");
        let kdf = warpfs_crypto::KdfParams::MIN;
        let (c, _) = Config::create_at(&p, b"pw", crate::ContentMode::Gcm, 256, kdf).unwrap();
        assert_eq!(c.key_state(), st(0, false));
        let c = c.set_generations_at(&p, b"pw", 0, Some(1)).unwrap();
        assert_eq!(c.key_state(), st(0, true));
        assert_eq!(c.key_state().to_string(), "key generation 0, rekey to 1 under way");
        let c = c.set_generations_at(&p, b"pw", 1, None).unwrap();
        assert_eq!(c.key_state(), st(1, false));
        assert_eq!(c.key_state().to_string(), "key generation 1");
    }
}
