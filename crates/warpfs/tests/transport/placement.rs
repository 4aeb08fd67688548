//! Where ring threads run, through real mounts (the parameter turned on
//! for each test, as in the rest of this suite):
//!
//! - `answers_keep_their_waiter_on_its_cpu`: small READ answers and the
//!   answers callers wait for (opens, stats) are committed with the ring
//!   thread at idle priority (each kind counted at unmount), the thread is
//!   back at its own policy once the requests are done, and
//!   `--uring-local-wake off` turns it off.
//! - `large_transfers_let_ring_threads_roam_and_waited_answers_pin_them_back`:
//!   after large writes or read-ahead a ring thread may leave its CPU
//!   (never for the keystream workers'), and small reads bring it home
//!   (one thread per queue, so that the small read reaches it).

use super::*;

/// The scheduling policy of each `warpfs-ring-*` thread of `pid` (field 41
/// of /proc/PID/task/TID/stat).
fn ring_policies(pid: i32) -> Vec<(String, u32)> {
    ring_threads(pid)
        .into_iter()
        .map(|(name, dir)| {
            let stat = fs::read_to_string(dir.join("stat")).unwrap();
            // The fields after the parenthesised name start at field 3.
            let rest = &stat[stat.rfind(')').unwrap() + 2..];
            (name, rest.split(' ').nth(41 - 3).unwrap().parse().unwrap())
        })
        .collect()
}

/// The number in the log line "at unmount: N `what` committed with ...".
fn local_commits(log: &str, what: &str) -> Option<u64> {
    log.lines().find_map(|l| {
        let rest = l.split("at unmount: ").nth(1)?;
        let (n, tail) = rest.split_once(' ')?;
        tail.starts_with(&format!("{what} committed with the "))
            .then(|| n.parse().ok())
            .flatten()
    })
}

