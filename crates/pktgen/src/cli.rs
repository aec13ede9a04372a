//! Command line: `fidelnet-pktgen send ...` and `fidelnet-pktgen recv ...`.
//!
//! Every value is checked by its parser, so a bad value is refused by clap
//! (exit status 2) with a message that names the option and the valid
//! range. Checks that involve two options are in [`SendArgs::validate`].

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::schedule::Pattern;

/// Largest `--rate`.
pub const MAX_RATE: f64 = 100e6;
/// Ethernet + IPv4 + UDP overhead of a frame, FCS included (4 + 14 + 20 + 8).
pub const OVERHEAD_V4: usize = 46;
/// Ethernet + IPv6 + UDP overhead of a frame, FCS included (4 + 14 + 40 + 8).
pub const OVERHEAD_V6: usize = 66;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "fidelnet-pktgen",
    version,
    about = "fidelnet packet generator and timestamping receiver (one-way latency, loss, rate)",
    long_about = None
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The two roles.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Send UDP packets to one or more flows on a schedule.
    Send(SendArgs),
    /// Receive, check and timestamp packets; report loss and latency.
    Recv(RecvArgs),
}

/// How `send` puts packets on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Connected UDP sockets and sendmmsg (the kernel builds the headers).
    Udp,
    /// As udp, but each sendmmsg message carries up to 64 packets that the
    /// kernel splits into separate datagrams (UDP_SEGMENT, "GSO").
    Gso,
    /// AF_PACKET with PACKET_QDISC_BYPASS and hand-built Ethernet/IPv4/UDP
    /// headers (IPv4 only).
    Packet,
}

/// Schedule patterns, as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatternArg {
    /// Evenly spaced departures.
    Cbr,
    /// Bursts of --burst back-to-back packets.
    Burst,
    /// Exponential inter-departure times (seeded).
    Poisson,
}

impl From<PatternArg> for Pattern {
    fn from(p: PatternArg) -> Pattern {
        match p {
            PatternArg::Cbr => Pattern::Cbr,
            PatternArg::Burst => Pattern::Burst,
            PatternArg::Poisson => Pattern::Poisson,
        }
    }
}

/// `send` options.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct SendArgs {
    /// Destination IP:PORT (IPv6 as [ADDR]:PORT); repeat for several flows.
    /// Flow id = position of the option (0, 1, ...); packets go round-robin.
    #[arg(long = "flow", value_name = "IP:PORT", required = true, value_parser = parse_flow)]
    pub flows: Vec<SocketAddr>,

    /// Total packets per second over all flows (> 0, at most 1e8).
    #[arg(long, value_name = "PPS", value_parser = parse_rate)]
    pub rate: f64,

    /// Ethernet frame size in bytes including the 4-byte FCS, as in RFC 2544
    /// (64..=1518; at least 84 for IPv6 flows).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: usize,

    /// How long to send, in seconds (> 0).
    #[arg(long, value_name = "SECONDS", value_parser = parse_duration)]
    pub duration: f64,

    /// Departure pattern.
    #[arg(long, value_enum, default_value_t = PatternArg::Cbr)]
    pub pattern: PatternArg,

    /// Packets per burst for --pattern burst (>= 1).
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub burst: u64,

    /// Seed of the poisson schedule (default: from the clock; the seed used
    /// is written into the JSON).
    #[arg(long, value_name = "U64")]
    pub seed: Option<u64>,

    /// Pin the process to this CPU before sending.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=4095))]
    pub cpu: Option<u32>,

    /// Most packets per sendmmsg call (1..=1024).
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,

    /// Source UDP port of every flow (default: an ephemeral port per flow).
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    pub src_port: Option<u16>,

    /// Wait until CLOCK_REALTIME reaches this (ns since the epoch) before the
    /// first packet.
    #[arg(long, value_name = "REALTIME_NS")]
    pub start_at: Option<u64>,

    /// Busy-wait instead of sleeping when the next departure is at most this
    /// many microseconds away (0..=100000).
    #[arg(long, value_name = "US", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub spin_us: u64,

    /// udp (default): UDP sockets and sendmmsg; gso: the same with
    /// UDP_SEGMENT (see docs/pktgen.md on what crosses the link); packet:
    /// AF_PACKET, IPv4 only, needs root.
    #[arg(long, value_enum, default_value_t = Mode::Udp)]
    pub mode: Mode,

    /// --mode packet: destination MAC (default: from the neighbour table).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub dst_mac: Option<[u8; 6]>,

    /// Where to write the JSON report ("-": stdout).
    #[arg(long, value_name = "PATH", default_value = "-")]
    pub json: PathBuf,
}

