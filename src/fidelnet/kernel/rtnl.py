"""rtnetlink messages built by hand for the build's hot path, and one request/ack loop.

pyroute2 spends about 0.15-0.3 ms of Python per request encoding and decoding
messages, which is 4-8 times what the kernel spends on a ``setlink`` or ``newaddr``;
building a 1,111-node tree makes about 7,800 such requests (docs/scale.md). The few
requests every node and link needs are therefore encoded here with :mod:`struct`
and sent on the handle's own netlink socket: a veth pair, a link's flags, MAC, alias,
master and MTU, an address, a clsact qdisc and a direct-action BPF classifier.
Everything else (dumps, shaping qdiscs, u32 and mirred) still goes through pyroute2.

Errors are pyroute2's :class:`~pyroute2.netlink.exceptions.NetlinkError` (``code``
is the errno), so callers handle both paths alike. Nothing here takes user text:
names and numbers were validated above this layer.
"""

from __future__ import annotations

import ipaddress
import os
import struct
from collections.abc import Sequence
from typing import Any, Protocol

from fidelnet.kernel._pyroute2 import NetlinkError

__all__ = [
    "bpf_filter_msg",
    "clsact_msg",
    "newaddr_msg",
    "request",
    "route_msg",
    "setlink_msg",
    "veth_msg",
]

NLMSG_ERROR = 2
RTM_NEWLINK, RTM_SETLINK, RTM_NEWADDR, RTM_NEWROUTE = 16, 19, 20, 24
RTM_NEWQDISC, RTM_NEWTFILTER = 36, 44
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400

IFF_UP = 0x1
IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_MASTER = 1, 3, 4, 10
IFLA_LINKINFO, IFLA_IFALIAS, IFLA_NET_NS_FD = 18, 20, 28
IFLA_INFO_KIND, IFLA_INFO_DATA, VETH_INFO_PEER = 1, 2, 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
RTA_DST, RTA_OIF, RTA_GATEWAY = 1, 4, 5
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_BPF_FD, TCA_BPF_NAME, TCA_BPF_FLAGS = 6, 7, 8
TCA_BPF_FLAG_ACT_DIRECT = 1
TC_H_CLSACT = 0xFFFFFFF1
CLSACT_HANDLE = 0xFFFF0000


class _Socket(Protocol):
    def sendto(self, data: bytes, address: Any, /) -> int: ...
    def recv(self, size: int, /) -> bytes: ...


