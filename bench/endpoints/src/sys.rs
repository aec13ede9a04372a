//! Thin wrappers over the syscalls and `ip` invocations the benchmark needs.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::time::Duration;

pub type Res<T> = Result<T, String>;

pub fn os_err<T>(what: &str) -> Res<T> {
    Err(format!("{what}: {}", io::Error::last_os_error()))
}

pub fn check(ret: libc::c_int, what: &str) -> Res<libc::c_int> {
    if ret < 0 {
        os_err(what)
    } else {
        Ok(ret)
    }
}

/// Runs `ip` with an argument list (never through a shell).
pub fn ip(args: &[&str]) -> Res<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A named network namespace; deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn create(name: String) -> Res<Netns> {
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        // No IPv6: keeps router solicitations and DAD out of the counters.
        let n = ns.name.clone();
        in_netns(&n, || {
            for k in ["all", "default"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{k}/disable_ipv6"), "1");
            }
            Ok(())
        })?;
        Ok(ns)
    }

    pub fn ip(&self, args: &[&str]) -> Res<()> {
        let mut v = vec!["-n", self.name.as_str()];
        v.extend_from_slice(args);
        ip(&v)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("cleanup: {e}");
        }
    }
}

/// Moves the calling thread into the named network namespace.
pub fn enter_netns(name: &str) -> Res<()> {
    let path = CString::new(format!("/run/netns/{name}")).unwrap();
    // SAFETY: path is a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    check(fd, "open netns")?;
    // SAFETY: fd was just opened and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain syscall on a valid fd.
    check(
        unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) },
        "setns",
    )?;
    Ok(())
}

/// Runs `f` on a short-lived thread inside the namespace.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Res<T> + Send + 'static,
) -> Res<T> {
    let name = name.to_owned();
    std::thread::spawn(move || {
        enter_netns(&name)?;
        f()
    })
    .join()
    .map_err(|_| "helper thread panicked".to_string())?
}

/// Pins the calling thread to one CPU.
pub fn pin(cpu: usize) -> Res<()> {
    // SAFETY: cpu_set_t is plain data; the macros only touch it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        check(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            "sched_setaffinity",
        )?;
    }
    Ok(())
}

pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn sleep_until_mono(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is valid; EINTR just ends the sleep early.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// CPU time of a (running) thread, through its CPU clock.
pub fn thread_cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn thread_clock(t: libc::pthread_t) -> Res<libc::clockid_t> {
    let mut c: libc::clockid_t = 0;
    // SAFETY: t is a live thread (its JoinHandle is held by the caller).
    let r = unsafe { libc::pthread_getcpuclockid(t, &mut c) };
    if r != 0 {
        return Err(format!(
            "pthread_getcpuclockid: {}",
            io::Error::from_raw_os_error(r)
        ));
    }
    Ok(c)
}

/// Busy nanoseconds (everything but idle and iowait) per CPU, from /proc/stat.
pub fn cpu_busy_ns() -> Vec<u64> {
    // SAFETY: no arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (total - idle) * 1_000_000_000 / hz
        })
        .collect()
}

/// CPU time (user + system) of ksoftirqd/0, ksoftirqd/1, ... in ns, indexed by CPU.
pub fn ksoftirqd_ns() -> Vec<u64> {
    // SAFETY: no arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    let mut v = vec![0u64; cpu_busy_ns().len()];
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in dir.flatten() {
        let p = e.path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        let Some(cpu) = comm.trim().strip_prefix("ksoftirqd/") else {
            continue;
        };
        let (Ok(cpu), Ok(stat)) = (
            cpu.parse::<usize>(),
            std::fs::read_to_string(p.join("stat")),
        ) else {
            continue;
        };
        // Fields after "(comm) ": state is 3rd overall; utime/stime are 14th/15th.
        let rest = stat.rsplit_once(')').map_or("", |x| x.1);
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        if let (Some(slot), Some(u), Some(s)) = (v.get_mut(cpu), f.get(11), f.get(12)) {
            *slot = (u + s) * 1_000_000_000 / hz;
        }
    }
    v
}

/// The counters of one protocol line pair (`Udp:`, `Tcp:`) of /proc/net/snmp, as seen
/// from inside the namespace.
pub fn snmp(ns: &str, proto: &'static str) -> Res<Vec<(String, u64)>> {
    in_netns(ns, move || {
        let text = std::fs::read_to_string("/proc/thread-self/net/snmp")
            .map_err(|e| format!("snmp: {e}"))?;
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(proto)).collect();
        if lines.len() < 2 {
            return Err(format!("snmp: no {proto} lines"));
        }
        Ok(lines[0]
            .split_whitespace()
            .skip(1)
            .zip(lines[1].split_whitespace().skip(1))
            .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
            .collect())
    })
}

pub fn counter(c: &[(String, u64)], name: &str) -> u64 {
    c.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v)
}

fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    ifr
}

