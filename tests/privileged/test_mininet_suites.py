"""Mininet's own tests of its examples, unmodified, against the shim.

Debian's mininet package installs Mininet's examples and their tests
(/usr/share/doc/mininet/examples/test/test_*.py). Each test file runs here as
Mininet's authors run it, ``python test_x.py`` (unittest), unchanged and in place:
``python`` on the PATH is this fidelnet's Python with the ``mininet`` shim first on
PYTHONPATH, so the ``python -m mininet.examples.x`` each test spawns runs the example
on fidelnet, and ``mn`` is ``fidelnet mn``. One file is one case. It passes when
unittest ran every test in it and none failed; a file whose tests cannot run on this
machine is skipped with the kernel feature, package or network it lacks (and so are
the tests that skip themselves), never counted as passed. A file with one test that
cannot run and others that can is run once per test (``python test_x.py
Class.test``, still unmodified), that one skipped with its reason.

Mininet's core tests (its repository's mininet/test/) are not packaged by Debian:
docs/mininet-contract.md gives what they measured by hand.

Safety: these tests call ``mininet.clean.cleanup()`` when something fails; Mininet's
kills processes by name and deletes interfaces by name pattern. Before any of them
runs, a subprocess with the very same environment proves that ``mininet.clean`` is
fidelnet's, which removes only what stale fidelnet runs own, and that ``mn`` and
``python`` are the ones set up here; otherwise every case fails unrun.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _mnrun import ROOT, run_to_end

from _precision import ATTEMPTS, precise
from fidelnet.compat import shim_path

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the examples make namespaces"),
]

TESTS = Path("/usr/share/doc/mininet/examples/test")
FILES = sorted(p.name for p in TESTS.glob("test_*.py")) if TESTS.is_dir() else []
SRC = ROOT / "src"


def _no_vlans() -> str | None:
    missing = []
    if not os.path.isdir("/sys/module/8021q"):
        missing.append("the kernel's 8021q module (VLAN interfaces) is not loaded")
    if shutil.which("vconfig") is None:
        missing.append("vlanhost.py runs vconfig (Debian's vlan package), not installed")
    return "; ".join(missing) or None


def _cluster() -> str | None:
    return "Mininet's cluster edition (nodes on other machines over ssh) is not supported"


def _scratchnet() -> str | None:
    missing = [p for p in ("controller", "ofdatapath") if shutil.which(p) is None]
    if not missing:
        return None
    return (
        f"scratchnet.py and scratchnetuser.py run Mininet's own {' and '.join(missing)} "
        "(the OpenFlow reference controller and user switch, not packaged by Debian)"
    )


def _iperf_21() -> str | None:
    """cpu.py reads one line from the iperf server for waitListening's probe
    connection before the real result; iperf 2.1 prints none for it, so the script
    waits for ever (under stock Mininet too)."""
    try:
        done = subprocess.run(["iperf", "-v"], capture_output=True, text=True, check=False)
    except OSError:
        return "cpu.py needs iperf (Debian's iperf package)"
    m = re.search(r"iperf version (\d+)\.(\d+)", done.stdout + done.stderr)
    if m and (int(m.group(1)), int(m.group(2))) >= (2, 1):
        return (
            f"cpu.py waits for a line iperf {m.group(1)}.{m.group(2)}'s server does not "
            "print (for waitListening's probe connection; iperf 2.0 printed one): it "
            "hangs under stock Mininet too"
        )
    return None


def _outlives_its_script() -> str | None:
    return (
        "baresshd.py starts sshd in h1 and exits, and the test then connects over ssh: "
        "it needs the network to outlive the script, as under Mininet, which leaves it "
        "for the test's cleanup(); fidelnet removes a script's network when the script "
        "ends, so the ssh races the teardown (it lost about one run in ten here). The "
        "example itself runs in test_examples.py"
    )


# Files that cannot pass here, and why (None: they can): this machine lacks something,
# or the test relies on what fidelnet does differently by design (docs/mininet-contract.md).
CANNOT: dict[str, Callable[[], str | None]] = {
    "test_baresshd.py": _outlives_its_script,
    "test_cpu.py": _iperf_21,
    "test_clusterSanity.py": _cluster,
    "test_scratchnet.py": _scratchnet,
    "test_vlanhost.py": _no_vlans,
}

# Tests that cannot run here in a file whose other tests can: the file is then run
# once per test (``python test_x.py Class.test``), and these are skipped, saying why.
ONLY_SOME: dict[str, dict[str, str | None]] = {
    "test_controlnet.py": {
        "testControlNet.testPingall": None,
        "testControlNet.testFailover": (
            "it follows /tmp/s1-ofp.log, the log of Mininet's reference user switch "
            "(ofprotocol, not packaged by Debian), which uses one controller at a time; "
            "fidelnet's UserSwitch is Open vSwitch's userspace datapath, connected to "
            "every controller at once"
        ),
    },
}


def _cases() -> list[str]:
    """One case per file; ``file::Class.test`` for the files of ONLY_SOME."""
    cases = []
    for name in FILES:
        tests = ONLY_SOME.get(name)
        cases += [f"{name}::{t}" for t in tests] if tests else [name]
    return cases


# Seconds a file may take (the rest: DEFAULT_S). tree1024.py builds 1024 hosts.
TIMEOUT_S = {
    "test_tree1024.py": 3600.0,
    "test_treeping64.py": 1800.0,
    "test_cpu.py": 1200.0,
    "test_limit.py": 900.0,
    "test_linearbandwidth.py": 900.0,
}
DEFAULT_S = 600.0


@dataclass
class Outcome:
    """What unittest said of one file."""

    ran: int
    failed: int
    skipped: int
    reasons: list[str]


_SUMMARY = re.compile(r"^Ran (\d+) tests? in [\d.]+s\s*\n+\s*(OK|FAILED)(?: \(([^)]*)\))?", re.M)
_SKIP = re.compile(r"\.\.\. skipped '([^']*)'")


def outcome(out: str) -> Outcome | None:
    """unittest's summary (``Ran 2 tests`` then ``OK (skipped=1)`` or ``FAILED
    (failures=1, errors=1)``), or None when there is none (it did not finish)."""
    found = _SUMMARY.findall(out)
    if not found:
        return None
    ran, _verdict, counts = found[-1]
    parts = dict(p.strip().split("=") for p in counts.split(",") if "=" in p) if counts else {}
    failed = int(parts.get("failures", 0)) + int(parts.get("errors", 0))
    failed += int(parts.get("unexpected successes", 0))
    return Outcome(int(ran), failed, int(parts.get("skipped", 0)), _SKIP.findall(out))


@dataclass
class Env:
    vars: dict[str, str]
    bin: Path


def _wrapper(path: Path, argv: list[str]) -> None:
    quoted = " ".join(f"'{a}'" for a in argv)
    path.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n')
    path.chmod(0o755)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """``python``/``python3`` (this Python, the shim first on its path) and ``mn``
    (``fidelnet mn``) first on the PATH; checked before anything runs."""
    bin_dir = tmp_path_factory.mktemp("mnbin")
    for name in ("python", "python3"):
        _wrapper(bin_dir / name, [sys.executable])
    _wrapper(bin_dir / "mn", [sys.executable, "-m", "fidelnet", "mn"])
    variables = dict(os.environ)
    variables["PATH"] = f"{bin_dir}:{variables.get('PATH', '/usr/bin:/bin')}"
    variables["PYTHONPATH"] = f"{shim_path()}:{SRC}"
    variables.pop("FIDELNET_TRACEBACK", None)
    _prove_safe(variables, bin_dir)
    yield Env(variables, bin_dir)


def _prove_safe(variables: dict[str, str], bin_dir: Path) -> None:
    """``mininet.clean`` (what the tests call to clean up) must be fidelnet's, and
    ``mn``/``python`` the wrappers made here: else nothing may run."""
    for name in ("mn", "python"):
        found = shutil.which(name, path=variables["PATH"])
        assert found == str(bin_dir / name), f"{name} resolves to {found}, not fidelnet's"
    probe = (
        "import mininet.clean, fidelnet.compat.clean as fc\n"
        "assert mininet.clean.cleanup is fc.cleanup, mininet.clean.cleanup\n"
        "print(mininet.clean.__file__)\n"
    )
    done = subprocess.run(
        ["python", "-c", probe],
        env=variables,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.strip()).resolve()
    assert where == Path(shim_path(), "mininet", "clean.py").resolve(), where
    print(f"mininet.clean is {where} (fidelnet's: only stale fidelnet runs are cleaned)")


def test_the_shim_answers_for_mininet(env: Env) -> None:
    """What every case relies on (the fixture checks it; this makes it a result)."""
    out = subprocess.run(
        ["python", "-c", "import mininet; print(mininet.FIDELNET)"],
        env=env.vars,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert out.strip() == "True"


def test_the_unittest_summary_is_read() -> None:
    """The verdict comes from unittest's own summary, never from the exit status alone."""
    ok = outcome("Ran 2 tests in 3.1s\n\nOK (skipped=1)\n")
    assert ok == Outcome(2, 0, 1, [])
    bad = outcome("x ... skipped 'no'\nRan 3 tests in 9.0s\n\nFAILED (failures=1, errors=2)\n")
    assert bad == Outcome(3, 3, 0, ["no"])
    assert outcome("Traceback (most recent call last):\n") is None


