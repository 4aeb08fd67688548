//! warpfs volume.
