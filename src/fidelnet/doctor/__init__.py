"""``fidelnet doctor``: what this machine can do and what fidelnet will use for it.

:func:`gather` (:mod:`.facts`) reads the machine into :class:`Facts`, read-only;
:func:`diagnose` (:mod:`.lines`) turns facts into one :class:`Line` per subject with
no I/O, so tests give it facts of their own.

Exit status (:func:`exit_code`): 0 when fidelnet can build networks here (every
*essential* line is usable), 1 when an essential line is missing. See docs/doctor.md.
"""

from __future__ import annotations

from fidelnet.doctor.facts import (
    BINARIES,
    FEATURES,
    PROFILE_OLD_DAYS,
    TOOLS,
    Facts,
    ProfileFacts,
    Status,
    gather,
)
from fidelnet.doctor.lines import Line, as_dict, diagnose, exit_code

__all__ = [
    "BINARIES",
    "FEATURES",
    "PROFILE_OLD_DAYS",
    "TOOLS",
    "Facts",
    "Line",
    "ProfileFacts",
    "Status",
    "as_dict",
    "diagnose",
    "exit_code",
    "gather",
]
