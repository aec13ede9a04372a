"""A real Kubernetes control plane on this machine, for tests and for trying things.

:class:`ControlPlane` starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (which plays the kubelet of fake Nodes: how "machines"
appear as Nodes here) from binaries that ``scripts/k8s-build`` built from the Go
module proxy (docs/cluster.md), on loopback ports, and stops them::

    with ControlPlane(bin_dir) as cp:     # bin_dir: what scripts/k8s-build prints
        cp.add_nodes("machine-a", "machine-b")
        cp.apply_crds(["deploy/crds/topologies.fidelnet.dev.yaml", ...])
        cp.kube.get("/version")           # a :class:`~fidelnet.cluster.kube.Kube`
        # kubectl --kubeconfig cp.kubeconfig ...

Ownership follows every other fidelnet run (:mod:`fidelnet.kernel.state`): a state
file ``/run/fidelnet/<run-id>.jsonl`` records the directory ``<run-id>.k8s/`` beside
it before it exists (etcd's data, certificates, tokens, kubeconfigs, one log per
component) and each process (pid and start time) as soon as it exists. :meth:`stop`
ends them by pid (SIGTERM, SIGKILL after ``stop_timeout``, each waited for) and
removes the directory; if the owner dies first, ``fidelnet clean`` does the same
from the records. Nothing is ever ended by name. Root is needed (the state
directory), as for any run.

Command lines and files: :mod:`.cpconfig` (who gets which token, why RBAC).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from fidelnet.cluster import cpconfig
from fidelnet.cluster._procs import end_group, free_ports, read_text, write_private
from fidelnet.cluster.cpconfig import Layout, Ports, Tokens
from fidelnet.cluster.kube import Kube, KubeError, KubeTimeoutError, path, poll
from fidelnet.errors import FidelnetError
from fidelnet.kernel.state import STATE_DIR, RunState, process_start_time

__all__ = [
    "BINARIES",
    "KUBE_VERSION",
    "MACHINE_LABEL",
    "ControlPlane",
    "ControlPlaneError",
]

KUBE_VERSION = "v1.36.3"
"""What the API server reports (scripts/k8s-build pins it)."""
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
"""In start order; stopped in the reverse order."""
MACHINE_LABEL = "fidelnet.dev/machine"
READY_TIMEOUT_S = 180.0
"""How long each component may take to be ready: several times the slowest start
measured on a busy 2-core machine (docs/cluster.md)."""
STOP_TIMEOUT_S = 15.0
"""How long a component has to exit after SIGTERM before it is killed."""
LOG_TAIL_LINES = 12
PORT_TRIES = 3


class ControlPlaneError(FidelnetError):
    """A component did not start, or the control plane could not be stopped
    cleanly. ``component`` names it, ``log_tail`` is the end of its log."""

    def __init__(self, component: str, problem: str, log_tail: str = "") -> None:
        self.component = component
        self.problem = problem
        self.log_tail = log_tail
        tail = f"\n  its log ends:\n    {log_tail}" if log_tail else ""
        super().__init__(f"{component}: {problem}{tail}")


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    start: int | None


class ControlPlane:
    """One control plane: :meth:`start` (or ``with``), :meth:`stop`."""

    def __init__(
        self,
        bin_dir: str | None = None,
        *,
        ready_timeout: float = READY_TIMEOUT_S,
        stop_timeout: float = STOP_TIMEOUT_S,
    ) -> None:
        bin_dir = bin_dir or os.environ.get("FIDELNET_K8S_BIN")
        if not bin_dir:
            raise ControlPlaneError(
                "control plane",
                "no binaries given: pass the directory scripts/k8s-build prints "
                "(or set FIDELNET_K8S_BIN)",
            )
        missing = [b for b in BINARIES if not os.access(os.path.join(bin_dir, b), os.X_OK)]
        if missing:
            raise ControlPlaneError(
                "control plane",
                f"{bin_dir}: no {', '.join(missing)} there (run scripts/k8s-build or make k8s)",
            )
        self.bin_dir = bin_dir
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self._state: RunState | None = None
        self._procs: list[_Proc] = []
        self._kube: Kube | None = None
        self.layout: Layout | None = None
        self.ports: Ports | None = None
        self.started_s: float | None = None
        """Seconds :meth:`start` took."""

    # -- what users reach ------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self._need_state().run_id

    @property
    def dir(self) -> str:
        return self._need_layout().root

    @property
    def kubeconfig(self) -> str:
        """The admin's kubeconfig (token of group ``system:masters``, CA embedded)."""
        return self._need_layout().kubeconfig("admin")

    @property
    def server(self) -> str:
        assert self.ports is not None, "the control plane is not started"
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def kube(self) -> Kube:
        """A client with the admin's token."""
        if self._kube is None:
            raise ControlPlaneError("control plane", "not started")
        return self._kube

    def pids(self) -> dict[str, int]:
        """Each running component's pid."""
        return {p.name: p.popen.pid for p in self._procs if p.popen.poll() is None}

    def _need_state(self) -> RunState:
        if self._state is None:
            raise ControlPlaneError("control plane", "not started")
        return self._state

    def _need_layout(self) -> Layout:
        if self.layout is None:
            raise ControlPlaneError("control plane", "not started")
        return self.layout

    # -- start -----------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start every component and wait until each is ready; on any failure (or an
        interrupt) what was started is stopped again before the error is raised. A
        port taken by another process between its choice and its use (a component
        exits with "address already in use") is a new start on new ports, at most
        :data:`PORT_TRIES` times."""
        if self._state is not None:
            raise ControlPlaneError("control plane", "already started")
        t0 = time.monotonic()
        for attempt in range(1, PORT_TRIES + 1):
            try:
                self._state = RunState.create(command="fidelnet: test Kubernetes control plane")
            except OSError as exc:
                raise ControlPlaneError(
                    "control plane", f"cannot record it in {STATE_DIR} ({exc}); run as root"
                ) from exc
            try:
                self._start()
            except ControlPlaneError as exc:
                with contextlib.suppress(ControlPlaneError):  # its state file stays
                    self.stop()
                if "address already in use" not in exc.log_tail or attempt == PORT_TRIES:
                    raise
                continue
            except BaseException:
                with contextlib.suppress(ControlPlaneError):
                    self.stop()
                raise
            break
        self.started_s = time.monotonic() - t0
        return self

    def _start(self) -> None:
        state = self._need_state()
        root = os.path.join(STATE_DIR, f"{state.run_id}.k8s")
        state.record("tree", path=root)
        os.makedirs(root, mode=0o700)
        self.layout = layout = Layout(root)
        self.ports = ports = Ports(*free_ports(6))
        state.record("info", what="kubernetes control plane", kubeconfig=self.kubeconfig)
        tokens = Tokens(secrets.token_hex(16), secrets.token_hex(16), secrets.token_hex(16))
        write_private(layout.tokens, cpconfig.tokens_csv(tokens))
        self._service_account_key(layout)

        self._spawn("etcd", cpconfig.etcd_argv(self._bin("etcd"), layout, ports, state.run_id))
        self._wait("etcd", self._etcd_healthy)
        self._spawn(
            "kube-apiserver", cpconfig.apiserver_argv(self._bin("kube-apiserver"), layout, ports)
        )
        self._wait("kube-apiserver", lambda: self._apiserver_ready(tokens.admin))

        ca = read_text(layout.apiserver_ca)
        cluster = f"fidelnet-{state.run_id}"
        for user, token in (
            ("admin", tokens.admin),
            ("controller-manager", tokens.controller_manager),
            ("scheduler", tokens.scheduler),
        ):
            text = cpconfig.kubeconfig_text(cluster, self.server, token, user, ca)
            write_private(layout.kubeconfig(user), text)
        shutil.copyfile(self._kwok_stages(), layout.kwok_config)

        starts: list[tuple[str, list[str], int]] = [
            (
                "kube-controller-manager",
                cpconfig.controller_manager_argv(
                    self._bin("kube-controller-manager"), layout, ports
                ),
                ports.controller_manager,
            ),
            (
                "kube-scheduler",
                cpconfig.scheduler_argv(self._bin("kube-scheduler"), layout, ports),
                ports.scheduler,
            ),
            ("kwok", cpconfig.kwok_argv(self._bin("kwok"), layout, ports), ports.kwok),
        ]
        for name, argv, _ in starts:
            self._spawn(name, argv)
        for name, _, port in starts:
            self._wait(name, self._healthz_check(name, port))
        # The controllers work once the default service account exists: Pods are
        # admitted only then.
        sa = path("v1", "serviceaccounts", "default", namespace="default")
        self._wait("kube-controller-manager", lambda: self._exists(sa, "default service account"))

    def _bin(self, name: str) -> str:
        return os.path.join(self.bin_dir, name)

    def _kwok_stages(self) -> str:
        """kwok's own stages (Node initialize and heartbeat with lease, Pod ready,
        complete, delete), which scripts/k8s-build copies from kwok's module."""
        stages = os.path.join(
            os.path.dirname(self.bin_dir.rstrip("/")), "share", "kwok-stages.yaml"
        )
        if not os.path.isfile(stages):
            raise ControlPlaneError("kwok", f"no stages at {stages} (rebuild: scripts/k8s-build)")
        return stages

    def _service_account_key(self, layout: Layout) -> None:
        """The key that signs service-account tokens: EC P-256, made by ``openssl``
        (the ``cryptography`` package is not one of fidelnet's dependencies)."""
        for argv in (
            ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", layout.sa_key],
            ["openssl", "pkey", "-in", layout.sa_key, "-pubout", "-out", layout.sa_pub],
        ):  # fmt: skip
            try:
                p = subprocess.run(argv, capture_output=True, text=True, check=False)
            except FileNotFoundError as exc:
                raise ControlPlaneError(
                    "service-account key", "openssl not found (Debian: apt-get install openssl)"
                ) from exc
            if p.returncode != 0:
                raise ControlPlaneError(
                    "service-account key", f"{' '.join(argv[:2])}: {p.stderr.strip()}"
                )

    def _spawn(self, name: str, argv: Sequence[str]) -> None:
        layout = self._need_layout()
        with open(layout.log(name), "ab") as log:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=layout.root,
                start_new_session=True,
            )
        start = process_start_time(popen.pid)
        self._procs.append(_Proc(name, popen, start))
        if start is not None:
            self._need_state().record("process", pid=popen.pid, start=start, what=name)

    def log_tail(self, name: str, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of component ``name``'s log."""
        try:
            with open(self._need_layout().log(name), encoding="utf-8", errors="replace") as f:
                return "\n    ".join(f.read().splitlines()[-lines:])
        except OSError:
            return ""

    def _wait(self, name: str, check: Callable[[], tuple[bool | None, str]]) -> None:
        """Wait until ``check`` says ready; fail at once, naming the component,
        when any component exits, and after :attr:`ready_timeout`."""

        def look() -> tuple[bool | None, str]:
            for p in self._procs:
                code = p.popen.poll()
                if code is not None:
                    raise ControlPlaneError(
                        p.name, f"exited with status {code} while starting", self.log_tail(p.name)
                    )
            return check()

        try:
            poll(look, what=f"{name} ready", timeout=self.ready_timeout, interval=0.1)
        except KubeTimeoutError as exc:
            raise ControlPlaneError(
                name,
                f"not ready within {self.ready_timeout:.0f} s ({exc.last})",
                self.log_tail(name),
            ) from exc

    def _etcd_healthy(self) -> tuple[bool | None, str]:
        import json
        import urllib.request

        assert self.ports is not None
        url = f"http://127.0.0.1:{self.ports.etcd_client}/health"
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError) as exc:
            return None, f"GET /health: {exc}"
        return (True if body.get("health") == "true" else None), f"/health says {body}"

    def _apiserver_ready(self, token: str) -> tuple[bool | None, str]:
        layout = self._need_layout()
        if self._kube is None:
            try:
                ca = read_text(layout.apiserver_ca)
                kube = Kube(self.server, token, ca_pem=ca, timeout=10)
            except (OSError, ssl.SSLError) as exc:
                return None, f"no serving certificate yet ({exc})"
            self._kube = kube
        try:
            answer = self._kube.request("GET", "/readyz")
        except KubeError as exc:
            failing = [ln for ln in exc.message.splitlines() if ln.startswith("[-]")]
            return None, "; ".join(failing) or str(exc)
        return (True if str(answer).strip() == "ok" else None), f"/readyz says {answer!r}"

    def _healthz_check(self, name: str, port: int) -> Callable[[], tuple[bool | None, str]]:
        """GET /healthz of a component serving on ``port`` (its own self-signed
        certificate, not checked: the loopback, and only whether it answers ok)."""
        scheme = "http" if name == "kwok" else "https"
        probe = Kube(f"{scheme}://127.0.0.1:{port}", "", insecure=True, timeout=5)

        def check() -> tuple[bool | None, str]:
            answer = probe.request("GET", "/healthz")
            return (True if str(answer).strip() == "ok" else None), f"/healthz says {answer!r}"

        return check

    def _exists(self, url_path: str, what: str) -> tuple[bool | None, str]:
        return (True if self.kube.exists(url_path) else None), f"no {what} yet"

    # -- using it --------------------------------------------------------------

    def add_nodes(self, *names: str, labels: dict[str, str] | None = None) -> None:
        """Nodes that kwok runs (Ready, their lease renewed, their Pods Running),
        labelled ``fidelnet.dev/machine``; returns once each is Ready."""
        for name in names:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {cpconfig.NODE_ANNOTATION: "fake"},
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok",
                        MACHINE_LABEL: "true",
                        **(labels or {}),
                    },
                },
                "spec": {},
            }
            self.kube.create(path("v1", "nodes"), node)
        for name in names:
            self._wait("kwok", functools.partial(self._node_ready, name))

    def _node_ready(self, name: str) -> tuple[bool | None, str]:
        node = self.kube.get(path("v1", "nodes", name))
        conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
        return (True if conds.get("Ready") == "True" else None), f"node {name} conditions {conds}"

    def apply_crds(self, files: Iterable[str]) -> list[str]:
        """Create (or replace) the CustomResourceDefinitions in ``files`` (YAML, one
        or more documents each) and wait until each is Established; their names."""
        import yaml

        crds = path("apiextensions.k8s.io/v1", "customresourcedefinitions")
        names = []
        for file in files:
            with open(file, encoding="utf-8") as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            for doc in docs:
                self.kube.apply(crds, doc)
                names.append(str(doc["metadata"]["name"]))
        for name in names:
            self._wait("kube-apiserver", functools.partial(self._established, crds, name))
        return names

    def _established(self, crds: str, name: str) -> tuple[bool | None, str]:
        crd: dict[str, Any] = self.kube.get(f"{crds}/{name}")
        conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
        return (True if conds.get("Established") == "True" else None), f"{name}: {conds}"

    # -- stop ------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every component (newest first: SIGTERM to its process group, SIGKILL
        after :attr:`stop_timeout`), wait for each, remove the directory and the
        state file. Raises :class:`ControlPlaneError` listing what could not be
        removed (the state file then stays, for ``fidelnet clean``)."""
        state = self._state
        if state is None:
            return
        from fidelnet.kernel.teardown import remove_all

        for p in reversed(self._procs):
            # One that outlives SIGKILL stays recorded: remove_all names it.
            if end_group(p.popen, self.stop_timeout) and p.start is not None:
                state.gone("process", pid=p.popen.pid, start=p.start)
        self._procs.clear()
        self._kube = None
        problems = remove_all(state)
        state.close(remove=not problems)
        self._state = None
        if problems:
            raise ControlPlaneError("control plane", "stop left: " + "; ".join(problems))
