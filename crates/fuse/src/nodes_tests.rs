//! Unit tests of the node table.

use super::*;

#[test]
fn relink_makes_every_name_again_from_the_root_down() {
    let n = Nodes::new(7, 500);
    n.remember(10, ROOT, "d-old", OsStr::new("d"), true);
    n.remember(11, 10, "e-old", OsStr::new("e"), true);
    n.remember(12, 11, "f-old", OsStr::new("f"), true);
    // A hard link in the root, and a name that no longer resolves.
    n.remember(12, ROOT, "g-old", OsStr::new("g"), false);
    n.remember(13, ROOT, "gone-old", OsStr::new("gone"), true);
    let mut seen = Vec::new();
    n.relink(|dir, p| {
        seen.push((dir.to_path_buf(), p.to_os_string()));
        (p != "gone").then(|| format!("{}-new", p.to_string_lossy()))
    });
    assert_eq!(n.locate(12).unwrap().backing, PathBuf::from("g-new"));
    assert_eq!(n.locate(11).unwrap().backing, PathBuf::from("d-new/e-new"));
    assert!(n.locate(13).is_none(), "a name not made again is dropped");
    // Each parent's new path was given for its children.
    assert!(seen.contains(&(PathBuf::from("d-new/e-new"), "f".into())), "{seen:?}");
    n.unlinked(ROOT, "g-new");
    assert_eq!(n.locate(12).unwrap().backing, PathBuf::from("d-new/e-new/f-new"));
    n.unlinked(11, "f-old");
    assert!(n.locate(12).is_some(), "old names are gone from the index");
}

#[test]
fn locate_follows_parents_and_renames() {
    let n = Nodes::new(7, 500);
    n.remember(10, ROOT, "cA", OsStr::new("a"), false);
    n.remember(11, 10, "cB", OsStr::new("b"), false);
    let l = n.locate(11).unwrap();
    assert_eq!(l.backing, PathBuf::from("cA/cB"));
    assert_eq!(l.plain, "/a/b");
    n.renamed((10, "cB", OsStr::new("b")), (ROOT, "cC", OsStr::new("c")), false);
    assert_eq!(n.locate(11).unwrap().backing, PathBuf::from("cC"));
}

/// A symlink moved by a rename is made anew (bound seals) and may get
/// the number of an entry removed earlier whose inode the kernel still
/// holds: the moved node keeps its id, and that stale node loses its
/// names and gets another generation, so the kernel does not take the
/// old inode (and its cached target) for anything.
#[test]
fn a_number_reused_by_a_recreated_symlink_retires_the_stale_node() {
    let n = Nodes::new(7, 500);
    let old = n.remember(40, ROOT, "gone", OsStr::new("gone"), true);
    n.unlinked(ROOT, "gone"); // removed; the kernel has not forgotten 40
    n.remember(41, ROOT, "s", OsStr::new("s"), true);
    // rename s -> t: the moved node follows, the new backing symlink is 40
    let (moved, _) = n.renamed((ROOT, "s", OsStr::new("s")), (ROOT, "t", OsStr::new("t")), false);
    assert_eq!(moved, Some(41));
    n.rebacked(&[(41, 7, 40)]);
    assert_eq!(n.node_id(7, 40), 41, "the moved symlink keeps its node");
    assert_eq!(n.backing(41), Some((7, 40)));
    assert_eq!(n.locate(41).unwrap().backing, PathBuf::from("t"));
    // The stale node 40 took no name, and a new entry given 41 (freed by
    // the move) is not the moved node.
    assert!(n.locate(40).is_none());
    let fresh = n.node_id(7, 41);
    assert!(fresh >= OTHER_DEVICE_BASE, "41 is held by the moved symlink: {fresh}");
    let g = n.remember(fresh, ROOT, "u", OsStr::new("u"), true);
    assert_ne!(g, old);
    assert_eq!(n.locate(41).unwrap().backing, PathBuf::from("t"));
    // The root, and an empty batch, are left alone.
    n.rebacked(&[(ROOT, 7, 99)]);
    assert_eq!(n.node_id(7, 500), ROOT);
    assert_eq!(n.locate(ROOT).unwrap().plain, "/");
}

