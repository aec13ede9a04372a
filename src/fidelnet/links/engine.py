"""The link engine: one ``fidelnet-linkd`` daemon per run, and its control client.

The daemon (Rust, ``crates/linkd``) owns every engine link's endpoints (TAP
devices it creates inside the node namespaces) and moves packets between them
through the link model of ``crates/link-core``. This module starts it in the run's
fabric namespace, waits for it to answer, talks to it over its unix control socket
(one JSON object per line each way, see ``docs/linkd.md``), notices when it dies
and says so, and shuts it down.

Ownership: the daemon's pid (with its start time), its socket and its log are in
the run's state file before they exist, so ``fidelnet clean`` removes them after a
crash. The daemon also asks the kernel to end it when the thread that started it
exits (``PR_SET_PDEATHSIG`` follows the forking thread, not the process): start a
network from a thread that outlives it. The daemon is stopped before the run's
namespaces are deleted, since a TAP descriptor keeps its namespace alive.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fidelnet.errors import FidelnetError, KernelError
from fidelnet.kernel import launcher, procfs
from fidelnet.kernel.state import STATE_DIR, process_start_time

__all__ = ["LinkEngine", "LinkEngineError", "engine_args_from_env", "find_linkd"]

log = logging.getLogger("fidelnet")

LINKD = "fidelnet-linkd"
_READY_TIMEOUT = 10.0
_REPLY_TIMEOUT = 30.0
_STOP_TIMEOUT = 5.0
_STOP_PER_LINK = 0.05  # the kernel takes about 15 ms to destroy each TAP device


def default_realtime_priority() -> tuple[int, str]:
    """The real-time priority to ask for, and why: the one ``fidelnet calibrate``
    chose for this machine when its profile has one, else :data:`REALTIME_PRIORITY`."""
    from fidelnet.fidelity import profile  # the profile model only: no cycle

    found, _why = profile.load()
    if found is not None and found.engine_realtime_priority is not None:
        return found.engine_realtime_priority, f"calibrated, profile {found.key}"
    return REALTIME_PRIORITY, "default"


def default_spin() -> tuple[int, str]:
    """The longest spin before a departure to ask for, µs, and why: what ``fidelnet
    calibrate`` chose for this machine when its profile says, else :data:`SPIN_US`."""
    from fidelnet.fidelity import profile

    found, _why = profile.load()
    if found is not None and found.engine_spin_us is not None:
        return found.engine_spin_us, f"calibrated, profile {found.key}"
    return SPIN_US, "default"


SPIN_US = 80
"""The longest spin linkd does before a departure, µs (``--spin-us``): it arms its
timer ahead of each deadline by the timer's measured wake latency (capped here) and
polls the rest of the way, so a departure leaves on time instead of a timer wake-up
late (docs/linkd.md, "Release"). 0 sleeps on the timer to the deadline."""

SPIN_BUDGET_PCT = 30
"""At most this share of every 10 ms may go to spinning (``--spin-budget``); past it
linkd sleeps to the deadline, so a busy engine never holds its core, which it shares
with the forwarding softirqs."""

REALTIME_PRIORITY = 10
"""SCHED_FIFO priority asked for linkd's event loop by default. Real-time, so a
departure's timer wakes it ahead of ordinary processes (on this kind of machine it cut
the engine's worst lateness on a 10 ms link from 3.8 ms to 0.8 ms, docs/linkd.md);
low, so threaded interrupt handlers (priority 50) still come first. 0 turns it off;
``FIDELNET_LINKD_ARGS="--realtime-priority N"`` chooses another."""


class LinkEngineError(FidelnetError):
    """The link engine daemon failed, refused a request, or died."""


def engine_args_from_env() -> list[str]:
    """linkd options from ``FIDELNET_LINKD_ARGS`` (e.g. ``--spin-us 50``), split into
    an argument list (never run through a shell)."""
    return shlex.split(os.environ.get("FIDELNET_LINKD_ARGS", ""))


def find_linkd() -> str:
    """Locate ``fidelnet-linkd``: $FIDELNET_LINKD, next to the Python executable, the
    source tree's cargo build, or PATH."""
    root = Path(__file__).resolve().parents[3]
    candidates = [
        os.environ.get("FIDELNET_LINKD", ""),
        str(Path(sys.executable).parent / LINKD),
        str(root / "target" / "release" / LINKD),
        str(root / "target" / "debug" / LINKD),
        shutil.which(LINKD) or "",
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise LinkEngineError(
        f"{LINKD}: the link engine daemon was not found (run `make install`, or set "
        "FIDELNET_LINKD to the binary built by `cargo build --release -p linkd`)"
    )


class LinkEngine:
    """One run's link engine daemon."""

    def __init__(
        self,
        run_id: str,
        netns: str | None,
        record: Callable[..., None],
        *,
        cgroups: list[str] | None = None,
        extra_args: list[str] | None = None,
        state_dir: str = STATE_DIR,
        realtime_priority: int | None = None,
        spin_us: int | None = None,
        threads: int = 1,
    ) -> None:
        self.run_id = run_id
        self.netns = netns
        self._record = record
        self._cgroups = cgroups or []
        self._extra = extra_args or []
        if realtime_priority is None:
            realtime_priority, why = default_realtime_priority()
        else:
            why = "asked"
        self._realtime = realtime_priority
        if spin_us is None:
            spin_us, spin_why = default_spin()
        else:
            spin_why = "asked"
        self._spin = spin_us
        self.release = _describe_release(spin_us, spin_why)
        """How linkd releases departures: its spin before each deadline, and why;
        recorded in every monitor record."""
        self.scheduling_reason = why
        """Where the priority asked came from: ``default``, ``calibrated, profile
        <key>``, ``asked``, or the caller's own ``--realtime-priority``."""
        self.threads = threads
        """Engine loops asked for (``--threads``); :attr:`release` says how many run."""
        self.offloads = ""
        """Segmentation offloads at the engine's endpoints, as linkd reported them:
        ``"tso+uso"``, ``"tso"`` (no UDP segmentation before Linux 6.2) or ``"off"``
        (``--offload off``)."""
        self.scheduling = ""
        """The scheduling linkd actually runs with, read from the kernel after it
        started: ``"SCHED_FIFO 10"``, or ``"SCHED_OTHER (asked SCHED_FIFO 10:
        refused)"``; recorded in every monitor record."""
        self.socket_path = os.path.join(state_dir, f"{run_id}.linkd.sock")
        self.log_path = os.path.join(state_dir, f"{run_id}.linkd.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.failure: str | None = None
        self._sock: socket.socket | None = None
        self._buf = b""
        self._lock = threading.Lock()
        self._stopping = False
        self._next_id = 0
        self._links = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Start the daemon and wait until it answers ``hello``."""
        binary = find_linkd()
        for path in (self.socket_path, self.log_path):
            self._record("file", path=path)
        argv = [binary, "--control", self.socket_path, "--parent-pid", str(os.getpid())]
        argv += self._extra
        asked = self._realtime
        if any(a.startswith("--realtime-priority") for a in self._extra):
            asked = -1  # the caller's own choice, already in argv
            self.scheduling_reason = "engine arguments"
        elif asked > 0:
            argv += ["--realtime-priority", str(asked)]
        if any(a.startswith("--spin") for a in self._extra):
            self.release = "as in the engine arguments: " + " ".join(self._extra)
        else:
            argv += ["--spin-us", str(self._spin), "--spin-budget", str(SPIN_BUDGET_PCT)]
        if not any(a.startswith("--threads") for a in self._extra) and self.threads > 1:
            argv += ["--threads", str(self.threads)]
        if self.netns is not None or self._cgroups:
            argv = launcher.exec_argv(argv, netns=self.netns, cgroups=self._cgroups)
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=logf,
                start_new_session=True,
            )
        start = process_start_time(self.proc.pid)
        if start is not None:
            self._record("process", pid=self.proc.pid, start=start, what=LINKD)
        threading.Thread(target=self._watch, name="linkd-watch", daemon=True).start()
        self._connect()
        hello = self.request("hello")
        self.offloads = str(hello.get("offloads", "off"))
        loops = int(hello.get("threads", 1))
        self.release += f"; {loops} engine loop{'s' if loops != 1 else ''}"
        self.scheduling = self._scheduling(asked)
        log.debug("linkd pid %s ready: %s; %s", self.proc.pid, hello, self.scheduling)

    def _scheduling(self, asked: int) -> str:
        got = procfs.sched_policy(self.proc.pid) if self.proc is not None else None
        if got is None:
            return "unknown"
        policy, priority = got
        now = f"{policy} {priority}" if priority else policy
        if asked > 0 and (policy != "SCHED_FIFO" or priority != asked):
            log.warning(
                "%s: real-time priority %d refused (see %s); the engine runs at %s and "
                "its lateness will be larger under load",
                LINKD, asked, self.log_path, now,
            )  # fmt: skip
            return f"{now} (asked SCHED_FIFO {asked}: refused)"
        return now

    def _connect(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT
        while True:
            self._raise_if_dead("while starting")
            if os.path.exists(self.socket_path):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(self.socket_path)
                except (ConnectionRefusedError, FileNotFoundError):
                    sock.close()
                else:
                    sock.settimeout(_REPLY_TIMEOUT)
                    self._sock = sock
                    return
            if time.monotonic() > deadline:
                raise LinkEngineError(
                    f"{LINKD} (pid {self.pid}) did not open {self.socket_path} within "
                    f"{_READY_TIMEOUT:.0f} s{self._log_tail()}"
                )
            time.sleep(0.005)

    def _watch(self) -> None:
        proc = self.proc
        assert proc is not None
        code = proc.wait()
        if self._stopping:
            return
        self.failure = (
            f"{LINKD} (pid {proc.pid}) died unexpectedly ({_describe_exit(code)}); engine "
            f"links carry no traffic since then{self._log_tail()}"
        )
        log.error("run %s: %s", self.run_id, self.failure)

    def _raise_if_dead(self, doing: str) -> None:
        if self.failure is not None:
            raise LinkEngineError(self.failure)
        if self.proc is not None and self.proc.poll() is not None:
            raise LinkEngineError(
                f"{LINKD} (pid {self.proc.pid}) exited {doing} "
                f"({_describe_exit(self.proc.returncode)}){self._log_tail()}"
            )

    def _log_tail(self, lines: int = 5) -> str:
        try:
            with open(self.log_path, "rb") as f:
                tail = f.read()[-2000:].decode(errors="replace").strip().splitlines()[-lines:]
        except OSError:
            return ""
        return "; its log ends: " + " | ".join(tail) if tail else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> str | None:
        """Shut the daemon down (politely, then by pid). Returns the failure, if it had
        died on its own before."""
        self._stopping = True
        failure = self.failure
        if self.proc is None:
            return failure
        if self.proc.poll() is None:
            with contextlib.suppress(FidelnetError, OSError):
                self._send({"op": "shutdown"})
            try:
                self.proc.wait(_STOP_TIMEOUT + _STOP_PER_LINK * self._links)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %s) ignored shutdown; killing it", LINKD, self.proc.pid)
                self.proc.kill()
                self.proc.wait()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for path in (self.socket_path, self.log_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return failure

    # -- requests -----------------------------------------------------------------------

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return the reply; raise LinkEngineError on refusal."""
        reply = self._send({"op": op, **fields})
        if not reply.get("ok"):
            raise LinkEngineError(f"{LINKD} refused {op}: {reply.get('error', reply)}")
        return reply

    def _send(self, msg: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._raise_if_dead(f"before {msg['op']}")
            if self._sock is None:
                raise LinkEngineError(f"{LINKD} is not connected")
            self._next_id += 1
            msg["id"] = self._next_id
            try:
                self._sock.sendall(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
                line = self._read_line()
            except OSError as exc:
                time.sleep(0.05)  # let the watcher see an exit first
                self._raise_if_dead(f"during {msg['op']}")
                raise LinkEngineError(f"{LINKD}: control socket: {exc}") from exc
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError as exc:
            raise KernelError(f"{LINKD}: unreadable reply {line[:200]!r}") from exc
        return reply

    def _read_line(self) -> bytes:
        assert self._sock is not None
        while b"\n" not in self._buf:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the daemon closed the control socket")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def add_link(
        self,
        name: str,
        a: tuple[str, str],
        b: tuple[str, str],
        ab: dict[str, Any],
        ba: dict[str, Any],
        *,
        kind: str = "tap",
    ) -> None:
        """Create the link's two endpoints (``(netns path, ifname)`` each): TAP
        devices of that name, or AF_XDP sockets on those existing veth ends."""
        self._links += 1
        self.request(
            "add_link",
            link=name,
            a={"netns": a[0], "ifname": a[1], "kind": kind},
            b={"netns": b[0], "ifname": b[1], "kind": kind},
            ab=ab,
            ba=ba,
        )

    def add_cut_link(
        self,
        name: str,
        a: tuple[str, str],
        b: dict[str, Any],
        ab: dict[str, Any],
        ba: dict[str, Any],
    ) -> None:
        """Create one half of a link cut between machines: a TAP device ``a``
        (``(netns path, ifname)``) and the ``udp`` endpoint ``b`` that talks to the
        other half (:mod:`fidelnet.links.cut`)."""
        self._links += 1
        self.request(
            "add_link",
            link=name,
            a={"netns": a[0], "ifname": a[1], "kind": "tap"},
            b=b,
            ab=ab,
            ba=ba,
        )

    def set_link(self, name: str, ab: dict[str, Any] | None, ba: dict[str, Any] | None) -> None:
        fields: dict[str, Any] = {"link": name}
        if ab is not None:
            fields["ab"] = ab
        if ba is not None:
            fields["ba"] = ba
        self.request("set_link", **fields)

    def divert(self, name: str, a: str, b: str) -> None:
        """Lead veth ends ``a`` and ``b`` (beside the link's TAPs, in the same
        namespaces) through link ``name``: tcx redirects held by the daemon."""
        self.request("divert", link=name, a=a, b=b)

    def set_clock(self, name: str, offset_ns: int, uncertainty_ns: int | None = None) -> None:
        """A cut link's clocks compared again (:mod:`fidelnet.cluster.clocks`): its
        udp half counts each later frame's delay with this offset (the peer's clock
        minus this machine's, ns)."""
        fields: dict[str, object] = {"link": name, "offset_ns": int(offset_ns)}
        if uncertainty_ns is not None:
            fields["uncertainty_ns"] = int(uncertainty_ns)
        self.request("set_clock", **fields)

    def set_state(self, name: str, up: bool) -> int | None:
        """Bring a link down or up; returns the engine's instant of it (CLOCK_MONOTONIC
        ns), when it says."""
        applied = self.request("set_state", link=name, up=up).get("applied_ns")
        return int(applied) if isinstance(applied, int) else None

    def plan_state(self, name: str, up: bool, at_mono_ns: int) -> tuple[int, bool]:
        """Bring a link down or up at ``at_mono_ns`` (CLOCK_MONOTONIC), exactly: the
        engine applies it at that instant of its packets' clock however late its
        loop wakes. Returns the instant it takes effect and whether it was planned
        (False: the instant had passed when the engine got the request, and it took
        effect then)."""
        reply = self.request("set_state", link=name, up=up, at_ns=max(0, at_mono_ns))
        applied = reply.get("applied_ns")
        if not isinstance(applied, int):
            raise LinkEngineError(f"linkd did not say when link {name} changes: {reply}")
        return applied, reply.get("planned") is True

    def remove_link(self, name: str) -> None:
        self.request("remove_link", link=name)
        self._links -= 1

    def stats(self, name: str | None = None) -> dict[str, Any]:
        """Counters per link and direction (see ``docs/linkd.md``)."""
        reply = self.request("stats", **({"link": name} if name else {}))
        links: dict[str, Any] = reply.get("links", {})
        return links

    def loop_stats(self) -> dict[str, Any]:
        """The event loop's own figures: turns, busy and spinning time, the timer's
        wake latency and the spin lead in force (``"engine"`` in docs/linkd.md)."""
        engine: dict[str, Any] = self.request("stats").get("engine", {})
        return engine

    def realtime(self) -> dict[str, Any]:
        """The real-time guard's figures: the policy in force now, how often the loop
        left SCHED_FIFO because it was saturated and came back, and for how long
        (``"engine"."realtime"`` in docs/linkd.md)."""
        rt: dict[str, Any] = self.loop_stats().get("realtime", {})
        return rt


def _describe_release(spin_us: int, why: str) -> str:
    if spin_us <= 0:
        return f"timer only, no spin ({why})"
    return (
        f"spin up to {spin_us} µs before each departure, at most {SPIN_BUDGET_PCT} % of "
        f"a core ({why})"
    )


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {-code}"
    return f"exit status {code}"
