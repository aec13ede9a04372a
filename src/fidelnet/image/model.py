"""What the store hands out: an image pinned by digest, unpacked, with its config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fidelnet.errors import ValidationError

__all__ = ["Image", "ImageConfig", "config_from_json", "config_from_record"]


@dataclass(frozen=True)
class ImageConfig:
    """The part of an image's config a runtime needs (OCI image-spec ``config``).

    Lists are tuples (the dataclass is frozen and hashable); absent values are empty.
    ``user`` is as written in the image (``name``, ``uid``, ``uid:gid``, ``name:group``):
    resolving it against the image's ``/etc/passwd`` is the runtime's business.
    """

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    env: tuple[str, ...]
    workdir: str
    user: str
    exposed_ports: tuple[str, ...] = ()
    stop_signal: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Image:
    """An image in the store.

    ``rootfs`` is shared by every run that uses the image and must never be written to:
    a runtime mounts it as the lower layer of an overlay. ``digest`` is the manifest's
    (for a docker-save archive, which has none, the digest of the manifest skopeo and
    podman make for it). ``source`` says where this call got it: ``oci``,
    ``oci-archive``, ``docker-archive`` (read from that path, imported unless it was
    already there), ``store`` (found by name or digest), ``registry`` (pulled).
    """

    ref: str
    digest: str
    config: ImageConfig
    rootfs: Path
    size: int
    source: str
    names: tuple[str, ...]

    @property
    def short(self) -> str:
        """``sha256:`` and the first 12 hex digits, as ``fidelnet image ls`` prints it."""
        return self.digest[:19]


def _strings(value: object, field: str, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):  # Docker's legacy shell form, kept as one word
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValidationError(what, f"config: {field} is not a list of strings", value)


def _string(value: object, field: str, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise ValidationError(what, f"config: {field} is not a string", value)


def config_from_json(doc: Mapping[str, Any], what: str) -> ImageConfig:
    """The runtime part of an image config (OCI or Docker: the same keys)."""
    c = doc.get("config") or {}
    if not isinstance(c, dict):
        raise ValidationError(what, "config: 'config' is not an object", type(c).__name__)
    ports = c.get("ExposedPorts") or {}
    if not isinstance(ports, dict):
        raise ValidationError(what, "config: ExposedPorts is not an object", ports)
    return ImageConfig(
        entrypoint=_strings(c.get("Entrypoint"), "Entrypoint", what),
        cmd=_strings(c.get("Cmd"), "Cmd", what),
        env=_strings(c.get("Env"), "Env", what),
        workdir=_string(c.get("WorkingDir"), "WorkingDir", what),
        user=_string(c.get("User"), "User", what),
        exposed_ports=tuple(sorted(str(p) for p in ports)),
        stop_signal=_string(c.get("StopSignal"), "StopSignal", what),
    )


def config_from_record(rec: Mapping[str, Any]) -> ImageConfig:
    """An :class:`ImageConfig` from the store's own record (``ImageConfig.to_json``)."""
    return ImageConfig(
        entrypoint=tuple(rec.get("entrypoint", ())),
        cmd=tuple(rec.get("cmd", ())),
        env=tuple(rec.get("env", ())),
        workdir=str(rec.get("workdir", "")),
        user=str(rec.get("user", "")),
        exposed_ports=tuple(rec.get("exposed_ports", ())),
        stop_signal=str(rec.get("stop_signal", "")),
    )
