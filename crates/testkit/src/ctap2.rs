//! A small CTAP2 authenticator for tests, on a Unix socket that warpfs's
//! FIDO2 client reaches through libfido2's custom transport hook
//! (`warpfs_fido2::testdev`: each CTAPHID message a frame of command byte,
//! u32 big-endian length, payload). It answers CTAPHID INIT and the CTAP2
//! commands a security key with `hmac-secret` needs: authenticatorGetInfo,
//! authenticatorMakeCredential (ES256, non-resident, `none` attestation),
//! authenticatorGetAssertion (allow list, user presence, the hmac-secret
//! extension), and authenticatorClientPIN getKeyAgreement and
//! getPinToken (PIN/UV protocol 1: ECDH on P-256, AES-256-CBC,
//! HMAC-SHA256), so libfido2 runs its real messages and its real key
//! agreement against it. Every touch is given at once and counted. A PIN,
//! when started with one ([`Authenticator::start_with_pin`]), is needed to
//! make a credential; an assertion whose pinAuth verifies is user-verified
//! (its hmac-secret from the credential's other random, as CTAP2 has it).

mod cbor;

pub use cbor::V;

use aes::cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use hmac::{Hmac, Mac};
use p256::ecdsa::signature::Signer;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

const CMD_INIT: u8 = 0x06;
const CMD_CBOR: u8 = 0x10;
const OK: u8 = 0x00;
const ERR_INVALID_COMMAND: u8 = 0x01;
const ERR_INVALID_CBOR: u8 = 0x12;
const ERR_MISSING_PARAMETER: u8 = 0x14;
const ERR_UNSUPPORTED_ALGORITHM: u8 = 0x26;
const ERR_NO_CREDENTIALS: u8 = 0x2e;
const ERR_PIN_INVALID: u8 = 0x31;
const ERR_PIN_AUTH_INVALID: u8 = 0x33;
const ERR_PIN_NOT_SET: u8 = 0x35;
const ERR_PIN_REQUIRED: u8 = 0x36;

/// One credential the authenticator made.
struct Credential {
    rp_id_hash: [u8; 32],
    /// CredRandom without user verification: the hmac-secret key.
    random: [u8; 32],
    /// CredRandom with user verification (the PIN given).
    random_uv: [u8; 32],
    signing: p256::ecdsa::SigningKey,
}

struct State {
    aaguid: [u8; 16],
    /// The key agreement key of this power-up.
    agreement: p256::SecretKey,
    credentials: HashMap<Vec<u8>, Credential>,
    counter: u32,
    /// LEFT(SHA-256(PIN), 16), when a PIN is set.
    pin_hash: Option<[u8; 16]>,
    /// The PIN token of this power-up.
    pin_token: [u8; 32],
}

/// A running test authenticator; stopped and its socket removed on drop.
pub struct Authenticator {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    touches: Arc<AtomicU32>,
    state: Arc<Mutex<State>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("/dev/urandom");
    b
}

fn p256_key() -> p256::SecretKey {
    loop {
        if let Ok(k) = p256::SecretKey::from_slice(&random::<32>()) {
            return k;
        }
    }
}

fn cose_key(p: &p256::PublicKey, alg: i64) -> V {
    let e = p256::elliptic_curve::sec1::ToEncodedPoint::to_encoded_point(p, false);
    V::M(vec![
        (V::I(1), V::I(2)),
        (V::I(3), V::I(alg)),
        (V::I(-1), V::I(1)),
        (V::I(-2), V::B(e.x().expect("x").to_vec())),
        (V::I(-3), V::B(e.y().expect("y").to_vec())),
    ])
}

fn public_of_cose(v: &V) -> Option<p256::PublicKey> {
    let (x, y) = (v.at(-2)?.bytes()?, v.at(-3)?.bytes()?);
    if v.at(1)?.int()? != 2 || v.at(-1)?.int()? != 1 || x.len() != 32 || y.len() != 32 {
        return None;
    }
    let ep = p256::EncodedPoint::from_affine_coordinates(x.into(), y.into(), false);
    Option::from(p256::elliptic_curve::sec1::FromEncodedPoint::from_encoded_point(&ep))
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    m.update(data);
    m.finalize().into_bytes().into()
}

