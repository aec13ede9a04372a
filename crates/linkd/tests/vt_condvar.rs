//! Virtual time reaches Rust programs (issue 11): under the clock shim
//! (`shim/vt*.c`, built by `make install`) at TDF 4, `Condvar::wait_timeout`
//! (a futex wait through `syscall()`) and `thread::sleep` return after their
//! virtual duration, four times as long in real time. The test runs itself
//! again as the dilated child.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

const CHILD: &str = "FIDELNET_VT_TEST_CHILD";

fn shim() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build/shim/libfidelnet-vt.so");
    assert!(
        p.exists(),
        "{} is missing: run `make install`, which builds the clock shim",
        p.display()
    );
    p
}

fn now(clock: libc::clockid_t) -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid out pointer.
    assert_eq!(unsafe { libc::clock_gettime(clock, &mut t) }, 0);
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

/// A clock page (fidelnet.vt.page's layout) at `tdf`, virtual = real now.
fn page(tdf: f64) -> PathBuf {
    let mut b = vec![0u8; 4096];
    b[0..4].copy_from_slice(&0x7456_6E66u32.to_le_bytes());
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    b[8..12].copy_from_slice(&2u32.to_le_bytes());
    b[16..24].copy_from_slice(&tdf.to_le_bytes());
    for (i, c) in [
        libc::CLOCK_REALTIME,
        libc::CLOCK_MONOTONIC,
        libc::CLOCK_BOOTTIME,
    ]
    .into_iter()
    .enumerate()
    {
        let t = now(c);
        let at = 24 + 16 * i;
        b[at..at + 8].copy_from_slice(&t.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&t.to_le_bytes());
    }
    let p = std::env::temp_dir().join(format!("fidelnet-vt-condvar-{}", std::process::id()));
    std::fs::write(&p, b).unwrap();
    p
}

fn child_waits() -> (f64, f64) {
    let pair = (Mutex::new(false), Condvar::new());
    let t = Instant::now();
    let guard = pair.0.lock().unwrap();
    let (_guard, timeout) = pair
        .1
        .wait_timeout(guard, Duration::from_millis(250))
        .unwrap();
    assert!(timeout.timed_out());
    let waited = t.elapsed().as_secs_f64();
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    (waited, t.elapsed().as_secs_f64())
}

#[test]
fn condvar_and_sleep_last_their_virtual_time() {
    if std::env::var_os(CHILD).is_some() {
        let (waited, slept) = child_waits();
        println!("VT {waited} {slept}");
        return;
    }
    let shim = shim();
    let page = page(4.0);
    let began = Instant::now();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "condvar_and_sleep_last_their_virtual_time",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("LD_PRELOAD", &shim)
        .env("FIDELNET_VT_PAGE", &page)
        .output()
        .unwrap();
    let wall = began.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&page);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = text
        .lines()
        .find_map(|l| l.split_once("VT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no report from the child: {text}"));
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(
        (0.24..0.35).contains(&v[0]),
        "Condvar waited {} virtual s",
        v[0]
    );
    assert!(
        (0.09..0.15).contains(&v[1]),
        "sleep took {} virtual s",
        v[1]
    );
    // 0.35 virtual seconds at TDF 4, plus the child's start.
    assert!(
        (1.35..3.0).contains(&wall),
        "the child took {wall} s of wall time"
    );
}
