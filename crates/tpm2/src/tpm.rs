//! The ESAPI conversation: connect on a TCTI, make the storage root key
//! (TCG default ECC template, owner hierarchy), open a session salted by
//! it with parameter encryption, and create, load and unseal a sealed data
//! object under a PolicyPCR (or, without PCRs, an empty auth value). TSS
//! errors become [`Failure`]s a user can act on.

use crate::{Error, Failure, Result, Sealed, Secret, Tcti, MAX_BLOB_LEN, SECRET_LEN};
use sha2::{Digest as _, Sha256};
use tss_esapi::attributes::{ObjectAttributesBuilder, SessionAttributesBuilder};
use tss_esapi::constants::SessionType;
use tss_esapi::handles::{KeyHandle, PcrHandle};
use tss_esapi::interface_types::algorithm::{HashingAlgorithm, PublicAlgorithm};
use tss_esapi::interface_types::ecc::EccCurve;
use tss_esapi::interface_types::resource_handles::Hierarchy;
use tss_esapi::interface_types::session_handles::{AuthSession, PolicySession};
use tss_esapi::structures::{
    Digest, DigestValues, EccPoint, EccScheme, KeyDerivationFunctionScheme, KeyedHashScheme, PcrSelectionList,
    PcrSelectionListBuilder, PcrSlot, Private, Public, PublicBuilder, PublicEccParametersBuilder,
    PublicKeyedHashParameters, SensitiveData, SymmetricDefinition, SymmetricDefinitionObject,
};
use tss_esapi::traits::{Marshall, UnMarshall};
use tss_esapi::Context;

/// The raw TSS2 return code of an error (`None` for the wrapper's own).
fn raw_rc(e: &tss_esapi::Error) -> Option<u32> {
    let tss_esapi::Error::Tss2Error(rc) = e else {
        return None;
    };
    // Both formats print as "Response code value: 0x…".
    let s = match rc {
        tss_esapi::constants::response_code::Tss2ResponseCode::Success => return Some(0),
        tss_esapi::constants::response_code::Tss2ResponseCode::FormatZero(r) => r.to_string(),
        tss_esapi::constants::response_code::Tss2ResponseCode::FormatOne(r) => r.to_string(),
    };
    let hex = s.rsplit("0x").next()?;
    u32::from_str_radix(hex.trim(), 16).ok()
}

/// TSS2 layers (bits 16–23 of a return code).
const LAYER_TPM: u32 = 0;
const LAYER_TCTI: u32 = 10;
const LAYER_RESMGR: u32 = 11;
const LAYER_RESMGR_TPM: u32 = 12;
/// TPM format-one error numbers (bits 0–5 with bit 7 set).
const RC_POLICY_FAIL: u32 = 0x1D;
const RC_INTEGRITY: u32 = 0x1F;
const RC_KEY: u32 = 0x1C;
const RC_VALUE: u32 = 0x04;
const RC_SIZE: u32 = 0x15;
/// TPM format-zero errors (version 1 bit set).
const RC_PCR_CHANGED: u32 = 0x128;
const RC_PCR: u32 = 0x127;

/// Classify an error of `what` (a step of the conversation).
fn classify(what: &str, e: tss_esapi::Error, loading: bool) -> Error {
    let msg = format!("TPM2: {what}: {e}");
    let Some(rc) = raw_rc(&e) else {
        return Error::new(Failure::Other, msg);
    };
    let layer = (rc >> 16) & 0xff;
    let code = rc & 0xffff;
    let format_one = code & 0x80 != 0;
    let failure = match layer {
        LAYER_TCTI => Failure::Unreachable,
        LAYER_TPM | LAYER_RESMGR_TPM | LAYER_RESMGR => {
            let n = code & 0x3f;
            if format_one && n == RC_POLICY_FAIL || !format_one && matches!(code, RC_PCR_CHANGED | RC_PCR) {
                Failure::PolicyRefused
            } else if loading && format_one && matches!(n, RC_INTEGRITY | RC_KEY | RC_VALUE | RC_SIZE) {
                Failure::NotLoadable
            } else {
                Failure::Other
            }
        }
        _ => Failure::Other,
    };
    Error::new(failure, format!("{msg} (response code {rc:#x})"))
}

