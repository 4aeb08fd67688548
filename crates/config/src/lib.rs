//! warpfs config.
