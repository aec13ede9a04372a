//! Endpoints: where an engine link's frames enter and leave the kernel.
//!
//! The daemon only needs three things of an endpoint: a file descriptor to
//! wait on, a non-blocking "read one frame" and a "write one frame". Those
//! are the [`Endpoint`] trait; an [`Opener`] creates endpoints from the
//! [`EndpointSpec`] of a control request. [`KernelOpener`] makes the two
//! real kinds: TAP devices ([`Tap`]) and AF_XDP sockets on veth ends
//! ([`crate::xsk::Xsk`]); the unit tests substitute datagram socket pairs.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use nix::errno::Errno;
use serde::Deserialize;

use crate::gso::VNET_HDR_LEN;
use crate::tcx::Way;

/// Longest interface name Linux accepts (`IFNAMSIZ` - 1).
pub const MAX_IFNAME: usize = 15;

/// What an endpoint is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointKind {
    /// A TAP device the daemon creates under the spec's name.
    #[default]
    Tap,
    /// An AF_XDP socket (and XDP program) on the existing veth end the spec
    /// names; see [`crate::xsk`].
    AfXdp,
    /// A UDP socket to the other half of a cut link, in another daemon; see
    /// [`crate::udp`]. `ifname` is then only the endpoint's label.
    Udp,
}

impl EndpointKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Tap => "tap",
            Self::AfXdp => "af_xdp",
            Self::Udp => "udp",
        }
    }
}

/// Where an endpoint lives: a network namespace and an interface name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSpec {
    /// A network namespace file, normally `/run/netns/NAME`. Absent: the
    /// daemon's own namespace.
    #[serde(default)]
    pub netns: Option<PathBuf>,
    /// Name of the interface to create (a TAP) or to attach to (AF_XDP) in
    /// that namespace.
    pub ifname: String,
    /// The endpoint's kind; TAP when absent.
    #[serde(default)]
    pub kind: EndpointKind,
    /// `udp` only: the address to receive on (`IP:PORT`, in `netns`).
    #[serde(default)]
    pub local: Option<String>,
    /// `udp` only: the other half's address.
    #[serde(default)]
    pub peer: Option<String>,
    /// `udp` only: the other machine's `CLOCK_REALTIME` minus this one's, ns.
    #[serde(default)]
    pub clock_offset_ns: Option<i64>,
}

impl EndpointSpec {
    /// Check the spec's shape; `side` (`"a"` or `"b"`) prefixes the message.
    pub fn validate(&self, side: &str) -> Result<(), String> {
        let name = &self.ifname;
        if name.is_empty() || name.len() > MAX_IFNAME {
            return Err(format!(
                "{side}.ifname: {name:?} must be 1 to {MAX_IFNAME} bytes long"
            ));
        }
        if name == "." || name == ".." {
            return Err(format!(
                "{side}.ifname: {name:?} is not a valid interface name"
            ));
        }
        if let Some(c) = name
            .chars()
            .find(|&c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "{side}.ifname: {name:?} contains {c:?}, which an interface name may not"
            ));
        }
        let udp_fields =
            self.local.is_some() || self.peer.is_some() || self.clock_offset_ns.is_some();
        if udp_fields && self.kind != EndpointKind::Udp {
            return Err(format!(
                "{side}: local, peer and clock_offset_ns are for udp endpoints, not {}",
                self.kind.name()
            ));
        }
        if let Some(ns) = &self.netns {
            if ns.as_os_str().is_empty() {
                return Err(format!(
                    "{side}.netns: empty path (omit the field for the daemon's own namespace)"
                ));
            }
        }
        Ok(())
    }

    /// `netns:ifname`, for log lines.
    pub fn describe(&self) -> String {
        match &self.netns {
            Some(ns) => format!("{}:{}", ns.display(), self.ifname),
            None => format!("(own netns):{}", self.ifname),
        }
    }
}

/// One end of an engine link, as the event loop sees it.
///
/// Implementations are non-blocking: `recv` returns
/// [`io::ErrorKind::WouldBlock`] when no frame is waiting. Dropping the
/// endpoint releases it (for a TAP device: destroys the interface).
pub trait Endpoint: AsFd {
    /// Read one frame into `buf`, returning its length.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Write one frame (or queue it until [`Endpoint::flush`]).
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;
    /// Hand over whatever `send` queued; called after each batch of
    /// departures.
    fn flush(&mut self) {}
    /// When the frame `recv` returned last reached the kernel
    /// (CLOCK_MONOTONIC ns), if the endpoint knows; otherwise the daemon
    /// stamps it as it reads it.
    fn rx_stamp(&self) -> Option<u64> {
        None
    }
    /// Frames the kernel dropped at this endpoint before the daemon read
    /// them (its queue towards the daemon was full).
    /// For the frame just read from a cut link's half: when it left the
    /// other half, on this machine's monotonic clock (its delay counts from
    /// there; see [`crate::udp`]). None for every other endpoint.
    fn origin(&self) -> Option<u64> {
        None
    }

