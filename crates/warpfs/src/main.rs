//! warpfs: a user-space encrypted file system. `warpfs init`, `warpfs mount`,
//! `warpfs passwd`, `warpfs info`. See README.md.

mod cli;
mod container;
use warpfs_fuse as fuse;

fn main() {
    std::process::exit(cli::run());
}
