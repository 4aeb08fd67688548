//! One open FIDO2 device: its info, making a credential with the
//! hmac-secret extension, checking that it holds a credential, and getting
//! the hmac-secret output for a salt (libfido2's make-credential and
//! get-assertion, which also run the PIN protocol's key agreement the
//! extension needs).

use crate::{check, error, init, strerr, sys, testdev, Error, KeyInfo, Output, Pin, TIMEOUT};
use std::ffi::{CStr, CString};
use std::ptr::NonNull;
use std::time::Instant;
use warpfs_crypto::Locked;

/// An open FIDO2 device, closed on drop.
pub struct Device {
    dev: NonNull<sys::fido_dev_t>,
    path: String,
}

/// A libfido2 object freed on drop.
struct Owned<T> {
    ptr: *mut T,
    free: unsafe extern "C" fn(*mut *mut T),
}

impl<T> Owned<T> {
    fn new(ptr: *mut T, free: unsafe extern "C" fn(*mut *mut T)) -> Result<Self, Error> {
        if ptr.is_null() {
            return Err(Error::Other("libfido2", -9, strerr(-9)));
        }
        Ok(Owned { ptr, free })
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from the matching *_new and is freed once.
        unsafe { (self.free)(&mut self.ptr) }
    }
}

fn cstring(what: &str, s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Protocol(format!("{what} holds a NUL byte")))
}

impl Device {
    /// Open the device at `path` (a test authenticator's socket when
    /// [`testdev::TEST_ENV`] names it).
    pub fn open(path: &str) -> Result<Device, Error> {
        init();
        let cpath = CString::new(path).map_err(|_| Error::Open(path.to_owned()))?;
        // SAFETY: a fresh device handle, freed in Drop (or here on failure).
        unsafe {
            let mut raw = sys::fido_dev_new();
            let Some(dev) = NonNull::new(raw) else {
                return Err(Error::Other("libfido2", -9, strerr(-9)));
            };
            let mut r = sys::FIDO_OK;
            if testdev::is_test_socket(path) {
                r = sys::fido_dev_set_io_functions(raw, &testdev::IO);
                if r == sys::FIDO_OK {
                    r = sys::fido_dev_set_transport_functions(raw, &testdev::TRANSPORT);
                }
            }
            if r == sys::FIDO_OK {
                r = sys::fido_dev_set_timeout(raw, TIMEOUT.as_millis() as i32);
            }
            if r == sys::FIDO_OK {
                r = sys::fido_dev_open(raw, cpath.as_ptr());
            }
            if r != sys::FIDO_OK {
                sys::fido_dev_free(&mut raw);
                return Err(Error::Open(path.to_owned()));
            }
            let d = Device {
                dev,
                path: path.to_owned(),
            };
            if !sys::fido_dev_is_fido2(raw) {
                return Err(Error::NotFido2);
            }
            Ok(d)
        }
    }