/// A connection with the storage root key made and a salted session on it.
struct Conn {
    ctx: Context,
    srk: KeyHandle,
}

impl Conn {
    fn open(tcti: &Tcti) -> Result<Self> {
        let mut ctx = Context::new(tcti.conf()?)
            .map_err(|e| Error::new(Failure::Unreachable, format!("no TPM reachable on TCTI {tcti}: {e}")))?;
        let srk = ctx
            .execute_with_nullauth_session(|c| {
                c.create_primary(Hierarchy::Owner, srk_template()?, None, None, None, None)
            })
            .map_err(|e| match classify("making the storage root key", e, false) {
                // The first command: a TCTI that opened but answers nothing
                // (a closed simulator, a device that is no TPM).
                e if e.failure == Failure::Other && raw_rc_is_transport(&e) => Error::new(
                    Failure::Unreachable,
                    format!("no TPM answers on TCTI {tcti}: {}", e.msg),
                ),
                e => e,
            })?
            .key_handle;
        Ok(Conn { ctx, srk })
    }

    /// A session salted by the SRK, encrypting command and response
    /// parameters with AES-128-CFB.
    fn session(&mut self, kind: SessionType) -> Result<AuthSession> {
        let s = self
            .ctx
            .start_auth_session(
                Some(self.srk),
                None,
                None,
                kind,
                SymmetricDefinition::AES_128_CFB,
                HashingAlgorithm::Sha256,
            )
            .map_err(|e| classify("starting a session", e, false))?
            .ok_or_else(|| Error::new(Failure::Other, "TPM2: no session handle"))?;
        let (attrs, mask) = SessionAttributesBuilder::new()
            .with_decrypt(true)
            .with_encrypt(true)
            .with_continue_session(true)
            .build();
        self.ctx
            .tr_sess_set_attributes(s, attrs, mask)
            .map_err(|e| classify("setting session attributes", e, false))?;
        Ok(s)
    }
}

fn raw_rc_is_transport(e: &Error) -> bool {
    e.msg.contains("response code 0xa")
}

/// The storage root key: the TCG default ECC template (TCG TPM v2.0
/// Provisioning Guidance, SRK): NIST P-256, SHA-256 name, AES-128-CFB,
/// restricted decryption, fixedTPM, fixedParent, sensitiveDataOrigin,
/// userWithAuth, noDA, empty unique. The same template gives the same key
/// from the same seed at every use.
fn srk_template() -> tss_esapi::Result<Public> {
    let attrs = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_sensitive_data_origin(true)
        .with_user_with_auth(true)
        .with_no_da(true)
        .with_restricted(true)
        .with_decrypt(true)
        .build()?;
    let params = PublicEccParametersBuilder::new_restricted_decryption_key(
        SymmetricDefinitionObject::AES_128_CFB,
        EccCurve::NistP256,
    )
    .with_ecc_scheme(EccScheme::Null)
    .with_key_derivation_function_scheme(KeyDerivationFunctionScheme::Null)
    .build()?;
    PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::Ecc)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attrs)
        .with_ecc_parameters(params)
        .with_ecc_unique_identifier(EccPoint::default())
        .build()
}

/// The sealed data object's template: keyed hash, scheme NULL, SHA-256
/// name, fixedTPM, fixedParent, noDA; authorised by `policy` (PolicyPCR)
/// or, without PCRs, by its empty auth value (userWithAuth).
fn sealed_template(policy: Option<Digest>) -> tss_esapi::Result<Public> {
    let attrs = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_no_da(true)
        .with_user_with_auth(policy.is_none())
        .build()?;
    let mut b = PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::KeyedHash)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attrs)
        .with_keyed_hash_parameters(PublicKeyedHashParameters::new(KeyedHashScheme::Null))
        .with_keyed_hash_unique_identifier(Digest::default());
    if let Some(p) = policy {
        b = b.with_auth_policy(p);
    }
    b.build()
}

