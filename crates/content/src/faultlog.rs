//! Rate-limited log lines for backing file system faults (disk full,
//! read-only, permission denied, I/O errors): one line per kind of fault
//! per second at most, with a count of the lines held back since.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Minimum time between two lines for one errno.
const INTERVAL: Duration = Duration::from_secs(1);

struct Slot {
    last: Instant,
    suppressed: u64,
}

static STATE: Mutex<Option<HashMap<i32, Slot>>> = Mutex::new(None);

/// Whether `errno` is a fault of the backing file system (as opposed to an
/// ordinary answer such as ENOENT or EEXIST) worth a log line.
pub fn is_fault(errno: i32) -> bool {
    matches!(
        errno,
        libc::ENOSPC | libc::EDQUOT | libc::EROFS | libc::EIO | libc::EACCES | libc::EFBIG | libc::ENOMEM
    )
}

/// Decide whether a line for `errno` may be logged now; `Some(n)` with the
/// number of lines held back since the last one, `None` to stay quiet.
fn admit(errno: i32, now: Instant) -> Option<u64> {
    let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let map = g.get_or_insert_with(HashMap::new);
    match map.get_mut(&errno) {
        Some(s) if now.duration_since(s.last) < INTERVAL => {
            s.suppressed += 1;
            None
        }
        Some(s) => {
            let n = s.suppressed;
            s.last = now;
            s.suppressed = 0;
            Some(n)
        }
        None => {
            map.insert(
                errno,
                Slot {
                    last: now,
                    suppressed: 0,
                },
            );
            Some(0)
        }
    }
}

/// Log one line for a backing fault: `op` failed on `what` (a plaintext
/// path or a description) with `errno`. Quiet for non-fault errnos and
/// when a line for the same errno was logged less than a second ago.
pub fn fault(op: &str, what: &str, errno: i32) {
    if !is_fault(errno) {
        return;
    }
    if let Some(held) = admit(errno, Instant::now()) {
        let e = std::io::Error::from_raw_os_error(errno);
        if held > 0 {
            tracing::warn!("backing fault: {op} {what}: {e} ({held} similar lines suppressed)");
        } else {
            tracing::warn!("backing fault: {op} {what}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_per_errno() {
        // Use an errno no other test logs, so tests in parallel don't mix.
        let t0 = Instant::now();
        let e = -4242;
        assert_eq!(admit(e, t0), Some(0));
        assert_eq!(admit(e, t0 + Duration::from_millis(10)), None);
        assert_eq!(admit(e, t0 + Duration::from_millis(20)), None);
        assert_eq!(admit(e, t0 + INTERVAL + Duration::from_millis(1)), Some(2));
        assert_eq!(admit(-4243, t0), Some(0));
    }

    #[test]
    fn ordinary_answers_are_not_faults() {
        assert!(is_fault(libc::ENOSPC) && is_fault(libc::EROFS) && is_fault(libc::EIO));
        assert!(!is_fault(libc::ENOENT) && !is_fault(libc::EEXIST) && !is_fault(libc::EPERM));
    }
}
