"""The command lines and files of the test control plane (:mod:`.controlplane`).

Pure: nothing here starts a process or touches the machine, so every flag is
unit-tested. :class:`Layout` names the files of one control plane's directory,
:class:`Ports` its loopback ports, :class:`Tokens` its bearer tokens; the
``*_argv`` functions build each component's argv, the ``*_text`` functions the
files it reads.

Who is who. The API server knows four tokens (``--token-auth-file``):

- ``admin`` (group ``system:masters``): the user, the tests, kwok (a stand-in for
  kubelets, not a part of a real cluster);
- ``system:kube-controller-manager`` and ``system:kube-scheduler``: the identities a
  kubeadm cluster gives these components, which the API server's bootstrap RBAC
  roles already bind. The controller manager runs each controller with its own
  service account's token (``--use-service-account-credentials``), as kubeadm does.

Authorization is ``Node,RBAC``, as on a real cluster, not ``AlwaysAllow``: the
manifests fidelnet ships (the controller's ClusterRole, the agents' Role) are to
be tested against an API server that enforces them, and ``system:masters`` already
lets the admin token do everything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONTROLLERS",
    "SERVICE_CIDR",
    "Layout",
    "Ports",
    "Tokens",
    "apiserver_argv",
    "controller_manager_argv",
    "etcd_argv",
    "kubeconfig_text",
    "kwok_argv",
    "scheduler_argv",
    "tokens_csv",
]

SERVICE_CIDR = "10.96.0.0/16"
"""Service addresses the API server allocates: records only, no traffic goes there
(there is no kube-proxy)."""

POD_CIDR = "10.244.0.1/16"
"""The Pod addresses kwok hands out: records only, like the Nodes themselves."""

CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "root-ca-certificate-publisher-controller",
    "node-lifecycle-controller",
    "pod-garbage-collector-controller",
    "replicaset-controller",
    "deployment-controller",
)
"""The controller manager's controllers: the garbage collector (ownerReferences:
Topology, Shards, Pods), namespaces' deletion, each namespace's default service
account and root CA (which Pods need to be admitted), Nodes whose kwok lease lapses
(NotReady), Pods left on deleted Nodes, and Deployments (how the fidelnet controller
runs on a cluster). Not the rest: fewer informers, less CPU on a 2-core machine."""

ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclass(frozen=True)
class Ports:
    """The loopback ports of one control plane."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    def all(self) -> tuple[int, ...]:
        return (
            self.etcd_client,
            self.etcd_peer,
            self.apiserver,
            self.controller_manager,
            self.scheduler,
            self.kwok,
        )


@dataclass(frozen=True)
class Tokens:
    """The bearer tokens the API server accepts (hex, from :mod:`secrets`)."""

    admin: str
    controller_manager: str
    scheduler: str


@dataclass(frozen=True)
class Layout:
    """The files of one control plane, all in its directory ``root``."""

    root: str

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def etcd_data(self) -> str:
        return self.path("etcd")

    @property
    def tokens(self) -> str:
        return self.path("tokens.csv")

    @property
    def sa_key(self) -> str:
        """The service-account signing key (private, PEM)."""
        return self.path("sa.key")

    @property
    def sa_pub(self) -> str:
        return self.path("sa.pub")

    def certs(self, component: str) -> str:
        """Where ``component`` writes its self-signed serving certificate."""
        return self.path("certs", component)

    @property
    def apiserver_ca(self) -> str:
        """The API server's self-signed certificate and its CA (one file)."""
        return os.path.join(self.certs("kube-apiserver"), "apiserver.crt")

    def kubeconfig(self, user: str) -> str:
        return self.path(f"{user}.kubeconfig")

    @property
    def kwok_config(self) -> str:
        return self.path("kwok.yaml")

    def log(self, component: str) -> str:
        return self.path(f"{component}.log")


