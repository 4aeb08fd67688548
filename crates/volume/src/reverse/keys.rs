//! The keys of a reverse view and the one block operation: encrypt a
//! plaintext block in place under its synthetic nonce and write its `gcm`
//! nonce entry (FORMAT.md 3.2, 3.5, 14); with `file-summary`, also the
//! summary key (FORMAT.md 12.1).

use warpfs_crypto::gcm::{tag_mask, DATA_COUNTER};
use warpfs_crypto::reverse::{block_aad, ReverseKeys};
use warpfs_crypto::{ContentKey, GcmTagger, MasterKey, NameCipher, Sealer, Subkeys, SummaryKey, NONCE_LEN};

/// Everything a view encrypts with.
pub(crate) struct Keys {
    pub(crate) rev: ReverseKeys,
    content: ContentKey,
    tagger: GcmTagger,
    pub(crate) names: NameCipher,
    pub(crate) seal: Sealer,
    /// The summary key, when the view's files carry summaries.
    pub(crate) summary: Option<SummaryKey>,
}

impl Keys {
    pub(crate) fn derive(master: &MasterKey, key_bits: u32, summary: bool) -> Self {
        let sub = Subkeys::derive(master, key_bits);
        Self {
            summary: summary.then(|| SummaryKey::derive(master)),
            rev: ReverseKeys::derive(master),
            tagger: GcmTagger::new(&sub.content),
            content: sub.content,
            names: sub.names,
            seal: sub.seal,
        }
    }

    /// Encrypt block `block` of file `file_id` in place (`buf`: its
    /// plaintext, at most 4096 bytes) and write its 32-byte entry: the
    /// synthetic nonce, key generation 0 and the GCM tag.
    pub(crate) fn seal_block(&self, file_id: &[u8; 16], block: u64, buf: &mut [u8], entry: &mut [u8]) {
        let nonce = self.rev.block_nonce(file_id, block, buf);
        self.content.xor_keystream(&nonce, DATA_COUNTER, buf);
        let tag = self
            .tagger
            .tag(&block_aad(file_id, block), buf, &tag_mask(&self.content, &nonce));
        entry.fill(0);
        entry[..NONCE_LEN].copy_from_slice(&nonce);
        entry[16..32].copy_from_slice(&tag);
    }
}
