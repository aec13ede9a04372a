"""Route messages built by hand for batching decode to what was asked."""

from __future__ import annotations

import socket
import struct

from fidelnet.kernel.netlink import _route_msg


def _attrs(body: bytes) -> dict[int, bytes]:
    out = {}
    off = 12  # struct rtmsg
    while off < len(body):
        length, kind = struct.unpack_from("=HH", body, off)
        out[kind] = body[off + 4 : off + length]
        off += (length + 3) & ~3
    return out


def test_route_message_layout() -> None:
    msg = _route_msg(7, "10.0.5.0/24", "10.0.1.2", 3)
    length, mtype, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert length == len(msg) and length % 4 == 0
    assert mtype == 24 and seq == 7
    assert flags & 0x1 and flags & 0x4  # request, ack
    family, dst_len, _, _, table, proto, scope, rtype = struct.unpack_from("=8B", msg, 16)
    assert (family, dst_len, table, proto, scope, rtype) == (2, 24, 254, 4, 0, 1)
    attrs = _attrs(msg[16:])
    assert socket.inet_ntoa(attrs[1]) == "10.0.5.0"
    assert socket.inet_ntoa(attrs[5]) == "10.0.1.2"
    assert struct.unpack("=I", attrs[4])[0] == 3


def test_device_route_has_link_scope_and_no_gateway() -> None:
    msg = _route_msg(1, "0.0.0.0/0", None, 2)
    scope = msg[16 + 6]
    assert scope == 253
    assert 5 not in _attrs(msg[16:])
