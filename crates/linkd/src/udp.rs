//! Cut links: an endpoint that carries a link's frames to the other half of
//! the same link, in another daemon (another machine), over UDP.
//!
//! A link whose two ends are on two machines is two engine links, one per
//! machine, each between the local node's TAP and a [`Udp`] endpoint; the two
//! UDP endpoints talk to each other. Each frame travels in one datagram behind
//! a [`HEADER_LEN`]-byte header:
//!
//! ```text
//! 0      4    5      6        8               16               24
//! "FNCL" | ver | flags | 0 0 | seq (u64, BE) | sent (u64, BE) | frame...
//! ```
//!
//! `seq` counts the datagrams of one direction from 0; `sent` is the sender's
//! `CLOCK_REALTIME` (ns) when it handed the frame to the kernel. Frames travel
//! as wire packets without a virtio-net header: a segmentation-offload
//! super-frame is cut into its wire packets first ([`crate::gso::to_wire`]),
//! and the receiving end puts an all-zero header back when the daemon's TAP
//! devices use one.
//!
//! **Where the delay is made.** The sending half shapes (rate, queue, loss)
//! without delay; the receiving half's direction holds the delay, counted
//! from the sender's `sent` stamp, carried over to this machine's clock
//! ([`Endpoint::origin`]): a frame is released `delay` after it left the other
//! machine, whatever the network took, as long as the network took less. So
//! the network's own delay and jitter are compensated frame by frame, and a
//! frame that arrives after its release time leaves at once and is counted
//! late by the direction: the verdict sees it. The one error left is the
//! clocks' offset, given by `clock_offset_ns` (the peer's clock minus this
//! one; 0 on one machine).
//!
//! Counters (`counters` in `stats`): datagrams sent and received, send
//! errors, datagrams the sequence numbers say were lost or came out of order,
//! malformed ones, and the network's one-way delay (receive time minus
//! `sent`, offset applied) as percentiles and an HdrHistogram.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::endpoint::{Endpoint, EndpointSpec};
use crate::gso::{self, VnetHdr, VNET_HDR_LEN};
use crate::state::now_ns;

/// The first bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"FNCL";
/// The header's version.
pub const VERSION: u8 = 1;
/// Bytes before the frame.
pub const HEADER_LEN: usize = 24;
/// The largest datagram taken.
const MAX_DATAGRAM: usize = 65_535;

/// `CLOCK_REALTIME` in ns.
pub fn realtime_ns() -> i64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .expect("CLOCK_REALTIME is always readable");
    ts.tv_sec() * 1_000_000_000 + ts.tv_nsec()
}

/// The header of a datagram carrying frame number `seq` sent at `sent_ns`.
pub fn header(seq: u64, sent_ns: i64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(&MAGIC);
    h[4] = VERSION;
    h[8..16].copy_from_slice(&seq.to_be_bytes());
    h[16..24].copy_from_slice(&sent_ns.to_be_bytes());
    h
}

/// `(seq, sent_ns)` of a datagram, or why it is not one of ours.
pub fn parse(d: &[u8]) -> Result<(u64, i64), &'static str> {
    if d.len() < HEADER_LEN + 14 {
        return Err("shorter than a header and an Ethernet header");
    }
    if d[..4] != MAGIC {
        return Err("bad magic");
    }
    if d[4] != VERSION {
        return Err("unknown version");
    }
    let seq = u64::from_be_bytes(d[8..16].try_into().expect("8 bytes"));
    let sent = i64::from_be_bytes(d[16..24].try_into().expect("8 bytes"));
    Ok((seq, sent))
}

/// What a UDP endpoint counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UdpCounters {
    pub tx_datagrams: u64,
    pub tx_errors: u64,
    pub rx_datagrams: u64,
    /// Datagrams skipped over by the sequence numbers (not yet seen).
    pub rx_lost: u64,
    /// Datagrams that came after a later one (each also undoes one `rx_lost`).
    pub rx_reordered: u64,
    pub rx_malformed: u64,
    /// Datagrams stamped in this machine's future (the clocks' offset is off).
    pub rx_ahead: u64,
    /// ICMP port unreachable from the other half (not listening yet, or gone).
    pub refused: u64,
}

/// One half of a cut link's tunnel (see the module doc).
pub struct Udp {
    sock: UdpSocket,
    spec: EndpointSpec,
    peer: SocketAddr,
    /// The virtio-net header the daemon's frames carry (0 or [`VNET_HDR_LEN`]).
    vnet: usize,
    offset_ns: i64,
    /// How well `offset_ns` is known (ns), when the caller said.
    uncertainty_ns: Option<u64>,
    /// Times the offset was measured again (`set_clock`).
    clock_updates: u64,
    tx_seq: u64,
    rx_next: u64,
    stamp: Option<u64>,
    tx: Vec<u8>,
    rx: Vec<u8>,
    segments: Vec<Vec<u8>>,
    pub counters: UdpCounters,
    /// The network's one-way delay, ns (at least 1).
    wire: Histogram<u64>,
}

