//! The hostile-storage suite's parts: bounded execution (`guard`), the
//! canary tree outside CIPHERDIR and its inotify watches (`canary`,
//! `notify`), the populated template volume (`fixture`), planting
//! (`plant`), the agreed outcomes (`expect`), one scenario and its checks
//! (`scenario`), the mount session (`session`), and the cases outside the
//! matrix (`special`, `reverse`); fsck's undo file (`undo`).

pub mod canary;
pub mod expect;
pub mod fixture;
pub mod guard;
pub mod notify;
pub mod plant;
pub mod reverse;
pub mod scenario;
pub mod session;
pub mod special;
pub mod undo;
