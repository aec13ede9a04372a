"""Probes run inside a node by ``bench/links.py``: standard library only.

Started with an argument list through ``node.popen`` (never a shell); each mode
prints one JSON object on stdout when it is done, and a receiver prints ``ready``
on stderr once its socket is bound, so the driver can start the sender after it.

Modes:

- ``udp-recv``: binds a UDP port and records, for every probe datagram, its
  sequence number, the send time the sender wrote into it and the kernel's
  receive time (``SO_TIMESTAMPNS``). Stops after ``--count`` datagrams, or
  ``--idle`` seconds without one once the first has come, or ``--timeout``.
- ``udp-send``: sends ``--count`` datagrams of ``--size`` bytes to ``--dst``,
  ``--interval`` seconds apart (on an absolute schedule; late slots are sent at
  once), each carrying a magic word, its sequence number and the send time.
- ``ping``: ICMP echo over a raw socket, ``--count`` requests ``--interval``
  apart; the reply comes from the peer's kernel (nothing in user space there),
  and its receive time is the kernel's (``SO_TIMESTAMPNS``), so the RTT has
  nanosecond resolution instead of ping's 3 significant digits.

Clock: send times are ``CLOCK_REALTIME`` read just before ``sendto``; the
kernel's receive stamps are ``CLOCK_REALTIME`` too. Every namespace shares that
clock (time namespaces only offset the monotonic and boot clocks), so a
sender in one node and a receiver in another measure one-way delay with the
same clock; a kernel stamp leaves out the receiver's wake-up latency.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

MAGIC = 0x464E5052  # "FNPR"
HEADER = struct.Struct("!IQQ")  # magic, sequence number, send time (ns, CLOCK_REALTIME)
TIMESPEC = struct.Struct("@qq")
ICMP_ECHO, ICMP_ECHO_REPLY = 8, 0
CMSG_SPACE = socket.CMSG_SPACE(TIMESPEC.size)
# Linux values, for Pythons whose socket module does not name them (x86-64, arm64)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
RCVBUF = 8 << 20  # bytes; forced past net.core.rmem_max (root), so a burst is not lost here


def realtime_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def kernel_stamp(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = TIMESPEC.unpack(data[: TIMESPEC.size])
            return int(sec) * 1_000_000_000 + int(nsec)
    return None


def timestamped_socket(family: int, kind: int, proto: int = 0) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    return sock


def udp_recv(args: argparse.Namespace) -> dict[str, Any]:
    sock = timestamped_socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", args.port))
    print("ready", file=sys.stderr, flush=True)
    seqs: list[int] = []
    sent: list[int] = []
    received: list[int] = []
    deadline = time.monotonic() + args.timeout
    first = True
    while len(seqs) < args.count:
        wait = deadline - time.monotonic()
        if not first:
            wait = min(wait, args.idle)
        if wait <= 0 or not select.select([sock], [], [], wait)[0]:
            break
        data, anc, _, _ = sock.recvmsg(65536, CMSG_SPACE)
        if len(data) < HEADER.size:
            continue
        magic, seq, send_ns = HEADER.unpack_from(data)
        if magic != MAGIC:
            continue
        stamp = kernel_stamp(anc)
        seqs.append(seq)
        sent.append(send_ns)
        received.append(stamp if stamp is not None else realtime_ns())
        first = False
    return {"mode": "udp-recv", "seq": seqs, "send_ns": sent, "recv_ns": received}


def paced(count: int, interval: float) -> Iterator[int]:
    """Yield the slot numbers 0..count-1 on an absolute schedule, ``interval``
    apart; slots already due are yielded at once (so a late start catches up in a
    burst rather than drifting)."""
    start = time.monotonic()
    for i in range(count):
        due = start + i * interval
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        yield i


def udp_send(args: argparse.Namespace) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, RCVBUF)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RCVBUF)
    pad = bytes(max(0, args.size - HEADER.size))
    dst = (args.dst, args.port)
    errors = 0
    begin = time.monotonic()
    for seq in paced(args.count, args.interval):
        try:
            sock.sendto(HEADER.pack(MAGIC, seq, realtime_ns()) + pad, dst)
        except OSError:  # ENOBUFS: counted, as a receiver would see a loss
            errors += 1
    return {
        "mode": "udp-send",
        "count": args.count,
        "send_errors": errors,
        "elapsed_s": time.monotonic() - begin,
    }


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = int(sum(struct.unpack(f"!{len(data) // 2}H", data)))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo_request(ident: int, seq: int, payload: bytes) -> bytes:
    header = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, seq & 0xFFFF)
    csum = checksum(header + payload)
    return struct.pack("!BBHHH", ICMP_ECHO, 0, csum, ident, seq & 0xFFFF) + payload


def ping(args: argparse.Namespace) -> dict[str, Any]:
    sock = timestamped_socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    pad = bytes(max(0, args.size - 16))
    rtts: dict[int, int] = {}
    sent = 0
    start = time.monotonic()
    end_wait = args.wait

    def drain(timeout: float) -> None:
        while True:
            if not select.select([sock], [], [], max(0.0, timeout))[0]:
                return
            timeout = 0.0
            data, anc, _, _ = sock.recvmsg(65536, CMSG_SPACE)
            stamp = kernel_stamp(anc)
            ihl = (data[0] & 0x0F) * 4
            icmp = data[ihl:]
            if len(icmp) < 24:
                continue
            kind, _, _, rid, _ = struct.unpack_from("!BBHHH", icmp)
            if kind != ICMP_ECHO_REPLY or rid != ident:
                continue
            seq, send_ns = struct.unpack_from("!QQ", icmp, 8)
            if seq not in rtts:
                rtts[seq] = (stamp if stamp is not None else realtime_ns()) - send_ns

    for seq in range(args.count):
        due = start + seq * args.interval
        drain(due - time.monotonic())
        sock.sendto(
            echo_request(ident, seq, struct.pack("!QQ", seq, realtime_ns()) + pad), (args.dst, 0)
        )
        sent += 1
    deadline = time.monotonic() + end_wait
    while len(rtts) < sent and time.monotonic() < deadline:
        drain(deadline - time.monotonic())
    ordered = [rtts[s] for s in sorted(rtts)]
    return {"mode": "ping", "sent": sent, "received": len(rtts), "rtt_ns": ordered}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("udp-recv")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--count", type=int, default=1 << 62)
    r.add_argument("--idle", type=float, default=2.0)
    r.add_argument("--timeout", type=float, default=120.0)
    s = sub.add_parser("udp-send")
    s.add_argument("--dst", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, required=True)
    s.add_argument("--interval", type=float, required=True)
    s.add_argument("--size", type=int, default=64, help="UDP payload bytes (at least 20)")
    p = sub.add_parser("ping")
    p.add_argument("--dst", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--interval", type=float, required=True)
    p.add_argument("--size", type=int, default=56, help="ICMP payload bytes (at least 16)")
    p.add_argument("--wait", type=float, default=2.0, help="seconds to wait for late replies")
    args = parser.parse_args()
    modes = {"udp-recv": udp_recv, "udp-send": udp_send, "ping": ping}
    result = modes[args.mode](args)
    json.dump(result, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