# The sshd tests need sshd's privilege-separation directory, which its service makes
# when it starts (make test installs openssh-server without starting it), and they
# ssh into the hosts as root, which writes root's known_hosts: both put back after.
SSH_TESTS = {"test_baresshd.py", "test_sshd.py"}


@contextlib.contextmanager
def _ssh_side_effects() -> Iterator[None]:
    made = None
    if not os.path.isdir("/run/sshd"):
        made = "/run/sshd"
        os.makedirs(made, mode=0o755)
    ssh_dir = Path(pwd.getpwuid(os.geteuid()).pw_dir) / ".ssh"
    had_dir = ssh_dir.is_dir()
    before = {p.name: p.read_bytes() for p in ssh_dir.iterdir() if p.is_file()} if had_dir else {}
    try:
        yield
    finally:
        if made:
            os.rmdir(made)
        if ssh_dir.is_dir():
            for path in ssh_dir.iterdir():
                if path.name not in before and path.name.startswith("known_hosts"):
                    path.unlink()  # known_hosts, and the .old copy ssh-keygen keeps
            for name, content in before.items():
                path = ssh_dir / name
                if not path.is_file() or path.read_bytes() != content:
                    path.write_bytes(content)
            if not had_dir and not any(ssh_dir.iterdir()):
                ssh_dir.rmdir()


