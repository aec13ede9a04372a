"""The image store: each image unpacked once, pinned by digest, shared read-only by the
runs that use it, the whole kept under a size limit.

Layout. ``ROOT`` is ``FIDELNET_IMAGE_STORE``, or ``/var/cache/fidelnet/images``; it is
made mode 0700, as is every image directory: an image may hold setuid programs, owned by
uids of its own, which no user of the host should be able to reach::

    ROOT/.lock               the store lock
    ROOT/names.json          {"names": {"NAME:TAG": "sha256:HEX", ...}}: which image each
                             name designates (authoritative; image.json repeats it)
    ROOT/sha256-HEX/         one image: present complete, or absent
        rootfs/              its root filesystem (the lower layer of the runs' overlays)
        image.json           digest, names, config, size, source, origin, imported,
                             last_used (times in seconds since the epoch), layers, platform
        .lock                held shared by each run using the image (:func:`in_use`)
    ROOT/.locks/HEX          held while image HEX is being unpacked
    ROOT/.locks/.NAME        held by the owner of the scratch directory ROOT/.NAME, one of:
    ROOT/.tmp-sha256-HEX-*/  an image being unpacked, renamed to sha256-HEX when complete
    ROOT/.trash-*/           an image being removed (renamed away first, then deleted)
    ROOT/.pull-*/            an image being pulled from a registry by skopeo

Lock protocol (``flock``; the kernel drops a lock with its holder, so a crash leaves no
lock held):

* the store lock, exclusive and short, covers every change of ``names.json`` or an
  ``image.json`` and every rename of an image directory into or out of place. Readers take
  no lock: both files are replaced atomically (written beside, then renamed), and an
  image directory exists only complete;
* ``.locks/HEX``, exclusive, is held for the whole unpacking of image HEX: a second
  process resolving the same image waits for it, then finds the image in place. If it
  unpacked anyway (a lock file swept at the wrong moment), the rename into place fails
  for the later one, which then uses the image already there;
* an image's ``.lock`` is held shared by each run that uses it; removing the image
  (``remove``, ``prune``) takes it exclusive without waiting, under the store lock, and
  skips (``prune``) or refuses (``remove``) an image in use. ``in_use`` checks, once it
  holds the lock, that the image is still in place, so an image removed between
  ``resolve`` and ``in_use`` is an error (resolve again), never a root filesystem
  vanishing mid-run;
* a scratch directory's lock is held by whoever made it until it is gone; ``prune``
  deletes scratch directories whose lock it can take (their owner died).

The store lock is taken only after, never while waiting for, an image or unpack lock,
and image locks are only tried (``LOCK_NB``) while it is held: no cycle can form.

Size limit. ``FIDELNET_IMAGE_STORE_MB`` (MiB; default 8192) bounds the bytes the root
filesystems take on disk. After every import by :func:`fidelnet.image.resolve`, images
are removed least recently used first (``last_used``: each resolve) until the store
fits, never the image just resolved and never one in use; when those alone exceed the
limit, the store stays over it, with a warning.
"""

from __future__ import annotations

import builtins
import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from fidelnet.errors import KernelError, StateError, ValidationError
from fidelnet.image._files import disk_usage, flocked, read_json, remove_tree, write_json
from fidelnet.image.formats import SourceImage, open_image
from fidelnet.image.model import Image, config_from_json, config_from_record
from fidelnet.image.refs import (
    DIGEST_RE,
    TRANSPORTS,
    host_platform,
    lookup,
    normalize_name,
    parse_name,
    parse_transport,
)
from fidelnet.image.unpack import unpack_layers
from fidelnet.log import logger

__all__ = ["DEFAULT_MAX_MB", "DEFAULT_ROOT", "Store"]

DEFAULT_ROOT = Path("/var/cache/fidelnet/images")
DEFAULT_MAX_MB = 8192
MiB = 1 << 20
FORMAT = 1
"""The layout of an image directory; one of another format is not used."""

_SCRATCH = re.compile(r"^\.(tmp|trash|pull)-")
_HEX = re.compile(r"^[0-9a-f]{64}$")


