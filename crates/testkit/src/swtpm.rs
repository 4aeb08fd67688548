//! A software TPM for tests: `swtpm socket` (Debian's swtpm) with a fresh
//! state directory, on two free loopback ports (the TPM and its control
//! channel), initialised and started (`--flags
//! not-need-init,startup-clear`), reachable through the TCTI
//! `swtpm:host=127.0.0.1,port=P`; killed and its state removed on drop.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running swtpm.
pub struct Swtpm {
    child: Child,
    port: u16,
    dir: PathBuf,
}

/// Two free consecutive loopback ports, as far as binding them tells.
fn free_pair() -> Option<u16> {
    for _ in 0..64 {
        let a = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).ok()?;
        let p = a.local_addr().ok()?.port();
        if p == u16::MAX {
            continue;
        }
        if TcpListener::bind((Ipv4Addr::LOCALHOST, p + 1)).is_ok() {
            return Some(p);
        }
    }
    None
}

fn unique_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "warpfs-swtpm-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Whether Debian's swtpm is installed (its binary runs).
pub fn installed() -> bool {
    Command::new("swtpm")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// A software TPM for the calling test, or `None` (the test returns)
/// after a counted skip ([`crate::skip`]) when swtpm is not installed.
/// An installed swtpm that does not start is a failure, not a skip.
///
/// # Panics
/// When swtpm is installed but does not start.
#[track_caller]
pub fn for_test() -> Option<Swtpm> {
    if !installed() {
        crate::skip("swtpm is not installed (apt-get install swtpm swtpm-tools)");
        return None;
    }
    match Swtpm::start() {
        Ok(s) => Some(s),
        Err(e) => panic!("swtpm is installed but does not start: {e}"),
    }
}

impl Swtpm {
    /// Start one; `Err` says why not (no swtpm installed, no ports, it
    /// would not start in five tries).
    pub fn start() -> Result<Swtpm, String> {
        let mut last = String::new();
        for _ in 0..5 {
            let Some(port) = free_pair() else {
                return Err("no two free loopback ports".into());
            };
            let dir = unique_dir();
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let spawned = Command::new("swtpm")
                .arg("socket")
                .arg("--tpm2")
                .arg("--tpmstate")
                .arg(format!("dir={}", dir.display()))
                .arg("--server")
                .arg(format!("type=tcp,port={port},bindaddr=127.0.0.1"))
                .arg("--ctrl")
                .arg(format!("type=tcp,port={},bindaddr=127.0.0.1", port + 1))
                .arg("--flags")
                .arg("not-need-init,startup-clear")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn();
            let mut child = match spawned {
                Ok(c) => c,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(format!("cannot run swtpm (apt-get install swtpm swtpm-tools): {e}"));
                }
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            loop {
                if let Ok(Some(st)) = child.try_wait() {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        use std::io::Read;
                        let _ = e.read_to_string(&mut err);
                    }
                    last = format!("swtpm exited ({st}): {}", err.trim());
                    break;
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return Ok(Swtpm { child, port, dir });
                }
                if Instant::now() > deadline {
                    last = "swtpm did not listen within 10 s".into();
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
        Err(last)
    }

    /// Its TCTI string.
    pub fn tcti(&self) -> String {
        format!("swtpm:host=127.0.0.1,port={}", self.port)
    }

    /// Its TCTI without a comma (the host defaults to localhost), for
    /// `-o` lists.
    pub fn tcti_short(&self) -> String {
        format!("swtpm:port={}", self.port)
    }

    /// The TPM's port (its control channel is the next one).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stop it now (the state directory stays until drop).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Swtpm {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