/// `recv` options.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct RecvArgs {
    /// Address to listen on, IP:PORT (port 1..=65535); repeat for several
    /// sockets.
    #[arg(long = "bind", value_name = "IP:PORT", required = true, value_parser = parse_bind)]
    pub binds: Vec<SocketAddr>,

    /// Stop after this many seconds whatever happens (> 0; default: no cap).
    #[arg(long, value_name = "SECONDS", value_parser = parse_duration)]
    pub duration: Option<f64>,

    /// Stop this long after the last packet, once one has arrived (> 0).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_duration)]
    pub idle_stop: f64,

    /// Width of the rate/latency series' intervals, ms (1..=3600000).
    #[arg(long, value_name = "MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub interval_ms: u64,

    /// Pin the process to this CPU.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=4095))]
    pub cpu: Option<u32>,

    /// Most packets per recvmmsg call (1..=1024).
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batch: u32,

    /// Receive buffer per socket, bytes (SO_RCVBUFFORCE, falling back to
    /// SO_RCVBUF; 4096..=1073741823).
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20,
          value_parser = clap::value_parser!(u32).range(4096..=0x3FFF_FFFF))]
    pub rcvbuf: u32,

    /// Never sleep waiting for packets: poll the sockets in a loop. Uses
    /// the whole CPU; saves the wakeup per burst, so the receiver keeps up
    /// with higher rates (kernel timestamps are unaffected).
    #[arg(long)]
    pub busy_poll: bool,

    /// Keep the N highest latencies with their receive time and flow and
    /// report them as `worst` (0..=1000000; 0: none).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub worst: u32,

    /// Where to write the JSON report ("-": stdout).
    #[arg(long, value_name = "PATH", default_value = "-")]
    pub json: PathBuf,

    /// Also write an HdrHistogram interval log (one all-flows histogram per
    /// interval) here.
    #[arg(long, value_name = "PATH")]
    pub hdr_log: Option<PathBuf>,

    /// Create this file once every socket is bound and timestamping is on.
    #[arg(long, value_name = "PATH")]
    pub ready: Option<PathBuf>,
}

impl SendArgs {
    /// Checks that involve more than one option.
    pub fn validate(&self) -> Result<(), String> {
        if self.flows.len() > usize::from(u16::MAX) + 1 {
            return Err(format!(
                "--flow: at most 65536 flows (flow ids are 16 bits), got {}",
                self.flows.len()
            ));
        }
        if self.size < 64 + OVERHEAD_V6 - OVERHEAD_V4 && self.flows.iter().any(SocketAddr::is_ipv6)
        {
            return Err(format!(
                "--size {}: IPv6 flows need at least 84-byte frames (18 bytes of payload \
                 after 66 bytes of Ethernet, IPv6 and UDP headers and FCS); valid: 84..=1518",
                self.size
            ));
        }
        if self.mode == Mode::Packet && self.flows.iter().any(SocketAddr::is_ipv6) {
            return Err("--mode packet: IPv4 flows only".into());
        }
        if self.dst_mac.is_some() && self.mode != Mode::Packet {
            return Err("--dst-mac: only meaningful with --mode packet".into());
        }
        Ok(())
    }

    /// UDP payload bytes of a frame of `--size` for `flow`'s family.
    pub fn payload_len(&self, flow: &SocketAddr) -> usize {
        self.size
            - if flow.is_ipv6() {
                OVERHEAD_V6
            } else {
                OVERHEAD_V4
            }
    }
}

fn parse_number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("{s:?} is not a number"))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let v = parse_number(s)?;
    if v > 0.0 && v <= MAX_RATE {
        Ok(v)
    } else {
        Err(format!(
            "{v} packets/s is out of range; valid: > 0 and at most 1e8"
        ))
    }
}

fn parse_duration(s: &str) -> Result<f64, String> {
    let v = parse_number(s)?;
    // A day at most keeps every ns count far from overflow.
    if v > 0.0 && v <= 86_400.0 {
        Ok(v)
    } else {
        Err(format!(
            "{v} s is out of range; valid: > 0 and at most 86400"
        ))
    }
}

fn parse_size(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(v) if (64..=1518).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a valid frame size; valid: 64..=1518 bytes including the FCS \
             (84..=1518 for IPv6)"
        )),
    }
}

fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse::<SocketAddr>().map_err(|_| {
        format!("{s:?} is not IPv4:PORT or [IPv6]:PORT (e.g. 10.0.0.2:9000, [fd00::2]:9000)")
    })
}

fn parse_flow(s: &str) -> Result<SocketAddr, String> {
    let a = parse_addr(s)?;
    if a.port() == 0 || a.ip().is_unspecified() {
        return Err(format!(
            "{s:?}: needs a destination address and a port 1..=65535"
        ));
    }
    Ok(a)
}

