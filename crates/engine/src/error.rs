//! Errors of the engine API. None of them ever leaves a buffer half-XORed:
//! a call that fails has not touched the caller's data.

/// What went wrong in an engine call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A key that is neither 16 (AES-128) nor 32 (AES-256) bytes long.
    #[error("invalid key length (AES keys are 16 or 32 bytes)")]
    KeyLength,
    /// A `KeyId` this engine never handed out.
    #[error("unknown key id {0}")]
    UnknownKey(u32),
    /// A key retired with `Engine::retire_key`: it cannot be used again.
    #[error("key id {0} was retired")]
    RetiredKey(u32),
    /// The context was redefined (or dropped) after this `Defined` ticket
    /// was issued: its mask now belongs to another nonce and was not applied.
    #[error("the context was redefined since this ticket was issued")]
    Redefined,
    /// The request reaches past the 2^32 counter blocks one nonce can have
    /// (the keystream would repeat), or its length overflows.
    #[error("offset and length reach past the keystream of one nonce")]
    OutOfRange,
}
