//! warpfs: a user-space encrypted file system. `warpfs init`, `warpfs mount`,
//! `warpfs passwd`, `warpfs info`. See README.md.

mod cli;
mod container;
mod fuse;

fn main() {
    std::process::exit(cli::run());
}
