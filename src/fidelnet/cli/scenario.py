"""``fidelnet run`` and ``fidelnet test``: scenario files, end to end."""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fidelnet.errors import ValidationError
from fidelnet.fidelity.thresholds import DEFAULT, Thresholds, parse

__all__ = ["run", "test"]


def _out(out: Path | None, kind: str) -> Path:
    if out is not None:
        return out
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("fidelnet-results") / f"{kind}-{stamp}"


def _thresholds(path: Path | None, untrusted: str | None) -> Thresholds:
    """Thresholds from a YAML/JSON mapping file and ``--untrusted``; checked before
    anything is built (a bad value names its field)."""
    import yaml

    values: dict[str, Any] = {}
    if path is not None:
        try:
            doc = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ValidationError("--thresholds", f"{path}: cannot be read: {exc}") from None
        if doc is not None and not isinstance(doc, dict):
            raise ValidationError(
                "--thresholds", f"{path}: must hold a mapping", type(doc).__name__
            )
        values.update(doc or {})
    if untrusted is not None:
        values["untrusted_check"] = untrusted
    return parse(values)


def _check_baseline(scenarios: list[Any], baseline: Path | None) -> None:
    """Before anything is built: regression checks need ``--baseline``, and it must
    be a baseline."""
    from fidelnet.gate.baseline import MANIFEST
    from fidelnet.scenario.model import RegressionCheck

    asking = [
        f"{sc.name}: {c.key}" for sc in scenarios for c in sc.checks
        if isinstance(c, RegressionCheck)
    ]  # fmt: skip
    if asking and baseline is None:
        raise ValidationError(
            "--baseline", f"regression checks need one ({', '.join(asking[:3])})", None
        )
    if baseline is not None and not (baseline / MANIFEST).is_file():
        raise ValidationError(
            "--baseline", f"not a baseline (no {MANIFEST}); make one with --save-baseline",
            str(baseline),
        )  # fmt: skip


def _save_baseline(results: Path, dest: Path) -> None:
    """Keep ``results``' result files as a baseline (fidelnet.gate.baseline), saying
    how many and which of them a comparison will find untrusted."""
    from fidelnet.gate import baseline
    from fidelnet.measure.results import load_result

    saved = baseline.save(results, dest)
    untrusted = []
    for rel, path in baseline.result_files(dest).items():
        verdict = getattr(load_result(path).result, "verdict", None)
        if verdict is not None and verdict.level == "untrusted":
            untrusted.append(rel)
    click.echo(f"baseline: {len(saved)} result file(s) kept in {dest}")
    for rel in untrusted:
        click.echo(
            f"fidelnet: warning: baseline {rel} is untrusted: comparisons with it will be "
            "inconclusive; save the baseline from a run on a quiet machine",
            err=True,
        )


