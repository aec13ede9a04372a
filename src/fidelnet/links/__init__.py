"""Links: the parameter model's parser, the backends (``tc``, ``engine``), and the
running :class:`Link` with its runtime changes.

``Link`` and ``LinkSchedule`` are imported on first use (:mod:`fidelnet._lazy`):
the parameter parser (:mod:`.params`) is needed by the scenario model without the
kernel layer the running links use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fidelnet._lazy import lazy_exports

if TYPE_CHECKING:
    from fidelnet.links.link import Link, LinkSchedule

__all__ = ["Link", "LinkSchedule"]

_LAZY = {"Link": "fidelnet.links.link", "LinkSchedule": "fidelnet.links.link"}

lazy_exports(__name__, _LAZY)
