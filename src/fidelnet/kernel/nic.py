"""Per-device settings made from inside a node: argv lists that the node runs (its
own sysfs and namespace), never shell text built from input; and one ``ethtool``
request made directly (:func:`set_tx_checksum`, an ioctl on a socket opened in the
device's namespace: no process per device).

- RPS: steer a device's receive processing to one CPU.
- ``tx-udp-segmentation``: off, so UDP_SEGMENT buffers are split before the device
  and separate frames cross the link.
- Transmit checksumming off: the stack completes every transport checksum itself,
  for a device whose frames leave through XDP, which carries no checksum state.
- TCP and generic segmentation off: the stack hands the device single wire packets,
  so what acts on each frame at egress (random loss) acts on each packet.
- Carrier sync (:func:`sync_carrier`): the kernel applies a carrier change (and
  attaches the device's queue) in a deferred work item; ``ETHTOOL_GLINK`` makes it
  happen now, so a link brought up carries its first frame.
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct

from fidelnet.errors import KernelError
from fidelnet.kernel import ns

__all__ = [
    "checksum_off_argv",
    "rps_argv",
    "segmentation_off_argv",
    "set_tx_checksum",
    "sync_carrier",
    "udp_segmentation_off_argv",
]

# Values arrive as positional arguments ($1, $2), never inside the script text.
_RPS_SCRIPT = 'printf "%s" "$1" > "/sys/class/net/$2/queues/rx-0/rps_cpus"'


def rps_argv(dev: str, cpu: int) -> list[str]:
    """Write ``dev``'s rx-0 RPS mask so its receive work runs on ``cpu``."""
    return ["sh", "-c", _RPS_SCRIPT, "sh", format(1 << cpu, "x"), dev]


def udp_segmentation_off_argv(dev: str) -> list[str]:
    return ["ethtool", "-K", dev, "tx-udp-segmentation", "off"]


def segmentation_off_argv(dev: str) -> list[str]:
    return ["ethtool", "-K", dev, "tso", "off", "gso", "off", "tx-udp-segmentation", "off"]


def checksum_off_argv(dev: str) -> list[str]:
    """Transmit checksumming off (which takes TSO off with it)."""
    return ["ethtool", "-K", dev, "tx", "off"]


SIOCETHTOOL = 0x8946
ETHTOOL_GLINK = 0x0A
ETHTOOL_STXCSUM = 0x17  # struct ethtool_value {u32 cmd; u32 data}


def _ethtool_value(netns: str | None, dev: str, cmd: int, data: int) -> int:
    """One ``struct ethtool_value`` request on ``dev`` in ``netns``; returns its data."""
    value = array.array("B", struct.pack("II", cmd, data))
    ifreq = struct.pack("16sQ", dev.encode()[:15], value.buffer_info()[0])
    if netns is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    else:
        with ns.entered(netns):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        fcntl.ioctl(sock, SIOCETHTOOL, ifreq)
    return int(struct.unpack("II", value.tobytes())[1])


def sync_carrier(netns: str | None, dev: str) -> bool:
    """Make the kernel apply ``dev``'s pending carrier change now (the link-watch
    work that otherwise runs later, on a kernel worker: until it has, a veth end
    that got its carrier when its peer came up drops what it sends); returns
    whether the device has a carrier."""
    try:
        return _ethtool_value(netns, dev, ETHTOOL_GLINK, 0) != 0
    except OSError as exc:
        raise KernelError(f"{dev}: cannot read the carrier: {exc}") from exc


def set_tx_checksum(netns: str | None, dev: str, on: bool) -> None:
    """Transmit checksumming of ``dev`` in namespace ``netns`` (a path; None: this
    process's) on or off; off takes TCP segmentation offload with it (the kernel
    drops what depends on it), so the stack hands the device complete packets."""
    try:
        _ethtool_value(netns, dev, ETHTOOL_STXCSUM, 1 if on else 0)
    except OSError as exc:
        raise KernelError(f"{dev}: cannot set transmit checksumming: {exc}") from exc
