//! warpfs layer 5, the speculative keystream engine (our WAESlib; see
//! docs/decisions/0038-keystream-seam.md and the EncFS++ paper, sections 4-5).
//!
//! AES-CTR keystream ("masks") depends only on (key, nonce, counter), so it
//! can be made before the data is known. The [`Engine`] keeps contexts, each
//! holding one mask; [`Engine::define`] queues a mask at a priority and
//! returns at once, worker threads make queued masks highest priority first
//! (many per work unit), and [`Engine::apply`] XORs a mask into a buffer,
//! waiting only while a worker is making it, and making it on the calling
//! thread when nobody has started it.
//!
//! On top: the [`WritePool`] (one per volume; masks for the next Z nonces,
//! implements [`warpfs_keystream::Keystream`] so it can replace `Direct`)
//! and the [`ReadWindow`] (one per open file; masks for the W blocks ahead
//! of the reader). With speculation on, decrypt-ahead threads go one step
//! further for sequential readers ([`AheadStream`], one per open handle,
//! over any [`AheadSource`]; its jobs run through [`Engine::run_ahead`]):
//! they read and decrypt the next requests before they arrive. [`StatsSnapshot`] counts what speculation achieved.
//!
//! Mask layout (the NIST GCM counter layout of `warpfs_crypto::aes_ctr`):
//! counter block = nonce (12 bytes) ‖ u32 big-endian counter; a context
//! defined with [`Engine::define`] starts at counter 1, so mask bytes 0..16
//! are the GCM tag mask E(J0) and bytes 16.. the data keystream (counter 2
//! on). [`Engine::define_at`] takes any initial counter.

mod ahead;
pub mod ahead_stream;
mod backend;
mod cipher;
mod config;
mod engine;
mod error;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod placement;
mod read_window;
mod split;
mod stats;
mod write_pool;
mod xts_device;

pub use ahead::AheadJob;
pub use ahead_stream::{AheadSource, AheadStream};
pub use backend::{Backend, CpuBackend, DeviceCounts, MaskJob};
pub use cipher::MaskCipher;
pub use config::{
    speculation_policy, EngineConfig, PolicyInput, AHEAD_NICE, AHEAD_STEAL_AFTER, DEFAULT_BATCH_MAX,
    DEFAULT_ENGINE_NICE, DEFAULT_MASK_LEN, DEFAULT_POOL_SIZE, DEFAULT_READ_AHEAD, DEFAULT_SPIN_US, DEFAULT_WINDOW_MAX,
    ENV_NO_AESNI, REFILL_BATCH, SMALL_RANDOM_READ,
};
pub use engine::{Ctx, CtxInfo, CtxState, Defined, Engine, KeyId, Priority, PRIORITY_HIGHEST, PRIORITY_LOWEST};
pub use error::EngineError;
pub use read_window::{ReadWindow, PRIORITY_READ_NEAR};
pub use stats::{StatsSnapshot, BATCH_BUCKETS};
pub use warpfs_crypto::Nonce;
pub use write_pool::{NonceSupply, WritePool};
pub use xts_device::{XtsCounts, XtsDevicePort};
