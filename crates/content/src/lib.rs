//! warpfs content.
