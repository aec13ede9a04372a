//! Load: a UDP sender in namespace a, a UDP receiver in namespace b, and iperf3.

use crate::sys::{self, Res};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const IP_A: [u8; 4] = [10, 98, 0, 1];
pub const IP_B: [u8; 4] = [10, 98, 0, 2];
const PORT: u16 = 5001;
const BATCH: usize = 64;

#[derive(Clone, Copy)]
pub enum Load {
    /// As fast as sendmmsg goes.
    Flood { payload: usize },
    /// `pps` packets per second, each carrying its CLOCK_MONOTONIC send time.
    Paced { pps: u64, payload: usize },
}

/// A sender and a receiver thread; stopped and joined on drop.
pub struct Flow {
    pub sent: Arc<AtomicU64>,
    pub recvd: Arc<AtomicU64>,
    /// One-way delays (ns) of paced packets.
    pub delays: Arc<Mutex<Vec<u64>>>,
    pub stop: Arc<AtomicBool>,
    ready: Arc<AtomicU64>,
    handles: Vec<JoinHandle<Res<()>>>,
    clocks: Vec<libc::clockid_t>,
}

impl Flow {
    pub fn start(ns_a: &str, ns_b: &str, cpu: usize, load: Load) -> Res<Flow> {
        let mut f = Flow {
            sent: Arc::default(),
            recvd: Arc::default(),
            delays: Arc::default(),
            stop: Arc::default(),
            ready: Arc::default(),
            handles: Vec::new(),
            clocks: Vec::new(),
        };
        let (ns, stop, recvd, delays, ready) = (
            ns_b.to_owned(),
            f.stop.clone(),
            f.recvd.clone(),
            f.delays.clone(),
            f.ready.clone(),
        );
        f.handles.push(std::thread::spawn(move || {
            sys::enter_netns(&ns)?;
            sys::pin(cpu)?;
            receive(&stop, &recvd, &delays, &ready)
        }));
        // The receiver's socket must exist before the first packet arrives.
        let t0 = Instant::now();
        while f.ready.load(Relaxed) == 0 {
            if t0.elapsed() > Duration::from_secs(5) || f.handles[0].is_finished() {
                return f.finish().and(Err("receiver did not start".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let (ns, stop, sent) = (ns_a.to_owned(), f.stop.clone(), f.sent.clone());
        f.handles.push(std::thread::spawn(move || {
            sys::enter_netns(&ns)?;
            sys::pin(cpu)?;
            send(&stop, &sent, load)
        }));
        use std::os::unix::thread::JoinHandleExt;
        for h in &f.handles {
            let c = sys::thread_clock(h.as_pthread_t())?;
            f.clocks.push(c);
        }
        Ok(f)
    }

    /// CPU time of the sender and receiver threads (while they run).
    pub fn cpu_ns(&self) -> u64 {
        self.clocks.iter().map(|&c| sys::thread_cpu_ns(c)).sum()
    }

    pub fn finish(&mut self) -> Res<()> {
        self.stop.store(true, Relaxed);
        let mut r = Ok(());
        for h in self.handles.drain(..) {
            let x = h.join().map_err(|_| "traffic thread panicked".to_string());
            if r.is_ok() {
                r = x.and_then(|x| x);
            }
        }
        r
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("flow: {e}");
        }
    }
}

fn send(stop: &AtomicBool, sent: &AtomicU64, load: Load) -> Res<()> {
    let sock = sys::udp_socket(IP_A, 0, Some((IP_B, PORT)))?;
    let fd = sock.as_raw_fd();
    // Never block for long: the stop flag must be seen.
    sys::set_timeo(fd, libc::SO_SNDTIMEO, Duration::from_millis(100))?;
    match load {
        Load::Flood { payload } => {
            let mut buf = vec![0u8; payload];
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: payload,
            };
            let mut hdrs: Vec<libc::mmsghdr> = (0..BATCH)
                .map(|_| {
                    // SAFETY: plain data, all-zero valid.
                    let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                    h.msg_hdr.msg_iov = &mut iov;
                    h.msg_hdr.msg_iovlen = 1;
                    h
                })
                .collect();
            while !stop.load(Relaxed) {
                // SAFETY: every header points at iov, which points at buf.
                let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), BATCH as u32, 0) };
                if r > 0 {
                    sent.fetch_add(r as u64, Relaxed);
                }
            }
        }
        Load::Paced { pps, payload } => {
            let mut buf = vec![0u8; payload.max(16)];
            let period = 1_000_000_000 / pps;
            let mut next = sys::mono_ns();
            let mut seq = 0u64;
            while !stop.load(Relaxed) {
                next += period;
                sys::sleep_until_mono(next);
                seq += 1;
                buf[..8].copy_from_slice(&seq.to_ne_bytes());
                buf[8..16].copy_from_slice(&sys::mono_ns().to_ne_bytes());
                // SAFETY: buf is valid for its length.
                let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), 0) };
                if r > 0 {
                    sent.fetch_add(1, Relaxed);
                }
            }
        }
    }
    Ok(())
}

