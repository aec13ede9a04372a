"""The test control plane's command lines, files, CRDs, build script and REST client,
without root or binaries (the real thing: tests/privileged/test_k8s_controlplane.py)."""

from __future__ import annotations

import csv
import http.server
import io
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fidelnet.cluster import cpconfig
from fidelnet.cluster._procs import free_ports
from fidelnet.cluster.controlplane import BINARIES, KUBE_VERSION, ControlPlane, ControlPlaneError
from fidelnet.cluster.cpconfig import Layout, Ports, Tokens
from fidelnet.cluster.kube import Kube, KubeError, KubeTimeoutError, path, poll

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "cluster" / "controlplane"
SCRIPT = REPO / "scripts" / "k8s-build"
CRD_DIR = REPO / "deploy" / "crds"

LAYOUT = Layout("/run/fidelnet/abc123.k8s")
PORTS = Ports(2379, 2380, 6443, 10257, 10259, 10247)
TOKENS = Tokens("a" * 32, "b" * 32, "c" * 32)

# A self-signed CA certificate (EC P-256), only ever parsed.
CA_PEM = """-----BEGIN CERTIFICATE-----
MIIBjjCCATOgAwIBAgIUJtSZDf2mwKpQkzCwIHJfPFdlt78wCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQZmlkZWxuZXQtdGVzdC1jYTAgFw0yNjExMjgxMzEwMjZaGA8y
MTI2MTEwNDEzMTAyNlowGzEZMBcGA1UEAwwQZmlkZWxuZXQtdGVzdC1jYTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABPUf9zosFANKpLsY5zwJjggjhAG8de/oOR1W
JIqdCvtIbi7kOw+AvY0YU14Ljj2BqdIfHfLEDwzt21HN4NGFH5KjUzBRMB0GA1Ud
DgQWBBT4EccJYDyNNC/5Mhzu9EgO5E4tzDAfBgNVHSMEGDAWgBT4EccJYDyNNC/5
Mhzu9EgO5E4tzDAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQC5
/vPKagZT9zYHhsn/X+h3n/3MDMB5daNj1Jgn3/LGNAIhAP6tXSupEwV4KyrF0Pp1
BBxTpF818UNERhZBbRdzpL9d
-----END CERTIFICATE-----
"""


def flags(argv: list[str]) -> dict[str, str]:
    """``--name=value`` flags of an argv (after the binary), each given once."""
    out: dict[str, str] = {}
    for arg in argv[1:]:
        assert arg.startswith("--") and "=" in arg, f"not --name=value: {arg!r}"
        name, _, value = arg[2:].partition("=")
        assert name not in out, f"--{name} given twice"
        out[name] = value
    return out


def all_argvs() -> dict[str, list[str]]:
    return {
        "etcd": cpconfig.etcd_argv("/b/etcd", LAYOUT, PORTS, "abc123"),
        "kube-apiserver": cpconfig.apiserver_argv("/b/kube-apiserver", LAYOUT, PORTS),
        "kube-controller-manager": cpconfig.controller_manager_argv(
            "/b/kube-controller-manager", LAYOUT, PORTS
        ),
        "kube-scheduler": cpconfig.scheduler_argv("/b/kube-scheduler", LAYOUT, PORTS),
        "kwok": cpconfig.kwok_argv("/b/kwok", LAYOUT, PORTS),
    }


# -- command lines ----------------------------------------------------------------


def test_every_component_gets_its_binary_and_well_formed_flags_once() -> None:
    argvs = all_argvs()
    assert sorted(argvs) == sorted(BINARIES)
    for name, argv in argvs.items():
        assert argv[0] == f"/b/{name}"
        flags(argv)


def test_every_component_listens_on_the_loopback_only() -> None:
    for name, argv in all_argvs().items():
        for value in flags(argv).values():
            assert "0.0.0.0" not in value, (name, value)
            for host in re.findall(r"(?:https?://)?(\d+\.\d+\.\d+\.\d+):\d+", value):
                assert host == "127.0.0.1", (name, value)
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        assert flags(all_argvs()[name])["bind-address"] == "127.0.0.1"


