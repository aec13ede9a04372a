"""A minimal pcap reader and the delivered rate per window; standard library only.

:func:`frames` reads a classic pcap file (microsecond or nanosecond timestamps,
either byte order, Ethernet link type) as ``(time in ns, frame bytes)`` pairs.

Frame bytes are what a shaper counts: the L2 frame without FCS (Ethernet header
and IP packet), which is what a TAP device hands the engine and what htb
accounts (``qdisc_pkt_len``). A capture on a veth can hold TCP super-frames
(GSO: one skb for several segments, passed unsegmented from one namespace to
the other); htb charges those as the segments they stand for, headers included,
so :func:`frames` does the same: a TCP frame longer than ``mtu + 14`` counts as
``ceil(payload / mss)`` frames of at most ``mtu + 14`` bytes (``mss`` =
``mtu`` - IP and TCP header lengths, taken from the captured headers).

:func:`window_rates` turns arrivals into the delivered rate per window: each
frame's bits are spread evenly over the interval since the previous frame
arrived, and each window gets the bits of the intervals it overlaps, pro rata.
A window therefore holds fractions of frames rather than 8 or 9 whole ones (at
10 Mb/s a 10 ms window holds 8.26 frames of 1514 bytes: counting whole frames
would swing the rate by 12 % from window to window on a perfect link), and the
measure uses nothing but the receive times: an idle gap lowers the rate of the
windows it covers, a burst raises it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from pathlib import Path

LINKTYPE_ETHERNET = 1
ETH_HLEN = 14
ETH_P_IP = 0x0800
IPPROTO_TCP = 6

_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}


def frames(path: Path, mtu: int = 1500) -> Iterator[tuple[int, int]]:
    """``(receive time ns, frame bytes as a shaper counts them)`` per record."""
    data = path.read_bytes()
    if len(data) < 24:
        return
    order, scale = _MAGICS.get(data[:4], ("", 0))
    if not order:
        raise ValueError(f"{path}: not a pcap file (magic {data[:4].hex()})")
    linktype = struct.unpack_from(order + "I", data, 20)[0] & 0x0FFFFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, not Ethernet")
    record = struct.Struct(order + "IIII")
    pos = 24
    max_frame = mtu + ETH_HLEN
    while pos + record.size <= len(data):
        sec, frac, incl, orig = record.unpack_from(data, pos)
        pos += record.size
        head = data[pos : pos + incl]
        pos += incl
        size = orig
        if orig > max_frame:
            size = _segmented(head, orig, mtu)
        yield sec * 1_000_000_000 + frac * scale, size


def _segmented(head: bytes, orig: int, mtu: int) -> int:
    """Bytes of the MTU-sized frames a TCP super-frame stands for (``orig`` if it
    is not TCP over IPv4 or its headers were not captured)."""
    if len(head) < ETH_HLEN + 20 or struct.unpack_from("!H", head, 12)[0] != ETH_P_IP:
        return orig
    ip = ETH_HLEN
    ihl = (head[ip] & 0x0F) * 4
    if head[ip + 9] != IPPROTO_TCP or len(head) < ip + ihl + 13:
        return orig
    doff = (head[ip + ihl + 12] >> 4) * 4
    hdr = ETH_HLEN + ihl + doff
    payload = orig - hdr
    mss = mtu - ihl - doff
    if payload <= 0 or mss <= 0:
        return orig
    segments = math.ceil(payload / mss)
    return payload + segments * hdr


def window_rates(
    arrivals: list[tuple[int, int]], start_ns: int, end_ns: int, window_ns: int
) -> list[float]:
    """Delivered bit/s in each whole window of ``window_ns`` from ``start_ns`` up to
    ``end_ns``; each frame's bits are spread over the interval since the previous
    arrival (see the module's docstring)."""
    n = (end_ns - start_ns) // window_ns
    if n <= 0:
        return []
    bits = [0.0] * n
    prev: int | None = None
    for t, size in arrivals:
        if prev is None or t <= prev:
            if prev is None:
                prev = t
                continue
            # same timestamp as the previous frame: credit it at that instant
            k = (t - start_ns) // window_ns
            if 0 <= k < n:
                bits[k] += size * 8
            continue
        lo, hi = prev, t
        prev = t
        if hi <= start_ns or lo >= start_ns + n * window_ns:
            continue
        density = size * 8 / (hi - lo)
        k = max(0, (lo - start_ns) // window_ns)
        while k < n:
            w0 = start_ns + k * window_ns
            w1 = w0 + window_ns
            if w0 >= hi:
                break
            overlap = min(hi, w1) - max(lo, w0)
            if overlap > 0:
                bits[k] += density * overlap
            k += 1
    return [b * 1e9 / window_ns for b in bits]