/// The failure a reused number used to cause: s1 moves twice (new backing
/// inodes each time), then another symlink moved over a third is made
/// anew with s1's first number. s1 must still read as s1, not as the
/// other symlink.
#[test]
fn a_moved_symlinks_old_number_reused_by_another_move_leaves_it_alone() {
    let n = Nodes::new(7, 500);
    n.remember(10, ROOT, "d", OsStr::new("d"), true);
    n.remember(21, ROOT, "s1", OsStr::new("s1"), true);
    n.remember(22, ROOT, "s2", OsStr::new("s2"), true);
    n.remember(23, ROOT, "s3", OsStr::new("s3"), true);
    n.renamed((ROOT, "s1", OsStr::new("s1")), (ROOT, "s1r", OsStr::new("s1r")), false);
    n.rebacked(&[(21, 7, 30)]);
    n.renamed((ROOT, "s1r", OsStr::new("s1r")), (10, "s1", OsStr::new("s1")), false);
    n.rebacked(&[(21, 7, 31)]);
    // s2 over s3, made anew as inode 21 (s1's first number).
    n.renamed((ROOT, "s2", OsStr::new("s2")), (ROOT, "s3", OsStr::new("s3")), false);
    n.rebacked(&[(22, 7, 21)]);
    assert_eq!(n.locate(21).unwrap().backing, PathBuf::from("d/s1"));
    assert_eq!(n.backing(21), Some((7, 31)));
    assert_eq!(n.backing(22), Some((7, 21)));
    // A lookup of s3 finds inode 21: node 22, not s1's node.
    assert_eq!(n.node_id(7, 21), 22);
    n.remember(n.node_id(7, 21), ROOT, "s3", OsStr::new("s3"), false);
    assert_eq!(n.locate(21).unwrap().backing, PathBuf::from("d/s1"));
    assert_eq!(n.locate(22).unwrap().backing, PathBuf::from("s3"));
    assert_eq!(n.node_id(7, 31), 21);
    // Once the kernel forgets s1's node, its inode is its own number again
    // and 21 is node 22's alias still.
    n.forget(21, 1);
    assert_eq!(n.node_id(7, 31), 31);
    assert_eq!(n.node_id(7, 21), 22);
    n.forget(22, 2);
    assert_eq!(n.node_id(7, 21), 21);
    assert_eq!(n.backing(22), Some((7, 22)));
}

/// Two symlinks exchanged are both made anew, and each may take the
/// other's old number: in one batch neither is taken for stale.
#[test]
fn exchanged_symlinks_swapping_numbers_keep_their_nodes_and_names() {
    let n = Nodes::new(7, 500);
    n.remember(41, ROOT, "a", OsStr::new("a"), true);
    n.remember(42, ROOT, "b", OsStr::new("b"), true);
    let (m, d) = n.renamed((ROOT, "a", OsStr::new("a")), (ROOT, "b", OsStr::new("b")), true);
    assert_eq!((m, d), (Some(41), Some(42)));
    n.rebacked(&[(41, 7, 42), (42, 7, 41)]);
    assert_eq!(n.locate(41).unwrap().backing, PathBuf::from("b"));
    assert_eq!(n.locate(42).unwrap().backing, PathBuf::from("a"));
    assert_eq!((n.node_id(7, 42), n.node_id(7, 41)), (41, 42));
}

/// A node off the root's device (a table id) moves its key.
#[test]
fn a_table_node_made_anew_moves_its_key() {
    let n = Nodes::new(7, 500);
    let id = n.node_id(9, 5);
    n.remember(id, ROOT, "s", OsStr::new("s"), true);
    n.rebacked(&[(id, 9, 6)]);
    assert_eq!(n.node_id(9, 6), id);
    assert_eq!(n.backing(id), Some((9, 6)));
    assert_ne!(n.node_id(9, 5), id, "the old key is free");
    n.forget(id, 1);
    assert_ne!(n.node_id(9, 6), id);
}

