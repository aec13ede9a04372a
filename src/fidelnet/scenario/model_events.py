"""The ``events`` of a ``pktgen`` traffic: failures on purpose, at set times.

An event happens ``at`` a time after the traffic's first packet is due:

- a link (its two nodes): ``down``, ``up``, ``flap`` (down, then up ``duration``
  later), ``set`` (new ``params`` for both directions);
- a node: ``node_down`` / ``node_up`` (every link of the node), ``run`` (a command),
  ``signal`` (a signal to the process whose pid is in ``pidfile``, in that node),
  ``restart`` (that signal, the process's exit awaited, then ``run`` starts it again);

``at`` counts from the condition ``after`` when there is one (a command retried
until it succeeds, with a deadline, or a ``command`` check named by ``check``): "2 s
after r1's OSPF neighbour is Full";

and the outage each one causes is told from the traffic's packets
(:mod:`fidelnet.measure.outage`), for ``outage`` checks. What a single event cannot
check is checked by :func:`event_problems` (order and overlap on a link, times
within the traffic) and by the scenario (the link or node exists).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from fidelnet.events import Condition, Event
from fidelnet.scenario.errors import Path, Problem
from fidelnet.scenario.fields import (
    Argv,
    Duration,
    Name,
    PositiveDuration,
    Regex,
    _fail_at,
    _Model,
)
from fidelnet.scenario.model_checks import CommandCheck
from fidelnet.scenario.model_topology import LinkParamsModel
from fidelnet.topology.units import parse_duration

__all__ = ["LINK_ACTIONS", "NODE_ACTIONS", "ConditionModel", "EventModel", "event_problems"]

LINK_ACTIONS = ("down", "up", "flap", "set")
NODE_ACTIONS = ("node_down", "node_up", "run", "signal", "restart")
_FROM_CHECK = ("node", "run", "output", "exit_code", "timeout")


class ConditionModel(_Model):
    """What an event waits for: a command in a node that succeeds, written here or
    taken from a ``command`` check (``check``)."""

    check: Name | None = None
    """A ``command`` check, by name: its node, command, output and exit code are the
    condition, and its ``wait`` and ``interval`` unless given here."""
    node: str | None = None
    """Where to run it."""
    run: Argv | None = None
    """The command, as a list."""
    output: Regex | None = None
    """A regular expression its standard output must contain."""
    exit_code: Annotated[int, Field(ge=0, le=255)] | None = 0
    """The exit code that counts (default 0; null: any)."""
    wait: PositiveDuration | None = None
    """The deadline (required, here or in the check): past it, the event does not
    happen and says why."""
    interval: PositiveDuration = "500ms"
    """Time between tries."""
    timeout: PositiveDuration = "10s"
    """How long one try may take."""

    @model_validator(mode="after")
    def _check(self) -> ConditionModel:
        if self.check is not None:
            given = [f for f in _FROM_CHECK if f in self.model_fields_set]
            if given:
                raise _fail_at(
                    (given[0],),
                    f"comes from check {self.check!r}: give one or the other",
                    getattr(self, given[0]),
                )
            return self
        if self.node is None:
            raise _fail_at(("node",), "a condition needs a node (or a check)", None)
        if self.run is None:
            raise _fail_at(("run",), "a condition needs a command (or a check)", None)
        if self.wait is None:
            raise _fail_at(("wait",), "a condition needs a deadline", None)
        return self

    def take_from(self, check: CommandCheck) -> None:
        """Fill what comes from ``check`` (a validated scenario calls this)."""
        self.node, self.run, self.output = check.node, list(check.run), check.output
        self.exit_code, self.timeout = check.exit_code, check.timeout
        if "wait" not in self.model_fields_set:
            self.wait = check.wait
        if "interval" not in self.model_fields_set:
            self.interval = check.interval

    def to_condition(self) -> Condition:
        assert self.node is not None and self.run is not None and self.wait is not None
        return Condition(
            node=self.node,
            argv=tuple(self.run),
            wait=parse_duration("wait", self.wait),
            output=self.output,
            exit_code=self.exit_code,
            interval=parse_duration("interval", self.interval),
            timeout=parse_duration("timeout", self.timeout),
        )


class EventModel(_Model):
    """One event during a traffic."""

    at: Duration
    """When, after the traffic's first packet is due: ``1s``, ``500ms``."""
    action: Literal[
        "down", "up", "flap", "set", "node_down", "node_up", "run", "signal", "restart"
    ]  # fmt: skip
    """``down``, ``up``, ``flap``, ``set`` (a link); ``node_down``, ``node_up``,
    ``run``, ``signal``, ``restart`` (a node)."""
    name: Name | None = None
    """Unique among the traffic's events; ``outage`` checks refer to it (default:
    ``<action>-<target>@<at>``)."""
    link: Annotated[list[str], Field(min_length=2, max_length=2)] | None = None
    """The link, by its two nodes: ``[r1, r2]`` (link actions)."""
    node: str | None = None
    """The node (node actions)."""
    duration: PositiveDuration | None = None
    """How long a ``flap`` keeps the link down."""
    params: LinkParamsModel | None = None
    """The new parameters of a ``set`` (both directions; unnamed ones are kept)."""
    run: Argv | None = None
    """The command of a ``run``, or the one that starts a ``restart``ed process
    again, as a list."""
    timeout: PositiveDuration = "10s"
    """How long a ``run`` may take; how long a ``restart`` waits for the process to
    exit (then SIGKILL), and for its command."""
    pidfile: str | None = None
    """The pid file of the process a ``signal`` or ``restart`` goes to (absolute;
    the process must live in ``node``)."""
    signal: Literal["TERM", "KILL", "INT", "HUP", "STOP", "CONT", "USR1", "USR2"] = "TERM"
    """Which signal (default ``TERM``); ``STOP`` then ``CONT`` freezes and thaws."""
    after: ConditionModel | None = None
    """Count ``at`` from when this condition held instead of from the traffic's start."""

    @property
    def at_s(self) -> float:
        return parse_duration("at", self.at)

    @property
    def duration_s(self) -> float | None:
        return None if self.duration is None else parse_duration("duration", self.duration)

    @property
    def end_s(self) -> float:
        """When it is over (a flap's up)."""
        return self.at_s + (self.duration_s or 0.0)

    @property
    def key(self) -> str:
        link = (self.link[0], self.link[1]) if self.link is not None else None
        return Event(at=self.at_s, action=self.action, link=link, node=self.node,
                     name=self.name or "").key  # fmt: skip

    @model_validator(mode="after")
    def _check(self) -> EventModel:
        link_action = self.action in LINK_ACTIONS
        if link_action and self.link is None:
            raise _fail_at(("link",), f"a {self.action} event needs the link: [a, b]", None)
        if not link_action and self.node is None:
            raise _fail_at(("node",), f"a {self.action} event needs the node", None)
        if link_action and self.node is not None:
            raise _fail_at(("node",), f"a {self.action} event names a link, not a node", self.node)
        if not link_action and self.link is not None:
            raise _fail_at(("link",), f"a {self.action} event names a node, not a link", self.link)
        if self.link is not None and self.link[0] == self.link[1]:
            raise _fail_at(("link",), "a link joins two different nodes", self.link)
        if (self.action == "flap") != (self.duration is not None):
            raise _fail_at(("duration",), "a flap, and only a flap, has a duration", self.duration)
        if (self.action == "set") != (self.params is not None):
            raise _fail_at(("params",), "a set, and only a set, has params", None)
        if (self.action in ("run", "restart")) != (self.run is not None):
            raise _fail_at(("run",), "a run or restart, and only those, has a command", self.run)
        if (self.action in ("signal", "restart")) != (self.pidfile is not None):
            raise _fail_at(("pidfile",), "a signal or restart, and only those, has a pidfile", None)
        if self.pidfile is not None and not self.pidfile.startswith("/"):
            raise _fail_at(("pidfile",), "must be an absolute path", self.pidfile)
        return self

    def to_event(self) -> Event:
        """The :class:`fidelnet.events.Event` it describes."""
        return Event(
            at=self.at_s,
            action=self.action,
            link=(self.link[0], self.link[1]) if self.link is not None else None,
            node=self.node,
            argv=tuple(self.run or ()),
            params=self.params.to_params() if self.params is not None else None,
            duration=self.duration_s,
            timeout=parse_duration("timeout", self.timeout),
            name=self.name or "",
            pidfile=self.pidfile,
            signal=self.signal,
            after=self.after.to_condition() if self.after is not None else None,
        )


