"""The argv handed to fidelnet-exec: options in order, user argv untouched."""

from __future__ import annotations

import pytest

from fidelnet.errors import NodeError
from fidelnet.kernel import launcher


@pytest.fixture(autouse=True)
def fake_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "_cached", "/opt/fidelnet-exec")


def test_shell_argv() -> None:
    argv = launcher.exec_argv(
        ["bash", "-is"],
        netns="/run/netns/x",
        new_mount=True,
        hostname="h1",
        cgroups=["/cg/a"],
        session=True,
        ctty=True,
    )
    assert argv == [
        "/opt/fidelnet-exec",
        "--setsid",
        "--ctty",
        "--cgroup",
        "/cg/a/cgroup.procs",
        "--net",
        "/run/netns/x",
        "--new-mount",
        "--hostname",
        "h1",
        "--",
        "bash",
        "-is",
    ]


def test_mount_base_follows_new_mount_only() -> None:
    argv = launcher.exec_argv(["sh"], netns="/x", new_mount=True, mount_base="/proc/9/fd/5")
    assert argv[3:6] == ["--new-mount", "--mount-base", "/proc/9/fd/5"]
    assert "--mount-base" not in launcher.exec_argv(["sh"], netns="/x", mount_base="/p")


def test_join_pid_wins_over_netns_and_user_argv_is_verbatim() -> None:
    argv = launcher.exec_argv(["echo", "$(reboot); --net"], netns="/x", join_pid=42)
    assert argv == ["/opt/fidelnet-exec", "--join-pid", "42", "--", "echo", "$(reboot); --net"]


def test_empty_command_is_refused() -> None:
    with pytest.raises(NodeError, match="empty command"):
        launcher.exec_argv([])
