//! The daemon's real endpoints: TAP devices and AF_XDP sockets, each made in
//! the network namespace its spec names.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sched::{setns, CloneFlags};

use crate::endpoint::{create_tap, Endpoint, EndpointKind, EndpointSpec, Opener, Tap};
use crate::gso::VNET_HDR_LEN;
use crate::tcx::{self, Way};
use crate::udp::Udp;
use crate::xsk::Xsk;

/// A TAP device, an AF_XDP socket or a cut link's UDP socket.
pub enum KernelEndpoint {
    Tap(Tap),
    Xsk { xsk: Box<Xsk>, spec: EndpointSpec },
    Udp(Box<Udp>),
}

impl AsFd for KernelEndpoint {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Tap(t) => t.as_fd(),
            Self::Xsk { xsk, .. } => xsk.as_fd(),
            Self::Udp(u) => u.as_fd(),
        }
    }
}

impl Endpoint for KernelEndpoint {
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tap(t) => t.recv(buf),
            Self::Xsk { xsk, .. } => xsk.recv(buf),
            Self::Udp(u) => u.recv(buf),
        }
    }

    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        match self {
            Self::Tap(t) => t.send(frame),
            Self::Xsk { xsk, .. } => xsk.send(frame),
            Self::Udp(u) => u.send(frame),
        }
    }

    fn flush(&mut self) {
        if let Self::Xsk { xsk, .. } = self {
            xsk.flush();
        }
    }

    fn rx_stamp(&self) -> Option<u64> {
        match self {
            Self::Tap(_) | Self::Udp(_) => None,
            Self::Xsk { xsk, .. } => xsk.rx_stamp(),
        }
    }

    fn origin(&self) -> Option<u64> {
        match self {
            Self::Udp(u) => u.origin(),
            _ => None,
        }
    }

    fn set_clock(&mut self, offset_ns: i64, uncertainty_ns: Option<u64>) -> Result<(), String> {
        match self {
            Self::Udp(u) => u.set_clock(offset_ns, uncertainty_ns),
            _ => Err("not a cut link's udp endpoint".to_owned()),
        }
    }

    fn ingress_drops(&self) -> u64 {
        match self {
            Self::Tap(_) | Self::Udp(_) => 0, // a TAP's full queue: its interface's tx_dropped
            Self::Xsk { xsk, .. } => {
                let k = xsk.kernel_stats();
                // A frame with no fill-ring buffer counts in rx_dropped and
                // again in the fill ring's empty count: not added twice.
                k.rx_ring_full + k.rx_dropped
            }
        }
    }

    fn counters(&self) -> Option<serde_json::Value> {
        match self {
            Self::Tap(_) => None,
            Self::Udp(u) => u.counters(),
            Self::Xsk { xsk, .. } => {
                let k = xsk.kernel_stats();
                Some(serde_json::json!({
                    "kind": "af_xdp",
                    "xdp_mode": xsk.mode,
                    "stamped": xsk.counters.stamped,
                    "unstamped": xsk.counters.unstamped,
                    "tx_full": xsk.counters.tx_full,
                    "tx_kicks": xsk.counters.kicks,
                    "tx_kick_ns": xsk.counters.kick_ns,
                    "tx_kick_max_ns": xsk.counters.kick_max_ns,
                    "tx_kick_calls": xsk.counters.kick_calls,
                    "rx_ring_full": k.rx_ring_full,
                    "rx_dropped": k.rx_dropped,
                    "rx_fill_ring_empty": k.rx_fill_ring_empty_descs,
                    "tx_invalid": k.tx_invalid_descs,
                }))
            }
        }
    }

    fn header_len(&self) -> usize {
        match self {
            Self::Tap(t) => t.header_len(),
            Self::Xsk { .. } => 0,
            Self::Udp(u) => u.header_len(),
        }
    }

    fn spec(&self) -> Option<&EndpointSpec> {
        match self {
            Self::Tap(t) => t.spec(),
            Self::Xsk { spec, .. } => Some(spec),
            Self::Udp(u) => u.spec(),
        }
    }

    fn hold(&mut self, guard: OwnedFd) {
        match self {
            Self::Tap(t) => t.hold(guard),
            Self::Xsk { .. } | Self::Udp(_) => drop(guard),
        }
    }
}

