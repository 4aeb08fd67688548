//! Skipping when FUSE mounts are not possible, and the macros that make
//! one test per content mode.

use std::fs::OpenOptions;

use std::path::Path;

/// Why mount tests cannot run here, or `None` when they can.
pub fn fuse_unavailable() -> Option<String> {
    if std::env::var_os("WARPFS_SKIP_MOUNT_TESTS").is_some() {
        return Some("WARPFS_SKIP_MOUNT_TESTS is set".into());
    }
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Some(format!("cannot open /dev/fuse: {e}"));
    }
    None
}

/// Return from the calling test, counted as skipped (`warpfs_testkit::skip`:
/// printed, recorded, a failure under WARPFS_NO_SKIP=1), when FUSE mounts
/// are not possible.
#[allow(unused_macros)]
macro_rules! require_fuse {
    () => {
        if warpfs_testkit::skip_if($crate::common::fuse_unavailable()) {
            return;
        }
    };
}

/// `mode_tests!(a, b)` makes `a::gcm`, `a::ctr`, `a::xts`, `b::gcm`, ...
/// tests calling `fn a(mode: Mode)` and `fn b(mode: Mode)`. Every arm also
/// makes `xchacha20_poly1305` and `ctr_xchacha20` tests (FORMAT.md 15),
/// run wherever `gcm` and `ctr` run. `twofish:` adds the Twofish modes
/// (`gcm_twofish`, `ctr_twofish`, `xts_twofish`); `all:` adds them too,
/// `#[ignore]`d: they run in scripts/twofish-matrix.sh (`--include-ignored
/// twofish`), not in the default run. `nonce:` leaves out `xts` (no nonce
/// entries).
#[allow(unused_macros)]
macro_rules! mode_tests {
    // Tests about nonce entries, tags or masks: gcm and ctr over AES and
    // XChaCha20 only.
    (nonce: $($name:ident),* $(,)?) => {
        $(
            mode_tests!(@mod $name {
                gcm: Gcm,
                ctr: Ctr,
                xchacha20_poly1305: XChaCha20Poly1305,
                ctr_xchacha20: CtrXChaCha20,
            });
        )*
    };
    // Every mode over every cipher (AES, Twofish: FORMAT.md 11; XChaCha20
    // in gcm and ctr: FORMAT.md 15), none ignored.
    (twofish: $($name:ident),* $(,)?) => {
        $(
            mode_tests!(@mod $name {
                gcm: Gcm,
                ctr: Ctr,
                xts: Xts,
                gcm_twofish: GcmTwofish,
                ctr_twofish: CtrTwofish,
                xts_twofish: XtsTwofish,
                xchacha20_poly1305: XChaCha20Poly1305,
                ctr_xchacha20: CtrXChaCha20,
            });
        )*
    };
    // Every mode over every cipher, the Twofish ones ignored in the
    // default run (scripts/twofish-matrix.sh runs them).
    (all: $($name:ident),* $(,)?) => {
        $(
            mode_tests!(@mod $name {
                gcm: Gcm,
                ctr: Ctr,
                xts: Xts,
                #[ignore = "Twofish matrix: scripts/twofish-matrix.sh"]
                gcm_twofish: GcmTwofish,
                #[ignore = "Twofish matrix: scripts/twofish-matrix.sh"]
                ctr_twofish: CtrTwofish,
                #[ignore = "Twofish matrix: scripts/twofish-matrix.sh"]
                xts_twofish: XtsTwofish,
                xchacha20_poly1305: XChaCha20Poly1305,
                ctr_xchacha20: CtrXChaCha20,
            });
        )*
    };
    // One module `$name` of tests `$test`, each calling `$name` with its
    // `Mode::$mode`.
    (@mod $name:ident { $($(#[$attr:meta])* $test:ident: $mode:ident,)* }) => {
        mod $name {
            $(
                $(#[$attr])*
                #[test]
                fn $test() {
                    super::$name($crate::common::Mode::$mode)
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        $(
            mode_tests!(@mod $name {
                gcm: Gcm,
                ctr: Ctr,
                xts: Xts,
                xchacha20_poly1305: XChaCha20Poly1305,
                ctr_xchacha20: CtrXChaCha20,
            });
        )*
    };
}

/// `speculation_tests!(nonce: a)` (any arm of `mode_tests!`) makes
/// `speculation_on::a::gcm`, ..., and `speculation_off::a::gcm`, ...: each
/// case of `mode_tests!` twice, every mount of the test given
/// `--speculation on`, then `off` (`with_speculation`), whatever the
/// machine's default (on with 4 or more cores or Twofish) would pick. The
/// case checks that its mounts ran so with `assert_speculation_ran`.
/// Groups with different arms go in one call, `;` between them
/// (`speculation_tests!(twofish_on: a; all: b, c)`); `twofish_on:` is
/// `twofish:` with speculation on (Twofish's default: run always) and
/// `all:` with it off (ignored, run in scripts/twofish-matrix.sh).
#[allow(unused_macros)]
macro_rules! speculation_tests {
    (@one $variant:ident $on:tt [$([$($arm:ident)?] $($name:ident),*);*]) => {
        mod $variant {
            $($(
                fn $name(mode: $crate::common::Mode) {
                    $crate::common::with_speculation($on, || super::$name(mode))
                }
            )*)*
            $(speculation_tests!(@arm $on [$($arm)?] $($name),*);)*
        }
    };
    (@arm $on:tt [] $($name:ident),*) => {
        mode_tests!($($name),*);
    };
    (@arm true [twofish_on] $($name:ident),*) => {
        mode_tests!(twofish: $($name),*);
    };
    (@arm false [twofish_on] $($name:ident),*) => {
        mode_tests!(all: $($name),*);
    };
    (@arm $on:tt [$arm:ident] $($name:ident),*) => {
        mode_tests!($arm: $($name),*);
    };
    ($($arm:ident: $($name:ident),+ $(,)?);+ $(;)?) => {
        speculation_tests!(@one speculation_on true [$([$arm] $($name),+);+]);
        speculation_tests!(@one speculation_off false [$([$arm] $($name),+);+]);
    };
    ($($name:ident),* $(,)?) => {
        speculation_tests!(@one speculation_on true [[] $($name),*]);
        speculation_tests!(@one speculation_off false [[] $($name),*]);
    };
}