def test_etcd_is_one_member_on_its_two_ports_with_its_data_in_the_run_directory() -> None:
    f = flags(all_argvs()["etcd"])
    assert f["data-dir"] == "/run/fidelnet/abc123.k8s/etcd"
    assert f["listen-client-urls"] == f["advertise-client-urls"] == "http://127.0.0.1:2379"
    assert f["listen-peer-urls"] == f["initial-advertise-peer-urls"] == "http://127.0.0.1:2380"
    assert f["initial-cluster"] == "abc123=http://127.0.0.1:2380"
    assert f["name"] == "abc123"
    assert f["unsafe-no-fsync"] == "true"


def test_the_apiserver_enforces_rbac_with_static_tokens_and_its_own_certificate() -> None:
    f = flags(all_argvs()["kube-apiserver"])
    assert f["etcd-servers"] == "http://127.0.0.1:2379"
    assert f["secure-port"] == "6443"
    assert f["authorization-mode"] == "Node,RBAC"
    assert f["token-auth-file"] == "/run/fidelnet/abc123.k8s/tokens.csv"
    assert f["cert-dir"] == "/run/fidelnet/abc123.k8s/certs/kube-apiserver"
    assert f["allow-privileged"] == "true"
    assert f["service-account-signing-key-file"] == LAYOUT.sa_key
    assert f["service-account-key-file"] == LAYOUT.sa_pub
    assert LAYOUT.apiserver_ca.startswith(f["cert-dir"] + "/")


def test_the_controller_manager_runs_the_garbage_collector_under_service_accounts() -> None:
    f = flags(all_argvs()["kube-controller-manager"])
    controllers = f["controllers"].split(",")
    assert "garbage-collector-controller" in controllers
    assert "serviceaccount-controller" in controllers
    assert "*" not in controllers
    assert f["use-service-account-credentials"] == "true"
    kubeconfig = LAYOUT.kubeconfig("controller-manager")
    assert f["kubeconfig"] == f["authentication-kubeconfig"] == kubeconfig
    assert f["authorization-kubeconfig"] == kubeconfig
    assert f["authentication-skip-lookup"] == "true"
    assert f["secure-port"] == "10257"
    assert f["leader-elect"] == "false"
    assert f["root-ca-file"] == LAYOUT.apiserver_ca


def test_the_scheduler_has_its_own_identity_and_port() -> None:
    f = flags(all_argvs()["kube-scheduler"])
    assert f["kubeconfig"] == LAYOUT.kubeconfig("scheduler")
    assert f["secure-port"] == "10259"
    assert f["cert-dir"] == "/run/fidelnet/abc123.k8s/certs/kube-scheduler"


def test_kwok_manages_only_nodes_annotated_fake() -> None:
    f = flags(all_argvs()["kwok"])
    assert f["manage-all-nodes"] == "false"
    assert f["manage-nodes-with-annotation-selector"] == "kwok.x-k8s.io/node=fake"
    assert f["server-address"] == "127.0.0.1:10247"
    assert f["config"] == LAYOUT.kwok_config
    assert f["kubeconfig"] == LAYOUT.kubeconfig("admin")
    assert int(f["node-lease-duration-seconds"]) > 0


# -- files ----------------------------------------------------------------------


def test_the_token_file_names_each_identity_once_and_only_admin_is_a_master() -> None:
    rows = list(csv.reader(io.StringIO(cpconfig.tokens_csv(TOKENS))))
    assert [r[:3] for r in rows] == [
        ["a" * 32, "admin", "fidelnet-admin"],
        ["b" * 32, "system:kube-controller-manager", "fidelnet-kcm"],
        ["c" * 32, "system:kube-scheduler", "fidelnet-scheduler"],
    ]
    groups = {r[1]: (r[3] if len(r) > 3 else "") for r in rows}
    assert groups == {
        "admin": "system:masters",
        "system:kube-controller-manager": "",
        "system:kube-scheduler": "",
    }


