//! Tests of the undo journals' recovery: what is applied, and that nothing
//! hostile is, and nothing outside CIPHERDIR is ever written.

use super::*;
use std::os::unix::fs::symlink;
use warpfs_content::Mode;
use warpfs_crypto::MasterKey;

const GEN: u32 = 1;
/// The ID of the rekey under way.
const ID: [u8; 16] = [0x1d; 16];
/// What the tests' journals must belong to.
const EXPECTED: Expected = Expected {
    generation: Some(GEN),
    rekey_id: Some(ID),
};

fn key(b: u8) -> JournalKey {
    JournalKey::derive(&MasterKey::from_bytes(&[b; 32]).unwrap())
}

/// CIPHERDIR `root` with the cipher file `d/f` (file ID `id`, 0x11 after
/// its header) and, outside it, `outside/secret` with the same header
/// (0x22 after it): what an attacker would aim a journal at.
struct Fx {
    _t: tempfile::TempDir,
    root: PathBuf,
    out: PathBuf,
    id: [u8; 16],
    key: JournalKey,
}

fn cipher_file(id: [u8; 16], fill: u8) -> Vec<u8> {
    let mut h = Header::new_random(Mode::Gcm);
    h.file_id = id;
    let mut b = h.to_bytes().to_vec();
    b.extend_from_slice(&[fill; 8192]);
    b
}

impl Fx {
    /// CIPHERDIR through the door.
    fn door(&self) -> warpfs_backing::Root {
        warpfs_backing::Root::open(&self.root).unwrap()
    }

    fn new() -> Fx {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cipher");
        let out = t.path().join("outside");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        let id = [0x5a; 16];
        std::fs::write(root.join("d/f"), cipher_file(id, 0x11)).unwrap();
        std::fs::write(out.join("secret"), cipher_file(id, 0x22)).unwrap();
        Fx {
            _t: t,
            root,
            out,
            id,
            key: key(3),
        }
    }

    /// A record of the rekey under way for the file's segment 0 (its
    /// header as it is, generation 0, watermark 0).
    fn rec(&self, path: &str) -> Record {
        let h = std::fs::read(self.root.join("d/f")).map_or_else(
            |_| cipher_file(self.id, 0)[..header::LEN].to_vec(),
            |b| b[..header::LEN].to_vec(),
        );
        Record {
            generation: GEN,
            rekey: Some(Rekey { id: ID, seq: 0 }),
            file_id: self.id,
            ino: 0,
            path: path.as_bytes().to_vec(),
            ranges: vec![(0, h), (100, vec![0xee; 64])],
        }
    }

    /// Set the file's header watermark (and generation).
    fn at(&self, generation: u32, rekeyed: u32) {
        let p = self.root.join("d/f");
        let mut b = std::fs::read(&p).unwrap();
        let mut h = Header::parse(&b[..header::LEN]).unwrap();
        h.generation = generation;
        h.rekeyed = rekeyed;
        b[..header::LEN].copy_from_slice(&h.to_bytes());
        std::fs::write(&p, b).unwrap();
    }

