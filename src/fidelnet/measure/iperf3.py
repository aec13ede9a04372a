"""iperf3 in nodes: argument lists, server and client processes, and its JSON output.

Every process is started with ``node.popen(argv)`` (a list, never a shell line).
Output goes to unnamed temporary files, not pipes, so a long JSON report never
blocks a process that nobody is reading yet. :func:`run` starts one one-off server
per flow (``iperf3 -s -1 -J -i INTERVAL -p PORT``), waits until each listens, starts
every client at once (``iperf3 -c ADDR -p PORT -t SECONDS -i INTERVAL -J [-w
BYTES]``), and always stops every process it started (terminate, then kill after a
grace period), whatever happens.

Why the server's own ``-J`` output and not the client's ``--get-server-output``:
the receiver's figures are the ones that count, and the server's report interval is
its own ``-i`` (the client does not send its interval), so the server needs ``-i``
either way; its stdout is then the receiver's view directly, one JSON document per
process, with no second copy embedded in the client's.

:func:`parse` reads one ``-J`` document (client or server) into a :class:`Report`
and raises :class:`~fidelnet.errors.MeasurementError`, with iperf3's ``error`` text,
when the output is empty, not JSON, or a failed run.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Literal

from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.measure import tools

if TYPE_CHECKING:
    from fidelnet.nodes.node import Node

__all__ = [
    "DEFAULT_MSS",
    "Flow",
    "FlowOutput",
    "Interval",
    "Process",
    "Report",
    "client_argv",
    "parse",
    "run",
    "server_argv",
]

DEFAULT_MSS = 1448
"""TCP payload per segment on a 1500-byte MTU with timestamps (1500 - 20 - 32)."""

MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 60.0
MIN_WARMUP_S = 1.0
"""The shortest warm-up a TCP measurement omits (``fidelnet.measure.tcp``)."""
MIN_MEASURED_S = 1.0
"""The shortest span a TCP measurement measures after its warm-up."""
LISTEN_TIMEOUT_S = 10.0
SERVER_GRACE_S = 10.0
STOP_GRACE_S = 2.0
_POLL_S = 0.01
_TCP_LISTEN = "0A"

Role = Literal["client", "server"]


# -- argument lists ------------------------------------------------------------------------


def server_argv(port: int, interval: float) -> list[str]:
    """A one-off server with JSON output and a report every ``interval`` seconds."""
    return ["iperf3", "-s", "-1", "-J", "-i", _seconds(interval), "-p", str(_port(port))]


def client_argv(
    addr: str, port: int, duration: int, interval: float, window: int | None = None
) -> list[str]:
    """A TCP client to ``addr``:``port`` for ``duration`` whole seconds (iperf3 reads
    ``-t`` as an integer); ``window`` bytes is passed as ``-w`` (both ends' socket
    buffers; the server takes it from the client's parameters)."""
    try:
        ipaddress.ip_address(addr)
    except ValueError:
        raise ValidationError("addr", "must be an IP address", addr) from None
    if isinstance(duration, bool) or not isinstance(duration, int) or duration < 1:
        raise ValidationError("duration", "must be a whole number of seconds, at least 1", duration)
    argv = ["iperf3", "-c", addr, "-p", str(_port(port)), "-t", str(duration)]
    argv += ["-i", _seconds(interval), "-J"]
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValidationError("window", "must be a positive number of bytes", window)
        argv += ["-w", str(window)]
    return argv


def _port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValidationError("port", "must be a TCP port number, 1..65535", port)
    return port


def _seconds(interval: float) -> str:
    if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
        raise ValidationError(
            "interval", f"iperf3 reports every {MIN_INTERVAL_S} to {MAX_INTERVAL_S} s", interval
        )
    return f"{interval:g}"


# -- JSON output ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """One report interval (seconds from the start of the test)."""

    start_s: float
    end_s: float
    bytes: int

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    @property
    def bps(self) -> float:
        return 8.0 * self.bytes / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Report:
    """What one iperf3 process reported.

    ``intervals`` are the ``sum`` of each report interval: bytes written by the
    sender, or read by the receiver. ``mss`` is the client's ``tcp_mss_default`` (the
    server reports 0). ``sock_bufsize`` is the ``-w`` in effect (None without one);
    ``sndbuf_actual``/``rcvbuf_actual`` are what the kernel set (twice ``-w`` on Linux,
    which keeps half for bookkeeping).
    """

    role: Role
    version: str | None
    intervals: tuple[Interval, ...]
    mss: int | None
    sock_bufsize: int | None
    sndbuf_actual: int | None
    rcvbuf_actual: int | None
    sent_bytes: int | None
    sent_bps: float | None
    received_bytes: int | None
    received_bps: float | None
    retransmits: int | None
    congestion: str | None


def parse(text: str, who: str) -> Report:
    """Read one ``iperf3 -J`` document; ``who`` names the process in errors."""
    data = _load(text, who)
    start = _dict(data.get("start"))
    end = _dict(data.get("end"))
    role: Role = "client" if "connecting_to" in start else "server"
    if not data.get("intervals") and not end:
        raise MeasurementError(f"{who}: iperf3 reported no test: {_excerpt(text)}")
    sent, received = _dict(end.get("sum_sent")), _dict(end.get("sum_received"))
    congestion = end.get("sender_tcp_congestion" if role == "client" else "receiver_tcp_congestion")
    return Report(
        role=role,
        version=_str(start.get("version")),
        intervals=_intervals(data.get("intervals"), who),
        mss=_positive(start.get("tcp_mss_default")),
        sock_bufsize=_positive(start.get("sock_bufsize")),
        sndbuf_actual=_positive(start.get("sndbuf_actual")),
        rcvbuf_actual=_positive(start.get("rcvbuf_actual")),
        sent_bytes=_int(sent.get("bytes")),
        sent_bps=_float(sent.get("bits_per_second")),
        received_bytes=_int(received.get("bytes")),
        received_bps=_float(received.get("bits_per_second")),
        retransmits=_int(sent.get("retransmits")) if role == "client" else None,
        congestion=_str(congestion),
    )


def _load(text: str, who: str) -> dict[str, Any]:
    if not text.strip():
        raise MeasurementError(f"{who}: iperf3 wrote nothing")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MeasurementError(f"{who}: unreadable iperf3 output: {_excerpt(text)}") from exc
    if not isinstance(data, dict):
        raise MeasurementError(f"{who}: iperf3 output is not a JSON object: {_excerpt(text)}")
    if data.get("error"):
        raise MeasurementError(f"{who}: iperf3 failed: {data['error']}")
    return data


def _intervals(raw: Any, who: str) -> tuple[Interval, ...]:
    if not isinstance(raw, list):
        raise MeasurementError(f"{who}: iperf3 output has no list of intervals")
    out = []
    for i, entry in enumerate(raw):
        s = _dict(_dict(entry).get("sum"))
        start, end, count = _float(s.get("start")), _float(s.get("end")), _int(s.get("bytes"))
        if start is None or end is None or count is None:
            raise MeasurementError(f"{who}: iperf3 interval {i} lacks start, end or bytes: {s}")
        out.append(Interval(start, end, count))
    return tuple(out)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _positive(value: Any) -> int | None:
    number = _int(value)
    return number if number is not None and number > 0 else None


def _float(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _excerpt(text: str, limit: int = 300) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")


# -- processes --------------------------------------------------------------------------------


class Process:
    """One iperf3 process in a node, its stdout and stderr in temporary files."""

    def __init__(self, node: Node, argv: list[str], label: str) -> None:
        self.node = node
        self.label = label
        # Both files live as long as the process object; close() closes them.
        self._out: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.proc: subprocess.Popen[Any] = tools.popen(
                node, argv, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err
            )
        except BaseException:
            self._close_files()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float) -> bool:
        """Whether the process ended within ``timeout`` seconds."""
        try:
            self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        return True

    def output(self) -> str:
        return _read(self._out)

    def errors(self) -> str:
        return _read(self._err)

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Terminate, then kill if it has not ended after ``grace`` seconds."""
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            if not self.wait(grace):
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        self.stop()
        self._close_files()

    def _close_files(self) -> None:
        self._out.close()
        self._err.close()


def _read(f: IO[bytes]) -> str:
    f.flush()
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def listening(proc: Process, port: int) -> bool:
    """Whether ``proc`` itself holds a TCP socket listening on ``port`` (a listener of
    another process on the same port does not count: that is a server we did not
    start, and our own then fails with "Address already in use")."""
    inodes = _listening_inodes(proc.pid, port)
    return bool(inodes) and bool(inodes & _socket_inodes(proc.pid))


def _listening_inodes(pid: int, port: int) -> set[str]:
    """Inodes of the sockets listening on ``port`` in the network namespace of ``pid``."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:
            continue
        for fields in rows:
            if len(fields) > 9 and fields[3] == _TCP_LISTEN:
                with contextlib.suppress(ValueError, IndexError):
                    if int(fields[1].rsplit(":", 1)[1], 16) == port:
                        found.add(fields[9])
    return found


def _socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process ``pid`` has open."""
    found: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                found.add(target[8:-1])
    return found


# -- flows -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """One iperf3 session: ``client`` sends to ``server``'s ``addr``:``port``."""

    label: str
    client: Node
    server: Node
    addr: str
    port: int
    window: int | None = None


@dataclass(frozen=True)
class FlowOutput:
    flow: Flow
    client: Report
    server: Report


def run(
    flows: Sequence[Flow], *, duration: int, interval: float, timeout: float
) -> list[FlowOutput]:
    """Run every flow at the same time; the parsed reports, in order.

    ``timeout``: seconds the clients have to finish after they start (a
    MeasurementError names the first flow that did not). Every process started here
    is stopped before this returns or raises.
    """
    started: list[Process] = []
    try:
        servers = [
            _start(started, f.server, server_argv(f.port, interval), f, "server") for f in flows
        ]
        for flow, server in zip(flows, servers, strict=True):
            _wait_listening(flow, server)
        clients = [
            _start(
                started,
                f.client,
                client_argv(f.addr, f.port, duration, interval, f.window),
                f,
                "client",
            )
            for f in flows
        ]
        deadline = time.monotonic() + timeout
        _wait_all(flows, clients, deadline, timeout, "client")
        sent = [_report(f, c) for f, c in zip(flows, clients, strict=True)]
        _wait_all(flows, servers, max(deadline, time.monotonic() + SERVER_GRACE_S), None, "server")
        received = [_report(f, s) for f, s in zip(flows, servers, strict=True)]
        return [FlowOutput(*out) for out in zip(flows, sent, received, strict=True)]
    finally:
        for proc in reversed(started):
            proc.close()


def _start(started: list[Process], node: Node, argv: list[str], flow: Flow, role: Role) -> Process:
    proc = Process(node, argv, f"iperf3 {role} of flow {flow.label} (in {node.name})")
    started.append(proc)
    return proc


def _wait_listening(flow: Flow, server: Process) -> None:
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while not listening(server, flow.port):
        if not server.running() or time.monotonic() > deadline:
            server.stop()
            detail = _failure_text(server)
            raise MeasurementError(
                f"{server.label}: not listening on port {flow.port} after "
                f"{LISTEN_TIMEOUT_S:.0f} s{detail}"
            )
        time.sleep(_POLL_S)


def _wait_all(
    flows: Sequence[Flow],
    procs: Sequence[Process],
    deadline: float,
    timeout: float | None,
    role: Role,
) -> None:
    for flow, proc in zip(flows, procs, strict=True):
        if proc.wait(deadline - time.monotonic()):
            continue
        if role == "client":
            raise MeasurementError(
                f"iperf3 flow {flow.label}: the client did not finish within {timeout:g} s"
            )
        raise MeasurementError(
            f"iperf3 flow {flow.label}: the server in {flow.server.name} did not finish "
            "after its client did"
        )


def _report(flow: Flow, proc: Process) -> Report:
    try:
        return parse(proc.output(), proc.label)
    except MeasurementError as exc:
        hint = ""
        if "socket buffer size" in str(exc) and flow.window is not None:
            hint = (
                f" (the window of {flow.window} bytes is more than the node allows: "
                "net.core.rmem_max / net.core.wmem_max cap socket buffers)"
            )
        stderr = proc.errors().strip()
        extra = f"; stderr: {_excerpt(stderr)}" if stderr else ""
        raise MeasurementError(f"{exc}{hint}{extra}") from exc


def _failure_text(proc: Process) -> str:
    text = (proc.output() + proc.errors()).strip()
    if not text:
        return ""
    try:
        parse(proc.output(), proc.label)
    except MeasurementError as exc:
        return f": {exc}"
    return f": {_excerpt(text)}"
