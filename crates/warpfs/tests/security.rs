//! What the cipher dir reveals and how tampering is handled: no plaintext
//! names, contents, link targets or xattrs in CIPHERDIR; cipher-file headers
//! and nonces per FORMAT.md 3; GCM tag failures are EIO + a log line naming
//! file and block; CTR is malleable but never errors; corrupt cipher files
//! are errors, never a crash.

#[macro_use]
mod common;

use common::*;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

mode_tests!(no_plaintext_in_cipher_dir, corrupt_cipher_files, stray_backing_entries);
mode_tests!(nonce: headers_and_nonces, crash_inside_nonce_page);

const MARKER: &str = "ZebraMarker7f3a";

fn llistxattr_raw(p: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let c = cstr(p);
    let mut names = vec![0u8; 65536];
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    names.truncate(n as usize);
    let mut out = Vec::new();
    for name in names.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let cn = std::ffi::CString::new(name).unwrap();
        let mut val = vec![0u8; 65536];
        let m = unsafe { libc::lgetxattr(c.as_ptr(), cn.as_ptr(), val.as_mut_ptr().cast(), val.len()) };
        val.truncate(m.max(0) as usize);
        out.push((name.to_vec(), val));
    }
    out
}

fn no_plaintext_in_cipher_dir(mode: Mode) {
    require_fuse!();
    let mut v = Volume::new(mode);
    let m = MARKER;
    let content = |n: usize| -> Vec<u8> { m.as_bytes().iter().cycle().take(n).copied().collect() };
    write_file(&v.p(format!("{m}.txt")), &content(100));
    fs::create_dir(v.p(format!("{m}-dir"))).unwrap();
    write_file(&v.p(format!("{m}-dir/{m}-medium")), &content(70_000));
    write_file(&v.p(format!("{m}-dir/{m}-large")), &content(1_200_000));
    let long = m.repeat(15); // 225 bytes
    write_file(&v.p(&long), &content(5000));
    std::os::unix::fs::symlink(format!("../{m}/target"), v.p(format!("{m}-link"))).unwrap();
    mknod_fifo(&v.p(format!("{m}-fifo")), 0o644).unwrap();
    let with_xattrs = backing_supports_user_xattrs(v.root()) && xattrs_or_refused(&v.p(format!("{m}.txt")));
    if with_xattrs {
        setxattr(&v.p(format!("{m}.txt")), &format!("user.{m}"), &content(300), 0).expect("setxattr");
        setxattr(&v.p(format!("{m}-dir")), "user.plain", &content(50), 0).expect("setxattr on dir");
    } else {
        eprintln!("note: backing fs has no user xattrs; not testing xattr leakage");
    }
    v.unmount();

    let mut leaks = Vec::new();
    let needle = m.as_bytes();
    for p in v.backing_paths() {
        let rel = p.strip_prefix(&v.cipher).unwrap();
        if contains(rel.as_os_str().as_encoded_bytes(), needle) {
            leaks.push(format!("name: {}", rel.display()));
        }
        let md = fs::symlink_metadata(&p).unwrap();
        {
            use std::os::unix::fs::MetadataExt;
            if !md.file_type().is_symlink() && md.mode() & 0o002 != 0 {
                leaks.push(format!(
                    "world-writable backing entry {} ({:o})",
                    rel.display(),
                    md.mode() & 0o7777
                ));
            }
        }
        if md.file_type().is_symlink() {
            let t = fs::read_link(&p).unwrap();
            if contains(t.as_os_str().as_encoded_bytes(), needle) {
                leaks.push(format!("symlink target of {}", rel.display()));
            }
        } else if md.file_type().is_file() {
            let data = fs::read(&p).unwrap();
            if contains(&data, needle) {
                leaks.push(format!("content of {}", rel.display()));
            }
            if contains(&data, PASSWORD.as_bytes()) {
                leaks.push(format!("password in {}", rel.display()));
            }
        }
        for (n, val) in llistxattr_raw(&p) {
            if contains(&n, needle) || contains(&val, needle) {
                leaks.push(format!("xattr {} of {}", String::from_utf8_lossy(&n), rel.display()));
            }
        }
    }
    if contains(v.log().as_bytes(), PASSWORD.as_bytes()) {
        leaks.push("password in the log file".into());
    }
    assert!(
        leaks.is_empty(),
        "plaintext found in the cipher dir:\n  {}",
        leaks.join("\n  ")
    );
}

