//! Engine life: stats rendering, start and stop, worker placement and
//! decrypt-ahead threads.

use super::*;

#[test]
fn stats_render_as_text_and_json() {
    let e = engine(1, true);
    let k = e.add_raw_key(&[1u8; 16]).unwrap();
    let c = e.context();
    let d = e.define(&c, k, &nonce_of(1), 0).unwrap();
    e.quiesce();
    e.apply(&c, &d, &mut [0u8; 32], 0).unwrap();
    let s = e.stats();
    let j: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(j["ready_hits"], 1);
    assert_eq!(j["made_by_workers"], 1);
    assert_eq!(j["batch_hist"][0], 1);
    let text = s.to_string();
    assert!(text.contains("ready 1 (100.0%)"), "{text}");
}

#[test]
fn engines_start_and_stop_cleanly() {
    for _ in 0..20 {
        let e = engine(2, true);
        let k = e.add_raw_key(&[2u8; 16]).unwrap();
        let cs: Vec<Ctx> = (0..8).map(|_| e.context()).collect();
        for (i, c) in cs.iter().enumerate() {
            e.define(c, k, &nonce_of(i as u64), i as i32).unwrap();
        }
        drop(e); // joins the workers even with work queued
    }
}

#[test]
fn workers_run_on_the_listed_cpus() {
    // Every Linux machine has CPU 0; the workers' mask must become exactly it.
    let e = Engine::new(EngineConfig {
        cpus: vec![0],
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(e.threads(), 1, "one worker per listed CPU");
    let t0 = std::time::Instant::now();
    while e.worker_cpus().is_empty() && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    if cfg!(target_os = "linux") {
        assert_eq!(e.worker_cpus(), vec![0]);
        assert_eq!(e.stats().worker_cpus, vec![0]);
        assert!(e.stats().to_string().contains("workers on CPUs 0"));
    }
    // Masks still come out right.
    let raw = [0x21u8; 32];
    let k = e.add_raw_key(&raw).unwrap();
    let c = e.context();
    let t = e.define(&c, k, &nonce_of(7), PRIORITY_HIGHEST).unwrap();
    e.quiesce();
    let mut buf = vec![0u8; 64];
    e.apply(&c, &t, &mut buf, 16).unwrap();
    assert_eq!(buf, reference(&raw, &nonce_of(7), 2, 0, 64));
}

/// Decrypt-ahead threads exist only with a depth and speculation on (or
/// asked for without it): jobs run there, and are refused otherwise.
#[test]
fn decrypt_ahead_follows_speculation_and_depth() {
    let (tx, rx) = std::sync::mpsc::channel();
    let on = engine(1, true);
    assert_eq!(on.read_ahead(), warpfs_engine::DEFAULT_READ_AHEAD);
    assert!(on.ahead_threads() >= 1);
    for i in 0..8 {
        let tx = tx.clone();
        assert!(on.run_ahead(Box::new(move || tx.send(i).unwrap())));
    }
    let mut got: Vec<i32> = (0..8).map(|_| rx.recv().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..8).collect::<Vec<_>>());
    on.count_ahead(5, 2, Some(1000));
    let s = on.stats();
    assert_eq!(
        (s.ahead_served, s.ahead_wasted, s.ahead_waits, s.ahead_wait_ns),
        (5, 2, 1, 1000)
    );
    let off = engine(1, false);
    assert_eq!((off.read_ahead(), off.ahead_threads()), (0, 0));
    assert!(!off.run_ahead(Box::new(|| panic!("must not run"))));
    let none = Engine::new(EngineConfig {
        threads: 1,
        speculation: true,
        read_ahead: 0,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!((none.read_ahead(), none.ahead_threads()), (0, 0));
    assert!(!none.run_ahead(Box::new(|| panic!("must not run"))));
    let alone = Engine::new(EngineConfig {
        speculation: false,
        ahead_without_speculation: true,
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(alone.threads(), 0, "no keystream workers");
    assert_eq!(alone.read_ahead(), warpfs_engine::DEFAULT_READ_AHEAD);
    assert!(alone.ahead_threads() >= 1);
    let (tx, rx) = std::sync::mpsc::channel();
    assert!(alone.run_ahead(Box::new(move || tx.send(7).unwrap())));
    assert_eq!(rx.recv().unwrap(), 7);
}

/// The first CPU this process may run on (a cpuset or `taskset` may leave
/// CPU 0 out).
fn first_allowed_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is valid; the call fills it; CPU_ISSET on
    // indices below CPU_SETSIZE.
    unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &s))
            .expect("no CPU in this process's affinity mask")
    }
}

#[test]
fn mask_cpus_are_the_listed_cpus_or_the_starters_and_none_without_workers() {
    let cpu = first_allowed_cpu();
    let off = Engine::new(EngineConfig {
        speculation: false,
        ahead_without_speculation: true,
        ..EngineConfig::default()
    })
    .unwrap();
    assert!(off.mask_cpus().is_empty(), "no workers, no mask CPUs");
    let listed = Engine::new(EngineConfig {
        threads: 1,
        speculation: true,
        cpus: vec![cpu],
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(listed.mask_cpus(), &[cpu]);
    // Without a list: where the starting thread may run (this one, pinned).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t is valid; `cpu` is below CPU_SETSIZE.
        let pinned = unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut s);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &s) == 0
        };
        let e = Engine::new(EngineConfig {
            threads: 1,
            speculation: true,
            ..EngineConfig::default()
        })
        .unwrap();
        tx.send((pinned, e.mask_cpus().to_vec())).unwrap();
    });
    let (pinned, cpus) = rx.recv().unwrap();
    assert!(pinned, "cannot pin the test thread to CPU {cpu}");
    assert_eq!(cpus, vec![cpu]);
}
