"""Fixtures for privileged tests: each test must leave the machine as it found it.

Also which tests `make test` runs in its first phase, beside each other (marker
``parallel``): every unit test, and the privileged modules below, whose tests assert
what was built and what answered, never a measured time or rate. Those privileged
tests share one xdist group, so no two networks are ever built at once (each test's
check that it left nothing behind looks at the whole machine); the unit tests run
beside them on the other worker. A test marked ``timing`` (it measures) never runs
in that phase: the second phase runs it, and every module not listed, one test at a
time on an otherwise quiet machine. A new module is serial until it is listed here.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PARALLEL_MODULES = frozenset(
    {
        "test_compat_api.py",
        "test_compat_errors.py",
        "test_container_nodes.py",
        "test_examples.py",
        "test_flows.py",
        "test_hwintf.py",
        "test_hwlinks.py",
        "test_mininet_contract.py",
        "test_mininet_suites.py",
        "test_nat_clean.py",
        "test_network.py",
        "test_ovs_switch.py",
        "test_scale.py",
        "test_switch_mld.py",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path))
        if "timing" in item.keywords:
            continue
        if path.parent.name == "unit":
            item.add_marker(pytest.mark.parallel)
        elif path.parent.name == "privileged" and path.name in PARALLEL_MODULES:
            item.add_marker(pytest.mark.parallel)
            item.add_marker(pytest.mark.xdist_group("net"))


def host_links() -> set[str]:
    out = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
    ).stdout
    return {line.split(": ")[1].split("@")[0] for line in out.splitlines()}


def netns_names() -> set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


def state_files() -> set[str]:
    try:
        return set(os.listdir("/run/fidelnet"))
    except FileNotFoundError:
        return set()


def run_tmpdirs() -> set[str]:
    """Scratch directories of runs (``fidelnet-<run id>-...``, fidelnet.measure.workdir)."""
    return {n for n in os.listdir(tempfile.gettempdir()) if RUN_TMPDIR.match(n)}


RUN_TMPDIR = re.compile(r"^fidelnet-[0-9a-f]{6}-")


# Host settings that programs run by tests change on the host as under Mininet (Debian's
# linearbandwidth example sets `tcp_congestion_control=reno` on the host): written back
# after every test, or every later TCP measurement on the machine would inherit them.
HOST_SYSCTLS = ("/proc/sys/net/ipv4/tcp_congestion_control",)


@pytest.fixture(autouse=True)
def host_settings_restored() -> Iterator[None]:
    before = {path: Path(path).read_text() for path in HOST_SYSCTLS if Path(path).exists()}
    yield
    for path, value in before.items():
        if Path(path).read_text() != value and os.geteuid() == 0:
            Path(path).write_text(value)


@pytest.fixture(autouse=True)
def leaves_no_trace() -> Iterator[None]:
    """Fail a test that leaves namespaces, host interfaces, state files or scratch
    directories behind."""
    before = (netns_names(), host_links(), state_files(), run_tmpdirs())
    yield
    after = (netns_names(), host_links(), state_files(), run_tmpdirs())
    leaked = [sorted(a - b) for a, b in zip(after, before, strict=True)]
    assert leaked == [[], [], [], []], (
        f"left behind (netns, host links, state files, scratch directories): {leaked}"
    )
