"""Failures on purpose: a timeline of events on a running network.

An :class:`Event` happens ``at`` seconds after the timeline's start: a link taken
down, brought up, flapped (down, then up ``duration`` later), given new parameters,
a node's links all taken down or up (the node fails or comes back), or a command run
in a node. :class:`Timeline` checks every target before anything happens (an unknown
link or node is a :class:`~fidelnet.errors.ValidationError` naming the valid ones),
then runs the events on a thread: it sleeps until 2 ms before each one and spins the
rest, so an event starts within tens of microseconds of its time on an idle core;
what actually happened, when (CLOCK_REALTIME ns, the clock pktgen stamps packets
with), and any error are recorded as :class:`Happened`.

A pktgen flow given ``events`` (:func:`fidelnet.measure.packets.udp`) starts the
timeline at the instant its first packet is due, so ``at`` is relative to the
traffic, and the outage each event caused is told from the packets
(:mod:`fidelnet.measure.outage`).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from fidelnet.errors import FidelnetError, ValidationError
from fidelnet.retry import try_until
from fidelnet.topology.spec import LinkParams

if TYPE_CHECKING:
    from fidelnet.links.drivers import StatePlan
    from fidelnet.links.link import Link
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

__all__ = ["ACTIONS", "Event", "Happened", "Timeline", "find_link"]

log = logging.getLogger(__name__)

Action = Literal[
    "down", "up", "flap", "set", "node_down", "node_up", "run", "signal", "restart"
]  # fmt: skip
ACTIONS: tuple[str, ...] = (
    "down", "up", "flap", "set", "node_down", "node_up", "run", "signal", "restart",
)  # fmt: skip
SIGNALS = ("TERM", "KILL", "INT", "HUP", "STOP", "CONT", "USR1", "USR2")
_LINK_ACTIONS = ("down", "up", "flap", "set")
_SPIN_S = 0.002
RT_PRIORITY = 5
"""SCHED_FIFO priority of the timeline's threads (below the link engine's 10), so
that an event is not late behind ordinary processes on a busy machine; with
SCHED_RESET_ON_FORK, the commands events run are ordinary processes."""


@dataclass(frozen=True)
class Condition:
    """What an event waits for: ``argv`` run in ``node`` exits with ``exit_code`` (None:
    any) and its output matches ``output``, tried every ``interval`` seconds for at
    most ``wait`` seconds (the deadline is required)."""

    node: str
    argv: tuple[str, ...]
    wait: float
    output: str | None = None
    exit_code: int | None = 0
    interval: float = 0.5
    timeout: float = 10.0


@dataclass(frozen=True)
class Event:
    """One event. Link actions name ``link`` (its two nodes, either order); node
    actions name ``node``; ``run`` runs ``argv`` in ``node`` (waiting for it at most
    ``timeout`` seconds); ``set`` applies ``params`` to both directions; ``flap``
    is down now and up ``duration`` seconds later; ``signal`` sends ``signal`` to the
    process whose pid is in ``pidfile``, which must live in ``node`` (fidelnet never
    signals a process by name, nor one outside the node); ``restart`` signals it
    the same way, waits at most ``timeout`` seconds for it to exit (then sends
    SIGKILL), and runs ``argv`` in ``node`` (which starts it again). With ``after``,
    ``at`` counts from the moment the condition held instead of from the start."""

    at: float
    action: Action
    link: tuple[str, str] | None = None
    node: str | None = None
    argv: tuple[str, ...] = ()
    params: LinkParams | None = None
    duration: float | None = None
    timeout: float = 10.0
    name: str = ""
    pidfile: str | None = None
    signal: str = "TERM"
    after: Condition | None = None

    @property
    def target(self) -> str:
        if self.link is not None:
            return f"{self.link[0]}-{self.link[1]}"
        return self.node or ""

    @property
    def key(self) -> str:
        return self.name or f"{self.action}-{self.target}@{self.at:g}s"


@dataclass
class Happened:
    """What an event did: when it was planned, started and done (CLOCK_REALTIME
    ns), when a link's path was actually cut or whole again (``effective_ns``: an
    engine link's own instant; 0 for other events), its error (None: it worked) and
    the ``output`` of a ``run``."""

    name: str
    action: str
    target: str
    planned_ns: int
    condition_ns: int = 0
    """When its ``after`` condition held (0: none)."""
    started_ns: int = 0
    done_ns: int = 0
    effective_ns: int = 0
    error: str | None = None
    output: str = ""
    exact: bool = False
    """The backend changed the path at the planned instant itself (an engine link
    told ahead); ``late_s`` is then only the carrier's lateness."""

    @property
    def late_s(self) -> float:
        """How late it started (the timeline's own error)."""
        return (self.started_ns - self.planned_ns) / 1e9

    @property
    def took_s(self) -> float:
        return (self.done_ns - self.started_ns) / 1e9

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "target": self.target,
            "planned_ns": self.planned_ns,
            "condition_ns": self.condition_ns,
            "started_ns": self.started_ns,
            "done_ns": self.done_ns,
            "effective_ns": self.effective_ns,
            "late_s": self.late_s,
            "took_s": self.took_s,
            "error": self.error,
            "exact": self.exact,
        }


