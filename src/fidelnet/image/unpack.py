"""Applying an image's layers to a root filesystem: safely, verified, faithfully.

Safety. A layer is an archive from whoever made the image, applied by root: no member
may create, change or remove anything outside the root filesystem. Every path is taken
relative to the root (a leading ``/`` is dropped), a ``..`` component is refused, and the
directories on a member's path are opened one at a time, each relative to the previous
one's descriptor, with ``O_NOFOLLOW | O_DIRECTORY``: a symbolic link met on the way (an
earlier layer's ``etc -> /host-etc``, then ``etc/passwd``) is refused, never followed. The
member itself is created with ``O_EXCL``/``mkdirat``/``symlinkat``/``linkat`` relative to
its parent's descriptor, after removing whatever was there, so nothing is ever written
through a link either. Containerd and Docker follow such links inside the root instead;
real layers never need it (they are diffs of real directories, where a path through a
symbolic link does not exist), so refusing is the simpler guarantee. A hard link's target
is resolved the same way, so it is inside the root.

Verification. Each layer is hashed as it is read: the blob as stored against its
descriptor's digest, the uncompressed tar against the config's ``diff_id``. A mismatch
fails the import; what was applied lies in a temporary directory the caller removes.

Faithfulness. Layers are applied in order, with the OCI whiteouts (``.wh.NAME`` removes
``NAME`` of the lower layers, ``.wh..wh..opq`` empties its directory of what lower layers
put there; neither appears in the result). Modes (setuid, setgid, sticky included),
numeric owners (when root: the names in ``/etc/passwd`` are the image's, not the host's),
modification times, symbolic links (absolute targets kept: they mean the container's
root), hard links, FIFOs and, when root, device nodes are kept. Directories' modes, owners
and times are set last, deepest first, so that neither a read-only directory nor the
writing of its entries spoils them.
"""

from __future__ import annotations

import errno
import hashlib
import io
import lzma
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from fidelnet.errors import KernelError, ValidationError
from fidelnet.image.archive import compression, decompressing
from fidelnet.image.formats import Layer
from fidelnet.log import logger

__all__ = ["MAX_DEPTH", "Rootfs", "unpack_layers"]

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
_META = ".wh..wh."
MAX_DEPTH = 256
"""The deepest path a member may have (real images stay under 40 levels); it bounds the
recursion of removals and the descriptors they hold."""

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


