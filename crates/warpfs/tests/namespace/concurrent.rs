//! Threads changing one namespace at once, and backing inode numbers
//! reused under concurrent create/unlink.

use super::*;

mode_tests!(all: concurrent_namespace, inode_number_reuse);

fn concurrent_namespace(mode: Mode) {
    // Threads creating, renaming, linking and deleting in one directory.
    require_fuse!();
    let mut v = Volume::new(mode);
    fs::create_dir(v.p("shared")).unwrap();
    let dir = v.p("shared");
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                for i in 0..60 {
                    let a = dir.join(format!("t{t}-{i}"));
                    write_file(&a, format!("{t}/{i}").as_bytes());
                    match i % 4 {
                        0 => fs::rename(&a, dir.join(format!("t{t}-{i}-renamed"))).unwrap(),
                        1 => fs::hard_link(&a, dir.join(format!("t{t}-{i}-link"))).unwrap(),
                        2 => fs::remove_file(&a).unwrap(),
                        _ => fs::create_dir(dir.join(format!("t{t}-{i}-dir"))).unwrap(),
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("namespace thread panicked");
    }
    let mut want = BTreeSet::new();
    for t in 0..4 {
        for i in 0..60 {
            match i % 4 {
                0 => {
                    want.insert(format!("t{t}-{i}-renamed"));
                }
                1 => {
                    want.insert(format!("t{t}-{i}"));
                    want.insert(format!("t{t}-{i}-link"));
                }
                2 => {}
                _ => {
                    want.insert(format!("t{t}-{i}"));
                    want.insert(format!("t{t}-{i}-dir"));
                }
            }
        }
    }
    assert_eq!(names(&dir), want, "listing after concurrent namespace operations");
    let check = |v: &Volume| {
        for t in 0..4 {
            for i in (1..60).step_by(4) {
                let c = fs::read(v.p(format!("shared/t{t}-{i}-link"))).unwrap();
                assert_eq!(c, format!("{t}/{i}").as_bytes());
            }
        }
    };
    check(&v);
    v.remount();
    assert_eq!(names(&v.p("shared")), want, "listing after remount");
    check(&v);
}

fn inode_number_reuse(mode: Mode) {
    // The backing file system hands a freed inode number to the next new
    // file, often before the kernel has forgotten the old node. Before node
    // generations, the kernel then shared the old inode (link count 0, old
    // cached pages) with the new file: link() failed with ENOENT, fsync
    // too, and reads returned another file's bytes.
    // Threads work in three directories, so that one's create can run
    // while another's unlink (which holds only its own directory) is still
    // being answered.
    require_fuse!();
    let v = Volume::new(mode);
    let dirs: Vec<PathBuf> = (0..3).map(|d| v.p(format!("reuse{d}"))).collect();
    for d in &dirs {
        fs::create_dir(d).unwrap();
    }
    let handles: Vec<_> = (0..12)
        .map(|t| {
            let dir = dirs[t % 3].clone();
            std::thread::spawn(move || {
                let (mut errors, mut inos) = (Vec::new(), Vec::new());
                for i in 0..150 {
                    let a = dir.join(format!("t{t}-{i}"));
                    let b = dir.join(format!("t{t}-{i}-link"));
                    let data = format!("thread {t} file {i}").repeat(1 + i % 7);
                    let r = (|| -> std::io::Result<()> {
                        let mut f = OpenOptions::new().write(true).create_new(true).open(&a)?;
                        f.write_all(data.as_bytes())?;
                        f.sync_all()?;
                        inos.push(f.metadata()?.ino());
                        drop(f);
                        fs::hard_link(&a, &b)?;
                        let nlink = fs::metadata(&b)?.nlink();
                        if nlink != 2 {
                            return Err(std::io::Error::other(format!("nlink {nlink} after link")));
                        }
                        fs::remove_file(&a)?;
                        if fs::read(&b)? != data.as_bytes() {
                            return Err(std::io::Error::other("read back another file's bytes"));
                        }
                        fs::remove_file(&b)
                    })();
                    if let Err(e) = r {
                        errors.push(format!("t{t}-{i}: {e}"));
                    }
                }
                (errors, inos)
            })
        })
        .collect();
    let (mut errors, mut inos) = (Vec::new(), Vec::new());
    for h in handles {
        let (e, i) = h.join().unwrap();
        errors.extend(e);
        inos.extend(i);
    }
    let distinct = inos.iter().collect::<BTreeSet<_>>().len();
    // On a backing file system that never reuses numbers (tmpfs) this
    // test exercises nothing; say so in the output.
    eprintln!(
        "{} files made, {} inode numbers reused",
        inos.len(),
        inos.len() - distinct
    );
    assert!(
        errors.is_empty(),
        "{} failures, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    for d in &dirs {
        assert!(names(d).is_empty(), "every file was removed");
    }
}