/// The backing file whose length is the one a plaintext of `size` bytes has.
fn backing_by_size(v: &Volume, size: u64) -> PathBuf {
    let want = v.mode.backing_len(size);
    let found: Vec<PathBuf> = v
        .backing_paths()
        .into_iter()
        .filter(|p| {
            let md = fs::symlink_metadata(p).unwrap();
            md.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with("warpfs.") && md.len() == want
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one backing file of length {want} (plaintext {size}); found {found:?}"
    );
    found.into_iter().next().unwrap()
}

fn read_range(p: &Path, off: u64, len: usize) -> Vec<u8> {
    let f = File::open(p).unwrap();
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, off).unwrap();
    b
}

fn flip(p: &Path, off: u64, mask: u8) {
    let f = OpenOptions::new().read(true).write(true).open(p).unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, off).unwrap();
    b[0] ^= mask;
    f.write_all_at(&b, off).unwrap();
    f.sync_all().unwrap();
}

fn headers_and_nonces(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("headers-{}", mode.name()));
    let mut v = Volume::new(mode);
    let e = mode.entry_size();
    // Two files with the same content, one sparse file, one empty file.
    let data = rng.bytes(20 * BLOCK as usize + 5); // 21 blocks
    write_file(&v.p("one"), &data);
    let mut data2 = data.clone();
    data2.push(0); // distinct size, same first 21 blocks
    write_file(&v.p("two"), &data2);
    {
        let f = open_rw(&v.p("sparse"));
        write_at(&f, 5 * BLOCK, b"only block 5").unwrap();
        f.sync_all().unwrap();
    }
    File::create(v.p("empty")).unwrap();
    v.unmount();

    let one = backing_by_size(&v, data.len() as u64);
    let two = backing_by_size(&v, data2.len() as u64);
    let sparse = backing_by_size(&v, 5 * BLOCK + 12);
    let empty = backing_by_size(&v, 0);
    assert_eq!(
        fs::metadata(&empty).unwrap().len(),
        0,
        "empty file has an empty backing file"
    );

    let summaries = fs::read_to_string(v.cipher.join("warpfs.conf"))
        .unwrap()
        .contains("\"file-summary\"");
    let hdr1 = read_range(&one, 0, 32);
    let hdr2 = read_range(&two, 0, 32);
    for (name, h) in [("one", &hdr1), ("two", &hdr2)] {
        assert_eq!(&h[0..4], b"WRPF", "{name}: magic");
        // Version 2 with a file summary (the default in gcm and
        // xchacha20-poly1305, FORMAT.md 12).
        let version = if summaries { 2 } else { 1 };
        assert_eq!(u16::from_le_bytes([h[4], h[5]]), version, "{name}: format version");
        assert_eq!(h[6], mode.mode_byte(), "{name}: content mode byte");
        assert_eq!(h[7], 0, "{name}: flags");
        assert_eq!(&h[24..32], &[0u8; 8], "{name}: reserved");
        assert_ne!(&h[8..24], &[0u8; 16], "{name}: file ID is zero");
    }
    assert_ne!(&hdr1[8..24], &hdr2[8..24], "two files share a file ID");

    // Same plaintext in two files: different ciphertext and nonces.
    for b in [0u64, 3, 15, 16, 19] {
        let c1 = read_range(&one, mode.block_data_offset(b), 64);
        let c2 = read_range(&two, mode.block_data_offset(b), 64);
        assert_ne!(
            c1, c2,
            "block {b} of two files with equal plaintext has equal ciphertext"
        );
        let p = &data[(b * BLOCK) as usize..(b * BLOCK) as usize + 64];
        assert_ne!(&c1[..], p, "block {b} stored in plaintext");
        let n1 = read_range(&one, mode.block_entry_offset(b), e as usize);
        let n2 = read_range(&two, mode.block_entry_offset(b), e as usize);
        assert_ne!(&n1[..12], &[0u8; 12], "block {b}: written block has a zero nonce");
        // Format 1: the key generation, 0. With a file summary these bytes
        // are the summary's slots (FORMAT.md 12.2): the record in entries
        // 0-7, a marker or zeros in 8-15 and in a page's first 8.
        if !summaries {
            assert_eq!(
                &n1[12..16],
                &[0u8; 4],
                "block {b}: key generation must be 0 in format 1"
            );
        }
        assert_ne!(&n1[..12], &n2[..12], "block {b}: nonce reused across files");
    }
    // Sparse: entries of blocks 0..4 are all zero, block 5 is written.
    for b in 0..5u64 {
        let n = mode.entry_view(&read_range(&sparse, mode.block_entry_offset(b), e as usize));
        assert!(
            n.iter().all(|x| *x == 0),
            "hole block {b} has a non-zero entry {n:02x?}"
        );
    }
    let n5 = read_range(&sparse, mode.block_entry_offset(5), e as usize);
    assert_ne!(&n5[..12], &[0u8; 12], "written block 5 has a zero nonce");

    // Rewriting a block with the same plaintext uses a fresh nonce, and a
    // new mount uses a new epoch (first 8 nonce bytes).
    let nonce_before = read_range(&one, mode.block_entry_offset(3), 12);
    let data_before = read_range(&one, mode.block_data_offset(3), BLOCK as usize);
    let nonce17_before = read_range(&one, mode.block_entry_offset(17), 12);
    v.mount();
    {
        let f = OpenOptions::new().write(true).open(v.p("one")).unwrap();
        write_at(&f, 3 * BLOCK, &data[(3 * BLOCK) as usize..(4 * BLOCK) as usize]).unwrap();
        write_at(
            &f,
            17 * BLOCK + 10,
            &data[(17 * BLOCK + 10) as usize..(17 * BLOCK + 20) as usize],
        )
        .unwrap();
        f.sync_all().unwrap();
    }
    v.unmount();
    let nonce_after = read_range(&one, mode.block_entry_offset(3), 12);
    let data_after = read_range(&one, mode.block_data_offset(3), BLOCK as usize);
    let nonce17_after = read_range(&one, mode.block_entry_offset(17), 12);
    assert_ne!(nonce_before, nonce_after, "rewriting block 3 kept its nonce");
    assert_ne!(
        data_before, data_after,
        "rewriting block 3 with the same plaintext gave the same ciphertext"
    );
    assert_ne!(
        nonce17_before, nonce17_after,
        "partial rewrite of block 17 kept its nonce"
    );
    assert_ne!(
        &nonce_before[..8],
        &nonce_after[..8],
        "a new mount reused the nonce epoch"
    );
    assert_eq!(
        fs::metadata(&one).unwrap().len(),
        mode.backing_len(data.len() as u64),
        "backing length after rewrite"
    );
    v.mount();
    assert_bytes_eq(&fs::read(v.p("one")).unwrap(), &data, "one after rewrites");
}

