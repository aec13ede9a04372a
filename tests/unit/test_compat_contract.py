"""Parts of Mininet's contract that need no network: ``StrictVersion``, ``mn -h``, the
datapath id rule, attributes Mininet code assigns, one-line errors for scripts, and
whose a name in the host's namespace is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fidelnet import stale
from fidelnet.cli.mn import run_mn
from fidelnet.compat import shim_path
from fidelnet.compat._node import Settable
from fidelnet.compat.node import LinuxBridge, OVSSwitch, Switch
from fidelnet.compat.util import StrictVersion
from fidelnet.errors import KernelError, ValidationError
from fidelnet.kernel.state import RunInfo

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_strict_version_compares_as_numbers() -> None:
    assert StrictVersion("1.12.0") > StrictVersion("1.9")
    assert StrictVersion("3.6.2") >= StrictVersion("1.12.0")
    assert StrictVersion("2.0") == StrictVersion("2.0.0") == "2"
    assert StrictVersion("2.3b1") < StrictVersion("2.3") < StrictVersion("2.3.1")
    assert str(StrictVersion("4.0.1")) == "4.0.1"
    with pytest.raises(ValidationError, match="not a version"):
        StrictVersion("four")


def test_mn_help_is_mininets_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_mn(["-h"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: mn [options]")
    assert "--topo" in out and "--custom" in out


def test_a_switch_needs_a_number_in_its_name_or_a_dpid() -> None:
    """Mininet's message, raised before anything exists (no root needed here)."""
    for cls in (Switch, LinuxBridge, OVSSwitch):
        with pytest.raises(ValidationError) as caught:
            cls("A")
        assert (
            "Unable to derive default datapath ID - please either specify a dpid "
            "or use a canonical switch name such as s23." in str(caught.value)
        )
    with pytest.raises(ValidationError, match="at most 16 hex digits"):
        Switch("s1", dpid="xyz")


def test_default_dpid_is_the_names_first_number_in_hex() -> None:
    sw: Any = object.__new__(Switch)
    sw.name = "s123"
    assert sw.defaultDpid() == f"{123:016x}"
    assert sw.defaultDpid("00:00:ab:cd") == "000000000000abcd"


class _Thing:
    def _computed(self) -> str:
        return "computed"

    value = Settable(_computed, "a value")


def test_settable_attributes_read_back_what_is_assigned() -> None:
    thing = _Thing()
    assert thing.value == "computed"
    thing.value = None
    assert thing.value is None
    del thing.value
    assert thing.value == "computed"
    assert _Thing.value.__doc__ == "a value"


def _script(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=f"{shim_path()}:{SRC}")
    env.pop("FIDELNET_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_uncaught_fidelnet_error_ends_a_script_in_one_line() -> None:
    done = _script("import mininet.util\n\nmininet.util.ipAdd(300, prefixLen=24)\n")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "<string>:3: ipAdd: not enough addresses in a /24 for host 300 (got 300)"
    ]
    other = _script("import mininet.util\nraise RuntimeError('mine')\n")
    assert other.returncode == 1 and "Traceback" in other.stderr  # not ours: Python's


def _run(run_id: str, alive: bool, pid: int = 4242) -> RunInfo:
    start = -1
    if alive:
        pid = os.getpid()
        with open(f"/proc/{pid}/stat", "rb") as f:
            start = int(f.read().rsplit(b")", 1)[1].split()[19])
    return RunInfo(run_id, f"/nonexistent/{run_id}.jsonl", pid, start, "python x.py", 0.0)


def test_whose_name_is_in_the_host_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name that is free passes; one that a live run, this run, or nobody fidelnet
    knows holds is a one-line error saying whose and what to do."""
    aliases: dict[str, str] = {"gone-eth0": "fidelnet:aaaaaa", "live-eth0": "fidelnet:bbbbbb"}
    aliases["mine-eth0"] = "fidelnet:cccccc"
    aliases["eth9"] = ""
    monkeypatch.setattr(stale, "_alias", lambda name: aliases.get(name))
    runs = [_run("bbbbbb", alive=True)]
    monkeypatch.setattr(stale, "list_runs", lambda: runs)
    stale.clear_host_name("free-eth0", "cccccc")
    cases = {
        "live-eth0": "fidelnet run bbbbbb's, which is running",
        "mine-eth0": "made by this run",
        "gone-eth0": "marked as fidelnet run aaaaaa's, a run with no state left",
        "eth9": "not fidelnet's; free the name (ip link del eth9)",
    }
    for name, said in cases.items():
        with pytest.raises(KernelError) as caught:
            stale.clear_host_name(name, "cccccc")
        message = str(caught.value)
        assert said in message and "\n" not in message, message
