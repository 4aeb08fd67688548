//! Key types and errors shared by the primitives.

/// A key of the wrong length was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid key length")]
pub struct KeyLengthError;
