//! Daily use as people run gocryptfs: fstab and the mount helpers, systemd
//! examples, idle unmount, man pages and completions, key handling, `speed`
//! and the documented command-line contract. One test binary (`cargo test
//! -p warpfs --test daily`), one module per subject.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod clidoc;
mod contrib;
mod fstab;
mod idle;
mod keyparity;
mod manpage;
mod speed;
