//! warpfs's FIDO2 client: security keys through libfido2 (hand-written
//! bindings in [`sys`]), for keyslots opened by the `hmac-secret`
//! extension (FORMAT.md 2.6). A slot's credential is made once
//! ([`Device::make_credential`], non-resident: its ID is kept in the
//! slot); each unlock asks the key that holds it ([`Device::has_credential`],
//! a silent check without user presence) for HMAC-SHA256 of the slot's salt
//! under the credential's secret ([`Device::hmac_secret`], which needs a
//! touch, and the key's PIN when the slot was made with it). The output
//! and the PIN live on locked pages, zeroed on drop; libfido2 zeroes its
//! own copies when it frees them. Test authenticators on Unix sockets
//! stand in for USB keys only when [`testdev::TEST_ENV`] names them.

mod sys;
pub mod testdev;

use std::ffi::CStr;
use std::fmt;
use std::time::{Duration, Instant};
use warpfs_crypto::{Locked, LockedBytes};

/// How long libfido2 waits for one operation, a touch included (a key
/// usually gives up first, after about 30 s, and says so).
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The most devices listed.
const MAX_DEVICES: usize = 64;

/// Why a FIDO2 operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The device at this path could not be opened (gone, not a FIDO
    /// device, no permission).
    Open(String),
    /// The device speaks only U2F (CTAP1), which has no hmac-secret.
    NotFido2,
    /// The key has no such credential: another key made it (or the key
    /// was reset).
    NoCredential,
    /// The key wants its PIN and none was given.
    PinRequired,
    /// The PIN is wrong.
    PinInvalid,
    /// The PIN is blocked: too many wrong PINs (`true`: until the key is
    /// unplugged and plugged in again).
    PinBlocked(bool),
    /// Nobody touched the key in time.
    NotTouched,
    /// The key refused or cancelled the request.
    Denied,
    /// The key has no hmac-secret extension, or gave no output.
    NoHmacSecret,
    /// The key answered what cannot be (a missing flag, a short output).
    Protocol(String),
    /// Any other libfido2 error: the operation, its code and text.
    Other(&'static str, i32, String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open(p) => write!(f, "cannot open the FIDO2 device {p}"),
            Error::NotFido2 => f.write_str("the security key speaks only U2F, which has no hmac-secret"),
            Error::NoCredential => f.write_str("the security key does not hold this credential"),
            Error::PinRequired => f.write_str("the security key needs its PIN"),
            Error::PinInvalid => f.write_str("wrong PIN"),
            Error::PinBlocked(false) => f.write_str("the security key's PIN is blocked (too many wrong PINs)"),
            Error::PinBlocked(true) => f.write_str(
                "the security key refuses PINs until it is unplugged and plugged in again (too many wrong PINs)",
            ),
            Error::NotTouched => f.write_str("the security key was not touched in time"),
            Error::Denied => f.write_str("the security key refused or cancelled the request"),
            Error::NoHmacSecret => f.write_str("the security key does not support the hmac-secret extension"),
            Error::Protocol(m) => write!(f, "the security key's answer is not valid: {m}"),
            Error::Other(what, code, m) => write!(f, "{what}: {m} (libfido2 error {code})"),
        }
    }
}

impl std::error::Error for Error {}

/// The text libfido2 gives for `code`.
fn strerr(code: i32) -> String {
    // SAFETY: fido_strerr returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::fido_strerr(code)) }
        .to_string_lossy()
        .into_owned()
}

/// The error of libfido2 code `code` from operation `what`; `started`:
/// when an operation that waits for a touch began.
fn error(what: &'static str, code: i32, started: Option<Instant>) -> Error {
    match code {
        sys::FIDO_ERR_NO_CREDENTIALS => Error::NoCredential,
        sys::FIDO_ERR_PIN_REQUIRED | sys::FIDO_ERR_PIN_NOT_SET => Error::PinRequired,
        sys::FIDO_ERR_PIN_INVALID | sys::FIDO_ERR_PIN_POLICY_VIOLATION | sys::FIDO_ERR_UV_INVALID => Error::PinInvalid,
        sys::FIDO_ERR_PIN_BLOCKED | sys::FIDO_ERR_UV_BLOCKED => Error::PinBlocked(false),
        sys::FIDO_ERR_PIN_AUTH_BLOCKED => Error::PinBlocked(true),
        sys::FIDO_ERR_USER_ACTION_TIMEOUT | sys::FIDO_ERR_ACTION_TIMEOUT => Error::NotTouched,
        sys::FIDO_ERR_OPERATION_DENIED | sys::FIDO_ERR_KEEPALIVE_CANCEL | sys::FIDO_ERR_NOT_ALLOWED => Error::Denied,
        sys::FIDO_ERR_UNSUPPORTED_EXTENSION => Error::NoHmacSecret,
        // libfido2 stopped waiting (TIMEOUT) before the key gave up.
        sys::FIDO_ERR_RX if started.is_some_and(|t| t.elapsed() + Duration::from_secs(1) >= TIMEOUT) => {
            Error::NotTouched
        }
        c => Error::Other(what, c, strerr(c)),
    }
}

