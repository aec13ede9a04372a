"""A measurement's scratch directory, owned by its run.

``fidelnet-pktgen``'s sender and receiver write their ready file and JSON documents
into a directory both sides see: under the temporary directory, which a VM guest
mounts from the host (:mod:`fidelnet.vm.image`). When the node belongs to an open
run, the directory is ``<tmp>/fidelnet-<run id>-<what>-<random>`` and is recorded
in the run's state (kind ``tmpdir``) before it exists, so a run killed in the middle
of a measurement leaves nothing that ``fidelnet clean`` does not remove. Without a
run (a fake node in a unit test) it is an ordinary temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["work_dir"]


@contextlib.contextmanager
def work_dir(node: object, what: str) -> Iterator[Path]:
    """A fresh directory for one measurement on ``node``, removed after it."""
    net = getattr(node, "net", None)
    run_id = getattr(net, "run_id", None)
    if net is None or not isinstance(run_id, str) or not getattr(net, "is_open", False):
        with tempfile.TemporaryDirectory(prefix=f"fidelnet-{what}-") as tmp:
            yield Path(tmp)
        return
    path = os.path.join(tempfile.gettempdir(), f"fidelnet-{run_id}-{what}-{secrets.token_hex(4)}")
    net.state_record("tmpdir", path=path)
    try:
        os.mkdir(path, 0o700)
    except OSError:
        net.state_gone("tmpdir", path=path)  # not ours: never removed as ours
        raise
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)
        net.state_gone("tmpdir", path=path)