def _execute(
    files: tuple[Path, ...],
    out: Path | None,
    kind: str,
    pcap: bool = False,
    thresholds: Thresholds = DEFAULT,
    strict: bool = False,
    save_baseline: Path | None = None,
    baseline: Path | None = None,
) -> bool:
    from fidelnet.errors import CapacityError
    from fidelnet.scenario import capacity, default_scenario
    from fidelnet.scenario.suite import load_all, run_suite

    err = Console(stderr=True)
    scenarios = load_all(list(files)) if files else [default_scenario()]
    _check_baseline(scenarios, baseline)
    findings = capacity.check(scenarios)
    for name, f in findings:
        click.echo(f"fidelnet: {'error' if strict else 'warning'}: {name}: {f.message}", err=True)
    if findings and strict:
        raise CapacityError(
            f"{len(findings)} capacity finding(s) above and --strict: nothing was built"
        )
    target = _out(out, kind)
    with err.status("starting") as status:

        def say(message: str) -> None:
            status.update(message)
            err.print(f"[dim]*** {message}")

        result = run_suite(
            scenarios, target, say=say, pcap=pcap, thresholds=thresholds, baseline=baseline
        )
    if save_baseline is not None:
        _save_baseline(target, save_baseline)
    console = Console(width=max(Console().width, 120))
    for r in result.runs:
        table = Table(title=f"{r.scenario}" + (f" run {r.index + 1}" if r.index else ""))
        for col in ("check", "status", "verdict", "measured", "expected"):
            table.add_column(col)
        for c in r.checks:
            style = {"passed": "green", "failed": "red", "error": "red", "skipped": "yellow"}
            vstyle = _VERDICT_STYLE.get(c.verdict, "dim")
            table.add_row(
                c.name,
                f"[{style[c.status]}]{c.status.upper()}",
                f"[{vstyle}]{c.verdict or '—'}",
                c.measured,
                c.expected,
            )
        console.print(table)
        click.echo(f"verdict {r.scenario}: {r.verdict_line()}")
        for c in r.checks:
            if c.status in ("failed", "error"):
                what = c.message or f"measured {c.measured}, expected {c.expected}"
                click.echo(f"{c.status.upper()} {r.scenario}: {c.name}: {what}")
                if c.detail:
                    click.echo(f"    {c.detail}")
    n_checks = sum(len(r.checks) for r in result.runs)
    n_bad = sum(1 for r in result.runs for c in r.checks if c.status in ("failed", "error"))
    click.echo(f"{n_checks - n_bad}/{n_checks} checks passed")
    click.echo(f"results: {target}\njunit: {result.junit}")
    click.echo(f"report: {result.report}" if result.report else "report: (no measurements)")
    return result.passed


_VERDICT_STYLE = {"trusted": "green", "degraded": "yellow", "untrusted": "red"}

_FILES = click.argument(
    "files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
_OUT = click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default fidelnet-results/KIND-TIME).",
)


_PCAP = click.option(
    "--pcap", is_flag=True, help="Capture each traffic item's senders (headers) to OUT/.../pcap/."
)
_THRESHOLDS = click.option(
    "--thresholds",
    "thresholds_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="YAML/JSON mapping of verdict thresholds (docs/fidelity.md).",
)
_STRICT = click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 2, nothing built) a scenario that asks more than this machine's "
    "profile says it carries faithfully; without it, a warning.",
)
_BASELINE = click.option(
    "--baseline",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The baseline that `regression` checks compare with (docs/regression.md).",
)
_SAVE_BASELINE = click.option(
    "--save-baseline",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also keep the results as a baseline in this directory, for `fidelnet compare`.",
)
_UNTRUSTED = click.option(
    "--untrusted",
    type=click.Choice(["inconclusive", "warn"]),
    default=None,
    help="A check on an untrusted measurement: an inconclusive error (default) or a warning.",
)


@click.command()
@_FILES
@_OUT
@_PCAP
@_THRESHOLDS
@_UNTRUSTED
@_STRICT
@_SAVE_BASELINE
@_BASELINE
def run(
    files: tuple[Path, ...],
    out: Path | None,
    pcap: bool,
    thresholds_file: Path | None,
    untrusted: str | None,
    strict: bool,
    save_baseline: Path | None,
    baseline: Path | None,
) -> None:
    """Run scenario FILES (default: the embedded 7-node line) and write their results,
    JUnit file and report. Exits 0 when they ran, whatever the checks said."""
    th = _thresholds(thresholds_file, untrusted)
    _execute(files, out, "run", pcap, th, strict, save_baseline, baseline)


@click.command()
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@_OUT
@_PCAP
@_THRESHOLDS
@_UNTRUSTED
@_STRICT
@_SAVE_BASELINE
@_BASELINE
def test(
    files: tuple[Path, ...],
    out: Path | None,
    pcap: bool,
    thresholds_file: Path | None,
    untrusted: str | None,
    strict: bool,
    save_baseline: Path | None,
    baseline: Path | None,
) -> None:
    """Run scenario FILES as tests: exit 0 when every check passed, 1 otherwise.
    Every file is validated before anything is built (bad input: exit 2). A check on
    a measurement the run judged untrusted is inconclusive (an error) by default."""
    th = _thresholds(thresholds_file, untrusted)
    ok = _execute(files, out, "test", pcap, th, strict, save_baseline, baseline)
    sys.exit(0 if ok else 1)