def test_a_kubeconfig_reads_back_with_its_server_token_and_ca(tmp_path: Path) -> None:
    text = cpconfig.kubeconfig_text(
        "fidelnet-abc123", "https://127.0.0.1:6443", "t0ken", "admin", CA_PEM
    )
    assert yaml.safe_load(text) == json.loads(text)  # YAML readers (kubectl) agree
    file = tmp_path / "admin.kubeconfig"
    file.write_text(text)
    kube = Kube.from_kubeconfig(str(file))
    assert kube.server == "https://127.0.0.1:6443"
    assert kube._token == "t0ken"
    assert kube._ssl is not None and kube._ssl.verify_mode.name == "CERT_REQUIRED"
    ctx = json.loads(text)["contexts"][0]["context"]
    assert ctx == {"cluster": "fidelnet-abc123", "user": "admin"}


def test_a_kubeconfig_without_a_token_is_refused_by_name(tmp_path: Path) -> None:
    config = json.loads(cpconfig.kubeconfig_text("c", "https://127.0.0.1:1", "t", "u", CA_PEM))
    config["users"][0]["user"] = {"client-certificate": "/x.crt"}
    file = tmp_path / "k"
    file.write_text(yaml.safe_dump(config))
    with pytest.raises(Exception, match="user 'u' has no bearer token"):
        Kube.from_kubeconfig(str(file))


def test_layout_keeps_every_file_in_the_run_directory() -> None:
    paths = [
        LAYOUT.etcd_data,
        LAYOUT.tokens,
        LAYOUT.sa_key,
        LAYOUT.sa_pub,
        LAYOUT.apiserver_ca,
        LAYOUT.kwok_config,
        LAYOUT.kubeconfig("admin"),
        LAYOUT.log("etcd"),
        LAYOUT.certs("kube-scheduler"),
    ]
    for p in paths:
        assert p.startswith(LAYOUT.root + "/"), p
    assert len(set(paths)) == len(paths)


def test_free_ports_are_distinct_loopback_ports() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6
    assert all(0 < p < 65536 for p in ports)


# -- the class without binaries ------------------------------------------------------


def test_a_control_plane_without_binaries_says_where_to_get_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FIDELNET_K8S_BIN", raising=False)
    with pytest.raises(ControlPlaneError, match="scripts/k8s-build"):
        ControlPlane()
    (tmp_path / "etcd").write_text("")
    (tmp_path / "etcd").chmod(0o755)
    with pytest.raises(ControlPlaneError) as info:
        ControlPlane(str(tmp_path))
    assert "no kube-apiserver, kube-controller-manager, kube-scheduler, kwok there" in str(
        info.value
    )
    assert info.value.component == "control plane"


def test_a_control_plane_not_started_says_so(tmp_path: Path) -> None:
    for b in BINARIES:
        (tmp_path / b).write_text("")
        (tmp_path / b).chmod(0o755)
    cp = ControlPlane(str(tmp_path))
    with pytest.raises(ControlPlaneError, match="not started"):
        _ = cp.kube
    cp.stop()  # nothing to stop: a no-op


# -- the REST client -------------------------------------------------------------------