#[test]
fn hard_link_survives_unlink_of_one_name() {
    let n = Nodes::new(7, 500);
    n.remember(20, ROOT, "x", OsStr::new("x"), false);
    n.remember(20, ROOT, "y", OsStr::new("y"), false);
    n.unlinked(ROOT, "y");
    assert_eq!(n.locate(20).unwrap().backing, PathBuf::from("x"));
    n.unlinked(ROOT, "x");
    assert!(n.locate(20).is_none());
}

#[test]
fn exchange_swaps_names_and_forget_drops() {
    let n = Nodes::new(7, 500);
    n.remember(30, ROOT, "p", OsStr::new("p"), false);
    n.remember(31, ROOT, "q", OsStr::new("q"), false);
    n.renamed((ROOT, "p", OsStr::new("p")), (ROOT, "q", OsStr::new("q")), true);
    assert_eq!(n.locate(30).unwrap().backing, PathBuf::from("q"));
    assert_eq!(n.locate(31).unwrap().backing, PathBuf::from("p"));
    n.forget(30, 1);
    assert!(n.locate(30).is_none());
}

#[test]
fn reused_number_gets_a_new_generation_and_drops_stale_names() {
    let n = Nodes::new(7, 500);
    let g1 = n.remember(40, ROOT, "old", OsStr::new("old"), true);
    // A lookup of a known node (e.g. a hard link) keeps its generation.
    assert_eq!(n.remember(40, ROOT, "old2", OsStr::new("old2"), false), g1);
    // The old file is gone, its FORGET not yet here, and a new file gets
    // its number: a new generation, only the new name.
    n.unlinked(ROOT, "old");
    let g2 = n.remember(40, ROOT, "new", OsStr::new("new"), true);
    assert_ne!(g1, g2);
    assert_eq!(n.locate(40).unwrap().backing, PathBuf::from("new"));
    // The stale second name no longer points at node 40.
    n.unlinked(ROOT, "old2");
    assert_eq!(n.locate(40).unwrap().backing, PathBuf::from("new"));
    // The old inode's FORGET (3 lookups so far, 2 of them old) leaves the new one.
    n.forget(40, 2);
    assert_eq!(n.locate(40).unwrap().backing, PathBuf::from("new"));
    assert_eq!(n.remember(40, ROOT, "new", OsStr::new("new"), false), g2);
    n.forget(40, 2);
    assert!(n.locate(40).is_none());
    // A number seen again after its FORGET starts a new generation too.
    assert_ne!(n.remember(40, ROOT, "again", OsStr::new("again"), false), g2);
}

#[test]
fn root_number_swap_is_a_bijection() {
    let n = Nodes::new(7, 500);
    assert_eq!(n.node_id(7, 500), ROOT);
    assert_eq!(n.node_id(7, 1), 500);
    assert_eq!(n.node_id(7, 77), 77);
    for b in [500, 1, 77] {
        assert_eq!(n.backing(n.node_id(7, b)), Some((7, b)));
    }
}

#[test]
fn equal_inode_numbers_on_two_devices_are_two_nodes() {
    let n = Nodes::new(7, 500);
    let (a, b) = (n.node_id(7, 77), n.node_id(8, 77));
    assert_ne!(a, b);
    assert!(b >= OTHER_DEVICE_BASE);
    assert_eq!(n.node_id(8, 77), b);
    assert_ne!(n.node_id(9, 77), b);
    assert_eq!(n.backing(b), Some((8, 77)));
    assert_eq!(n.backing(a), Some((7, 77)));
    // Forgotten, the pair gets a fresh id next time.
    n.remember(b, ROOT, "x", OsStr::new("x"), false);
    n.forget(b, 1);
    assert_eq!(n.backing(b), None);
    assert_ne!(n.node_id(8, 77), b);
}

const HIGH: u64 = 1 << 63;

