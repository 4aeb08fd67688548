//! GlusterFS on this machine, as two hosts would share it: `glusterd`
//! started by hand (no systemd, its own working directory), a replica-2
//! volume over two local bricks (`force`: bricks on the root file system),
//! two client mounts standing for the two hosts, each client in a network
//! namespace of its own reaching the server over a veth pair (GlusterFS
//! refuses loopback addresses for bricks), so the traffic stays on this
//! machine but every client talks to the bricks over its own link. One cluster at a time per machine (a
//! file lock): glusterd has one port. Everything is stopped, unmounted and
//! removed on drop, also when the test fails.
//!
//! Client caching is off (performance translators; FUSE attribute, entry
//! and negative timeouts; `direct-io-mode=enable`, so a client's kernel
//! page cache never serves bytes another client has rewritten), as two
//! live hosts writing one cipher dir need. With the page cache on, two
//! hosts writing different blocks of one file left torn blocks on the
//! bricks (5 of 16 in one run; fsck reported them).

use super::{poll, run, tail, Daemon};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const CMD: Duration = Duration::from_secs(120);
/// Per client: network namespace, veth end in this namespace, end in the
/// client's namespace, this end's address, the client's address (/30 each).
const NETS: [(&str, &str, &str, &str, &str); 2] = [
    ("wfgl-a", "wfgla", "wfgpa", "10.213.77.1", "10.213.77.2"),
    ("wfgl-b", "wfglb", "wfgpb", "10.213.77.5", "10.213.77.6"),
];
/// The server's address (bricks, glusterd): this namespace's end of client 0's link.
const ADDR: &str = NETS[0].3;
const LOCK: &str = "/tmp/warpfs-test-glusterd.lock";

/// A running cluster: glusterd, one volume of two bricks, two client mounts.
pub struct Cluster {
    pub root: PathBuf,
    pub volume: String,
    pub host: String,
    pub bricks: [PathBuf; 2],
    pub clients: [PathBuf; 2],
    glusterd: Option<Daemon>,
    veth: bool,
    mounted: [bool; 2],
    started: bool,
    _lock: std::fs::File,
}

fn sh(args: &[&str]) -> (bool, String) {
    let mut c = Command::new(args[0]);
    c.args(&args[1..]);
    run(c, CMD)
}

/// Run the gluster CLI (script mode, no prompts) against our glusterd.
pub fn gluster(args: &[&str]) -> (bool, String) {
    let mut c = Command::new("gluster");
    c.arg("--mode=script").args(args);
    run(c, CMD)
}

fn machine_lock() -> Result<std::fs::File, String> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .map_err(|e| format!("{LOCK}: {e}"))?;
    // SAFETY: flock on a descriptor we own; blocks until the other test is done.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!("{LOCK}: {}", std::io::Error::last_os_error()));
    }
    Ok(f)
}

/// Remove the namespaces and links of [`NETS`] (those left by a killed
/// run too).
fn remove_network() {
    for (ns, here, ..) in NETS {
        let _ = sh(&["ip", "netns", "del", ns]);
        let _ = sh(&["ip", "link", "del", here]);
    }
}

/// The pid of a live (not zombie) process whose command name is `comm`.
fn running(comm: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
        (name == comm && !rest.starts_with('Z')).then_some(pid)
    })
}

impl Cluster {
    /// Start glusterd, create and start the volume, mount both clients.
    pub fn start(root: &Path) -> Result<Cluster, String> {
        let lock = machine_lock()?;
        let root = root.join("gluster");
        let dirs = ["wd", "b1", "b2", "c1", "c2"];
        for d in dirs {
            std::fs::create_dir_all(root.join(d)).map_err(|e| e.to_string())?;
        }
        let mut c = Cluster {
            volume: format!("wftest{}", std::process::id()),
            host: ADDR.into(),
            bricks: [root.join("b1"), root.join("b2")],
            clients: [root.join("c1"), root.join("c2")],
            root,
            glusterd: None,
            veth: false,
            mounted: [false; 2],
            started: false,
            _lock: lock,
        };
        c.network()?;
        c.start_glusterd()?;
        let bricks: Vec<String> = c.bricks.iter().map(|b| format!("{}:{}", c.host, b.display())).collect();
        let mut create = vec!["volume", "create", &c.volume, "replica", "2"];
        create.extend(bricks.iter().map(String::as_str));
        create.push("force");
        c.ok(gluster(&create))?;
        for (k, v) in [
            ("performance.quick-read", "off"),
            ("performance.io-cache", "off"),
            ("performance.stat-prefetch", "off"),
            ("performance.read-ahead", "off"),
            ("performance.readdir-ahead", "off"),
            ("performance.open-behind", "off"),
            ("performance.write-behind", "off"),
            ("cluster.self-heal-daemon", "on"),
        ] {
            c.ok(gluster(&["volume", "set", &c.volume, k, v]))?;
        }
        c.ok(gluster(&["volume", "start", &c.volume]))?;
        c.started = true;
        for i in 0..2 {
            c.mount(i)?;
        }
        Ok(c)
    }