/// AES-256-CBC with a zero IV, whole blocks (PIN/UV protocol 1).
fn cbc(key: &[u8; 32], data: &[u8], encrypt: bool) -> Option<Vec<u8>> {
    if data.is_empty() || !data.len().is_multiple_of(16) {
        return None;
    }
    let c = aes::Aes256::new_from_slice(key).ok()?;
    let mut prev = [0u8; 16];
    let mut out = Vec::with_capacity(data.len());
    for chunk in data.chunks(16) {
        let mut b = aes::Block::default();
        if encrypt {
            for (i, x) in b.iter_mut().enumerate() {
                *x = chunk[i] ^ prev[i];
            }
            c.encrypt_block(&mut b);
            prev.copy_from_slice(&b);
            out.extend_from_slice(&b);
        } else {
            b.copy_from_slice(chunk);
            c.decrypt_block(&mut b);
            out.extend(b.iter().zip(prev).map(|(x, p)| x ^ p));
            prev.copy_from_slice(chunk);
        }
    }
    Some(out)
}

impl State {
    fn new(pin: Option<&str>) -> State {
        State {
            aaguid: random(),
            agreement: p256_key(),
            credentials: HashMap::new(),
            counter: 0,
            pin_hash: pin.map(|p| Sha256::digest(p.as_bytes())[..16].try_into().expect("16 bytes")),
            pin_token: random(),
        }
    }

    /// The shared secret of PIN/UV protocol 1 with the platform key `peer`.
    fn shared(&self, peer: &p256::PublicKey) -> [u8; 32] {
        let z = p256::ecdh::diffie_hellman(self.agreement.to_nonzero_scalar(), peer.as_affine());
        Sha256::digest(z.raw_secret_bytes()).into()
    }

    /// Whether `req` is user-verified: its pinAuth (at key `at`, protocol
    /// 1 at `at + 1`) is LEFT(HMAC(pinToken, cdh), 16); none: `false`.
    fn verified(&self, req: &V, at: i64, cdh: &[u8]) -> Result<bool, u8> {
        let Some(auth) = req.at(at).and_then(V::bytes) else {
            return Ok(false);
        };
        let good = self.pin_hash.is_some()
            && req.at(at + 1).and_then(V::int) == Some(1)
            && auth.len() == 16
            && hmac(&self.pin_token, cdh)[..16] == *auth;
        if good {
            Ok(true)
        } else {
            Err(ERR_PIN_AUTH_INVALID)
        }
    }

    /// getPinToken: the PIN token, encrypted for the platform, when the
    /// PIN hash it sends is the PIN's.
    fn pin_token(&self, req: &V) -> Result<V, u8> {
        let want = self.pin_hash.ok_or(ERR_PIN_NOT_SET)?;
        let peer = req.at(3).and_then(public_of_cose).ok_or(ERR_MISSING_PARAMETER)?;
        let enc = req.at(6).and_then(V::bytes).ok_or(ERR_MISSING_PARAMETER)?;
        let shared = self.shared(&peer);
        if cbc(&shared, enc, false).ok_or(ERR_INVALID_CBOR)? != want {
            return Err(ERR_PIN_INVALID);
        }
        let token = cbc(&shared, &self.pin_token, true).ok_or(ERR_INVALID_CBOR)?;
        Ok(V::M(vec![(V::I(2), V::B(token))]))
    }

    fn get_info(&self) -> Result<V, u8> {
        Ok(V::M(vec![
            (V::I(1), V::A(vec![V::t("FIDO_2_0")])),
            (V::I(2), V::A(vec![V::t("hmac-secret")])),
            (V::I(3), V::B(self.aaguid.to_vec())),
            (
                V::I(4),
                V::M(vec![
                    (V::t("rk"), V::Bool(false)),
                    (V::t("up"), V::Bool(true)),
                    (V::t("plat"), V::Bool(false)),
                    (V::t("clientPin"), V::Bool(self.pin_hash.is_some())),
                ]),
            ),
            (V::I(5), V::I(1200)),
            (V::I(6), V::A(vec![V::I(1)])),
        ]))
    }

