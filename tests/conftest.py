"""Shared test configuration: the `privileged` marker skips with a reason unless root;
the session's Kubernetes control plane (`k8s_control_plane`), whose tests run last;
a test that failed under the hypervisor's steal is run again (tests/_precision.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from fidelnet.cluster.controlplane import ControlPlane

REPO = Path(__file__).resolve().parents[1]
CRDS = sorted(str(p) for p in (REPO / "deploy" / "crds").glob("*.yaml"))
MACHINES = ("machine-a", "machine-b")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The tests on the session's control plane go last (a stable sort): it starts at
    # the first of them and runs until the session ends, so no test that measures
    # packets or times shares the machine with it.
    items.sort(key=lambda item: "k8s_control_plane" in getattr(item, "fixturenames", ()))
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (CI runs as root)")
    for item in items:
        if "privileged" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Run a test as pytest does; when it failed while the hypervisor stole
    ``STEAL_PCT`` or more of the CPU time, run it again from its fixtures up (at most
    ``STEAL_RERUNS`` times). A failure with less steal is final; when every attempt
    failed under steal, the test is reported skipped with each attempt's steal and
    failure: it could not be checked here, and it is not a pass."""
    from _pytest.runner import runtestprotocol

    from _precision import STEAL_PCT, STEAL_RERUNS, _cpu_ticks, steal_since

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    missed: list[str] = []
    reports: list[pytest.TestReport] = []
    for attempt in range(1 + STEAL_RERUNS):
        if attempt:
            item._initrequest()  # type: ignore[attr-defined]  # fresh function fixtures
        start = _cpu_ticks()
        reports = [r for r in runtestprotocol(item, nextitem=nextitem, log=False)
                   if isinstance(r, pytest.TestReport)]  # fmt: skip
        steal = steal_since(start)
        failed = [r for r in reports if r.failed]
        if not failed or steal < STEAL_PCT:
            break
        first = failed[0]
        crash = getattr(getattr(first.longrepr, "reprcrash", None), "message", None)
        what = (
            (crash or str(first.longrepr).strip()).splitlines()[0][:300] if first.longrepr else ""
        )
        missed.append(f"attempt {attempt + 1} (steal {steal:.1f} %, {first.when}): {what}")
        if attempt < STEAL_RERUNS:
            print(f"\n{item.nodeid}: {missed[-1]}; running it again")
    else:
        why = (
            f"could not be checked: it failed in every attempt while the hypervisor stole "
            f"{STEAL_PCT:g} % of the CPU time or more: " + "; ".join(missed)
        )
        for r in reports:
            if r.failed:
                r.outcome = "skipped"
                r.longrepr = (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {why}")
    for r in reports:
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.fixture(scope="session")
def k8s_bin() -> str:
    """Session-scoped: the directory of the control plane's binaries, from
    ``scripts/k8s-build`` (a no-op when cached, as after `make test`'s install step;
    else it builds, which takes minutes)."""
    done = subprocess.run(
        [str(REPO / "scripts" / "k8s-build")], stdout=subprocess.PIPE, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/k8s-build failed (exit {done.returncode}); its errors are above")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def k8s_control_plane(k8s_bin: str) -> Iterator[ControlPlane]:
    """Session-scoped, depends on `k8s_bin`: a started control plane (etcd,
    kube-apiserver, kube-controller-manager, kube-scheduler, kwok) with the Nodes
    ``machine-a`` and ``machine-b`` Ready and fidelnet's CRDs (deploy/crds)
    Established. Stopped when the session ends, which checks that none of its
    processes and nothing of its directory is left."""
    from fidelnet.cluster.controlplane import ControlPlane
    from fidelnet.kernel.state import process_matches

    cp = ControlPlane(k8s_bin).start()
    try:
        print(f"\nk8s control plane {cp.run_id} ready in {cp.started_s:.1f} s ({cp.kubeconfig})")
        cp.add_nodes(*MACHINES)
        cp.apply_crds(CRDS)
        procs = {
            name: (pid, start)
            for name, pid in cp.pids().items()
            if (start := _start_time(pid)) is not None
        }
        where = cp.dir
        yield cp
    finally:
        cp.stop()
    left = [name for name, (pid, start) in procs.items() if process_matches(pid, start)]
    assert not left, f"control plane processes left after stop: {left}"
    assert not os.path.exists(where), f"{where}: left after stop"


def _start_time(pid: int) -> int | None:
    from fidelnet.kernel.state import process_start_time

    return process_start_time(pid)