fn slot(pcr: u32) -> Result<PcrSlot> {
    PcrSlot::try_from(1u32 << pcr).map_err(|e| Error::new(Failure::Other, format!("PCR {pcr}: {e}")))
}

fn selection(pcrs: &[u32]) -> Result<PcrSelectionList> {
    let slots = pcrs.iter().map(|&p| slot(p)).collect::<Result<Vec<_>>>()?;
    PcrSelectionListBuilder::new()
        .with_selection(HashingAlgorithm::Sha256, &slots)
        .build()
        .map_err(|e| Error::new(Failure::Other, format!("PCR selection: {e}")))
}

/// SHA-256 of the current values of `pcrs` (ascending), as PolicyPCR
/// hashes them.
fn pcr_digest(ctx: &mut Context, pcrs: &[u32]) -> Result<Digest> {
    let mut h = Sha256::new();
    for &p in pcrs {
        let (_, _, values) = ctx
            .pcr_read(selection(&[p])?)
            .map_err(|e| classify(&format!("reading PCR {p}"), e, false))?;
        let v = values.value().first().ok_or_else(|| {
            Error::new(
                Failure::Other,
                format!("TPM2: PCR {p} of the sha256 bank is not allocated"),
            )
        })?;
        h.update(v.value());
    }
    Digest::try_from(h.finalize().to_vec()).map_err(|e| Error::new(Failure::Other, e.to_string()))
}

/// The policy digest of PolicyPCR over `pcrs` at their current values.
fn policy_digest(conn: &mut Conn, pcrs: &[u32]) -> Result<Digest> {
    let values = pcr_digest(&mut conn.ctx, pcrs)?;
    let trial = conn
        .ctx
        .start_auth_session(
            None,
            None,
            None,
            SessionType::Trial,
            SymmetricDefinition::AES_128_CFB,
            HashingAlgorithm::Sha256,
        )
        .map_err(|e| classify("starting a trial session", e, false))?
        .ok_or_else(|| Error::new(Failure::Other, "TPM2: no session handle"))?;
    let trial = PolicySession::try_from(trial).map_err(|e| Error::new(Failure::Other, e.to_string()))?;
    conn.ctx
        .policy_pcr(trial, values, selection(pcrs)?)
        .map_err(|e| classify("computing the PCR policy", e, false))?;
    let d = conn
        .ctx
        .policy_get_digest(trial)
        .map_err(|e| classify("computing the PCR policy", e, false))?;
    Ok(d)
}

fn tpm2b(body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + body.len());
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn untpm2b<'a>(what: &str, b: &'a [u8]) -> Result<&'a [u8]> {
    let bad = || Error::new(Failure::NotLoadable, format!("the slot's {what} is malformed"));
    if b.len() < 2 || b.len() > MAX_BLOB_LEN {
        return Err(bad());
    }
    let n = u16::from_be_bytes([b[0], b[1]]) as usize;
    if n != b.len() - 2 || n == 0 {
        return Err(bad());
    }
    Ok(&b[2..])
}

pub(crate) fn seal(tcti: &Tcti, pcrs: &[u32], secret: &Secret) -> Result<Sealed> {
    let mut conn = Conn::open(tcti)?;
    let policy = if pcrs.is_empty() {
        None
    } else {
        Some(policy_digest(&mut conn, pcrs)?)
    };
    let template = sealed_template(policy).map_err(|e| Error::new(Failure::Other, format!("TPM2: template: {e}")))?;
    let data = SensitiveData::try_from(secret.to_vec()).map_err(|e| Error::new(Failure::Other, e.to_string()))?;
    let session = conn.session(SessionType::Hmac)?;
    let srk = conn.srk;
    let out = conn
        .ctx
        .execute_with_session(Some(session), |c| c.create(srk, template, None, Some(data), None, None))
        .map_err(|e| classify("sealing", e, false))?;
    let public = out
        .out_public
        .marshall()
        .map_err(|e| Error::new(Failure::Other, format!("TPM2: marshalling the public area: {e}")))?;
    Ok(Sealed {
        pcrs: pcrs.to_vec(),
        public: tpm2b(&public),
        private: tpm2b(out.out_private.value()),
    })
}

