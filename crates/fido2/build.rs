//! Links libfido2 (Debian: libfido2-dev), found by pkg-config when it is
//! there; the bindings themselves are written by hand (src/sys.rs).

use std::process::Command;

/// The oldest libfido2 whose API src/sys.rs declares.
const MIN_VERSION: &str = "1.10.0";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let probe = Command::new("pkg-config")
        .args(["--atleast-version", MIN_VERSION, "--libs", "libfido2"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                }
            }
        }
        Ok(_) => panic!(
            "libfido2 {MIN_VERSION} or newer not found by pkg-config: install libfido2-dev \
             (or build warpfs without its fido2 feature: --no-default-features)"
        ),
        Err(_) => println!("cargo:warning=pkg-config not found: linking -lfido2 from the default paths"),
    }
    println!("cargo:rustc-link-lib=dylib=fido2");
}