fn receive(
    stop: &AtomicBool,
    recvd: &AtomicU64,
    delays: &Mutex<Vec<u64>>,
    ready: &AtomicU64,
) -> Res<()> {
    const SZ: usize = 2048;
    let sock = sys::udp_socket(IP_B, PORT, None)?;
    let fd = sock.as_raw_fd();
    sys::set_timeo(fd, libc::SO_RCVTIMEO, Duration::from_millis(100))?;
    ready.store(1, Relaxed);
    let mut bufs = vec![0u8; BATCH * SZ];
    let base = bufs.as_mut_ptr();
    let mut iov: Vec<libc::iovec> = (0..BATCH)
        .map(|i| libc::iovec {
            // SAFETY: within bufs.
            iov_base: unsafe { base.add(i * SZ) }.cast(),
            iov_len: SZ,
        })
        .collect();
    let mut hdrs: Vec<libc::mmsghdr> = iov
        .iter_mut()
        .map(|v| {
            // SAFETY: plain data, all-zero valid.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
            h
        })
        .collect();
    let mut local = Vec::new();
    while !stop.load(Relaxed) {
        // SAFETY: hdrs/iov/bufs are valid for BATCH messages of SZ bytes.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 {
            continue;
        }
        let now = sys::mono_ns();
        recvd.fetch_add(n as u64, Relaxed);
        for h in &hdrs[..n as usize] {
            if h.msg_len >= 16 {
                // SAFETY: at least 16 bytes were received into this buffer.
                let p = unsafe {
                    std::slice::from_raw_parts((*h.msg_hdr.msg_iov).iov_base as *const u8, 16)
                };
                let ts = u64::from_ne_bytes(p[8..16].try_into().unwrap());
                if ts != 0 && ts <= now {
                    local.push(now - ts);
                }
            }
        }
    }
    drop(bufs);
    delays.lock().unwrap().extend(local);
    Ok(())
}

/// A child process killed (by its own PID) and reaped on drop.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// One iperf3 TCP run a -> b; returns the receiver's bits per second, or None if the
/// client did not manage to run (no connection).
pub fn iperf3(ns_a: &str, ns_b: &str, secs: u64) -> Res<Option<f64>> {
    let b = format!("{}.{}.{}.{}", IP_B[0], IP_B[1], IP_B[2], IP_B[3]);
    let server = Command::new("ip")
        .args([
            "netns", "exec", ns_b, "iperf3", "-s", "-1", "-B", &b, "-p", "5201",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 -s: {e}"))?;
    let _server = ChildGuard(server);
    std::thread::sleep(Duration::from_millis(300));
    let secs_s = secs.to_string();
    let client = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns_a,
            "iperf3",
            "-c",
            &b,
            "-p",
            "5201",
            "-t",
            &secs_s,
            "-J",
            "--connect-timeout",
            "3000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 -c: {e}"))?;
    let mut client = ChildGuard(client);
    let deadline = Instant::now() + Duration::from_secs(secs + 15);
    while client.0.try_wait().map_err(|e| e.to_string())?.is_none() {
        if Instant::now() > deadline || crate::interrupted() {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = String::new();
    if let Some(mut so) = client.0.stdout.take() {
        use std::io::Read;
        let _ = so.read_to_string(&mut out);
    }
    // Crude, dependency-free: the first bits_per_second after "sum_received".
    let Some(i) = out.find("\"sum_received\"") else {
        return Ok(None);
    };
    let rest = &out[i..];
    let Some(j) = rest.find("\"bits_per_second\":") else {
        return Ok(None);
    };
    let num: String = rest[j + 18..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '+')
        .collect();
    Ok(num.parse().ok())
}
