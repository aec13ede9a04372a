"""Run scenario files as a test suite: validate every file first, run each (repeat
times), then write ``OUT/junit.xml`` and ``OUT/report.html``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fidelnet.fidelity.thresholds import DEFAULT, Thresholds
from fidelnet.report import render
from fidelnet.report.junit import write_junit
from fidelnet.report.load import load_dir
from fidelnet.scenario.errors import Problem, ScenarioError
from fidelnet.scenario.load import load
from fidelnet.scenario.model import Scenario
from fidelnet.scenario.runner import ScenarioRun, run_scenario

__all__ = ["SuiteResult", "load_all", "run_suite"]


@dataclass
class SuiteResult:
    runs: list[ScenarioRun]
    junit: Path
    report: Path

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.runs)


def load_all(paths: Sequence[str | Path]) -> list[Scenario]:
    """Every file validated before any is run; one ScenarioError lists the problems
    of all files."""
    scenarios: list[Scenario] = []
    problems: list[Problem] = []
    for p in paths:
        try:
            scenarios.append(load(p))
        except ScenarioError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ScenarioError(problems)
    return scenarios


def _checks_table(run: ScenarioRun, repeats: int) -> tuple[str, list[str], list[list[str]]]:
    title = f"Checks: {run.scenario}" + (f" (run {run.index + 1})" if repeats > 1 else "")
    rows = [
        [c.name, c.status.upper(), c.verdict or "—", c.measured, c.expected, c.message]
        for c in run.checks
    ]
    return title, ["check", "status", "verdict", "measured", "expected", "note"], rows


def run_suite(
    scenarios: Sequence[Scenario],
    out: Path,
    *,
    say: Callable[[str], None] = lambda _m: None,
    pcap: bool = False,
    thresholds: Thresholds = DEFAULT,
    baseline: Path | None = None,
) -> SuiteResult:
    out.mkdir(parents=True, exist_ok=True)
    runs: list[ScenarioRun] = []
    for sc in scenarios:
        for i in range(sc.repeat):
            d = out / sc.name / f"run-{i + 1}"
            runs.append(
                run_scenario(
                    sc, d, index=i, say=say, pcap=pcap, thresholds=thresholds, baseline=baseline
                )
            )
    repeats = {sc.name: sc.repeat for sc in scenarios}
    junit = write_junit(out / "junit.xml", [r.suite(repeats[r.scenario]) for r in runs])
    results = []
    for r in runs:
        found, _skipped = load_dir(r.out) if any(r.out.glob("*.json")) else ([], [])
        prefix = r.scenario + (f".run{r.index + 1}" if repeats[r.scenario] > 1 else "")
        results += [(f"{prefix}.{label}", rf) for label, rf in found]
    tables = [_checks_table(r, repeats[r.scenario]) for r in runs]
    report = render(results, out, tables)
    return SuiteResult(runs, junit, report)