    /// The path it was opened at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the key says about itself.
    pub fn info(&self) -> Result<KeyInfo, Error> {
        // SAFETY: a fresh info object, filled by the device and read within
        // the lengths libfido2 gives, freed on drop.
        unsafe {
            let ci = Owned::new(sys::fido_cbor_info_new(), sys::fido_cbor_info_free)?;
            check(
                "reading the security key's info",
                sys::fido_dev_get_cbor_info(self.dev.as_ptr(), ci.ptr),
            )?;
            let names = |p: *mut *mut libc::c_char, n: usize| -> Vec<String> {
                if p.is_null() {
                    return Vec::new();
                }
                std::slice::from_raw_parts(p, n)
                    .iter()
                    .filter(|s| !s.is_null())
                    .map(|&s| CStr::from_ptr(s).to_string_lossy().into_owned())
                    .collect()
            };
            let ext = names(
                sys::fido_cbor_info_extensions_ptr(ci.ptr),
                sys::fido_cbor_info_extensions_len(ci.ptr),
            );
            let n = sys::fido_cbor_info_options_len(ci.ptr);
            let opts = names(sys::fido_cbor_info_options_name_ptr(ci.ptr), n);
            let vals = sys::fido_cbor_info_options_value_ptr(ci.ptr);
            let pin_set = match opts.iter().position(|o| o == "clientPin") {
                Some(i) if !vals.is_null() && i < n => Some(*vals.add(i)),
                _ => None,
            };
            let (ap, al) = (
                sys::fido_cbor_info_aaguid_ptr(ci.ptr),
                sys::fido_cbor_info_aaguid_len(ci.ptr),
            );
            let aaguid = if ap.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(ap, al).to_vec()
            };
            Ok(KeyInfo {
                hmac_secret: ext.iter().any(|e| e == "hmac-secret"),
                pin_set,
                aaguid,
            })
        }
    }

    /// Make a non-resident ES256 credential with the hmac-secret extension
    /// for relying party `rp_id` and user `user_id` (`user_name` shown by
    /// keys that show one); needs a touch, and the PIN when one is set.
    /// Returns the credential ID.
    pub fn make_credential(
        &self,
        rp_id: &str,
        user_id: &[u8],
        user_name: &str,
        pin: Option<&Pin>,
    ) -> Result<Vec<u8>, Error> {
        let rp = cstring("the relying party ID", rp_id)?;
        let name = cstring("the user name", user_name)?;
        let cdh: [u8; 32] = warpfs_crypto::rand::array();
        let what = "making the credential";
        // SAFETY: every pointer handed over is live for the call; libfido2
        // copies what it keeps; the credential ID is read within its length.
        unsafe {
            let cred = Owned::new(sys::fido_cred_new(), sys::fido_cred_free)?;
            check(what, sys::fido_cred_set_type(cred.ptr, sys::COSE_ES256))?;
            check(
                what,
                sys::fido_cred_set_clientdata_hash(cred.ptr, cdh.as_ptr(), cdh.len()),
            )?;
            check(what, sys::fido_cred_set_rp(cred.ptr, rp.as_ptr(), rp.as_ptr()))?;
            check(
                what,
                sys::fido_cred_set_user(
                    cred.ptr,
                    user_id.as_ptr(),
                    user_id.len(),
                    name.as_ptr(),
                    name.as_ptr(),
                    std::ptr::null(),
                ),
            )?;
            check(what, sys::fido_cred_set_extensions(cred.ptr, sys::FIDO_EXT_HMAC_SECRET))?;
            check(what, sys::fido_cred_set_rk(cred.ptr, sys::FIDO_OPT_FALSE))?;
            let started = Instant::now();
            let r = sys::fido_dev_make_cred(self.dev.as_ptr(), cred.ptr, pin.map_or(std::ptr::null(), Pin::as_ptr));
            if r != sys::FIDO_OK {
                return Err(error(what, r, Some(started)));
            }
            let (p, n) = (sys::fido_cred_id_ptr(cred.ptr), sys::fido_cred_id_len(cred.ptr));
            if p.is_null() || n == 0 {
                return Err(Error::Protocol("no credential ID".into()));
            }
            Ok(std::slice::from_raw_parts(p, n).to_vec())
        }
    }

    /// An assertion request for `credential` of `rp_id`, user presence
    /// `up`, with the hmac-secret extension for `salt` when given.
    fn assertion(
        &self,
        rp_id: &str,
        credential: &[u8],
        up: bool,
        salt: Option<&[u8; 32]>,
    ) -> Result<Owned<sys::fido_assert_t>, Error> {
        let rp = cstring("the relying party ID", rp_id)?;
        let cdh: [u8; 32] = warpfs_crypto::rand::array();
        let what = "preparing the assertion";
        // SAFETY: live pointers for each call; libfido2 copies them.
        unsafe {
            let a = Owned::new(sys::fido_assert_new(), sys::fido_assert_free)?;
            check(what, sys::fido_assert_set_rp(a.ptr, rp.as_ptr()))?;
            check(
                what,
                sys::fido_assert_set_clientdata_hash(a.ptr, cdh.as_ptr(), cdh.len()),
            )?;
            check(
                what,
                sys::fido_assert_allow_cred(a.ptr, credential.as_ptr(), credential.len()),
            )?;
            let up = if up { sys::FIDO_OPT_TRUE } else { sys::FIDO_OPT_FALSE };
            check(what, sys::fido_assert_set_up(a.ptr, up))?;
            if let Some(salt) = salt {
                check(what, sys::fido_assert_set_extensions(a.ptr, sys::FIDO_EXT_HMAC_SECRET))?;
                check(what, sys::fido_assert_set_hmac_salt(a.ptr, salt.as_ptr(), salt.len()))?;
            }
            Ok(a)
        }
    }

    /// Whether the key holds `credential` of `rp_id` (asked without user
    /// presence: no touch, nothing derived).
    pub fn has_credential(&self, rp_id: &str, credential: &[u8]) -> Result<bool, Error> {
        let a = self.assertion(rp_id, credential, false, None)?;
        // SAFETY: a prepared assertion, no PIN.
        match unsafe { sys::fido_dev_get_assert(self.dev.as_ptr(), a.ptr, std::ptr::null()) } {
            sys::FIDO_OK => Ok(true),
            sys::FIDO_ERR_NO_CREDENTIALS => Ok(false),
            c => Err(error("looking for the credential", c, None)),
        }
    }

    /// The hmac-secret output of `credential` (of `rp_id`) for `salt`:
    /// needs a touch, and with `pin` it is the output under user
    /// verification (another value than without).
    pub fn hmac_secret(
        &self,
        rp_id: &str,
        credential: &[u8],
        salt: &[u8; 32],
        pin: Option<&Pin>,
    ) -> Result<Output, Error> {
        let a = self.assertion(rp_id, credential, true, Some(salt))?;
        let started = Instant::now();
        // SAFETY: a prepared assertion; the output is read within the
        // count and length libfido2 gives, before `a` is freed.
        unsafe {
            let r = sys::fido_dev_get_assert(self.dev.as_ptr(), a.ptr, pin.map_or(std::ptr::null(), Pin::as_ptr));
            if r != sys::FIDO_OK {
                return Err(error("getting the hmac-secret", r, Some(started)));
            }
            if sys::fido_assert_count(a.ptr) != 1 {
                return Err(Error::Protocol("not one assertion".into()));
            }
            let flags = sys::fido_assert_flags(a.ptr, 0);
            if flags & sys::CTAP_AUTHDATA_USER_PRESENT == 0 {
                return Err(Error::Protocol("user presence is not confirmed".into()));
            }
            if pin.is_some() && flags & sys::CTAP_AUTHDATA_USER_VERIFIED == 0 {
                return Err(Error::Protocol("the PIN is not confirmed".into()));
            }
            let (p, n) = (
                sys::fido_assert_hmac_secret_ptr(a.ptr, 0),
                sys::fido_assert_hmac_secret_len(a.ptr, 0),
            );
            if p.is_null() || n == 0 {
                return Err(Error::NoHmacSecret);
            }
            if n != 32 {
                return Err(Error::Protocol(format!("an hmac-secret output of {n} bytes")));
            }
            let mut out: Output = Locked::new([0u8; 32]);
            std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), 32);
            Ok(out)
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let mut raw = self.dev.as_ptr();
        // SAFETY: our open device, closed and freed once.
        unsafe {
            sys::fido_dev_close(raw);
            sys::fido_dev_free(&mut raw);
        }
    }
}