def find_link(net: Network, a: str, b: str, where: str = "link") -> Link:
    """The link between nodes ``a`` and ``b`` (either order); a ValidationError
    naming the links there are when there is none, or more than one."""
    found = [lk for lk in net.links if {lk.spec.a, lk.spec.b} == {a, b} and a != b]
    if len(found) == 1:
        return found[0]
    choices = sorted(f"{lk.spec.a}-{lk.spec.b}" for lk in net.links)
    if not found:
        raise ValidationError(where, "no link between these nodes", f"{a}-{b}", choices)
    raise ValidationError(
        where, f"{len(found)} links join these nodes: name one by its interfaces", f"{a}-{b}"
    )


def _node(net: Network, name: str | None, where: str) -> Node:
    if name is None or name not in net.nodes:
        raise ValidationError(where, "unknown node", name, sorted(net.nodes))
    return net.nodes[name]


@dataclass
class _Step:
    at: float
    event: Event
    what: Literal["down", "up", "set", "node_down", "node_up", "run", "signal", "restart"]
    name: str
    link: Link | None = None
    node: Node | None = None
    done: list[Happened] = field(default_factory=list)


def _steps(net: Network, events: Sequence[Event]) -> list[_Step]:
    """Every event checked against the network and turned into steps (a flap into
    two), in order of time; raises before anything happens."""
    steps: list[_Step] = []
    for i, ev in enumerate(events):
        where = f"events[{i}]"
        if ev.action not in ACTIONS:
            raise ValidationError(f"{where}.action", "unknown action", ev.action, list(ACTIONS))
        if not ev.at >= 0:
            raise ValidationError(f"{where}.at", "must be a time >= 0 s", ev.at)
        if ev.action in _LINK_ACTIONS:
            if ev.link is None:
                raise ValidationError(f"{where}.link", f"{ev.action} needs a link", None)
            link = find_link(net, ev.link[0], ev.link[1], f"{where}.link")
            if ev.action == "flap":
                if ev.duration is None or not ev.duration > 0:
                    raise ValidationError(
                        f"{where}.for", "a flap needs a duration > 0", ev.duration
                    )
                steps.append(_Step(ev.at, ev, "down", f"{ev.key}:down", link=link))
                steps.append(_Step(ev.at + ev.duration, ev, "up", f"{ev.key}:up", link=link))
                continue
            if ev.action == "set" and (ev.params is None or ev.params.is_empty()):
                raise ValidationError(f"{where}.params", "set needs link parameters", ev.params)
            what: Any = ev.action
            steps.append(_Step(ev.at, ev, what, ev.key, link=link))
        else:
            node = _node(net, ev.node, f"{where}.node")
            if ev.action in ("run", "restart") and not ev.argv:
                raise ValidationError(
                    f"{where}.run", f"{ev.action} needs a command (argv list)", ev.argv
                )
            if ev.action in ("signal", "restart"):
                if not ev.pidfile or not ev.pidfile.startswith("/"):
                    raise ValidationError(
                        f"{where}.pidfile",
                        f"{ev.action} needs an absolute pid file path",
                        ev.pidfile,
                    )
                if ev.signal not in SIGNALS:
                    raise ValidationError(
                        f"{where}.signal", "unknown signal", ev.signal, list(SIGNALS)
                    )
            what = ev.action
            steps.append(_Step(ev.at, ev, what, ev.key, node=node))
        if ev.after is not None:
            _node(net, ev.after.node, f"{where}.after.node")
            if not ev.after.argv:
                raise ValidationError(f"{where}.after.run", "needs a command", ev.after.argv)
            if not ev.after.wait > 0:
                raise ValidationError(
                    f"{where}.after.wait", "a condition needs a deadline > 0", ev.after.wait
                )
    steps.sort(key=lambda s: s.at)  # stable: events at the same time keep their order
    return steps