    fn ingress_drops(&self) -> u64 {
        0
    }
    /// A cut link's half: the peer's clock minus this machine's (ns), measured
    /// again, and its uncertainty. Every other endpoint has no peer clock.
    fn set_clock(&mut self, offset_ns: i64, uncertainty_ns: Option<u64>) -> Result<(), String> {
        let _ = (offset_ns, uncertainty_ns);
        Err("not a cut link's udp endpoint".to_owned())
    }
    /// Figures of the endpoint's own, for `stats` (JSON object), if any.
    fn counters(&self) -> Option<serde_json::Value> {
        None
    }
    /// Bytes of the endpoint's own header in front of every frame read and
    /// written: [`crate::gso::VNET_HDR_LEN`] for a TAP device with offloads,
    /// 0 otherwise.
    fn header_len(&self) -> usize {
        0
    }
    /// Where the endpoint was created, when it is a device in a namespace.
    fn spec(&self) -> Option<&EndpointSpec> {
        None
    }
    /// Keep `guard` (a redirect attached beside this endpoint) until the
    /// endpoint is dropped.
    fn hold(&mut self, guard: OwnedFd) {
        drop(guard);
    }
}

/// Creates endpoints.
pub trait Opener {
    /// The endpoints this opener creates.
    type Endpoint: Endpoint;
    /// Name of the endpoint kind, reported by `hello` (`"tap"`).
    fn kind(&self) -> &'static str;
    /// Every endpoint kind it can open, reported by `hello`.
    fn kinds(&self) -> &'static [&'static str] {
        &[]
    }
    /// The segmentation offloads its endpoints use, reported by `hello`.
    fn offloads(&self) -> &'static str {
        "off"
    }
    /// Create the endpoint `spec` describes. The error names the problem;
    /// `side` (`"a"` or `"b"`) is the field to blame.
    fn open(&mut self, spec: &EndpointSpec, side: &str) -> Result<Self::Endpoint, String>;
    /// Redirect every frame at interface `from` to interface `to`, both in
    /// the namespace of `at` (see [`crate::tcx`]); the descriptor holds the
    /// redirect. `side` is the field to blame.
    fn redirect(
        &mut self,
        at: &EndpointSpec,
        side: &str,
        from: &str,
        to: &str,
        way: Way,
    ) -> Result<OwnedFd, String> {
        let _ = (at, from, to, way);
        Err(format!("{side}: {} endpoints cannot divert", self.kind()))
    }
}

/// A TAP device (`IFF_TAP | IFF_NO_PI`): every `read` is one Ethernet frame
/// the namespace's stack sent out of the interface, every `write` one frame
/// it receives. Closing the descriptor destroys the device.
#[derive(Debug)]
pub struct Tap {
    file: File,
    /// Frames carry a virtio-net header (offloads on).
    vnet: bool,
    /// Where it was created.
    pub(crate) spec: Option<EndpointSpec>,
    /// Redirects that lead traffic to and from it (a diverted link's).
    held: Vec<OwnedFd>,
}

impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Endpoint for Tap {
    fn header_len(&self) -> usize {
        if self.vnet {
            VNET_HDR_LEN
        } else {
            0
        }
    }

    fn spec(&self) -> Option<&EndpointSpec> {
        self.spec.as_ref()
    }

    fn hold(&mut self, guard: OwnedFd) {
        self.held.push(guard);
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&self.file).read(buf)
    }

    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        // A TAP write takes the whole frame or fails; a short count would be
        // a kernel bug, reported rather than retried.
        let n = (&self.file).write(frame)?;
        if n == frame.len() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write: {n} of {} bytes", frame.len()),
            ))
        }
    }
}

nix::ioctl_write_ptr_bad!(tunsetiff, libc::TUNSETIFF, libc::ifreq);
nix::ioctl_write_int_bad!(tunsetoffload, libc::TUNSETOFFLOAD);

