//! Link-endpoint benchmark for linkd: TAP devices vs veth + AF_PACKET.
//!
//! Run as root: `cargo run --release --manifest-path bench/endpoints/Cargo.toml -- --help`.
//! See docs/decisions/link-endpoints.md for what it measures and the results.

mod fwd;
mod sys;
mod traffic;

use fwd::{Forwarder, Kind};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};
use sys::{Netns, Res};
use traffic::{Flow, Load};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Relaxed);
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Relaxed)
}

/// Sleeps, failing early if SIGINT/SIGTERM arrived (so that Drop guards clean up).
fn nap(secs: f64) -> Res<()> {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        if interrupted() {
            return Err("interrupted".into());
        }
        std::thread::sleep(Duration::from_millis(20).min(end - Instant::now()));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Mode {
    /// Baseline: one veth pair a <-> b, no forwarder.
    Veth,
    Tap,
    /// TAP with IFF_VNET_HDR and TUNSETOFFLOAD (checksum + TSO offloads on).
    TapVnet,
    Mmsg,
    Ring,
    /// recvmmsg/sendmmsg with PACKET_VNET_HDR, node offloads left on.
    Vnet,
}

const ALL: [Mode; 6] = [
    Mode::Veth,
    Mode::Tap,
    Mode::TapVnet,
    Mode::Mmsg,
    Mode::Ring,
    Mode::Vnet,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Veth => "veth (no forwarder)",
            Mode::Tap => "tap",
            Mode::TapVnet => "tap-vnet",
            Mode::Mmsg => "afpacket-mmsg",
            Mode::Ring => "afpacket-ring",
            Mode::Vnet => "afpacket-vnet",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        ALL.into_iter()
            .find(|m| m.name().split(' ').next() == Some(s))
    }

    fn kind(self) -> Option<Kind> {
        match self {
            Mode::Veth => None,
            Mode::Tap => Some(Kind::Tap { vnet: false }),
            Mode::TapVnet => Some(Kind::Tap { vnet: true }),
            Mode::Mmsg => Some(Kind::Mmsg { vnet: false }),
            Mode::Ring => Some(Kind::Ring),
            Mode::Vnet => Some(Kind::Mmsg { vnet: true }),
        }
    }

    /// Plain AF_PACKET modes that need the node ends' checksum/TSO offloads off.
    fn needs_offloads_off(self) -> bool {
        // (TAP without IFF_VNET_HDR has no offloads to begin with.)
        matches!(self, Mode::Mmsg | Mode::Ring)
    }
}

struct Args {
    modes: Vec<Mode>,
    reps: usize,
    secs: f64,
    lat_pps: u64,
    tcp_secs: u64,
    fwd_cpu: usize,
    app_cpu: usize,
}

const USAGE: &str =
    "usage: endpoints [--mode veth|tap|tap-vnet|afpacket-mmsg|afpacket-ring|afpacket-vnet|all]...
                 [--reps 3] [--secs 5] [--lat-pps 1000] [--tcp-secs 3]
                 [--fwd-cpu 0] [--app-cpu 1] [--quick]
Runs as root. Creates namespaces fnep<pid>{a,b,f} and deletes them again.
Without --mode, runs all modes; repetitions interleave the modes.";

fn parse_args() -> Res<Args> {
    let mut a = Args {
        modes: Vec::new(),
        reps: 3,
        secs: 5.0,
        lat_pps: 1000,
        tcp_secs: 3,
        fwd_cpu: 0,
        app_cpu: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--mode" => {
                let v = val()?;
                if v == "all" {
                    a.modes.extend(ALL);
                } else {
                    a.modes
                        .push(Mode::parse(&v).ok_or(format!("unknown mode {v}\n{USAGE}"))?);
                }
            }
            "--reps" => a.reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--secs" => a.secs = val()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--lat-pps" => a.lat_pps = val()?.parse().map_err(|e| format!("--lat-pps: {e}"))?,
            "--tcp-secs" => a.tcp_secs = val()?.parse().map_err(|e| format!("--tcp-secs: {e}"))?,
            "--fwd-cpu" => a.fwd_cpu = val()?.parse().map_err(|e| format!("--fwd-cpu: {e}"))?,
            "--app-cpu" => a.app_cpu = val()?.parse().map_err(|e| format!("--app-cpu: {e}"))?,
            "--quick" => {
                a.reps = 1;
                a.secs = 1.0;
                a.tcp_secs = 1;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ => return Err(format!("unknown argument {k}\n{USAGE}")),
        }
    }
    if a.modes.is_empty() {
        a.modes.extend(ALL);
    }
    a.modes.sort();
    a.modes.dedup();
    Ok(a)
}

