"""How far apart two machines' clocks are, and how far their network is.

A cut link's receiving half counts the link's delay from the sender's stamp, taken
on the sender's ``CLOCK_REALTIME`` (:mod:`fidelnet.links.cut`): the two machines'
clocks must be compared. Each shard agent answers probes on UDP port
:data:`PORT` of its wire address (:class:`Responder`), and measures the other
machines' clocks before it carries a cut link to them (:func:`probe`), the way NTP
does: the probe sends its time ``t1``; the responder notes when it received it
(``t2``) and when it answered (``t3``); the probe notes ``t4``. Then

- the offset (the peer's clock minus this one) is ``((t2 - t1) + (t3 - t4)) / 2``,
- the round trip is ``(t4 - t1) - (t3 - t2)``,

and the offset is exact when both ways took as long; otherwise it is off by at most
half the round trip. Of ``count`` probes the one with the shortest round trip is
kept (the least queueing), its half round trip the offset's uncertainty, and half
its round trip the one-way delay's estimate.

Timestamps are taken by Python around the socket calls, so the uncertainty
includes tens of µs of interpreter time; it is reported, never hidden.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass

from fidelnet.errors import FidelnetError
from fidelnet.kernel import ns

__all__ = ["PORT", "ClockSample", "Responder", "probe"]

PORT = 46999
"""The UDP port each agent answers clock probes on, at its wire address."""
_MAGIC = b"FNCK"
_REQ = struct.Struct("!4sQq")  # magic, seq, t1
_REP = struct.Struct("!4sQqqq")  # magic, seq, t1, t2, t3


@dataclass(frozen=True)
class ClockSample:
    """The peer's clock minus this one (``offset_ns``), within ``uncertainty_ns``;
    the one-way delay's estimate (half the shortest round trip) and how many probes
    were answered."""

    offset_ns: int
    uncertainty_ns: int
    one_way_ns: int
    answered: int

    def as_status(self) -> dict[str, int]:
        return {
            "offsetNs": self.offset_ns,
            "uncertaintyNs": self.uncertainty_ns,
            "oneWayNs": self.one_way_ns,
            "answered": self.answered,
        }


def _socket(netns: str | None, address: str, port: int) -> socket.socket:
    """A UDP socket bound to ``address:port`` in the namespace ``netns``."""
    if netns is None:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    else:
        with ns.entered(netns):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((address, port))
    except OSError as exc:
        s.close()
        raise FidelnetError(f"clock probe: cannot bind {address}:{port}: {exc}") from exc
    return s


class Responder:
    """Answers clock probes on ``address:PORT`` (in ``netns``) from a thread of its
    own until :meth:`close`."""

    def __init__(self, address: str, netns: str | None = None, port: int = PORT) -> None:
        self.sock = _socket(netns, address, port)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="clock-responder", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self.sock.recvfrom(64)
            except TimeoutError:
                continue
            except OSError:
                return
            t2 = time.time_ns()
            if len(data) != _REQ.size:
                continue
            magic, seq, t1 = _REQ.unpack(data)
            if magic != _MAGIC:
                continue
            try:
                self.sock.sendto(_REP.pack(_MAGIC, seq, t1, t2, time.time_ns()), peer)
            except OSError:
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def probe(
    local: str,
    peer: str,
    netns: str | None = None,
    *,
    port: int = PORT,
    count: int = 32,
    timeout: float = 0.2,
) -> ClockSample:
    """Probe the responder at ``peer:port`` ``count`` times from ``local`` (an
    address, in ``netns``); the sample of the shortest round trip. Raises
    :class:`FidelnetError` when none was answered."""
    s = _socket(netns, local, 0)
    s.settimeout(timeout)
    best: tuple[int, int] | None = None  # (round trip, offset)
    answered = 0
    try:
        for seq in range(count):
            t1 = time.time_ns()
            try:
                s.sendto(_REQ.pack(_MAGIC, seq, t1), (peer, port))
                while True:
                    data = s.recv(64)
                    t4 = time.time_ns()
                    if len(data) != _REP.size:
                        continue
                    magic, got, e1, t2, t3 = _REP.unpack(data)
                    if magic == _MAGIC and got == seq and e1 == t1:
                        break
            except TimeoutError:
                continue
            except OSError as exc:
                raise FidelnetError(f"clock probe of {peer}:{port}: {exc}") from exc
            answered += 1
            rtt = (t4 - t1) - (t3 - t2)
            offset = ((t2 - t1) + (t3 - t4)) // 2
            if best is None or rtt < best[0]:
                best = (rtt, offset)
    finally:
        s.close()
    if best is None:
        raise FidelnetError(
            f"clock probe of {peer}:{port}: no answer to {count} probes in "
            f"{timeout:g} s each (is its agent running with --wire-address {peer}?)"
        )
    rtt, offset = best
    half = max(0, rtt) // 2
    return ClockSample(offset, half, half, answered)
