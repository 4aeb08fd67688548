//! CPU lists as `taskset -c` and the kernel's cpulist files write them
//! (`0-1,3`), and the CPUs this machine has.

/// The most CPU numbers a list may name (glibc's `CPU_SETSIZE`).
pub const MAX_CPUS: usize = 1024;

/// Parse a CPU list as `taskset -c` and the kernel's cpulist files write it:
/// comma-separated numbers and inclusive ranges, e.g. `0`, `0-1,3`. Returns
/// the CPUs sorted, without duplicates. Checks syntax and `< MAX_CPUS`
/// only; [`check_cpus_exist`] checks the machine.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let num = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("'{t}' is not a CPU number"));
        }
        let n: usize = t.parse().map_err(|_| format!("'{t}' is not a CPU number"))?;
        if n >= MAX_CPUS {
            return Err(format!("CPU {n} is out of range (at most {})", MAX_CPUS - 1));
        }
        Ok(n)
    };
    let mut cpus = Vec::new();
    if s.trim().is_empty() {
        return Err("empty CPU list (expected e.g. 0 or 0-1,3)".into());
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("'{}' is a descending range", part.trim()));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Check that every CPU of `cpus` exists on this machine and is online
/// (Linux: /sys/devices/system/cpu; elsewhere only the configured count).
pub fn check_cpus_exist(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: sysconf has no preconditions.
    let conf = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    let conf = if conf > 0 { conf as usize } else { usize::MAX };
    for &c in cpus {
        if c >= conf {
            return Err(format!("CPU {c} does not exist (this machine has {conf})"));
        }
        let online = warpfs_backing::host::read_to_string(format!("/sys/devices/system/cpu/cpu{c}/online"));
        if let Ok(v) = online {
            if v.trim() == "0" {
                return Err(format!("CPU {c} is offline"));
            }
        }
    }
    Ok(())
}

/// `cpus` (sorted) written as a CPU list with ranges, e.g. `0-1,3`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// The number of possible CPUs (`/sys/devices/system/cpu/possible`; the
/// kernel makes one FUSE ring queue for each).
pub fn possible_cpus() -> usize {
    warpfs_backing::host::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .map(|v| v.len())
        .filter(|&n| n > 0)
        // SAFETY: sysconf has no preconditions.
        .unwrap_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_taskset() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0-1,3").unwrap(), vec![0, 1, 3]);
        assert_eq!(parse_cpu_list(" 3, 1-2 ,1").unwrap(), vec![1, 2, 3]);
        assert_eq!(parse_cpu_list("5-5").unwrap(), vec![5]);
        for bad in [
            "", " ", "a", "1,", ",1", "-1", "1-", "3-1", "1.5", "0x1", "1-2-3", "1024", "0-4096",
        ] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn existing_cpus_pass_and_missing_ones_fail() {
        check_cpus_exist(&[0]).unwrap();
        assert!(check_cpus_exist(&[MAX_CPUS - 1]).is_err() || MAX_CPUS <= 1);
    }

    #[test]
    fn cpu_lists_format_with_ranges() {
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[0]), "0");
        assert_eq!(format_cpu_list(&[0, 1, 3]), "0-1,3");
        assert_eq!(format_cpu_list(&[0, 2, 3, 4, 7]), "0,2-4,7");
        assert_eq!(
            parse_cpu_list(&format_cpu_list(&[1, 2, 5, 6, 9])).unwrap(),
            vec![1, 2, 5, 6, 9]
        );
    }

    #[test]
    fn the_machine_has_a_possible_cpu() {
        assert!(possible_cpus() >= 1);
    }
}