def test_paths_of_core_group_namespaced_and_subresources() -> None:
    assert path("v1", "nodes") == "/api/v1/nodes"
    assert path("v1", "pods", "p1", namespace="default") == "/api/v1/namespaces/default/pods/p1"
    assert (
        path("fidelnet.dev/v1alpha1", "topologies", "t", namespace="ns", sub="status")
        == "/apis/fidelnet.dev/v1alpha1/namespaces/ns/topologies/t/status"
    )
    assert path("v1", "nodes", "a/b") == "/api/v1/nodes/a%2Fb"


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None, str | None, bytes]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append(
            (
                self.command,
                self.path,
                self.headers.get("Authorization"),
                self.headers.get("Content-Type"),
                body,
            )
        )
        if self.path.startswith("/api/v1/nodes/missing"):
            status = {
                "kind": "Status",
                "reason": "NotFound",
                "message": 'nodes "missing" not found',
            }
            self._send(404, json.dumps(status).encode())
        elif self.path == "/readyz":
            self._send(500, b"[+]ping ok\n[-]poststarthook/rbac/bootstrap-roles failed\n")
        else:
            self._send(200, json.dumps({"method": self.command}).encode())

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_requests_carry_the_token_and_their_body(server: str) -> None:
    kube = Kube(server, "s3cret")
    assert kube.get("/api/v1/nodes") == {"method": "GET"}
    kube.patch("/api/v1/nodes/a", {"metadata": {"labels": {"x": "y"}}})
    kube.delete("/api/v1/nodes/a", propagation="Foreground")
    get, patch, delete = _Handler.seen
    assert get[2] == "Bearer s3cret"
    assert patch[0] == "PATCH" and patch[3] == "application/merge-patch+json"
    assert json.loads(patch[4]) == {"metadata": {"labels": {"x": "y"}}}
    assert json.loads(delete[4]) == {"propagationPolicy": "Foreground"}


def test_an_api_error_carries_status_reason_and_message(server: str) -> None:
    kube = Kube(server, "t")
    with pytest.raises(KubeError) as info:
        kube.get("/api/v1/nodes/missing")
    assert (info.value.status, info.value.reason) == (404, "NotFound")
    assert str(info.value) == 'GET /api/v1/nodes/missing: 404 NotFound: nodes "missing" not found'
    assert not kube.exists("/api/v1/nodes/missing")
    with pytest.raises(KubeError) as info:
        kube.get("/readyz")
    assert "[-]poststarthook/rbac/bootstrap-roles failed" in info.value.message


def test_an_unreachable_server_is_a_kube_error_with_status_0() -> None:
    port = free_ports(1)[0]
    with pytest.raises(KubeError) as info:
        Kube(f"http://127.0.0.1:{port}", "t", timeout=5).get("/version")
    assert info.value.status == 0 and info.value.reason == "Unreachable"


def test_poll_returns_the_first_value_and_quotes_the_last_look_when_it_gives_up() -> None:
    looks = iter([(None, "one"), (None, "two"), ("done", "three")])
    assert poll(lambda: next(looks), what="x", timeout=60, interval=0) == "done"

    def never() -> tuple[None, str]:
        raise KubeError("GET", "/readyz", 500, "InternalError", "not yet")

    with pytest.raises(KubeTimeoutError) as info:
        poll(never, what="kube-apiserver ready", timeout=0, interval=0)
    assert str(info.value).startswith("kube-apiserver ready: not within 0 s (last seen: GET")


# -- CRDs -----------------------------------------------------------------------------


def crds() -> dict[str, dict[str, Any]]:
    out = {}
    for file in sorted(CRD_DIR.glob("*.yaml")):
        doc = yaml.safe_load(file.read_text())
        assert file.name == doc["metadata"]["name"] + ".yaml"
        out[doc["metadata"]["name"]] = doc
    return out


def schema_at(schema: dict[str, Any], json_path: str) -> dict[str, Any]:
    node = schema
    for part in json_path.lstrip(".").split("."):
        if part in ("metadata",) and "properties" not in node.get("properties", {}).get(part, {}):
            return {"type": "object"}
        node = node["properties"][part]
    return node


@pytest.mark.parametrize(
    ("name", "kind", "plural"),
    [
        ("topologies.fidelnet.dev", "Topology", "topologies"),
        ("shards.fidelnet.dev", "Shard", "shards"),
    ],
)
def test_crds_are_namespaced_v1alpha1_with_a_status_subresource(
    name: str, kind: str, plural: str
) -> None:
    crd = crds()[name]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("fidelnet.dev", "Namespaced")
    assert (spec["names"]["kind"], spec["names"]["plural"]) == (kind, plural)
    assert name == f"{plural}.fidelnet.dev"
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    status = schema["properties"]["status"]["properties"]
    assert status["verdict"]["enum"] == ["trusted", "degraded", "untrusted"]
    assert "phase" in status


