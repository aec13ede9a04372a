"""Wait-until: a command retried until it does what is expected or the deadline
passes, with the tries and the time it took."""

from __future__ import annotations

import re
import subprocess
from typing import Any

from fidelnet.retry import try_until
from fidelnet.scenario import loads
from fidelnet.scenario.model import CommandCheck, RunStep


class _Node:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls = 0

    def pexec(self, argv: list[str], timeout: float | None = None) -> tuple[str, str, int]:
        del argv, timeout
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if answer == "timeout":
            raise subprocess.TimeoutExpired("x", 1.0)
        assert isinstance(answer, tuple)
        return answer


class _Net:
    def __init__(self, node: _Node) -> None:
        self.node = node

    def __getitem__(self, name: str) -> _Node:
        return self.node


def _try(answers: list[Any], **kw: Any) -> tuple[Any, _Node]:
    node = _Node(answers)
    args: dict[str, Any] = {
        "expect_exit": 0, "output": None, "timeout_s": 1.0, "wait_s": None, "interval_s": 0.01,
    }  # fmt: skip
    args.update(kw)
    return try_until(_Net(node), "r1", ["ip", "route"], **args), node  # type: ignore[arg-type]


def test_one_try_without_a_wait() -> None:
    got, node = _try([("", "", 1), ("", "", 0)])
    assert not got.ok and got.rc == 1 and got.tries == 1 and node.calls == 1
    assert got.summary() == ""


def test_retried_until_the_output_matches() -> None:
    route = re.compile(r"10\.2\.0\.0/24")
    answers = [("", "", 0), ("", "", 0), ("10.2.0.0/24 via 10.1.12.2\n", "", 0)]
    got, node = _try(answers, output=route, wait_s=5.0)
    assert got.ok and got.tries == 3 and node.calls == 3
    assert got.summary().startswith("after ") and got.summary().endswith("(3 tries)")


def test_gives_up_at_the_deadline_and_a_hung_try_has_no_exit_code() -> None:
    got, node = _try(["timeout"], wait_s=0.05, interval_s=0.01)
    assert not got.ok and got.rc is None and 2 <= got.tries <= 7
    assert got.seconds < 1.0


def test_wait_and_output_in_scenario_files() -> None:
    sc = loads(
        """
name: w
topology: {nodes: {r1: {kind: router}, h1: {}}, links: [{a: h1, b: r1}]}
setup:
  - {node: r1, run: [ip, route, show], output: "10\\\\.2\\\\.", wait: 30s, interval: 1s}
checks:
  - {type: command, node: r1, run: [birdc, show, ospf, neighbors], output: Full, wait: 20s}
""",
        "w.yaml",
    )
    step, check = sc.setup[0], sc.checks[0]
    assert isinstance(step, RunStep) and isinstance(check, CommandCheck)
    assert step.wait_s == 30.0 and step.interval_s == 1.0 and step.output == "10\\.2\\."
    assert check.wait_s == 20.0 and check.interval_s == 0.5