pub const ETHTOOL_GTXCSUM: u32 = 0x16;
pub const ETHTOOL_STXCSUM: u32 = 0x17;
pub const ETHTOOL_GTSO: u32 = 0x1e;
pub const ETHTOOL_GGSO: u32 = 0x23;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `ethtool` get/set of one legacy flag, for an interface in the calling thread's netns
/// (ethtool(8) is not installed here; this is what `ethtool -K dev tx off` does).
pub fn ethtool_value(dev: &str, cmd: u32, data: u32) -> Res<u32> {
    // SAFETY: plain socket syscall.
    let fd = check(
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
        "socket",
    )?;
    // SAFETY: fd is fresh and owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ev = EthtoolValue { cmd, data };
    let mut ifr = ifreq(dev);
    ifr.ifr_ifru.ifru_data = &mut ev as *mut EthtoolValue as *mut libc::c_char;
    // SAFETY: ifr points at ev, which outlives the call.
    check(
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut ifr) },
        &format!("SIOCETHTOOL {cmd:#x} on {dev}"),
    )?;
    Ok(ev.data)
}

const IFF_VNET_HDR: libc::c_int = 0x4000;
const TUNSETOFFLOAD: libc::Ioctl = 0x400454d0;
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
const TUN_F_TSO6: libc::c_ulong = 0x04;
const TUN_F_TSO_ECN: libc::c_ulong = 0x08;

/// Creates a TAP device (no packet-info header; without `vnet`, no offloads) in the
/// calling thread's netns and returns its non-blocking queue fd.
pub fn open_tap(name: &str, vnet: bool) -> Res<OwnedFd> {
    let path = CString::new("/dev/net/tun").unwrap();
    // SAFETY: path is a valid C string.
    let fd = check(
        unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        },
        "open /dev/net/tun",
    )?;
    // SAFETY: fd is fresh and owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ifr = ifreq(name);
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if vnet {
        flags |= IFF_VNET_HDR;
    }
    ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: ifr is a valid ifreq.
    check(
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) },
        "TUNSETIFF",
    )?;
    if vnet {
        // What the tap may hand us / accept: partial checksums and TSO super-frames.
        let off: libc::c_ulong = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        // SAFETY: TUNSETOFFLOAD takes the flags by value.
        check(
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, off) },
            "TUNSETOFFLOAD",
        )?;
    }
    Ok(fd)
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> Res<()> {
    // SAFETY: v is a valid c_int for the duration of the call.
    check(
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        },
        &format!("setsockopt {level}/{opt}"),
    )?;
    Ok(())
}

pub fn set_bufs(fd: RawFd, bytes: libc::c_int) -> Res<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes)?;
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes)
}

/// SO_RCVTIMEO / SO_SNDTIMEO.
pub fn set_timeo(fd: RawFd, opt: libc::c_int, d: Duration) -> Res<()> {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: tv is valid for the call.
    check(
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        },
        "SO_*TIMEO",
    )?;
    Ok(())
}

/// An AF_PACKET raw socket bound to one interface (in the calling thread's netns),
/// not seeing its own outgoing frames, bypassing the qdisc on transmit.
pub fn packet_socket(dev: &str, vnet_hdr: bool) -> Res<OwnedFd> {
    let cname = CString::new(dev).unwrap();
    // SAFETY: cname is a valid C string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return os_err(&format!("if_nametoindex {dev}"));
    }
    // Protocol 0 at creation: nothing is queued until bind() names the interface.
    // SAFETY: plain socket syscall.
    let fd = check(
        unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) },
        "socket(AF_PACKET)",
    )?;
    // SAFETY: fd is fresh and owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
    setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1)?;
    if vnet_hdr {
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
    }
    set_bufs(raw, 8 << 20)?;
    // SAFETY: sockaddr_ll is plain data.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the given size.
    check(
        unsafe {
            libc::bind(
                raw,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        },
        &format!("bind AF_PACKET to {dev}"),
    )?;
    Ok(fd)
}

/// A UDP socket bound to `src` and connected to `dst`.
pub fn udp_socket(src: [u8; 4], sport: u16, dst: Option<([u8; 4], u16)>) -> Res<OwnedFd> {
    // SAFETY: plain socket syscall.
    let fd = check(
        unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) },
        "socket(udp)",
    )?;
    // SAFETY: fd is fresh and owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_bufs(fd.as_raw_fd(), 8 << 20)?;
    let sa = |a: [u8; 4], p: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: p.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let s = sa(src, sport);
    // SAFETY: s is a valid sockaddr_in.
    check(
        unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &s as *const libc::sockaddr_in as *const libc::sockaddr,
                len,
            )
        },
        "bind udp",
    )?;
    if let Some((a, p)) = dst {
        let d = sa(a, p);
        // SAFETY: d is a valid sockaddr_in.
        check(
            unsafe {
                libc::connect(
                    fd.as_raw_fd(),
                    &d as *const libc::sockaddr_in as *const libc::sockaddr,
                    len,
                )
            },
            "connect udp",
        )?;
    }
    Ok(fd)
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns readiness.
pub fn poll_in(fds: &[RawFd], timeout_ms: i32) -> Vec<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: p is a valid array of pollfd.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r <= 0 {
        return vec![false; fds.len()];
    }
    p.iter().map(|x| x.revents != 0).collect()
}