    fn make_credential(&mut self, req: &V, touches: &AtomicU32) -> Result<V, u8> {
        let cdh = req.at(1).and_then(V::bytes).ok_or(ERR_MISSING_PARAMETER)?;
        let rp_id = req
            .at(2)
            .and_then(|r| r.field("id"))
            .and_then(V::text)
            .ok_or(ERR_MISSING_PARAMETER)?;
        let algs = match req.at(4) {
            Some(V::A(a)) => a,
            _ => return Err(ERR_MISSING_PARAMETER),
        };
        if !algs.iter().any(|p| p.field("alg").and_then(V::int) == Some(-7)) {
            return Err(ERR_UNSUPPORTED_ALGORITHM);
        }
        let hmac_ext = req.at(6).and_then(|e| e.field("hmac-secret")).and_then(V::boolean) == Some(true);
        let uv = self.verified(req, 8, cdh)?;
        if self.pin_hash.is_some() && !uv {
            return Err(ERR_PIN_REQUIRED);
        }
        touches.fetch_add(1, Ordering::SeqCst);
        let id = random::<32>().to_vec();
        let signing = p256::ecdsa::SigningKey::from(p256_key());
        let rp_id_hash: [u8; 32] = Sha256::digest(rp_id.as_bytes()).into();
        self.counter += 1;
        let mut auth = rp_id_hash.to_vec();
        auth.push(0x01 | if uv { 0x04 } else { 0 } | 0x40 | if hmac_ext { 0x80 } else { 0 });
        auth.extend_from_slice(&self.counter.to_be_bytes());
        auth.extend_from_slice(&self.aaguid);
        auth.extend_from_slice(&(id.len() as u16).to_be_bytes());
        auth.extend_from_slice(&id);
        auth.extend(cose_key(&p256::PublicKey::from(signing.verifying_key()), -7).encode());
        if hmac_ext {
            auth.extend(V::M(vec![(V::t("hmac-secret"), V::Bool(true))]).encode());
        }
        self.credentials.insert(
            id,
            Credential {
                rp_id_hash,
                random: random(),
                random_uv: random(),
                signing,
            },
        );
        Ok(V::M(vec![
            (V::I(1), V::t("none")),
            (V::I(2), V::B(auth)),
            (V::I(3), V::M(vec![])),
        ]))
    }

    fn hmac_secret(&self, cred: &Credential, ext: &V, uv: bool) -> Result<Vec<u8>, u8> {
        let peer = ext.at(1).and_then(public_of_cose).ok_or(ERR_INVALID_CBOR)?;
        let salt_enc = ext.at(2).and_then(V::bytes).ok_or(ERR_MISSING_PARAMETER)?;
        let salt_auth = ext.at(3).and_then(V::bytes).ok_or(ERR_MISSING_PARAMETER)?;
        let shared = self.shared(&peer);
        if salt_auth.len() != 16 || hmac(&shared, salt_enc)[..16] != *salt_auth {
            return Err(ERR_PIN_AUTH_INVALID);
        }
        let salts = cbc(&shared, salt_enc, false).filter(|s| s.len() == 32 || s.len() == 64);
        let salts = salts.ok_or(ERR_INVALID_CBOR)?;
        let mut out = Vec::new();
        for salt in salts.chunks(32) {
            out.extend_from_slice(&hmac(if uv { &cred.random_uv } else { &cred.random }, salt));
        }
        cbc(&shared, &out, true).ok_or(ERR_INVALID_CBOR)
    }

