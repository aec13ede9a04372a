"""Reading an image from one of the three local formats, verified up to its layers.

* an OCI image layout (a directory with ``oci-layout``, ``index.json`` and
  ``blobs/sha256/``: what ``skopeo copy ... oci:DIR`` and ``buildah push ... oci:DIR``
  write);
* an OCI archive (that directory as a tar: ``oci-archive:``, ``podman save
  --format oci-archive``; Docker 25 and later write ``docker save`` archives that are
  OCI archives too, and they are read as such);
* a docker-save archive (``manifest.json`` listing each image's config and layer
  files: ``docker save``, ``podman save``, ``docker-archive:``).

Archives may be compressed as a whole (``docker save | gzip``); such an archive is
decompressed once into an unlinked scratch file, so that its blobs can be read in the
order the manifest needs them rather than the order the tar holds them.

What is verified here: every descriptor's digest and size, for the index entries
followed, the manifest and the config (read whole: they are small, and capped at
:data:`MAX_JSON`). Layers are only opened here; their digests are checked as they are
unpacked (:mod:`fidelnet.image.unpack`), since reading a large layer twice would double
the import's cost. A docker-save archive has no manifest: the one skopeo and podman make
for it (Docker schema 2, layer digests the config's ``diff_ids``) is made here the same
way, byte for byte, and its digest is the image's pin, so a docker archive imported here
and one pulled by podman from it carry the same digest.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fidelnet.errors import ValidationError
from fidelnet.image.archive import (
    Container,
    compression,
    decompressing,
    member_name,
    open_container,
)
from fidelnet.image.refs import DIGEST_RE, host_platform, is_full_name, same_name

__all__ = ["Layer", "SourceImage", "open_image"]

MAX_JSON = 8 << 20
"""The largest index, manifest or config read (real ones are a few KiB)."""

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
INDEXES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFESTS = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
REF_NAME = "org.opencontainers.image.ref.name"
CONTAINERD_NAME = "io.containerd.image.name"


@dataclass(frozen=True)
class Layer:
    """One layer to apply: ``digest`` is its descriptor's (the blob as stored; None in a
    docker-save archive, which has no descriptors), ``diff_id`` the digest of its
    uncompressed tar (the config's ``rootfs.diff_ids``)."""

    digest: str | None
    diff_id: str | None
    media_type: str
    size: int | None
    label: str
    open: Callable[[], IO[bytes]]


@dataclass(frozen=True)
class SourceImage:
    """The image found in a source, its manifest and config verified."""

    kind: str
    digest: str
    config_digest: str
    config: dict[str, Any]
    layers: tuple[Layer, ...]
    names: tuple[str, ...]
    platform: str


@contextlib.contextmanager
def open_image(
    path: Path, *, kind: str | None, select: str | None, what: str, scratch: Path
) -> Iterator[SourceImage]:
    """The image at ``path`` (``select``: which one, by name or tag, when it holds
    several), verified up to its layers, which stay readable until the block ends.
    ``scratch``: where a compressed archive is decompressed (the store's directory)."""
    container, found = open_container(path, kind, what, scratch)
    try:
        if found == "docker-archive":
            yield _read_docker(container, select, what)
        else:
            yield _read_oci(container, found, select, what)
    finally:
        container.close()


# -- OCI -------------------------------------------------------------------------------


def _json(data: bytes, what: str, label: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError(what, f"{label} is not valid JSON: {exc}") from None


def _read_file(c: Container, name: str, what: str, label: str) -> bytes:
    try:
        with c.open(name) as f:
            data = f.read(MAX_JSON + 1)
    except FileNotFoundError:
        raise ValidationError(what, f"{label} is missing from {c.where}") from None
    if len(data) > MAX_JSON:
        raise ValidationError(what, f"{label} is larger than {MAX_JSON >> 20} MiB")
    return data


def _descriptor(obj: object, what: str, label: str) -> dict[str, Any]:
    """A descriptor checked for the fields used: mediaType, digest, size."""
    if not isinstance(obj, dict):
        raise ValidationError(what, f"{label}: a descriptor is not an object", obj)
    digest, size = obj.get("digest"), obj.get("size")
    if not isinstance(digest, str) or not DIGEST_RE.match(digest):
        raise ValidationError(what, f"{label}: unsupported or malformed digest", digest)
    if not isinstance(size, int) or size < 0:
        raise ValidationError(what, f"{label} {digest}: malformed size", size)
    if not isinstance(obj.get("mediaType", ""), str):
        raise ValidationError(what, f"{label} {digest}: malformed mediaType", obj["mediaType"])
    return obj


def _blob_name(digest: str) -> str:
    return "blobs/sha256/" + digest.split(":", 1)[1]  # digest checked by _descriptor


def _read_blob(c: Container, desc: dict[str, Any], what: str, label: str) -> bytes:
    digest, size = desc["digest"], desc["size"]
    if size > MAX_JSON:
        raise ValidationError(what, f"{label} {digest} is larger than {MAX_JSON >> 20} MiB")
    try:
        with c.open(_blob_name(digest)) as f:
            data = f.read(size + 1)
    except FileNotFoundError:
        raise ValidationError(what, f"{label} blob {digest} is missing from {c.where}") from None
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != digest or len(data) != size:
        raise ValidationError(
            what,
            f"{label} blob {digest} does not match its descriptor "
            f"({len(data)} bytes hashing to {got}; expected {size} bytes)",
        )
    return data


def _platform(desc: dict[str, Any]) -> str | None:
    p = desc.get("platform")
    if not isinstance(p, dict):
        return None
    os_, arch = p.get("os"), p.get("architecture")
    if not isinstance(os_, str) or not isinstance(arch, str):
        return None
    variant = p.get("variant")
    return f"{os_}/{arch}" + (f"/{variant}" if isinstance(variant, str) and variant else "")


def _matches_host(plat: str) -> bool:
    return plat == host_platform() or plat.startswith(host_platform() + "/")


def _pick_platform(descs: list[dict[str, Any]], what: str, where: str) -> dict[str, Any]:
    """The manifest for this machine's platform among several."""
    for d in descs:
        plat = _platform(d)
        if plat is not None and _matches_host(plat):
            return d
    found = sorted({_platform(d) or "unspecified" for d in descs})
    raise ValidationError(
        what,
        f"{where} has no manifest for {host_platform()}",
        choices=[f"found {', '.join(found)}"],
    )


def _names(desc: dict[str, Any]) -> list[str]:
    ann = desc.get("annotations")
    if not isinstance(ann, dict):
        return []
    out = []
    for key in (CONTAINERD_NAME, REF_NAME):
        value = ann.get(key)
        if isinstance(value, str) and is_full_name(value):
            out.append(value)
    return out


def _selected_by(desc: dict[str, Any], select: str) -> bool:
    ann = desc.get("annotations")
    if not isinstance(ann, dict):
        return False
    for key in (REF_NAME, CONTAINERD_NAME):
        value = ann.get(key)
        if isinstance(value, str) and (value == select or (is_full_name(value) and
                                                          same_name(value, select))):  # fmt: skip
            return True
    return False


def _index_entries(index: object, what: str, label: str) -> list[dict[str, Any]]:
    if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
        raise ValidationError(what, f"{label} has no list of manifests")
    return [_descriptor(d, what, f"{label} entry") for d in index["manifests"]]


def _is_index(desc: dict[str, Any], doc: Any) -> bool:
    media = doc.get("mediaType") if isinstance(doc, dict) else None
    return (
        desc.get("mediaType") in INDEXES
        or media in INDEXES
        or (isinstance(doc, dict) and "manifests" in doc and "layers" not in doc)
    )


def _read_oci(c: Container, kind: str, select: str | None, what: str) -> SourceImage:
    layout = _json(_read_file(c, "oci-layout", what, "oci-layout"), what, "oci-layout")
    if not isinstance(layout, dict) or "imageLayoutVersion" not in layout:
        raise ValidationError(what, f"{c.where}: oci-layout has no imageLayoutVersion")
    index = _json(_read_file(c, "index.json", what, "index.json"), what, "index.json")
    entries = _index_entries(index, what, "index.json")
    if select is not None:
        chosen = [d for d in entries if _selected_by(d, select)]
        if not chosen:
            tags = sorted({str(d.get("annotations", {}).get(REF_NAME)) for d in entries
                           if isinstance(d.get("annotations"), dict)
                           and d["annotations"].get(REF_NAME)})  # fmt: skip
            raise ValidationError(
                what, f"{c.where} has no image named {select!r}", choices=tags or ["none named"]
            )
        entries = chosen
    if not entries:
        raise ValidationError(what, f"{c.where}: index.json lists no image")
    names = sorted({n for d in entries for n in _names(d)})
    if len(entries) > 1:
        distinct = {d.get("annotations", {}).get(REF_NAME) for d in entries
                    if isinstance(d.get("annotations"), dict)}  # fmt: skip
        if len(distinct - {None}) > 1 and select is None:
            raise ValidationError(
                what,
                f"{c.where} holds several images: add :NAME to choose one",
                choices=sorted(str(t) for t in distinct - {None}),
            )
        desc = _pick_platform(entries, what, c.where)
    else:
        desc = entries[0]
    data = _read_blob(c, desc, what, "manifest")
    doc = _json(data, what, f"manifest {desc['digest']}")
    if _is_index(desc, doc):  # an image index inside the layout's: follow one level
        inner = _index_entries(doc, what, f"index {desc['digest']}")
        if not inner:
            raise ValidationError(what, f"index {desc['digest']} lists no manifest")
        desc = inner[0] if len(inner) == 1 else _pick_platform(inner, what, desc["digest"])
        data = _read_blob(c, desc, what, "manifest")
        doc = _json(data, what, f"manifest {desc['digest']}")
        if _is_index(desc, doc):
            raise ValidationError(what, f"{desc['digest']}: an index nested two levels deep")
    return _from_manifest(c, kind, desc, doc, names, what)


def _from_manifest(
    c: Container,
    kind: str,
    desc: dict[str, Any],
    doc: Any,
    names: list[str],
    what: str,
) -> SourceImage:
    digest = desc["digest"]
    label = f"manifest {digest}"
    if not isinstance(doc, dict) or doc.get("schemaVersion") != 2:
        raise ValidationError(what, f"{label}: not an OCI or Docker schema 2 image manifest")
    media = doc.get("mediaType") or desc.get("mediaType")
    if media is not None and media not in MANIFESTS:
        raise ValidationError(what, f"{label}: not an image manifest", media)
    cdesc = _descriptor(doc.get("config"), what, f"{label}: config")
    cfg = _json(_read_blob(c, cdesc, what, "config"), what, f"config {cdesc['digest']}")
    if not isinstance(cfg, dict):
        raise ValidationError(what, f"config {cdesc['digest']} is not an object")
    raw_layers = doc.get("layers")
    if not isinstance(raw_layers, list):
        raise ValidationError(what, f"{label} has no list of layers")
    descs = [_descriptor(d, what, f"{label}: layer") for d in raw_layers]
    diff_ids = _diff_ids(cfg, len(descs), what, cdesc["digest"])
    layers = []
    for i, d in enumerate(descs):
        name = _blob_name(d["digest"])
        layer_label = f"layer {i + 1} of {len(descs)} ({d['digest']})"
        if not c.has(name):
            raise ValidationError(what, f"{layer_label}: blob missing from {c.where}")
        layers.append(
            Layer(
                digest=d["digest"],
                diff_id=diff_ids[i],
                media_type=str(d.get("mediaType", "")),
                size=d["size"],
                label=layer_label,
                open=functools.partial(c.open, name),
            )
        )
    plat = _config_platform(cfg) or _platform(desc) or "unspecified"
    return SourceImage(kind, digest, cdesc["digest"], cfg, tuple(layers), tuple(names), plat)


def _diff_ids(cfg: dict[str, Any], n: int, what: str, label: str) -> list[str]:
    rootfs = cfg.get("rootfs")
    ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, str) and DIGEST_RE.match(i) for i in ids):
        raise ValidationError(what, f"config {label}: rootfs.diff_ids missing or malformed")
    if len(ids) != n:
        raise ValidationError(what, f"config {label} lists {len(ids)} diff_ids for {n} layers")
    return list(ids)


