//! Unit tests of the versions seen: what is refused, what is taken from
//! another host, the state across remounts, keys and concurrent mounts.
use super::*;
use warpfs_content::Witness;

fn master(b: u8) -> MasterKey {
    MasterKey::from_bytes(&[b; 32]).unwrap()
}

fn rec(seq: u64, t: u8) -> Record {
    Record {
        seq,
        size: seq * 10,
        tag: [t; 16],
    }
}

fn ks(generation: u32, rekey_under_way: bool, revision: u32) -> KeyState {
    KeyState {
        generation,
        rekey_under_way,
        revision,
    }
}

const ID: [u8; 16] = [7; 16];

#[test]
fn a_version_this_host_replaced_is_refused_and_any_other_taken() {
    let d = tempfile::tempdir().unwrap();
    let s = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
    assert!(s.opened(&ID, &rec(1, 1)).is_ok(), "first sight");
    s.replaced(&ID, &rec(1, 1), Some(&rec(2, 2)));
    s.replaced(&ID, &rec(2, 2), Some(&rec(3, 3)));
    assert!(s.opened(&ID, &rec(3, 3)).is_ok(), "the latest");
    for old in [rec(1, 1), rec(2, 2)] {
        let e = s.opened(&ID, &old).unwrap_err();
        assert!(e.contains("older version"), "{e}");
    }
    // Another host's versions, lower or higher: never seen, so taken.
    assert!(s.opened(&ID, &rec(2, 9)).is_ok());
    assert!(s.opened(&ID, &rec(9, 8)).is_ok());
    // Another file with the same record bytes is another file.
    assert!(s.opened(&[8; 16], &rec(1, 1)).is_ok());
}

#[test]
fn versions_survive_a_remount_under_the_same_key_only() {
    let d = tempfile::tempdir().unwrap();
    {
        let s = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
        s.check_config(ks(1, false, 0), Some([1; 32])).unwrap();
        s.replaced(&ID, &rec(1, 1), Some(&rec(2, 2)));
    }
    let s = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
    assert!(s.opened(&ID, &rec(1, 1)).is_err(), "written at drop, read back");
    // Another volume at another path has its own state.
    let o = Seen::open(d.path(), Path::new("/w"), &master(1)).unwrap();
    assert!(o.opened(&ID, &rec(1, 1)).is_ok());
    // Under another volume key only the key state is kept, as a floor.
    let n = Seen::open(d.path(), Path::new("/v"), &master(2)).unwrap();
    assert!(n.opened(&ID, &rec(1, 1)).is_ok());
    assert!(n.check_config(ks(0, true, 0), Some([3; 32])).is_err());
    assert!(n.check_config(ks(1, false, 0), Some([1; 32])).is_ok());
}

#[test]
fn a_config_a_command_replaced_is_refused_one_merely_seen_replaced_is_not() {
    let d = tempfile::tempdir().unwrap();
    let s = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
    s.check_config(ks(0, false, 1), Some([1; 32])).unwrap();
    // A sync tool settling a conflict shows one config, then another, then
    // the first again: never an alarm.
    s.check_config(ks(0, false, 1), Some([2; 32])).unwrap();
    s.check_config(ks(0, false, 1), Some([1; 32])).unwrap();
    // A passwd (or key add, key remove) on this host replaced [1] by [3].
    s.config_replaced((ks(0, false, 1), [1; 32]), (ks(0, false, 2), [3; 32]))
        .unwrap();
    let e = s.check_config(ks(0, false, 1), Some([1; 32])).unwrap_err();
    assert!(e.contains("put back"), "{e}");
    s.check_config(ks(0, false, 2), Some([3; 32])).unwrap();
    // A keyslot revision below the highest seen, in a config no command
    // here replaced (another host's conflicting edit), is taken.
    s.check_config(ks(0, false, 1), Some([4; 32])).unwrap();
    // A generation or a rekey step below the highest seen never is.
    s.check_config(ks(1, true, 0), Some([6; 32])).unwrap();
    let e = s.check_config(ks(1, false, 9), Some([7; 32])).unwrap_err();
    assert!(e.contains("older than"), "{e}");
    assert!(s.check_config(ks(2, false, 0), Some([8; 32])).is_ok());
    // A config the user names is held to the key state alone.
    assert!(s.check_config(ks(2, false, 0), None).is_ok());
    assert!(s.check_config(ks(1, true, 0), None).is_err());
}

#[test]
fn two_mounts_of_one_volume_merge_what_they_saw() {
    let d = tempfile::tempdir().unwrap();
    let a = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
    let b = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
    a.replaced(&ID, &rec(1, 1), Some(&rec(2, 2)));
    a.flush().unwrap();
    b.replaced(&[8; 16], &rec(1, 5), Some(&rec(2, 6)));
    b.flush().unwrap();
    let c = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap();
    assert!(c.opened(&ID, &rec(1, 1)).is_err());
    assert!(c.opened(&[8; 16], &rec(1, 5)).is_err());
}

#[test]
fn a_damaged_state_file_stops_the_load_with_its_path() {
    let d = tempfile::tempdir().unwrap();
    let p = state_path(d.path(), Path::new("/v"));
    std::fs::write(&p, b"not a state").unwrap();
    let e = Seen::open(d.path(), Path::new("/v"), &master(1)).unwrap_err();
    assert!(e.contains(&p.display().to_string()) && e.contains("remove it"), "{e}");
}