fn parse_bind(s: &str) -> Result<SocketAddr, String> {
    let a = parse_addr(s)?;
    if a.port() == 0 {
        return Err(format!("{s:?}: port 0 is not allowed; valid: 1..=65535"));
    }
    Ok(a)
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    let mut mac = [0u8; 6];
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address like 02:00:00:00:00:01"));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16)
            .ok()
            .filter(|_| !p.is_empty() && p.len() <= 2)
            .ok_or_else(|| format!("{s:?} is not a MAC address like 02:00:00:00:00:01"))?;
    }
    Ok(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::try_parse_from(std::iter::once("fidelnet-pktgen").chain(args.iter().copied()))
            .map_err(|e| e.to_string())
    }

    /// A valid `send` command line with `extra` options added, or replacing
    /// the defaults of the same name.
    fn send(extra: &[&str]) -> Result<SendArgs, String> {
        let mut base = vec![
            ("--flow", "10.0.0.2:9000"),
            ("--rate", "1000"),
            ("--size", "64"),
            ("--duration", "1"),
        ];
        let mut args = vec!["send"];
        for pair in extra.chunks(2) {
            match base.iter().position(|(k, _)| *k == pair[0]) {
                // A second --flow adds a flow; the others replace.
                Some(i) if pair[0] != "--flow" => base[i].1 = pair[1],
                _ => args.extend_from_slice(pair),
            }
        }
        for (k, v) in base {
            args.extend([k, v]);
        }
        match parse(&args)?.command {
            Command::Send(s) => {
                s.validate()?;
                Ok(s)
            }
            Command::Recv(_) => unreachable!(),
        }
    }

    fn err(extra: &[&str]) -> String {
        send(extra).expect_err("should be refused")
    }

    #[test]
    fn defaults() {
        let s = send(&[]).unwrap();
        assert_eq!(s.flows.len(), 1);
        assert_eq!((s.batch, s.burst, s.spin_us), (64, 100, 100));
        assert_eq!(s.pattern, PatternArg::Cbr);
        assert_eq!(s.mode, Mode::Udp);
        assert_eq!(s.json, PathBuf::from("-"));
        assert_eq!(s.payload_len(&s.flows[0]), 18);
    }

    #[test]
    fn bad_values_name_the_option() {
        for (args, option) in [
            (&["--rate", "0"][..], "--rate"),
            (&["--rate", "-5"], "--rate"),
            (&["--rate", "1e9"], "--rate"),
            (&["--rate", "fast"], "--rate"),
            (&["--duration", "-1"], "--duration"),
            (&["--duration", "0"], "--duration"),
            (&["--size", "63"], "--size"),
            (&["--size", "1519"], "--size"),
            (&["--flow", "10.0.0.2"], "--flow"),
            (&["--flow", "10.0.0.2:0"], "--flow"),
            (&["--flow", "0.0.0.0:80"], "--flow"),
            (&["--flow", "nowhere:80"], "--flow"),
            (&["--batch", "0"], "--batch"),
            (&["--batch", "1025"], "--batch"),
            (&["--burst", "0"], "--burst"),
            (&["--pattern", "square"], "--pattern"),
            (&["--dst-mac", "00:11"], "--dst-mac"),
        ] {
            let e = err(args);
            assert!(e.contains(option), "{args:?}: {e}");
        }
        // The range is part of the message.
        assert!(err(&["--rate", "0"]).contains("1e8"));
        assert!(err(&["--size", "63"]).contains("64..=1518"));
    }

    #[test]
    fn ipv6_needs_84_bytes() {
        let e = err(&["--flow", "[fd00::2]:9000"]);
        assert!(e.contains("--size") && e.contains("84"), "{e}");
        let s = send(&["--flow", "[fd00::2]:9000", "--size", "84"]).unwrap();
        assert_eq!(s.flows.len(), 2);
        assert_eq!(s.payload_len(&s.flows[0]), 18);
        assert_eq!(s.payload_len(&s.flows[1]), 38);
    }

    #[test]
    fn packet_mode_is_ipv4_only() {
        let e = err(&[
            "--mode",
            "packet",
            "--size",
            "90",
            "--flow",
            "[fd00::2]:9000",
        ]);
        assert!(e.contains("--mode"), "{e}");
        assert!(err(&["--dst-mac", "02:00:00:00:00:01"]).contains("--dst-mac"));
        let s = send(&["--mode", "packet", "--dst-mac", "02:0a:00:00:00:ff"]).unwrap();
        assert_eq!(s.dst_mac, Some([2, 0x0a, 0, 0, 0, 0xff]));
    }

    #[test]
    fn recv_options() {
        let Command::Recv(r) = parse(&["recv", "--bind", "0.0.0.0:9000", "--bind", "[::]:9001"])
            .unwrap()
            .command
        else {
            unreachable!()
        };
        assert_eq!(r.binds.len(), 2);
        assert_eq!((r.interval_ms, r.batch, r.rcvbuf), (100, 64, 8 << 20));
        assert_eq!(r.idle_stop, 1.0);
        assert_eq!(r.duration, None);
        for (args, option) in [
            (&["recv", "--bind", "0.0.0.0:0"][..], "--bind"),
            (
                &["recv", "--bind", "0.0.0.0:9", "--idle-stop", "0"],
                "--idle-stop",
            ),
            (
                &["recv", "--bind", "0.0.0.0:9", "--duration", "-2"],
                "--duration",
            ),
            (
                &["recv", "--bind", "0.0.0.0:9", "--interval-ms", "0"],
                "--interval-ms",
            ),
            (&["recv"], "--bind"),
        ] {
            let e = parse(args).expect_err("should be refused");
            assert!(e.contains(option), "{args:?}: {e}");
        }
    }
}
