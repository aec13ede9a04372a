"""The test control plane (issue 36) is a real one: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler built from upstream's modules, kwok for Nodes.

Most tests share the session's control plane (`k8s_control_plane`, tests/conftest.py:
Nodes machine-a and machine-b, fidelnet's CRDs); they run last in the session. Two
start their own, to see what stopping leaves: `ControlPlane.stop()`, and `fidelnet
clean` after the owner was killed. Waits are bounded, with what was last seen.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fidelnet.cluster.controlplane import (
    KUBE_VERSION,
    MACHINE_LABEL,
    ControlPlane,
    ControlPlaneError,
)
from fidelnet.cluster.kube import Kube, KubeError, path, poll
from fidelnet.kernel.state import STATE_DIR, process_matches, process_start_time

pytestmark = pytest.mark.privileged

REPO = Path(__file__).resolve().parents[2]
CRDS = sorted(str(p) for p in (REPO / "deploy" / "crds").glob("*.yaml"))
SRC = str(REPO / "src")
GROUP = "fidelnet.dev/v1alpha1"
NS = "default"
GC_TIMEOUT_S = 180.0
"""The garbage collector rediscovers resources every 30 s; several times that."""
WAIT_S = 120.0
CUT = {
    "name": "h1-s1",
    "a": "h1",
    "b": "s1",
    "aMachine": "machine-a",
    "bMachine": "machine-b",
    "delayAB": 0.005,
    "measuredAB": 0.0002,
    "compensatedAB": 0.0048,
}


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def _topology(name: str) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {
            "scenario": {
                "name": "line",
                "topology": {
                    "nodes": {"h1": {"ip": "10.0.0.1/24"}, "h2": {}, "s1": {"kind": "switch"}},
                    "links": [{"ends": ["h1", "s1"], "delay": "5ms", "rate": "100Mbit"}],
                },
                "traffic": [{"pktgen": {"from": "h1", "to": "h2", "rate": "10kpps"}}],
                "x-anything": [1, 2.5, None, {"deep": True}],
            },
            "machines": [{"name": "machine-a", "capacity": 2.0}, {"name": "machine-b"}],
        },
    }


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(name: str, owner: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [{"name": "agent", "image": "fidelnet:local"}],
            "automountServiceAccountToken": False,
            **spec,
        },
    }


def _gone(kube: Kube, url: str) -> tuple[bool | None, str]:
    if not kube.exists(url):
        return True, "gone"
    meta = kube.get(url)["metadata"]
    return None, f"{url} still there (finalizers {meta.get('finalizers')})"


# -- the session's control plane -----------------------------------------------------


def test_the_apiserver_is_ready_and_every_part_reports_the_pinned_versions(
    k8s_control_plane: ControlPlane,
) -> None:
    kube = k8s_control_plane.kube
    assert kube.request("GET", "/readyz") == "ok"
    version = kube.get("/version")
    assert version["gitVersion"] == KUBE_VERSION
    assert (version["major"], version["minor"]) == ("1", KUBE_VERSION.split(".")[1])
    assert k8s_control_plane.ports is not None
    etcd = f"http://127.0.0.1:{k8s_control_plane.ports.etcd_client}/version"
    with urllib.request.urlopen(etcd, timeout=10) as resp:
        assert json.loads(resp.read())["etcdserver"].startswith("3.6.")
    # The kubeconfig works on its own (the CA embedded, the admin's token).
    alone = Kube.from_kubeconfig(k8s_control_plane.kubeconfig)
    assert alone.get("/version")["gitVersion"] == KUBE_VERSION
    # A token it does not know is refused.
    stranger = Kube(k8s_control_plane.server, "not-a-token", insecure=True)
    with pytest.raises(KubeError) as info:
        stranger.get(path("v1", "nodes"))
    assert info.value.status == 401


def test_kwok_runs_the_two_machines_as_ready_nodes_with_leases(
    k8s_control_plane: ControlPlane,
) -> None:
    kube = k8s_control_plane.kube
    nodes = kube.get(path("v1", "nodes"), labelSelector=MACHINE_LABEL)["items"]
    assert sorted(n["metadata"]["name"] for n in nodes) == ["machine-a", "machine-b"]
    for node in nodes:
        conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conds["Ready"] == "True", node["metadata"]["name"]
        assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")
        lease = path(
            "coordination.k8s.io/v1",
            "leases",
            node["metadata"]["name"],
            namespace="kube-node-lease",
        )
        spec = kube.get(lease)["spec"]  # renewed by kwok, which holds it
        assert spec["leaseDurationSeconds"] == 40 and spec["renewTime"], spec


def test_the_crds_apply_again_and_a_topology_round_trips_with_its_status(
    k8s_control_plane: ControlPlane,
) -> None:
    assert k8s_control_plane.apply_crds(CRDS) == ["shards.fidelnet.dev", "topologies.fidelnet.dev"]
    kube = k8s_control_plane.kube
    topologies = path(GROUP, "topologies", namespace=NS)
    name = _name("topo")
    sent = _topology(name)
    made = kube.create(topologies, sent)
    url = f"{topologies}/{name}"
    try:
        got = kube.get(url)
        assert got["spec"] == sent["spec"]  # the scenario, unchanged to the last field
        assert "status" not in got
        status = {"phase": "Running", "shards": 2, "verdict": "degraded", "reasons": ["jitter"]}
        kube.patch(f"{url}/status", {"status": status})
        got = kube.get(url)
        assert got["status"] == status
        assert got["metadata"]["generation"] == made["metadata"]["generation"]
        # The main resource ignores status; the status subresource ignores spec.
        kube.patch(url, {"status": {"phase": "Failed"}})
        kube.patch(f"{url}/status", {"spec": {"seed": 7}})
        got = kube.get(url)
        assert got["status"]["phase"] == "Running" and "seed" not in got["spec"]
        # The printer columns, as kubectl shows them.
        table = kube.request("GET", url, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
        columns = [c["name"] for c in table["columnDefinitions"]]
        assert columns == ["Name", "Phase", "Shards", "Verdict", "Age"]
        assert table["rows"][0]["cells"][:4] == [name, "Running", 2, "degraded"]
        # The typed fields are checked by the API server.
        bad = _topology(_name("bad"))
        bad["spec"]["machines"][0]["capacity"] = 0
        with pytest.raises(KubeError) as info:
            kube.create(topologies, bad)
        assert info.value.status == 422 and "capacity" in info.value.message
        bad["spec"]["machines"][0]["capacity"] = 1
        del bad["spec"]["scenario"]
        with pytest.raises(KubeError) as info:
            kube.create(topologies, bad)
        assert info.value.status == 422 and "spec.scenario: Required value" in info.value.message
    finally:
        kube.delete(url)


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_deleting_a_topology_cascades_to_its_shards_and_their_pods(
    k8s_control_plane: ControlPlane, propagation: str
) -> None:
    kube = k8s_control_plane.kube
    topologies = path(GROUP, "topologies", namespace=NS)
    shards = path(GROUP, "shards", namespace=NS)
    pods = path("v1", "pods", namespace=NS)
    topo = kube.create(topologies, _topology(_name("cascade")))
    shard = kube.create(
        shards,
        {
            "apiVersion": GROUP,
            "kind": "Shard",
            "metadata": {"name": _name("shard"), "ownerReferences": [_owner(topo)]},
            "spec": {
                "topology": topo["metadata"]["name"],
                "machine": "machine-a",
                "part": {"nodes": {"h1": {}}},
                "cutLinks": [CUT],
            },
        },
    )
    pod = kube.create(
        pods,
        _pod(_name("agent"), _owner(shard), nodeSelector={"kubernetes.io/hostname": "machine-a"}),
    )
    shard_url = f"{shards}/{shard['metadata']['name']}"
    pod_url = f"{pods}/{pod['metadata']['name']}"
    kube.delete(f"{topologies}/{topo['metadata']['name']}", propagation=propagation)
    for url in (shard_url, pod_url):
        poll(
            lambda url=url: _gone(kube, url),
            what=f"{propagation}: {url} deleted",
            timeout=GC_TIMEOUT_S,
        )
    topo_url = f"{topologies}/{topo['metadata']['name']}"
    poll(lambda: _gone(kube, topo_url), what=f"{topo_url} deleted", timeout=GC_TIMEOUT_S)


def test_the_scheduler_binds_pods_to_kwok_nodes_which_run_them(
    k8s_control_plane: ControlPlane,
) -> None:
    kube = k8s_control_plane.kube
    pods = path("v1", "pods", namespace=NS)
    anywhere = kube.create(pods, _pod(_name("any")))
    on_b = {MACHINE_LABEL: "true", "kubernetes.io/hostname": "machine-b"}
    pinned = kube.create(pods, _pod(_name("pinned"), nodeSelector=on_b))
    urls = [f"{pods}/{p['metadata']['name']}" for p in (anywhere, pinned)]

    def running(url: str) -> tuple[str | None, str]:
        pod = kube.get(url)
        node, phase = pod["spec"].get("nodeName"), pod.get("status", {}).get("phase")
        return (node if node and phase == "Running" else None), f"node {node}, phase {phase}"

    try:
        nodes = [poll(lambda u=u: running(u), what=f"{u} running", timeout=WAIT_S) for u in urls]
        assert nodes[0] in ("machine-a", "machine-b")
        assert nodes[1] == "machine-b"
        about = f"involvedObject.name={pinned['metadata']['name']}"

        def scheduled() -> tuple[bool | None, str]:
            events = kube.get(path("v1", "events", namespace=NS), fieldSelector=about)
            reasons = [e["reason"] for e in events["items"]]
            return (True if "Scheduled" in reasons else None), f"events {reasons}"

        poll(scheduled, what="the scheduler's event", timeout=WAIT_S)
    finally:
        for url in urls:
            kube.delete(url)
        for url in urls:
            poll(lambda url=url: _gone(kube, url), what=f"{url} deleted", timeout=WAIT_S)


# -- a control plane of its own ----------------------------------------------------------


def _identities(cp: ControlPlane) -> dict[str, tuple[int, int]]:
    out = {}
    for name, pid in cp.pids().items():
        start = process_start_time(pid)
        assert start is not None
        out[name] = (pid, start)
    return out


def test_stop_ends_every_process_by_pid_and_removes_the_directory(k8s_bin: str) -> None:
    cp = ControlPlane(k8s_bin).start()
    print(f"\nstarted in {cp.started_s:.1f} s")
    procs = _identities(cp)
    where, state_file = cp.dir, os.path.join(STATE_DIR, f"{cp.run_id}.jsonl")
    assert sorted(procs) == sorted(
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    )
    assert os.path.isdir(where) and os.path.basename(where) == f"{cp.run_id}.k8s"
    assert os.path.isfile(state_file)
    t0 = time.monotonic()
    cp.stop()
    print(f"stopped in {time.monotonic() - t0:.1f} s")
    left = {n: pid for n, (pid, start) in procs.items() if process_matches(pid, start)}
    assert left == {}
    assert not os.path.exists(where)
    assert not os.path.exists(state_file)
    cp.stop()  # twice: a no-op


OWNER = """
import json, sys, time
sys.path.insert(0, {src!r})
from fidelnet.cluster.controlplane import ControlPlane
cp = ControlPlane({bin!r}).start()
print(json.dumps({{"run": cp.run_id, "dir": cp.dir, "pids": cp.pids()}}), flush=True)
time.sleep(3600)
"""


def test_clean_stops_the_control_plane_of_a_killed_owner(k8s_bin: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", OWNER.format(src=SRC, bin=k8s_bin)],
        stdout=subprocess.PIPE,
        text=True,
    ) as owner:
        try:
            assert owner.stdout is not None
            line = owner.stdout.readline()  # the owner prints once started (or exits)
            assert line, f"the owner exited with {owner.wait()} before its control plane was up"
            started = json.loads(line)
            procs = {}
            for name, pid in started["pids"].items():
                start = process_start_time(pid)
                assert start is not None
                procs[name] = (pid, start)
        finally:
            owner.send_signal(signal.SIGKILL)
            owner.wait()
    assert all(process_matches(pid, start) for pid, start in procs.values())  # orphans now
    done = subprocess.run(
        [sys.executable, "-m", "fidelnet", "clean"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"run {started['run']}" in done.stdout
    left = {n: pid for n, (pid, start) in procs.items() if process_matches(pid, start)}
    assert left == {}, done.stdout
    assert not os.path.exists(started["dir"])
    assert not os.path.exists(os.path.join(STATE_DIR, f"{started['run']}.jsonl"))


def _fake_bin(tmp_path: Path, k8s_bin: str, fakes: dict[str, str]) -> str:
    """A bin dir of the real binaries but for ``fakes`` (name: shell script body)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "share").symlink_to(Path(k8s_bin).parent / "share")
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        if name in fakes:
            (bin_dir / name).write_text("#!/bin/sh\n" + fakes[name])
            (bin_dir / name).chmod(0o755)
        else:
            (bin_dir / name).symlink_to(Path(k8s_bin) / name)
    return str(bin_dir)


