"""Run ``fidelnet-pktgen`` (crates/pktgen) inside nodes and read its results.

One run starts the receiver in the destination node, waits until its sockets are
bound (a ready file), starts the sender in the source node, waits for it, lets
the receiver stop on idle (or interrupts it), and joins both JSON outputs into a
:class:`~fidelnet.measure.results.UdpResult`. Loss is the sender's count minus
the receiver's unique count, per flow.

Nodes are anything with ``name`` and ``popen(argv, **kwargs)``: a fidelnet node,
or a process handle into a foreign namespace (the benchmark's Mininet peer).
Everything is argv lists; nothing passes through a shell.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.measure import tools
from fidelnet.measure.workdir import work_dir

if TYPE_CHECKING:
    from fidelnet.measure.results import UdpResult

__all__ = [
    "MAX_SIZE",
    "MIN_SIZE",
    "MODES",
    "PATTERNS",
    "Runner",
    "TrafficSpec",
    "combine",
    "find_pktgen",
    "prepare_gso",
    "read_json",
    "recv_argv",
    "resolve_neighbour",
    "run",
    "send_argv",
    "stop_process",
    "wait_ready",
]

PATTERNS: tuple[str, ...] = ("cbr", "burst", "poisson")
Pattern = Literal["cbr", "burst", "poisson"]
MODES: tuple[str, ...] = ("udp", "gso", "packet")
Mode = Literal["udp", "gso", "packet"]
MIN_SIZE = 64  # Ethernet frame with FCS; 18 bytes of UDP payload over IPv4
MAX_SIZE = 1518
MAX_RATE = 100e6

_READY_TIMEOUT = 10.0
_EXIT_RATE_NOT_REACHED = 3
_cached: str | None = None


class Runner(Protocol):
    """Where a process can be started: a node of a running network."""

    @property
    def name(self) -> str: ...

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]: ...


@dataclass(frozen=True)
class TrafficSpec:
    """What the sender sends. ``rate_pps`` is the total over ``flows`` flows (each a
    destination port), ``size`` the Ethernet frame with FCS (64 = the papers' 84 B on
    the wire), ``burst`` the packets per burst for the ``burst`` pattern."""

    rate_pps: float
    size: int = MIN_SIZE
    duration: float = 2.0
    pattern: Pattern = "cbr"
    burst: int = 100
    flows: int = 1
    seed: int | None = None
    batch: int | None = None
    mode: Mode = "udp"

    def check(self) -> None:
        """Raise ValidationError naming the first bad field."""
        if not isinstance(self.rate_pps, (int, float)) or not 0 < self.rate_pps <= MAX_RATE:
            raise ValidationError(
                "rate_pps", f"must be > 0 and at most {MAX_RATE:.0f}", self.rate_pps
            )
        if not isinstance(self.duration, (int, float)) or not 0 < self.duration <= 3600:
            raise ValidationError("duration", "must be > 0 and at most 3600 seconds", self.duration)
        if not isinstance(self.size, int) or not MIN_SIZE <= self.size <= MAX_SIZE:
            raise ValidationError(
                "size", f"frame size must be {MIN_SIZE}..{MAX_SIZE} bytes (with FCS)", self.size
            )
        if self.pattern not in PATTERNS:
            raise ValidationError("pattern", "unknown traffic pattern", self.pattern, PATTERNS)
        if not isinstance(self.burst, int) or self.burst < 1:
            raise ValidationError("burst", "must be a whole number of packets >= 1", self.burst)
        if not isinstance(self.flows, int) or not 1 <= self.flows <= 1024:
            raise ValidationError("flows", "must be 1..1024", self.flows)
        if self.mode not in MODES:
            raise ValidationError("mode", "unknown sender mode", self.mode, MODES)
        if self.batch is not None and not 1 <= self.batch <= 1024:
            raise ValidationError("batch", "must be 1..1024", self.batch)


def find_pktgen() -> str:
    """Locate ``fidelnet-pktgen``: $FIDELNET_PKTGEN, next to the Python executable,
    the source tree's cargo build, or PATH."""
    global _cached
    if _cached:
        return _cached
    root = Path(__file__).resolve().parents[3]
    candidates = [
        os.environ.get("FIDELNET_PKTGEN", ""),
        str(Path(sys.executable).parent / "fidelnet-pktgen"),
        str(root / "target" / "release" / "fidelnet-pktgen"),
        str(root / "target" / "debug" / "fidelnet-pktgen"),
    ]
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory:
            candidates.append(os.path.join(directory, "fidelnet-pktgen"))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            _cached = c
            return c
    raise MeasurementError(
        "fidelnet-pktgen: generator not found (run `make install`, or set FIDELNET_PKTGEN "
        "to the binary built by `cargo build --release -p pktgen`)"
    )


