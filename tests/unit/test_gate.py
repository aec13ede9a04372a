"""The regression gate: intervals that cover what they claim, decisions read against
the tolerance (regressed, improved, same, inconclusive with the reason), baselines
saved and paired, `fidelnet compare`'s exit codes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from hdrh.histogram import HdrHistogram
from report_data import provenance, udp

from fidelnet.cli.compare import compare as compare_cmd
from fidelnet.errors import ValidationError
from fidelnet.fidelity.verdict import Reason, Verdict
from fidelnet.gate import baseline, stats
from fidelnet.gate.compare import compare, parse_metric
from fidelnet.measure.latency import summary_from_histogram
from fidelnet.measure.results import ResultFile, UdpResult, ZeroLossResult, save_result


def _hist(samples: list[float]) -> str:
    h = HdrHistogram(1, 60 * 10**9, 3)
    for s in samples:
        h.record_value(max(1, int(s)))
    out = summary_from_histogram(h).hdr
    assert out is not None
    return out


def _latency_samples(seed: int, n: int, median_ns: float) -> list[float]:
    rng = random.Random(seed)
    return [median_ns * rng.lognormvariate(0, 0.25) for _ in range(n)]


def _udp(seed: int, n: int = 5000, median_ns: float = 10e6, lost: int = 0) -> UdpResult:
    h = HdrHistogram(1, 60 * 10**9, 3)
    for s in _latency_samples(seed, n, median_ns):
        h.record_value(int(s))
    base = udp(1000.0)
    return base.model_copy(
        update={"latency": summary_from_histogram(h), "sent": n + lost, "lost": lost}
    )


def _file(result: UdpResult | ZeroLossResult) -> ResultFile:
    return ResultFile(kind=result.kind, name="load", provenance=provenance(), result=result)


def test_binomial_quantiles_are_exact_where_known() -> None:
    # Binomial(100, 0.5): P(B <= 39) = 0.0176, P(B <= 40) = 0.0284; P(B <= 60) = 0.9824.
    assert stats.binom_quantile(0.025, 100, 0.5) == 40
    assert stats.binom_quantile(0.975, 100, 0.5) == 60
    assert stats.binom_quantile(0.5, 10, 0.0) == 0 and stats.binom_quantile(0.5, 10, 1.0) == 10


def test_the_order_statistic_interval_covers_the_true_quantile() -> None:
    """Lognormal latencies, whose true median is known: the 95 % interval of p50 holds
    it in about 95 % of 200 seeded runs (at least 90 %), and is never unbounded."""
    median = 10e6
    covered = 0
    for seed in range(200):
        iv = stats.quantile_interval(_hist(_latency_samples(seed, 400, median)), 50.0)
        assert iv.bounded and iv.lo <= iv.value <= iv.hi
        covered += iv.lo <= median <= iv.hi
    assert covered >= 180, covered


def test_the_tail_of_a_short_run_is_not_bounded() -> None:
    iv = stats.quantile_interval(_hist(_latency_samples(1, 2000, 1e6)), 99.99)
    assert not iv.bounded and iv.n == 2000


def test_wilson_and_newcombe() -> None:
    a = stats.wilson_interval(10, 1000)
    assert a.lo < 0.01 < a.hi and a.lo > 0.004 and a.hi < 0.02
    b = stats.wilson_interval(50, 1000)
    lo, hi = stats.difference_interval(a, b)
    assert 0.0 < lo < 0.04 < hi


@pytest.mark.parametrize(
    ("median", "decision"), [(13e6, "regressed"), (7e6, "improved"), (10e6, "same")]
)
def test_a_latency_change_is_decided(median: float, decision: str) -> None:
    got = compare(
        "load.json", _file(_udp(1)), _file(_udp(2, median_ns=median)), [parse_metric("p50")]
    )
    assert [c.decision for c in got] == [decision], got
    assert got[0].reasons == []


def test_a_change_near_the_tolerance_is_inconclusive_with_the_reason() -> None:
    got = compare(
        "load.json", _file(_udp(1, n=300)), _file(_udp(2, n=300, median_ns=10.9e6)),
        [parse_metric("p50:10%")],
    )  # fmt: skip
    assert got[0].decision == "inconclusive"
    assert "straddles the tolerance" in got[0].reasons[0]


def test_too_few_samples_and_an_untrusted_run_are_inconclusive() -> None:
    short = compare("x", _file(_udp(1, n=2000)), _file(_udp(2, n=2000)), [parse_metric("p99.99")])
    assert short[0].decision == "inconclusive" and "too few samples" in short[0].reasons[0]
    bad = Verdict.of(
        [Reason(code="steal", level="untrusted", message="the hypervisor stole 30 %")],
        monitored=True,
    )
    now = _file(_udp(2, median_ns=20e6).model_copy(update={"verdict": bad}))
    got = compare("x", _file(_udp(1)), now, [parse_metric("p50")])
    assert got[0].decision == "inconclusive"
    assert got[0].reasons == ["the new run is untrusted: the hypervisor stole 30 %"]


def test_loss_is_compared_in_points() -> None:
    got = compare(
        "x", _file(_udp(1, n=10000, lost=100)), _file(_udp(2, n=10000, lost=500)),
        [parse_metric("loss:0.5")],
    )  # fmt: skip
    assert got[0].decision == "regressed" and got[0].change_unit == "points"


def test_metric_names_and_tolerances_are_checked() -> None:
    assert parse_metric("p99:5%").tolerance == 5.0
    assert parse_metric("loss").tolerance == 0.5
    with pytest.raises(ValidationError, match="metric.*p50, p90"):
        parse_metric("p42")


def _results(tmp: Path, median: float, seed: int) -> Path:
    d = tmp / f"out-{seed}" / "two-hosts" / "run-1"
    d.mkdir(parents=True)
    save_result(d, "load", _udp(seed, median_ns=median), provenance())
    return tmp / f"out-{seed}"


def test_baselines_are_saved_paired_and_compared_from_the_command_line(tmp_path: Path) -> None:
    base = tmp_path / "baseline"
    assert baseline.save(_results(tmp_path, 10e6, 1), base) == ["two-hosts/run-1/load.json"]
    assert json.loads((base / baseline.MANIFEST).read_text())["schema"] == "fidelnet.baseline/1"
    runner = CliRunner()
    same = runner.invoke(compare_cmd, [str(base), str(_results(tmp_path, 10e6, 2))])
    assert same.exit_code == 0, same.output
    assert same.output.startswith("SAME: 3 comparison(s) of 1 result(s)")
    worse = runner.invoke(
        compare_cmd, [str(base), str(_results(tmp_path, 14e6, 3)), "--metric", "p99", "--json"]
    )
    assert worse.exit_code == 1, worse.output
    doc = json.loads(worse.output)
    assert doc["decision"] == "regressed" and doc["comparisons"][0]["metric"] == "p99"
    not_a_baseline = runner.invoke(compare_cmd, [str(tmp_path / "out-2"), str(tmp_path / "out-3")])
    assert not_a_baseline.exit_code == 2 and "not a baseline" in not_a_baseline.output
    bad_metric = runner.invoke(compare_cmd, [str(base), str(tmp_path / "out-3"), "--metric", "p7"])
    assert bad_metric.exit_code == 2 and "metric" in bad_metric.output


def test_compare_writes_junit_a_regression_fails_and_inconclusive_is_skipped(
    tmp_path: Path,
) -> None:
    from fidelnet.report.junit import parse_junit

    base = tmp_path / "baseline"
    baseline.save(_results(tmp_path, 10e6, 1), base)
    xml = tmp_path / "compare.xml"
    runner = CliRunner()
    worse = runner.invoke(
        compare_cmd,
        [str(base), str(_results(tmp_path, 14e6, 3)), "--metric", "p99", "--junit", str(xml)],
    )
    assert worse.exit_code == 1, worse.output
    (suite,) = parse_junit(xml)
    (case,) = suite.checks
    assert suite.name == "compare" and case.status == "failed"
    assert case.name == "two-hosts/run-1/load.json p99 ±10 %"
    assert case.message.startswith("regressed: change +")
    # A tolerance the noise cannot decide: inconclusive, a skip with the reason.
    near = runner.invoke(
        compare_cmd,
        [str(base), str(_results(tmp_path, 10.6e6, 4)), "--metric", "p50:6", "--junit",
         str(xml)],
    )  # fmt: skip
    assert near.exit_code == 3, near.output
    (case,) = parse_junit(xml)[0].checks
    assert case.status == "skipped" and case.message.startswith("inconclusive"), case


def test_a_baseline_never_overwrites_a_directory_that_is_not_one(tmp_path: Path) -> None:
    other = tmp_path / "docs"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(baseline.BaselineError, match="not empty and not a baseline"):
        baseline.save(_results(tmp_path, 10e6, 1), other)
    assert (other / "notes.txt").read_text() == "mine"


GATE_YAML = (Path(__file__).parents[1] / "scenarios" / "data" / "gate.yaml").read_text()


def test_a_regression_check_is_read_and_fits_its_metrics_traffic() -> None:
    from fidelnet.scenario import ScenarioError
    from fidelnet.scenario.load import loads
    from fidelnet.scenario.model import RegressionCheck

    text = GATE_YAML.replace(
        "  - {type: loss, traffic: load, max: 1%}",
        "  - {type: regression, traffic: load, metric: p99, tolerance: 5%}",
    )
    (check,) = loads(text).checks
    assert isinstance(check, RegressionCheck) and check.key == "regression-p99-load"
    assert check.tolerance_value == 5.0
    with pytest.raises(ScenarioError) as info:
        loads(text.replace("metric: p99", "metric: ndr"))
    (problem,) = info.value.problems
    assert "a regression check needs zero_loss traffic; 'load' is pktgen" in str(problem)
    with pytest.raises(ScenarioError):
        loads(text.replace("metric: p99", "metric: p42"))


def test_compare_draws_the_baseline_and_now_over_each_other(tmp_path: Path) -> None:
    """``--report``: the page's first line is the decision; each result's latency by
    percentile is drawn, baseline and now in one plot, with both series in it."""

    from fidelnet.report.plots.base import series_lines
    from fidelnet.report.plots.latency import hdr_percentiles_figure

    base = tmp_path / "baseline"
    baseline.save(_results(tmp_path, 10e6, 1), base)
    page = tmp_path / "cmp" / "compare.html"
    worse = CliRunner().invoke(
        compare_cmd,
        [str(base), str(_results(tmp_path, 14e6, 3)), "--metric", "p99", "--report", str(page)],
    )
    assert worse.exit_code == 1, worse.output
    assert f"report: {page}" in worse.output
    text = page.read_text()
    assert "<h1>Comparison: REGRESSED</h1>" in text
    assert "two-hosts/run-1/load.json" in text and "baseline (grey)" in text
    png = tmp_path / "cmp" / "compare-plots" / "two-hosts_run-1_load.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'src="compare-plots/two-hosts_run-1_load.png"' in text
    # What the plot holds: two series, the baseline's and now's.
    pairs = baseline.pair(base, tmp_path / "out-3").pairs
    fig = hdr_percentiles_figure([("baseline", pairs[0][1].result), ("now", pairs[0][2].result)])
    assert [ln.get_label() for ln in series_lines(fig)] == ["baseline", "now"]
