//! Hand-written declarations of the part of libfido2's C API (fido.h,
//! fido/types.h, fido/param.h, fido/err.h of libfido2 1.10 and later)
//! that warpfs uses: device listing and opening (with the custom I/O hook
//! `fido_dev_set_io_functions`), authenticator info, making a credential
//! and getting an assertion with the hmac-secret extension.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uchar, c_void, size_t};

/// `fido_dev_t`, opaque.
#[repr(C)]
pub struct fido_dev_t {
    _p: [u8; 0],
}
/// `fido_dev_info_t`, opaque.
#[repr(C)]
pub struct fido_dev_info_t {
    _p: [u8; 0],
}
/// `fido_cbor_info_t`, opaque.
#[repr(C)]
pub struct fido_cbor_info_t {
    _p: [u8; 0],
}
/// `fido_cred_t`, opaque.
#[repr(C)]
pub struct fido_cred_t {
    _p: [u8; 0],
}
/// `fido_assert_t`, opaque.
#[repr(C)]
pub struct fido_assert_t {
    _p: [u8; 0],
}

/// `fido_opt_t`.
pub type fido_opt_t = c_int;
pub const FIDO_OPT_FALSE: fido_opt_t = 1;
pub const FIDO_OPT_TRUE: fido_opt_t = 2;

/// `fido_dev_io_t`: open a device by path, close it, read one HID report
/// (of the report length, without a report number; `ms` is the timeout,
/// -1 none), write one (a report number byte, then the report).
#[repr(C)]
pub struct fido_dev_io_t {
    pub open: unsafe extern "C" fn(*const c_char) -> *mut c_void,
    pub close: unsafe extern "C" fn(*mut c_void),
    pub read: unsafe extern "C" fn(*mut c_void, *mut c_uchar, size_t, c_int) -> c_int,
    pub write: unsafe extern "C" fn(*mut c_void, *const c_uchar, size_t) -> c_int,
}

pub const FIDO_OK: c_int = 0x00;
pub const FIDO_ERR_UNSUPPORTED_EXTENSION: c_int = 0x16;
pub const FIDO_ERR_OPERATION_DENIED: c_int = 0x27;
pub const FIDO_ERR_KEEPALIVE_CANCEL: c_int = 0x2d;
pub const FIDO_ERR_NO_CREDENTIALS: c_int = 0x2e;
pub const FIDO_ERR_USER_ACTION_TIMEOUT: c_int = 0x2f;
pub const FIDO_ERR_NOT_ALLOWED: c_int = 0x30;
pub const FIDO_ERR_PIN_INVALID: c_int = 0x31;
pub const FIDO_ERR_PIN_BLOCKED: c_int = 0x32;
pub const FIDO_ERR_PIN_AUTH_BLOCKED: c_int = 0x34;
pub const FIDO_ERR_PIN_NOT_SET: c_int = 0x35;
pub const FIDO_ERR_PIN_REQUIRED: c_int = 0x36;
pub const FIDO_ERR_PIN_POLICY_VIOLATION: c_int = 0x37;
pub const FIDO_ERR_ACTION_TIMEOUT: c_int = 0x3a;
pub const FIDO_ERR_UV_BLOCKED: c_int = 0x3c;
pub const FIDO_ERR_UV_INVALID: c_int = 0x3f;
pub const FIDO_ERR_RX: c_int = -2;

/// `FIDO_DISABLE_U2F_FALLBACK` of `fido_init`.
pub const FIDO_DISABLE_U2F_FALLBACK: c_int = 0x02;
/// `COSE_ES256`.
pub const COSE_ES256: c_int = -7;
/// `FIDO_EXT_HMAC_SECRET`.
pub const FIDO_EXT_HMAC_SECRET: c_int = 0x01;
/// `CTAP_AUTHDATA_USER_PRESENT`.
pub const CTAP_AUTHDATA_USER_PRESENT: u8 = 0x01;
/// `CTAP_AUTHDATA_USER_VERIFIED`.
pub const CTAP_AUTHDATA_USER_VERIFIED: u8 = 0x04;

/// `fido_dev_transport_t`: whole CTAPHID messages (command and payload)
/// to and from the device, in place of HID reports.
#[repr(C)]
pub struct fido_dev_transport_t {
    pub rx: unsafe extern "C" fn(*mut fido_dev_t, u8, *mut c_uchar, size_t, c_int) -> c_int,
    pub tx: unsafe extern "C" fn(*mut fido_dev_t, u8, *const c_uchar, size_t) -> c_int,
}

