"""Fidelity: how far a run's own numbers can be trusted.

Calibration measures what this machine can carry faithfully and saves it as a
profile; a capacity check compares an experiment's demand with that profile before
it starts; a monitor watches every measurement while it runs; and a verdict
(``trusted``, ``degraded`` or ``untrusted``, with reasons in words and numbers) is
put on every result, in the JSON, the report, JUnit and the console.

This package sits below :mod:`fidelnet.measure`: it imports no measurement code,
and measurement code hands it plain observations (:class:`Observation`).
"""

from __future__ import annotations

from fidelnet.fidelity.record import MonitorRecord
from fidelnet.fidelity.verdict import LEVELS, Level, Reason, Verdict, worst

__all__ = ["LEVELS", "Level", "MonitorRecord", "Reason", "Verdict", "worst"]
