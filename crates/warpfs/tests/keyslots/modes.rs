//! Revocation in every content mode: `key remove 2 --rekey` of a volume
//! unmounted (`offline`) and mounted (`online`) keeps the tree, the
//! removed password no longer mounts, and a config copy from before,
//! opened with it, gives a volume key under which no block of a file of
//! known plaintext decrypts to that plaintext (in key generations 0 to 3;
//! in the authenticated modes no block's tag verifies either), and no
//! name or xattr name decrypts. The same check with the current key finds
//! them all, so it can fail. Blocks are opened with warpfs-crypto's own
//! ciphers at the offsets of warpfs-content's layout (FORMAT.md 3, 7, 11,
//! 15).

use super::revoke::{ivs_of, remove_rekey, walk};
use super::*;
use std::collections::BTreeMap;
use warpfs_config::ContentMode;
use warpfs_content::{header::Header, layout};
use warpfs_crypto::gcm::{tag_mask, DATA_COUNTER};
use warpfs_crypto::{file_block_tweak, poly1305_tag, ContentCipher, ContentKey, GcmTagger, MasterKey};
use warpfs_crypto::{XChaChaKey, XtsKey, NONCE_LEN, TAG_LEN};

/// The known file: three full blocks and a partial one.
const KNOWN: &str = "d/known.bin";
const KNOWN_LEN: usize = 3 * 4096 + 1000;
/// The xattr set on the known file.
const XATTR: &str = "user.provenance";
const XATTR_VALUE: &[u8] = b"scanned from the 1987 ledger, page 14";

/// The known file's plaintext: no two blocks alike, no block constant.
fn known() -> Vec<u8> {
    Rng::new(0x6b6e_6f77_6e00_0001).bytes(KNOWN_LEN)
}

/// A volume of `mode` with a second password (slot 2, to revoke) and a
/// tree: the known file (with an xattr), a long name, a symlink; the
/// removed password's file and the tree's snapshot.
fn revocable_in(mode: Mode) -> (Volume, PathBuf, BTreeMap<PathBuf, Node>) {
    let (mut v, _) = fresh_in(mode, &[]);
    let gone = file(&v, "gone", "the password to revoke\n");
    warpfs(args![
        "key",
        "add",
        "--passfile",
        &v.passfile,
        "--password",
        "--new-passfile",
        &gone,
        &v.cipher
    ])
    .expect_ok("add");
    v.mount();
    fs::create_dir(v.p("d")).unwrap();
    write_file(&v.p(KNOWN), &known());
    setxattr(&v.p(KNOWN), XATTR, XATTR_VALUE, 0).unwrap();
    write_file(&v.p(format!("d/{}", "l".repeat(200))), b"behind a long name");
    write_file(&v.p("a.txt"), b"alpha");
    std::os::unix::fs::symlink("d/known.bin", v.p("link")).unwrap();
    let want = snapshot(&v.mnt);
    v.unmount();
    (v, gone, want)
}

/// The content key of generation `g` of the volume key `k`, as the
/// volume's mode makes it (FORMAT.md 2.2, 7, 10, 11, 15).
enum BlockKey {
    /// AES or Twofish in the `ctr` or `gcm` layout.
    Block(ContentKey),
    /// XChaCha20 in the `ctr` or `gcm` layout.
    XChaCha(XChaChaKey),
    /// XTS-AES or XTS-Twofish.
    Xts(XtsKey),
}

impl BlockKey {
    fn new(mode: ContentMode, bits: u32, k: &MasterKey, g: u32) -> Self {
        if let Some(x) = mode.xts_cipher() {
            return BlockKey::Xts(Subkeys::xts_key_gen(k, bits, x, g));
        }
        let raw = Subkeys::content_key_bytes_gen(k, bits, g);
        match mode.cipher() {
            ContentCipher::XChaCha20 => BlockKey::XChaCha(XChaChaKey::new(&raw).unwrap()),
            c => BlockKey::Block(ContentKey::with_cipher(c.block_cipher().unwrap(), &raw).unwrap()),
        }
    }

