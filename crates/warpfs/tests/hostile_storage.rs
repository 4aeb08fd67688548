//! Hostile storage: whoever holds CIPHERDIR plants, in place of every name
//! warpfs reads or creates there, a symlink to a file outside, a symlink
//! to a FIFO outside, a FIFO, a symlink to a zero device outside (char
//! 1:5, as /dev/zero, but one whose opens the test sees), character
//! devices 1:3 and 1:5, a directory, a hard link to a file outside, or an
//! older genuine copy (`warpfs.lock` and the journal also a symlink to a
//! path that does not exist; fsck's undo file also the undo file of another
//! volume); then `warpfs mount` (with listing, reading and writing through
//! the mount), `warpfs fsck`, `fsck --repair`, `warpfs rekey` (offline),
//! `warpfs passwd` and, where it reads the planted name (the undo file, the
//! config, the lock file), `warpfs fsck --undo` run, each at the same time
//! as the others on a fresh copy of a populated template volume
//! (tests/hostile/fixture.rs), and:
//!
//! - (a) each finishes within a bound (`WARPFS_HOSTILE_LIMIT_SECS`,
//!   default 30 s): every command and every file operation on the mount
//!   runs under a guard that, on a hang, says where the processes waited,
//!   opens the FIFOs they wait for, kills them and detaches the mount
//!   (tests/hostile/guard.rs), and under a memory ceiling;
//! - (b) nothing outside CIPHERDIR is created, opened through a planted
//!   link, opened for writing or changed: a canary tree beside it (a file,
//!   a FIFO with a reader of ours, a directory, a path that must not come
//!   to exist) is watched with inotify and compared afterwards;
//! - (c) the user sees a clear error or a marked entry: the agreed exit
//!   code and the planted file's name in the message
//!   (tests/hostile/expect.rs), or EIO / a marked name through the mount
//!   (tests/hostile/session.rs), never a silent success that trusted the
//!   planted object;
//! - (d) no data is lost: with the plant taken away, every file reads back.
//!
//! Each test is one cell (planted name × kind, `gcm`), running every
//! command; it reports every broken expectation of the cell at once, and
//! fails too when nothing showed that the planted object was looked at.
//! `key_cases` runs a few cells on `ctr` and `xts`. Outside the matrix: a
//! damaged `warpfs.conf` beside an older genuine copy, a backing name with
//! an arbitrary tail, the lock-file control, `fsck`'s repairs on a damaged
//! file that is a link to a file outside, and the reverse config.
//!
//! Run: `cargo test --release -p warpfs --test hostile_storage` (as root,
//! with /dev/fuse).

#[macro_use]
mod common;
mod hostile;

use common::Mode;
use hostile::plant::{Kind, Target};
use hostile::scenario::cell;

/// One test per kind of `$kind` list, planted at `$target`, in `gcm`.
macro_rules! matrix {
    ($module:ident, $target:ident, [$($test:ident = $kind:ident),* $(,)?]) => {
        mod $module {
            use super::*;
            $(
                #[test]
                fn $test() {
                    cell(Target::$target, Kind::$kind, Mode::Gcm)
                }
            )*
        }
    };
}

/// The kinds every name gets, plus `$extra`.
macro_rules! kinds {
    ($module:ident, $target:ident $(, $extra:ident = $ek:ident)*) => {
        matrix!($module, $target, [
            symlink_file = SymlinkFile,
            symlink_fifo = SymlinkFifo,
            fifo = Fifo,
            symlink_dev_zero = SymlinkDevZero,
            dev_null = DevNull,
            dev_zero = DevZero,
            dir = Dir,
            hard_link = HardLink
            $(, $extra = $ek)*
        ]);
    };
}