/// Offloads a TAP device with virtio-net headers accepts from its stack:
/// checksum, TCP segmentation (v4, v6, ECN) and UDP segmentation.
const OFFLOADS: libc::c_uint = libc::TUN_F_CSUM
    | libc::TUN_F_TSO4
    | libc::TUN_F_TSO6
    | libc::TUN_F_TSO_ECN
    | libc::TUN_F_USO4
    | libc::TUN_F_USO6;
/// The same without UDP segmentation, for kernels before 6.2.
const OFFLOADS_NO_USO: libc::c_uint =
    libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6 | libc::TUN_F_TSO_ECN;

/// Create TAP device `ifname` in the current network namespace, with
/// virtio-net headers and segmentation offloads when `offload`; returns the
/// offloads in force.
pub(crate) fn create_tap(
    ifname: &str,
    side: &str,
    offload: bool,
) -> Result<(Tap, &'static str), String> {
    // TUNSETIFF on the name of an existing *persistent* TAP device attaches
    // to it instead of creating a new one, and closing would then leave it
    // behind: insist on a fresh name.
    if nix::net::if_::if_nametoindex(ifname).is_ok() {
        return Err(format!(
            "{side}.ifname: an interface named {ifname:?} already exists in that namespace"
        ));
    }
    // Opened after entering the namespace: the device is created in the
    // namespace of the process that opened /dev/net/tun.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open("/dev/net/tun")
        .map_err(|e| format!("{side}: cannot open /dev/net/tun: {e}"))?;
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(ifname.as_bytes()) {
        *dst = src as libc::c_char;
    }
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if offload {
        flags |= libc::IFF_VNET_HDR;
    }
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: `file` is an open /dev/net/tun descriptor and `req` a valid,
    // NUL-terminated (the name is at most 15 bytes) ifreq that outlives the
    // call.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    unsafe { tunsetiff(fd, &req) }
        .map_err(|e| format!("{side}.ifname: cannot create TAP device {ifname:?}: {e}"))?;
    if !offload {
        return Ok((
            Tap {
                file,
                vnet: false,
                spec: None,
                held: Vec::new(),
            },
            "off",
        ));
    }
    // The default virtio-net header size is the 10-byte one used here.
    // SAFETY: TUNSETOFFLOAD takes its argument by value; `fd` is the TAP
    // device just created.
    let got = match unsafe { tunsetoffload(fd, OFFLOADS as libc::c_int) } {
        Ok(_) => "tso+uso",
        // Kernels before 6.2 know no UDP segmentation.
        Err(Errno::EINVAL) => unsafe { tunsetoffload(fd, OFFLOADS_NO_USO as libc::c_int) }
            .map(|_| "tso")
            .map_err(|e| format!("{side}.ifname: cannot enable offloads on {ifname:?}: {e}"))?,
        Err(e) => {
            return Err(format!(
                "{side}.ifname: cannot enable offloads on {ifname:?}: {e}"
            ))
        }
    };
    Ok((
        Tap {
            file,
            vnet: true,
            spec: None,
            held: Vec::new(),
        },
        got,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(netns: Option<&str>, ifname: &str) -> EndpointSpec {
        EndpointSpec {
            netns: netns.map(PathBuf::from),
            ifname: ifname.to_owned(),
            kind: EndpointKind::Tap,
            local: None,
            peer: None,
            clock_offset_ns: None,
        }
    }

    #[test]
    fn ifname_rules() {
        assert!(spec(Some("/run/netns/x"), "eth0").validate("a").is_ok());
        assert!(spec(None, "a23456789012345").validate("a").is_ok());
        for (bad, needle) in [
            ("", "1 to 15 bytes"),
            ("a234567890123456", "1 to 15 bytes"),
            ("..", "not a valid"),
            ("a/b", "'/'"),
            ("a b", "' '"),
            ("eth0:1", "':'"),
        ] {
            let e = spec(None, bad).validate("b").unwrap_err();
            assert!(e.starts_with("b.ifname: "), "{e}");
            assert!(e.contains(needle), "{e}");
        }
        let e = spec(Some(""), "x").validate("a").unwrap_err();
        assert!(e.starts_with("a.netns: "), "{e}");
    }

    #[test]
    fn spec_rejects_unknown_fields() {
        let e = serde_json::from_str::<EndpointSpec>(r#"{"ifname":"x","ns":"/a"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `ns`"), "{e}");
        let s: EndpointSpec = serde_json::from_str(r#"{"ifname":"x"}"#).unwrap();
        assert_eq!(s, spec(None, "x"));
    }
}