    fn ok(&self, r: (bool, String)) -> Result<String, String> {
        if r.0 {
            Ok(r.1)
        } else {
            Err(format!("{}\n{}", r.1, tail(&self.root.join("glusterd.log"), 3000)))
        }
    }

    /// Two network namespaces, one per client, each linked to this one by
    /// a veth pair, with a default route to it.
    fn network(&mut self) -> Result<(), String> {
        remove_network();
        self.veth = true;
        for (ns, here, there, a_here, a_there) in NETS {
            self.ok(sh(&["ip", "netns", "add", ns]))?;
            self.ok(sh(&["ip", "link", "add", here, "type", "veth", "peer", "name", there]))?;
            self.ok(sh(&["ip", "link", "set", there, "netns", ns]))?;
            self.ok(sh(&["ip", "addr", "add", &format!("{a_here}/30"), "dev", here]))?;
            self.ok(sh(&["ip", "link", "set", here, "up"]))?;
            self.ok(sh(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{a_there}/30"),
                "dev",
                there,
            ]))?;
            self.ok(sh(&["ip", "-n", ns, "link", "set", there, "up"]))?;
            self.ok(sh(&["ip", "-n", ns, "link", "set", "lo", "up"]))?;
            self.ok(sh(&["ip", "-n", ns, "route", "add", "default", "via", a_here]))?;
        }
        Ok(())
    }

    fn start_glusterd(&mut self) -> Result<(), String> {
        // The gluster CLI talks to whichever glusterd owns the machine's
        // socket: refuse to run beside one we did not start (Debian's
        // package starts glusterd.service under systemd; scripts/test.sh
        // stops it).
        if let Some(pid) = running("glusterd") {
            return Err(format!(
                "another glusterd is running (pid {pid}); stop it first (systemctl stop glusterd)"
            ));
        }
        let vol = self.root.join("glusterd.vol");
        std::fs::write(
            &vol,
            format!(
                "volume management\n    type mgmt/glusterd\n    option working-directory {}\n    \
                 option transport-type socket\n    option transport.socket.listen-port 24007\n    \
                 option ping-timeout 0\n    option event-threads 1\n    option max-port 60999\nend-volume\n",
                self.root.join("wd").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let child = Command::new("glusterd")
            .arg("-N")
            .arg("-f")
            .arg(&vol)
            .arg("-l")
            .arg(self.root.join("glusterd.log"))
            .arg("-p")
            .arg(self.root.join("glusterd.pid"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("glusterd: {e}"))?;
        self.glusterd = Some(Daemon {
            child,
            name: "glusterd".into(),
        });
        let d = self.glusterd.as_mut().expect("just started");
        poll("glusterd answers", Duration::from_secs(60), || {
            if !d.alive() {
                return Err("glusterd exited".into());
            }
            Ok(gluster(&["volume", "list"]).0.then_some(()))
        })
        .map_err(|e| format!("{e}\n{}", tail(&self.root.join("glusterd.log"), 3000)))
    }

    /// Mount client `i` (no kernel attribute, entry, negative or page caching).
    pub fn mount(&mut self, i: usize) -> Result<(), String> {
        let src = format!("{}:/{}", self.host, self.volume);
        let mnt = self.clients[i].display().to_string();
        // The client process lives in the client's network namespace; the
        // mount itself is in this mount namespace.
        let net = format!("--net=/run/netns/{}", NETS[i].0);
        self.ok(sh(&[
            "nsenter",
            &net,
            "mount",
            "-t",
            "glusterfs",
            "-o",
            "attribute-timeout=0,entry-timeout=0,negative-timeout=0,direct-io-mode=enable",
            &src,
            &mnt,
        ]))?;
        self.mounted[i] = true;
        Ok(())
    }

    /// The pid of brick `i`'s process.
    pub fn brick_pid(&self, i: usize) -> Result<i32, String> {
        let st = self.ok(gluster(&["volume", "status", &self.volume, "--xml"]))?;
        let want = format!("<path>{}</path>", self.bricks[i].display());
        st.split(&want)
            .nth(1)
            .and_then(|rest| rest.split("<pid>").nth(1))
            .and_then(|p| p.split('<').next())
            .and_then(|p| p.trim().parse().ok())
            .filter(|&p: &i32| p > 0)
            .ok_or_else(|| format!("no pid for brick {} in\n{st}", self.bricks[i].display()))
    }

    /// Kill brick `i` (SIGKILL), as a host's crash would; returns once the
    /// process is gone (or a zombie) and its pid file is removed, so that
    /// glusterd does not take it for running.
    pub fn kill_brick(&self, i: usize) -> Result<i32, String> {
        let pid = self.brick_pid(i)?;
        // SAFETY: signalling a brick process this cluster started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        poll("the killed brick is gone", Duration::from_secs(30), || {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let gone = state.is_empty()
                || state
                    .rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'));
            Ok(gone.then_some(()))
        })?;
        let dir = format!("/var/run/gluster/vols/{}", self.volume);
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if std::fs::read_to_string(e.path()).is_ok_and(|s| s.trim() == pid.to_string()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(pid)
    }

    /// Restart brick `i` after [`Cluster::kill_brick`] (`gluster volume
    /// start … force`) and wait until it runs again.
    pub fn restart_brick(&self, i: usize, killed: i32) -> Result<i32, String> {
        poll("the brick runs again", Duration::from_secs(60), || {
            self.ok(gluster(&["volume", "start", &self.volume, "force"]))?;
            Ok(self.brick_pid(i).ok().filter(|&p| p != killed))
        })
    }

    /// Entries waiting for self-heal, summed over the bricks (`None` while
    /// a brick is not connected).
    pub fn heal_pending(&self) -> Result<Option<u64>, String> {
        let out = self.ok(gluster(&["volume", "heal", &self.volume, "info"]))?;
        if out.contains("Transport endpoint is not connected") || out.contains("Status: Brick is Not connected") {
            return Ok(None);
        }
        let n: Vec<u64> = out
            .lines()
            .filter_map(|l| l.strip_prefix("Number of entries: "))
            .filter_map(|v| v.trim().parse().ok())
            .collect();
        if n.len() != 2 {
            return Err(out);
        }
        Ok(Some(n.iter().sum()))
    }

    /// Start a heal and wait until no entry needs one.
    pub fn wait_healed(&self, timeout: Duration) -> Result<(), String> {
        let _ = gluster(&["volume", "heal", &self.volume]);
        poll("self-heal done", timeout, || {
            let n = self.heal_pending()?;
            if n != Some(0) {
                let _ = gluster(&["volume", "heal", &self.volume]);
            }
            Ok((n == Some(0)).then_some(()))
        })
    }

    /// pids of processes glusterd started for this volume (bricks, self-heal).
    fn volume_pids(&self) -> Vec<i32> {
        let mut v = Vec::new();
        for dir in [
            format!("/var/run/gluster/vols/{}", self.volume),
            format!("/var/run/gluster/shd/{}", self.volume),
        ] {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if let Some(pid) = std::fs::read_to_string(e.path())
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                {
                    v.push(pid);
                }
            }
        }
        v
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", tail(&self.root.join("glusterd.log"), 4000));
        }
        for i in 0..2 {
            if self.mounted[i] {
                let m = self.clients[i].display().to_string();
                if !sh(&["umount", &m]).0 {
                    let _ = sh(&["umount", "-l", &m]);
                }
            }
        }
        let pids = self.volume_pids();
        if self.started {
            let _ = gluster(&["volume", "stop", &self.volume, "force"]);
            let _ = gluster(&["volume", "delete", &self.volume]);
        }
        for pid in pids {
            // SAFETY: processes glusterd started for this volume.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if let Some(mut d) = self.glusterd.take() {
            d.stop();
        }
        if self.veth {
            remove_network();
        }
    }
}