kinds!(conf, Conf, old_copy = OldCopy);
kinds!(conf_copy, ConfCopy, old_copy = OldCopy);
kinds!(lock, Lock, dangling = Dangling);
kinds!(root_diriv, RootDiriv, old_copy = OldCopy);
kinds!(sub_diriv, SubDiriv, old_copy = OldCopy);
kinds!(diriv_copy, DirivCopy, entry_move = OldCopy);
kinds!(sidecar, Sidecar, old_copy = OldCopy);
kinds!(content, Content, old_copy = OldCopy);
kinds!(journal, Journal, old_copy = OldCopy, dangling = Dangling);
kinds!(fsck_undo, Undo, old_copy = OldCopy, foreign = Foreign);

/// The key cells once more in the other content modes.
mod key_cases {
    use super::*;

    macro_rules! keys {
        ($mode:ident) => {
            #[allow(non_snake_case)]
            mod $mode {
                use super::*;
                const MODE: Mode = Mode::$mode;
                #[test]
                fn conf_fifo() {
                    cell(Target::Conf, Kind::Fifo, MODE)
                }
                #[test]
                fn conf_copy_fifo() {
                    cell(Target::ConfCopy, Kind::Fifo, MODE)
                }
                #[test]
                fn lock_fifo() {
                    cell(Target::Lock, Kind::Fifo, MODE)
                }
                #[test]
                fn sub_diriv_symlink_file() {
                    cell(Target::SubDiriv, Kind::SymlinkFile, MODE)
                }
                #[test]
                fn diriv_copy_entry_move() {
                    cell(Target::DirivCopy, Kind::OldCopy, MODE)
                }
                #[test]
                fn sidecar_fifo() {
                    cell(Target::Sidecar, Kind::Fifo, MODE)
                }
                #[test]
                fn content_symlink_file() {
                    cell(Target::Content, Kind::SymlinkFile, MODE)
                }
                #[test]
                fn content_hard_link() {
                    cell(Target::Content, Kind::HardLink, MODE)
                }
                #[test]
                fn journal_fifo() {
                    cell(Target::Journal, Kind::Fifo, MODE)
                }
            }
        };
    }
    keys!(Ctr);
    keys!(Xts);
}

mod reverse_conf {
    use super::*;
    use hostile::reverse::reverse_conf;

    #[test]
    fn symlink_file() {
        reverse_conf(Kind::SymlinkFile)
    }
    #[test]
    fn symlink_fifo() {
        reverse_conf(Kind::SymlinkFifo)
    }
    #[test]
    fn fifo() {
        reverse_conf(Kind::Fifo)
    }
    #[test]
    fn symlink_dev_zero() {
        reverse_conf(Kind::SymlinkDevZero)
    }
    #[test]
    fn dev_null() {
        reverse_conf(Kind::DevNull)
    }
    #[test]
    fn dev_zero() {
        reverse_conf(Kind::DevZero)
    }
    #[test]
    fn dir() {
        reverse_conf(Kind::Dir)
    }
}

mod conf_damaged_beside_older_copy {
    use super::*;
    use hostile::special::{conf_flipped_beside_older_copy, Flip};

    #[test]
    fn not_json() {
        conf_flipped_beside_older_copy(Flip::Json, Mode::Gcm)
    }
    #[test]
    fn wrapped_key() {
        conf_flipped_beside_older_copy(Flip::WrappedKey, Mode::Gcm)
    }
}

#[test]
fn backing_name_with_an_arbitrary_tail_is_not_a_copy() {
    hostile::special::arbitrary_tail_is_not_a_copy(Mode::Gcm)
}

#[test]
fn lock_file_is_looked_at_by_mount_fsck_and_rekey() {
    hostile::special::lock_is_looked_at_by_every_command()
}

mod fsck_repairs_of_a_file_linked_outside {
    use super::*;
    use hostile::special::fsck_repairs_never_write_outside;

    #[test]
    fn gcm() {
        fsck_repairs_never_write_outside(Mode::Gcm)
    }
    #[test]
    fn ctr() {
        fsck_repairs_never_write_outside(Mode::Ctr)
    }
}

#[test]
fn the_harness_does_not_count_a_late_close_of_its_own_writer() {
    hostile::canary::a_late_close_of_the_tests_own_writer_is_not_counted()
}
