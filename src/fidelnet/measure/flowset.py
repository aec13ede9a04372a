"""Many UDP flows at once, each at its own rate along its own path (HVNet's
traffic): one ``fidelnet-pktgen`` receiver per flow in its destination node, bound
to the flow's port, and one sender per flow in its source node, all sending from
the same instant for the same time. Independent senders interleave their packets
in an order nobody chose, as HVNet's random send order across flows intends.

Each flow's result is a :class:`UdpResult` (its latency, jitter and, with
``worst``, its highest latencies with their times), measured with the machine's
one clock: senders and receivers are processes of this machine (namespace nodes,
or VMs whose clocks were set to it).
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.measure import pktgen, tools
from fidelnet.measure.results import UdpResult
from fidelnet.measure.workdir import work_dir
from fidelnet.topology.spec import FlowSpec

__all__ = ["FlowRun", "frame_size", "run_flows"]

_ETHERNET = 18
"""Bytes an Ethernet frame adds to an IP packet (header and FCS)."""


def frame_size(ip_bytes: int) -> int:
    """The pktgen frame size (Ethernet with FCS) of an IP packet of ``ip_bytes``."""
    return max(pktgen.MIN_SIZE, ip_bytes + _ETHERNET)


@dataclass(frozen=True)
class FlowRun:
    """One flow to send: ``src`` and ``dst`` where its ends run, ``dst_addr`` an
    address of ``dst``."""

    flow: FlowSpec
    src: pktgen.Runner
    dst: pktgen.Runner
    dst_addr: str

    def spec(self, duration: float, seed: int) -> pktgen.TrafficSpec:
        ip_bytes = self.flow.size or pktgen.MIN_SIZE - _ETHERNET
        if self.flow.rate_bps is None:
            raise ValidationError(f"flows.{self.flow.name}.rate", "a flow to send needs a rate")
        pps = self.flow.rate_bps / (ip_bytes * 8)  # the rate counts IP packets, as HVNet's
        return pktgen.TrafficSpec(pps, frame_size(ip_bytes), duration, "cbr", seed=seed)


def run_flows(
    runs: Sequence[FlowRun], duration: float, *, worst: int = 0, seed: int | None = None
) -> dict[str, UdpResult]:
    """Send every flow at once for ``duration`` seconds; each flow's result by name."""
    if not runs:
        return {}
    rng = random.Random(seed)
    specs = [r.spec(duration, rng.getrandbits(63)) for r in runs]
    for s in specs:
        s.check()
    with work_dir(runs[0].dst, "flows") as root:
        receivers: list[subprocess.Popen[str]] = []
        senders: list[subprocess.Popen[str]] = []
        try:
            for i, r in enumerate(runs):
                work = root / f"f{i}"
                work.mkdir()
                receivers.append(
                    tools.popen(
                        r.dst,
                        pktgen.recv_argv(
                            r.dst_addr,
                            [r.flow.port],
                            duration,
                            work,
                            None,
                            False,
                            idle_stop=duration + 1.0,
                            worst=worst,
                        ),  # fmt: skip
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            for i, (r, rx) in enumerate(zip(runs, receivers, strict=True)):
                pktgen.resolve_neighbour(r.src, r.dst_addr)
                pktgen.wait_ready(rx, root / f"f{i}" / "ready", r.dst.name)
            start = time.time_ns() + 200_000_000
            for i, (r, s) in enumerate(zip(runs, specs, strict=True)):
                senders.append(
                    tools.popen(
                        r.src,
                        pktgen.send_argv(
                            r.dst_addr,
                            [r.flow.port],
                            s,
                            root / f"f{i}",
                            None,
                            s.seed or 0,
                            start,
                        ),  # fmt: skip
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
            return _collect(runs, specs, receivers, senders, root, duration)
        finally:
            for proc in (*senders, *receivers):
                pktgen.stop_process(proc)
                if proc.stderr is not None:
                    proc.stderr.close()


def _collect(
    runs: Sequence[FlowRun],
    specs: Sequence[pktgen.TrafficSpec],
    receivers: Sequence[subprocess.Popen[str]],
    senders: Sequence[subprocess.Popen[str]],
    root: Path,
    duration: float,
) -> dict[str, UdpResult]:
    sent = []
    for r, tx in zip(runs, senders, strict=True):
        try:
            tx.wait(timeout=duration + 30.0)
        except subprocess.TimeoutExpired as exc:
            raise MeasurementError(f"flow {r.flow.name}: its sender did not finish") from exc
        if tx.returncode not in (0, 3):  # 3: the rate was not reached (a flag, not an error)
            err = tx.stderr.read() if tx.stderr is not None else ""
            raise MeasurementError(
                f"flow {r.flow.name}: pktgen sender in {r.src.name} failed "
                f"(exit {tx.returncode}): {(err or '').strip()[-600:]}"
            )
    for i, tx in enumerate(senders):
        sent.append(pktgen.read_json(root / f"f{i}" / "send.json", "send", tx))
    time.sleep(0.5)  # the packets still on their way arrive
    out = {}
    for i, (r, s, rx) in enumerate(zip(runs, specs, receivers, strict=True)):
        pktgen.stop_process(rx)
        got = pktgen.read_json(root / f"f{i}" / "recv.json", "recv", rx)
        out[r.flow.name] = pktgen.combine(r.src.name, r.dst.name, r.dst_addr, s, sent[i], got)
    return out
