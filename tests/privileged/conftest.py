"""Fixtures for privileged tests: each test must leave the machine as it found it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest


def host_links() -> set[str]:
    out = subprocess.run(
        ["ip", "-o", "link", "show"], capture_output=True, text=True, check=True
    ).stdout
    return {line.split(": ")[1].split("@")[0] for line in out.splitlines()}


def netns_names() -> set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


def state_files() -> set[str]:
    try:
        return set(os.listdir("/run/fidelnet"))
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def leaves_no_trace() -> Iterator[None]:
    """Fail a test that leaves namespaces, host interfaces or state files behind."""
    before = (netns_names(), host_links(), state_files())
    yield
    after = (netns_names(), host_links(), state_files())
    leaked = [sorted(a - b) for a, b in zip(after, before, strict=True)]
    assert leaked == [[], [], []], f"left behind (netns, host links, state files): {leaked}"
