"""The files of an image layout or archive, and the compressions of archives and layers.

A layout is read where it is; a tar archive through :mod:`tarfile` with random access
(its members are found by name, in the order the manifest needs them). A compressed
archive (``docker save | gzip``) is first decompressed whole into a scratch file that is
already unlinked, so nothing is left behind whatever happens to the process.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import posixpath
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO, cast

from fidelnet.errors import ValidationError

__all__ = ["Container", "compression", "decompressing", "member_name", "open_container"]

_MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
}


def compression(head: bytes) -> str | None:
    """The compression of a stream from its first bytes (None: not compressed)."""
    for magic, name in _MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def decompressing(stream: IO[bytes], kind: str | None, what: str, label: str) -> IO[bytes]:
    """A reader of ``stream`` decompressed (``kind`` from :func:`compression`)."""
    if kind is None:
        return stream
    if kind == "gzip":
        return cast(IO[bytes], gzip.GzipFile(fileobj=stream, mode="rb"))
    if kind == "bzip2":
        return bz2.BZ2File(stream)
    if kind == "xz":
        return lzma.LZMAFile(stream)
    try:
        import zstandard  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ValidationError(
            what,
            f"{label} is zstd-compressed: zstd layers are not supported (install the "
            "Python module zstandard, or convert the image with `skopeo copy "
            "--dest-compress-format gzip`)",
        ) from None
    reader: IO[bytes] = zstandard.ZstdDecompressor().stream_reader(stream)
    return reader


class Container:
    """The files of a layout or an archive, by their path in it."""

    def __init__(self, where: str) -> None:
        self.where = where

    def has(self, name: str) -> bool:
        raise NotImplementedError

    def open(self, name: str) -> IO[bytes]:
        """Open a file; FileNotFoundError when there is none."""
        raise NotImplementedError

    def size(self, name: str) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Dir(Container):
    def __init__(self, root: Path) -> None:
        super().__init__(str(root))
        self.root = root

    def has(self, name: str) -> bool:
        return (self.root / name).is_file()

    def open(self, name: str) -> IO[bytes]:
        if not (self.root / name).is_file():
            raise FileNotFoundError(name)
        return open(self.root / name, "rb")

    def size(self, name: str) -> int:
        return (self.root / name).stat().st_size


def member_name(name: str) -> str:
    return posixpath.normpath("/" + name).lstrip("/")


class _Tar(Container):
    def __init__(self, fileobj: IO[bytes], where: str) -> None:
        super().__init__(where)
        self._file = fileobj
        self.tar = tarfile.open(fileobj=fileobj, mode="r:")  # noqa: SIM115 - closed by close()
        self.members = {member_name(m.name): m for m in self.tar.getmembers()}

    def has(self, name: str) -> bool:
        m = self.members.get(name)
        return m is not None and not m.isdir()

    def open(self, name: str) -> IO[bytes]:
        m = self.members.get(name)
        if m is None or m.isdir():
            raise FileNotFoundError(name)
        try:
            f = self.tar.extractfile(m)
        except KeyError:  # a link to a member that is not there
            raise FileNotFoundError(name) from None
        if f is None:
            raise FileNotFoundError(name)
        return f

    def size(self, name: str) -> int:
        with self.open(name) as f:
            return f.seek(0, os.SEEK_END)

    def close(self) -> None:
        self.tar.close()
        self._file.close()


def open_container(path: Path, kind: str | None, what: str, scratch: Path) -> tuple[Container, str]:
    """The container at ``path`` and its format (``kind`` when the reference named one)."""
    if path.is_dir():
        if kind not in (None, "oci"):
            raise ValidationError(what, f"{path} is a directory, not a {kind} file")
        if not (path / "oci-layout").is_file():
            raise ValidationError(
                what, f"{path} is a directory without an oci-layout file: not an OCI image layout"
            )
        return _Dir(path), "oci"
    if not path.exists():
        raise ValidationError(what, f"{path}: no such file or directory")
    if kind == "oci":
        raise ValidationError(what, f"{path} is not a directory (an OCI layout is one)")
    f: IO[bytes] = open(path, "rb")  # noqa: SIM115 - owned by the container
    try:
        packed = compression(f.read(8))
        f.seek(0)
        if packed is not None:  # decompressed whole, into a file that is already unlinked
            plain = tempfile.TemporaryFile(dir=scratch, prefix=".tmp-archive-")  # noqa: SIM115
            with contextlib.closing(f), decompressing(f, packed, what, str(path)) as src:
                shutil.copyfileobj(src, plain, 1 << 20)
            plain.seek(0)
            f = plain
        try:
            container = _Tar(f, str(path))
        except tarfile.TarError:
            raise ValidationError(
                what, f"{path} is neither an OCI layout directory nor a tar archive"
            ) from None
    except BaseException:
        f.close()
        raise
    if container.has("oci-layout") and kind in (None, "oci-archive"):
        return container, "oci-archive"
    if container.has("manifest.json") and kind in (None, "docker-archive"):
        return container, "docker-archive"
    container.close()
    wanted = {"oci-archive": "oci-layout", "docker-archive": "manifest.json"}
    need = wanted.get(kind or "", "oci-layout (an OCI archive) or manifest.json (docker save)")
    raise ValidationError(what, f"{path} is a tar archive without {need}: not an image")