def _endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def recv_argv(
    addr: str,
    ports: list[int],
    duration: float,
    workdir: Path,
    cpu: int | None,
    hdr_log: bool,
    interval_ms: int = 100,
    idle_stop: float = 0.5,
    worst: int = 0,
) -> list[str]:
    argv = [find_pktgen(), "recv"]
    for p in ports:
        argv += ["--bind", _endpoint(addr, p)]
    argv += [
        "--duration",
        f"{duration + 30.0:.3f}",
        "--idle-stop",
        f"{idle_stop:g}",
        "--json",
        str(workdir / "recv.json"),
        "--ready",
        str(workdir / "ready"),
    ]
    if interval_ms != 100:
        argv += ["--interval-ms", str(interval_ms)]
    if worst:
        argv += ["--worst", str(worst)]
    if hdr_log:
        argv += ["--hdr-log", str(workdir / "latency.hlog")]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    return argv


def send_argv(
    addr: str,
    ports: list[int],
    spec: TrafficSpec,
    workdir: Path,
    cpu: int | None,
    seed: int,
    start_at_ns: int | None = None,
) -> list[str]:
    argv = [find_pktgen(), "send"]
    for p in ports:
        argv += ["--flow", _endpoint(addr, p)]
    argv += [
        "--rate",
        repr(float(spec.rate_pps)),
        "--size",
        str(spec.size),
        "--duration",
        repr(float(spec.duration)),
        "--pattern",
        spec.pattern,
        "--seed",
        str(seed),
        "--json",
        str(workdir / "send.json"),
    ]
    if spec.pattern == "burst":
        argv += ["--burst", str(spec.burst)]
    if spec.mode != "udp":
        argv += ["--mode", spec.mode]
    if spec.batch is not None:
        argv += ["--batch", str(spec.batch)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    if start_at_ns is not None:
        argv += ["--start-at", str(start_at_ns)]
    return argv


def stop_process(proc: subprocess.Popen[Any], sig: int = signal.SIGINT, wait: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(sig)
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


def read_json(path: Path, who: str, proc: subprocess.Popen[Any]) -> dict[str, Any]:
    err = ""
    if proc.stderr is not None:
        err = proc.stderr.read() or ""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise MeasurementError(
            f"pktgen {who} (exit {proc.returncode}) left no readable result: {exc}; "
            f"stderr: {err.strip()[-800:]}"
        ) from exc
    if not isinstance(doc, dict) or doc.get("role") != who:
        raise MeasurementError(f"pktgen {who}: unexpected result document in {path}")
    return doc


def wait_ready(proc: subprocess.Popen[Any], ready: Path, who: str) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT
    while not ready.exists():
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else ""
            raise MeasurementError(
                f"pktgen receiver in {who} exited ({proc.returncode}) before it was ready: "
                f"{(err or '').strip()[-800:]}"
            )
        if time.monotonic() > deadline:
            raise MeasurementError(f"pktgen receiver in {who} not ready after {_READY_TIMEOUT} s")
        time.sleep(0.005)


def prepare_gso(node: Runner, devices: Sequence[str]) -> None:
    """``--mode gso`` hands the kernel one buffer of many datagrams (UDP_SEGMENT);
    with ``tx-udp-segmentation`` off on the egress device the kernel splits it
    before the device, so separate frames cross the link, as in ``udp`` mode.
    pktgen refuses gso while the feature is on; this turns it off (ethtool)."""
    from fidelnet.kernel import nic

    for dev in devices:
        p = tools.popen(
            node,
            nic.udp_segmentation_off_argv(dev),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        _out, err = p.communicate(timeout=10)
        if p.returncode != 0:
            raise MeasurementError(
                f"{node.name}: cannot turn tx-udp-segmentation off on {dev} for --mode gso "
                f"(ethtool exit {p.returncode}: {(err or '').strip()}); use mode='udp'"
            )


def resolve_neighbour(src: Runner, addr: str) -> None:
    """One ping first, so the first measured packets do not die in the sender's
    neighbour (ARP) queue; its result does not matter (the path may be lossy)."""
    argv = ["ping", "-6" if ":" in addr else "-4", "-n", "-q", "-c", "1", "-W", "1", addr]
    p = tools.popen(src, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        stop_process(p, signal.SIGKILL)


def combine(
    src: str,
    dst: str,
    dst_addr: str,
    spec: TrafficSpec,
    sent: dict[str, Any],
    got: dict[str, Any],
    sender_cpu: int | None = None,
    receiver_cpu: int | None = None,
    hdr_log: str | None = None,
) -> UdpResult:
    """A UdpResult from the sender's and the receiver's JSON documents
    (:func:`fidelnet.measure.pktgen_parse.combine`, imported here on first use: the
    scenario model reads this module's limits without the result models)."""
    from fidelnet.measure.pktgen_parse import combine as _combine

    return _combine(src, dst, dst_addr, spec, sent, got, sender_cpu, receiver_cpu, hdr_log)


def run(
    src: Runner,
    dst: Runner,
    dst_addr: str,
    spec: TrafficSpec,
    *,
    sender_cpu: int | None = None,
    receiver_cpu: int | None = None,
    port: int | None = None,
    hdr_log: str | os.PathLike[str] | None = None,
    interval_ms: int = 100,
    on_start: Callable[[int], None] | None = None,
    worst: int = 0,
) -> UdpResult:
    """Send ``spec`` from ``src`` to ``dst_addr`` (an address of ``dst``) and measure
    what arrives (the rate series in ``interval_ms`` windows, 1..3600000). With
    ``on_start``, the first packet is due at a set instant (CLOCK_REALTIME ns, 50 ms
    after the receiver is ready), which ``on_start`` gets before it comes. Raises
    MeasurementError if a tool fails; a rate the sender cannot reach is not an error
    but a ``rate_not_reached`` flag with the rate it reached. With ``worst``, the
    result keeps that many highest latencies with their times (``UdpResult.worst``)."""
    spec.check()
    if not isinstance(worst, int) or not 0 <= worst <= 1_000_000:
        raise ValidationError("worst", "must be 0..1000000 packets", worst)
    if not isinstance(interval_ms, int) or not 1 <= interval_ms <= 3_600_000:
        raise ValidationError("interval_ms", "must be 1..3600000 milliseconds", interval_ms)
    base = port if port is not None else random.randint(20000, 60000 - spec.flows)
    ports = list(range(base, base + spec.flows))
    seed = spec.seed if spec.seed is not None else random.getrandbits(63)
    with work_dir(dst, "pktgen") as work:
        senders: list[subprocess.Popen[str]] = []
        rx = tools.popen(
            dst,
            recv_argv(
                dst_addr,
                ports,
                spec.duration,
                work,
                receiver_cpu,
                hdr_log is not None,
                interval_ms,
                # With events, an outage may outlast any idle time: the receiver
                # is stopped once the sender is done instead.
                spec.duration + 1.0 if on_start is not None else 0.5,
                worst,
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            resolve_neighbour(src, dst_addr)
            wait_ready(rx, work / "ready", dst.name)
            start_at = None
            if on_start is not None:
                start_at = time.time_ns() + 50_000_000
                on_start(start_at)
            tx = tools.popen(
                src,
                send_argv(dst_addr, ports, spec, work, sender_cpu, seed, start_at),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            senders.append(tx)
            try:
                tx.wait(timeout=spec.duration + 30.0)
            except subprocess.TimeoutExpired as exc:
                stop_process(tx, signal.SIGKILL)
                raise MeasurementError(
                    f"pktgen sender in {src.name} did not finish within {spec.duration + 30} s"
                ) from exc
            if tx.returncode not in (0, _EXIT_RATE_NOT_REACHED):
                err = tx.stderr.read() if tx.stderr is not None else ""
                raise MeasurementError(
                    f"pktgen sender in {src.name} failed (exit {tx.returncode}): "
                    f"{(err or '').strip()[-800:]}"
                )
            sent = read_json(work / "send.json", "send", tx)
            try:
                # idle-stop ends it 0.5 s after the last packet; with events, 0.5 s
                # after the sender is done (the packets still on their way arrive).
                rx.wait(timeout=3.0 if on_start is None else 0.5)
            except subprocess.TimeoutExpired:
                stop_process(rx)
            if rx.returncode != 0:
                raise MeasurementError(
                    f"pktgen receiver in {dst.name} failed (exit {rx.returncode})"
                    + (f": {rx.stderr.read().strip()[-800:]}" if rx.stderr else "")
                )
            got = read_json(work / "recv.json", "recv", rx)
            log_path = None
            if hdr_log is not None and (work / "latency.hlog").exists():
                log_path = str(hdr_log)
                Path(log_path).write_bytes((work / "latency.hlog").read_bytes())
        finally:
            stop_process(rx)
            # Both ends' stderr pipes (the sender's was left open once per run: the
            # soak benchmark saw the process gain a descriptor every run).
            for proc in (rx, *senders):
                if proc.stderr is not None:
                    proc.stderr.close()
    return combine(
        src.name, dst.name, dst_addr, spec, sent, got, sender_cpu, receiver_cpu, log_path
    )
