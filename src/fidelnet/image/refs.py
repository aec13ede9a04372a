"""Image references: what a user may write where an image is expected, parsed.

Two families, told apart before anything is read:

* a local source, imported into the store when it is not there yet:
  ``oci-archive:PATH[:REF]``, ``oci:DIR[:REF]``, ``docker-archive:PATH[:NAME]`` (the
  transports of skopeo and podman, split as they split them: the path ends at the first
  colon after the prefix), or a plain path that exists (a directory or a file; its format
  is detected from its content);
* a name in the store: ``NAME[:TAG]``, ``NAME@sha256:HEX`` or ``sha256:HEX`` (a unique
  prefix of at least 12 hex digits will do, as ``fidelnet image ls`` prints them).

A plain path is one that starts with ``/``, ``./``, ``../`` or ``~``, ends with ``.tar``,
``.tar.gz`` or ``.tgz``, or exists and is a file or a directory with ``oci-layout`` (a
name that happens to be a file in the current directory is that file).

Names follow the distribution reference grammar (``[DOMAIN/]PATH[:TAG]``), and ``:latest``
is the tag when none is written. Names are kept as written, but compared in Docker's
familiar form, so ``busybox`` finds ``docker.io/library/busybox:latest`` (what podman and
containerd record) and the other way round.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DIGEST_RE",
    "Ref",
    "familiar",
    "host_platform",
    "is_full_name",
    "lookup",
    "normalize_name",
    "parse_name",
    "parse_ref",
    "parse_transport",
    "same_name",
]

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
"""The only digest algorithm images here use (OCI allows sha512; no producer writes it)."""

_DIGEST_PREFIX = re.compile(r"^sha256:[0-9a-f]{12,64}$")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?|\[[0-9a-fA-F:]+\](?::[0-9]+)?)"
_NAME_RE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)

TRANSPORTS = ("oci-archive", "oci", "docker-archive")
_FILES = (".tar", ".tar.gz", ".tgz")
"""Endings that make a reference a file even when it does not exist (an error about a
missing file, rather than about a name no registry has)."""

_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "i386": "386",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}


def host_platform() -> str:
    """This machine's platform as OCI names it (``linux/amd64``): the one picked from a
    multi-platform index, since a node's programs run on this kernel and CPU."""
    machine = platform.machine().lower()
    return f"linux/{_ARCH.get(machine, machine)}"


def parse_name(ref: str) -> tuple[str, str | None, str | None] | None:
    """``(name, tag, digest)`` of a reference in the store's grammar, or None."""
    m = _NAME_RE.match(ref)
    if m is None:
        return None
    return m.group("name"), m.group("tag"), m.group("digest")


def normalize_name(ref: str) -> str:
    """``NAME:TAG`` with ``:latest`` when no tag is written (a digest is dropped: names
    here point at one image, the digest is that image's own)."""
    parsed = parse_name(ref)
    if parsed is None:
        return ref
    name, tag, _ = parsed
    return f"{name}:{tag or 'latest'}"


def familiar(ref: str) -> str:
    """Docker's short form of a name, with its tag: ``docker.io/library/x`` -> ``x:latest``,
    ``u/x:t`` -> ``u/x:t``, ``localhost/x:t`` -> ``x:t`` (podman's prefix for local
    images). Only for comparing."""
    ref = normalize_name(ref)
    first, _, rest = ref.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        ref = f"docker.io/{ref}"  # no domain: Docker Hub's
    for prefix in ("docker.io/library/", "docker.io/", "index.docker.io/library/",
                   "index.docker.io/", "localhost/"):  # fmt: skip
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def lookup(table: dict[str, str], wanted: str) -> str | None | list[str]:
    """What ``wanted`` (``NAME:TAG``) designates in a table of names: its value, None,
    or, when its familiar form matches several different ones, the names that match."""
    if wanted in table:
        return table[wanted]
    matches = sorted(n for n in table if same_name(n, wanted))
    found = {table[n] for n in matches}
    if len(found) > 1:
        return matches
    return found.pop() if found else None


def same_name(a: str, b: str) -> bool:
    """Whether two names designate the same image name (in their familiar forms)."""
    return familiar(a) == familiar(b)


def is_full_name(annotation: str) -> bool:
    """Whether an OCI ``ref.name`` annotation is a name rather than a bare tag: skopeo,
    buildah and containerd write the tag alone (``latest``), which names nothing."""
    return ("/" in annotation or ":" in annotation) and parse_name(annotation) is not None


@dataclass(frozen=True)
class Ref:
    """A parsed reference.

    ``kind``: ``oci``, ``oci-archive``, ``docker-archive`` (a transport or a detected
    path: ``path`` is set, and ``select`` the image inside when written), ``path`` (a
    plain path whose format is detected), ``name`` (``name`` is ``NAME:TAG``) or
    ``digest`` (``digest`` is set, a full digest or a prefix; ``name`` too when written
    as ``NAME@sha256:...``).
    """

    kind: str
    path: Path | None = None
    select: str | None = None
    name: str | None = None
    digest: str | None = None


def parse_transport(ref: str) -> Ref | None:
    """``oci:DIR[:REF]``, ``oci-archive:PATH[:REF]``, ``docker-archive:PATH[:NAME]``
    parsed (None when ``ref`` starts with none of them or has no path)."""
    for transport in TRANSPORTS:
        if ref.startswith(transport + ":"):
            path, _, select = ref[len(transport) + 1 :].partition(":")
            return Ref(transport, path=Path(path), select=select or None) if path else None
    return None


def parse_ref(ref: str) -> Ref | None:
    """Parse a reference; None when it is none of the accepted forms."""
    if any(ref.startswith(t + ":") for t in TRANSPORTS):
        return parse_transport(ref)
    if ref.startswith("sha256:"):
        return Ref("digest", digest=ref) if _DIGEST_PREFIX.match(ref) else None
    if ref.startswith(("/", "./", "../", "~")) or ref in (".", "..") or ref.endswith(_FILES):
        return Ref("path", path=Path(os.path.expanduser(ref)))
    parsed = parse_name(ref)
    if os.path.exists(ref) and (
        os.path.isfile(ref) or os.path.isfile(os.path.join(ref, "oci-layout")) or parsed is None
    ):
        return Ref("path", path=Path(ref))
    if parsed is None:
        return None
    name, tag, digest = parsed
    if digest is not None:
        return Ref("digest", name=f"{name}:{tag or 'latest'}", digest=digest)
    return Ref("name", name=f"{name}:{tag or 'latest'}")
