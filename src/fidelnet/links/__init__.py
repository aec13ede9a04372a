"""Links: the parameter model's parser, the backends (``tc``, ``engine``), and the
running :class:`Link` with its runtime changes."""

from __future__ import annotations

from fidelnet.links.link import Link, LinkSchedule

__all__ = ["Link", "LinkSchedule"]