/// Creates endpoints, each in the network namespace its spec names.
#[derive(Debug)]
pub struct KernelOpener {
    /// The daemon's own network namespace, returned to after each creation.
    home: File,
    /// Open TAP devices with virtio-net headers and segmentation offloads.
    offload: bool,
    /// What the last TAP device accepted: "tso+uso", "tso" or "off".
    offloads_in_force: &'static str,
}

impl KernelOpener {
    /// Remember the current network namespace (the daemon's); `offload`:
    /// create TAP devices with segmentation offloads.
    pub fn new(offload: bool) -> io::Result<Self> {
        let home = File::open("/proc/thread-self/ns/net")?;
        Ok(Self {
            home,
            offload,
            offloads_in_force: if offload { "tso+uso" } else { "off" },
        })
    }

    /// Run `f` inside the network namespace `netns` (or the current one),
    /// then return to the daemon's own namespace.
    ///
    /// `setns` changes the namespace of the calling thread only; the daemon
    /// is single-threaded, so nothing else observes the switch.
    fn in_netns<T>(
        &self,
        netns: Option<&Path>,
        side: &str,
        f: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, String> {
        let Some(path) = netns else { return f() };
        let target = File::open(path)
            .map_err(|e| format!("{side}.netns: cannot open {}: {e}", path.display()))?;
        setns(&target, CloneFlags::CLONE_NEWNET).map_err(|e| match e {
            Errno::EINVAL => format!(
                "{side}.netns: {} is not a network namespace",
                path.display()
            ),
            e => format!("{side}.netns: cannot enter {}: {e}", path.display()),
        })?;
        let result = f();
        if let Err(e) = setns(&self.home, CloneFlags::CLONE_NEWNET) {
            // Carrying on in the wrong namespace would create every later
            // device in the wrong place: stop (the panic exits non-zero).
            panic!("cannot return to the daemon's network namespace: {e}");
        }
        result
    }
}

fn index(side: &str, name: &str) -> Result<u32, String> {
    nix::net::if_::if_nametoindex(name)
        .map_err(|e| format!("{side}: no interface {name:?} in that namespace: {e}"))
}

impl Opener for KernelOpener {
    type Endpoint = KernelEndpoint;

    fn kind(&self) -> &'static str {
        "tap"
    }

    fn kinds(&self) -> &'static [&'static str] {
        &["tap", "af_xdp", "udp"]
    }

    fn offloads(&self) -> &'static str {
        self.offloads_in_force
    }

    fn open(&mut self, spec: &EndpointSpec, side: &str) -> Result<KernelEndpoint, String> {
        spec.validate(side)?;
        match spec.kind {
            EndpointKind::Tap => {
                let offload = self.offload;
                let (mut tap, got) = self.in_netns(spec.netns.as_deref(), side, || {
                    create_tap(&spec.ifname, side, offload)
                })?;
                self.offloads_in_force = got;
                tap.spec = Some(spec.clone());
                Ok(KernelEndpoint::Tap(tap))
            }
            EndpointKind::AfXdp => {
                let xsk = self.in_netns(spec.netns.as_deref(), side, || {
                    let i = index(&format!("{side}.ifname"), &spec.ifname)?;
                    Xsk::open(i)
                        .map_err(|e| format!("{side}: AF_XDP endpoint on {:?}: {e}", spec.ifname))
                })?;
                Ok(KernelEndpoint::Xsk {
                    xsk: Box::new(xsk),
                    spec: spec.clone(),
                })
            }
            EndpointKind::Udp => {
                // Frames carry the virtio-net header of the TAP opened just
                // before (its link's a end), if it has one.
                let vnet = if self.offloads_in_force == "off" {
                    0
                } else {
                    VNET_HDR_LEN
                };
                let udp =
                    self.in_netns(spec.netns.as_deref(), side, || Udp::open(spec, side, vnet))?;
                Ok(KernelEndpoint::Udp(Box::new(udp)))
            }
        }
    }

    fn redirect(
        &mut self,
        at: &EndpointSpec,
        side: &str,
        from: &str,
        to: &str,
        way: Way,
    ) -> Result<OwnedFd, String> {
        if at.kind != EndpointKind::Tap {
            return Err(format!(
                "{side}: a link with {} endpoints cannot divert (TAP only)",
                at.kind.name()
            ));
        }
        self.in_netns(at.netns.as_deref(), side, || {
            tcx::redirect(index(side, from)?, index(side, to)?, way)
                .map_err(|e| format!("{side}: {from} -> {to}: {e}"))
        })
    }
}
