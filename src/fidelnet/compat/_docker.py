"""Containernet's API on fidelnet: hosts that run an OCI image (the ``container``
node backend, docs/containers.md), with no Docker daemon.

``net = Containernet(...)``; ``net.addDocker('d1', ip='10.0.0.251', dimage='web:1',
dcmd='httpd -f', volumes=['/srv:/www:ro'], environment={'K': 'v'})`` or
``net.addHost('d1', cls=Docker, dimage=...)``; ``net.removeDocker('d1')``. The node's
``cmd``, ``popen`` and the CLI run inside the container.

``dimage`` is any reference :func:`fidelnet.image.resolve` takes: the name of an
image imported with ``fidelnet image import FILE --name NAME`` (Containernet's
``ubuntu:trusty`` works once an image of that name is imported), ``oci-archive:``,
``docker-archive:`` (``docker save``), ``oci:`` or a path. Where Docker itself is
needed the option is refused by name: ``port_bindings`` and ``publish_all_ports``
(publishing a port on the host is Docker's proxy; reach the node at its address, or
through a NAT node), ``dns``, ``network_mode``; resource options other than the CPU
ones (``cpu_quota``/``cpu_period`` become the node's CPU limit) are refused too,
never silently ignored.
"""

from __future__ import annotations

import shlex
from typing import Any

from fidelnet.compat._node import Host
from fidelnet.errors import UnsupportedError, ValidationError
from fidelnet.topology.spec import ContainerSpec, NodeSpec

__all__ = ["Docker"]

_REFUSED = {
    "port_bindings": "publishing a port on the host is Docker's proxy: reach the node at "
    "its address (or through a NAT node)",
    "publish_all_ports": "publishing ports on the host is Docker's proxy",
    "dns": "the image's /etc/resolv.conf is used as it is",
    "network_mode": "every node has its own network namespace, made by fidelnet",
    "mem_limit": "memory limits are not part of fidelnet's nodes yet",
    "memswap_limit": "memory limits are not part of fidelnet's nodes yet",
    "cpuset_cpus": "use cores= (the node's cores) instead",
    "devices": "devices are not passed to container nodes yet",
}
_ACCEPTED_UNUSED = ("ports", "sysctls", "storage_opt", "shm_size", "build_params")


class Docker(Host):
    """A Mininet host whose interior is a container from ``dimage``."""

    def __init__(
        self,
        name: str,
        dimage: str | None = None,
        dcmd: Any = None,
        volumes: Any = None,
        environment: Any = None,
        privileged: bool = False,
        cap_add: Any = None,
        entrypoint: Any = None,
        working_dir: str | None = None,
        user: str | None = None,
        cpu_quota: int = -1,
        cpu_period: int | None = None,
        **params: Any,
    ) -> None:
        if not dimage:
            raise ValidationError(f"{name}.dimage", "a Docker host needs an image", dimage)
        for key, why in _REFUSED.items():
            if params.get(key) not in (None, {}, [], False):
                raise UnsupportedError(f"Docker option {key}", name, why)
        for key in (*_REFUSED, *_ACCEPTED_UNUSED):
            params.pop(key, None)
        if cpu_quota is not None and cpu_quota > 0:
            period = cpu_period or 100_000
            params.setdefault("cpu", cpu_quota / period)
        self.dimage = dimage
        self.dcmd = dcmd
        self.fn_container = ContainerSpec(
            image=dimage,
            command=_argv(name, "dcmd", dcmd),
            entrypoint=_argv(name, "entrypoint", entrypoint),
            env=tuple((str(k), str(v)) for k, v in _env(name, environment).items()),
            volumes=tuple(_volume(name, v) for v in (volumes or [])),
            workdir=working_dir,
            user=user,
            privileged=bool(privileged),
            cap_add=tuple(str(c) for c in (cap_add or [])),
        )
        self.fn_cpu = params.pop("cpu", None)
        super().__init__(name, **params)

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        spec = super().fn_spec(name, params)
        spec.backend = "container"
        spec.container = self.fn_container
        if self.fn_cpu is not None:
            spec.cpu = float(self.fn_cpu)
        return spec


def _argv(name: str, field: str, value: Any) -> tuple[str, ...] | None:
    """A command as Docker takes it: a list, or a string split as a shell would
    (the split only; nothing is run by a shell)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ValidationError(f"{name}.{field}", f"cannot split: {exc}", value) from exc
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    raise ValidationError(f"{name}.{field}", "a command: a string or a list", value)


def _env(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, list | tuple):
        out = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep:
                raise ValidationError(f"{name}.environment", "KEY=value entries", item)
            out[key] = val
        return out
    raise ValidationError(f"{name}.environment", "a dict or a list of KEY=value", value)


def _volume(name: str, value: Any) -> str:
    """``/host:/ctr``, ``/host:/ctr:ro`` or ``:rw`` (Docker's ``rw`` is the default)."""
    text = str(value)
    parts = text.split(":")
    if len(parts) == 3 and parts[2] == "rw":
        return ":".join(parts[:2])
    if len(parts) in (2, 3):
        return text
    raise ValidationError(f"{name}.volumes", "HOST:CONTAINER[:ro|rw]", value)
