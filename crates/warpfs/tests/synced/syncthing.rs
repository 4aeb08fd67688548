//! Two Syncthing instances on 127.0.0.1, each with its own home, sharing
//! one folder (a cipher dir on each side): discovery, relays, NAT,
//! upgrades, usage and crash reports off; `fsWatcherDelayS=1`;
//! `maxConflicts=-1` (keep every conflict copy; the default 0 deletes the
//! losing copy). Sync is awaited through the REST API, and devices are
//! paused and resumed through it to make offline edits.

use super::{free_port, poll, run, tail, Daemon};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The shared folder's id.
pub const FOLDER: &str = "warpfs";
const START: Duration = Duration::from_secs(60);
/// How long a sync may take before a test fails.
pub const SYNC: Duration = Duration::from_secs(120);

/// One Syncthing instance.
pub struct Instance {
    pub name: String,
    pub home: PathBuf,
    pub folder: PathBuf,
    pub id: String,
    gui: u16,
    listen: u16,
    key: String,
    daemon: Option<Daemon>,
}

/// Two instances that share [`FOLDER`].
pub struct Pair {
    pub a: Instance,
    pub b: Instance,
}

fn generate(home: &Path) -> Result<String, String> {
    let mut c = Command::new("syncthing");
    c.arg("generate").arg(format!("--home={}", home.display()));
    c.env("STNODEFAULTFOLDER", "1");
    let (ok, out) = run(c, Duration::from_secs(60));
    if !ok {
        return Err(out);
    }
    out.lines()
        .find_map(|l| l.split("Device ID: ").nth(1))
        .map(|s| s.trim().to_string())
        .ok_or_else(|| format!("no device id in\n{out}"))
}

impl Instance {
    fn new(name: &str, home: PathBuf, folder: PathBuf) -> Result<Instance, String> {
        std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
        let id = generate(&home)?;
        Ok(Instance {
            name: name.into(),
            home,
            folder,
            id,
            gui: free_port(),
            listen: free_port(),
            key: format!("warpfs-test-{}", std::process::id()),
            daemon: None,
        })
    }

    /// Write config.xml: the folder shared with `peer`.
    fn configure(&self, peer: &Instance, order: &str) -> Result<(), String> {
        let xml = format!(
            r#"<configuration version="36">
    <folder id="{FOLDER}" label="{FOLDER}" path="{path}" type="sendreceive" rescanIntervalS="3600" fsWatcherEnabled="true" fsWatcherDelayS="1" ignorePerms="false" autoNormalize="true">
        <filesystemType>basic</filesystemType>
        <device id="{me}" introducedBy=""></device>
        <device id="{peer_id}" introducedBy=""></device>
        <minDiskFree unit="%">0</minDiskFree>
        <order>{order}</order>
        <maxConflicts>-1</maxConflicts>
        <markerName>.stfolder</markerName>
        <disableFsync>false</disableFsync>
    </folder>
    <device id="{me}" name="{name}" compression="metadata" introducer="false">
        <address>dynamic</address>
    </device>
    <device id="{peer_id}" name="{peer_name}" compression="metadata" introducer="false">
        <address>tcp://127.0.0.1:{peer_port}</address>
    </device>
    <gui enabled="true" tls="false" debugging="false">
        <address>127.0.0.1:{gui}</address>
        <apikey>{key}</apikey>
    </gui>
    <options>
        <listenAddress>tcp://127.0.0.1:{listen}</listenAddress>
        <globalAnnounceEnabled>false</globalAnnounceEnabled>
        <localAnnounceEnabled>false</localAnnounceEnabled>
        <relaysEnabled>false</relaysEnabled>
        <natEnabled>false</natEnabled>
        <startBrowser>false</startBrowser>
        <urAccepted>-1</urAccepted>
        <urSeen>3</urSeen>
        <autoUpgradeIntervalH>0</autoUpgradeIntervalH>
        <crashReportingEnabled>false</crashReportingEnabled>
        <reconnectionIntervalS>1</reconnectionIntervalS>
        <progressUpdateIntervalS>1</progressUpdateIntervalS>
        <setLowPriority>false</setLowPriority>
    </options>
</configuration>
"#,
            path = self.folder.display(),
            me = self.id,
            name = self.name,
            peer_id = peer.id,
            peer_name = peer.name,
            peer_port = peer.listen,
            gui = self.gui,
            key = self.key,
            listen = self.listen,
        );
        std::fs::write(self.home.join("config.xml"), xml).map_err(|e| e.to_string())
    }

    fn log(&self) -> PathBuf {
        self.home.join("syncthing.log")
    }