def event_problems(path: Path, events: list[EventModel], duration_s: float) -> list[Problem]:
    """Events after the traffic ends, duplicate names, and events on one link that
    contradict each other (down while down, up while up, anything while it flaps)."""
    found: list[Problem] = []
    names: dict[str, int] = {}
    for i, ev in enumerate(events):
        where = (*path, i)
        if ev.end_s > duration_s:
            found.append(
                Problem(
                    f"ends at {ev.end_s:g} s, after the traffic's {duration_s:g} s",
                    (*where, "duration" if ev.duration is not None else "at"),
                    value=ev.duration if ev.duration is not None else ev.at,
                )
            )
        key = ev.key
        if key in names:
            found.append(
                Problem(
                    f"duplicate event name: events[{names[key]}] is already {key!r}",
                    (*where, "name"),
                    value=key,
                )
            )
        names.setdefault(key, i)
    by_link: dict[frozenset[str], list[tuple[int, EventModel]]] = {}
    for i, ev in enumerate(events):
        # Events after a condition happen when it holds: their order with the
        # others on the link is not known before the run.
        if ev.link is not None and ev.action != "set" and ev.after is None:
            by_link.setdefault(frozenset(ev.link), []).append((i, ev))
    for items in by_link.values():
        up = True
        busy_until = -1.0
        last = -1
        for i, ev in sorted(items, key=lambda x: x[1].at_s):
            where = (*path, i, "action")
            if ev.at_s < busy_until:
                found.append(
                    Problem(
                        f"the link is flapping until {busy_until:g} s (events[{last}])",
                        where,
                        value=ev.action,
                    )
                )
                continue
            if ev.action == "flap" and not up:
                found.append(Problem("a flap of a link that is down", where, value=ev.action))
            elif ev.action == "down" and not up:
                found.append(
                    Problem(f"the link is already down (events[{last}])", where, value=ev.action)
                )
            elif ev.action == "up" and up:
                found.append(Problem("the link is already up", where, value=ev.action))
            if ev.action == "flap":
                busy_until = ev.end_s
            else:
                up = ev.action == "up"
            last = i
    return found
