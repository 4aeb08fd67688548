//! warpfs layer 6: crypto primitives. AES counter-mode masks, GCM tags,
//! name encryption, password KDF and key wrapping. Everything above this
//! crate treats keys as opaque types that zeroize on drop.

pub mod aes_ctr;
pub mod block_cipher;
pub mod control;
pub mod cpu;
pub mod error;
pub mod gcm;
pub mod journal;
pub mod kdf;
pub mod keys;
pub mod locked;
pub mod mask;
pub mod names;
pub mod rand;
pub mod reverse;
pub mod seal;
#[cfg(target_arch = "x86_64")]
mod simd;
pub mod slotkeys;
pub mod summary;
pub mod twofish;
pub mod wrap;
pub mod xchacha;
pub mod xts;

pub use aes_ctr::{ContentKey, Nonce, NONCE_LEN};
pub use block_cipher::ContentCipher;
pub use control::{ControlKey, CONTROL_TAG_LEN};
pub use error::{Error, KeyLengthError, Result};
pub use gcm::{GcmTagger, TAG_LEN};
pub use journal::{JournalKey, SeenKey, UndoKey, JOURNAL_TAG_LEN, UNDO_TAG_LEN};
pub use kdf::{KdfParams, SALT_LEN};
pub use keys::{MasterKey, Subkeys, MASTER_KEY_LEN};
pub use locked::{make_non_dumpable, Locked, LockedBuf, LockedBytes, LockedWords};
pub use mask::{MaskLayout, TagMask, TAG_MASK_LEN};
pub use names::{is_reserved, long_file_name, long_sidecar, BackingName, NameCipher, DIRIV_FILE, DIRIV_LEN, MAX_NAME};
pub use seal::Sealer;
pub use slotkeys::{ConfigMacKey, RecoveryKey, SlotKey};
pub use summary::{SummaryKey, SUMMARY_TAG_LEN};
pub use wrap::{WrapError, Wrapped};
pub use xchacha::{poly1305_tag, XChaChaKey};
pub use xts::{file_block_tweak, XtsCipher, XtsKey};
