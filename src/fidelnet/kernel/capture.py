"""Live capture of one interface of a running run, as a pcapng stream.

``fidelnet capture RUN NODE:INTF`` runs this module's :func:`main` in the node's
network namespace (``fidelnet-exec --net``): an ``AF_PACKET`` socket bound to the
interface, every frame written at once as a pcapng *enhanced packet block* with the
kernel's receive time in nanoseconds and its direction (in or out of the node), to a
file or to standard output (``| wireshark -k -i -``). It works on any interface a
node has: a veth end, an engine link's TAP, a VM's TAP, a switch port in the fabric.

It ends by itself, cleanly (the last block complete), when the run ends: the
interface or its namespace goes away, or the run's state file does; and on SIGINT,
SIGTERM or a closed pipe. ``--count`` ends it after that many frames.

pcapng (draft-ietf-opsawg-pcapng): a section header block, one interface description
block (link type Ethernet, the interface's name, ``if_tsresol`` 9: nanoseconds), then
enhanced packet blocks (``epb_flags``: inbound or outbound).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

__all__ = ["PcapngWriter", "capture", "main"]

ETH_P_ALL = 0x0003
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4
LINKTYPE_ETHERNET = 1
SNAPLEN = 262144

_SHB, _IDB, _EPB = 0x0A0D0D0A, 0x00000001, 0x00000006
_OPT_END, _OPT_COMMENT = 0, 1
_IF_NAME, _IF_TSRESOL = 2, 9
_EPB_FLAGS = 2
_SHB_USERAPPL = 4


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad(value)


def _block(kind: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", kind, total) + body + struct.pack("<I", total)


class PcapngWriter:
    """pcapng blocks for one Ethernet interface, written to ``out`` as they come."""

    def __init__(
        self, out: BinaryIO, ifname: str, snaplen: int = SNAPLEN, comment: str = ""
    ) -> None:
        self.out = out
        self.snaplen = snaplen
        opts = _option(_SHB_USERAPPL, b"fidelnet capture")
        if comment:
            opts += _option(_OPT_COMMENT, comment.encode())
        shb = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + opts + _option(_OPT_END, b"")
        idb_opts = _option(_IF_NAME, ifname.encode()) + _option(_IF_TSRESOL, bytes([9]))
        idb = struct.pack("<HHI", LINKTYPE_ETHERNET, 0, snaplen) + idb_opts
        out.write(_block(_SHB, shb) + _block(_IDB, idb + _option(_OPT_END, b"")))
        out.flush()

    def packet(self, ts_ns: int, frame: bytes, length: int, outbound: bool) -> None:
        """One frame (``frame``, its first bytes; ``length`` on the wire) seen at ``ts_ns``."""
        data = frame[: self.snaplen]
        flags = _option(_EPB_FLAGS, struct.pack("<I", 2 if outbound else 1))
        body = (
            struct.pack("<IIIII", 0, ts_ns >> 32, ts_ns & 0xFFFFFFFF, len(data), length)
            + _pad(data)
            + flags
            + _option(_OPT_END, b"")
        )
        self.out.write(_block(_EPB, body))
        self.out.flush()


def _frames(
    sock: socket.socket, snaplen: int, alive: Callable[[], bool]
) -> Iterator[tuple[int, bytes, int, bool]]:
    """(time ns, bytes, wire length, outbound) of each frame until ``alive()`` is false
    or the interface goes away."""
    ancillary = socket.CMSG_SPACE(16)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    while True:
        if not poller.poll(250):
            if not alive():
                return
            continue
        try:
            data, anc, _flags, addr = sock.recvmsg(snaplen, ancillary)
        except OSError:  # ENETDOWN, ENODEV: the interface went away with the run
            return
        ts = time.time_ns()
        for level, kind, value in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                sec, nsec = struct.unpack("qq", value[:16])
                ts = sec * 1_000_000_000 + nsec
        yield ts, data, len(data), addr[2] == PACKET_OUTGOING


def capture(
    ifname: str,
    out: BinaryIO,
    *,
    state_file: str | None = None,
    count: int | None = None,
    snaplen: int = SNAPLEN,
    comment: str = "",
) -> int:
    """Capture ``ifname`` (in this process's network namespace) to ``out`` until the
    run ends (``state_file`` gone), the interface goes, or ``count`` frames; returns
    the number of frames written."""
    try:
        index = socket.if_nametoindex(ifname)
    except OSError as exc:
        raise SystemExit(f"fidelnet capture: no interface {ifname!r} here: {exc}") from exc
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    stop = {"now": False}

    def on_signal(_signo: int, _frame: object) -> None:
        stop["now"] = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    written = 0
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind((ifname, ETH_P_ALL))
        writer = PcapngWriter(out, ifname, snaplen, comment)

        def alive() -> bool:
            if stop["now"]:
                return False
            if state_file is not None and not os.path.exists(state_file):
                return False
            try:
                return socket.if_nametoindex(ifname) == index
            except OSError:
                return False

        for ts, data, length, outbound in _frames(sock, snaplen, alive):
            if stop["now"]:
                break
            writer.packet(ts, data, length, outbound)
            written += 1
            if count is not None and written >= count:
                break
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        sock.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="fidelnet-capture")
    ap.add_argument("--intf", required=True)
    ap.add_argument("--out", default="-")
    ap.add_argument("--state-file", default=None)
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--snaplen", type=int, default=SNAPLEN)
    ap.add_argument("--comment", default="")
    args = ap.parse_args(argv)
    if args.out == "-":
        n = capture(
            args.intf, sys.stdout.buffer, state_file=args.state_file, count=args.count,
            snaplen=args.snaplen, comment=args.comment,
        )  # fmt: skip
    else:
        with open(args.out, "wb") as f:
            n = capture(
                args.intf, f, state_file=args.state_file, count=args.count,
                snaplen=args.snaplen, comment=args.comment,
            )  # fmt: skip
    print(f"fidelnet capture: {n} frames from {args.intf}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