def test_every_printer_column_points_into_the_schema_with_its_type() -> None:
    for name, crd in crds().items():
        (version,) = crd["spec"]["versions"]
        schema = version["schema"]["openAPIV3Schema"]
        for col in version["additionalPrinterColumns"]:
            prop = schema_at(schema, col["jsonPath"])
            if col["type"] == "date":
                assert col["jsonPath"] == ".metadata.creationTimestamp", name
            else:
                assert prop["type"] == col["type"], (name, col)


def test_the_topology_keeps_the_scenario_unchanged_and_types_machines() -> None:
    schema = crds()["topologies.fidelnet.dev"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    assert spec["required"] == ["scenario"]
    assert spec["properties"]["scenario"] == {
        "description": spec["properties"]["scenario"]["description"],
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    machine = spec["properties"]["machines"]["items"]
    assert machine["required"] == ["name"]
    assert machine["properties"]["capacity"]["exclusiveMinimum"] is True
    shard = crds()["shards.fidelnet.dev"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert shard["properties"]["spec"]["required"] == ["topology", "machine", "part"]
    assert shard["properties"]["status"]["properties"]["agent"]["type"] == "string"


# -- the module and its build script ----------------------------------------------------


def test_the_go_module_pins_one_kubernetes_release_everywhere() -> None:
    gomod = (MODULE / "go.mod").read_text()
    assert f"\tk8s.io/kubernetes {KUBE_VERSION}\n" in gomod
    staging = "v0." + KUBE_VERSION.removeprefix("v1.")
    replaces = re.findall(r"^\t(k8s\.io/\S+) => (k8s\.io/\S+) (\S+)$", gomod, re.M)
    assert len(replaces) > 25
    for src, dst, version in replaces:
        assert (src, version) == (dst, staging)
    script = SCRIPT.read_text()
    assert f"KUBE_VERSION={KUBE_VERSION} " in script
    assert (MODULE / "go.sum").is_file()
    mains = sorted(p.parent.name for p in (MODULE / "cmd").glob("*/main.go"))
    assert mains == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]


def _script(tmp_path: Path, *args: str, go: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GO"}
    env["FIDELNET_K8S_CACHE"] = str(tmp_path / "cache")
    if go is not None:
        env["GO"] = go
        env["PATH"] = "/usr/bin:/bin"
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False
    )


def test_the_build_script_checks_its_cache_without_building(tmp_path: Path) -> None:
    done = _script(tmp_path, "--check")
    assert done.returncode == 1
    assert re.search(r"not built yet \(no .*/cache/[0-9a-f]{16}/bin\)", done.stderr)
    assert not (tmp_path / "cache").exists()
    key = re.search(r"cache/([0-9a-f]{16})/bin", done.stderr)
    assert key is not None
    bin_dir = tmp_path / "cache" / key.group(1) / "bin"
    bin_dir.mkdir(parents=True)
    for b in BINARIES:
        (bin_dir / b).write_text("")
        (bin_dir / b).chmod(0o755)
    for args in (("--check",), ()):  # cached: a no-op either way, Go not even looked for
        done = _script(tmp_path, *args, go="/nonexistent/go")
        assert (done.returncode, done.stdout.strip()) == (0, str(bin_dir))


def test_the_build_script_refuses_a_go_too_old_by_version(tmp_path: Path) -> None:
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\n[ \"$1 $2\" = 'env GOVERSION' ] && echo go1.22.4\n")
    fake.chmod(0o755)
    done = _script(tmp_path, go=str(fake))
    assert done.returncode == 1
    assert "is Go 1.22.4; the control plane needs Go >= 1.26.0" in done.stderr
    done = _script(tmp_path, go=str(tmp_path / "absent"))
    assert done.returncode == 1 and "no Go toolchain" in done.stderr
    done = _script(tmp_path, "--bogus")
    assert done.returncode == 1 and "unknown argument '--bogus'" in done.stderr