def _config_platform(cfg: dict[str, Any]) -> str | None:
    os_, arch = cfg.get("os"), cfg.get("architecture")
    if isinstance(os_, str) and isinstance(arch, str):
        return f"{os_}/{arch}"
    return None


# -- docker save ---------------------------------------------------------------------


def _read_docker(c: Container, select: str | None, what: str) -> SourceImage:
    items = _json(_read_file(c, "manifest.json", what, "manifest.json"), what, "manifest.json")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise ValidationError(what, f"{c.where}: manifest.json lists no image")
    every = items
    if select is not None:
        items = [i for i in items if any(same_name(t, select) for t in _repo_tags(i))]
    if len(items) != 1:
        tags = sorted(t for i in every for t in _repo_tags(i))
        problem = (f"{c.where} has no image named {select!r}" if not items
                   else f"{c.where} holds several images: add :NAME to choose one")  # fmt: skip
        raise ValidationError(what, problem, choices=tags or ["none named"])
    item = items[0]
    config_path, layer_paths = item.get("Config"), item.get("Layers")
    if not isinstance(config_path, str) or not isinstance(layer_paths, list):
        raise ValidationError(what, f"{c.where}: manifest.json entry without Config or Layers")
    config_name = member_name(config_path)
    config_bytes = _read_file(c, config_name, what, f"config {config_path}")
    config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
    stem = posixpath.basename(config_name).removesuffix(".json")
    hexname = len(stem) == 64 and all(ch in "0123456789abcdef" for ch in stem)
    if hexname and config_digest != "sha256:" + stem:
        raise ValidationError(
            what, f"config {config_path} does not match its name (it hashes to {config_digest})"
        )
    cfg = _json(config_bytes, what, f"config {config_path}")
    if not isinstance(cfg, dict):
        raise ValidationError(what, f"config {config_path} is not an object")
    diff_ids = _diff_ids(cfg, len(layer_paths), what, config_path)
    layers, described = [], []
    for i, (lp, diff_id) in enumerate(zip(layer_paths, diff_ids, strict=True)):
        name = member_name(str(lp))
        label = f"layer {i + 1} of {len(layer_paths)} ({lp})"
        if not c.has(name):
            raise ValidationError(what, f"{label}: blob missing from {c.where}")
        layers.append(Layer(None, diff_id, "application/vnd.docker.image.rootfs.diff.tar",
                            None, label, functools.partial(c.open, name)))  # fmt: skip
        described.append({"mediaType": DOCKER_LAYER, "size": _plain_size(c, name, what, label),
                          "digest": diff_id})  # fmt: skip
    # What containers/image (skopeo, podman) makes for a docker-save image, byte for byte
    # (Go's encoding/json: fields in declaration order, no spaces).
    manifest = {
        "schemaVersion": 2,
        "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": DOCKER_CONFIG, "size": len(config_bytes), "digest": config_digest},
        "layers": described,
    }
    data = json.dumps(manifest, separators=(",", ":")).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    names = sorted({t for t in _repo_tags(item)})
    plat = _config_platform(cfg) or "unspecified"
    return SourceImage("docker-archive", digest, config_digest, cfg, tuple(layers),
                       tuple(names), plat)  # fmt: skip


def _repo_tags(item: object) -> list[str]:
    tags = item.get("RepoTags") if isinstance(item, dict) else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def _plain_size(c: Container, name: str, what: str, label: str) -> int:
    """The size of a layer's tar as containers/image reports it: uncompressed."""
    with c.open(name) as f:
        packed = compression(f.read(8))
    if packed is None:
        return c.size(name)
    total = 0
    with c.open(name) as f, decompressing(f, packed, what, label) as plain:
        while chunk := plain.read(1 << 20):
            total += len(chunk)
    return total