impl AsFd for Udp {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Udp {
    /// Bind `spec.local`, send to `spec.peer` (in the caller's namespace);
    /// `vnet`: the header length of the daemon's TAP frames.
    pub fn open(spec: &EndpointSpec, side: &str, vnet: usize) -> Result<Self, String> {
        let addr = |field: &str, v: &Option<String>| -> Result<SocketAddr, String> {
            let text = v
                .as_deref()
                .ok_or_else(|| format!("{side}.{field}: required for a udp endpoint"))?;
            text.parse().map_err(|_| {
                format!("{side}.{field}: {text:?} is not an address like 10.0.0.1:4789")
            })
        };
        let local = addr("local", &spec.local)?;
        let peer = addr("peer", &spec.peer)?;
        let sock =
            UdpSocket::bind(local).map_err(|e| format!("{side}.local: bind {local}: {e}"))?;
        sock.connect(peer)
            .map_err(|e| format!("{side}.peer: connect {peer}: {e}"))?;
        sock.set_nonblocking(true)
            .map_err(|e| format!("{side}: non-blocking: {e}"))?;
        Ok(Self {
            sock,
            spec: spec.clone(),
            peer,
            vnet,
            offset_ns: spec.clock_offset_ns.unwrap_or(0),
            uncertainty_ns: None,
            clock_updates: 0,
            tx_seq: 0,
            rx_next: 0,
            stamp: None,
            tx: Vec::with_capacity(MAX_DATAGRAM),
            rx: vec![0; MAX_DATAGRAM],
            segments: Vec::new(),
            counters: UdpCounters::default(),
            wire: Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("static histogram bounds are valid"),
        })
    }

    /// The address this endpoint receives on.
    #[cfg(test)]
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    fn send_wire(&mut self, eth: &[u8]) -> io::Result<()> {
        self.tx.clear();
        self.tx
            .extend_from_slice(&header(self.tx_seq, realtime_ns()));
        self.tx.extend_from_slice(eth);
        self.tx_seq += 1;
        match self.sock.send(&self.tx) {
            Ok(_) => {
                self.counters.tx_datagrams += 1;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                // As in `recv`: the other half was not listening for an earlier
                // datagram. This one is lost, like any frame sent before a link
                // is up; the next is sent.
                self.counters.refused += 1;
                self.counters.tx_errors += 1;
                Err(e)
            }
            Err(e) => {
                self.counters.tx_errors += 1;
                Err(e)
            }
        }
    }

