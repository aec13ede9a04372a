"""Shared test configuration: the `privileged` marker skips with a reason unless root;
the session's Kubernetes control plane (`k8s_control_plane`), whose tests run last."""

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
