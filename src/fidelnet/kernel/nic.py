"""Per-device settings made from inside a node: argv lists that the node runs (its
own sysfs and namespace), never shell text built from input.

- RPS: steer a device's receive processing to one CPU.
- ``tx-udp-segmentation``: off, so UDP_SEGMENT buffers are split before the device
  and separate frames cross the link.
- Transmit checksumming off: the stack completes every transport checksum itself,
  for a device whose frames leave through XDP, which carries no checksum state.
- TCP and generic segmentation off: the stack hands the device single wire packets,
  so what acts on each frame at egress (random loss) acts on each packet.
"""

from __future__ import annotations

__all__ = [
    "checksum_off_argv",
    "rps_argv",
    "segmentation_off_argv",
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
