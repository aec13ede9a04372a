"""A running link: its two interfaces, its backend, and changes at runtime.

``link.set(delay="5ms")`` changes both directions (``direction="ab"``, ``"ba"`` or a
node's name for one: traffic leaving that node); the new values are merged into
the current ones, checked whole, and applied without emptying the queues. A change
to a bad value raises and leaves the link as it was. A change the link's kernel
backend cannot do moves a link whose backend was chosen automatically onto the
engine, keeping its interfaces (:mod:`fidelnet.links.divert`). ``link.schedule([(0.5,
{"bw": "5Mbit"}), (2.0, "down"), (2.1, "up")])`` follows a timeline from now, on a
thread; every step is checked before the first one runs. ``down()``/``up()`` take
both ends down and up (the engine also drops what it holds, counted as ``down``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fidelnet.errors import ValidationError
from fidelnet.links.drivers import LinkDriver, StatePlan
from fidelnet.links.params import parse_params
from fidelnet.topology.spec import LinkParams, LinkSpec
from fidelnet.topology.validate import param_problems

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface

__all__ = ["Link", "LinkSchedule"]

log = logging.getLogger("fidelnet")

Step = tuple[float, "Mapping[str, Any] | LinkParams | str"]


class Link:
    """A link between two interfaces."""

    driver: LinkDriver

    def __init__(
        self, spec: LinkSpec, intf1: Interface, intf2: Interface, driver: LinkDriver | None = None
    ) -> None:
        self.spec = spec
        self.intf1 = intf1
        self.intf2 = intf2
        intf1.link = self
        intf2.link = self
        self.driver = driver if driver is not None else intf1.node.net.link_driver(spec)

    def __repr__(self) -> str:
        a, b = self.intf1, self.intf2
        return f"<Link {a.node.name}:{a.name}<->{b.node.name}:{b.name} {self.backend}>"

    def __str__(self) -> str:
        return f"{self.intf1.name}<->{self.intf2.name}"

    @property
    def backend(self) -> str:
        """``veth``, ``tc`` or ``engine``."""
        return self.driver.backend

    @property
    def where(self) -> str:
        return f"link {self.spec.a}-{self.spec.b}"

    def params(self, direction: str = "ab") -> LinkParams:
        """The parameters of one direction now."""
        key = self._directions(direction)
        if len(key) != 1:
            raise ValidationError("direction", "name one direction", direction, ["ab", "ba"])
        return self.spec.direction(self.spec.a if key[0] == "ab" else self.spec.b)

    def _directions(self, direction: str) -> tuple[str, ...]:
        choices = {"both": ("ab", "ba"), "ab": ("ab",), "ba": ("ba",)}
        choices.setdefault(self.spec.a, ("ab",))
        choices.setdefault(self.spec.b, ("ba",))
        if direction not in choices:
            raise ValidationError("direction", "unknown direction", direction, list(choices))
        return choices[direction]

    # -- changes ----------------------------------------------------------------------

    def set(self, direction: str = "both", **values: Any) -> None:
        """Change some parameters (text with units, as in :func:`parse_params`)."""
        changes = parse_params(values, f"{self.where}.set")
        new = {d: self.params(d).merged(changes) for d in self._directions(direction)}
        self.configure(new.get("ab"), new.get("ba"))

    def configure(self, ab: LinkParams | None, ba: LinkParams | None) -> None:
        """Replace the whole parameters of the directions given (None: unchanged)."""
        for key, params in (("ab", ab), ("ba", ba)):
            if params is not None:
                problems = param_problems(params, f"{self.where}.{key}")
                if problems:
                    raise problems[0]
        gaps = self.driver.gaps(ab, ba)
        if gaps:  # e.g. a delay on a veth link without sch_netem: onto the engine
            self.driver = self.intf1.node.net.divert_link(self, "; ".join(gaps))
        self.driver.apply((self.intf1, self.intf2), ab, ba, self.where)
        new_ab = ab if ab is not None else self.params("ab")
        new_ba = ba if ba is not None else self.params("ba")
        self.spec.params, self.spec.params_ab, self.spec.params_ba = LinkParams(), new_ab, new_ba
        notify = getattr(self.intf1.node.net, "on_link_change", None)
        if notify is not None:
            notify(self)  # e.g. a fast-path router's port that is now shaped

    def down(self) -> int:
        """Take the link down: both interfaces down, nothing passes. Returns when the
        path was cut (CLOCK_REALTIME ns; an engine link's own instant)."""
        return self.driver.set_up((self.intf1, self.intf2), False)

    def up(self) -> int:
        """Bring the link up; returns when the path was whole again."""
        return self.driver.set_up((self.intf1, self.intf2), True)

    def plan_state(self, up: bool, at_ns: int) -> StatePlan:
        """Plan the link going down or up at ``at_ns`` (CLOCK_REALTIME), known ahead:
        an engine link is told now and changes the path at that instant itself
        (:class:`~fidelnet.links.drivers.StatePlan` says what is left to do when)."""
        return self.driver.plan_state((self.intf1, self.intf2), up, at_ns)

    def schedule(self, steps: Iterable[Step], direction: str = "both") -> LinkSchedule:
        """Follow a timeline: ``(seconds from now, changes | "down" | "up")`` pairs."""
        plan: list[tuple[float, LinkParams | str]] = []
        last = 0.0
        for i, (at, what) in enumerate(steps):
            field = f"{self.where}.schedule[{i}]"
            if isinstance(at, bool) or not isinstance(at, (int, float)) or not at >= last:
                raise ValidationError(
                    field, "times must be numbers of seconds, not decreasing, from 0", at
                )
            last = float(at)
            if isinstance(what, str):
                if what not in ("down", "up"):
                    raise ValidationError(field, "unknown step", what, ["down", "up", "{params}"])
                plan.append((last, what))
                continue
            changes = what if isinstance(what, LinkParams) else parse_params(what, field)
            for d in self._directions(direction):
                problems = param_problems(self.params(d).merged(changes), field)
                if problems:
                    raise problems[0]
            plan.append((last, changes))
        return LinkSchedule(self, plan, direction)

    def stats(self) -> dict[str, Any]:
        """Counters per direction, from the backend (see ``docs/links.md``)."""
        return self.driver.stats((self.intf1, self.intf2))

    def describe(self) -> dict[str, Any]:
        """Backend, why it was chosen, and the parameters: what results record."""
        return {
            "link": f"{self.spec.a}:{self.intf1.name}-{self.spec.b}:{self.intf2.name}",
            **self.driver.describe(),
            "ab": _jsonable(self.params("ab")),
            "ba": _jsonable(self.params("ba")),
        }


def _jsonable(params: LinkParams) -> dict[str, Any]:
    return {
        k: (v.__dict__ if hasattr(v, "__dict__") else v) for k, v in params.set_fields().items()
    }


class LinkSchedule:
    """A timeline running on a thread; :meth:`cancel` stops it, :meth:`wait` joins it.
    Errors from steps are collected in :attr:`errors` (and logged)."""

    def __init__(
        self, link: Link, plan: Sequence[tuple[float, LinkParams | str]], direction: str
    ) -> None:
        self.link = link
        self.plan = list(plan)
        self.direction = direction
        self.errors: list[Exception] = []
        self.applied: list[tuple[float, float]] = []  # (planned, actual) seconds
        self._cancel = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="link-schedule", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for at, what in self.plan:
            if self._cancel.wait(max(0.0, self._start + at - time.monotonic())):
                return
            try:
                if what == "down":
                    self.link.down()
                elif what == "up":
                    self.link.up()
                else:
                    assert isinstance(what, LinkParams)
                    dirs = self.link._directions(self.direction)
                    new = {d: self.link.params(d).merged(what) for d in dirs}
                    self.link.configure(new.get("ab"), new.get("ba"))
                self.applied.append((at, time.monotonic() - self._start))
            except Exception as exc:
                log.error("%s: schedule step at %.3f s: %s", self.link.where, at, exc)
                self.errors.append(exc)

    def cancel(self) -> None:
        self._cancel.set()
        self._thread.join()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the timeline to finish; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
