//! Tests of create / load / unlock / change_password and of hostile configs,
//! by topic; the shared sample config and helpers are here.

use crate::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::OnceLock;

const PW: &[u8] = b"correct horse";

/// An edit of the config JSON.
type Edit = Box<dyn Fn(&mut Value)>;

fn fast() -> KdfParams {
    KdfParams::MIN
}

/// One valid config (JSON text) and its master key, made once.
fn sample() -> &'static (String, MasterKey) {
    static S: OnceLock<(String, MasterKey)> = OnceLock::new();
    S.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        let (_, k) = Config::create(d.path(), PW, ContentMode::Gcm, 256, fast()).unwrap();
        (std::fs::read_to_string(config_path(d.path())).unwrap(), k)
    })
}

fn sample_value() -> Value {
    serde_json::from_str(&sample().0).unwrap()
}

fn edited(f: impl FnOnce(&mut Value)) -> std::result::Result<Config, ConfigError> {
    let mut v = sample_value();
    f(&mut v);
    Config::from_json(serde_json::to_string_pretty(&v).unwrap().as_bytes())
}

fn dir_entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

mod fido2;
mod fuzz;
mod hostile;
mod lifecycle;
mod slots;
mod tpm2;
mod versions;