def test_a_component_that_exits_is_named_with_its_log_and_nothing_is_left(
    tmp_path: Path, k8s_bin: str
) -> None:
    fake = _fake_bin(
        tmp_path, k8s_bin, {"kube-apiserver": "echo 'E0000 bad flag --x' >&2\nexit 3\n"}
    )
    before = set(os.listdir(STATE_DIR))
    cp = ControlPlane(fake)
    with pytest.raises(ControlPlaneError) as info:
        cp.start()
    assert info.value.component == "kube-apiserver"
    assert "exited with status 3 while starting" in str(info.value)
    assert "E0000 bad flag --x" in info.value.log_tail
    assert set(os.listdir(STATE_DIR)) - before == set()  # its directory and record gone
    assert cp.ports is not None
    with pytest.raises(ConnectionRefusedError):  # etcd, which had started, is stopped
        socket.create_connection(("127.0.0.1", cp.ports.etcd_client), timeout=10).close()


def test_a_port_taken_meanwhile_is_a_new_start_on_new_ports(tmp_path: Path, k8s_bin: str) -> None:
    calls = tmp_path / "calls"
    fake = _fake_bin(
        tmp_path,
        k8s_bin,
        {"etcd": f'echo "$@" >> {calls}\necho "bind: address already in use"\nexit 1\n'},
    )
    with pytest.raises(ControlPlaneError) as info:
        ControlPlane(fake).start()
    assert info.value.component == "etcd"
    lines = calls.read_text().splitlines()
    assert len(lines) == 3  # PORT_TRIES starts, each on other ports
    assert len(set(lines)) == 3