const MAC_A: &str = "02:98:00:00:00:01";
const MAC_B: &str = "02:98:00:00:00:02";

/// Everything one mode creates. Fields drop in order: endpoint fds, then namespaces
/// (deleting a namespace deletes the veths and TAPs inside it).
struct Topo {
    ports: Option<[OwnedFd; 2]>,
    f: Option<Netns>,
    b: Netns,
    a: Netns,
}

impl Topo {
    fn setup(mode: Mode) -> Res<Topo> {
        let pid = std::process::id();
        let a = Netns::create(format!("fnep{pid}a"))?;
        let b = Netns::create(format!("fnep{pid}b"))?;
        let f = match mode {
            Mode::Veth => None,
            _ => Some(Netns::create(format!("fnep{pid}f"))?),
        };
        let mut ports = None;
        match (mode, &f) {
            (Mode::Veth, _) => a.ip(&[
                "link", "add", "n0", "type", "veth", "peer", "name", "n0", "netns", &b.name,
            ])?,
            (Mode::Tap | Mode::TapVnet, Some(f)) => {
                let vnet = mode == Mode::TapVnet;
                // The daemon creates the TAPs in its own namespace, keeps the queue fds,
                // and moves the devices into the nodes.
                ports = Some(sys::in_netns(&f.name, move || {
                    Ok([sys::open_tap("ta", vnet)?, sys::open_tap("tb", vnet)?])
                })?);
                for (dev, ns) in [("ta", &a), ("tb", &b)] {
                    f.ip(&["link", "set", dev, "netns", &ns.name])?;
                    ns.ip(&["link", "set", dev, "name", "n0"])?;
                }
            }
            (_, Some(f)) => {
                for (dev, ns) in [("fa", &a), ("fb", &b)] {
                    ns.ip(&[
                        "link", "add", "n0", "type", "veth", "peer", "name", dev, "netns", &f.name,
                    ])?;
                    f.ip(&["link", "set", dev, "up"])?;
                }
            }
            _ => unreachable!(),
        }
        for (ns, ip, mac, peer_ip, peer_mac) in [
            (&a, "10.98.0.1/24", MAC_A, "10.98.0.2", MAC_B),
            (&b, "10.98.0.2/24", MAC_B, "10.98.0.1", MAC_A),
        ] {
            ns.ip(&["link", "set", "n0", "address", mac])?;
            ns.ip(&["addr", "add", ip, "dev", "n0"])?;
            ns.ip(&["link", "set", "n0", "up"])?;
            ns.ip(&[
                "neigh",
                "replace",
                peer_ip,
                "lladdr",
                peer_mac,
                "dev",
                "n0",
                "nud",
                "permanent",
            ])?;
        }
        if matches!(mode, Mode::Mmsg | Mode::Ring | Mode::Vnet) {
            let vnet = mode == Mode::Vnet;
            ports = Some(sys::in_netns(&f.as_ref().unwrap().name, move || {
                Ok([
                    sys::packet_socket("fa", vnet)?,
                    sys::packet_socket("fb", vnet)?,
                ])
            })?);
        }
        Ok(Topo { ports, f, b, a })
    }

    /// `ethtool -K n0 tx on|off` on both node ends (TSO follows tx checksumming).
    fn set_node_tx_offload(&self, on: bool) -> Res<String> {
        let mut state = Vec::new();
        for ns in [&self.a, &self.b] {
            let s = sys::in_netns(&ns.name, move || {
                sys::ethtool_value("n0", sys::ETHTOOL_STXCSUM, on as u32)?;
                Ok(format!(
                    "tx-csum={} tso={} gso={}",
                    sys::ethtool_value("n0", sys::ETHTOOL_GTXCSUM, 0)?,
                    sys::ethtool_value("n0", sys::ETHTOOL_GTSO, 0)?,
                    sys::ethtool_value("n0", sys::ETHTOOL_GGSO, 0)?
                ))
            })?;
            state.push(s);
        }
        Ok(state.join(" / "))
    }
}

