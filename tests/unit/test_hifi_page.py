"""The HiFi page and Jain's index from synthetic outcomes (no kernel)."""

from __future__ import annotations

from pathlib import Path

from fidelnet.bench.hifi import Flow, HifiOutcome, jain
from fidelnet.bench.hifi_page import summary_rows, write_page
from fidelnet.fidelity.verdict import Reason, Verdict


def test_jain() -> None:
    assert jain([1.0, 1.0, 1.0, 1.0]) == 1.0
    assert abs(jain([1.0, 0.0, 0.0, 0.0]) - 0.25) < 1e-12
    assert jain([0.0, 0.0]) == 1.0


def _outcomes() -> list[HifiOutcome]:
    late = Reason(code="cpu_saturated", level="untrusted", message="every core busy 3 of 4 s")
    return [
        HifiOutcome(
            "dumbbell", "tcp", "htb", 50e6,
            [Flow("h1 -> h3", [48e6, 47e6, 49e6]), Flow("h2 -> h4", [46e6, 48e6, 47e6])],
            [Verdict.of([], monitored=True)],
        ),
        HifiOutcome(
            "udp-dumbbell", "udp", "droptail", 2.5e6,
            [Flow(f"h{k} -> h{k + 4}", [r] * 3) for k, r in enumerate((5e6, 0.4e6, 3e6, 1.5e6), 1)],
            [Verdict.of([late], monitored=True)],
        ),
        HifiOutcome("two-way", "tcp", "htb", 100e6, [Flow("h1 -> h2", [90e6])], []),
    ]  # fmt: skip


def test_table_one_rows() -> None:
    rows = summary_rows(_outcomes())
    assert rows[0][:5] == ["dumbbell (tcp, htb)", "2", "48.00 47.00", "50", "0.9999"]
    assert rows[0][-1] == "trusted" and rows[1][-1] == "untrusted"
    assert rows[2][-1] == "degraded"  # not monitored: never trusted


def test_page_opens_with_the_worst_verdict_and_its_reasons(tmp_path: Path) -> None:
    page = write_page(_outcomes(), tmp_path).read_text()
    assert 'id="verdict" data-level="untrusted"' in page
    assert "every core busy 3 of 4 s" in page[: page.index("id='table1'")]
    assert page.index('id="verdict"') < page.index("id='table1'") < page.index("id='jain'")
    assert (tmp_path / "jain.png").is_file() and (tmp_path / "hifi.json").is_file()
    assert (tmp_path / "flows-udp-dumbbell-droptail.png").is_file()