#[test]
fn answers_keep_their_waiter_on_its_cpu() {
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _on = uring_on();
    let mut v = Volume::init(Mode::Gcm);
    v.mount_with(&["--transport", "uring"]);
    let mut rng = Rng::for_test("local-wake");
    let files: Vec<Vec<u8>> = (0..40).map(|_| rng.bytes(3000)).collect();
    for (i, d) in files.iter().enumerate() {
        fs::write(v.p(format!("f{i}")), d).unwrap();
    }
    v.unmount();
    // Without a way back from SCHED_IDLE (not root, RLIMIT_NICE under 20)
    // the daemon says so and leaves the policy alone.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill.
    unsafe { libc::getrlimit(libc::RLIMIT_NICE, &mut lim) };
    // SAFETY: no arguments.
    let can = unsafe { libc::geteuid() } == 0 || lim.rlim_cur >= 20;
    for (local, expect) in [("on", can), ("off", false)] {
        // The log accumulates: look only at what this mount adds.
        fs::write(&v.logfile, "").unwrap();
        v.mount_with(&["--transport", "uring", "--uring-local-wake", local]);
        for (i, d) in files.iter().enumerate() {
            assert_bytes_eq(&fs::read(v.p(format!("f{i}"))).unwrap(), d, &format!("{local}: f{i}"));
            let md = fs::metadata(v.p(format!("f{i}"))).unwrap();
            assert_eq!(md.len(), d.len() as u64, "{local}: f{i}");
        }
        let pid = v.daemon_pids()[0];
        // A thread may still be between its commit and taking its policy
        // back; once the reads are over every one is back.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let p = ring_policies(pid);
            assert!(!p.is_empty(), "{local}: no ring threads in {pid}");
            if p.iter().all(|&(_, pol)| pol == libc::SCHED_OTHER as u32) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{local}: ring threads left at another policy: {p:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        v.unmount();
        let log = v.log();
        let reads = local_commits(&log, "small read answer(s)");
        let calls = local_commits(&log, "other answer(s)");
        if expect {
            // Each read of a 3,000-byte file is one small READ, and its
            // OPEN an answer the caller waits for; a thread that waited
            // behind other tasks pauses this for a while, so not every one
            // need count.
            let n = reads.unwrap_or_else(|| panic!("no count of reads kept local\n{log}"));
            assert!(n >= 1, "{n} small read(s) kept local\n{log}");
            let n = calls.unwrap_or_else(|| panic!("no count of callers kept local\n{log}"));
            assert!(n >= 1, "{n} answer(s) to callers kept local\n{log}");
        } else {
            assert_eq!(reads, None, "{local}: reads committed at idle priority\n{log}");
            assert_eq!(calls, None, "{local}: answers committed at idle priority\n{log}");
            if local == "on" {
                assert!(log.contains("may move to another CPU"), "no word why\n{log}");
            }
        }
    }
}

/// The CPUs this process may run on (`sched_getaffinity`), in order: a
/// cpuset or `taskset` may leave some of 0..N out, and the daemon a test
/// starts inherits the same set.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; the call fills it; CPU_ISSET on
    // indices below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The queue (and CPU) of ring thread "warpfs-ring-Q.T".
fn ring_queue(name: &str) -> usize {
    let q = name.trim_start_matches("warpfs-ring-").split('.').next().unwrap();
    q.parse().unwrap_or_else(|e| panic!("ring thread name {name:?}: {e}"))
}

/// Each ring thread's name and "Cpus_allowed_list", for the queues of the
/// CPUs in `cpus` (a queue of a CPU the daemon may not use has a thread
/// that cannot be pinned there, and no request of ours reaches it).
fn ring_cpus(pid: i32, cpus: &[usize]) -> Vec<(String, String)> {
    ring_threads(pid)
        .into_iter()
        .filter(|(name, _)| cpus.contains(&ring_queue(name)))
        .map(|(name, dir)| {
            let status = fs::read_to_string(dir.join("status")).unwrap();
            let allowed = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap()
                .trim()
                .to_string();
            (name, allowed)
        })
        .collect()
}

/// A ring thread "warpfs-ring-Q.T" pinned to its queue's CPU Q.
fn at_home((name, cpus): &(String, String)) -> bool {
    *cpus == ring_queue(name).to_string()
}

/// The count in "at unmount: N move(s) of a ring thread off its CPU ...".
fn roams(log: &str) -> Option<u64> {
    log.lines().find_map(|l| {
        let rest = l.split("at unmount: ").nth(1)?;
        rest.strip_suffix(" move(s) of a ring thread off its CPU for large writes")?
            .trim()
            .parse()
            .ok()
    })
}

/// Read `path` on `cpu` after dropping its cached pages, so the reads
/// reach the daemon on that CPU's queue.
fn read_cold_on(path: &Path, cpu: usize) -> Vec<u8> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
        let f = fs::File::open(&path).unwrap();
        // SAFETY: a valid open fd.
        assert_eq!(
            unsafe { libc::posix_fadvise(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, libc::POSIX_FADV_DONTNEED) },
            0
        );
        drop(f);
        fs::read(&path).unwrap()
    })
    .join()
    .unwrap()
}

/// One page at `at`, read cold on `cpu` with read-ahead off (one small
/// READ).
fn read_page_on(path: &Path, cpu: usize, at: u64) -> Vec<u8> {
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        use std::os::unix::fs::FileExt;
        // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
        let f = fs::File::open(&path).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
        // SAFETY: a valid open fd.
        unsafe {
            assert_eq!(libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED), 0);
            assert_eq!(libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_RANDOM), 0);
        }
        let mut buf = vec![0u8; 4096];
        f.read_exact_at(&mut buf, at).unwrap();
        buf
    })
    .join()
    .unwrap()
}