    /// Block `b` of the file `id`, ciphertext `ct`, nonce entry `entry`
    /// (empty in XTS) decrypted, and whether its tag verifies (`None`
    /// without tags).
    fn open(&self, id: &[u8; 16], b: u64, entry: &[u8], ct: &[u8]) -> (Vec<u8>, Option<bool>) {
        let mut aad = id.to_vec();
        aad.extend_from_slice(&b.to_be_bytes());
        let nonce: Option<[u8; NONCE_LEN]> = entry.get(..NONCE_LEN).map(|n| n.try_into().unwrap());
        let tag: Option<[u8; TAG_LEN]> = entry.get(16..32).map(|t| t.try_into().unwrap());
        let mut pt = ct.to_vec();
        let ok = match self {
            BlockKey::Xts(k) => {
                k.decrypt_unit(&file_block_tweak(id, b), &mut pt);
                None
            }
            BlockKey::Block(k) => {
                let n = nonce.unwrap();
                k.xor_keystream(&n, DATA_COUNTER, &mut pt);
                tag.map(|t| GcmTagger::new(k).verify(&aad, ct, &tag_mask(k, &n), &t))
            }
            BlockKey::XChaCha(k) => {
                let n = nonce.unwrap();
                k.xor_at(&n, 1, 0, &mut pt);
                tag.map(|t| poly1305_tag(&k.tag_mask(&n), &aad, ct) == t)
            }
        };
        (pt, ok)
    }
}

/// What a volume key finds it can open in the volume at `dir`.
#[derive(Debug, Default)]
struct Found {
    /// Written blocks of cipher files, each tried in every generation.
    blocks: u64,
    /// Blocks that decrypt to the known file's block of the same number.
    known: u64,
    /// Blocks whose tag verifies (authenticated modes).
    tags: u64,
    /// Encrypted names, and those that decrypt under some directory IV.
    names: u64,
    names_open: u64,
    /// Encrypted xattr names, and those that decrypt.
    xattrs: u64,
    xattrs_open: u64,
}

/// Tries the volume key `k` on every block of every cipher file under
/// `dir` (content keys of generations `gens`), on every name under the
/// IVs there and `more_ivs`, and on every xattr name.
fn opened_by(dir: &Path, k: &MasterKey, gens: std::ops::Range<u32>, more_ivs: &[[u8; 16]]) -> Found {
    use std::os::unix::fs::FileExt;
    let cfg = Config::load(dir).unwrap();
    let (mode, bits) = (cfg.content_mode(), cfg.key_bits());
    let layout_mode = match mode.base() {
        ContentMode::Ctr => warpfs_content::Mode::Ctr,
        ContentMode::Gcm => warpfs_content::Mode::Gcm,
        _ => warpfs_content::Mode::Xts,
    };
    let keys: Vec<_> = gens.map(|g| BlockKey::new(mode, bits, k, g)).collect();
    let names = Subkeys::derive(k, bits).names;
    let want = known();
    let mut ivs = more_ivs.to_vec();
    ivs.extend(ivs_of(dir));
    let mut all = Vec::new();
    walk(dir, &mut all);
    let mut o = Found::default();
    for p in &all {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let md = p.symlink_metadata().unwrap();
        let sidecar = name.starts_with("warpfs.long.") && name.ends_with(".name");
        let enc = if sidecar {
            Some(fs::read_to_string(p).unwrap())
        } else {
            (!name.starts_with("warpfs.")).then(|| name.clone())
        };
        if let Some(enc) = enc {
            o.names += 1;
            o.names_open += u64::from(ivs.iter().any(|iv| names.decrypt_name(iv, &enc).is_ok()));
        }
        if !md.is_symlink() {
            for x in listxattr(p).unwrap() {
                if let Some(enc) = x.strip_prefix("user.warpfs.").filter(|e| *e != "id") {
                    o.xattrs += 1;
                    o.xattrs_open += u64::from(names.decrypt_xattr_name(enc).is_ok());
                }
            }
        }
        let content = !name.starts_with("warpfs.") || name.starts_with("warpfs.long.") && !sidecar;
        if !md.is_file() || md.len() == 0 || !content {
            continue;
        }
        let f = fs::File::open(p).unwrap();
        let mut h = [0u8; 32];
        f.read_exact_at(&mut h, 0).unwrap();
        let id = Header::parse(&h).unwrap().file_id;
        let size = layout::plain_size(layout_mode, md.len()).unwrap();
        for b in 0..layout::block_count(size) {
            let mut entry = vec![0u8; layout::entry_len(layout_mode) as usize];
            f.read_exact_at(&mut entry, layout::entry_offset(layout_mode, b))
                .unwrap();
            let mut ct = vec![0u8; layout::block_len(size, b)];
            f.read_exact_at(&mut ct, layout::data_offset(layout_mode, b)).unwrap();
            // A hole: a zero entry (FORMAT.md 3.2), in XTS a zero block (7).
            if entry.iter().all(|&x| x == 0) && (!entry.is_empty() || ct.iter().all(|&x| x == 0)) {
                continue;
            }
            o.blocks += 1;
            let plain = want.chunks(4096).nth(b as usize);
            for key in &keys {
                let (pt, tag) = key.open(&id, b, &entry, &ct);
                o.known += u64::from(plain == Some(&pt[..]));
                o.tags += u64::from(tag == Some(true));
            }
        }
    }
    o
}