fn check(what: &'static str, code: i32) -> Result<(), Error> {
    if code == sys::FIDO_OK {
        Ok(())
    } else {
        Err(error(what, code, None))
    }
}

fn init() {
    static INIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: fido_init only sets libfido2's global flags, once.
    INIT.call_once(|| unsafe { sys::fido_init(sys::FIDO_DISABLE_U2F_FALLBACK) });
}

/// A device found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// What opens it (a hidraw path, or a test authenticator's socket).
    pub path: String,
    /// Manufacturer and product as the device reports them (USB).
    pub product: Option<String>,
}

/// The FIDO2 devices present: the test authenticators [`testdev::TEST_ENV`]
/// names when it is honoured, else libfido2's list of HID devices.
pub fn devices() -> Result<Vec<DeviceInfo>, Error> {
    init();
    if let Some(socks) = testdev::sockets() {
        return Ok(socks
            .into_iter()
            .filter_map(|p| p.to_str().map(str::to_owned))
            .map(|path| DeviceInfo { path, product: None })
            .collect());
    }
    // SAFETY: a list of MAX_DEVICES entries, filled by the manifest and
    // read within the count it gives, then freed once.
    unsafe {
        let mut list = sys::fido_dev_info_new(MAX_DEVICES);
        if list.is_null() {
            return Err(Error::Other("listing FIDO2 devices", -9, strerr(-9)));
        }
        let mut n = 0;
        let r = sys::fido_dev_info_manifest(list, MAX_DEVICES, &mut n);
        let mut out = Vec::new();
        if r == sys::FIDO_OK {
            for i in 0..n.min(MAX_DEVICES) {
                let di = sys::fido_dev_info_ptr(list, i);
                let text = |p: *const libc::c_char| {
                    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().trim().to_owned())
                };
                let Some(path) = text(sys::fido_dev_info_path(di)) else {
                    continue;
                };
                let product = [
                    text(sys::fido_dev_info_manufacturer_string(di)),
                    text(sys::fido_dev_info_product_string(di)),
                ]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
                out.push(DeviceInfo {
                    path,
                    product: (!product.is_empty()).then_some(product),
                });
            }
        }
        sys::fido_dev_info_free(&mut list, MAX_DEVICES);
        check("listing FIDO2 devices", r)?;
        Ok(out)
    }
}

/// A security key's PIN: on locked pages with a NUL after it (as libfido2
/// takes it), zeroed on drop.
pub struct Pin(LockedBytes);

impl Pin {
    /// The PIN `bytes` (refused when empty or holding a NUL byte).
    pub fn new(bytes: &[u8]) -> Result<Pin, Error> {
        if bytes.is_empty() || bytes.contains(&0) {
            return Err(Error::PinInvalid);
        }
        let mut b = LockedBytes::zeroed(bytes.len() + 1);
        b[..bytes.len()].copy_from_slice(bytes);
        Ok(Pin(b))
    }

    fn as_ptr(&self) -> *const libc::c_char {
        self.0.as_ptr().cast()
    }
}

impl fmt::Debug for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pin(..)")
    }
}

/// What a key says about itself (authenticatorGetInfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// Whether it implements hmac-secret.
    pub hmac_secret: bool,
    /// Whether it has a PIN set (`None`: it cannot have one).
    pub pin_set: Option<bool>,
    /// Its model's AAGUID.
    pub aaguid: Vec<u8>,
}

/// An hmac-secret output (32 bytes) on locked pages, zeroed on drop.
pub type Output = Locked<[u8; 32]>;

mod device;
pub use device::Device;