type Vals = Vec<(&'static str, f64)>;

struct Snap {
    t: Instant,
    sent: u64,
    recvd: u64,
    fwd_tx: u64,
    fwd_cpu: u64,
    app_cpu: u64,
    softirqd: Vec<u64>,
    cpus: Vec<u64>,
    udp: Vec<(String, u64)>,
}

fn snap(t: &Topo, fwd: Option<&Forwarder>, flow: &Flow) -> Res<Snap> {
    let udp = sys::snmp(&t.b.name, "Udp:")?;
    Ok(Snap {
        t: Instant::now(),
        sent: flow.sent.load(Relaxed),
        recvd: flow.recvd.load(Relaxed),
        fwd_tx: fwd.map_or(0, |f| f.stats.tx.load(Relaxed)),
        fwd_cpu: fwd.map_or(0, |f| f.cpu_ns()),
        app_cpu: flow.cpu_ns(),
        softirqd: sys::ksoftirqd_ns(),
        cpus: sys::cpu_busy_ns(),
        udp,
    })
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn flood(
    t: &Topo,
    mut fwd: Option<&mut Forwarder>,
    a: &Args,
    payload: usize,
    secs: f64,
) -> Res<Vals> {
    let load = load1();
    let mut flow = Flow::start(&t.a.name, &t.b.name, a.app_cpu, Load::Flood { payload })?;
    nap(0.5)?;
    let s0 = snap(t, fwd.as_deref(), &flow)?;
    nap(secs)?;
    let s1 = snap(t, fwd.as_deref(), &flow)?;
    flow.finish()?;
    if let Some(f) = fwd.as_mut() {
        f.check_alive()?;
    }
    let dt = (s1.t - s0.t).as_secs_f64();
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
    let fwd_frames = d(s0.fwd_tx, s1.fwd_tx);
    let stack = d(
        sys::counter(&s0.udp, "InDatagrams"),
        sys::counter(&s1.udp, "InDatagrams"),
    ) + d(
        sys::counter(&s0.udp, "RcvbufErrors"),
        sys::counter(&s1.udp, "RcvbufErrors"),
    );
    let cpu = |i: usize| d(s0.cpus[i], s1.cpus[i]);
    let busy: f64 = (0..s0.cpus.len()).map(cpu).sum();
    let softirqd = |i: usize| d(s0.softirqd[i], s1.softirqd[i]);
    let softirqd_all: f64 = (0..s0.softirqd.len()).map(softirqd).sum();
    let fwd_side = d(s0.fwd_cpu, s1.fwd_cpu) + softirqd(a.fwd_cpu);
    // Thread CPU time includes softirq work done in the thread's context (this kernel
    // has no IRQ_TIME_ACCOUNTING); ksoftirqd picks up what overflows.
    let ours = d(s0.fwd_cpu, s1.fwd_cpu) + d(s0.app_cpu, s1.app_cpu) + softirqd_all;
    let recv_pps = d(s0.recvd, s1.recvd) / dt;
    let mut v = vec![
        ("sent_kpps", d(s0.sent, s1.sent) / dt / 1e3),
        ("recv_kpps", recv_pps / 1e3),
        ("stack_kpps", stack / dt / 1e3),
        ("mbps", recv_pps * (payload + 42) as f64 * 8.0 / 1e6),
        (
            "csum_err",
            d(
                sys::counter(&s0.udp, "InCsumErrors"),
                sys::counter(&s1.udp, "InCsumErrors"),
            ) / dt
                / 1e3,
        ),
        ("path_ns", if stack > 0.0 { ours / stack } else { f64::NAN }),
        ("unattributed_pct", (busy - ours).max(0.0) / dt / 1e7),
        ("load1", load),
    ];
    if fwd.is_some() {
        v.extend([
            ("fwd_kpps", fwd_frames / dt / 1e3),
            ("fwd_pct", fwd_side / dt / 1e7),
            ("fwd_ns", fwd_side / fwd_frames.max(1.0)),
        ]);
    }
    Ok(v)
}

fn latency(t: &Topo, fwd: Option<&mut Forwarder>, a: &Args) -> Res<Vals> {
    let load = load1();
    let load_ = Load::Paced {
        pps: a.lat_pps,
        payload: 18,
    };
    let mut flow = Flow::start(&t.a.name, &t.b.name, a.app_cpu, load_)?;
    nap(a.secs + 0.2)?;
    flow.finish()?;
    if let Some(f) = fwd {
        f.check_alive()?;
    }
    let mut d = std::mem::take(&mut *flow.delays.lock().unwrap());
    // The first 200 ms warm up caches and wake-up paths.
    let skip = (a.lat_pps / 5) as usize;
    let mut d = d.split_off(skip.min(d.len()));
    if d.is_empty() {
        return Err("latency: nothing received".into());
    }
    d.sort_unstable();
    let pct = |p: f64| d[((d.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    Ok(vec![
        ("n", d.len() as f64),
        ("sent", flow.sent.load(Relaxed) as f64),
        ("p50_us", pct(0.5)),
        ("p90_us", pct(0.9)),
        ("p99_us", pct(0.99)),
        ("max_us", pct(1.0)),
        ("load1", load),
    ])
}

fn tcp(t: &Topo, fwd: Option<&mut Forwarder>, a: &Args) -> Res<Vals> {
    let tcp0 = sys::snmp(&t.b.name, "Tcp:")?;
    let (f0, b0, tb0) = match &fwd {
        Some(f) => {
            f.stats.max_len.store(0, Relaxed);
            (
                f.stats.tx.load(Relaxed),
                f.stats.tx_bytes.load(Relaxed),
                f.stats.too_big.load(Relaxed),
            )
        }
        None => (0, 0, 0),
    };
    let bps = traffic::iperf3(&t.a.name, &t.b.name, a.tcp_secs)?;
    let tcp1 = sys::snmp(&t.b.name, "Tcp:")?;
    let mut v = vec![
        ("gbps", bps.map_or(f64::NAN, |b| b / 1e9)),
        ("connected", bps.is_some() as u8 as f64),
        (
            "csum_err",
            (sys::counter(&tcp1, "InCsumErrors") - sys::counter(&tcp0, "InCsumErrors")) as f64,
        ),
    ];
    if let Some(f) = fwd {
        f.check_alive()?;
        let frames = f.stats.tx.load(Relaxed) - f0;
        v.extend([
            ("max_frame", f.stats.max_len.load(Relaxed) as f64),
            ("too_big", (f.stats.too_big.load(Relaxed) - tb0) as f64),
            ("frames", frames as f64),
            (
                "avg_frame",
                (f.stats.tx_bytes.load(Relaxed) - b0) as f64 / frames.max(1) as f64,
            ),
        ]);
    }
    Ok(v)
}

struct Rec {
    mode: Mode,
    test: String,
    vals: Vals,
}

fn run_mode(mode: Mode, a: &Args, out: &mut Vec<Rec>) -> Res<()> {
    let mut topo = Topo::setup(mode)?;
    let mut fwd = match mode.kind() {
        Some(k) => Some(Forwarder::start(
            k,
            topo.ports.take().unwrap(),
            &topo.f.as_ref().unwrap().name,
            a.fwd_cpu,
        )?),
        None => None,
    };
    let mut rec = |test: &str, vals: Vals| {
        let line: Vec<String> = vals.iter().map(|(k, v)| format!("{k}={v:.1}")).collect();
        eprintln!("  {:<20} {:<22} {}", mode.name(), test, line.join(" "));
        out.push(Rec {
            mode,
            test: test.into(),
            vals,
        });
    };
    if mode.needs_offloads_off() {
        // Default veth offloads first: what goes wrong without vnet headers.
        eprintln!(
            "  {}: offloads {}",
            mode.name(),
            topo.set_node_tx_offload(true)?
        );
        rec("tcp, offloads on", tcp(&topo, fwd.as_mut(), a)?);
        rec(
            "udp64 1s, offloads on",
            flood(&topo, fwd.as_mut(), a, 18, 1.0)?,
        );
        eprintln!(
            "  {}: offloads {}",
            mode.name(),
            topo.set_node_tx_offload(false)?
        );
    }
    rec("udp64", flood(&topo, fwd.as_mut(), a, 18, a.secs)?);
    rec("udp1514", flood(&topo, fwd.as_mut(), a, 1472, a.secs)?);
    rec("latency", latency(&topo, fwd.as_mut(), a)?);
    let label = if mode.needs_offloads_off() {
        "tcp, offloads off"
    } else {
        "tcp"
    };
    rec(label, tcp(&topo, fwd.as_mut(), a)?);
    if let Some(mut f) = fwd {
        let s = &f.stats;
        eprintln!(
            "  {}: forwarder totals rx={} tx={} too_big={} send_err={} csum_partial={}",
            mode.name(),
            s.rx.load(Relaxed),
            s.tx.load(Relaxed),
            s.too_big.load(Relaxed),
            s.send_err.load(Relaxed),
            s.csum_partial.load(Relaxed)
        );
        f.finish()?;
    }
    drop(topo);
    Ok(())
}

fn median_spread(xs: &mut [f64]) -> String {
    xs.sort_by(|a, b| a.total_cmp(b));
    let m = xs[xs.len() / 2];
    let f = |x: f64| {
        if x.is_nan() {
            "–".to_string()
        } else if x.abs() >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.1}")
        }
    };
    if xs.len() == 1 {
        f(m)
    } else {
        format!("{} [{}–{}]", f(m), f(xs[0]), f(xs[xs.len() - 1]))
    }
}

fn table(recs: &[Rec], title: &str, test_prefix: &str, cols: &[(&str, &str)]) {
    let mut groups: BTreeMap<(Mode, &str), Vec<&Rec>> = BTreeMap::new();
    for r in recs.iter().filter(|r| r.test.starts_with(test_prefix)) {
        groups.entry((r.mode, r.test.as_str())).or_default().push(r);
    }
    if groups.is_empty() {
        return;
    }
    println!("\n### {title}\n");
    let hdr: Vec<&str> = cols.iter().map(|c| c.1).collect();
    println!("| mode | test | {} |", hdr.join(" | "));
    println!("|---|---|{}", "---|".repeat(cols.len()));
    for ((mode, test), rs) in groups {
        let cells: Vec<String> = cols
            .iter()
            .map(|(k, _)| {
                let mut xs: Vec<f64> = rs
                    .iter()
                    .filter_map(|r| r.vals.iter().find(|v| v.0 == *k).map(|v| v.1))
                    .collect();
                if xs.is_empty() {
                    "–".into()
                } else {
                    median_spread(&mut xs)
                }
            })
            .collect();
        println!("| {} | {} | {} |", mode.name(), test, cells.join(" | "));
    }
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let mut recs = Vec::new();
    let mut failed = None;
    'outer: for rep in 0..a.reps {
        for &m in &a.modes {
            eprintln!("rep {}/{}: {}", rep + 1, a.reps, m.name());
            if let Err(e) = run_mode(m, &a, &mut recs) {
                eprintln!("{}: {e}", m.name());
                failed = Some(e);
                break 'outer;
            }
        }
    }
    let pid = std::process::id();
    let left = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    if left.contains(&format!("fnep{pid}")) {
        eprintln!("WARNING: namespaces left behind:\n{left}");
    }
    println!(
        "\n## Results: {} rep(s), {} s per flood, median [min–max]",
        a.reps, a.secs
    );
    table(
        &recs,
        "UDP flood, 64-byte frames (18-byte payload)",
        "udp64",
        &[
            ("sent_kpps", "sent kpps"),
            ("fwd_kpps", "fwd kpps"),
            ("recv_kpps", "recv kpps"),
            ("csum_err", "csum errs at b, k/s"),
            ("fwd_pct", "fwd CPU %"),
            ("fwd_ns", "fwd ns/frame"),
            ("path_ns", "path ns/frame"),
            ("unattributed_pct", "other CPU %"),
            ("load1", "load1"),
        ],
    );
    table(
        &recs,
        "UDP flood, 1514-byte frames (1472-byte payload)",
        "udp1514",
        &[
            ("sent_kpps", "sent kpps"),
            ("fwd_kpps", "fwd kpps"),
            ("recv_kpps", "recv kpps"),
            ("mbps", "recv Mbit/s (L2)"),
            ("fwd_pct", "fwd CPU %"),
            ("fwd_ns", "fwd ns/frame"),
            ("path_ns", "path ns/frame"),
            ("unattributed_pct", "other CPU %"),
        ],
    );
    table(
        &recs,
        &format!("One-way latency at {} pps, 64-byte frames (µs)", a.lat_pps),
        "latency",
        &[
            ("p50_us", "p50"),
            ("p90_us", "p90"),
            ("p99_us", "p99"),
            ("max_us", "max"),
            ("n", "samples"),
        ],
    );
    table(
        &recs,
        "TCP (iperf3 a -> b) and frame sizes seen by the forwarder",
        "tcp",
        &[
            ("connected", "iperf3 ran"),
            ("gbps", "Gbit/s"),
            ("max_frame", "max frame B"),
            ("avg_frame", "avg frame B"),
            ("too_big", "EMSGSIZE drops"),
            ("csum_err", "TCP csum errs at b"),
        ],
    );
    if let Some(e) = failed {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