pub(crate) fn unseal(tcti: &Tcti, sealed: &Sealed) -> Result<Secret> {
    let public = Public::unmarshall(untpm2b("public area", &sealed.public)?).map_err(|e| {
        Error::new(
            Failure::NotLoadable,
            format!("the slot's public area does not parse: {e}"),
        )
    })?;
    let private = Private::try_from(untpm2b("private area", &sealed.private)?.to_vec())
        .map_err(|e| Error::new(Failure::NotLoadable, format!("the slot's private area: {e}")))?;
    let mut conn = Conn::open(tcti)?;
    let hmac = conn.session(SessionType::Hmac)?;
    let srk = conn.srk;
    let obj = conn
        .ctx
        .execute_with_session(Some(hmac), |c| c.load(srk, private, public))
        .map_err(|e| {
            let mut e = classify("loading the sealed object", e, true);
            if e.failure == Failure::NotLoadable {
                e.msg = format!(
                    "the sealed object does not load on this TPM (sealed by another TPM, or this one was cleared \
                     since): {}",
                    e.msg
                );
            }
            e
        })?;
    let auth = if sealed.pcrs.is_empty() {
        hmac
    } else {
        let s = conn.session(SessionType::Policy)?;
        let ps = PolicySession::try_from(s).map_err(|e| Error::new(Failure::Other, e.to_string()))?;
        // An empty digest: the TPM hashes the PCRs' current values.
        conn.ctx
            .policy_pcr(ps, Digest::default(), selection(&sealed.pcrs)?)
            .map_err(|e| classify("PolicyPCR", e, false))?;
        s
    };
    let data = conn
        .ctx
        .execute_with_session(Some(auth), |c| c.unseal(obj.into()))
        .map_err(|e| {
            let mut e = classify("unsealing", e, false);
            if e.failure == Failure::PolicyRefused {
                e.msg = format!(
                    "the TPM refuses to unseal: PCR {} changed since the slot was made ({})",
                    sealed.pcrs.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                    e.msg
                );
            }
            e
        })?;
    let _ = conn.ctx.flush_context(obj.into());
    let bytes = data.value();
    if bytes.len() != SECRET_LEN {
        return Err(Error::new(
            Failure::Other,
            format!("the sealed object holds {} bytes, not {SECRET_LEN}", bytes.len()),
        ));
    }
    let mut out = Secret::zeroed();
    out.0.copy_from_slice(bytes);
    // `data` (a zeroizing buffer) is wiped as it drops here.
    Ok(out)
}

/// Extend PCR `pcr` of the SHA-256 bank with SHA-256(`data`) on the TPM
/// at `tcti` (what a boot component does when it measures something).
/// Used by tests and tooling to change a PCR a slot is bound to.
pub fn extend_pcr(tcti: &Tcti, pcr: u32, data: &[u8]) -> Result<()> {
    let mut ctx = Context::new(tcti.conf()?)
        .map_err(|e| Error::new(Failure::Unreachable, format!("no TPM reachable on TCTI {tcti}: {e}")))?;
    let handle = PcrHandle::try_from(pcr).map_err(|e| Error::new(Failure::Other, format!("PCR {pcr}: {e}")))?;
    let mut v = DigestValues::new();
    let d = Digest::try_from(Sha256::digest(data).to_vec()).map_err(|e| Error::new(Failure::Other, e.to_string()))?;
    v.set(HashingAlgorithm::Sha256, d);
    ctx.execute_with_nullauth_session(|c| c.pcr_extend(handle, v))
        .map_err(|e| classify(&format!("extending PCR {pcr}"), e, false))
}