/// Whether the log has a line matching `pred`. The daemon writes a corrupt
/// block's line (unbuffered) before it replies EIO, so once the failed
/// call returned the line is there: no waiting.
fn log_has_line(v: &Volume, pred: impl Fn(&str) -> bool) -> bool {
    v.log().lines().any(pred)
}

/// Does `line` contain "block N" with N not followed by another digit?
fn names_block(line: &str, n: u64) -> bool {
    let pat = format!("block {n}");
    line.match_indices(&pat)
        .any(|(i, _)| !line[i + pat.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

#[test]
fn gcm_tamper_is_eio_and_logged() {
    require_fuse!();
    let mode = Mode::Gcm;
    let mut rng = Rng::for_test("gcm_tamper");
    // Block by block, on a volume without file summaries (with them, the
    // default, a changed nonce fails the whole file:
    // attacks::detected::with_summaries).
    let mut v = Volume::init_with(mode, &["--file-summary", "off"]);
    v.mount();
    let nblocks = 300u64; // blocks 16..271 in page 0, 272.. in page 1
    let data = rng.bytes((nblocks * BLOCK) as usize);
    fs::create_dir(v.p("dir")).unwrap();
    write_file(&v.p("dir/victim.bin"), &data);
    let id_data = rng.bytes(5 * BLOCK as usize + 7);
    write_file(&v.p("dir/idtamper.bin"), &id_data);
    v.unmount();

    let victim = backing_by_size(&v, data.len() as u64);
    let e = mode.entry_size();
    // Data byte flips.
    for b in [3u64, 17, 280] {
        flip(&victim, mode.block_data_offset(b) + 100, 0x01);
    }
    // Tag byte flip (entry bytes 16..32) and nonce byte flip.
    flip(&victim, mode.block_entry_offset(5) + 20, 0x80);
    flip(&victim, mode.block_entry_offset(6) + 2, 0x01);
    // Move block 8 (data + entry) onto block 9: AD binds the block number.
    let d8 = read_range(&victim, mode.block_data_offset(8), BLOCK as usize);
    let e8 = read_range(&victim, mode.block_entry_offset(8), e as usize);
    {
        let f = OpenOptions::new().write(true).open(&victim).unwrap();
        f.write_all_at(&d8, mode.block_data_offset(9)).unwrap();
        f.write_all_at(&e8, mode.block_entry_offset(9)).unwrap();
    }
    // File ID flip: every block of that file fails.
    let idf = backing_by_size(&v, id_data.len() as u64);
    flip(&idf, 10, 0x04);

    v.mount();
    let bad = [3u64, 5, 6, 9, 17, 280];
    let f = File::open(v.p("dir/victim.bin")).unwrap();
    // Bad blocks first, each read on its own (nothing cached yet).
    for &b in &bad {
        match read_at(&f, b * BLOCK, BLOCK as usize) {
            Ok(got) => panic!(
                "reading tampered block {b} succeeded ({} bytes, equal to the original: {})",
                got.len(),
                got == data[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize]
            ),
            Err(e) => assert_eq!(errno(&e), libc::EIO, "tampered block {b}: expected EIO, got {e}"),
        }
    }
    for b in 0..nblocks {
        if bad.contains(&b) {
            continue;
        }
        let got =
            read_at(&f, b * BLOCK, BLOCK as usize).unwrap_or_else(|e| panic!("untampered block {b} unreadable: {e}"));
        assert_bytes_eq(
            &got,
            &data[(b * BLOCK) as usize..((b + 1) * BLOCK) as usize],
            &format!("block {b}"),
        );
    }
    // A whole-file read fails rather than returning anything wrong.
    assert_errno(
        fs::read(v.p("dir/victim.bin")),
        libc::EIO,
        "whole-file read of a tampered file",
    );
    // The file-ID flip breaks every block of idtamper.bin.
    for b in [0u64, 2, 5] {
        assert_errno(
            read_at(&File::open(v.p("dir/idtamper.bin")).unwrap(), b * BLOCK, 100),
            libc::EIO,
            &format!("idtamper.bin block {b} after a file ID flip"),
        );
    }
    // The log names the file (plaintext path) and the block.
    for &b in &bad {
        assert!(
            log_has_line(&v, |l| l.contains("/dir/victim.bin") && names_block(l, b)),
            "no log line naming \"/dir/victim.bin\" and \"block {b}\"; log:\n{}",
            v.log()
        );
    }
    assert!(
        log_has_line(&v, |l| l.contains("/dir/idtamper.bin") && names_block(l, 0)),
        "no log line naming \"/dir/idtamper.bin\" and \"block 0\"; log:\n{}",
        v.log()
    );
    // A partial write into a tampered block must fail: the read-modify-write
    // would otherwise re-seal forged bytes under a valid tag.
    {
        let w = OpenOptions::new().write(true).open(v.p("dir/victim.bin")).unwrap();
        let r = w.write_all_at(b"xyz", 3 * BLOCK + 50).and_then(|_| w.sync_all());
        assert!(r.is_err(), "a partial write into tampered block 3 succeeded");
        // A whole-block overwrite needs no read: it replaces the block.
        let fresh = rng.bytes(BLOCK as usize);
        w.write_all_at(&fresh, 17 * BLOCK)
            .expect("whole-block overwrite of tampered block 17");
        w.sync_all().unwrap();
        drop(w);
        let r = File::open(v.p("dir/victim.bin")).unwrap();
        drop_cache(&r);
        assert_eq!(
            read_at(&r, 17 * BLOCK, BLOCK as usize).expect("block 17 after overwrite"),
            fresh
        );
        assert_errno(
            read_at(&r, 3 * BLOCK, 10),
            libc::EIO,
            "block 3 after the refused partial write",
        );
    }
    // The mount is still healthy.
    write_file(&v.p("after.txt"), b"still works");
    assert_eq!(fs::read(v.p("after.txt")).unwrap(), b"still works");
}

#[test]
fn gcm_tamper_foreground_logs_to_stderr() {
    require_fuse!();
    let mut rng = Rng::for_test("gcm_tamper_fg");
    let mut v = Volume::new(Mode::Gcm);
    let data = rng.bytes(8 * BLOCK as usize);
    write_file(&v.p("f"), &data);
    v.unmount();
    flip(&v.single_backing_file(), Mode::Gcm.block_data_offset(2) + 7, 0x10);
    let fg = Foreground::start(&v, &[]);
    let f = File::open(v.p("f")).unwrap();
    assert_errno(
        read_at(&f, 2 * BLOCK, 10),
        libc::EIO,
        "tampered block 2 (foreground mount)",
    );
    drop(f);
    // Written to stderr (a file, unbuffered) before the EIO reply.
    assert!(
        fg.stderr().lines().any(|l| l.contains("/f") && names_block(l, 2)),
        "-f mount: no stderr line naming \"/f\" and \"block 2\"; stderr:\n{}",
        fg.stderr()
    );
}

#[test]
fn ctr_flip_changes_one_byte() {
    require_fuse!();
    let mode = Mode::Ctr;
    let mut rng = Rng::for_test("ctr_flip");
    let mut v = Volume::new(mode);
    let data = rng.bytes(300 * BLOCK as usize);
    fs::create_dir(v.p("dir")).unwrap();
    write_file(&v.p("dir/victim.bin"), &data);
    v.unmount();
    let victim = backing_by_size(&v, data.len() as u64);
    let mut want = data.clone();
    for b in [3u64, 17, 280] {
        flip(&victim, mode.block_data_offset(b) + 100, 0x01);
        want[(b * BLOCK + 100) as usize] ^= 0x01;
    }
    v.mount();
    let got = fs::read(v.p("dir/victim.bin")).expect("ctr: reading a flipped file must not fail");
    assert_bytes_eq(&got, &want, "ctr: exactly the flipped bits change");
    assert!(
        !v.log().to_lowercase().contains("mismatch"),
        "ctr mode logged a tag mismatch:\n{}",
        v.log()
    );
}

fn corrupt_cipher_files(mode: Mode) {
    require_fuse!();
    let mut rng = Rng::for_test(&format!("corrupt-{}", mode.name()));
    let mut v = Volume::new(mode);
    // Distinct sizes so each backing file can be found by its length.
    let cases = [
        "short",
        "badmagic",
        "badversion",
        "badmode",
        "badflags",
        "badreserved",
        "good",
    ];
    let mut datas = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let d = rng.bytes(3 * BLOCK as usize + i);
        write_file(&v.p(c), &d);
        datas.push(d);
    }
    v.unmount();
    let backing: Vec<PathBuf> = datas.iter().map(|d| backing_by_size(&v, d.len() as u64)).collect();
    // short: shorter than the header (L < H; xts's H is 32 bytes).
    OpenOptions::new()
        .write(true)
        .open(&backing[0])
        .unwrap()
        .set_len(100.min(mode.header_size() - 12))
        .unwrap();
    flip(&backing[1], 0, 0xff); // magic
    flip(&backing[2], 4, 0x02); // version 1 -> 3
    flip(&backing[3], 6, 0x03); // mode byte
    flip(&backing[4], 7, 0x01); // flags
    flip(&backing[5], 27, 0x01); // reserved
    v.mount();
    for (i, c) in cases.iter().enumerate() {
        let r = fs::read(v.p(c));
        if *c == "good" {
            assert_bytes_eq(&r.expect("the good file"), &datas[i], "good file next to corrupt ones");
        } else {
            // A bad header or length is corrupt data: EIO, and a log line
            // naming the file (written before the reply).
            assert_errno(
                r.map(|got| got.len()),
                libc::EIO,
                &format!("reading corrupt cipher file '{c}'"),
            );
            let log = v.log();
            assert!(
                log.lines().any(|l| l.contains(&format!("/{c}: "))),
                "no log line names the corrupt file '/{c}'; log:\n{log}"
            );
        }
        // The daemon is still alive after each.
        assert!(is_mounted(&v.mnt), "mount gone after reading '{c}'");
        assert!(
            fs::metadata(v.p("good")).is_ok(),
            "daemon not answering after reading '{c}'"
        );
    }
    // Writing to a corrupt file must fail, not silently replace the header.
    for c in ["badmagic", "badversion"] {
        let r = OpenOptions::new()
            .write(true)
            .open(v.p(c))
            .and_then(|f| f.write_all_at(b"x", 10).and_then(|_| f.sync_all()));
        assert_errno(r, libc::EIO, &format!("writing into corrupt cipher file '{c}'"));
    }
}

fn stray_backing_entries(mode: Mode) {
    // Files in CIPHERDIR that warpfs did not write must not break listing or
    // access to the real entries.
    require_fuse!();
    let mut v = Volume::new(mode);
    write_file(&v.p("real"), b"real");
    fs::create_dir(v.p("dir")).unwrap();
    write_file(&v.p("dir/inner"), b"inner");
    v.unmount();
    fs::write(v.cipher.join("stray.txt"), b"not from warpfs").unwrap();
    fs::write(v.cipher.join("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), b"bad name").unwrap();
    fs::write(v.cipher.join("warpfs.long.bogus"), b"no sidecar").unwrap();
    fs::create_dir(v.cipher.join("QUJDREVGR0hJSktMTU5PUA")).unwrap();
    v.mount();
    let names: Vec<String> = fs::read_dir(&v.mnt)
        .expect("listing a dir with stray backing entries")
        .map(|e| e.expect("readdir entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&"real".to_string()) && names.contains(&"dir".to_string()),
        "real entries missing from the listing: {names:?}"
    );
    assert_eq!(fs::read(v.p("real")).unwrap(), b"real");
    assert_eq!(fs::read(v.p("dir/inner")).unwrap(), b"inner");
    eprintln!("listing with stray entries: {names:?}");
}

fn crash_inside_nonce_page(mode: Mode) {
    // FORMAT.md 3.4: a backing length ending inside a nonce page (only after
    // a crash) reads as the size at that boundary.
    require_fuse!();
    let mut rng = Rng::for_test(&format!("crash_page-{}", mode.name()));
    let mut v = Volume::new(mode);
    let size = NNODE_DATA + SEGMENT; // ends exactly before page 1
    let data = rng.bytes(size as usize);
    write_file(&v.p("f"), &data);
    v.unmount();
    let b = v.single_backing_file();
    assert_eq!(fs::metadata(&b).unwrap().len(), mode.backing_len(size));
    for extra in [1, mode.page_size() / 2, mode.page_size()] {
        let f = OpenOptions::new().write(true).open(&b).unwrap();
        f.set_len(mode.backing_len(size) + extra).unwrap();
        drop(f);
        v.mount();
        assert_eq!(
            fs::metadata(v.p("f")).unwrap().len(),
            size,
            "plaintext size with {extra} bytes of a torn nonce page"
        );
        assert_bytes_eq(
            &fs::read(v.p("f")).unwrap(),
            &data,
            &format!("content with {extra} torn page bytes"),
        );
        v.unmount();
    }
    // Appending after such a crash works and rewrites the page.
    v.mount();
    {
        let mut f = OpenOptions::new().append(true).open(v.p("f")).unwrap();
        f.write_all(b"appended").unwrap();
        f.sync_all().unwrap();
    }
    v.remount();
    let mut want = data.clone();
    want.extend_from_slice(b"appended");
    assert_bytes_eq(&fs::read(v.p("f")).unwrap(), &want, "append after a torn page");
}