    fn get_assertion(&mut self, req: &V, touches: &AtomicU32) -> Result<V, u8> {
        let rp_id = req.at(1).and_then(V::text).ok_or(ERR_MISSING_PARAMETER)?;
        let cdh = req.at(2).and_then(V::bytes).ok_or(ERR_MISSING_PARAMETER)?;
        let rp_id_hash: [u8; 32] = Sha256::digest(rp_id.as_bytes()).into();
        let allowed = match req.at(3) {
            Some(V::A(a)) => a
                .iter()
                .filter_map(|c| c.field("id").and_then(V::bytes))
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let (id, cred) = allowed
            .iter()
            .find_map(|id| {
                let c = self.credentials.get(*id)?;
                (c.rp_id_hash == rp_id_hash).then_some((*id, c))
            })
            .ok_or(ERR_NO_CREDENTIALS)?;
        let uv = self.verified(req, 6, cdh)?;
        let up = req
            .at(5)
            .and_then(|o| o.field("up"))
            .and_then(V::boolean)
            .unwrap_or(true);
        let ext = match req.at(4).and_then(|e| e.field("hmac-secret")) {
            Some(h) => Some(self.hmac_secret(cred, h, uv)?),
            None => None,
        };
        if up {
            touches.fetch_add(1, Ordering::SeqCst);
        }
        let mut auth = rp_id_hash.to_vec();
        auth.push(u8::from(up) | if uv { 0x04 } else { 0 } | if ext.is_some() { 0x80 } else { 0 });
        auth.extend_from_slice(&(self.counter + 1).to_be_bytes());
        if let Some(e) = ext {
            auth.extend(V::M(vec![(V::t("hmac-secret"), V::B(e))]).encode());
        }
        let mut signed = auth.clone();
        signed.extend_from_slice(cdh);
        let sig: p256::ecdsa::Signature = cred.signing.sign(&signed);
        let id = id.to_vec();
        self.counter += 1;
        Ok(V::M(vec![
            (
                V::I(1),
                V::M(vec![(V::t("id"), V::B(id)), (V::t("type"), V::t("public-key"))]),
            ),
            (V::I(2), V::B(auth)),
            (V::I(3), V::B(sig.to_der().as_bytes().to_vec())),
        ]))
    }

    fn client_pin(&self, req: &V) -> Result<V, u8> {
        match (req.at(1).and_then(V::int), req.at(2).and_then(V::int)) {
            (Some(1), Some(2)) => Ok(V::M(vec![(V::I(1), cose_key(&self.agreement.public_key(), -25))])),
            (Some(1), Some(5)) => self.pin_token(req),
            _ => Err(ERR_INVALID_COMMAND),
        }
    }

    /// The answer to one CTAP2 request (command byte, CBOR).
    fn cbor(&mut self, msg: &[u8], touches: &AtomicU32) -> Vec<u8> {
        let Some((&cmd, body)) = msg.split_first() else {
            return vec![ERR_INVALID_COMMAND];
        };
        let req = if body.is_empty() {
            Some(V::M(vec![]))
        } else {
            V::decode(body)
        };
        let Some(req) = req else {
            return vec![ERR_INVALID_CBOR];
        };
        let r = match cmd {
            0x01 => self.make_credential(&req, touches),
            0x02 => self.get_assertion(&req, touches),
            0x04 => self.get_info(),
            0x06 => self.client_pin(&req),
            _ => Err(ERR_INVALID_COMMAND),
        };
        match r {
            Ok(v) => {
                let mut out = vec![OK];
                out.extend(v.encode());
                out
            }
            Err(e) => vec![e],
        }
    }
}

fn serve(mut s: UnixStream, state: &Mutex<State>, touches: &AtomicU32) {
    loop {
        let mut head = [0u8; 5];
        if s.read_exact(&mut head).is_err() {
            return;
        }
        let n = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if n > 1 << 16 {
            return;
        }
        let mut msg = vec![0u8; n];
        if s.read_exact(&mut msg).is_err() {
            return;
        }
        let cmd = head[0];
        let reply = match cmd & 0x7f {
            CMD_INIT if msg.len() == 8 => {
                let mut r = msg.clone();
                r.extend_from_slice(&[0x01, 0x02, 0x03, 0x04, 2, 1, 0, 0, 0x04 | 0x08]);
                r
            }
            CMD_CBOR => state.lock().unwrap().cbor(&msg, touches),
            _ => vec![ERR_INVALID_COMMAND],
        };
        let mut frame = vec![cmd];
        frame.extend_from_slice(&(reply.len() as u32).to_be_bytes());
        frame.extend_from_slice(&reply);
        if s.write_all(&frame).is_err() {
            return;
        }
    }
}

impl Authenticator {
    /// A new authenticator (no credentials, no PIN) listening at `path`.
    ///
    /// # Panics
    /// When the socket cannot be made.
    pub fn start(path: &Path) -> Authenticator {
        Authenticator::start_as(path, None)
    }

    /// [`Authenticator::start`] with `pin` set: making a credential needs
    /// it, an assertion with it is user-verified.
    pub fn start_with_pin(path: &Path, pin: &str) -> Authenticator {
        Authenticator::start_as(path, Some(pin))
    }

    fn start_as(path: &Path, pin: Option<&str>) -> Authenticator {
        let _ = std::fs::remove_file(path);
        let l = UnixListener::bind(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stop = Arc::new(AtomicBool::new(false));
        let touches = Arc::new(AtomicU32::new(0));
        let state = Arc::new(Mutex::new(State::new(pin)));
        let (st, t, state2) = (stop.clone(), touches.clone(), state.clone());
        let thread = std::thread::spawn(move || {
            for c in l.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(c) = c {
                    serve(c, &state2, &t);
                }
            }
        });
        Authenticator {
            path: path.to_owned(),
            stop,
            touches,
            state,
            thread: Some(thread),
        }
    }

    /// Its socket.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The hmac-secret output (without user verification) that credential
    /// `id` gives for `salt`, straight from its state (what a test does
    /// with a removed slot's secret, outside libfido2); `None` for a
    /// credential this authenticator did not make.
    pub fn output(&self, id: &[u8], salt: &[u8; 32]) -> Option<[u8; 32]> {
        let st = self.state.lock().unwrap();
        st.credentials.get(id).map(|c| hmac(&c.random, salt))
    }

    /// How many times a user's touch was asked for (and given).
    pub fn touches(&self) -> u32 {
        self.touches.load(Ordering::SeqCst)
    }
}

impl Drop for Authenticator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
