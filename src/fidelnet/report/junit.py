"""JUnit XML for check outcomes, the format CI systems read (Jenkins, GitLab,
GitHub Actions reporters).

One ``<testsuite>`` per scenario run (``repeat`` runs are separate suites), one
``<testcase>`` per check. A failed check carries ``<failure message=...>`` with
the measured value beside the expected one; a check that could not be evaluated
(its traffic failed, a tool crashed) is an ``<error>``, and so is a check whose
measurement the run judged untrusted (``type="Inconclusive"``: the number cannot
decide pass or fail); a check skipped because the machine lacks something is
``<skipped message=...>``, never a pass. Every testcase's ``<system-out>`` carries
``measured:``, ``expected:`` and, for timed measurements, ``verdict:`` lines.
"""

from __future__ import annotations

import os
import platform
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["CheckOutcome", "SuiteOutcome", "parse_junit", "write_junit"]

Status = Literal["passed", "failed", "error", "skipped"]


@dataclass(frozen=True)
class CheckOutcome:
    """One check's verdict: ``measured`` and ``expected`` are human-readable
    (``"1.84 ms"``, ``"<= 1.00 ms"``); ``detail`` adds context (flags, stderr)."""

    name: str
    status: Status
    measured: str = ""
    expected: str = ""
    message: str = ""
    detail: str = ""
    seconds: float = 0.0
    classname: str = ""
    verdict: str = ""
    """The measurement's fidelity verdict (trusted, degraded, untrusted; empty when
    the check reads no timed measurement), and its reasons in one line."""
    verdict_reasons: str = ""


@dataclass
class SuiteOutcome:
    name: str
    checks: list[CheckOutcome] = field(default_factory=list)
    seconds: float = 0.0
    timestamp: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    system_out: str = ""

    def count(self, status: Status) -> int:
        return sum(1 for c in self.checks if c.status == status)


def _text(value: str) -> str:
    """XML 1.0 cannot carry most control characters: replace them."""
    return "".join(ch if ch in "\t\n\r" or ord(ch) >= 0x20 else f"\\x{ord(ch):02x}" for ch in value)


def _case(suite: SuiteOutcome, c: CheckOutcome) -> ET.Element:
    el = ET.Element(
        "testcase",
        name=_text(c.name),
        classname=_text(c.classname or suite.name),
        time=f"{c.seconds:.3f}",
    )
    summary = c.message or (
        f"measured {c.measured}, expected {c.expected}" if c.measured or c.expected else ""
    )
    if c.status == "failed":
        f = ET.SubElement(el, "failure", message=_text(summary), type="CheckFailed")
        f.text = _text("\n".join(x for x in (summary, c.detail) if x))
    elif c.status == "error":
        kind = "Inconclusive" if c.message.startswith("inconclusive") else "CheckError"
        e = ET.SubElement(el, "error", message=_text(summary), type=kind)
        e.text = _text("\n".join(x for x in (summary, c.detail) if x))
    elif c.status == "skipped":
        ET.SubElement(el, "skipped", message=_text(summary))
    lines = []
    if c.measured or c.expected:
        lines += [f"measured: {c.measured}", f"expected: {c.expected}"]
    if c.verdict:
        lines.append(
            f"verdict: {c.verdict}" + (f" ({c.verdict_reasons})" if c.verdict_reasons else "")
        )
    if lines:
        out = ET.SubElement(el, "system-out")
        out.text = _text("\n".join(lines))
    return el


def write_junit(path: str | os.PathLike[str], suites: Sequence[SuiteOutcome]) -> Path:
    """Write ``suites`` as one ``<testsuites>`` document; returns the path."""
    root = ET.Element(
        "testsuites",
        name="fidelnet",
        tests=str(sum(len(s.checks) for s in suites)),
        failures=str(sum(s.count("failed") for s in suites)),
        errors=str(sum(s.count("error") for s in suites)),
        skipped=str(sum(s.count("skipped") for s in suites)),
        time=f"{sum(s.seconds for s in suites):.3f}",
    )
    for s in suites:
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_text(s.name),
            tests=str(len(s.checks)),
            failures=str(s.count("failed")),
            errors=str(s.count("error")),
            skipped=str(s.count("skipped")),
            time=f"{s.seconds:.3f}",
            timestamp=s.timestamp,
            hostname=platform.node(),
        )
        if s.properties:
            props = ET.SubElement(suite, "properties")
            for k, v in sorted(s.properties.items()):
                ET.SubElement(props, "property", name=_text(k), value=_text(v))
        for c in s.checks:
            suite.append(_case(s, c))
        if s.system_out:
            out = ET.SubElement(suite, "system-out")
            out.text = _text(s.system_out)
    ET.indent(root)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(target)
    return target


def parse_junit(path: str | os.PathLike[str]) -> list[SuiteOutcome]:
    """Read a JUnit file written by :func:`write_junit` back (for tests and tools)."""
    root = ET.parse(path).getroot()
    suites = []
    for s in root.iter("testsuite"):
        checks = []
        for case in s.iter("testcase"):
            status: Status = "passed"
            message = ""
            for tag, st in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                el = case.find(tag)
                if el is not None:
                    status = st  # type: ignore[assignment]
                    message = el.get("message", "")
            measured = expected = verdict = reasons = ""
            out = case.find("system-out")
            if out is not None and out.text:
                for line in out.text.splitlines():
                    if line.startswith("measured: "):
                        measured = line[len("measured: ") :]
                    elif line.startswith("expected: "):
                        expected = line[len("expected: ") :]
                    elif line.startswith("verdict: "):
                        verdict, _, rest = line[len("verdict: ") :].partition(" (")
                        reasons = rest[:-1] if rest.endswith(")") else rest
            checks.append(
                CheckOutcome(
                    name=case.get("name", ""),
                    status=status,
                    measured=measured,
                    expected=expected,
                    message=message,
                    seconds=float(case.get("time", "0") or 0),
                    classname=case.get("classname", ""),
                    verdict=verdict,
                    verdict_reasons=reasons,
                )
            )
        props = {p.get("name", ""): p.get("value", "") for p in s.iter("property")}
        suites.append(
            SuiteOutcome(
                name=s.get("name", ""),
                checks=checks,
                seconds=float(s.get("time", "0") or 0),
                timestamp=s.get("timestamp", ""),
                properties=props,
            )
        )
    return suites
