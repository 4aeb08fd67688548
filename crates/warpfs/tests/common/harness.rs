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
/// run wherever `gcm` and `ctr` run; `twofish:` adds the Twofish modes,
/// `nonce:` leaves out `xts` (no nonce entries).
#[allow(unused_macros)]
macro_rules! mode_tests {
    // Tests about nonce entries, tags or masks: gcm and ctr over AES and
    // XChaCha20 only.
    (nonce: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn gcm() {
                    super::$name($crate::common::Mode::Gcm)
                }
                #[test]
                fn ctr() {
                    super::$name($crate::common::Mode::Ctr)
                }
                #[test]
                fn xchacha20_poly1305() {
                    super::$name($crate::common::Mode::XChaCha20Poly1305)
                }
                #[test]
                fn ctr_xchacha20() {
                    super::$name($crate::common::Mode::CtrXChaCha20)
                }
            }
        )*
    };
    // Every mode over every cipher (AES, Twofish: FORMAT.md 11; XChaCha20
    // in gcm and ctr: FORMAT.md 15), none ignored.
    (twofish: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn gcm() {
                    super::$name($crate::common::Mode::Gcm)
                }
                #[test]
                fn ctr() {
                    super::$name($crate::common::Mode::Ctr)
                }
                #[test]
                fn xts() {
                    super::$name($crate::common::Mode::Xts)
                }
                #[test]
                fn gcm_twofish() {
                    super::$name($crate::common::Mode::GcmTwofish)
                }
                #[test]
                fn ctr_twofish() {
                    super::$name($crate::common::Mode::CtrTwofish)
                }
                #[test]
                fn xts_twofish() {
                    super::$name($crate::common::Mode::XtsTwofish)
                }
                #[test]
                fn xchacha20_poly1305() {
                    super::$name($crate::common::Mode::XChaCha20Poly1305)
                }
                #[test]
                fn ctr_xchacha20() {
                    super::$name($crate::common::Mode::CtrXChaCha20)
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn gcm() {
                    super::$name($crate::common::Mode::Gcm)
                }
                #[test]
                fn ctr() {
                    super::$name($crate::common::Mode::Ctr)
                }
                #[test]
                fn xts() {
                    super::$name($crate::common::Mode::Xts)
                }
                #[test]
                fn xchacha20_poly1305() {
                    super::$name($crate::common::Mode::XChaCha20Poly1305)
                }
                #[test]
                fn ctr_xchacha20() {
                    super::$name($crate::common::Mode::CtrXChaCha20)
                }
            }
        )*
    };
}

/// `speculation_tests!(nonce: a)` (any arm of `mode_tests!`) makes
/// `speculation_on::a::gcm`, ..., and `speculation_off::a::gcm`, ...: each
/// case of `mode_tests!` twice, every mount of the test given
/// `--speculation on`, then `off` (`with_speculation`), whatever the
/// machine's default (on with 4 or more cores or Twofish) would pick. The
/// case checks that its mounts ran so with `assert_speculation_ran`.
#[allow(unused_macros)]
macro_rules! speculation_tests {
    (nonce: $($name:ident),* $(,)?) => {
        speculation_tests!(@variants [nonce:] $($name),*);
    };
    (twofish: $($name:ident),* $(,)?) => {
        speculation_tests!(@variants [twofish:] $($name),*);
    };
    (@variants [$($arm:tt)*] $($name:ident),*) => {
        speculation_tests!(@one speculation_on true [$($arm)*] $($name),*);
        speculation_tests!(@one speculation_off false [$($arm)*] $($name),*);
    };
    (@one $variant:ident $on:literal [$($arm:tt)*] $($name:ident),*) => {
        mod $variant {
            $(
                fn $name(mode: $crate::common::Mode) {
                    $crate::common::with_speculation($on, || super::$name(mode))
                }
            )*
            mode_tests!($($arm)* $($name),*);
        }
    };
    ($($name:ident),* $(,)?) => {
        speculation_tests!(@variants [] $($name),*);
    };
}