#[link(name = "fido2")]
extern "C" {
    pub fn fido_dev_set_transport_functions(dev: *mut fido_dev_t, t: *const fido_dev_transport_t) -> c_int;
    pub fn fido_dev_io_handle(dev: *const fido_dev_t) -> *mut c_void;
    pub fn fido_init(flags: c_int);
    pub fn fido_strerr(code: c_int) -> *const c_char;

    pub fn fido_dev_info_new(n: size_t) -> *mut fido_dev_info_t;
    pub fn fido_dev_info_free(list: *mut *mut fido_dev_info_t, n: size_t);
    pub fn fido_dev_info_manifest(list: *mut fido_dev_info_t, ilen: size_t, olen: *mut size_t) -> c_int;
    pub fn fido_dev_info_ptr(list: *const fido_dev_info_t, i: size_t) -> *const fido_dev_info_t;
    pub fn fido_dev_info_path(di: *const fido_dev_info_t) -> *const c_char;
    pub fn fido_dev_info_manufacturer_string(di: *const fido_dev_info_t) -> *const c_char;
    pub fn fido_dev_info_product_string(di: *const fido_dev_info_t) -> *const c_char;

    pub fn fido_dev_new() -> *mut fido_dev_t;
    pub fn fido_dev_free(dev: *mut *mut fido_dev_t);
    pub fn fido_dev_set_io_functions(dev: *mut fido_dev_t, io: *const fido_dev_io_t) -> c_int;
    pub fn fido_dev_set_timeout(dev: *mut fido_dev_t, ms: c_int) -> c_int;
    pub fn fido_dev_open(dev: *mut fido_dev_t, path: *const c_char) -> c_int;
    pub fn fido_dev_close(dev: *mut fido_dev_t) -> c_int;
    pub fn fido_dev_is_fido2(dev: *const fido_dev_t) -> bool;
    pub fn fido_dev_get_cbor_info(dev: *mut fido_dev_t, ci: *mut fido_cbor_info_t) -> c_int;
    pub fn fido_dev_make_cred(dev: *mut fido_dev_t, cred: *mut fido_cred_t, pin: *const c_char) -> c_int;
    pub fn fido_dev_get_assert(dev: *mut fido_dev_t, assert: *mut fido_assert_t, pin: *const c_char) -> c_int;

    pub fn fido_cbor_info_new() -> *mut fido_cbor_info_t;
    pub fn fido_cbor_info_free(ci: *mut *mut fido_cbor_info_t);
    pub fn fido_cbor_info_extensions_ptr(ci: *const fido_cbor_info_t) -> *mut *mut c_char;
    pub fn fido_cbor_info_extensions_len(ci: *const fido_cbor_info_t) -> size_t;
    pub fn fido_cbor_info_options_name_ptr(ci: *const fido_cbor_info_t) -> *mut *mut c_char;
    pub fn fido_cbor_info_options_value_ptr(ci: *const fido_cbor_info_t) -> *const bool;
    pub fn fido_cbor_info_options_len(ci: *const fido_cbor_info_t) -> size_t;
    pub fn fido_cbor_info_aaguid_ptr(ci: *const fido_cbor_info_t) -> *const c_uchar;
    pub fn fido_cbor_info_aaguid_len(ci: *const fido_cbor_info_t) -> size_t;

    pub fn fido_cred_new() -> *mut fido_cred_t;
    pub fn fido_cred_free(cred: *mut *mut fido_cred_t);
    pub fn fido_cred_set_type(cred: *mut fido_cred_t, cose_alg: c_int) -> c_int;
    pub fn fido_cred_set_clientdata_hash(cred: *mut fido_cred_t, hash: *const c_uchar, len: size_t) -> c_int;
    pub fn fido_cred_set_rp(cred: *mut fido_cred_t, id: *const c_char, name: *const c_char) -> c_int;
    pub fn fido_cred_set_user(
        cred: *mut fido_cred_t,
        user_id: *const c_uchar,
        user_id_len: size_t,
        name: *const c_char,
        display_name: *const c_char,
        icon: *const c_char,
    ) -> c_int;
    pub fn fido_cred_set_extensions(cred: *mut fido_cred_t, ext: c_int) -> c_int;
    pub fn fido_cred_set_rk(cred: *mut fido_cred_t, rk: fido_opt_t) -> c_int;
    pub fn fido_cred_id_ptr(cred: *const fido_cred_t) -> *const c_uchar;
    pub fn fido_cred_id_len(cred: *const fido_cred_t) -> size_t;

    pub fn fido_assert_new() -> *mut fido_assert_t;
    pub fn fido_assert_free(assert: *mut *mut fido_assert_t);
    pub fn fido_assert_set_rp(assert: *mut fido_assert_t, id: *const c_char) -> c_int;
    pub fn fido_assert_set_clientdata_hash(assert: *mut fido_assert_t, hash: *const c_uchar, len: size_t) -> c_int;
    pub fn fido_assert_allow_cred(assert: *mut fido_assert_t, id: *const c_uchar, len: size_t) -> c_int;
    pub fn fido_assert_set_extensions(assert: *mut fido_assert_t, ext: c_int) -> c_int;
    pub fn fido_assert_set_hmac_salt(assert: *mut fido_assert_t, salt: *const c_uchar, len: size_t) -> c_int;
    pub fn fido_assert_set_up(assert: *mut fido_assert_t, up: fido_opt_t) -> c_int;
    pub fn fido_assert_count(assert: *const fido_assert_t) -> size_t;
    pub fn fido_assert_flags(assert: *const fido_assert_t, i: size_t) -> u8;
    pub fn fido_assert_hmac_secret_ptr(assert: *const fido_assert_t, i: size_t) -> *const c_uchar;
    pub fn fido_assert_hmac_secret_len(assert: *const fido_assert_t, i: size_t) -> size_t;
}