class Timeline:
    """Events on ``net``, checked at once; :meth:`start` runs them on a thread."""

    def __init__(self, net: Network, events: Sequence[Event]) -> None:
        self.net = net
        self.events = list(events)
        self._steps = _steps(net, self.events)
        self.happened: list[Happened] = []
        self.t0_ns: int | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._open_plans: list[StatePlan] = []
        self._thread: threading.Thread | None = None

    def start(self, t0_ns: int | None = None) -> Timeline:
        """Run the events, ``at`` seconds after ``t0_ns`` (CLOCK_REALTIME; default:
        now)."""
        if self._thread is not None:
            raise FidelnetError("this timeline has already started")
        self.t0_ns = t0_ns if t0_ns is not None else time.time_ns()
        self._thread = threading.Thread(target=self._run, name="fidelnet-events", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> list[Happened]:
        """Wait for the last event (``timeout`` seconds at most: then the rest is
        cancelled); returns what happened."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                self.cancel()
        return self.happened

    def cancel(self) -> None:
        self._cancel.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            left, self._open_plans = self._open_plans, []
        for plan in left:  # an engine link told ahead is told to forget
            try:
                plan.cancel()
            except Exception as exc:
                log.error("cancelling a planned link change: %s", exc)

    @property
    def last_at(self) -> float:
        return max((s.at for s in self._steps), default=0.0)

    def _run(self) -> None:
        """The events without a condition, in order, on this thread; each event with
        one on a thread of its own that waits for it."""
        assert self.t0_ns is not None
        _realtime_priority()
        waiting = [
            threading.Thread(target=self._after, args=(ev,), daemon=True)
            for ev in {id(s.event): s.event for s in self._steps if s.event.after}.values()
        ]
        for t in waiting:
            t.start()
        self._play([s for s in self._steps if s.event.after is None], self.t0_ns, 0)
        for t in waiting:
            t.join()

    def _after(self, ev: Event) -> None:
        cond = ev.after
        assert cond is not None and self.t0_ns is not None
        _realtime_priority()
        steps = [s for s in self._steps if s.event is ev]
        got = try_until(
            self.net,
            cond.node,
            cond.argv,
            expect_exit=cond.exit_code,
            output=re.compile(cond.output) if cond.output else None,
            timeout_s=cond.timeout,
            wait_s=cond.wait,
            interval_s=cond.interval,
            cancel=self._cancel,
        )
        held = time.time_ns()
        if not got.ok:
            for s in steps:
                rec = Happened(s.name, s.what, ev.target, 0, error=(
                    f"its condition ({' '.join(cond.argv)} in {cond.node}) did not hold "
                    f"within {cond.wait:g} s ({got.tries} tries)"
                ))  # fmt: skip
                with self._lock:
                    self.happened.append(rec)
            return
        self._play(steps, held, held)

    def _until(self, when_ns: int) -> bool:
        """Wait until ``when_ns``; False when cancelled. At SCHED_FIFO the kernel's
        timer wakes the thread on time ahead of ordinary processes: it sleeps to
        the instant. Otherwise it sleeps until 2 ms before and spins the rest (a
        spin at real-time priority would keep a demoted link engine off its core:
        measured, packets waited 2 ms in its TAP)."""
        while (left := when_ns - time.time_ns()) > 0:
            spin = 0 if _realtime_thread() else round(_SPIN_S * 1e9)
            if left <= spin:
                break
            if self._cancel.wait((left - spin) / 1e9):
                return False
        while time.time_ns() < when_ns:
            if self._cancel.is_set():
                return False
        return True

    def _play(self, steps: list[_Step], base_ns: int, condition_ns: int) -> None:
        """Run ``steps`` at ``base_ns`` + their times. Links going down or up are
        planned first, all at once: an engine link is told now and cuts or restores
        the path at the instant itself (docs/events.md)."""
        plans: dict[int, StatePlan] = {}
        failed: dict[int, str] = {}
        for i, step in enumerate(steps):
            if step.link is not None and step.what in ("down", "up"):
                try:
                    plans[i] = step.link.plan_state(step.what == "up", self._planned(step, base_ns))
                except Exception as exc:  # recorded when its time comes
                    failed[i] = str(exc) or type(exc).__name__
        with self._lock:
            self._open_plans.extend(plans.values())
        for i, step in enumerate(steps):
            planned = self._planned(step, base_ns)
            plan = plans.get(i)
            if plan is not None and plan.ahead is not None:
                if not self._until(planned - round(plan.lead_s * 1e9)):
                    return
                try:
                    plan.ahead()
                except Exception as exc:
                    log.error("event %s: %s", step.name, exc)
            if not self._until(planned):
                return
            rec = Happened(step.name, step.what, step.event.target, planned, condition_ns)
            rec.started_ns = time.time_ns()
            try:
                if i in failed:
                    raise FidelnetError(failed[i])
                if plan is not None:
                    with self._lock:
                        self._open_plans.remove(plan)
                    rec.effective_ns, rec.exact = plan.now(), plan.exact
                else:
                    rec.output, rec.effective_ns = self._do(step)
            except Exception as exc:  # recorded: the run goes on and says so
                rec.error = str(exc) or type(exc).__name__
                log.error("event %s: %s", step.name, rec.error)
            rec.done_ns = time.time_ns()
            with self._lock:
                self.happened.append(rec)

    @staticmethod
    def _planned(step: _Step, base_ns: int) -> int:
        return base_ns + round(step.at * 1e9)

    def _do(self, step: _Step) -> tuple[str, int]:
        """Do one step; returns a command's output and, for a link going down or up,
        when its path changed."""
        ev = step.event
        if step.link is not None:
            assert ev.params is not None  # down and up are planned (_play)
            new = {d: step.link.params(d).merged(ev.params) for d in ("ab", "ba")}
            step.link.configure(new["ab"], new["ba"])
            return "", 0
        assert step.node is not None
        if step.what in ("node_down", "node_up"):
            for intf in step.node.intf_list():
                intf.set_up(step.what == "node_up")
            return "", 0
        if step.what == "signal":
            assert ev.pidfile is not None
            return _signal(step.node, ev.pidfile, ev.signal), 0
        said = ""
        if step.what == "restart":
            assert ev.pidfile is not None
            said = _stop(step.node, ev.pidfile, ev.signal, ev.timeout) + "; "
        out, err, rc = step.node.pexec(list(ev.argv), timeout=ev.timeout)
        if rc != 0:
            raise FidelnetError(
                f"{said}{' '.join(ev.argv)} exited {rc}: {(err or out).strip()[-300:]}"
            )
        return said + out, 0


_rt = threading.local()


def _realtime_priority() -> None:
    """This thread at SCHED_FIFO :data:`RT_PRIORITY`, its children reset to the
    normal policy; left as it is where the kernel refuses (not root)."""
    policy = os.SCHED_FIFO | getattr(os, "SCHED_RESET_ON_FORK", 0)
    try:
        os.sched_setscheduler(0, policy, os.sched_param(RT_PRIORITY))
        _rt.on = True
    except (OSError, AttributeError) as exc:
        log.debug("events stay at normal priority: %s", exc)


def _realtime_thread() -> bool:
    return bool(getattr(_rt, "on", False))


def _pid_in(node: Node, pidfile: str) -> int:
    """The pid written in ``pidfile``, once it is known to live in ``node``'s network
    namespace (never a process elsewhere)."""
    try:
        with open(pidfile, encoding="ascii") as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise FidelnetError(f"pid file {pidfile}: {exc}") from exc
    if node.netns is None:
        raise FidelnetError(f"{node.name} has no namespace of its own: nothing to signal there")
    try:
        theirs = os.stat(f"/proc/{pid}/ns/net").st_ino
        ours = os.stat(node.netns).st_ino
    except OSError as exc:
        raise FidelnetError(f"process {pid} (from {pidfile}): {exc}") from exc
    if theirs != ours:
        raise FidelnetError(f"process {pid} (from {pidfile}) does not live in {node.name}")
    return pid


def _signal(node: Node, pidfile: str, name: str) -> str:
    """Send SIG``name`` to the pid written in ``pidfile``, a process of ``node``."""
    pid = _pid_in(node, pidfile)
    os.kill(pid, getattr(signal, f"SIG{name}"))
    return f"SIG{name} sent to {pid}"


def _gone(pid: int) -> bool:
    """The process has exited (a zombie counts: it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _stop(node: Node, pidfile: str, name: str, timeout: float) -> str:
    """Send SIG``name`` to ``node``'s process in ``pidfile`` and wait at most
    ``timeout`` seconds for it to exit, then SIGKILL it; says what happened."""
    pid = _pid_in(node, pidfile)
    t0 = time.monotonic()
    os.kill(pid, getattr(signal, f"SIG{name}"))
    while not _gone(pid):
        if time.monotonic() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            while not _gone(pid) and time.monotonic() - t0 < timeout + 1.0:
                time.sleep(0.005)
            return f"SIG{name} sent to {pid}, still running after {timeout:g} s: SIGKILL sent"
        time.sleep(0.005)
    return f"SIG{name} sent to {pid}, exited after {time.monotonic() - t0:.3f} s"


def shifted(events: Sequence[Event], by: float) -> list[Event]:
    """The same events ``by`` seconds later."""
    return [replace(e, at=e.at + by) for e in events]
