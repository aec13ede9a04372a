//! End to end, as root: two network namespaces joined by one engine link
//! with 10 ms of delay each way; ping must see about 20 ms.
//!
//! Skipped (with a printed reason) when not run as root. Everything it
//! creates (namespaces, the daemon, its socket directory) is removed by drop
//! guards, whatever happens; processes are stopped only by the PID this
//! test started.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A network namespace created by this test, deleted on drop.
struct Netns(String);

impl Netns {
    fn add(name: String) -> Netns {
        run("ip", &["netns", "add", &name]);
        Netns(name)
    }
    fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// The daemon started by this test; SIGTERM then SIGKILL on drop if it is
/// still running.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            if wait_exit(&mut self.0, Duration::from_secs(3)).is_none() {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
}

/// A directory removed (with its contents) on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

struct Client(BufReader<UnixStream>);

impl Client {
    fn connect(path: &Path) -> Client {
        let start = Instant::now();
        while !path.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no control socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // The socket appears only once the daemon listens.
        let s = UnixStream::connect(path).expect("connect to the control socket");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client(BufReader::new(s))
    }

    fn call(&mut self, req: Value) -> Value {
        let mut line = req.to_string();
        line.push('\n');
        self.0.get_mut().write_all(line.as_bytes()).unwrap();
        let mut reply = String::new();
        self.0.read_line(&mut reply).unwrap();
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["ok"], true, "{req} -> {reply}");
        reply
    }
}

/// RTTs in ms from ping's `time=... ms` lines.
fn rtts(ping_output: &str) -> Vec<f64> {
    ping_output
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn ping_through_a_10ms_link() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root (network namespaces and TAP devices)");
        return;
    }
    let pid = std::process::id();
    let dir = TempDir(std::env::temp_dir().join(format!("fnlinkdtest{pid}")));
    std::fs::create_dir(&dir.0).unwrap();
    let control = dir.0.join("ctl");
    let ns_a = Netns::add(format!("fnlinkdtest{pid}a"));
    let ns_b = Netns::add(format!("fnlinkdtest{pid}b"));
    // No IPv6 on the TAPs: an interface coming up sends router solicitations and MLD
    // reports at once, and one that reaches the other end before its TAP is up is a
    // write error (EIO) that has nothing to do with the pings measured here.
    for ns in [&ns_a, &ns_b] {
        run(
            "ip",
            &[
                "netns",
                "exec",
                &ns.0,
                "sysctl",
                "-qw",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        );
    }

    let mut daemon = Daemon(
        Command::new(env!("CARGO_BIN_EXE_fidelnet-linkd"))
            .arg("--control")
            .arg(&control)
            .arg("--parent-pid")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start fidelnet-linkd"),
    );
    let mut c = Client::connect(&control);
    let hello = c.call(json!({"op":"hello","id":1}));
    assert_eq!(hello["endpoint"], "tap");
    assert_eq!(hello["id"], 1);
    assert_eq!(hello["pid"], daemon.0.id());

    let delay = json!({"delay_ns": 10_000_000});
    c.call(json!({"op":"add_link","link":"l0",
                  "a":{"netns":ns_a.path(),"ifname":"fnl0"},
                  "b":{"netns":ns_b.path(),"ifname":"fnl0"},
                  "ab":delay,"ba":delay}));
    for (ns, addr) in [(&ns_a, "10.99.0.1/24"), (&ns_b, "10.99.0.2/24")] {
        run("ip", &["-n", &ns.0, "addr", "add", addr, "dev", "fnl0"]);
        run("ip", &["-n", &ns.0, "link", "set", "fnl0", "up"]);
    }
    // The first ping also waits for ARP (another 20 ms): warm up first.
    let ping = |count: &str| {
        run(
            "ip",
            &[
                "netns",
                "exec",
                &ns_a.0,
                "ping",
                "-n",
                "-c",
                count,
                "-i",
                "0.2",
                "-W",
                "2",
                "10.99.0.2",
            ],
        )
    };
    ping("1");
    let out = ping("5");
    let times = rtts(&out);
    assert_eq!(times.len(), 5, "{out}");
    let avg = times.iter().sum::<f64>() / times.len() as f64;
    assert!((15.0..=25.0).contains(&avg), "average RTT {avg} ms: {out}");
    // Never faster than the two delays.
    for t in &times {
        assert!(*t >= 19.9, "RTT {t} ms: {out}");
    }

    let stats = c.call(json!({"op":"stats","link":"l0"}));
    let l0 = &stats["links"]["l0"];
    assert_eq!(l0["up"], true);
    for dir in ["ab", "ba"] {
        let tx = l0[dir]["tx_packets"].as_u64().unwrap();
        assert!(tx >= 6, "{dir}: {tx} packets; {stats}");
        assert_eq!(l0[dir]["write_errors"], 0, "{stats}");
    }

    c.call(json!({"op":"shutdown"}));
    let status = wait_exit(&mut daemon.0, Duration::from_secs(5)).expect("daemon exits");
    assert!(status.success(), "{status}");
    assert!(!control.exists(), "control socket left behind");
    // Closing the TAP descriptors destroyed the devices.
    let gone = Command::new("ip")
        .args(["-n", &ns_a.0, "link", "show", "fnl0"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!gone.success(), "fnl0 still exists in {}", ns_a.0);
}