# Files whose tests judge measured rates, CPU shares or delays (within Mininet's own
# tolerances), or load the machine with 64 hosts pinging: they run alone (`timing`,
# make test's second phase). Their claims are precision claims: on a shared 2-core
# machine a neighbour can take a core mid-measurement, so such a file is run again,
# at most _precision.ATTEMPTS times, when its tests failed (never when it hung or
# gave no summary), each attempt's failures printed (tests/_precision.py).
MEASURING = frozenset(
    {
        "test_intfoptions.py",
        "test_limit.py",
        "test_linearbandwidth.py",
        "test_simpleperf.py",
        "test_treeping64.py",
    }
)


def _run_case(case: str, env: Env, cwd: Path) -> tuple[int, str, Outcome]:
    name, _, only = case.partition("::")
    timeout = TIMEOUT_S.get(name, DEFAULT_S)
    around = _ssh_side_effects() if name in SSH_TESTS else contextlib.nullcontext()
    argv = ["python", str(TESTS / name), "-v", *([only] if only else [])]
    with around:
        code, out = run_to_end(argv, "", timeout, case, env=env.vars, cwd=cwd)
    found = outcome(out)
    print(f"{case}: exit {code}, {found}")
    # No summary (a hang, a crash before unittest reported) is never retried.
    assert found is not None, f"{case} (exit {code}) gave no unittest summary:\n{out[-6000:]}"
    return code, out, found


def _failed(got: tuple[int, str, Outcome]) -> str | None:
    code, out, found = got
    if found.failed == 0 and code == 0:
        return None
    return f"exit {code}:\n{out[-6000:]}"


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.timing) if c.partition("::")[0] in MEASURING else c
        for c in _cases()
    ],
)
def test_mininet_example_test(case: str, env: Env, tmp_path: Path) -> None:
    name, _, only = case.partition("::")
    why = CANNOT.get(name, lambda: None)() or (ONLY_SOME.get(name, {}).get(only) if only else None)
    if why:
        pytest.skip(f"{case}: {why}")
    attempts = ATTEMPTS if name in MEASURING else 1
    _code, _out, found = precise(lambda: _run_case(case, env, tmp_path), _failed, attempts)
    if found.ran and found.skipped == found.ran:
        pytest.skip(f"{case}: every test skipped itself: {'; '.join(found.reasons)}")


if not FILES:

    def test_debian_ships_the_example_tests() -> None:
        pytest.fail(f"{TESTS} has no test_*.py: make test installs Debian's mininet")