class _Hashing(io.RawIOBase):
    """A reader that hashes and counts what is read through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(len(b))
        n = len(data)
        b[:n] = data
        self.sha.update(data)
        self.count += n
        return n

    def drain(self) -> None:
        """Read (and hash) what is left: a tar reader stops at the archive's end
        marker, and the blob goes on (padding) until its digest is complete."""
        while self.read(_CHUNK):
            pass

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha.hexdigest()


def _drain(stream: IO[bytes]) -> None:
    while stream.read(_CHUNK):
        pass


@dataclass
class _Meta:
    mode: int
    uid: int
    gid: int
    mtime: float | None


class _RefusedError(Exception):
    """A member that may not be applied (turned into a ValidationError naming it)."""


def _split(name: str) -> tuple[str, ...]:
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise _RefusedError("a '..' component would leave the root")
    if len(parts) > MAX_DEPTH:
        raise _RefusedError(f"deeper than {MAX_DEPTH} directories")
    return parts


class Rootfs:
    """A root filesystem being made, held by a descriptor of its directory."""

    def __init__(self, path: Path, what: str) -> None:
        self.fd = os.open(path, _DIR)
        self.what = what
        self.root = os.geteuid() == 0
        self.dirs: dict[tuple[str, ...], _Meta] = {(): _Meta(0o755, 0, 0, None)}
        self._cached: tuple[tuple[str, ...], int] | None = None
        self.skipped: list[str] = []

    def close(self) -> None:
        self._uncache()
        os.close(self.fd)

    # -- walking ------------------------------------------------------------------------

    def _uncache(self) -> None:
        if self._cached is not None:
            os.close(self._cached[1])
            self._cached = None

    def _open_dir(self, parts: tuple[str, ...], *, create: bool) -> int | None:
        """A new descriptor of the directory at ``parts``, opened component by component
        without following links; missing ones made (``create``) or None."""
        fd = os.open(".", _DIR, dir_fd=self.fd)
        try:
            for i, comp in enumerate(parts):
                try:
                    nfd = os.open(comp, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(comp, 0o700, dir_fd=fd)
                    self.dirs.setdefault(parts[: i + 1], _Meta(0o755, 0, 0, None))
                    nfd = os.open(comp, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    st = os.stat(comp, dir_fd=fd, follow_symlinks=False)
                    where = "/".join(parts[: i + 1])
                    if stat.S_ISLNK(st.st_mode):
                        target = os.readlink(comp, dir_fd=fd)
                        raise _RefusedError(
                            f"its parent {where} is a symbolic link (to {target}): "
                            "refusing to write through it"
                        ) from None
                    raise _RefusedError(f"its parent {where} is not a directory") from None
                os.close(fd)
                fd = nfd
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _parent(self, parts: tuple[str, ...]) -> int:
        """The descriptor of a member's parent directory (kept for the next member)."""
        key = parts[:-1]
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        fd = self._open_dir(key, create=True)
        assert fd is not None
        self._uncache()
        self._cached = (key, fd)
        return fd

    def _remove(self, dfd: int, name: str, path: tuple[str, ...]) -> None:
        """Remove an entry (a directory with its contents) without following links."""
        if self._remove_tree(dfd, name, path):
            self._uncache()  # the directory kept for the next member may have been in it

    def _remove_tree(self, dfd: int, name: str, path: tuple[str, ...]) -> bool:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=dfd)
            return False
        for key in [k for k in self.dirs if k[: len(path)] == path]:
            del self.dirs[key]
        sub = os.open(name, _DIR, dir_fd=dfd)
        try:
            for entry in _entries(sub):
                self._remove_tree(sub, entry, (*path, entry))
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dfd)
        return True

    # -- applying -----------------------------------------------------------------------

    def apply(self, stream: IO[bytes], label: str) -> None:
        """Apply one layer's (uncompressed) tar stream."""
        written: set[tuple[str, ...]] = set()  # paths this layer made, with their parents
        with tarfile.open(
            fileobj=stream, mode="r|", encoding="utf-8", errors="surrogateescape"
        ) as tar:
            for m in tar:
                try:
                    self._member(tar, m, written)
                except _RefusedError as exc:
                    raise ValidationError(
                        self.what, f"{label}: member {m.name!r} refused: {exc}"
                    ) from None
                except ValueError as exc:  # an embedded NUL byte
                    raise ValidationError(
                        self.what, f"{label}: member {m.name!r} refused: {exc}"
                    ) from None

    def _member(
        self, tar: tarfile.TarFile, m: tarfile.TarInfo, written: set[tuple[str, ...]]
    ) -> None:
        parts = _split(m.name)
        base = parts[-1] if parts else ""
        if any(p.startswith(_META) for p in parts) and base != OPAQUE:
            return  # AUFS's own files (.wh..wh.plnk/...): neither content nor whiteouts
        if base.startswith(WHITEOUT):
            self._whiteout(parts, written)
            return
        for i in range(len(parts) + 1):
            written.add(parts[:i])
        if not parts:  # the root itself
            if m.isdir():
                self.dirs[()] = _Meta(m.mode, m.uid, m.gid, m.mtime)
            return
        pfd = self._parent(parts)
        name = parts[-1]
        if m.isdir():
            if not self._clear(pfd, name, parts, keep_dir=True):
                os.mkdir(name, 0o700, dir_fd=pfd)
            self.dirs[parts] = _Meta(m.mode, m.uid, m.gid, m.mtime)
            return
        if m.islnk():
            self._hardlink(pfd, name, parts, m.linkname)
            return
        if (m.ischr() or m.isblk()) and not self._may_mknod(m):
            return
        self._clear(pfd, name, parts, keep_dir=False)
        pfd = self._parent(parts)  # a directory removed may have dropped the cached one
        if m.isreg():
            self._file(pfd, name, m, tar)
        elif m.issym():
            os.symlink(m.linkname, name, dir_fd=pfd)
            self._own(pfd, name, m, symlink=True)
        elif m.isfifo():
            os.mkfifo(name, 0o600, dir_fd=pfd)
            self._own(pfd, name, m)
        elif m.ischr() or m.isblk():
            kind = stat.S_IFCHR if m.ischr() else stat.S_IFBLK
            try:
                os.mknod(name, kind | 0o600, os.makedev(m.devmajor, m.devminor), dir_fd=pfd)
            except PermissionError:  # root in a user namespace
                self.skipped.append("/".join(parts))
                logger.debug("image %s: device %s skipped (mknod not permitted)", self.what, m.name)
                return
            self._own(pfd, name, m)
        else:
            logger.debug("image %s: member %s of tar type %r skipped", self.what, m.name, m.type)

    def _may_mknod(self, m: tarfile.TarInfo) -> bool:
        if self.root:
            return True
        self.skipped.append(m.name)
        logger.debug("image %s: device %s skipped (not root)", self.what, m.name)
        return False

    def _clear(self, pfd: int, name: str, parts: tuple[str, ...], *, keep_dir: bool) -> bool:
        """Make room for a member; True when a directory is there and kept."""
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if keep_dir and stat.S_ISDIR(st.st_mode):
            return True
        self._remove(pfd, name, parts)
        return False

    def _file(self, pfd: int, name: str, m: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=pfd)
        try:
            src = tar.extractfile(m)
            if src is not None:
                with open(fd, "wb", closefd=False) as out:
                    shutil.copyfileobj(src, out, _CHUNK)
            if self.root:
                os.fchown(fd, m.uid, m.gid)
            os.fchmod(fd, m.mode & 0o7777)  # after chown, which clears setuid and setgid
            _set_time(fd, m.mtime)
        finally:
            os.close(fd)

    def _own(self, pfd: int, name: str, m: tarfile.TarInfo, *, symlink: bool = False) -> None:
        if self.root:
            os.chown(name, m.uid, m.gid, dir_fd=pfd, follow_symlinks=False)
        if not symlink:  # a node just made here, in a directory no one else writes
            os.chmod(name, m.mode & 0o7777, dir_fd=pfd)
        try:
            ns = _ns(m.mtime)
            os.utime(name, ns=(ns, ns), dir_fd=pfd, follow_symlinks=False)
        except (OverflowError, ValueError, OSError):
            pass

    def _hardlink(self, pfd: int, name: str, parts: tuple[str, ...], target: str) -> None:
        tparts = _split(target)
        if not tparts:
            raise _RefusedError("a hard link to the root directory")
        if tparts == parts:
            return  # a link to itself: what is there already is it
        if tparts[: len(parts)] == parts:
            raise _RefusedError(f"its hard link target {target!r} is inside it")
        tfd = self._open_dir(tparts[:-1], create=False)
        if tfd is None:
            raise _RefusedError(f"its hard link target {target!r} does not exist")
        try:
            try:
                st = os.stat(tparts[-1], dir_fd=tfd, follow_symlinks=False)
            except FileNotFoundError:
                raise _RefusedError(f"its hard link target {target!r} does not exist") from None
            if stat.S_ISDIR(st.st_mode):
                raise _RefusedError(f"its hard link target {target!r} is a directory")
            self._clear(pfd, name, parts, keep_dir=False)
            pfd = self._parent(parts)
            os.link(tparts[-1], name, src_dir_fd=tfd, dst_dir_fd=pfd, follow_symlinks=False)
        finally:
            os.close(tfd)

    def _whiteout(self, parts: tuple[str, ...], written: set[tuple[str, ...]]) -> None:
        parent, base = parts[:-1], parts[-1]
        dfd = self._open_dir(parent, create=False)
        if dfd is None:
            return  # nothing below to hide
        try:
            if base == OPAQUE:
                written.update(parent[:i] for i in range(len(parent) + 1))
                self._opaque(dfd, parent, written)
                return
            hidden = base[len(WHITEOUT) :]
            if hidden in ("", ".", ".."):
                raise _RefusedError("a whiteout of no name")
            if (*parent, hidden) not in written:  # it hides lower layers only
                self._remove(dfd, hidden, (*parent, hidden))
        finally:
            os.close(dfd)

    def _opaque(self, dfd: int, path: tuple[str, ...], written: set[tuple[str, ...]]) -> None:
        """Remove from a directory, recursively, what this layer did not write."""
        for entry in _entries(dfd):
            sub = (*path, entry)
            if sub not in written:
                self._remove(dfd, entry, sub)
            elif stat.S_ISDIR(os.stat(entry, dir_fd=dfd, follow_symlinks=False).st_mode):
                fd = os.open(entry, _DIR, dir_fd=dfd)
                try:
                    self._opaque(fd, sub, written)
                finally:
                    os.close(fd)

    def finish(self) -> None:
        """Set directories' modes, owners and times, deepest first."""
        self._uncache()
        for parts, meta in sorted(self.dirs.items(), key=lambda kv: -len(kv[0])):
            try:
                fd = self._open_dir(parts, create=False)
            except _RefusedError:
                continue
            if fd is None:
                continue
            try:
                if self.root:
                    os.fchown(fd, meta.uid, meta.gid)
                os.fchmod(fd, meta.mode & 0o7777)
                if meta.mtime is not None:
                    _set_time(fd, meta.mtime)
            finally:
                os.close(fd)