def rta(kind: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((-length) % 4)


def _str(value: str) -> bytes:
    return value.encode() + b"\0"


def _msg(mtype: int, flags: int, seq: int, body: bytes) -> bytes:
    flags |= NLM_F_REQUEST | NLM_F_ACK
    return struct.pack("=IHHII", 16 + len(body), mtype, flags, seq, 0) + body


def _ifinfo(index: int = 0, up: bool | None = None) -> bytes:
    # struct ifinfomsg: family, pad, type, index, flags, change
    flags = IFF_UP if up else 0
    change = IFF_UP if up is not None else 0
    return struct.pack("=BxHiII", 0, 0, index, flags, change)


def _mac(mac: str) -> bytes:
    raw = bytes(int(part, 16) for part in mac.split(":"))
    if len(raw) != 6:
        raise ValueError(f"not a MAC address: {mac!r}")
    return raw


def _link_attrs(
    address: str | None, ifalias: str | None, master: int | None, mtu: int | None
) -> bytes:
    out = b""
    if address is not None:
        out += rta(IFLA_ADDRESS, _mac(address))
    if mtu is not None:
        out += rta(IFLA_MTU, struct.pack("=I", mtu))
    if master is not None:
        out += rta(IFLA_MASTER, struct.pack("=I", master))
    if ifalias is not None:
        out += rta(IFLA_IFALIAS, _str(ifalias))
    return out


def veth_msg(seq: int, name: str, peer: str, peer_ns_fd: int | None) -> bytes:
    """RTM_NEWLINK: a veth pair ``name``/``peer``, the peer in the namespace open at
    ``peer_ns_fd`` (here when None); fails with EEXIST when ``name`` exists."""
    peer_info = _ifinfo() + rta(IFLA_IFNAME, _str(peer))
    if peer_ns_fd is not None:
        peer_info += rta(IFLA_NET_NS_FD, struct.pack("=I", peer_ns_fd))
    info = rta(IFLA_INFO_KIND, b"veth\0") + rta(IFLA_INFO_DATA, rta(VETH_INFO_PEER, peer_info))
    body = _ifinfo() + rta(IFLA_IFNAME, _str(name)) + rta(IFLA_LINKINFO, info)
    return _msg(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, seq, body)


def setlink_msg(
    seq: int,
    index: int,
    *,
    up: bool | None = None,
    address: str | None = None,
    ifalias: str | None = None,
    master: int | None = None,
    mtu: int | None = None,
) -> bytes:
    """RTM_SETLINK on interface ``index``: any of up/down, MAC, alias, master, MTU."""
    body = _ifinfo(index, up) + _link_attrs(address, ifalias, master, mtu)
    return _msg(RTM_SETLINK, 0, seq, body)


def newaddr_msg(seq: int, index: int, cidr: str) -> bytes:
    """RTM_NEWADDR (create or replace) ``cidr`` on interface ``index``, IPv4 or IPv6,
    as ``ip addr replace`` sends it (IPv4 with IFA_LOCAL too, no broadcast)."""
    iface = ipaddress.ip_interface(cidr)
    family = 2 if iface.version == 4 else 10
    packed = iface.ip.packed
    # struct ifaddrmsg: family, prefixlen, flags, scope, index
    body = struct.pack("=BBBBI", family, iface.network.prefixlen, 0, 0, index)
    if family == 2:
        body += rta(IFA_LOCAL, packed)
    body += rta(IFA_ADDRESS, packed)
    return _msg(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, seq, body)


def route_msg(seq: int, dst: str, gateway: str | None, oif: int | None) -> bytes:
    """RTM_NEWROUTE (create or replace, main table, static, unicast, IPv4)."""
    net = ipaddress.ip_network(dst, strict=False)
    attrs = rta(RTA_DST, net.network_address.packed)
    if gateway:
        attrs += rta(RTA_GATEWAY, ipaddress.ip_address(gateway).packed)
    if oif is not None:
        attrs += rta(RTA_OIF, struct.pack("=I", oif))
    scope = 0 if gateway else 253  # universe via a gateway, else link
    # struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
    body = struct.pack("=BBBBBBBBI", 2, net.prefixlen, 0, 0, 254, 4, scope, 1, 0) + attrs
    return _msg(RTM_NEWROUTE, NLM_F_REPLACE | NLM_F_CREATE, seq, body)


def _tcmsg(index: int, handle: int, parent: int, info: int = 0) -> bytes:
    # struct tcmsg: family, pad, ifindex, handle, parent, info
    return struct.pack("=BxxxiIII", 0, index, handle, parent, info)


def clsact_msg(seq: int, index: int) -> bytes:
    """RTM_NEWQDISC: a clsact qdisc on interface ``index`` (EEXIST when it has one)."""
    body = _tcmsg(index, CLSACT_HANDLE, TC_H_CLSACT) + rta(TCA_KIND, b"clsact\0")
    return _msg(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, seq, body)


def bpf_filter_msg(
    seq: int, index: int, parent: int, prio: int, protocol: int, prog_fd: int, name: str
) -> bytes:
    """RTM_NEWTFILTER: BPF program ``prog_fd`` as a direct-action cls_bpf classifier,
    handle 1, at ``parent`` (a clsact hook) with ``prio`` and ``protocol``."""
    info = (prio << 16) | int.from_bytes(protocol.to_bytes(2, "big"), "little")
    options = (
        rta(TCA_BPF_FD, struct.pack("=I", prog_fd))
        + rta(TCA_BPF_NAME, _str(name))
        + rta(TCA_BPF_FLAGS, struct.pack("=I", TCA_BPF_FLAG_ACT_DIRECT))
    )
    body = _tcmsg(index, 1, parent, info) + rta(TCA_KIND, b"bpf\0") + rta(TCA_OPTIONS, options)
    return _msg(RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, seq, body)


def request(sock: _Socket, messages: Sequence[bytes]) -> list[int]:
    """Send ``messages`` (sequence numbers 1..n, each asking for an ack) in one
    write and return each one's errno (0: done), in order. The socket must have no
    other request in flight."""
    if not messages:
        return []
    sock.sendto(b"".join(messages), (0, 0))
    errors = [-1] * len(messages)
    pending = len(messages)
    while pending:
        data = sock.recv(65536)
        off = 0
        while off + 16 <= len(data):
            length, mtype, _flags, seq, _pid = struct.unpack_from("=IHHII", data, off)
            if mtype == NLMSG_ERROR and 0 < seq <= len(errors) and errors[seq - 1] < 0:
                (err,) = struct.unpack_from("=i", data, off + 16)
                errors[seq - 1] = -err
                pending -= 1
            off += max(16, (length + 3) & ~3)
    return errors


def check(sock: _Socket, message: bytes) -> None:
    """Send one request (sequence number 1) and raise its error, if any."""
    (err,) = request(sock, [message])
    if err:
        raise NetlinkError(err, os.strerror(err))
