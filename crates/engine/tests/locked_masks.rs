//! Masks made ahead of need (the write pool's masks for future nonces, the
//! read windows' masks) live on locked pages, left out of core dumps and
//! zeroed when dropped (`warpfs_crypto::LockedBytes`): the process's
//! locked memory (VmLck) grows by the pool's masks once they are made.

use warpfs_crypto::ContentKey;
use warpfs_engine::*;
use warpfs_keystream::Keystream;

fn vmlck_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmLck:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn the_write_pools_masks_are_locked() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit into a local.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 && lim.rlim_cur < 64 << 20 {
        warpfs_testkit::skip("RLIMIT_MEMLOCK below 64 MiB and not root: the masks cannot all be locked");
        return;
    }
    let z = 32;
    let e = Engine::new(EngineConfig {
        threads: 1,
        speculation: true,
        pool_size: z,
        ..EngineConfig::default()
    })
    .unwrap();
    let k = e.add_key(ContentKey::new(&[9u8; 32]).unwrap());
    let before = vmlck_kb();
    let pool = WritePool::new(e.clone(), k).unwrap();
    // The workers make the pool's Z masks, each into its context's buffer;
    // then seal them away.
    e.quiesce();
    for _ in 0..z {
        let mut b = vec![0u8; 4096];
        pool.seal(&mut b);
    }
    let after = vmlck_kb();
    // One mask of 4096 + 16 bytes takes two pages.
    let want = (z as u64) * 8;
    assert!(
        after >= before + want,
        "VmLck grew by {} kB for {z} masks (want at least {want} kB)",
        after.saturating_sub(before)
    );
    drop(pool);
}
