"""JUnit XML: counts, failure messages with measured and expected, round trip."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from fidelnet.report.junit import CheckOutcome, SuiteOutcome, parse_junit, write_junit


def _suite() -> SuiteOutcome:
    return SuiteOutcome(
        name="routing-check",
        checks=[
            CheckOutcome("reach", "passed", "0 % lost", "<= 0 %", seconds=1.5),
            CheckOutcome("p999", "failed", "1.84 ms", "<= 1.00 ms", detail="flags: none"),
            CheckOutcome("ndr", "error", message="pktgen failed (exit 1): boom"),
            CheckOutcome("netem", "skipped", message="kernel lacks sch_netem"),
            CheckOutcome("ctl\x01chars <&>", "passed"),
        ],
        seconds=12.25,
        timestamp="2026-11-22T05:00:00+00:00",
        properties={"seed": "1", "run_id": "abc123"},
    )


def test_counts_and_attributes(tmp_path: Path) -> None:
    path = write_junit(tmp_path / "out" / "junit.xml", [_suite()])
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "5",
        "1",
        "1",
        "1",
    )
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "routing-check"
    failure = root.find(".//testcase[@name='p999']/failure")
    assert failure is not None
    assert failure.get("message") == "measured 1.84 ms, expected <= 1.00 ms"
    assert "flags: none" in (failure.text or "")
    skipped = root.find(".//testcase[@name='netem']/skipped")
    assert skipped is not None and skipped.get("message") == "kernel lacks sch_netem"


def test_round_trip(tmp_path: Path) -> None:
    path = write_junit(tmp_path / "junit.xml", [_suite(), SuiteOutcome("empty")])
    back = parse_junit(path)
    assert [s.name for s in back] == ["routing-check", "empty"]
    got = {c.name: c for c in back[0].checks}
    assert got["p999"].status == "failed"
    assert (got["p999"].measured, got["p999"].expected) == ("1.84 ms", "<= 1.00 ms")
    assert got["ndr"].status == "error" and "boom" in got["ndr"].message
    assert got["netem"].status == "skipped"
    assert got["reach"].status == "passed" and got["reach"].seconds == 1.5
    assert "ctl\\x01chars <&>" in got
    assert back[0].properties == {"seed": "1", "run_id": "abc123"}
