"""File helpers of the store: sizes, removals, atomic JSON files, locks."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["disk_usage", "flocked", "read_json", "remove_tree", "write_json"]


def disk_usage(path: Path) -> int:
    """Bytes a tree takes on disk (blocks, hard links counted once), links not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(path)]
    while stack:
        top = stack.pop()
        st = os.lstat(top)
        total += st.st_blocks * 512
        with os.scandir(top) as it:
            for e in it:
                est = e.stat(follow_symlinks=False)
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                    continue
                key = (est.st_dev, est.st_ino)
                if est.st_nlink > 1:
                    if key in seen:
                        continue
                    seen.add(key)
                total += est.st_blocks * 512
    return total


def remove_tree(path: Path) -> None:
    """Remove a tree of the store (an image, a temporary unpack), links not followed;
    when not root, directories made read-only by an image are made writable first."""
    if not os.path.lexists(path):
        return
    if os.geteuid() != 0:
        stack = [str(path)]
        while stack:
            top = stack.pop()
            try:
                if not os.path.islink(top):
                    os.chmod(top, 0o700)
                    with os.scandir(top) as it:
                        stack.extend(e.path for e in it if e.is_dir(follow_symlinks=False))
            except OSError:
                continue
    shutil.rmtree(path)


def write_json(path: Path, doc: Any) -> None:
    """Write a JSON file atomically (a temporary file beside it, fsynced, renamed over
    it): a reader sees the old content or the new, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with open(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any:
    """A JSON file's content; None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def flocked(path: Path, how: int) -> Iterator[int]:
    """Hold ``flock(how)`` on ``path`` (made when missing) for the block; yields the
    descriptor. ``LOCK_NB`` in ``how`` raises BlockingIOError when it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, how)
        yield fd
    finally:
        os.close(fd)