def _entries(dfd: int) -> list[str]:
    with os.scandir(dfd) as it:
        return [e.name for e in it]


def _ns(mtime: float) -> int:
    return int(mtime * 1_000_000_000) if isinstance(mtime, float) else int(mtime) * 1_000_000_000


def _set_time(fd: int, mtime: float) -> None:
    try:
        ns = _ns(mtime)
        os.utime(fd, ns=(ns, ns))
    except (OverflowError, ValueError, OSError):
        pass  # a time the filesystem cannot hold: keep the current one


def unpack_layers(rootfs: Path, layers: Sequence[Layer], what: str) -> list[str]:
    """Apply ``layers`` in order to the empty directory ``rootfs``, verifying each; the
    device nodes that could not be made (not root) are returned."""
    fs = Rootfs(rootfs, what)
    try:
        for layer in layers:
            _apply_one(fs, layer, what)
        fs.finish()
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise KernelError(f"{what}: no space left to unpack it in {rootfs.parent}") from exc
        raise KernelError(f"{what}: unpacking it in {rootfs.parent} failed: {exc}") from exc
    finally:
        fs.close()
    return fs.skipped


def _apply_one(fs: Rootfs, layer: Layer, what: str) -> None:
    try:
        raw = layer.open()
    except FileNotFoundError:
        raise ValidationError(what, f"{layer.label}: blob missing") from None
    with raw:
        stored = _Hashing(raw)
        buffered = io.BufferedReader(stored, _CHUNK)
        packed = compression(buffered.peek(8)[:8])
        if packed is None and layer.media_type.endswith("+zstd"):
            packed = "zstd"
        plain = _Hashing(decompressing(buffered, packed, what, layer.label))
        try:
            fs.apply(io.BufferedReader(plain, _CHUNK), layer.label)
            plain.drain()
        except (EOFError, tarfile.TarError, zlib.error, lzma.LZMAError) as exc:
            raise ValidationError(what, f"{layer.label}: not a readable archive: {exc}") from None
        except OSError as exc:
            if exc.errno is not None:  # the filesystem's, not the data's
                raise
            raise ValidationError(what, f"{layer.label}: not a readable archive: {exc}") from None
        stored.drain()
    if layer.digest is not None and stored.digest != layer.digest:
        raise ValidationError(
            what,
            f"{layer.label}: blob does not match its digest "
            f"(its content hashes to {stored.digest})",
        )
    if layer.size is not None and stored.count != layer.size:
        raise ValidationError(
            what, f"{layer.label}: blob is {stored.count} bytes, its descriptor says {layer.size}"
        )
    if layer.diff_id is not None and plain.digest != layer.diff_id:
        raise ValidationError(
            what,
            f"{layer.label}: its uncompressed content hashes to {plain.digest}, not the "
            f"config's diff_id {layer.diff_id}",
        )