    fn plant(&self, bytes: &[u8]) -> PathBuf {
        let p = self.root.join(format!("{JOURNAL_PREFIX}0"));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn recover(&self, d: Decisions) -> Recovered {
        recover_in(&self.door(), &self.key, EXPECTED, d).unwrap()
    }

    fn states(&self) -> Vec<State> {
        inspect_in(&self.door(), &self.key, EXPECTED)
            .unwrap()
            .into_iter()
            .map(|f| f.state)
            .collect()
    }

    fn outside_untouched(&self) {
        assert!(
            std::fs::read(self.out.join("secret")).unwrap() == cipher_file(self.id, 0x22)[..],
            "a file outside CIPHERDIR was written"
        );
    }

    fn inside_restored(&self) -> bool {
        let b = std::fs::read(self.root.join("d/f")).unwrap();
        assert!(b[164..].iter().all(|&x| x == 0x11));
        b[100..164].iter().all(|&x| x == 0xee)
    }

    /// The journal is refused (kept, with `why`), nothing is applied, and
    /// `--discard-journals` removes it, still applying nothing.
    fn refused(&self, j: &Path, why: &str) {
        let st = self.states();
        assert!(
            matches!(&st[..], [State::Refused(m)] if m.contains(why)),
            "{st:?}: want refused for {why:?}"
        );
        let r = self.recover(Decisions::automatic());
        assert_eq!(r.restored, 0);
        assert_eq!(r.kept.len(), 1, "{r:?}");
        assert!(r.kept[0].1.contains(why), "{r:?}");
        assert!(r.kept_message().contains(JOURNAL_PREFIX) && r.kept_message().contains(why));
        assert!(inspect_in(&self.door(), &self.key, EXPECTED).unwrap()[0]
            .describe()
            .unwrap()
            .contains("never applied"));
        assert!(j.symlink_metadata().is_ok(), "a refused journal is kept");
        self.outside_untouched();
        assert!(!self.inside_restored());
        let r = self.recover(Decisions {
            discard: true,
            ..Decisions::automatic()
        });
        assert_eq!((r.restored, r.kept.len(), r.discarded.len()), (0, 0, 1), "{r:?}");
        assert!(j.symlink_metadata().is_err(), "discarded");
        self.outside_untouched();
        assert!(!self.inside_restored());
    }
}

#[test]
fn an_authenticated_record_is_applied_at_its_path_or_found_by_id() {
    for path in ["d/f", "renamed/since", ""] {
        let fx = Fx::new();
        let j = fx.plant(&fx.rec(path).encode(&fx.key));
        assert!(matches!(&fx.states()[..], [State::Ready(_)]), "{path}");
        // fsck without --repair leaves it.
        let r = fx.recover(Decisions::default());
        assert_eq!(r.restored, 0);
        assert!(j.exists());
        let r = fx.recover(Decisions::automatic());
        assert_eq!((r.restored, r.kept.len()), (1, 0), "{path}: {r:?}");
        assert!(fx.inside_restored(), "{path}");
        assert!(!j.exists());
        fx.outside_untouched();
    }
}

#[test]
fn paths_out_of_cipherdir_are_refused() {
    for (path, why) in [("../outside/secret", "\"..\""), ("d/../../outside/secret", "\"..\"")] {
        let fx = Fx::new();
        let j = fx.plant(&fx.rec(path).encode(&fx.key));
        fx.refused(&j, why);
    }
    let fx = Fx::new();
    let abs = fx.out.join("secret");
    let j = fx.plant(&fx.rec(abs.to_str().unwrap()).encode(&fx.key));
    fx.refused(&j, "absolute");
}

#[test]
fn a_symlink_anywhere_on_the_path_is_refused() {
    // A directory of the path is a symlink out of CIPHERDIR.
    let fx = Fx::new();
    symlink("../outside", fx.root.join("ln")).unwrap();
    let j = fx.plant(&fx.rec("ln/secret").encode(&fx.key));
    fx.refused(&j, "symbolic link");
    // The file itself was swapped for a symlink to the outside file.
    let fx = Fx::new();
    std::fs::rename(fx.root.join("d/f"), fx.root.join("d/moved")).unwrap();
    symlink("../../outside/secret", fx.root.join("d/f")).unwrap();
    let j = fx.plant(&fx.rec("d/f").encode(&fx.key));
    let st = fx.states();
    assert!(
        matches!(&st[..], [State::Refused(m)] if m.contains("symbolic link")),
        "{st:?}"
    );
    let r = fx.recover(Decisions::automatic());
    assert_eq!((r.restored, r.kept.len()), (0, 1));
    assert!(j.exists());
    fx.outside_untouched();
    // The directory holding it was swapped for a symlink.
    let fx = Fx::new();
    std::fs::rename(fx.root.join("d"), fx.root.join("e")).unwrap();
    symlink("../outside", fx.root.join("d")).unwrap();
    std::fs::rename(fx.out.join("secret"), fx.out.join("f")).unwrap();
    let j = fx.plant(&fx.rec("d/f").encode(&fx.key));
    let st = fx.states();
    assert!(
        matches!(&st[..], [State::Refused(m)] if m.contains("symbolic link")),
        "{st:?}"
    );
    let r = fx.recover(Decisions::automatic());
    assert_eq!((r.restored, r.kept.len()), (0, 1));
    assert!(j.exists());
    assert!(std::fs::read(fx.out.join("f")).unwrap() == cipher_file(fx.id, 0x22)[..]);
}

#[test]
fn the_search_by_file_id_never_leaves_cipherdir() {
    // The only file with the record's ID is outside, behind a symlink.
    let fx = Fx::new();
    std::fs::remove_file(fx.root.join("d/f")).unwrap();
    symlink("../outside", fx.root.join("ln")).unwrap();
    symlink("../outside/secret", fx.root.join("sl")).unwrap();
    let j = fx.plant(&fx.rec("gone").encode(&fx.key));
    let r = fx.recover(Decisions::automatic());
    assert_eq!((r.restored, r.kept.len()), (0, 0), "dropped: its file is gone");
    assert!(!j.exists());
    fx.outside_untouched();
}

#[test]
fn a_journal_that_is_a_symlink_is_refused_and_never_truncated() {
    let fx = Fx::new();
    let j = fx.root.join(format!("{JOURNAL_PREFIX}0"));
    symlink(fx.out.join("secret"), &j).unwrap();
    fx.refused(&j, "symbolic link");
    // A rekey worker does not take it over (it would truncate the target).
    symlink(fx.out.join("secret"), &j).unwrap();
    let e = JournalIo::create(&fx.door(), 0, Arc::new(key(3)), GEN, Some(ID), None)
        .err()
        .unwrap();
    assert!(e.contains("symbolic link"), "{e}");
    fx.outside_untouched();
    // Nor a FIFO (which would block a reader).
    std::fs::remove_file(&j).unwrap();
    let c = std::ffi::CString::new(j.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    fx.refused(&j, "not a regular file");
    assert!(JournalIo::create(&fx.door(), 1, Arc::new(key(3)), GEN, Some(ID), None).is_ok());
}

#[test]
fn forged_and_stale_records_are_refused() {
    let fx = Fx::new();
    let j = fx.plant(&fx.rec("d/f").encode(&key(4)));
    fx.refused(&j, "MAC does not verify");
    // A SHA-256 recomputed over a version 2 record (what version 1 checked).
    let mut b = fx.rec("d/f").encode(&fx.key);
    b.truncate(b.len() - 32);
    let sum = <sha2::Sha256 as sha2::Digest>::digest(&b);
    b.extend_from_slice(&sum);
    let j = fx.plant(&b);
    fx.refused(&j, "MAC does not verify");
    // Authentic, but of another rekey (replayed).
    let old = Record {
        generation: GEN + 1,
        ..fx.rec("d/f")
    };
    let j = fx.plant(&old.encode(&fx.key));
    fx.refused(&j, "key generation 2");
    // And with no rekey under way at all.
    fx.plant(&fx.rec("d/f").encode(&fx.key));
    let st = inspect_in(&fx.door(), &fx.key, Expected::default()).unwrap();
    assert!(
        matches!(&st[0].state, State::Refused(m) if m.contains("no rekey is under way")),
        "{st:?}"
    );
    let r = recover_in(&fx.door(), &fx.key, Expected::default(), Decisions::automatic()).unwrap();
    assert_eq!((r.restored, r.kept.len()), (0, 1));
    fx.outside_untouched();
    assert!(!fx.inside_restored());
}

#[test]
fn a_truncated_record_is_torn_and_never_applied() {
    let fx = Fx::new();
    let b = fx.rec("d/f").encode(&fx.key);
    let j = fx.plant(&b[..b.len() - 10]);
    assert_eq!(fx.states(), [State::Torn]);
    let r = fx.recover(Decisions::automatic());
    assert_eq!((r.restored, r.torn, r.kept.len()), (0, 1, 0));
    assert!(!j.exists());
    assert!(!fx.inside_restored());
}

#[test]
fn an_old_unauthenticated_record_waits_for_a_decision() {
    let fx = Fx::new();
    let rec = Record {
        generation: 0,
        ..fx.rec("d/f")
    };
    let j = fx.plant(&rec.encode_unauthenticated());
    assert!(matches!(&fx.states()[..], [State::Unauthenticated(_)]));
    let r = fx.recover(Decisions::automatic());
    assert_eq!((r.restored, r.kept.len()), (0, 1));
    assert!(r.kept[0].1.contains("no MAC"), "{r:?}");
    assert!(j.exists() && !fx.inside_restored());
    let r = fx.recover(Decisions {
        apply_unauthenticated: true,
        ..Decisions::default()
    });
    assert_eq!((r.restored, r.kept.len()), (1, 0));
    assert!(!j.exists() && fx.inside_restored());
    // Even when the user trusts old journals, one aimed out is refused.
    let fx = Fx::new();
    for path in ["../outside/secret", "/etc/x"] {
        let j = fx.plant(
            &Record {
                generation: 0,
                ..fx.rec(path)
            }
            .encode_unauthenticated(),
        );
        let r = fx.recover(Decisions {
            apply_unauthenticated: true,
            ..Decisions::automatic()
        });
        assert_eq!((r.restored, r.kept.len()), (0, 1), "{path}");
        assert!(j.exists());
        std::fs::remove_file(&j).unwrap();
    }
    symlink("../outside", fx.root.join("ln")).unwrap();
    fx.plant(
        &Record {
            generation: 0,
            ..fx.rec("ln/secret")
        }
        .encode_unauthenticated(),
    );
    let r = fx.recover(Decisions {
        apply_unauthenticated: true,
        ..Decisions::automatic()
    });
    assert_eq!((r.restored, r.kept.len()), (0, 1));
    fx.outside_untouched();
    // Discarded on request.
    let r = fx.recover(Decisions {
        discard: true,
        ..Decisions::default()
    });
    assert_eq!(r.discarded.len(), 1);
    fx.outside_untouched();
}

#[test]
fn a_rekey_worker_writes_authenticated_records() {
    let fx = Fx::new();
    let k = Arc::new(key(3));
    let mut io = JournalIo::create(&fx.door(), 0, k.clone(), GEN, Some(ID), None).unwrap();
    io.target(0, Path::new("d/f"));
    let h = std::fs::read(fx.root.join("d/f")).unwrap()[..header::LEN].to_vec();
    // Without the file's header a record has no sequence number.
    assert!(io.save(&fx.id, &[(100, &[0xee; 64][..])]).is_err());
    io.save(&fx.id, &[(0, &h[..]), (100, &[0xee; 64][..])]).unwrap();
    assert!(matches!(&fx.states()[..], [State::Ready(r)]
        if r.generation == GEN && r.path == b"d/f" && r.rekey == Some(Rekey { id: ID, seq: 0 })));
    // A second worker may not take over a journal with a record.
    assert!(JournalIo::create(&fx.door(), 0, k.clone(), GEN, Some(ID), None).is_err());
    let r = fx.recover(Decisions::automatic());
    assert_eq!(r.restored, 1);
    assert!(fx.inside_restored());
    fx.outside_untouched();
}

/// What a worker's journal holds after saving the record of segment
/// `seq` of the file (its header at watermark `seq`).
fn saved(fx: &Fx, io: &mut JournalIo, seq: u32) -> Vec<u8> {
    fx.at(0, seq);
    let h = std::fs::read(fx.root.join("d/f")).unwrap()[..header::LEN].to_vec();
    io.save(&fx.id, &[(0, &h[..]), (100, &[0xee; 64][..])]).unwrap();
    std::fs::read(fx.root.join(format!("{JOURNAL_PREFIX}0"))).unwrap()
}

#[test]
fn a_record_replayed_from_earlier_in_the_same_journal_is_refused() {
    let fx = Fx::new();
    let mut io = JournalIo::create(&fx.door(), 0, Arc::new(key(3)), GEN, Some(ID), None).unwrap();
    io.target(0, Path::new("d/f"));
    // Segments 0 and 1 move; the rekey stops while moving segment 2.
    let first = saved(&fx, &mut io, 0);
    io.done().unwrap();
    let second = saved(&fx, &mut io, 1);
    io.done().unwrap();
    let third = saved(&fx, &mut io, 2);
    drop(io);
    // Segment 0's record put back in the journal: refused, never applied.
    let j = fx.plant(&first);
    let st = fx.states();
    assert!(
        matches!(&st[..], [State::Refused(m)] if m.contains("out of sequence") && m.contains("segment 2")),
        "{st:?}"
    );
    fx.refused(&j, "out of sequence");
    // Segment 1's after segment 2's header was written too.
    fx.at(0, 3);
    fx.plant(&second);
    assert!(matches!(&fx.states()[..], [State::Refused(m)] if m.contains("out of sequence")));
    // The genuine one, before or after its header was written, is applied.
    for w in [2, 3] {
        fx.at(0, w);
        fx.plant(&third);
        let r = fx.recover(Decisions::automatic());
        assert_eq!((r.restored, r.kept.len()), (1, 0), "watermark {w}: {r:?}");
        assert!(fx.inside_restored());
        let b = std::fs::read(fx.root.join("d/f")).unwrap();
        assert_eq!(
            Header::parse(&b[..header::LEN]).unwrap().rekeyed,
            2,
            "its old header is back"
        );
    }
    // A record of a file that has finished its move.
    fx.at(GEN, 0);
    fx.plant(&third);
    assert!(matches!(&fx.states()[..], [State::Refused(m)] if m.contains("key generation 1")));
    fx.outside_untouched();
}

#[test]
fn a_record_of_another_rekey_is_refused() {
    // Same volume key, same target generation, another rekey's ID (a copy
    // of the volume rekeyed on its own, or an earlier rekey to it).
    let fx = Fx::new();
    let other = Record {
        rekey: Some(Rekey { id: [0x2e; 16], seq: 0 }),
        ..fx.rec("d/f")
    };
    let j = fx.plant(&other.encode(&fx.key));
    fx.refused(&j, "another rekey");
    // A record without an ID while the rekey has one, and the reverse.
    let plain = Record {
        rekey: None,
        ..fx.rec("d/f")
    };
    let j = fx.plant(&plain.encode(&fx.key));
    fx.refused(&j, "has no rekey ID");
    fx.plant(&fx.rec("d/f").encode(&fx.key));
    let none = Expected {
        rekey_id: None,
        ..EXPECTED
    };
    let st = inspect_in(&fx.door(), &fx.key, none).unwrap();
    assert!(
        matches!(&st[0].state, State::Refused(m) if m.contains("carries a rekey ID")),
        "{st:?}"
    );
    // A rekey of an earlier warpfs (no ID) still applies its own records.
    std::fs::remove_file(&j).unwrap();
    fx.plant(&plain.encode(&fx.key));
    let r = recover_in(&fx.door(), &fx.key, none, Decisions::automatic()).unwrap();
    assert_eq!((r.restored, r.kept.len()), (1, 0));
    assert!(fx.inside_restored());
    fx.outside_untouched();
}

#[test]
fn records_out_of_order_are_refused() {
    // A record of a segment the file has not reached.
    let fx = Fx::new();
    fx.at(0, 2);
    let ahead = Record {
        rekey: Some(Rekey { id: ID, seq: 2 }),
        ..fx.rec("d/f")
    };
    fx.at(0, 0);
    let j = fx.plant(&ahead.encode(&fx.key));
    fx.refused(&j, "out of sequence");
    // A sequence number that is not its saved header's.
    let fx = Fx::new();
    let wrong = Record {
        rekey: Some(Rekey { id: ID, seq: 1 }),
        ..fx.rec("d/f")
    };
    let j = fx.plant(&wrong.encode(&fx.key));
    fx.refused(&j, "sequence number is not its segment's");
    // Two journals naming the same file: neither is applied.
    let fx = Fx::new();
    let rec = fx.rec("d/f");
    fx.plant(&rec.encode(&fx.key));
    let j1 = fx.root.join(format!("{JOURNAL_PREFIX}1"));
    std::fs::write(&j1, rec.encode(&fx.key)).unwrap();
    let st = fx.states();
    assert!(
        st.iter()
            .all(|s| matches!(s, State::Refused(m) if m.contains("names the same file")))
            && st.len() == 2,
        "{st:?}"
    );
    let r = fx.recover(Decisions::automatic());
    assert_eq!((r.restored, r.kept.len()), (0, 2));
    assert!(!fx.inside_restored());
    fx.outside_untouched();
}
