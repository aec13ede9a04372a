//! End to end over loopback: `recv` on 127.0.0.1, `send` a few thousand
//! packets on two flows at a low rate, then check both reports.
//!
//! Needs root (as fidelnet's privileged tests do: the receiver forces its
//! buffer size); otherwise it prints "skipped: needs root" and returns.
//! The receiver is stopped only through the PID this test started.

use std::fs;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fidelnet-pktgen");

/// A directory removed (with its contents) on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("pktgen-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The receiver started by this test; SIGTERM, then SIGKILL, on drop if it
/// is still running.
struct Receiver(Child);

impl Drop for Receiver {
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

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn wait_for(path: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Two free UDP ports on 127.0.0.1 (free when asked; the test is not
/// racing anyone who binds fixed ports in this range).
fn free_ports() -> (u16, u16) {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

#[test]
fn usage_errors_exit_2() {
    let out = Command::new(BIN)
        .args([
            "send",
            "--flow",
            "127.0.0.1:9",
            "--rate",
            "0",
            "--size",
            "64",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--rate"), "{err}");
    let out = Command::new(BIN)
        .args([
            "send",
            "--flow",
            "[::1]:9",
            "--rate",
            "10",
            "--size",
            "64",
            "--duration",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--size 64"));
}

#[test]
fn loopback_two_flows_without_loss() {
    if !nix::unistd::geteuid().is_root() {
        println!("skipped: needs root");
        return;
    }
    let dir = TempDir::new("loop");
    let (p0, p1) = free_ports();
    let ready = dir.0.join("ready");
    let recv_json = dir.0.join("recv.json");
    let send_json = dir.0.join("send.json");
    let hdr_log = dir.0.join("latency.hlog");
    let mut receiver = Receiver(
        Command::new(BIN)
            .args([
                "recv",
                "--bind",
                &format!("127.0.0.1:{p0}"),
                "--bind",
                &format!("127.0.0.1:{p1}"),
            ])
            .args([
                "--idle-stop",
                "0.5",
                "--duration",
                "30",
                "--interval-ms",
                "50",
            ])
            .arg("--json")
            .arg(&recv_json)
            .arg("--ready")
            .arg(&ready)
            .arg("--hdr-log")
            .arg(&hdr_log)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(&ready, Duration::from_secs(5)),
        "the receiver never got ready"
    );

    // 3000 packets at 2000 pps: 1.5 s, 1500 per flow.
    let send = Command::new(BIN)
        .args([
            "send",
            "--flow",
            &format!("127.0.0.1:{p0}"),
            "--flow",
            &format!("127.0.0.1:{p1}"),
        ])
        .args([
            "--rate",
            "2000",
            "--size",
            "100",
            "--duration",
            "1.5",
            "--batch",
            "8",
        ])
        .arg("--json")
        .arg(&send_json)
        .output()
        .unwrap();
    assert_eq!(
        send.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&send.stderr)
    );
    let status = wait_exit(&mut receiver.0, Duration::from_secs(10))
        .expect("the receiver did not stop when idle");
    assert!(status.success());

    let s = read_json(&send_json);
    assert_eq!(s["role"], "send");
    assert_eq!(s["sent"], 3000);
    assert_eq!(s["send_errors"], 0);
    assert_eq!(s["rate_reached"], true);
    assert_eq!(s["payload_bytes"], 100 - 46);
    assert_eq!(s["flows"][1]["sent"], 1500);

    let r = read_json(&recv_json);
    assert_eq!(r["role"], "recv");
    assert_eq!(r["received"], 3000);
    assert_eq!(r["unique"], 3000);
    assert_eq!(
        (r["duplicates"].as_u64(), r["malformed"]["total"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(r["bytes"], 3000 * 54);
    assert_eq!(r["stop_reason"], "idle");
    assert_eq!(r["timestamp_source"], "so_timestamping_software");
    assert_eq!(r["userspace_timestamps"], 0);
    let flows = r["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    for (id, f) in flows.iter().enumerate() {
        assert_eq!(f["id"], id);
        assert_eq!(
            (
                f["received"].as_u64(),
                f["max_seq"].as_u64(),
                f["lost_by_seq"].as_u64()
            ),
            (Some(1500), Some(1499), Some(0))
        );
    }
    let lat = &r["latency"];
    assert_eq!(lat["count"], 3000);
    assert!(lat["min_ns"].as_u64().unwrap() > 0, "{lat}");
    assert!(lat["p50_ns"].as_u64().unwrap() < 10_000_000, "{lat}");
    assert_eq!(r["negative_latency"], 0);
    let intervals = r["intervals"].as_array().unwrap();
    let in_intervals: u64 = intervals
        .iter()
        .map(|i| i["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(in_intervals + r["interval_late"].as_u64().unwrap(), 3000);
    assert!(
        (29..=32).contains(&intervals.len()),
        "{} intervals",
        intervals.len()
    );
    let log = fs::read_to_string(&hdr_log).unwrap();
    assert!(log.contains("#[StartTime: "));
    assert_eq!(
        log.lines().filter(|l| !l.starts_with('#')).count(),
        intervals.len()
    );
}
