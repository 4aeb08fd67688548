//! Canonical byte strings of a config: the length-prefixed fields of the
//! key wrapping's associated data (FORMAT.md 2.3), and the input of a
//! keyslot config's MAC (2.6), which covers every field of the file but
//! the MAC itself.

use super::{Config, KeyStore};
use crate::FORMAT_NAME;

/// Magic in front of the MAC input.
const MAC_MAGIC: &[u8] = b"warpfs.conf mac v1";

/// `F(name, value) = u32le(len name) ‖ name ‖ u32le(len value) ‖ value`,
/// appended in order after a magic.
pub(crate) struct Fields(Vec<u8>);

impl Fields {
    pub(crate) fn new(magic: &[u8]) -> Self {
        let mut v = Vec::with_capacity(1024);
        v.extend_from_slice(magic);
        Fields(v)
    }

    pub(crate) fn bytes(&mut self, name: &str, value: &[u8]) {
        // Names and values are far below 4 GiB (the file is ≤ 64 KiB).
        self.0.extend_from_slice(&(name.len() as u32).to_le_bytes());
        self.0.extend_from_slice(name.as_bytes());
        self.0.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.0.extend_from_slice(value);
    }

    pub(crate) fn str(&mut self, name: &str, value: &str) {
        self.bytes(name, value.as_bytes());
    }

    /// A number as decimal ASCII (no sign, no leading zeros).
    pub(crate) fn dec(&mut self, name: &str, value: u32) {
        self.str(name, &value.to_string());
    }

    pub(crate) fn dec64(&mut self, name: &str, value: u64) {
        self.str(name, &value.to_string());
    }

    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl Config {
    /// The fields every config starts with: format to feature flags.
    pub(crate) fn head_fields(&self, f: &mut Fields) {
        let flags = self
            .feature_flags
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(",");
        f.str("format", FORMAT_NAME);
        f.dec("version", self.version);
        f.str("creator", &self.creator);
        f.str("content_mode", self.content_mode.as_str());
        f.dec("key_bits", self.key_bits);
        f.dec("block_size", self.block_size);
        f.str("feature_flags", &flags);
    }

    /// The key generation fields, present only when set (FORMAT.md 10.1).
    pub(crate) fn generation_fields(&self, f: &mut Fields) {
        if self.key_generation > 0 {
            f.dec("key_generation", self.key_generation);
        }
        if let Some(t) = self.rekey_target {
            f.dec("rekey_target", t);
        }
        if let Some(id) = &self.rekey_id {
            f.bytes("rekey_id", id);
        }
    }

    /// The MAC input of a keyslot config (FORMAT.md 2.6); empty for a
    /// config of format 1 or 2, which has no MAC.
    pub(crate) fn mac_input(&self) -> Vec<u8> {
        let KeyStore::Slots(t) = &self.store else {
            return Vec::new();
        };
        let mut f = Fields::new(MAC_MAGIC);
        self.head_fields(&mut f);
        self.generation_fields(&mut f);
        f.dec("revision", t.revision);
        if let Some((g, w)) = &t.previous {
            f.dec("previous_volume_key.generation", *g);
            f.bytes("previous_volume_key.nonce", &w.nonce);
            f.bytes("previous_volume_key.ciphertext", &w.ciphertext);
        }
        f.dec("keyslots", t.slots.len() as u32);
        for s in &t.slots {
            s.mac_fields(&mut f);
        }
        f.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_length_prefixed() {
        let mut f = Fields::new(b"m");
        f.str("a", "bc");
        f.dec("n", 10);
        assert_eq!(
            f.into_bytes(),
            b"m\x01\0\0\0a\x02\0\0\0bc\x01\0\0\0n\x02\0\0\x0010".to_vec()
        );
        let (mut x, mut y) = (Fields::new(b""), Fields::new(b""));
        x.str("a", "bc");
        y.str("ab", "c");
        assert_ne!(x.into_bytes(), y.into_bytes());
    }
}