/// The volume key that the config `cfg` gives for the password in `pass`.
fn key_of(cfg: &Config, pass: &Path) -> MasterKey {
    let pw = fs::read_to_string(pass).unwrap();
    cfg.open(&Input::Secret {
        bytes: pw.trim_end().as_bytes(),
        kind: None,
    })
    .unwrap()
    .key
}

/// `key remove 2 --rekey` of a volume of `mode`, mounted if `online`.
fn revoke_in(mode: Mode, online: bool) {
    let (mut v, gone, want) = revocable_in(mode);
    let m = format!("{} {}", mode.name(), if online { "online" } else { "offline" });
    let old_conf = v.root().join("old.conf");
    fs::copy(v.cipher.join("warpfs.conf"), &old_conf).unwrap();
    let old_ivs = ivs_of(&v.cipher);
    let tagged = mode.base() == Mode::Gcm;
    // Before, the removed password's key opens everything: the known
    // file's four blocks, every tag, every name and the xattr's name.
    let k = key_of(&Config::load_file(&old_conf).unwrap(), &gone);
    let o = opened_by(&v.cipher, &k, 0..4, &[]);
    assert!(o.blocks >= 6 && o.names >= 5 && o.xattrs >= 1, "{m}: before: {o:?}");
    assert!(
        o.known == 4 && o.names_open == o.names && o.xattrs_open == o.xattrs,
        "{m}: before: {o:?}"
    );
    assert_eq!(o.tags, if tagged { o.blocks } else { 0 }, "{m}: before: {o:?}");
    if online {
        v.mount();
    }
    let out = remove_rekey(&v, "2", &[]);
    out.expect_ok(&format!("{m}: key remove --rekey"));
    assert!(out.stderr.contains("every backing name changes"), "{out}");
    assert_eq!(out.stdout.contains("online"), online, "{m}: {out}");
    if online {
        assert_snapshots_eq(&snapshot(&v.mnt), &want, &format!("{m}: on the mount"));
        v.unmount();
    }
    assert!(!Config::load(&v.cipher).unwrap().volume_rekey_under_way(), "{m}");
    v.mount();
    assert_snapshots_eq(&snapshot(&v.mnt), &want, &format!("{m}: after"));
    assert_eq!(getxattr(&v.p(KNOWN), XATTR).unwrap(), XATTR_VALUE, "{m}");
    v.unmount();
    let out = mount_with(&v, &["--passfile", gone.to_str().unwrap()]);
    assert!(
        !out.ok() && !is_mounted(&v.mnt),
        "{m}: the removed password mounts\n{out}"
    );
    // The old config with the removed password: a key under which
    // nothing of the volume decrypts, in any generation, under any IV
    // the volume had or has.
    let k = key_of(&Config::load_file(&old_conf).unwrap(), &gone);
    let o = opened_by(&v.cipher, &k, 0..4, &old_ivs);
    assert!(o.blocks >= 6 && o.names >= 5 && o.xattrs >= 1, "{m}: {o:?}");
    assert!(
        o.known == 0 && o.tags == 0 && o.names_open == 0 && o.xattrs_open == 0,
        "{m}: the removed password's key still opens: {o:?}"
    );
    // The current key opens them all (the check above can fail).
    let now = Config::load(&v.cipher).unwrap().unlock(PASSWORD.as_bytes()).unwrap();
    let n = opened_by(&v.cipher, &now, 0..4, &[]);
    assert!(
        n.blocks == o.blocks && n.known == 4 && n.names_open == n.names && n.xattrs_open == n.xattrs,
        "{m}: the current key: {n:?}"
    );
    assert_eq!(n.tags, if tagged { n.blocks } else { 0 }, "{m}: the current key: {n:?}");
}

fn offline(mode: Mode) {
    require_fuse!();
    revoke_in(mode, false);
}

fn online(mode: Mode) {
    require_fuse!();
    revoke_in(mode, true);
}

mode_tests!(all: offline, online);