class Store:
    """The images unpacked on this machine (see the module's description)."""

    def __init__(
        self, root: str | os.PathLike[str] | None = None, max_bytes: int | None = None
    ) -> None:
        if root is None:
            root = Path(os.environ.get("FIDELNET_IMAGE_STORE") or DEFAULT_ROOT)
        self.root = Path(root)
        if max_bytes is None:
            env = os.environ.get("FIDELNET_IMAGE_STORE_MB", "").strip()
            try:
                mb = int(env) if env else DEFAULT_MAX_MB
            except ValueError:
                mb = -1
            if mb < 0:
                raise ValidationError(
                    "FIDELNET_IMAGE_STORE_MB", "not a whole number of MiB, 0 or more", env
                )
            max_bytes = mb * MiB
        self.max_bytes = max_bytes

    # -- paths and records --------------------------------------------------------------

    def _dir(self, digest: str) -> Path:
        return self.root / ("sha256-" + digest.removeprefix("sha256:"))

    def _ensure(self) -> None:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            (self.root / ".locks").mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise KernelError(f"image store {self.root}: cannot make it: {exc}") from exc

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure()
        with flocked(self.root / ".lock", fcntl.LOCK_EX):
            yield

    def _names(self) -> dict[str, str]:
        doc = read_json(self.root / "names.json")
        names = doc.get("names") if isinstance(doc, dict) else None
        if not isinstance(names, dict):
            return {}
        return {n: d for n, d in names.items() if isinstance(d, str) and DIGEST_RE.match(d)}

    def record(self, digest: str) -> dict[str, Any] | None:
        """An image's ``image.json`` (None when it is not in the store)."""
        if not DIGEST_RE.match(digest):
            return None
        rec = read_json(self._dir(digest) / "image.json")
        if not isinstance(rec, dict) or rec.get("digest") != digest or rec.get("format") != FORMAT:
            return None
        return rec

    def _image(
        self, digest: str, *, ref: str | None, source: str | None, names: dict[str, str]
    ) -> Image | None:
        rec = self.record(digest)
        if rec is None:
            return None
        known = tuple(sorted(n for n, d in names.items() if d == digest))
        return Image(
            ref=ref or (known[0] if known else digest),
            digest=digest,
            config=config_from_record(rec.get("config") or {}),
            rootfs=self._dir(digest) / "rootfs",
            size=int(rec.get("size", 0)),
            source=source or str(rec.get("source", "store")),
            names=known,
        )

    # -- finding --------------------------------------------------------------------------

    def find(self, ref: str) -> Image | None:
        """The image a name (``NAME[:TAG]``, ``:latest`` by default) or a digest
        (``sha256:HEX``, a unique prefix of 12 digits or more, ``NAME@sha256:HEX``)
        designates, or None."""
        digest = self._digest_of(ref)
        if digest is None:
            return None
        return self._image(digest, ref=ref, source="store", names=self._names())

    def _digest_of(self, ref: str) -> str | None:
        if any(ref.startswith(t + ":") for t in TRANSPORTS):
            raise ValidationError("image", "a name or a digest, not a file, is looked up", ref)
        if re.match(r"^sha256:[0-9a-f]{12,64}$", ref):
            return self._expand(ref)
        parsed = parse_name(ref)
        if parsed is None:
            raise ValidationError(
                "image", "not an image name (NAME[:TAG], NAME@sha256:HEX or sha256:HEX)", ref
            )
        name, tag, digest = parsed
        if digest is not None:
            return digest if self.record(digest) is not None else None
        found = lookup(self._names(), f"{name}:{tag or 'latest'}")
        if isinstance(found, list):
            raise ValidationError(
                "image", "a name that designates several images: write it in full", ref, found
            )
        return found

    def _expand(self, prefix: str) -> str | None:
        if DIGEST_RE.match(prefix):
            return prefix if self.record(prefix) is not None else None
        hexp = prefix.removeprefix("sha256:")
        found = [p.name[7:] for p in self.root.glob(f"sha256-{hexp}*") if p.is_dir()]
        if len(found) > 1:
            raise ValidationError("image", "an ambiguous digest prefix", prefix,
                                  [f"sha256:{h[:16]}" for h in sorted(found)])  # fmt: skip
        return f"sha256:{found[0]}" if found else None

    def list(self) -> list[Image]:
        """Every image in the store, most recently used first (``source``: what each
        was imported from)."""
        if not self.root.is_dir():
            return []
        names = self._names()
        out: list[tuple[float, Image]] = []
        for d in self.root.glob("sha256-*"):
            digest = "sha256:" + d.name[7:]
            img = self._image(digest, ref=None, source=None, names=names)
            rec = self.record(digest)
            if img is not None and rec is not None:
                out.append((float(rec.get("last_used", 0)), img))
        return [img for _, img in sorted(out, key=lambda t: (-t[0], t[1].digest))]

    # -- importing ------------------------------------------------------------------------

    def import_path(self, path: str | os.PathLike[str], *, name: str | None = None) -> Image:
        """Import an OCI layout, OCI archive or docker-save archive (detected from its
        content; a ``str`` may also be ``oci:DIR[:REF]``, ``oci-archive:PATH[:REF]`` or
        ``docker-archive:PATH[:NAME]``), unless it is in the store already; ``name``:
        one more name for it (``NAME[:TAG]``). The names the source gives are kept too."""
        r = parse_transport(path) if isinstance(path, str) else None
        kind, select, where = (r.kind, r.select, r.path) if r and r.path else (None, None, path)
        return self.import_source(
            Path(where), kind=kind, select=select, name=name, what=f"image {path}"
        )

    def import_source(
        self,
        path: Path,
        *,
        kind: str | None,
        select: str | None,
        name: str | None,
        what: str,
        source: str | None = None,
        ref: str | None = None,
    ) -> Image:
        """:meth:`import_path` with the format and the image inside already parsed;
        ``what`` starts every error message; ``source`` overrides the format as the
        image's recorded source (``registry``)."""
        if name is not None:
            parsed = parse_name(name)
            if parsed is None or parsed[2] is not None:
                raise ValidationError(f"{what}: name", "not an image name (NAME[:TAG])", name)
        self._ensure()
        with open_image(path, kind=kind, select=select, what=what, scratch=self.root) as src:
            names = [normalize_name(n) for n in src.names if parse_name(n) is not None]
            if name is not None:
                names.append(normalize_name(name))
            for _ in range(2):  # again if a prune elsewhere took it before it was named
                if self.record(src.digest) is None:
                    with flocked(self.root / ".locks" / src.digest[7:], fcntl.LOCK_EX):
                        if self.record(src.digest) is None:
                            self._unpack(src, source or src.kind, what, origin=str(path))
                if self._name(src.digest, names, touch=True):
                    break
        img = self._image(src.digest, ref=ref or str(path), source=source or src.kind,
                          names=self._names())  # fmt: skip
        if img is None:
            raise StateError(f"{what}: image {src.digest} vanished from {self.root} once imported")
        return img

    def _unpack(self, src: SourceImage, source: str, what: str, origin: str) -> None:
        config = config_from_json(src.config, what)  # malformed: refused before unpacking
        if src.platform != "unspecified" and not src.platform.startswith(host_platform()):
            logger.warning("%s: made for %s, this machine is %s", what, src.platform,
                           host_platform())  # fmt: skip
        t0 = time.monotonic()
        with self.scratch(f".tmp-sha256-{src.digest[7:]}-") as tmp:
            rootfs = tmp / "rootfs"
            rootfs.mkdir(mode=0o755)
            skipped = unpack_layers(rootfs, src.layers, what)
            now, size = time.time(), disk_usage(rootfs)
            rec: dict[str, Any] = {
                "format": FORMAT,
                "digest": src.digest,
                "config_digest": src.config_digest,
                "config": config.to_json(),
                "platform": src.platform,
                "layers": [layer.digest or layer.diff_id for layer in src.layers],
                "size": size,
                "source": source,
                "origin": origin,
                "names": [],
                "imported": now,
                "last_used": now,
                "skipped_devices": skipped,
            }
            write_json(tmp / "image.json", rec)
            (tmp / ".lock").touch(mode=0o600)
            final = self._dir(src.digest)
            with self._locked():
                try:
                    os.rename(tmp, final)
                except OSError:
                    if self.record(src.digest) is None:
                        raise
                    logger.debug("%s: unpacked twice; the other copy is kept", what)
        logger.info("%s: %s unpacked in %.1f s (%.1f MiB)", what, src.digest[:19],
                    time.monotonic() - t0, size / MiB)  # fmt: skip

    @contextlib.contextmanager
    def scratch(self, prefix: str) -> Iterator[Path]:
        """A scratch directory in the store (``prefix``: ``.tmp-``, ``.pull-``), removed
        at the end unless renamed away, and its lock, held meanwhile so that
        :meth:`prune` knows it is not a leftover."""
        self._ensure()
        name = prefix + os.urandom(6).hex()
        lock = self.root / ".locks" / name
        with flocked(lock, fcntl.LOCK_EX):
            path = self.root / name
            path.mkdir(mode=0o700)
            try:
                yield path
            finally:
                remove_tree(path)
                lock.unlink(missing_ok=True)

    def touch(self, digest: str) -> bool:
        """Record a use of the image (its ``last_used``, which orders :meth:`prune`);
        False when it is not in the store (any more)."""
        return self._name(digest, (), touch=True)

    def _name(self, digest: str, names: Iterable[str], *, touch: bool) -> bool:
        """Point ``names`` at ``digest`` (moving them off other images) and record a use;
        False (and nothing changed) when the image is not in the store."""
        with self._locked():
            if self.record(digest) is None:
                return False
            table = self._names()
            changed = {digest}
            for n in names:
                old = table.get(n)
                if old is not None and old != digest:
                    changed.add(old)
                table[n] = digest
            if self._names() != table:
                write_json(self.root / "names.json", {"names": dict(sorted(table.items()))})
            for d in changed:
                rec = self.record(d)
                if rec is None:
                    continue
                rec["names"] = sorted(n for n, x in table.items() if x == d)
                if touch and d == digest:
                    rec["last_used"] = time.time()
                write_json(self._dir(d) / "image.json", rec)
        return True

    # -- removing -------------------------------------------------------------------------

    def remove(self, ref: str) -> None:
        """Remove an image (by name or digest) and its names; refused while in use."""
        img = self.find(ref)
        if img is None:
            known = [n for i in self.list() for n in i.names]
            raise ValidationError("image", "no such image in the store", ref, known[:20] or None)
        with self._locked():
            gone = self._evict(img.digest)
        if gone is None:
            raise ValidationError(
                "image", "in use by a running node: stop that run first, then remove it", ref
            )
        self._delete(gone)

    def _evict(self, digest: str) -> tuple[Path, int] | None:
        """Move an image out of place (the store lock held): its trash directory and the
        descriptor holding the trash lock, or None when the image is in use."""
        d = self._dir(digest)
        try:
            ifd = os.open(d / ".lock", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            ifd = -1
        try:
            if ifd >= 0:
                try:
                    fcntl.flock(ifd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return None
            gone = self._to_trash(d, f".trash-{digest[7:19]}-")
        finally:
            if ifd >= 0:
                os.close(ifd)
        table = self._names()
        kept = {n: x for n, x in table.items() if x != digest}
        if kept != table:
            write_json(self.root / "names.json", {"names": kept})
        return gone

    def _to_trash(self, path: Path, prefix: str) -> tuple[Path, int]:
        """Rename ``path`` to a trash directory whose lock is held (the descriptor
        returned), so that no one else deletes it meanwhile."""
        trash = self.root / (prefix + os.urandom(6).hex())
        lock = self.root / ".locks" / trash.name
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(path, trash)
        except BaseException:
            lock.unlink(missing_ok=True)
            os.close(fd)
            raise
        return trash, fd

    def _delete(self, gone: tuple[Path, int]) -> None:
        path, fd = gone
        try:
            remove_tree(path)
            (self.root / ".locks" / path.name).unlink(missing_ok=True)
        finally:
            os.close(fd)

    def prune(
        self, max_bytes: int | None = None, *, keep: Iterable[str] = ()
    ) -> builtins.list[Image]:
        """Remove images, least recently used first, until the store fits ``max_bytes``
        (default: its limit); images in use and those in ``keep`` (digests) stay. Also
        deletes what dead processes left (scratch directories, their locks). Returns the
        images removed."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        if not self.root.is_dir():
            return []
        keep = set(keep)
        removed: builtins.list[Image] = []
        gone: builtins.list[tuple[Path, int]] = []
        with self._locked():
            leftovers = self._leftovers()
            images = self.list()
            total = sum(i.size for i in images)
            for img in sorted(images, key=self._last_used):
                if total <= limit:
                    break
                if img.digest in keep:
                    continue
                out = self._evict(img.digest)
                if out is None:
                    logger.debug("image store: %s in use, kept", img.short)
                    continue
                gone.append(out)
                removed.append(img)
                total -= img.size
            self._sweep_locks()
        for g in [*gone, *leftovers]:
            self._delete(g)
        if total > limit:
            logger.warning(
                "image store %s: %.1f MiB, over its limit of %.1f MiB, with what is in use "
                "or was just resolved (FIDELNET_IMAGE_STORE_MB raises it)",
                self.root, total / MiB, limit / MiB,
            )  # fmt: skip
        for img in removed:
            logger.info("image store: removed %s (%s)", img.short, ", ".join(img.names) or "-")
        return removed

    def _last_used(self, img: Image) -> float:
        rec = self.record(img.digest) or {}
        return float(rec.get("last_used", 0))

    def _leftovers(self) -> builtins.list[tuple[Path, int]]:
        """Scratch directories whose owner is gone (their lock free), moved to trash of
        this process's (the store lock held)."""
        out = []
        for entry in sorted(self.root.iterdir()):
            if not _SCRATCH.match(entry.name) or not entry.is_dir():
                continue
            lock = self.root / ".locks" / entry.name
            try:
                with flocked(lock, fcntl.LOCK_EX | fcntl.LOCK_NB):
                    out.append(self._to_trash(entry, ".trash-left-"))
                    lock.unlink(missing_ok=True)
            except BlockingIOError:
                continue
        return out

    def _sweep_locks(self) -> None:
        """Remove the lock files of scratch directories and images that are gone (the
        store lock held; a lock someone holds stays)."""
        for lock in (self.root / ".locks").iterdir():
            unpacked = f"sha256-{lock.name}" if _HEX.match(lock.name) else lock.name
            if (_SCRATCH.match(lock.name) or _HEX.match(lock.name)) and not (
                self.root / unpacked
            ).exists():
                with (
                    contextlib.suppress(BlockingIOError),
                    flocked(lock, fcntl.LOCK_EX | fcntl.LOCK_NB),
                ):
                    lock.unlink(missing_ok=True)
