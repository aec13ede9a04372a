"""From what a topology says (``image: ...``) to an image in the store.

A path (or ``oci:``, ``oci-archive:``, ``docker-archive:``) is imported unless the store
has its digest already; a name or digest is looked up in the store; a name it does not
have is pulled with skopeo when skopeo is installed (``skopeo copy docker://REF
oci:DIR:image``, then imported as any layout). Without skopeo, or when the pull fails,
the error says how to import the image instead. After each resolve the store is pruned
to its size limit, sparing the image resolved and those in use: a run holds its images
with :func:`in_use`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator

from fidelnet.errors import StateError, ValidationError
from fidelnet.image.model import Image
from fidelnet.image.refs import parse_ref
from fidelnet.image.store import Store

__all__ = ["PULL_TIMEOUT_S", "in_use", "resolve"]

PULL_TIMEOUT_S = 1800.0
"""The longest a registry pull may take."""


def resolve(ref: str, *, node: str | None = None, store: Store | None = None) -> Image:
    """The image ``ref`` designates, in the store (imported or pulled first when it is
    not there). Errors name the node (when given) and the reference."""
    store = store if store is not None else Store()
    who = f"node {node}: image" if node else "image"
    what = f"{who} {ref!r}"
    r = parse_ref(ref)
    if r is None:
        raise ValidationError(
            who,
            "not an image reference (a path, oci:DIR, oci-archive:PATH, docker-archive:PATH, "
            "NAME[:TAG], NAME@sha256:HEX or sha256:HEX)",
            ref,
        )
    if r.path is not None:
        kind = None if r.kind == "path" else r.kind
        img = store.import_source(r.path, kind=kind, select=r.select, name=None, what=what, ref=ref)
    else:
        try:
            found = store.find(ref)
        except ValidationError as exc:
            raise ValidationError(who, exc.problem, ref, exc.choices) from None
        if found is not None and store.touch(found.digest):
            img = found
        elif r.kind == "digest" and r.name is None:
            raise ValidationError(
                who, f"no image with digest {r.digest} in the store ({store.root})", ref
            )
        else:
            img = _pull(ref, r.name, r.digest, store, who, what)
    store.prune(keep={img.digest})
    return dataclasses.replace(img, ref=ref)


def _pull(
    ref: str, name: str | None, digest: str | None, store: Store, who: str, what: str
) -> Image:
    """Pull ``ref`` from its registry with skopeo and import it."""
    assert name is not None
    repo = name.rsplit(":", 1)[0] if digest else name
    target = f"{repo}@{digest}" if digest else name
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        raise _not_found(who, ref, name, store, "skopeo is not installed")
    with store.scratch(".pull-") as tmp:
        layout = tmp / "layout"
        argv = [skopeo, "copy", "--quiet", f"docker://{target}", f"oci:{layout}:image"]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=PULL_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            why = f"skopeo took over {PULL_TIMEOUT_S:.0f} s"
            raise _not_found(who, ref, name, store, why) from None
        if proc.returncode != 0:
            lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit status {proc.returncode}"
            raise _not_found(who, ref, name, store, f"skopeo copy docker://{target} failed: {why}")
        return store.import_source(
            layout,
            kind="oci",
            select="image",
            name=None if digest else name,
            what=what,
            source="registry",
            ref=ref,
        )


def _not_found(who: str, ref: str, name: str, store: Store, why: str) -> ValidationError:
    return ValidationError(
        who,
        f"no image named {name} was imported into the store ({store.root}), and it could "
        f"not be pulled ({why}). Import it with `fidelnet image import FILE --name {name}` "
        "(FILE: an OCI layout directory, an OCI archive or a docker save archive), or write "
        "the file's path as the image; pulling it from a registry needs skopeo on PATH and "
        "a reachable registry",
        ref,
    )


@contextlib.contextmanager
def in_use(image: Image) -> Iterator[None]:
    """Hold ``image`` in use for the block: no ``prune`` or ``remove`` takes it away
    meanwhile (a shared ``flock`` on its directory's ``.lock``)."""
    lock = image.rootfs.parent / ".lock"
    gone = StateError(
        f"image {image.ref} ({image.short}) is no longer in the store "
        f"{image.rootfs.parent.parent} (removed or pruned since it was resolved): resolve it again"
    )
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise gone from None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            here = os.stat(lock)
        except FileNotFoundError:
            raise gone from None
        held = os.fstat(fd)
        if (here.st_dev, here.st_ino) != (held.st_dev, held.st_ino):
            raise gone
        yield
    finally:
        os.close(fd)