def _url(port: int, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{port}"


def etcd_argv(binary: str, layout: Layout, ports: Ports, name: str) -> list[str]:
    """One etcd member on the loopback. ``--unsafe-no-fsync``: its data is thrown
    away with the control plane, and an fsync stalled by a busy disk must not make
    the API server time out (the tests are not about etcd's durability)."""
    client, peer = _url(ports.etcd_client), _url(ports.etcd_peer)
    return [
        binary,
        f"--name={name}",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster={name}={peer}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def apiserver_argv(binary: str, layout: Layout, ports: Ports) -> list[str]:
    """kube-apiserver on 127.0.0.1 with a self-signed certificate (in its cert dir),
    static tokens, RBAC, and privileged Pods allowed (shard Pods are privileged)."""
    return [
        binary,
        f"--etcd-servers={_url(ports.etcd_client)}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={layout.certs('kube-apiserver')}",
        f"--token-auth-file={layout.tokens}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--service-account-issuer={ISSUER}",
        f"--service-account-key-file={layout.sa_pub}",
        f"--service-account-signing-key-file={layout.sa_key}",
        "--profiling=false",
        "--v=1",
    ]


def _component_common(layout: Layout, component: str, user: str, port: int) -> list[str]:
    kubeconfig = layout.kubeconfig(user)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        # Tokens only: no client CA to look up (the API server has none; looking
        # for it logs an error a second).
        "--authentication-skip-lookup=true",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={layout.certs(component)}",
        "--leader-elect=false",
        "--profiling=false",
        "--v=1",
    ]


def controller_manager_argv(binary: str, layout: Layout, ports: Ports) -> list[str]:
    """kube-controller-manager with :data:`CONTROLLERS`, each controller under its
    own service account (kubeadm's way; the bootstrap RBAC roles fit it)."""
    return [
        binary,
        *_component_common(
            layout, "kube-controller-manager", "controller-manager", ports.controller_manager
        ),
        "--controllers=" + ",".join(CONTROLLERS),
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={layout.sa_key}",
        f"--root-ca-file={layout.apiserver_ca}",
    ]


def scheduler_argv(binary: str, layout: Layout, ports: Ports) -> list[str]:
    return [
        binary,
        *_component_common(layout, "kube-scheduler", "scheduler", ports.scheduler),
    ]


NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""kwok manages the Nodes whose annotation ``kwok.x-k8s.io/node`` is ``fake``, and
only those."""


def kwok_argv(binary: str, layout: Layout, ports: Ports) -> list[str]:
    """kwok faking the kubelet of every Node annotated ``kwok.x-k8s.io/node=fake``
    (Ready, a lease renewed, its Pods Running), with the stages in its config file.
    Its server (health, logs, exec of fake Pods) on the loopback only."""
    return [
        binary,
        f"--config={layout.kwok_config}",
        f"--kubeconfig={layout.kubeconfig('admin')}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}=fake",
        f"--cidr={POD_CIDR}",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{ports.kwok}",
    ]


def tokens_csv(tokens: Tokens) -> str:
    """The API server's ``--token-auth-file``: token, user, uid, groups."""
    rows = [
        (tokens.admin, "admin", "fidelnet-admin", "system:masters"),
        (tokens.controller_manager, "system:kube-controller-manager", "fidelnet-kcm", ""),
        (tokens.scheduler, "system:kube-scheduler", "fidelnet-scheduler", ""),
    ]
    return "".join(
        f"{tok},{user},{uid}" + (f',"{groups}"' if groups else "") + "\n"
        for tok, user, uid, groups in rows
    )


def kubeconfig_text(cluster: str, server: str, token: str, user: str, ca_pem: str) -> str:
    """A kubeconfig (JSON, which is YAML too) for ``user`` with a bearer token and
    the API server's CA embedded (the file works wherever it is copied)."""
    import base64
    import json

    config: Mapping[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    }
    return json.dumps(config, indent=2) + "\n"
