"""Virtual time's front doors (issue 11): ``fidelnet mn --tdf``, ``tdf:`` in scenario
files, and the CPU share VT-Mininet's ``net.cpu_usage`` reports; bad factors are
refused naming the field before anything is built."""

from __future__ import annotations

import pytest

from fidelnet.cli.mn import parse
from fidelnet.errors import ValidationError
from fidelnet.kernel import procfs
from fidelnet.scenario import loads
from fidelnet.scenario.topology import build


def test_mn_takes_a_tdf_and_refuses_a_bad_one() -> None:
    assert parse(["--tdf", "4", "--topo", "single,2"]).options.tdf == 4.0
    assert parse(["--topo", "single,2"]).options.tdf is None
    for bad, why in (("x", "must be a number"), ("0", "must be > 0"), ("nan", "> 0")):
        with pytest.raises(ValidationError) as e:
            parse(["--tdf", bad])
        assert e.value.field == "--tdf" and why in str(e.value)


def test_a_scenario_s_tdf_reaches_the_topology() -> None:
    doc = "name: x\ntopology:\n  builder: {single: 2}\n  tdf: 4\n"
    built = build(loads(doc))
    assert built.spec.tdf == 4.0
    assert build(loads(doc.replace("  tdf: 4\n", ""))).spec.tdf is None


def test_busy_share_counts_everything_but_idle_and_iowait() -> None:
    before = {0: (1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 10.0), 1: (0.0,) * 7}
    after = {0: (2.0, 1.5, 0.5, 0.0, 0.0, 2.0, 11.0), 1: (0.0,) * 7}
    assert procfs.busy_share(before, after) == {0: 2.0 / 4.0, 1: 0.0}