    fn start(&mut self) -> Result<(), String> {
        std::fs::create_dir_all(self.folder.join(".stfolder")).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(self.log()).map_err(|e| e.to_string())?;
        let child = Command::new("syncthing")
            .arg("serve")
            .arg(format!("--home={}", self.home.display()))
            .args(["--no-browser", "--no-restart", "--no-upgrade"])
            .env("STNODEFAULTFOLDER", "1")
            .env("STNOUPGRADE", "1")
            .env("STNORESTART", "1")
            .env("HOME", &self.home)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("syncthing serve: {e}"))?;
        self.daemon = Some(Daemon {
            child,
            name: format!("syncthing {}", self.name),
        });
        poll(&format!("syncthing {} answers", self.name), START, || {
            Ok(self.get("/rest/system/ping").ok().map(|_| ()))
        })
        .map_err(|e| format!("{e}\n{}", tail(&self.log(), 3000)))
    }

    /// One REST call (HTTP/1.0, so the answer is never chunked).
    fn call(&self, method: &str, path: &str) -> Result<Value, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.gui)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let req = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nX-API-Key: {}\r\nContent-Length: 0\r\n\r\n",
            self.key
        );
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf);
        let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP header end")?;
        let status = head.split_whitespace().nth(1).unwrap_or("");
        if status != "200" {
            return Err(format!("{method} {path}: {head}\n{body}"));
        }
        if body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(body).map_err(|e| format!("{method} {path}: {e}: {body}"))
    }

    pub fn get(&self, path: &str) -> Result<Value, String> {
        self.call("GET", path)
    }

    pub fn post(&self, path: &str) -> Result<Value, String> {
        self.call("POST", path)
    }

    fn connected(&self, peer: &str) -> Result<bool, String> {
        let c = self.get("/rest/system/connections")?;
        Ok(c["connections"][peer]["connected"].as_bool().unwrap_or(false))
    }

    /// Rescan the folder now (returns when the scan is done).
    pub fn scan(&self) -> Result<(), String> {
        self.post(&format!("/rest/db/scan?folder={FOLDER}")).map(|_| ())
    }

    /// The folder's status (`/rest/db/status`).
    pub fn status(&self) -> Result<Value, String> {
        self.get(&format!("/rest/db/status?folder={FOLDER}"))
    }

    fn completion(&self, peer: &str) -> Result<Value, String> {
        self.get(&format!("/rest/db/completion?folder={FOLDER}&device={peer}"))
    }
}

impl Pair {
    /// Generate both homes under `root`, configure them to share `folder_a`
    /// and `folder_b`, start both and wait until they are connected.
    /// `order` is the pull order of `b` (`random`, `largestFirst`, ...).
    pub fn start(root: &Path, folder_a: &Path, folder_b: &Path, order_b: &str) -> Result<Pair, String> {
        let mut a = Instance::new("host-a", root.join("st-a"), folder_a.to_path_buf())?;
        let mut b = Instance::new("host-b", root.join("st-b"), folder_b.to_path_buf())?;
        a.configure(&b, "random")?;
        b.configure(&a, order_b)?;
        a.start()?;
        b.start()?;
        let p = Pair { a, b };
        p.wait_connected(true)?;
        Ok(p)
    }

    fn logs(&self) -> String {
        format!("{}\n{}", tail(&self.a.log(), 3000), tail(&self.b.log(), 3000))
    }

    /// Wait until both see the other connected (or both disconnected).
    pub fn wait_connected(&self, up: bool) -> Result<(), String> {
        poll(
            &format!("syncthing devices {}", if up { "connected" } else { "disconnected" }),
            START,
            || {
                let (x, y) = (self.a.connected(&self.b.id)?, self.b.connected(&self.a.id)?);
                Ok((x == up && y == up).then_some(()))
            },
        )
        .map_err(|e| format!("{e}\n{}", self.logs()))
    }

    /// Take both devices offline from each other (`/rest/system/pause`).
    pub fn pause(&self) -> Result<(), String> {
        self.a.post(&format!("/rest/system/pause?device={}", self.b.id))?;
        self.b.post(&format!("/rest/system/pause?device={}", self.a.id))?;
        self.wait_connected(false)
    }

    /// Bring them back (`/rest/system/resume`) and wait for the connection.
    pub fn resume(&self) -> Result<(), String> {
        self.a.post(&format!("/rest/system/resume?device={}", self.b.id))?;
        self.b.post(&format!("/rest/system/resume?device={}", self.a.id))?;
        self.wait_connected(true)
    }

    /// Rescan both sides, then wait until both are in sync: each idle with
    /// nothing needed, each 100% complete for the other device with no
    /// needed items, the same global state on both, twice in a row.
    pub fn wait_synced(&self) -> Result<(), String> {
        self.a.scan()?;
        self.b.scan()?;
        let mut good = 0;
        poll("syncthing folders in sync", SYNC, || {
            let (sa, sb) = (self.a.status()?, self.b.status()?);
            let (ca, cb) = (self.a.completion(&self.b.id)?, self.b.completion(&self.a.id)?);
            let idle = |s: &Value| s["state"] == "idle" && s["needTotalItems"] == 0;
            let done =
                |c: &Value| c["completion"].as_f64() == Some(100.0) && c["needItems"] == 0 && c["needDeletes"] == 0;
            let same = sa["globalFiles"] == sb["globalFiles"]
                && sa["globalDirectories"] == sb["globalDirectories"]
                && sa["globalBytes"] == sb["globalBytes"]
                && sa["localFiles"] == sb["localFiles"]
                && sa["localBytes"] == sb["localBytes"]
                && sa["localFiles"] == sa["globalFiles"];
            if idle(&sa) && idle(&sb) && done(&ca) && done(&cb) && same {
                good += 1;
            } else {
                good = 0;
            }
            Ok((good >= 3).then_some(()))
        })
        .map_err(|e| format!("{e}\n{}", self.logs()))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        for i in [&mut self.a, &mut self.b] {
            let _ = i.post("/rest/system/shutdown");
        }
        for i in [&mut self.a, &mut self.b] {
            if let Some(d) = i.daemon.as_mut() {
                let start = std::time::Instant::now();
                while d.alive() && start.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            i.daemon.take();
        }
    }
}