#[test]
fn large_transfers_let_ring_threads_roam_and_waited_answers_pin_them_back() {
    require_fuse!();
    if warpfs_testkit::skip_if(uring_unavailable()) {
        return;
    }
    // The CPUs this test (and the daemon) may use: the reads below run on
    // each, and only their queues' threads are looked at.
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        warpfs_testkit::skip("one CPU: a ring thread has nowhere to roam");
        return;
    }
    let _g = PARAM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _on = uring_on();
    let mut v = Volume::init(Mode::Gcm);
    let data = Rng::for_test("roam").bytes(8 << 20);
    // With speculation on, keystream workers hold every CPU: nowhere to roam.
    // One thread per queue, so that the small read sent on a CPU reaches
    // the thread that left it (with two, the kernel may hand it to the
    // other one, which stayed home).
    for (roam, spec) in [("on", "off"), ("off", "off"), ("on", "on")] {
        fs::write(&v.logfile, "").unwrap();
        v.mount_with(&[
            "--transport",
            "uring",
            "--uring-threads",
            "1",
            "--uring-roam",
            roam,
            "--speculation",
            spec,
        ]);
        let moves = roam == "on" && spec == "off";
        let roam = if spec == "on" { "workers" } else { roam };
        let pid = v.daemon_pids()[0];
        assert!(
            ring_cpus(pid, &cpus).iter().all(at_home),
            "{roam}: {:?}",
            ring_cpus(pid, &cpus)
        );
        // Writeback sends WRITEs of up to 1 MiB: the thread that serves
        // one may leave its CPU, and stays out until it serves an answer
        // somebody waits for. sync_file_range starts the writeback and
        // waits for it without an FSYNC request (whose caller waits, so
        // its answer would bring the thread home).
        let path = v.p(format!("big-{roam}"));
        {
            use std::io::Write;
            let mut f = fs::File::create(&path).unwrap();
            f.write_all(&data).unwrap();
            let flags =
                libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
            // SAFETY: a valid open fd; the whole file.
            let r = unsafe { libc::sync_file_range(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, flags) };
            assert_eq!(r, 0, "sync_file_range: {}", std::io::Error::last_os_error());
            // Looked at before the close, whose FLUSH a caller waits for.
            let threads = ring_cpus(pid, &cpus);
            let out = threads.iter().filter(|t| !at_home(t)).count();
            if moves {
                assert!(out >= 1, "no ring thread left its CPU: {threads:?}");
            } else {
                assert_eq!(out, 0, "a ring thread left its CPU: {threads:?}");
            }
        }
        // Small reads from every CPU bring every thread home.
        for &cpu in &cpus {
            let at = ((cpu as u64 * 1_000_003) % (data.len() as u64 - 4096)) & !4095;
            let got = read_page_on(&path, cpu, at);
            assert_bytes_eq(
                &got,
                &data[at as usize..at as usize + 4096],
                &format!("{roam}: page on CPU {cpu}"),
            );
        }
        let threads = ring_cpus(pid, &cpus);
        assert!(
            threads.iter().all(at_home),
            "{roam}: not home after small reads: {threads:?}"
        );
        // A sequential reader's read-ahead (READs of up to 1 MiB) lets the
        // threads that serve it leave again.
        for &cpu in &cpus {
            assert_bytes_eq(&read_cold_on(&path, cpu), &data, &format!("{roam}: read on CPU {cpu}"));
        }
        let threads = ring_cpus(pid, &cpus);
        let out = threads.iter().filter(|t| !at_home(t)).count();
        if moves {
            assert!(out >= 1, "no ring thread left its CPU for read-ahead: {threads:?}");
        } else {
            assert_eq!(out, 0, "a ring thread left its CPU: {threads:?}");
        }
        v.unmount();
        let log = v.log();
        match roam {
            "on" => assert!(roams(&log).is_some_and(|n| n >= 1), "no count of moves\n{log}"),
            "off" => assert_eq!(roams(&log), None, "moves counted with --uring-roam off\n{log}"),
            _ => {
                assert_eq!(roams(&log), Some(0), "moves onto the workers' CPUs\n{log}");
                assert!(log.contains("never roam onto the keystream workers' CPUs"), "{log}");
            }
        }
    }
}