    /// Account datagram `seq`: gaps are lost until they turn up.
    fn sequence(&mut self, seq: u64) {
        if seq >= self.rx_next {
            self.counters.rx_lost += seq - self.rx_next;
            self.rx_next = seq + 1;
        } else {
            self.counters.rx_reordered += 1;
            self.counters.rx_lost = self.counters.rx_lost.saturating_sub(1);
        }
    }
}

impl Endpoint for Udp {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = match self.sock.recv(&mut self.rx) {
                Ok(n) => n,
                // The other half was not there yet (or restarted): an ICMP port
                // unreachable for an earlier datagram, reported here. Not an
                // error of this end: count it and read on.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    self.counters.refused += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let (seq, sent) = match parse(&self.rx[..n]) {
                Ok(h) => h,
                Err(_) => {
                    self.counters.rx_malformed += 1;
                    continue;
                }
            };
            let frame_len = n - HEADER_LEN;
            if self.vnet + frame_len > buf.len() {
                self.counters.rx_malformed += 1;
                continue;
            }
            let (now_rt, now_mono) = (realtime_ns(), now_ns());
            self.counters.rx_datagrams += 1;
            self.sequence(seq);
            // The sender's stamp on this clock; how long the network took.
            let took = now_rt - (sent - self.offset_ns);
            self.stamp = if took >= 0 {
                let _ = self.wire.record((took as u64).max(1));
                now_mono.checked_sub(took as u64)
            } else {
                self.counters.rx_ahead += 1;
                None
            };
            buf[..self.vnet].fill(0);
            buf[self.vnet..self.vnet + frame_len].copy_from_slice(&self.rx[HEADER_LEN..n]);
            return Ok(self.vnet + frame_len);
        }
    }

    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if self.vnet == 0 {
            return self.send_wire(frame);
        }
        let whole = VnetHdr::parse(frame).is_some_and(|h| h.is_wire());
        if whole {
            return self.send_wire(&frame[VNET_HDR_LEN..]);
        }
        let mut segments = std::mem::take(&mut self.segments);
        segments.clear();
        let result = match gso::to_wire(frame, &mut segments) {
            Ok(_) => segments
                .iter()
                .try_for_each(|s| self.send_wire(&s[VNET_HDR_LEN..])),
            Err(e) => {
                self.counters.tx_errors += 1;
                Err(io::Error::new(io::ErrorKind::InvalidData, e))
            }
        };
        self.segments = segments;
        result
    }

    /// When the frame just read left the other machine, on this machine's
    /// monotonic clock: its direction's delay counts from there.
    fn origin(&self) -> Option<u64> {
        self.stamp
    }

    fn header_len(&self) -> usize {
        self.vnet
    }

    fn spec(&self) -> Option<&EndpointSpec> {
        Some(&self.spec)
    }

    fn set_clock(&mut self, offset_ns: i64, uncertainty_ns: Option<u64>) -> Result<(), String> {
        self.offset_ns = offset_ns;
        self.uncertainty_ns = uncertainty_ns;
        self.clock_updates += 1;
        Ok(())
    }

    fn counters(&self) -> Option<Value> {
        let c = &self.counters;
        let q = |p: f64| self.wire.value_at_quantile(p);
        Some(json!({
            "kind": "udp",
            "peer": self.peer.to_string(),
            "clock_offset_ns": self.offset_ns,
            "clock_uncertainty_ns": self.uncertainty_ns,
            "clock_updates": self.clock_updates,
            "tx_datagrams": c.tx_datagrams,
            "tx_errors": c.tx_errors,
            "rx_datagrams": c.rx_datagrams,
            "rx_lost": c.rx_lost,
            "rx_reordered": c.rx_reordered,
            "rx_malformed": c.rx_malformed,
            "rx_ahead": c.rx_ahead,
            "refused": c.refused,
            "wire_delay": {
                "count": self.wire.len(),
                "p50_ns": q(0.5),
                "p99_ns": q(0.99),
                "p999_ns": q(0.999),
                "max_ns": self.wire.max(),
            },
            "wire_delay_hdr": link_core::stats::encode_hdr(&self.wire),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::EndpointKind;

    fn spec(local: &str, peer: &str) -> EndpointSpec {
        EndpointSpec {
            netns: None,
            ifname: "cut0".into(),
            kind: EndpointKind::Udp,
            local: Some(local.into()),
            peer: Some(peer.into()),
            clock_offset_ns: None,
        }
    }

    /// Two endpoints on loopback talking to each other.
    fn pair(vnet: usize) -> (Udp, Udp) {
        let a0 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b0 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (a0.local_addr().unwrap(), b0.local_addr().unwrap());
        drop((a0, b0));
        let a = Udp::open(&spec(&pa.to_string(), &pb.to_string()), "a", vnet).unwrap();
        let b = Udp::open(&spec(&pb.to_string(), &pa.to_string()), "b", vnet).unwrap();
        (a, b)
    }

    fn recv_wait(u: &mut Udp, buf: &mut [u8]) -> usize {
        for _ in 0..1000 {
            match u.recv(buf) {
                Ok(n) => return n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
        panic!("nothing arrived");
    }

    #[test]
    fn header_round_trips_and_strangers_are_refused() {
        let mut d = header(7, 1_234_567_890_123).to_vec();
        d.extend_from_slice(&[0u8; 60]);
        assert_eq!(parse(&d), Ok((7, 1_234_567_890_123)));
        d[0] = b'X';
        assert_eq!(parse(&d), Err("bad magic"));
        assert!(parse(&d[..20]).is_err());
    }

    #[test]
    fn frames_cross_with_sequence_stamp_and_wire_delay() {
        let (mut a, mut b) = pair(0);
        let frame: Vec<u8> = (0..100u8).collect();
        a.send(&frame).unwrap();
        a.send(&frame[..60]).unwrap();
        let mut buf = vec![0u8; 2048];
        let n = recv_wait(&mut b, &mut buf);
        assert_eq!(&buf[..n], &frame[..]);
        let stamp = b.origin().expect("stamped");
        assert!(stamp <= now_ns());
        assert!(now_ns() - stamp < 1_000_000_000);
        assert_eq!(recv_wait(&mut b, &mut buf), 60);
        assert_eq!(b.counters.rx_datagrams, 2);
        assert_eq!(b.counters.rx_lost, 0);
        let c = b.counters().unwrap();
        assert_eq!(c["wire_delay"]["count"], 2);
        assert!(c["wire_delay_hdr"].as_str().unwrap().len() > 10);
        assert_eq!(a.counters.tx_datagrams, 2);
    }

    #[test]
    fn gaps_count_as_lost_until_they_turn_up() {
        let (_a, mut b) = pair(0);
        b.sequence(0);
        b.sequence(3); // 1 and 2 missing
        assert_eq!((b.counters.rx_lost, b.rx_next), (2, 4));
        b.sequence(1); // late
        assert_eq!((b.counters.rx_lost, b.counters.rx_reordered), (1, 1));
    }

    #[test]
    fn a_virtio_header_is_dropped_on_the_wire_and_put_back() {
        let (mut a, mut b) = pair(VNET_HDR_LEN);
        let mut frame = vec![0u8; VNET_HDR_LEN];
        frame.extend((0..64u8).collect::<Vec<_>>());
        a.send(&frame).unwrap();
        let mut buf = vec![0xffu8; 2048];
        let n = recv_wait(&mut b, &mut buf);
        assert_eq!(n, frame.len());
        assert_eq!(&buf[..n], &frame[..]);
        // On the wire: header and the Ethernet frame, no virtio-net header.
        assert_eq!(a.tx.len(), HEADER_LEN + 64);
    }

    #[test]
    fn a_stranger_datagram_never_reaches_a_connected_end() {
        let (mut a, mut b) = pair(0);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(
            b"not a frame of ours at all, long enough",
            b.local_addr().unwrap(),
        )
        .unwrap();
        a.send(&[1u8; 64]).unwrap();
        let mut buf = vec![0u8; 2048];
        // A connected socket only takes its peer's datagrams: the stranger's
        // never arrives; ours does.
        assert_eq!(recv_wait(&mut b, &mut buf), 64);
        assert_eq!(b.counters.rx_malformed, 0);
    }

    #[test]
    fn a_peer_that_is_not_there_yet_is_not_fatal() {
        let (pa, pb) = {
            let a0 = UdpSocket::bind("127.0.0.1:0").unwrap();
            let b0 = UdpSocket::bind("127.0.0.1:0").unwrap();
            (a0.local_addr().unwrap(), b0.local_addr().unwrap())
        };
        let mut a = Udp::open(&spec(&pa.to_string(), &pb.to_string()), "a", 0).unwrap();
        // Nobody at pb: the kernel answers port unreachable, seen at the next call.
        let _ = a.send(&[1u8; 64]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut buf = vec![0u8; 2048];
        let e = a.recv(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
        assert_eq!(a.counters.refused, 1);
        // The other half comes: frames flow.
        let mut b = Udp::open(&spec(&pb.to_string(), &pa.to_string()), "b", 0).unwrap();
        a.send(&[2u8; 64]).unwrap();
        assert_eq!(recv_wait(&mut b, &mut buf), 64);
        b.send(&[3u8; 64]).unwrap();
        assert_eq!(recv_wait(&mut a, &mut buf), 64);
    }

    #[test]
    fn a_clock_measured_again_moves_the_origin_of_later_frames() {
        let (mut a, mut b) = pair(0);
        let mut buf = vec![0u8; 2048];
        // The peer's clock 2 s ahead of ours: its stamps are in our future.
        b.set_clock(2_000_000_000, Some(50_000)).unwrap();
        a.send(&[1u8; 64]).unwrap();
        recv_wait(&mut b, &mut buf);
        let early = b.origin().expect("stamped");
        assert!(now_ns() - early > 1_900_000_000, "{}", now_ns() - early);
        // Measured again: the clocks agree; the next frame's origin is now.
        b.set_clock(0, Some(20_000)).unwrap();
        a.send(&[2u8; 64]).unwrap();
        recv_wait(&mut b, &mut buf);
        let now = b.origin().expect("stamped");
        assert!(now_ns() - now < 500_000_000);
        let c = b.counters().unwrap();
        assert_eq!(c["clock_offset_ns"], 0);
        assert_eq!(c["clock_uncertainty_ns"], 20_000);
        assert_eq!(c["clock_updates"], 2);
    }

    #[test]
    fn bad_addresses_name_the_field() {
        let e = Udp::open(&spec("nowhere", "127.0.0.1:1"), "b", 0)
            .err()
            .unwrap();
        assert!(
            e.starts_with("b.local: \"nowhere\" is not an address"),
            "{e}"
        );
        let mut s = spec("127.0.0.1:0", "127.0.0.1:1");
        s.peer = None;
        let e = Udp::open(&s, "a", 0).err().unwrap();
        assert_eq!(e, "a.peer: required for a udp endpoint");
    }
}