/// Every node id of `pairs` (asked in this order), checked to be
/// pairwise different and to lead back to its (device, inode).
fn distinct_ids(n: &Nodes, pairs: &[(u64, u64)]) -> Vec<u64> {
    let ids: Vec<u64> = pairs.iter().map(|&(d, i)| n.node_id(d, i)).collect();
    for (k, (&id, &pair)) in ids.iter().zip(pairs).enumerate() {
        assert_ne!(id, 0, "{pair:?} got node id 0");
        assert_eq!(n.backing(id), Some(pair), "node {id:#x} of {pair:?}");
        assert_eq!(n.node_id(pair.0, pair.1), id, "{pair:?} asked again");
        for (&other, &op) in ids[..k].iter().zip(pairs) {
            assert_ne!(id, other, "{pair:?} and {op:?} share node id {id:#x}");
        }
    }
    ids
}

#[test]
fn inode_numbers_from_2_63_up_on_two_devices_never_share_a_node() {
    // The root's device (7) hands out numbers at and above 2^63 (NFS,
    // GlusterFS, overlayfs with xino); device 8 does too, and small ones.
    let high = [HIGH, HIGH + 1, HIGH + 2, u64::MAX, u64::MAX - 1];
    for other_first in [true, false] {
        let n = Nodes::new(7, 500);
        let mut pairs = Vec::new();
        let on = |d: u64| high.iter().map(move |&i| (d, i));
        if other_first {
            pairs.extend(on(8).chain([(8, 1), (8, 77), (8, 500)]).chain(on(7)));
        } else {
            pairs.extend(on(7).chain(on(8)).chain([(8, 1), (8, 77), (8, 500)]));
        }
        pairs.extend([(7, 500), (7, 1), (7, 77), (7, HIGH - 1)]);
        let ids = distinct_ids(&n, &pairs);
        // Below 2^63 the root's device keeps its numbers.
        assert_eq!(&ids[ids.len() - 4..], &[ROOT, 500, 77, HIGH - 1]);
        // Every table id is at or above 2^63, never a kept number.
        for (&id, &(d, i)) in ids.iter().zip(&pairs) {
            if d != 7 || i >= HIGH {
                assert!(id >= OTHER_DEVICE_BASE, "({d}, {i:#x}) got {id:#x}");
            }
        }
    }
}

#[test]
fn a_root_numbered_from_2_63_up_keeps_inode_1_apart() {
    let root = HIGH + 3;
    let n = Nodes::new(7, root);
    assert_eq!(n.node_id(7, root), ROOT);
    let ids = distinct_ids(&n, &[(7, 1), (7, HIGH), (7, HIGH + 1), (8, root), (8, 1), (7, 2)]);
    assert!(ids[0] >= OTHER_DEVICE_BASE, "inode 1 got {:#x}", ids[0]);
    assert_eq!(ids[5], 2);
    assert_eq!(n.backing(ROOT), Some((7, root)));
}

#[test]
fn a_reused_number_from_2_63_up_still_gets_a_new_generation() {
    let n = Nodes::new(7, 500);
    let id = n.node_id(7, HIGH + 9);
    let g1 = n.remember(id, ROOT, "old", OsStr::new("old"), true);
    n.unlinked(ROOT, "old");
    // The backing file system gave the number to a new file before the
    // kernel forgot the old one: same node, new generation.
    assert_eq!(n.node_id(7, HIGH + 9), id);
    let g2 = n.remember(id, ROOT, "new", OsStr::new("new"), true);
    assert_ne!(g1, g2);
    assert_eq!(n.locate(id).unwrap().backing, PathBuf::from("new"));
    // Once forgotten, the id leads nowhere, so an open-file lookup by a
    // stale id cannot land on another inode; the pair gets a new id.
    n.forget(id, 2);
    assert_eq!(n.backing(id), None);
    let again = n.node_id(7, HIGH + 9);
    assert_ne!(again, id);
    assert_ne!(n.node_id(8, HIGH + 9), again);
}
